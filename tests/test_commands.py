"""Every `python -m workbench.X` command reads the same: argparse with the prog a user types, and the
house's short errors (`cli.Parser`): one line naming what was wrong, no usage dump."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_tokenizer_refuses_an_unknown_encoding_as_the_other_commands_do():
    done = _run("-m", "workbench.tokenizer", "foo", "x=1")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "usage:" not in done.stderr, done.stderr
    assert lines[0].startswith("python -m workbench.tokenizer: error: argument encoding: unknown value 'foo'")
    assert lines[1:] == ["(`python -m workbench.tokenizer --help` lists every option)"]


def test_the_tokenizer_refuses_a_bad_option_in_one_line():
    done = _run("-m", "workbench.tokenizer", "bittokens", "x=1", "--encoding-option", "combine=nonsense")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("python -m workbench.tokenizer: error: combine must be one of") and "'nonsense'" in line


# -- start-up: a command's flags need neither torch nor transformers -------------------------------
COMMANDS = [
    "workbench.train",
    "workbench.retrofit",
    "workbench.tokenizer",
    "workbench.notebooks",
    "workbench.experiments",
    "workbench.retrofit.experiment",
]
PROBE = """
import runpy, sys
sys.argv = ["-m", *sys.argv[2:]]
try:
    runpy.run_module(sys.argv_module, run_name="__main__", alter_sys=True)
except SystemExit as stop:
    print("exit", stop.code, file=sys.stderr)
print(sorted(m for m in ("torch", "transformers", "einops", "peft", "jupytext", "papermill") if m in sys.modules),
      file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--help"], ["--tokenz", "1"]], ids=["help", "typo"])
@pytest.mark.parametrize("module", COMMANDS)
def test_help_and_a_typo_are_answered_without_importing_torch(module, args):
    """Bug: --help or a typo took 17-25 s on a busy machine (torch, einops, torch._dynamo imported
    before the flags were parsed). What keeps it fast (benchmarks/help_time.py times it): the
    command parses its flags before any import of torch (or transformers, peft, and for the
    notebooks' runner jupytext and papermill); a top-level import re-added fails here."""
    probe = PROBE.replace("sys.argv_module", repr(module))
    done = _run("-c", probe, module, *args)
    *_, status, loaded = done.stderr.strip().splitlines()
    assert status == f"exit {0 if args == ['--help'] else 2}", done.stderr
    assert loaded == "[]", f"{module} {' '.join(args)} imported {loaded}"
    if args == ["--help"]:
        assert done.stdout.startswith(f"usage: python -m {module}"), done.stdout[:200]


SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
SCRIPT_PROBE = """
import importlib, sys
module, function = sys.argv[1].split(":")
sys.argv = [sys.argv[2], *sys.argv[3:]]
try:
    getattr(importlib.import_module(module), function)()
except SystemExit as stop:
    print("exit", stop.code, file=sys.stderr)
print(sorted(m for m in ("torch", "transformers", "einops", "peft", "jupytext", "papermill") if m in sys.modules),
      file=sys.stderr)
"""


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_installed_scripts_answer_help_without_importing_torch(script):
    """Bug: `workbench-train --help` took 2 s on an idle machine, 4x `python -m workbench.train
    --help`: its entry point imported workbench.train (torch) before parsing. Every console script
    of pyproject.toml is called as its wrapper calls it, entry point and all."""
    done = _run("-c", SCRIPT_PROBE, SCRIPTS[script], script, "--help")
    *_, status, loaded = done.stderr.strip().splitlines()
    assert status == "exit 0", done.stderr
    assert loaded == "[]", f"{script} --help imported {loaded}"
    assert done.stdout.startswith("usage:"), done.stdout[:200]


def test_the_encodings_listed_without_torch_are_the_registry():
    """encoders.catalog reads the encodings' names, options and attributes from their source
    (for --help, before torch): the oracle is the registry the imported modules fill."""
    from workbench import encoders

    source = encoders._catalog_from_source()
    encoders._load()
    assert [name for name, _, _ in source] == encoders.names()
    for name, options, attributes in source:
        assert options == encoders.options(name), name
        assert attributes == {a: getattr(encoders.get(name), a) for a in encoders.ATTRIBUTES}, name


def test_help_groups_are_titled_by_their_docstrings_as_written():
    """Bug: the group titles were lowercased after the group's name, "model: the gpt (appendix
    c.1) and its vocabulary.:". Now the name is the title and the docstring's first line, as
    written, stands under it."""
    from workbench.config import CONFIGS, TrainConfig
    from workbench.config import parser as train_parser
    from workbench.retrofit.config import RetrofitConfig
    from workbench.retrofit.config import parser as retrofit_parser

    for flags, config in ((train_parser(CONFIGS["cpu"]), TrainConfig), (retrofit_parser(), RetrofitConfig)):
        text = flags.format_help()
        assert ".:" not in text and "appendix c." not in text
        for name, kind in config.GROUPS.items():
            first = kind.__doc__.strip().splitlines()[0]
            assert f"\n{name}:\n  {' '.join(first.split()[:3])}" in text, (name, text)
    assert "\nmodel:\n  The GPT (appendix C.1) and its vocabulary.\n" in train_parser(CONFIGS["cpu"]).format_help()
