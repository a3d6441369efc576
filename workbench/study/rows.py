"""What a study row must be, checked where rows enter: a study folder read (`published.read_study`,
so also the leaderboard, publishing and notebook 04), and the intervals the leaderboard ranks.

    results table (cpu-study.csv)          study, encoding, task, digits, seed, metric, score
    intervals table (cpu-study-intervals)  study, encoding, task, digits, metric, mean, low, high[, seeds]

Text is text: no control characters (a name printed to a terminal could retitle or clear it) and
no empty cell; the encoding and task registered; the metric one of the results schema's. digits is
a positive integer, seed a non-negative one, seeds a positive one. Every number is finite: a score
of log-sMAPE, exact match or accuracy lies in [0, 1], a perplexity is at least 1, and an interval
holds its own mean (low <= mean <= high). No two rows share a cell (study, encoding, task, digits),
metric and seed (a results row) or a cell and metric (an intervals row). Across the two tables, an
interval never claims more seeds than the results table holds for its cell and metric.

A row that is none of these is a ValueError of one line naming the file, the row (counted from 1
after the header) and the column, and showing the value as Python writes it (so that a control
character shows as \\x1b, never acts).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .. import encoders, tasks
from ..results import METRICS, PERPLEXITIES

CELL = ["study", "encoding", "task", "digits"]
TABLE_COLUMNS = CELL + ["seed", "metric", "score"]
INTERVAL_COLUMNS = CELL + ["metric", "mean", "low", "high"]
TEXT = ("study", "encoding", "task", "metric")
# C0 and C1 controls and DEL: what a terminal acts on instead of showing
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
SLACK = 1e-9  # a bootstrap's mean may sit a rounding error outside its interval


def check_rows(frame: pd.DataFrame, where, columns: list[str], hint: str = "", merged: bool = False) -> pd.DataFrame:
    """`frame` (a results table if `columns` holds "seed", else an intervals table) with digits,
    seed and seeds as integers and the scores as floats, if every row is a study row (the module
    docstring); else a ValueError naming `where` (the file), the row and the column. `hint` ends a
    missing column's message (how such a file is made). `merged`: the intervals of several folders,
    where a folder that counted no seeds leaves its rows' seeds empty (kept as NaN)."""
    if frame.empty:
        return frame
    if lacking := [c for c in columns if c not in frame.columns]:
        raise ValueError(f"{where} lacks column(s) {lacking}: not a study table{hint}")
    frame = frame.reset_index(drop=True)
    for column in TEXT:
        _check_text(frame, where, column)
    for column, known, what in (
        ("encoding", [*encoders.names(), _variant()], "is its file in workbench/encoders/?"),
        ("task", tasks.names(), "is its task registered?"),
    ):
        if unknown := sorted(set(frame[column]) - set(known)):
            raise ValueError(
                f"{where} holds rows of {column} {unknown}, which is not registered ({what}); "
                f"registered: {', '.join(known)}"
            )
    _fail_at(frame, where, "metric", ~frame.metric.isin(METRICS), f"is no metric (one of {', '.join(METRICS)})")
    typed = {"digits": _integers(frame, where, "digits", 1)}
    if "seed" in columns:
        typed["seed"] = _integers(frame, where, "seed", 0)
        typed["score"] = _scores(frame, where, "score")
        key = CELL + ["metric", "seed"]
    else:
        for column in ("mean", "low", "high"):
            typed[column] = _scores(frame, where, column)
        if "seeds" in frame:
            counted = frame.seeds.notna() if merged else np.ones(len(frame), dtype=bool)
            seeds = _integers(frame[counted], where, "seeds", 1)
            typed["seeds"] = seeds if counted.all() else seeds.astype(float).reindex(frame.index)
        outside = (typed["low"] > typed["mean"] + SLACK) | (typed["mean"] > typed["high"] + SLACK)
        _fail_at(
            frame.assign(
                mean=[f"{m!r} [{lo!r}, {hi!r}]" for m, lo, hi in zip(*(typed[c] for c in ("mean", "low", "high")))]
            ),
            where,
            "mean",
            outside,
            "lies outside its own interval [low, high]",
            quote=False,
        )
        key = CELL + ["metric"]
    frame = frame.assign(**typed)
    repeated = frame.duplicated(key, keep=False)
    if repeated.any():
        first, again = frame.index[repeated][:2]
        raise ValueError(
            f"{where}, row {again + 1}: repeats row {first + 1}'s {', '.join(key)} "
            f"({', '.join(str(frame.at[again, k]) for k in key)}): one row per {' and '.join(key[len(CELL) :])} of a cell"
        )
    return frame


