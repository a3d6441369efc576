"""Every notebook executes under papermill at small parameters, the .py/.ipynb twins agree, and bad
parameters fail with a message that says what is wrong."""

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path

import jupytext
import pandas as pd
import pytest
import torch

from workbench import notebook_parameters, notebooks
from workbench.notebook_parameters import parameters_of
from workbench.notebooks import NOTEBOOKS, NotebookError, check_pairs, execute
from workbench.results import read_results
from workbench.runs import provenance

OFFICIAL = Path(
    os.environ.get("WORKBENCH_OFFICIAL_DATA")
    or Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "official_bittokens"
)

# Seconds per notebook, not minutes: tiny budgets, few samples, HTML figures into a temporary folder.
SMALL = {
    "01_desiderata": {"n_values": 300, "d9_steps": 5},
    "02_fone_locality": {"n_pairs": 200, "grid_digits": 2, "probe_steps": 30},
    "03_training": {"tasks": "addition,minmax", "tokens": 2e4, "eval_every": 5, "val_samples": 8, "test_samples": 16},
    "04_paper_figures": {
        "official_data": None,
        "exponent_samples": 2000,
        "generator_samples": 200,
        "bootstrap_draws": 20,
    },
    "05_retrofit": {
        "pretrain_tokens": 4e3,
        "layers": 1,
        "heads": 2,
        "context": 64,
        "vocab_size": 400,
        "tokens": 2000,
        "batch_tokens": 500,
        "pool_size": 200,
        "val_samples": 4,
        "eval_every": 5,
        "test_samples": 6,
        "text_samples": 2,
        "bootstrap_draws": 50,
    },
}


def small(name, tmp_path, **extra):
    """SMALL[name] plus temporary output folders for the parameters the notebook has."""
    known = parameters_of(jupytext.read(notebooks.NOTEBOOK_DIR / f"{name}.py"))
    params = dict(SMALL[name], **extra)
    for key, value in (
        ("figures_dir", str(tmp_path / "figures")),
        ("figure_formats", ["html"]),
        ("out_dir", str(tmp_path / "run")),
    ):
        if key in known:
            params.setdefault(key, value)
    return params


def outputs(path: Path) -> str:
    return json.dumps([c.get("outputs", []) for c in json.loads(path.read_text())["cells"]])


def test_twins_agree():
    assert check_pairs() == sorted(NOTEBOOKS)


def test_check_pairs_finds_an_edited_twin(tmp_path):
    source = notebooks.NOTEBOOK_DIR / "04_paper_figures.py"
    (tmp_path / source.name).write_text(source.read_text())
    nb = jupytext.read(source)
    nb.cells[-1].source += "\nprint('edited')"
    jupytext.write(nb, tmp_path / "04_paper_figures.ipynb")
    with pytest.raises(ValueError, match="04_paper_figures: .py and .ipynb differ"):
        check_pairs(tmp_path)
    (tmp_path / "lonely.py").write_text("# %%\n1\n")
    with pytest.raises(ValueError, match="lonely: missing .ipynb"):
        check_pairs(tmp_path)


# The notebooks whose run at small parameters is their values test's run (tests/test_notebook_values.py):
# one execution there checks both that the notebook runs clean (`ran_clean`) and what it computes.
RUN_BY_VALUES_TEST = {"01_desiderata", "03_training", "04_paper_figures"}


def ran_clean(name: str, path: Path, tmp_path: Path) -> None:
    """The executed notebook holds no error output and wrote its figures; 03's results and figures
    say what they must."""
    assert path.exists()
    executed = json.loads(path.read_text())
    errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    if "figures_dir" in small(name, tmp_path):
        assert any((tmp_path / "figures").glob(f"{name[:2]}_*.html"))
    if name == "03_training":  # the results table feeds Figure 4 of notebook 04
        results = read_results(tmp_path / "run" / "results.csv")
        assert set(results["task"]) == {"addition", "minmax"}
        assert set(results["metric"]) == {"log_smape", "exact_match", "accuracy"}
        # its numbers hold on the kernels they were made on: both figures name them
        made_on = provenance.kernels(torch.device("cpu"))
        for figure in ("03_training_curves", "03_test_by_difficulty"):
            page = (tmp_path / "figures" / f"{figure}.html").read_text().replace("\\u002f", "/")  # plotly's JSON escape
            assert f"{made_on} kernels" in page, figure


