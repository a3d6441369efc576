"""Execute the paired notebooks with papermill and keep the .py/.ipynb twins in agreement.
(Over 500 lines: the runner and every notebook parameter's limits, checked before a kernel starts.)

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

Parameters are checked before anything runs, against the type of each default in the notebook's
parameters cell (`tokens = 1e6` takes a number, `decades = [0, 3]` a list of ints) or its
annotation where one is written (`max_digits: int | None = 4`: None allowed too). Types: bool,
int, float (an int is fine too), str, None, list[T], joined with "|". A parameter whose default is
None and has no annotation, or whose annotation is another type, is not checked (ours all are).

Then the values of our notebooks' parameters are checked against `LIMITS`: every number between
a lower and an upper bound (the upper ones keep a run to what a machine finishes: the paper's
sizes fit, 10**12 values do not), names from their registries (encodings, tasks, presets,
figure formats), list lengths (`seeds=[]` is refused), paths that must exist (notebook 04's
`study_dir`, 05's `model`, ...) and what parameters ask of each other (notebook 05: `hidden` a
multiple of `heads`). A value out of bounds is a ValueError naming the
notebook, the parameter, the bounds and the value, before a kernel starts.

Output folders (`out_dir`, `figures_dir`, --output-dir) may lie outside the repository or inside
its runs/ folder, never in a tracked folder of the checkout (`out_dir=.` wrote 13 MB of run files
into it); figures/ is written only by the default run, `make figures`. A relative path means the
repository root, where the notebooks run.
"""

from __future__ import annotations

import argparse
import ast
import logging
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .cli import Parser
from .plots import FIGURES, ROOT

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


def _assignments(nb):
    """(name, value node, annotation node or None) of each assignment in the parameters cell."""
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"a notebook needs exactly one cell tagged 'parameters', found {len(cells)}")
    for node in ast.parse(cells[0].source).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name):
                yield target.id, node.value, getattr(node, "annotation", None)


def parameters_of(nb) -> dict:
    """Names and default values assigned in the cell tagged "parameters"."""
    names = {}
    for name, value, _ in _assignments(nb):
        try:
            names[name] = ast.literal_eval(value) if value is not None else None
        except ValueError:
            names[name] = ast.unparse(value)
    return names


def _type_of(value) -> str | None:
    """ "float" for 1e6, "list[int]" for [0, 3]; None when a default says nothing (None, mixed)."""
    if isinstance(value, list):
        kinds = {_type_of(v) for v in value}
        return f"list[{kinds.pop()}]" if len(kinds) == 1 and None not in kinds else None
    return type(value).__name__ if isinstance(value, (bool, int, float, str)) else None


def _understood(kind: str) -> bool:
    return all(
        part.strip().removeprefix("list[").removesuffix("]") in ("bool", "int", "float", "str", "None", "dict")
        for part in kind.split("|")
    )


def parameter_types(nb) -> dict[str, str | None]:
    """The type each parameter takes: its annotation, else the type of its default (module doc).
    None: not checked (a None default without annotation, or an annotation beyond these types)."""
    defaults, types = parameters_of(nb), {}
    for name, _, annotation in _assignments(nb):
        kind = ast.unparse(annotation) if annotation is not None else _type_of(defaults[name])
        types[name] = kind if kind is not None and _understood(kind) else None
    return types


def _fits(value, kind: str) -> bool:
    for k in (part.strip() for part in kind.split("|")):
        if k.startswith("list[") and k.endswith("]"):
            if isinstance(value, list) and all(_fits(v, k[5:-1]) for v in value):
                return True
        elif (
            (k == "None" and value is None)
            or (k == "bool" and isinstance(value, bool))
            or (k == "str" and isinstance(value, str))
            or (k == "dict" and isinstance(value, dict))
            or (k in ("int", "float") and isinstance(value, int) and not isinstance(value, bool))
            or (k == "float" and isinstance(value, float) and math.isfinite(value))
        ):
            return True
    return False