def check_seeds_held(table: pd.DataFrame, intervals: pd.DataFrame, table_path, intervals_path) -> None:
    """Refuse an interval that claims more seeds than `table` (the same folder's results) holds
    rows of for its cell and metric: a mean of one seed shown as a mean of three."""
    if intervals.empty or "seeds" not in intervals:
        return
    held = (table.groupby(CELL + ["metric"]).seed.nunique() if len(table) else pd.Series(dtype=int)).rename("held")
    joined = intervals.join(held, on=CELL + ["metric"]) if len(held) else intervals.assign(held=0)
    joined["held"] = joined.held.fillna(0).astype(int)
    more = joined.seeds > joined.held
    if more.any():
        row = joined.index[more][0]
        r = joined.loc[row]
        raise ValueError(
            f"{intervals_path}, row {row + 1}, column 'seeds': {int(r.seeds)} seeds claimed for "
            f"{_cell(r)} {r.metric}, but {table_path} holds {r.held} seed(s) of it"
        )


def _variant() -> str:
    from .parts import VARIANT  # the exploratory runs' encoding name, drawn beside the registered ones

    return VARIANT


def _cell(row) -> str:
    return f"{row.study} {row.encoding} {row.task} d={row.digits}"


def _check_text(frame: pd.DataFrame, where, column: str) -> None:
    values = frame[column]
    text = values.map(lambda v: isinstance(v, str))
    _fail_at(frame, where, column, ~text | (values.astype(str).str.strip() == ""), "is empty or not a name")
    _fail_at(frame, where, column, values.astype(str).str.contains(CONTROL), "holds a control character")


def _integers(frame: pd.DataFrame, where, column: str, low: int) -> pd.Series:
    number = pd.to_numeric(frame[column], errors="coerce").astype(float)
    bad = ~np.isfinite(number) | (number != np.floor(number)) | (number < low) | (number > 2**53)
    kind = "a positive integer" if low == 1 else "an integer >= 0"
    _fail_at(frame, where, column, bad, f"is not {kind}")
    return number.astype(np.int64)


def _scores(frame: pd.DataFrame, where, column: str) -> pd.Series:
    number = pd.to_numeric(frame[column], errors="coerce").astype(float)
    _fail_at(frame, where, column, ~np.isfinite(number), "is not a finite number")
    perplexity = frame.metric.isin(PERPLEXITIES)
    _fail_at(frame, where, column, perplexity & (number < 1), "is below 1, and a perplexity is at least 1")
    _fail_at(frame, where, column, ~perplexity & ((number < 0) | (number > 1)), "lies outside [0, 1], a score's range")
    return number


def _fail_at(frame: pd.DataFrame, where, column: str, bad, why: str, quote: bool = True) -> None:
    """A ValueError naming the first row of `bad` (and how many more), if any."""
    bad = np.asarray(bad, dtype=bool)
    if not bad.any():
        return
    rows = np.flatnonzero(bad)
    value = frame[column].iloc[rows[0]]
    value = value.item() if isinstance(value, np.generic) else value  # 7.5, not np.float64(7.5)
    shown = repr(value) if quote else str(value)
    more = f" (and {len(rows) - 1} more row(s))" if len(rows) > 1 else ""
    raise ValueError(f"{where}, row {frame.index[rows[0]] + 1}, column {column!r}: {shown[:80]} {why}{more}")
