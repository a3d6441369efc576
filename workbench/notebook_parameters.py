"""What a notebook parameter may take, checked before a kernel starts (`notebooks.execute`).

First its type: against the type of each default in the notebook's
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

Output folders (`out_dir`, `figures_dir`, notebook 03's `options={"out": ...}`) may lie outside
the repository or inside its runs/ folder, never in a tracked folder of the checkout (`out_dir=.`
wrote 13 MB of run files into it); figures/ is written only by the default run, `make figures`
(`outputs.output_path`, the check of every command's output). A relative path means the
repository root, where the notebooks run.
"""

from __future__ import annotations

import ast
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .figures.plots import ROOT
from .runs.outputs import output_path


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
    choices: tuple | object = None  # or callable() -> the names, a registry's as it is when asked
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
        choices = self._choices()
        if choices is not None and value not in choices:
            from .cli import unknown

            return unknown("value", value, choices)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                return f"must be between {_shown_number(self.low)} and {_shown_number(self.high)}"
        return self.check(value) if self.check else ""

    def _choices(self) -> tuple | None:
        return tuple(self.choices()) if callable(self.choices) else self.choices

    def __str__(self) -> str:
        if self.shown:
            return self.shown
        parts = []
        if self.low is not None or self.high is not None:
            parts.append(f"{_shown_number(self.low)}..{_shown_number(self.high)}")
        if self._choices() is not None:
            parts.append("|".join(map(str, self._choices())))
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


def _presets() -> list[str]:
    from .model.gpt_config import PRESETS  # torch-free: `params` and a refused value answer without torch

    return list(PRESETS)


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
        preset=Limit(choices=_presets),
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
        if key == "options" and isinstance(value, dict) and isinstance(value.get("out"), str):
            check_output_folder(value["out"], f"notebook {name}: parameter options['out']")
    if name == "05_retrofit":
        hidden, heads = parameters.get("hidden", 128), parameters.get("heads", 4)
        if isinstance(hidden, int) and isinstance(heads, int) and heads >= 1 and hidden % heads:
            raise ValueError(
                f"notebook {name}: parameter hidden ({hidden}) must be a multiple of heads ({heads}): "
                "each attention head gets hidden / heads dimensions"
            )


def check_output_folder(folder, what: str, allow_figures: bool = False) -> Path:
    """`outputs.output_path` of a notebook parameter: relative to the repository root, where the
    notebooks run (each changes to it); figures/ only with `allow_figures`."""
    return output_path(folder, what, base=ROOT, figures=allow_figures)


def parse_parameter(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"parameters are given as key=value, got {text!r}")
    try:
        return key.strip(), as_lists(ast.literal_eval(value))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return key.strip(), value  # a plain string such as a path
