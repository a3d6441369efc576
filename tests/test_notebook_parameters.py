"""Notebook parameters are checked against the parameters cell before anything runs: a bad value
is a ValueError naming the parameter and the type it takes, and papermill is never started."""

import subprocess
import sys

import jupytext
import papermill
import pytest

from workbench import notebook_parameters, notebooks
from workbench.notebook_parameters import parameter_types
from workbench.notebooks import NOTEBOOKS, execute


@pytest.fixture
def ran(monkeypatch):
    """Replaces papermill: records what would have run instead of running it."""
    calls = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda nb, path, parameters, **kw: calls.append(parameters))
    return calls


@pytest.mark.parametrize(
    "params, message",
    [
        ({"tokens": "abc"}, r"parameter tokens takes float, got 'abc' \(str\)"),
        ({"tokens": ""}, r"parameter tokens takes float, got '' \(str\)"),
        ({"tokens": True}, r"parameter tokens takes float, got True \(bool\)"),
        ({"tokens": float("nan")}, "parameter tokens is a non-finite float"),
        ({"decades": 5}, r"parameter decades takes list\[int\] \| None, got 5 \(int\)"),
        ({"decades": [0.5, 3]}, r"parameter decades takes list\[int\] \| None"),
        (
            {"figure_formats": "png"},
            r"parameter figure_formats takes list\[str\], got 'png' \(str\); "
            r"write a list, e.g. figure_formats=\['png'\]",
        ),
        ({"max_digits": 4.0}, r"parameter max_digits takes int \| None, got 4.0 \(float\)"),
        ({"curriculum": 1}, r"parameter curriculum takes bool, got 1 \(int\)"),
        ({"out_dir": 3}, r"parameter out_dir takes str \| None"),
        ({"encoding": None}, r"parameter encoding takes str, got None"),
    ],
)
def test_bad_training_parameters_are_refused_before_running(ran, tmp_path, params, message):
    with pytest.raises(ValueError, match=message):
        execute("03_training", params, output_dir=tmp_path)
    assert ran == []


@pytest.mark.parametrize(
    "params",
    [
        {"tokens": 20000},  # an int where the default is a float
        {"tokens": 2e4, "decades": None, "max_digits": None, "out_dir": "runs/x"},
        {"decades": [1, 1], "figure_formats": ["html"], "curriculum": False, "figures_dir": None},
    ],
)
def test_good_training_parameters_reach_papermill(ran, tmp_path, params):
    execute("03_training", params, output_dir=tmp_path)
    assert ran == [params]


def test_other_notebooks_check_their_parameters(ran, tmp_path):
    for name, params, message in [
        ("01_desiderata", {"d9_steps": "10"}, r"d9_steps takes int \| None"),
        ("01_desiderata", {"full": "yes"}, "full takes bool"),
        ("02_fone_locality", {"n_pairs": 1e3}, r"n_pairs takes int, got 1000.0"),
        ("04_paper_figures", {"results_csv": ["a.csv"]}, r"results_csv takes str \| None"),
        ("04_paper_figures", {"figure_formats": ["png", 2]}, r"figure_formats takes list\[str\]"),
    ]:
        with pytest.raises(ValueError, match=message):
            execute(name, params, output_dir=tmp_path)
    execute("04_paper_figures", {"official_data": None, "results_csv": None}, output_dir=tmp_path)
    assert ran == [{"official_data": None, "results_csv": None}]


def test_every_parameter_of_our_notebooks_has_a_type():
    for name in NOTEBOOKS:
        types = parameter_types(jupytext.read(notebooks.NOTEBOOK_DIR / f"{name}.py"))
        assert None not in types.values(), f"{name}: annotate {[k for k, v in types.items() if v is None]}"
    training = parameter_types(jupytext.read(notebooks.NOTEBOOK_DIR / "03_training.py"))
    assert training["tokens"] == "float" and training["decades"] == "list[int] | None"


