"""The nine numeracy tasks of the BitTokens paper (section 2, appendix A) plus text chunks.

generate(task, n, seed, split) draws candidate questions in vectorized batches, keeps those whose
question hash falls in the requested split (hash buckets: 1/10 val, 1/10 test, 8/10 train, so the
splits never share a question by construction), labels them exactly and returns a DataFrame.
"""
import numpy as np
import pandas as pd

from . import arithmetic, exponentiation, lists, text
from .sampling import SPLITS, regime, split_of
from .solve import solve

TASKS = ["addition", "multiplication", "division", "exponentiation", "mean", "std",
         "minmax", "sorting", "interval"]
ALL_TASKS = TASKS + ["text"]

_DRAW = {
    "addition": arithmetic.draw_addition,
    "multiplication": arithmetic.draw_multiplication,
    "division": arithmetic.draw_division,
    "exponentiation": exponentiation.draw,
    "mean": lists.draw_mean,
    "std": lists.draw_std,
    "minmax": lists.draw_minmax,
    "sorting": lists.draw_sorting,
    "interval": lists.draw_interval,
    "text": text.draw,
}
_BUILD = {"addition": arithmetic.build, "multiplication": arithmetic.build, "division": arithmetic.build,
          "exponentiation": exponentiation.build, "mean": lists.build, "std": lists.build,
          "minmax": lists.build, "sorting": lists.build, "interval": lists.build, "text": text.build}
_SPLIT_SHARE = {"train": 0.8, "val": 0.1, "test": 0.1}


def _check(task, split=None):
    if task not in ALL_TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {ALL_TASKS}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")


def generate(task, n, seed=0, split="train", decades=None, max_digits=None):
    """n labelled samples of `task` from `split`; same arguments give a byte-identical frame.

    `decades=(lo, hi)` and `max_digits` narrow the operand regime (magnitudes 10**lo … 10**(hi+1),
    significant digits) for small experiments; the default is the paper's.
    """
    _check(task, split)
    with regime(decades, max_digits):
        return _generate(task, n, seed, split)


def _generate(task, n, seed, split):
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng([int(seed), SPLITS.index(split), ALL_TASKS.index(task)])
    frames, have = [], 0
    while have < n:
        m = int((n - have) * 1.5 / _SPLIT_SHARE[split]) + 64
        c = _DRAW[task](rng, m)
        keep = c.pop("valid") & (split_of(c.pop("key")) == SPLITS.index(split))
        c = {k: v[keep] for k, v in c.items()}
        df = _BUILD[task](c, task, n - have)
        frames.append(df)
        have += len(df)
    if not frames:
        return _BUILD[task]({k: v[:0] for k, v in _DRAW[task](rng, 1).items() if k not in ("valid", "key")}, task, 0)
    return pd.concat(frames, ignore_index=True).iloc[:n].reset_index(drop=True)


def max_difficulty(task, base=10):
    """Largest difficulty the heuristic of `task` can give in base 10 (difficulty_sd) or 2."""
    _check(task)
    if base not in (2, 10):
        raise ValueError(f"base must be 2 or 10, got {base!r}")
    if task in ("addition", "multiplication", "division"):
        return arithmetic.max_difficulty(task, base)
    if task == "exponentiation":
        return exponentiation.max_difficulty(base)
    if task == "text":
        return 0
    return lists.max_difficulty(task, base)


__all__ = ["TASKS", "ALL_TASKS", "generate", "solve", "max_difficulty"]
