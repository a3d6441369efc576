"""Every `python -m workbench.X` command reads the same: argparse with the prog a user types, and the
house's short errors (`cli.Parser`): one line naming what was wrong, no usage dump."""
import subprocess
import sys
from pathlib import Path

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