def test_every_notebook_runs_at_small_parameters_somewhere():
    import test_notebook_values

    assert RUN_BY_VALUES_TEST <= set(NOTEBOOKS)
    for name in RUN_BY_VALUES_TEST:  # each one's values test calls ran_clean for it
        assert any(
            f'ran_clean("{name}"' in line for line in Path(test_notebook_values.__file__).read_text().splitlines()
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NOTEBOOKS if n not in RUN_BY_VALUES_TEST])
def test_notebook_runs_at_small_parameters(name, tmp_path):
    path = execute(name, small(name, tmp_path), output_dir=tmp_path)
    ran_clean(name, path, tmp_path)
    if name == "05_retrofit":  # one row per encoding: scores with intervals, perplexity before and after
        table = pd.read_csv(tmp_path / "run" / "results.csv")
        assert list(table["encoding"]) == ["none", "bittokens", "fone", "xval"]
        assert {"multiplication score [95 % CI]", "addition score [95 % CI]", "ppl change %"} <= set(table)


@pytest.mark.slow
@pytest.mark.skipif(not (OFFICIAL / "combined_samples_long.csv").exists(), reason="released data not available")
def test_paper_figures_notebook_with_released_data_and_results(tmp_path):
    results = tmp_path / "results.csv"
    results.write_text(
        "encoding,task,metric,value,seed\nbittokens,addition,log_smape,0.5,0\nxval,addition,log_smape,0.1,0\n"
    )
    path = execute(
        "04_paper_figures",
        small("04_paper_figures", tmp_path, official_data=str(OFFICIAL), results_csv=str(results)),
        output_dir=tmp_path,
    )
    written = {p.stem for p in (tmp_path / "figures").glob("*.html")}
    assert {
        "04_fig2_radar",
        "04_fig3_tokens",
        "04_fig4_methods",
        "04_fig5_addition_exponents",
        "04_fig6_multiplication_exponents",
        "04_fig7_difficulty",
        "04_fig8_stability",
        "04_frontier_by_difficulty",
    } <= written
    assert "largest |per-sample mean - Table 1|" in outputs(path)


def test_unknown_parameter_is_refused_before_running(tmp_path):
    with pytest.raises(ValueError, match=r"notebook 03_training: unknown parameter 'budget'"):
        execute("03_training", {"budget": 10}, output_dir=tmp_path)
    with pytest.raises(ValueError, match="no notebook"):
        execute("99_missing", output_dir=tmp_path)


# what the runner cannot check before the kernel (an unknown encoding, a negative budget, a missing
# folder are refused before it: tests/test_notebook_parameters.py)
@pytest.mark.slow
@pytest.mark.parametrize(
    "name, params, message",
    [
        ("04_paper_figures", {"fig4_part": "precision"}, r"fig4_part must be a multi-task part .* got 'precision'"),
    ],
)
def test_wrong_parameter_fails_with_a_clear_message(name, params, message, tmp_path):
    with pytest.raises(NotebookError, match=message) as error:
        execute(name, small(name, tmp_path, **params), output_dir=tmp_path)
    assert name in str(error.value) and "ValueError" in str(error.value)


def test_cli_parses_parameters():
    assert notebook_parameters.parse_parameter("tokens=1e5") == ("tokens", 1e5)
    assert notebook_parameters.parse_parameter("tasks=addition,minmax") == ("tasks", "addition,minmax")
    assert notebook_parameters.parse_parameter("decades=None") == ("decades", None)
    with pytest.raises(ValueError, match="key=value"):
        notebook_parameters.parse_parameter("tokens")