def check_json(value, where: str) -> None:
    """Raise ValueError unless `value` is JSON at every depth: str (valid Unicode), int, finite
    float, bool, None, lists and dicts with str keys. papermill writes anything else into the
    notebook's code as "str(value)" unescaped, so a tuple or bytes value could run code."""
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, float) and math.isfinite(value):
        return
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"notebook parameter {where} is not valid text (a byte the terminal could not decode, "
                f"at character {err.start}); give it as UTF-8"
            ) from None
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            check_json(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(
                    f"notebook parameter {where} has a key {key!r} ({type(key).__name__}); dict keys must be strings"
                )
            check_json(item, f"{where}[{key!r}]")
        return
    kind = "a non-finite float" if isinstance(value, float) else f"a {type(value).__name__}"
    raise ValueError(
        f"notebook parameter {where} is {kind}; parameters take JSON values only (str, int, finite "
        "float, bool, None, lists, dicts with str keys)"
    )


def as_lists(value):
    """Tuples (what "0,3" means to Python) as lists, at every depth: the command line's values."""
    if isinstance(value, (tuple, list)):
        return [as_lists(v) for v in value]
    return {k: as_lists(v) for k, v in value.items()} if isinstance(value, dict) else value


def check_parameters(name: str, nb, parameters: dict) -> None:
    """Raise ValueError, naming the parameter (and the place inside it) and the type it takes, for
    any value that is not JSON or does not fit."""
    types = parameter_types(nb)
    unknown = sorted(set(parameters) - set(types))
    if unknown:
        from .cli import unknown as nearest

        raise ValueError(f"notebook {name}: " + "; ".join(nearest("parameter", u, sorted(types)) for u in unknown))
    for key, value in parameters.items():
        check_json(value, key)
    for key, value in parameters.items():
        if types[key] is not None and not _fits(value, types[key]):
            listed = isinstance(value, str) and "list[" in types[key]
            hint = f"; write a list, e.g. {key}=[{value!r}]" if listed else ""
            raise ValueError(
                f"notebook {name}: parameter {key} takes {types[key]}, got {value!r} ({type(value).__name__}){hint}"
            )


# -- what each parameter of our notebooks may take ----------------------------------------------
SEED_MAX = 2**32 - 1  # numpy's and torch's seeds
FORMATS = ("html", "json", "png", "svg")  # plots.save; json: the values a figure draws (tests read them)


@dataclass(frozen=True)
class Limit:
    """What a parameter's value (or each item of a list) may be: low <= value <= high, one of
    `choices`, `check(value)` returning "" or what is wrong; a list's length within `length`."""

    low: float | None = None
    high: float | None = None
    choices: tuple | None = None
    length: tuple[int, int] | None = None
    check: object = None  # callable(value) -> str
    shown: str = ""  # how `params` shows the limit, where the fields do not say it

    def problem(self, value) -> str:
        """ "" when `value` is within this limit, else what is wrong, for an error message."""
        if value is None:
            return ""
        if isinstance(value, list):
            if self.length and not self.length[0] <= len(value) <= self.length[1]:
                low, high = self.length
                return (
                    f"takes {low} to {high} items, got {len(value)}"
                    if low != high
                    else f"takes {low} items, got {len(value)}"
                )
            for item in value:
                why = self.problem(item)
                if why:
                    return f"item {item!r}: {why}"
            return ""
        if self.choices is not None and value not in self.choices:
            from .cli import unknown

            return unknown("value", value, self.choices)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                return f"must be between {_shown_number(self.low)} and {_shown_number(self.high)}"
        return self.check(value) if self.check else ""

    def __str__(self) -> str:
        if self.shown:
            return self.shown
        parts = []
        if self.low is not None or self.high is not None:
            parts.append(f"{_shown_number(self.low)}..{_shown_number(self.high)}")
        if self.choices is not None:
            parts.append("|".join(map(str, self.choices)))
        if self.length:
            low, high = self.length
            parts.append(f"{low} items" if low == high else f"{low}-{high} items")
        return ", ".join(parts)


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:50] + "..."


def _threads(value) -> str:
    return f"must be between 1 and {_cores()} (the CPU cores here)" if value > _cores() else ""


def _shown_number(value) -> str:
    if value is None:
        return "any"
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e6:
        return f"{value:.0e}".replace("e+0", "e").replace("e+", "e")
    return f"{value:_}" if isinstance(value, int) else f"{value:g}"


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _encoding(value) -> str:
    from . import encoders

    return "" if value in encoders.names() else _unknown("encoding", value, encoders.names())


def _tasks(value) -> str:
    from . import tasks

    names = [t.strip() for t in value.split(",")]
    for task in names:
        if task not in tasks.names():
            return _unknown("task", task, tasks.names())
    return f"names {sorted({t for t in names if names.count(t) > 1})} twice" if len(set(names)) < len(names) else ""


def _preset(value) -> str:
    from .model import PRESETS

    return "" if value in PRESETS else _unknown("preset", value, PRESETS)


