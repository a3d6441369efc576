"""Execute the paired notebooks with papermill and keep the .py/.ipynb twins in agreement.

    python -m workbench.notebooks run                       # all five, default parameters (make figures)
    python -m workbench.notebooks run --only 04_paper_figures -p official_data=../shared/data/official_bittokens
    python -m workbench.notebooks params 03_training        # each parameter: name, default, type, meaning
    python -m workbench.notebooks check                     # .py and .ipynb twins hold the same cells

The jupytext .py file is the source of truth: it is read, given its parameters and executed with
the repository root as working directory (each notebook also changes to it, so relative paths
mean the same in JupyterLab). Runs never write into tracked files, except the one that is meant
to: the default run (all notebooks, default parameters: `make figures`) writes the figures into
figures/ and the executed notebooks into runs/notebooks/. Any other run (--only, -p) gets its own
run directory, runs/notebooks/<date>-<time>-<notebooks>/ (or --output-dir), holding the executed
notebooks, figures/ and each notebook's results; it is printed at the start and the end.

Saving a notebook in JupyterLab writes no outputs: `make install` sets `pre_save_hook` below as
the Jupyter server's pre-save hook for the notebooks of notebooks/ (outputs, execution counts,
widget state and kernel details dropped), so the tracked .ipynb and the .py header stay as they are.

Every parameter is checked before a kernel starts: its type, its limits and output folders
(workbench/notebook_parameters.py).
"""

from __future__ import annotations

import argparse
import ast
import logging
import re
import sys
import time
from pathlib import Path

from tqdm.auto import tqdm

from .cli import Parser
from .figures.plots import FIGURES, ROOT
from .notebook_parameters import (
    LIMITS,
    check_limits,
    check_parameters,
    parameter_types,
    parameters_of,
    parse_parameter,
)
from .runs.outputs import output_path

NOTEBOOK_DIR = ROOT / "notebooks"
OUTPUT_DIR = ROOT / "runs" / "notebooks"
NOTEBOOKS = ["01_desiderata", "02_fone_locality", "03_training", "04_paper_figures", "05_retrofit"]
# Notebook metadata a live kernel session adds; the tracked notebooks keep none of it.
SESSION_METADATA = ("widgets", "papermill", "execution")
# What the python3 kernel (ipykernel on the environment's Python 3.11) reports and JupyterLab writes
# into a notebook as its kernel starts. The tracked notebooks carry it and a save in the lab keeps it
# as it is, so opening a notebook does not mark it modified (on another patch release of Python the
# lab still sees a new version; saving writes this one back).
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
    "version": "3.11.7",
}


class _KnownParameters(logging.Filter):
    """papermill cannot read annotated parameters (`x: int | None = 4`) and warns that they are
    unknown; check_parameters has already refused every unknown name."""

    def filter(self, record):
        return not record.getMessage().startswith("Passed unknown parameter")


logging.getLogger("papermill").addFilter(_KnownParameters())


def __getattr__(name):
    """jupytext and papermill, imported on first use (seconds: nbformat's schemas): the command's
    --help and a mistyped flag need neither."""
    if name in ("jupytext", "papermill"):
        import importlib

        return importlib.import_module(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _read(path):
    """The notebook of a jupytext .py (or .ipynb) file."""
    import jupytext

    return jupytext.read(path)


class NotebookError(RuntimeError):
    """A notebook cell raised; the message names the notebook, the cell and the error."""


def _source(name: str, notebook_dir: Path) -> Path:
    """notebook_dir/<name>.py, for a plain name only: a path ("../x", "/tmp/x") never leaves the folder."""
    path = Path(notebook_dir) / f"{name}.py"
    if not (isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name)) or not path.exists():
        known = sorted(p.stem for p in Path(notebook_dir).glob("*.py"))
        raise ValueError(f"no notebook {name!r} in {notebook_dir}; available: {known}")
    return path


