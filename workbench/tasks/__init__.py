"""The nine numeracy tasks of the BitTokens paper (section 2, appendix A) plus text chunks, behind
one registry like the encoders'.

    >>> from workbench import tasks
    >>> tasks.names()                       # every task, registration order (Table 1's rows)
    >>> tasks.get("minmax").metric          # "accuracy"
    >>> tasks.generate("addition", 100, seed=0, split="test", decades=(0, 1), max_digits=2)
    >>> tasks.generate("multiplication", 100, regime=tasks.Regime(significance="binary"))  # A.3's BitTokens set

generate(task, n, seed, split) draws candidate questions in vectorized batches, keeps those whose
question hash falls in the requested split (hash buckets: 1/10 val, 1/10 test, 8/10 train, so the
splits never share a question by construction), labels them exactly and returns a DataFrame.
"""

from __future__ import annotations

import importlib
import pkgutil
import zlib

import numpy as np
import pandas as pd

from .base import Task
from .registry import _REGISTRY, register, registered  # noqa: F401 (tasks.register, tasks.registered)
from .sampling import PAPER, SPLITS, Regime, split_of

_SPLIT_SHARE = {"train": 0.8, "val": 0.1, "test": 0.1}


def get(name: str) -> Task:
    try:
        return _REGISTRY[name]
    except KeyError:
        from ..cli import unknown

        raise ValueError(unknown("task", name, names())) from None


def names(family: str | None = None) -> list[str]:
    """Registered task names, all of them or one family's ("comparison", "single_step", ...)."""
    return [t.name for t in _REGISTRY.values() if family is None or t.family == family]


def numeric() -> list[str]:
    """The numeracy tasks: every task but prose."""
    return [t.name for t in _REGISTRY.values() if t.answer != "text"]


def with_metric(metric: str) -> list[str]:
    """Tasks scored by `metric`: "log_smape" (the arithmetic tasks), "accuracy" or "perplexity"."""
    return [t.name for t in _REGISTRY.values() if t.metric == metric]


def markers() -> list[str]:
    """Every special token the tasks' model prompts use, in registration order."""
    return [m for t in _REGISTRY.values() for m in t.markers]


def generate(task, n, seed=0, split="train", decades=None, max_digits=None, regime: Regime | None = None):
    """n labelled samples of `task` from `split`; same arguments give a byte-identical frame.

    `decades=(lo, hi)` and `max_digits` (or a whole `regime`) narrow the numbers of every task
    (magnitudes 10**lo … 10**(hi+1), significant digits: operands and list elements alike) for small
    experiments; the default is the paper's. The regime's other fields (sampling.Regime) choose the
    binary training set of A.3, list lengths and sampling, operand swaps and difficulty levels.
    """
    spec = get(task)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    if regime is None:
        regime = Regime.of(decades, max_digits)
    elif decades is not None or max_digits is not None:
        raise ValueError("give either a regime or decades/max_digits, not both")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    # the task enters the seed by its name, so adding a task leaves every other task's data alone
    rng = np.random.default_rng([int(seed), SPLITS.index(split), zlib.crc32(task.encode())])
    frames, have = [], 0
    while have < n:
        m = int((n - have) * 1.5 / _SPLIT_SHARE[split]) + 64
        candidates = spec.draw(rng, m, regime)
        keep = candidates.pop("valid") & (split_of(candidates.pop("key")) == SPLITS.index(split))
        frame = spec.build({k: v[keep] for k, v in candidates.items()}, n - have)
        frames.append(frame)
        have += len(frame)
    if not frames:
        empty = {k: v[:0] for k, v in spec.draw(rng, 1, regime).items() if k not in ("valid", "key")}
        return _levels(spec, spec.build(empty, 0), regime)
    return _levels(spec, pd.concat(frames, ignore_index=True).iloc[:n].reset_index(drop=True), regime)


def _levels(spec, frame, regime):
    """The task's raw difficulty columns as the regime's levels (caps, damping)."""
    if spec.difficulty_rule is not None:
        for column, base in (("difficulty", 2), ("difficulty_sd", 10)):
            frame[column] = np.asarray(spec.difficulty_rule(frame[column].to_numpy(), base, regime), dtype=np.int64)
    return frame


def max_difficulty(task, base=10, regime: Regime | None = None):
    """Largest difficulty level of `task` in base 10 (difficulty_sd) or 2 under `regime` (default
    the paper's, with the authors' caps): the bound of the generated columns."""
    if base not in (2, 10):
        raise ValueError(f"base must be 2 or 10, got {base!r}")
    spec = get(task)
    bound = spec.max_difficulty(base)
    if spec.difficulty_rule is None:
        return bound
    return int(spec.difficulty_rule(np.int64(bound), base, PAPER if regime is None else regime))


# Importing the family modules registers their tasks (the paper's nine, then text), then every
# other module of this folder: a new task is one new file and nothing else.
from . import arithmetic, exponentiation, lists, text  # noqa: E402,F401
from .solve import solve  # noqa: E402

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = [
    "Task",
    "Regime",
    "PAPER",
    "register",
    "registered",
    "get",
    "names",
    "numeric",
    "with_metric",
    "markers",
    "generate",
    "max_difficulty",
    "solve",
]