def _device(value) -> str:
    return "" if re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?", value) else "must be cpu, cuda, cuda:N or auto"


def _study_folder(value) -> str:
    return (
        ""
        if _where(value).is_dir()
        else (
            "expected an existing folder, and there is none there"
            + _relative(value)
            + "; a study writes one: python -m workbench.experiments study --out DIR"
        )
    )


def _retrofit_encoding(value) -> str:
    return "" if value == "none" else _encoding(value)


def _unknown(kind, value, choices) -> str:
    from .cli import unknown

    return unknown(kind, value, choices)


def _below_one(value) -> str:
    return "must be below 1 (a step of text only has no numbers to fine-tune on)" if value >= 1 else ""


def _where(value) -> Path:
    """A path parameter's place: relative paths start at the repository root, where notebooks run."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else ROOT / path


def _folder(value) -> str:
    return "" if _where(value).is_dir() else "expected an existing folder, and there is none there" + _relative(value)


def _file(value) -> str:
    return "" if _where(value).is_file() else "expected an existing file, and there is none there" + _relative(value)


def _relative(value) -> str:
    return "" if Path(value).expanduser().is_absolute() else f" (relative paths start at the repository root, {ROOT})"


def _released(value) -> str:
    return "" if value == "auto" else _folder(value)


def _model(value) -> str:
    from .retrofit.hub import KNOWN

    if value in KNOWN or _where(value).is_dir():
        return ""
    return (
        f"expected the folder of a Hugging Face causal LM or a packaged model ({', '.join(KNOWN)}), and there "
        "is no folder there" + _relative(value)
    )


def _decades(value) -> str:
    return "" if value is None or value[0] <= value[1] else f"low {value[0]} above high {value[1]}"


SEED, THREADS = Limit(0, SEED_MAX), Limit(1, None, check=_threads, shown="1..the CPU cores")
FIGURE_FORMATS = Limit(choices=FORMATS, length=(1, len(FORMATS)))
DECADES = Limit(-14, 14, length=(2, 2))  # the paper's magnitudes 1e-14 ... 1e15 (tasks.sampling)
MAX_DIGITS = Limit(1, 17)
LIMITS: dict[str, dict[str, Limit]] = {
    "01_desiderata": dict(
        n_values=Limit(100, 1_000_000),
        seed=SEED,
        d9_steps=Limit(1, 100_000),
        threads=THREADS,
        figure_formats=FIGURE_FORMATS,
    ),
    "02_fone_locality": dict(
        n_pairs=Limit(1, 1_000_000),
        grid_digits=Limit(1, 3),
        precision=Limit(2, 1_000),
        probe_steps=Limit(1, 10_000),
        seed=SEED,
        threads=THREADS,
        figure_formats=FIGURE_FORMATS,
    ),
    "03_training": dict(
        encoding=Limit(check=_encoding),
        tasks=Limit(check=_tasks),
        preset=Limit(check=_preset),
        tokens=Limit(1, 1e11),
        seed=SEED,
        decades=DECADES,
        max_digits=MAX_DIGITS,
        eval_every=Limit(1, 1_000_000),
        val_samples=Limit(1, 100_000),
        test_samples=Limit(1, 100_000),
        threads=THREADS,
        figure_formats=FIGURE_FORMATS,
    ),
    "04_paper_figures": dict(
        official_data=Limit(check=_released, shown='"auto" or an existing folder'),
        study_dir=Limit(check=_study_folder, length=(1, 20), shown="existing folders, 1-20 items"),
        results_csv=Limit(check=_file, shown="an existing file"),
        answers_dir=Limit(check=_folder, shown="an existing folder"),
        exponent_samples=Limit(1, 10_000_000),
        generator_samples=Limit(1, 1_000_000),
        bootstrap_draws=Limit(1, 100_000),
        seed=SEED,
        figure_formats=FIGURE_FORMATS,
    ),
    "05_retrofit": dict(
        model=Limit(check=_model, shown="a model folder or a packaged model's name"),
        pretrain_tokens=Limit(1, 1e10),
        hidden=Limit(8, 16_384),
        layers=Limit(1, 128),
        heads=Limit(1, 256),
        context=Limit(8, 65_536),
        vocab_size=Limit(257, 1_000_000),
        pretrain_lr=Limit(1e-8, 1.0),
        text_share=Limit(0, 1, check=_below_one),
        encodings=Limit(check=_retrofit_encoding, length=(1, 20)),
        tasks=Limit(check=_tasks),
        tokens=Limit(1, 1e10),
        batch_tokens=Limit(1, 10_000_000),
        lr=Limit(1e-8, 1.0),
        head_lr=Limit(1e-8, 1.0),
        decades=DECADES,
        max_digits=MAX_DIGITS,
        pool_size=Limit(1, 10_000_000),
        val_samples=Limit(1, 100_000),
        eval_every=Limit(1, 1_000_000),
        test_samples=Limit(1, 100_000),
        text_samples=Limit(1, 100_000),
        seeds=Limit(0, SEED_MAX, length=(1, 100)),
        bootstrap_draws=Limit(1, 1_000_000),
        device=Limit(check=_device),
        threads=THREADS,
        figure_formats=FIGURE_FORMATS,
    ),
}
OUTPUTS = ("out_dir", "figures_dir")  # parameters that name a folder the notebook writes


def check_limits(name: str, parameters: dict, default_run: bool = False) -> None:
    """Raise ValueError for a value outside LIMITS (module docstring) or an output folder inside the
    repository's tracked folders; `default_run`: figures/ is allowed (make figures' own run)."""
    limits = LIMITS.get(name, {})
    for key, value in parameters.items():
        limit = limits.get(key)
        why = limit.problem(value) if limit else ""
        if not why and key == "decades" and limit:
            why = _decades(value)
        if why:
            raise ValueError(f"notebook {name}: parameter {key}={_brief(value)}: {why}")
        if key in OUTPUTS and isinstance(value, str):
            check_output_folder(value, f"notebook {name}: parameter {key}", allow_figures=default_run)
    if name == "05_retrofit":
        hidden, heads = parameters.get("hidden", 128), parameters.get("heads", 4)
        if isinstance(hidden, int) and isinstance(heads, int) and heads >= 1 and hidden % heads:
            raise ValueError(
                f"notebook {name}: parameter hidden ({hidden}) must be a multiple of heads ({heads}): "
                "each attention head gets hidden / heads dimensions"
            )


def check_output_folder(folder, what: str, allow_figures: bool = False) -> Path:
    """The folder (relative: to the repository root) if a run may write there: outside the
    repository, or inside its runs/ folder; figures/ only with `allow_figures`."""
    path = (ROOT / Path(folder)).resolve() if not Path(folder).is_absolute() else Path(folder).resolve()
    root = ROOT.resolve()
    if not path.is_relative_to(root) or path.is_relative_to(root / "runs"):
        return path
    if allow_figures and path == FIGURES.resolve():
        return path
    where = "the repository's root" if path == root else f"the repository's {path.relative_to(root).as_posix()}/"
    figures = " (figures/ is written only by the default run, make figures)" if path.is_relative_to(FIGURES) else ""
    raise ValueError(
        f"{what} is {str(folder)!r}, {where}: a run writes only outside the repository or inside its "
        f"runs/ folder{figures}; choose e.g. runs/{path.name if path != root else 'mine'}"
    )


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
    if output_dir is not None:
        check_output_folder(output_dir, "--output-dir")
    out = Path(output_dir) if output_dir is not None else OUTPUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}.ipynb"
    import papermill

    try:
        papermill.execute_notebook(
            nb,
            str(target),
            parameters=parameters,
            kernel_name="python3",
            cwd=str(ROOT),
            progress_bar=False,
            log_output=False,
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


def _parse_parameter(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"parameters are given as key=value, got {text!r}")
    try:
        return key.strip(), as_lists(ast.literal_eval(value))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return key.strip(), value  # a plain string such as a path


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
    parameters = dict(_parse_parameter(p) for p in args.parameter)
    if parameters and len(names) > 1:
        parser.error("-p applies to one notebook; add --only NAME")
    for name in names:  # refuse a bad value before anything runs
        check_parameters(name, _read(_source(name, NOTEBOOK_DIR)), parameters)
        check_limits(name, parameters)
    if args.output_dir is not None:
        check_output_folder(args.output_dir, "--output-dir")
    executed, run_dir, params = plan(names, parameters, args.output_dir)
    where = f"run directory: {_shown(run_dir)}" if run_dir else f"figures: {_shown(FIGURES)} (the default run)"
    print(where, flush=True)
    for name in tqdm(names, desc="notebooks", file=sys.stdout):
        started = time.time()
        path = execute(name, params[name], executed, default_run=run_dir is None)
        tqdm.write(f"{name}: {time.time() - started:.1f} s -> {_shown(path)}")
    print(where)


if __name__ == "__main__":
    main()