def execute(
    name: str, parameters: dict | None = None, output_dir=None, notebook_dir=None, default_run: bool = False
) -> Path:
    """Run notebooks/<name>.py with `parameters` on kernel python3; return the executed .ipynb.
    `default_run`: make figures' own run, the only one that may write figures/."""
    notebook_dir = Path(notebook_dir) if notebook_dir is not None else NOTEBOOK_DIR
    nb = _read(_source(name, notebook_dir))
    parameters = dict(parameters or {})
    check_parameters(name, nb, parameters)
    check_limits(name, parameters, default_run)
    out = output_path(output_dir, "--output-dir") if output_dir is not None else OUTPUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}.ipynb"
    import papermill

    from .notebook_kernel import PolledKernelManager

    try:
        papermill.execute_notebook(
            nb,
            str(target),
            parameters=parameters,
            kernel_name="python3",
            cwd=str(ROOT),
            progress_bar=False,
            log_output=False,
            kernel_manager_class=PolledKernelManager,  # a missed wake-up must not hang the run
        )
    except papermill.PapermillExecutionError as err:
        first_line = err.source.strip().splitlines()[0] if err.source.strip() else ""
        raise NotebookError(
            f"notebook {name}: cell {err.cell_index} ({first_line!r}) raised "
            f"{err.ename}: {err.evalue}\nexecuted notebook: {target}"
        ) from None
    except BaseException:
        if target.exists() and target.stat().st_size == 0:  # nothing executed: leave no empty notebook behind
            target.unlink()
        raise
    return target


def _cells(path: Path) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in _read(path).cells]


def check_pairs(notebook_dir=None) -> list[str]:
    """Raise ValueError unless every notebooks/*.py has an .ipynb twin with the same cells (and
    vice versa); return the names checked."""
    notebook_dir = Path(notebook_dir) if notebook_dir is not None else NOTEBOOK_DIR
    names = sorted({p.stem for p in notebook_dir.glob("*.py")} | {p.stem for p in notebook_dir.glob("*.ipynb")})
    problems = []
    for name in names:
        py, ipynb = notebook_dir / f"{name}.py", notebook_dir / f"{name}.ipynb"
        if not py.exists() or not ipynb.exists():
            problems.append(f"{name}: missing {'.py' if not py.exists() else '.ipynb'} twin")
            continue
        a, b = _cells(py), _cells(ipynb)
        if a != b:
            index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            problems.append(
                f"{name}: .py and .ipynb differ from cell {index} on "
                f"({len(a)} vs {len(b)} cells); run `jupytext --sync notebooks/{name}.py`"
            )
    if problems:
        raise ValueError("notebook twins disagree:\n  " + "\n  ".join(problems))
    return names


