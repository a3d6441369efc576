"""Every notebook executes under papermill at small parameters, the .py/.ipynb twins agree, and bad
parameters fail with a message that says what is wrong."""
import json
import os
from pathlib import Path

import jupytext
import pytest

from workbench import notebooks
from workbench.notebooks import NOTEBOOKS, NotebookError, check_pairs, execute, parameters_of
from workbench.paper_figures import read_results

OFFICIAL = Path(os.environ.get("WORKBENCH_OFFICIAL_DATA") or
                Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "official_bittokens")

# Seconds per notebook, not minutes: tiny budgets, few samples, HTML figures into a temporary folder.
SMALL = {
    "01_desiderata": {},
    "02_fone_locality": {},
    "03_training": {"tasks": "addition,minmax", "tokens": 2e4, "eval_every": 5, "val_samples": 8,
                    "test_samples": 16},
    "04_paper_figures": {"generator_samples": 200, "bootstrap_draws": 20},
}


def small(name, tmp_path, **extra):
    """SMALL[name] plus temporary output folders for the parameters the notebook has."""
    known = parameters_of(jupytext.read(notebooks.NOTEBOOK_DIR / f"{name}.py"))
    params = dict(SMALL[name], **extra)
    for key, value in (("figures_dir", str(tmp_path / "figures")), ("figure_formats", ["html"]),
                       ("out_dir", str(tmp_path / "run"))):
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


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_at_small_parameters(name, tmp_path):
    path = execute(name, small(name, tmp_path), output_dir=tmp_path)
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


@pytest.mark.slow
@pytest.mark.skipif(not (OFFICIAL / "combined_samples_long.csv").exists(), reason="released data not available")
def test_paper_figures_notebook_with_released_data_and_results(tmp_path):
    results = tmp_path / "results.csv"
    results.write_text("encoding,task,metric,value,seed\nbittokens,addition,log_smape,0.5,0\n"
                       "xval,addition,log_smape,0.1,0\n")
    path = execute("04_paper_figures", small("04_paper_figures", tmp_path, official_data=str(OFFICIAL),
                                             results_csv=str(results)), output_dir=tmp_path)
    written = {p.stem for p in (tmp_path / "figures").glob("*.html")}
    assert {"04_fig2_radar", "04_fig3_tokens", "04_fig4_methods", "04_fig5_addition_exponents",
            "04_fig6_multiplication_exponents", "04_fig7_difficulty", "04_fig8_stability",
            "04_frontier_by_difficulty"} <= written
    assert "largest |per-sample mean - Table 1|" in outputs(path)


def test_unknown_parameter_is_refused_before_running(tmp_path):
    with pytest.raises(ValueError, match=r"no parameter\(s\) \['budget'\]"):
        execute("03_training", {"budget": 10}, output_dir=tmp_path)
    with pytest.raises(ValueError, match="no notebook"):
        execute("99_missing", output_dir=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name, params, message", [
    ("03_training", {"encoding": "base64"}, "unknown encoding 'base64'"),
    ("03_training", {"tokens": -5.0}, "--tokens must be a finite number"),
    ("04_paper_figures", {"official_data": "/nonexistent/folder"}, "is not a directory"),
])
def test_wrong_parameter_fails_with_a_clear_message(name, params, message, tmp_path):
    with pytest.raises(NotebookError, match=message) as error:
        execute(name, small(name, tmp_path, **params), output_dir=tmp_path)
    assert name in str(error.value) and "ValueError" in str(error.value)


def test_cli_parses_parameters():
    assert notebooks._parse_parameter("tokens=1e5") == ("tokens", 1e5)
    assert notebooks._parse_parameter("tasks=addition,minmax") == ("tasks", "addition,minmax")
    assert notebooks._parse_parameter("decades=None") == ("decades", None)
    with pytest.raises(ValueError, match="key=value"):
        notebooks._parse_parameter("tokens")