def test_command_line_values_are_checked_before_running(ran, capsys):
    """...and refused in one line, without a traceback."""
    for argument, message in [
        ("figure_formats=png", "figure_formats takes list"),
        ("tokens=abc", "tokens takes float"),
        ("tokens=", "tokens takes float"),
        ("decades=5", "decades takes list"),
        ("tokenz=5", "did you mean 'tokens'"),
    ]:
        with pytest.raises(SystemExit):
            notebooks.main(["run", "--only", "03_training", "-p", argument])
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    assert ran == []


def test_a_notebook_without_annotations_is_checked_by_its_defaults(ran, tmp_path):
    (tmp_path / "plain.py").write_text(
        '# %% tags=["parameters"]\nsteps = 10\nrate = 0.5\n'
        'names = ["a"]\nanything = None\nwhere: Path = Path(".")\n'
        "\n# %%\nprint(steps)\n"
    )
    with pytest.raises(ValueError, match="parameter steps takes int"):
        execute("plain", {"steps": "10"}, output_dir=tmp_path, notebook_dir=tmp_path)
    with pytest.raises(ValueError, match=r"parameter names takes list\[str\]"):
        execute("plain", {"names": "a"}, output_dir=tmp_path, notebook_dir=tmp_path)
    given = {"rate": 1, "anything": {"free": "form"}, "where": "x"}  # None default, other type: free
    execute("plain", given, output_dir=tmp_path, notebook_dir=tmp_path)
    assert ran == [given]


INJECTION = '\\"+str(__import__("os").system("touch pwned"))+\\"'


@pytest.mark.parametrize(
    "params, where",
    [
        ({"options": {"seed": (INJECTION,)}}, r"options\['seed'\] is a tuple"),  # papermill writes str(tuple) unescaped
        ({"options": {("x",): 1}}, r"options has a key \('x',\) \(tuple\)"),
        ({"options": {"tasks": [b"addition"]}}, r"options\['tasks'\]\[0\] is a bytes"),
        ({"options": {"tasks": {"addition"}}}, r"options\['tasks'\] is a set"),
        ({"options": {"tokens": float("inf")}}, r"options\['tokens'\] is a non-finite float"),
        ({"decades": (0, 3)}, r"decades is a tuple"),
        ({"encoding": "bit\udcfftokens"}, "encoding is not valid text"),
    ],
)
def test_parameters_are_json_at_every_depth(ran, tmp_path, params, where):
    """Bug: a tuple, bytes or set value inside a dict parameter was written into the notebook's code
    unescaped (code from a parameter). Anything but JSON is refused, naming the place inside."""
    with pytest.raises(ValueError, match=where):
        execute("03_training", params, output_dir=tmp_path)
    assert ran == [] and not list(tmp_path.glob("*.ipynb"))