# -- what a notebook takes ---------------------------------------------------------------------
def describe_parameters(name: str, notebook_dir=None) -> list[tuple[str, str, str, str]]:
    """(name, default, type, the comment written beside it) of each parameter of notebook `name`."""
    nb = _read(_source(name, Path(notebook_dir) if notebook_dir is not None else NOTEBOOK_DIR))
    cell = next(c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", []))
    lines = cell.source.splitlines()
    types, rows = parameter_types(nb), []
    for node in ast.parse(cell.source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            key = (node.targets[0] if isinstance(node, ast.Assign) else node.target).id
            comment = lines[node.end_lineno - 1].partition("#")[2].strip() if "#" in lines[node.end_lineno - 1] else ""
            rows.append((key, ast.get_source_segment(cell.source, node.value), types.get(key) or "any", comment))
    return rows


def parameters_text(names=NOTEBOOKS) -> str:
    """Every parameter of the notebooks `names`, as the runner's --help and `params` print them."""
    blocks = []
    for name in names:
        rows = describe_parameters(name)
        width = max(len(f"{k} = {d}") for k, d, _, _ in rows)
        limits = {k: f" [{LIMITS[name][k]}]" if str(LIMITS.get(name, {}).get(k) or "") else "" for k, _, _, _ in rows}
        lines = [f"  {f'{k} = {d}':<{width}}  ({t}) {c}{limits[k]}".rstrip() for k, d, t, c in rows]
        blocks.append(f"{name}:\n" + "\n".join(lines))
    return "\n".join(blocks)


# -- keeping outputs out of git ------------------------------------------------------------------
def clean_notebook(nb: dict) -> dict:
    """The notebook as it is tracked: no outputs, execution counts or session metadata, the
    kernel's language as LANGUAGE_INFO (in place)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        for key in SESSION_METADATA:
            cell.get("metadata", {}).pop(key, None)
    for key in SESSION_METADATA:
        nb.get("metadata", {}).pop(key, None)
    nb.setdefault("metadata", {})["language_info"] = dict(LANGUAGE_INFO)
    return nb


def pre_save_hook(model: dict, path: str, contents_manager, **kwargs) -> None:
    """Jupyter's FileContentsManager.pre_save_hook: a notebook of notebooks/ is saved clean."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    target = (Path(getattr(contents_manager, "root_dir", ".")) / path.strip("/")).resolve()
    if target.is_relative_to(NOTEBOOK_DIR.resolve()):
        clean_notebook(model["content"])


# -- the run command -----------------------------------------------------------------------------
def plan(names: list[str], parameters: dict, output_dir=None, now=None) -> tuple[Path, Path | None, dict]:
    """(where the executed notebooks go, the run directory or None for the default run, the
    parameters of each notebook). The default run (every notebook, no parameter, no --output-dir)
    writes figures/; any other run writes its figures and results into its own run directory."""
    default = set(names) == set(NOTEBOOKS) and not parameters and output_dir is None
    if default:
        run_dir, executed = None, OUTPUT_DIR
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
        run_dir = Path(output_dir) if output_dir is not None else OUTPUT_DIR / f"{stamp}-{'+'.join(names)}"
        executed = run_dir
    params = {}
    for name in names:
        known = parameters_of(_read(_source(name, NOTEBOOK_DIR)))
        given = dict(parameters)
        if "figures_dir" in known:
            given.setdefault("figures_dir", str(FIGURES if default else run_dir / "figures"))
        if "out_dir" in known and not default:
            given.setdefault("out_dir", str(run_dir / name))
        params[name] = given
    return executed, run_dir, params


def _shown(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


class _Parser(Parser):
    """A parser whose epilog is written when its help is shown (`epilog_of`): listing the notebooks'
    parameters reads them with jupytext, which a mistyped flag should not wait for."""

    def __init__(self, *args, epilog_of=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.epilog_of = epilog_of

    def format_help(self):
        if self.epilog_of is not None:
            self.epilog = self.epilog_of()
        return super().format_help()


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m workbench.notebooks",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser(
        "run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="execute the notebooks (default: all five with default parameters, writing figures/)",
        description="Execute notebooks with papermill. With no option this is `make figures`: all five "
        "notebooks, default parameters, figures written into figures/. With --only, -p or "
        "--output-dir the run gets its own directory (printed at the start and the end) and "
        "figures/ is left alone.",
        epilog_of=lambda: "parameters of each notebook (name = default  (type) meaning):\n" + parameters_text(),
    )
    run.add_argument(
        "--only",
        action="append",
        choices=NOTEBOOKS,
        metavar="NAME",
        help=f"run just this notebook; repeatable (choices: {', '.join(NOTEBOOKS)}; default: all)",
    )
    run.add_argument(
        "-p",
        "--parameter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a parameter of the one notebook named by --only; repeatable; VALUE is read as "
        "a Python literal (1e5, [0, 3], None, True), anything else as a string "
        "(default: the notebook's own defaults, listed below)",
    )
    run.add_argument(
        "--output-dir",
        default=None,
        metavar="DIR",
        help="run directory for the executed notebooks, figures and results "
        "(default: runs/notebooks/<date>-<time>-<notebooks>/, or for the default run "
        "runs/notebooks/ and figures/)",
    )
    params = sub.add_parser("params", help="list each notebook's parameters: name, default, type, meaning")
    params.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"notebooks to describe (choices: {', '.join(NOTEBOOKS)}; default: all)",
    )
    sub.add_parser("check", help="verify that the .py and .ipynb twins hold the same cells")
    return parser


def main(argv=None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        _run(parser, args)
    except (ValueError, NotebookError, OSError) as err:
        parser.fail(err)


def _run(parser, args) -> None:
    if args.command == "check":
        print("twins agree:", ", ".join(check_pairs()))
        return
    if args.command == "params":
        unknown = sorted(set(args.names) - set(NOTEBOOKS))
        if unknown:
            parser.error(f"no notebook(s) {unknown}; choose from {', '.join(NOTEBOOKS)}")
        print(parameters_text(args.names or NOTEBOOKS))
        return
    names = args.only or NOTEBOOKS
    # relative to the current folder, as a shell user means it; the notebooks get it absolute,
    # since they run in the repository root
    output_dir = output_path(args.output_dir, "--output-dir") if args.output_dir is not None else None
    parameters = dict(parse_parameter(p) for p in args.parameter)
    if parameters and len(names) > 1:
        parser.error("-p applies to one notebook; add --only NAME")
    for name in names:  # refuse a bad value before anything runs
        check_parameters(name, _read(_source(name, NOTEBOOK_DIR)), parameters)
        check_limits(name, parameters)
    executed, run_dir, params = plan(names, parameters, output_dir)
    where = f"run directory: {_shown(run_dir)}" if run_dir else f"figures: {_shown(FIGURES)} (the default run)"
    print(where, flush=True)
    for name in tqdm(names, desc="notebooks", file=sys.stdout):
        started = time.time()
        path = execute(name, params[name], executed, default_run=run_dir is None)
        tqdm.write(f"{name}: {time.time() - started:.1f} s -> {_shown(path)}")
    print(where)


if __name__ == "__main__":
    main()
