"""The length axis of the zoo's second wave (docs/study/zoo2.md, "Length-generalisation axis"):
models trained on addition with operands of at most d = 4 digits (`parts.length_plan`) answer
additions whose operands are integers of exactly L digits, L = 4 (the training length) ... 8.

Abacus, position coupling and reversed digits claim that a model trained on short numbers adds
longer ones; the leaderboard's protocols never test beyond the training length, so this is the one
place that claim is measured. Questions of length L are the task's own generator at the decade
L - 1 with at most L significant digits (`Regime((L - 1, L - 1), L)`), which draws integers of
exactly L digits there; the test split of a run's seed, so every encoding of a seed answers the same
questions (paired), and at L > 4 none was ever trained on.

    python -m workbench.experiments study --studies zoo2_length --out runs/zoo2            # train
    python -m workbench.experiments study --studies zoo2_length --out runs/zoo2 --score-length

`length_scores` writes OUT/cpu-study-length.csv (one row per run, length and question), resumable
run by run; `length_cells` gives each encoding's mean per length with its 95 % interval (the
study's hierarchical bootstrap) and, per length, the leaderboard's verdict against single digit
(`stats.versus`: intervals apart and means more than δ apart).
"""

from __future__ import annotations

import pandas as pd

from ..runs.atomic import write_atomic
from ..runs.outputs import output_path
from ..tasks import Regime, generate
from .parts import LENGTH_DIGITS, ZOO2_LENGTH
from .questions import _answer, _scored_before, _unscored
from .stats import hierarchical_bootstrap, versus

LENGTH_FILE = "cpu-study-length.csv"
LENGTHS = tuple(range(LENGTH_DIGITS, 2 * LENGTH_DIGITS + 1))  # d ... 2d
QUESTIONS = 500
CONTROL = "single_digit"


def length_questions(length: int, seed: int, n: int = QUESTIONS) -> pd.DataFrame:
    """`n` addition questions of the test split of `seed` whose operands are integers of exactly
    `length` digits (a sign apart)."""
    if not 1 <= length <= 15:
        raise ValueError(f"a length of {length} digits: the generator writes 1 ... 15")
    return generate("addition", n, seed=seed, split="test", regime=Regime((length - 1, length - 1), length))


def length_scores(out, lengths=LENGTHS, n: int = QUESTIONS, which=(ZOO2_LENGTH,), **selection) -> pd.DataFrame:
    """Every finished run of `which` in OUT (narrowed by `select`'s `selection`) answers `n`
    questions of each length: one row per run, length and question (the study's columns, `length`,
    the question, prediction, score, exact match, tokens), written to OUT/cpu-study-length.csv after
    every run. Runs already scored there are not scored again; a file scored at other lengths or
    another n is refused."""
    out = output_path(out, "out")
    path = out / LENGTH_FILE
    done = _scored_before(path, ["run", "length", "n"])
    if len(done) and (set(done["length"]) != set(lengths) or set(done["n"]) != {n}):
        raise ValueError(
            f"{path} holds lengths {sorted(set(done['length']))} of n = {sorted(set(done['n']))}, not "
            f"{list(lengths)} of n = {n}: score into another folder, or move the file aside"
        )
    parts = [done] if len(done) else []
    for r in _unscored(out, which, done, **selection):
        if r.task != "addition":
            raise ValueError(f"{r.name} trains {r.task}: the length axis asks additions only")
        for length in lengths:
            parts.append(_answer(out, r, length_questions(length, r.seed, n)).assign(length=length, n=n))
        table = pd.concat(parts, ignore_index=True)
        write_atomic(path, lambda tmp: table.to_csv(tmp, index=False))  # after every run: resumable
    return pd.concat(parts, ignore_index=True) if parts else done


def length_cells(table: pd.DataFrame, draws: int = 2000) -> pd.DataFrame:
    """Per encoding, length and metric (log-sMAPE, exact match): the seed mean with its 95 %
    interval (runs, then questions, resampled), and how many runs and answers."""
    rows = []
    for (encoding, length), cell in table.groupby(["encoding", "length"]):
        for metric, column in (("log_smape", "score"), ("exact_match", "exact")):
            per_run = [g[column].to_numpy(dtype=float) for _, g in cell.groupby("run")]
            mean, low, high = hierarchical_bootstrap(per_run, draws)
            rows.append(
                dict(encoding=encoding, length=length, metric=metric, mean=mean, low=low, high=high)
                | dict(runs=len(per_run), answers=len(cell))
            )
    return pd.DataFrame(rows)


def against_control(cells: pd.DataFrame, control: str = CONTROL) -> pd.DataFrame:
    """Every other encoding against `control`, per length and metric, under the leaderboard's rule
    (`stats.versus`): "ahead" names the one whose interval lies above and whose mean is more than δ
    higher, else "overlap" or within the spread."""
    keys, base = ["length", "metric"], cells[cells.encoding == control]
    parts = []
    for e in sorted(set(cells.encoding) - {control}):
        both = versus(cells[cells.encoding == e], base, keys, e, control)
        names = {f"{k}_{e}": k for k in ("mean", "low", "high")} | {f"{k}_{control}": f"control_{k}" for k in ("mean", "low", "high")}
        parts.append(both.rename(columns=names).assign(encoding=e, control=control))
    if not parts:
        raise ValueError(f"no encoding beside {control} to compare")
    return pd.concat(parts, ignore_index=True)[["encoding", *keys, "mean", "low", "high", "control", "control_mean", "control_low", "control_high", "ahead"]]