def test_command_line_tuples_become_lists_and_bad_text_leaves_nothing(ran, tmp_path, capsys):
    notebooks.main(["run", "--only", "03_training", "-p", "decades=0,3", "--output-dir", str(tmp_path / "a")])
    assert len(ran) == 1 and ran[0]["decades"] == [0, 3]
    with pytest.raises(SystemExit):
        notebooks.main(
            ["run", "--only", "03_training", "-p", "out_dir=runs/\udcff", "--output-dir", str(tmp_path / "b")]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "out_dir is not valid text" in err[0]
    assert not (tmp_path / "b").exists() or not list((tmp_path / "b").glob("*.ipynb"))


@pytest.mark.parametrize("name", ["../README", "/etc/passwd", "03_training/../../x", ""])
def test_notebook_names_resolve_inside_the_notebook_folder_only(ran, tmp_path, name):
    with pytest.raises(ValueError, match="no notebook"):
        execute(name, {}, output_dir=tmp_path)
    assert ran == []


# -- bounds and output folders, before a kernel starts (issue 39) ---------------------------------
@pytest.mark.parametrize(
    "name, params, message",
    [
        ("05_retrofit", {"heads": 0}, r"heads=0: must be between 1 and 256"),  # was a ZeroDivisionError in the kernel
        ("05_retrofit", {"hidden": 100, "heads": 3}, r"hidden \(100\) must be a multiple of heads \(3\)"),
        ("05_retrofit", {"seeds": []}, r"seeds=\[\]: takes 1 to 100 items, got 0"),  # was an IndexError
        ("05_retrofit", {"encodings": ["none", "bitoken"]}, "did you mean 'bittokens'"),
        ("01_desiderata", {"threads": 10**6}, r"threads=1000000: must be between 1 and \d+ \(the CPU cores here\)"),
        ("01_desiderata", {"n_values": 10**12}, r"n_values=1000000000000: must be between 100 and 1_000_000"),
        ("02_fone_locality", {"precision": 10**9}, "precision=1000000000: must be between 2 and 1_000"),
        ("02_fone_locality", {"probe_steps": 10**9}, "probe_steps=1000000000: must be between 1 and 10_000"),
        ("03_training", {"tokens": 1e300}, "tokens=1e[+]300: must be between 1 and 1e11"),
        ("03_training", {"encoding": "bitoken"}, "unknown encoding 'bitoken'; did you mean 'bittokens'"),
        ("03_training", {"tasks": "addition,multiplcation"}, "did you mean 'multiplication'"),
        ("03_training", {"decades": [3, 1]}, r"decades=\[3, 1\]: low 3 above high 1"),
        ("03_training", {"decades": [0, 99]}, r"decades=\[0, 99\]: item 99: must be between -14 and 14"),
        ("03_training", {"figure_formats": ["pdf"]}, "unknown value 'pdf'"),
        ("04_paper_figures", {"bootstrap_draws": 0}, "bootstrap_draws=0: must be between 1 and 100_000"),
        ("04_paper_figures", {"study_dir": "/no/such/dir"}, "study_dir='/no/such/dir': expected an existing folder"),
        (
            "04_paper_figures",
            {"study_dir": "README.md"},
            "study_dir='README.md': expected an existing folder.* repository root",
        ),  # a file is not a folder; relative: from the root
        ("04_paper_figures", {"official_data": "/no/such"}, "official_data='/no/such': expected an existing folder"),
        ("04_paper_figures", {"results_csv": "results"}, "results_csv='results': expected an existing file"),
        ("04_paper_figures", {"answers_dir": "/no/such"}, "answers_dir='/no/such': expected an existing folder"),
        (
            "05_retrofit",
            {"model": "/no/such/model"},
            r"model='/no/such/model': expected the folder of a Hugging Face "
            r"causal LM or a packaged model \(smollm2-135m\)",
        ),
    ],
)
def test_values_out_of_bounds_are_refused_before_the_kernel_starts(ran, tmp_path, name, params, message):
    """Bugs: 9 of 27 bad values failed late or unclearly inside the kernel, and three had no upper
    bound and ran on. Each is one line naming the notebook, the parameter and the bounds."""
    with pytest.raises(ValueError, match=rf"^notebook {name}: parameter .*{message}"):
        execute(name, params, output_dir=tmp_path)
    assert ran == []


@pytest.mark.parametrize(
    "name, key, folder",
    [
        ("03_training", "out_dir", "."),
        ("03_training", "out_dir", "workbench"),
        ("04_paper_figures", "figures_dir", "notebooks"),
        ("01_desiderata", "figures_dir", "figures"),
        ("01_desiderata", "out_dir", str(notebooks.ROOT / "docs")),
    ],
)
def test_output_folders_inside_the_checkout_are_refused(ran, tmp_path, name, key, folder):
    """Bug: out_dir=<repository root> wrote 13 MB of run files into the checkout, figures_dir=notebooks
    wrote into notebooks/. Only runs/ (and outside the repository) takes a run's files."""
    with pytest.raises(ValueError, match=rf"parameter {key} is '{folder}', the repository's .*runs/ folder"):
        execute(name, {key: folder}, output_dir=tmp_path)
    assert ran == []
    with pytest.raises(SystemExit):
        notebooks.main(["run", "--only", "03_training", "--output-dir", "docs"])
    for fine in ("runs/mine", str(tmp_path / "elsewhere")):
        execute(name, {key: fine}, output_dir=tmp_path)
    assert len(ran) == 2


def test_only_the_default_run_writes_figures(ran, monkeypatch, tmp_path):
    """make figures' own run passes figures/ to every notebook; nothing else may."""
    monkeypatch.setattr(notebooks, "NOTEBOOKS", ["02_fone_locality"])
    monkeypatch.setattr(notebooks, "OUTPUT_DIR", tmp_path)
    executed, run_dir, params = notebooks.plan(["02_fone_locality"], {})
    assert run_dir is None and params["02_fone_locality"]["figures_dir"] == str(notebooks.FIGURES)
    execute("02_fone_locality", params["02_fone_locality"], executed, default_run=True)
    assert ran == [params["02_fone_locality"]]
    with pytest.raises(ValueError, match="figures/ is written only by the default run"):
        execute("02_fone_locality", params["02_fone_locality"], executed)


def test_every_default_is_within_its_limits_and_every_number_has_one():
    for name in NOTEBOOKS:
        nb = jupytext.read(notebooks.NOTEBOOK_DIR / f"{name}.py")
        defaults = notebook_parameters.parameters_of(nb)
        notebook_parameters.check_limits(name, defaults, default_run=True)
        numeric = [k for k, t in parameter_types(nb).items() if t and ("int" in t or "float" in t)]
        assert set(numeric) <= set(notebook_parameters.LIMITS[name]), (
            f"{name}: no limit for {set(numeric) - set(notebook_parameters.LIMITS[name])}"
        )


@pytest.mark.parametrize(
    "name, argument, message",
    [
        (
            "04_paper_figures",
            "study_dir=/no/such/dir",
            "parameter study_dir='/no/such/dir': expected an existing folder",
        ),
        (
            "05_retrofit",
            "model=/no/such/model",
            "parameter model='/no/such/model': expected the folder of a Hugging Face causal LM",
        ),
        ("04_paper_figures", "seed=notanint", "parameter seed takes int, got 'notanint' (str)"),
    ],
)
def test_the_command_refuses_a_bad_path_or_type_before_a_kernel_starts(name, argument, message):
    """Bugs: a missing study_dir or model failed only inside the kernel (~50 s, the model as a raw
    [Errno 2]). Now one line naming the parameter, the value and what it takes, and nothing run:
    no run directory announced (the runner prints it before the first kernel starts)."""
    done = subprocess.run(
        [sys.executable, "-m", "workbench.notebooks", "run", "--only", name, "-p", argument],
        cwd=notebooks.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"python -m workbench.notebooks: error: notebook {name}: {message}"), line


def test_notebook_03s_preset_choices_are_the_registry_s(monkeypatch):
    """Bug: the parameter help of notebook 03 listed "cpu-tiny | cpu-small | paper", typed in, and
    left out cpu-tiny-wide. The choices are read from `gpt_config.PRESETS` when shown or checked,
    so a preset added there is offered and accepted."""
    from workbench.model import gpt_config

    def preset_line() -> str:
        return next(line for line in notebooks.parameters_text(["03_training"]).splitlines() if "preset =" in line)

    assert preset_line().endswith(f"[{'|'.join(gpt_config.PRESETS)}]") and "cpu-tiny-wide" in preset_line()
    monkeypatch.setitem(gpt_config.PRESETS, "cpu-extra", gpt_config.PRESETS["cpu-tiny"])
    assert preset_line().endswith("|cpu-extra]")
    notebook_parameters.check_limits("03_training", {"preset": "cpu-extra"})
    with pytest.raises(ValueError, match=r"preset='cpu-tiny-wid': unknown value .* did you mean 'cpu-tiny-wide'"):
        notebook_parameters.check_limits("03_training", {"preset": "cpu-tiny-wid"})