# -- runs never write into tracked files --------------------------------------------------------
def tracked_notebooks() -> list[Path]:
    """The .ipynb files git tracks (every notebooks/*.ipynb outside a git checkout)."""
    root = notebooks.ROOT
    try:
        listed = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=root, capture_output=True, text=True, check=True)
        return [root / line for line in listed.stdout.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        return sorted(notebooks.NOTEBOOK_DIR.glob("*.ipynb"))


def test_tracked_notebooks_hold_no_outputs():
    paths = tracked_notebooks()
    assert {p.stem for p in paths} >= set(NOTEBOOKS)
    for path in paths:
        nb = json.loads(path.read_text())
        dirty = [i for i, c in enumerate(nb["cells"]) if c.get("outputs") or c.get("execution_count") is not None]
        assert not dirty, f"{path.name}: cells {dirty} hold outputs; clear them (the lab's pre-save hook does)"
        assert not set(nb["metadata"]) & set(notebooks.SESSION_METADATA), f"{path.name}: session metadata"
        assert nb["metadata"]["language_info"] == notebooks.LANGUAGE_INFO, f"{path.name}: language_info"


def test_the_tracked_notebooks_carry_what_the_kernel_reports():
    """Bug: every notebook showed as modified right after opening in the lab. JupyterLab writes the
    kernel's language_info into the notebook as the kernel starts (a change, so the notebook is
    dirty, unless the notebook holds it already, deep-equal). The oracle: a python3 kernel's own
    kernel_info reply (the patch release of Python may differ on another machine)."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    try:
        reported = client.kernel_info(reply=True, timeout=120)["content"]["language_info"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    ours = dict(notebooks.LANGUAGE_INFO)
    assert ours.pop("version").rsplit(".", 1)[0] == reported.pop("version").rsplit(".", 1)[0]
    assert ours == reported


def test_the_lab_lists_each_notebook_once():
    """Bug: the file browser showed every notebook twice (.py and .ipynb). The install step's
    hide_globs hide the .py twins of notebooks/ and nothing else of ours."""
    makefile = (notebooks.ROOT / "Makefile").read_text()
    globs = json.loads(re.search(r"'(\[[^']*\])' > \$\(SERVER_CONFIG\)", makefile)[1])
    manager = _lab_contents_manager(notebooks.ROOT)
    manager.hide_globs = globs

    def listed(path):
        return sorted(c["name"] for c in asyncio.run(manager.get(path, content=True))["content"])

    assert listed("notebooks") == [f"{name}.ipynb" for name in NOTEBOOKS]
    assert "notebooks.py" in listed("workbench") and "plots.py" in listed("workbench/figures")
    assert "__pycache__" not in listed("workbench")


def _lab_contents_manager(root: Path):
    """The contents manager JupyterLab runs here: jupytext's, over Jupyter's, with our pre-save hook."""
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
    from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

    manager = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)(root_dir=str(root))
    manager.pre_save_hook = notebooks.pre_save_hook  # what the Makefile's server config sets
    return manager


def _save_as_the_lab_does(manager, path: str) -> None:
    """Open the notebook, let a kernel session run every cell and save (PUT) it back."""

    async def run():
        model = await manager.get(path, content=True, type="notebook")
        nb = model["content"]
        nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.7"}
        nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
                cell["execution_count"] = 1
                cell["metadata"]["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
        await manager.save({"type": "notebook", "format": "json", "content": nb}, path)

    asyncio.run(run())


def test_saving_in_the_lab_leaves_the_tracked_pair_unchanged(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    monkeypatch.setattr(notebooks, "NOTEBOOK_DIR", tmp_path / "notebooks")
    before = {}
    for suffix in (".py", ".ipynb"):
        before[suffix] = (notebooks.ROOT / "notebooks" / f"02_fone_locality{suffix}").read_text()
        (tmp_path / "notebooks" / f"02_fone_locality{suffix}").write_text(before[suffix])
    (tmp_path / "elsewhere.ipynb").write_text(before[".ipynb"])
    manager = _lab_contents_manager(tmp_path)
    _save_as_the_lab_does(manager, "notebooks/02_fone_locality.ipynb")
    for suffix in (".py", ".ipynb"):
        assert (tmp_path / "notebooks" / f"02_fone_locality{suffix}").read_text() == before[suffix]
    _save_as_the_lab_does(manager, "elsewhere.ipynb")  # not one of ours: saved as the user left it
    assert '"output_type": "stream"' in (tmp_path / "elsewhere.ipynb").read_text()


def test_the_install_step_sets_the_hook_where_the_lab_reads_it():
    makefile = (notebooks.ROOT / "Makefile").read_text()
    assert "etc/jupyter/jupyter_server_config.json" in makefile
    assert '"pre_save_hook": "workbench.notebooks.pre_save_hook"' in makefile


def test_only_the_default_run_writes_figures(tmp_path):
    executed, run_dir, params = notebooks.plan(NOTEBOOKS, {})
    assert run_dir is None and executed == notebooks.OUTPUT_DIR
    assert all(p["figures_dir"] == str(notebooks.FIGURES) for p in params.values())
    assert "out_dir" not in params["03_training"]  # the notebook's own default under runs/
    for names, given, out in (
        (["03_training"], {"tokens": 2e4}, None),
        (["02_fone_locality"], {}, None),
        (NOTEBOOKS, {}, str(tmp_path / "mine")),
    ):
        executed, run_dir, params = notebooks.plan(names, given, out, now=0)
        assert run_dir is not None and executed == run_dir and set(params) == set(names)
        for _name, p in params.items():
            assert p["figures_dir"] == str(run_dir / "figures") and p.get("tokens") == given.get("tokens")
            assert not Path(p["figures_dir"]).resolve().is_relative_to(notebooks.FIGURES)
        if out is None:
            assert run_dir.parent == notebooks.OUTPUT_DIR and run_dir.name.endswith("-" + "+".join(names))
    _, _, params = notebooks.plan(["03_training"], {"figures_dir": "elsewhere", "out_dir": "x"})
    assert params["03_training"]["figures_dir"] == "elsewhere" and params["03_training"]["out_dir"] == "x"


def test_a_parameterized_run_prints_its_run_directory(monkeypatch, tmp_path, capsys):
    seen = []
    monkeypatch.setattr(
        notebooks.papermill, "execute_notebook", lambda nb, path, parameters, **kw: seen.append((path, parameters))
    )
    notebooks.main(["run", "--only", "02_fone_locality", "-p", "n_pairs=10", "--output-dir", str(tmp_path / "r")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == lines[-1] == f"run directory: {tmp_path / 'r'}"
    ((path, parameters),) = seen
    assert path == str(tmp_path / "r" / "02_fone_locality.ipynb")
    assert parameters == {"n_pairs": 10, "figures_dir": str(tmp_path / "r" / "figures")}


def test_help_and_params_list_every_parameter(capsys):
    with pytest.raises(SystemExit):
        notebooks.main(["run", "--help"])
    text = capsys.readouterr().out
    flat = " ".join(text.split())
    for option in ("--only", "--parameter", "--output-dir"):
        assert option in text
    assert "default: all" in flat and "01_desiderata, 02_fone_locality, 03_training, 04_paper_figures" in flat
    assert "default: runs/notebooks/<date>-<time>-<notebooks>/" in flat
    for name in NOTEBOOKS:
        for key, default, kind, meaning in notebooks.describe_parameters(name):
            assert meaning, f"{name}: say what {key} means in a comment beside it"
            assert f"{key} = {default}" in text and f"({kind})" in text
    notebooks.main(["params", "03_training"])
    listed = capsys.readouterr().out
    assert listed.startswith("03_training:") and "tokens = 1e6" in listed and "(float)" in listed
    with pytest.raises(SystemExit):
        notebooks.main(["params", "99_nothing"])


@pytest.mark.slow
def test_training_notebook_runs_an_ablation_from_its_options(tmp_path):
    """Every ablation of Tables 8-15 is one entry of `options` (any TrainConfig field)."""
    options = {"curriculum": False, "optim": {"optimizer": "adamw"}, "encoding_options": {"combine": "zero_pad"}}
    execute("03_training", small("03_training", tmp_path, options=options), output_dir=tmp_path)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["curriculum"] is False and config["optim"]["optimizer"] == "adamw"
    assert config["encoding_options"] == {"combine": "zero_pad"}
