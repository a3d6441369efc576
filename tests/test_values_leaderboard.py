"""The leaderboard's ranks against a brute-force oracle (issue 40).

The rule (workbench/leaderboard.py): within one protocol cell -- one protocol, one task, one d --
an encoding's rank is 1 + the number of encodings of that cell whose 95 % interval lies entirely
above its own (their low > its high). Touching intervals (low == high) do not count as apart, a
degenerate interval (low == high) is an interval like any other, equal intervals tie. Only the
task's own metric is ranked, and only the protocols' studies (Study 2b and the multi-task zoo; Study
1 and the precision zoo). The oracle enumerates every pair of rows by hand, with Python floats."""

import itertools

import numpy as np
import pandas as pd
import pytest

from workbench import encoders, leaderboard, study, tasks

MULTITASK_STUDIES = (study.NUMERIC_CHECKPOINT, study.ZOO_MULTITASK)
PRECISION_STUDIES = ("precision", study.ZOO_PRECISION)


def row(study_, encoding, task, digits, low, high, metric=None, mean=None):
    return dict(
        study=study_,
        encoding=encoding,
        task=task,
        digits=digits,
        metric=metric or tasks.get(task).metric,
        mean=(low + high) / 2 if mean is None else mean,
        low=low,
        high=high,
    )


def oracle_ranks(intervals: pd.DataFrame, delta: float = study.DELTA) -> dict:
    """{(protocol, task, digits, encoding): rank}, by enumerating the rows of each cell pair by pair:
    another encoding is above when its interval lies entirely above and its mean is more than
    `delta` higher."""
    protocol_of = {s: "multitask" for s in MULTITASK_STUDIES} | {s: "precision" for s in PRECISION_STUDIES}
    kept = [
        r
        for r in intervals.to_dict("records")
        if r["study"] in protocol_of and r["metric"] == tasks.get(r["task"]).metric
    ]
    ranks = {}
    for r in kept:
        cell = (protocol_of[r["study"]], r["task"], r["digits"])
        above = 0
        for other in kept:
            if (
                (protocol_of[other["study"]], other["task"], other["digits"]) == cell
                and other["low"] > r["high"]
                and other["mean"] - r["mean"] > delta
            ):
                above += 1
        ranks[cell + (r["encoding"],)] = 1 + above
    return ranks


def board_ranks(board: pd.DataFrame) -> dict:
    return {
        (p, t, int(d), e): int(r)
        for p, t, d, e, r in zip(board.protocol, board.task, board.digits, board.encoding, board["rank"])
    }


def grid_intervals(seed: int) -> pd.DataFrame:
    """Random intervals on a grid of tenths, so that touching, degenerate and equal intervals are
    common; every protocol cell, the same encodings at several d, rows the board must leave out."""
    rng = np.random.default_rng(seed)
    rows = []

    def interval():
        low = int(rng.integers(0, 8))
        return low / 10, (low + int(rng.integers(0, 3))) / 10  # width 0 (degenerate), 0.1 or 0.2

    for task in ("addition", "minmax", "division"):  # multi-task protocol: d is Study 2's, 1
        for _k, encoding in enumerate(study.ENCODINGS + study.zoo_encodings()[:3]):
            studied = study.NUMERIC_CHECKPOINT if encoding in study.ENCODINGS else study.ZOO_MULTITASK
            rows.append(row(studied, encoding, task, 1, *interval()))
    for task in study.PRECISION_TASKS:
        for digits in (1, 2, 3, 4):
            for encoding in study.ENCODINGS + study.zoo_encodings()[:3]:
                studied = "precision" if encoding in study.ENCODINGS else study.ZOO_PRECISION
                rows.append(row(studied, encoding, task, digits, *interval()))
    # never ranked: another metric than the task's own, Study 2, another study at the same d
    for encoding in study.ENCODINGS:
        rows.append(row(study.NUMERIC_CHECKPOINT, encoding, "addition", 1, 0.95, 1.0, metric="exact_match"))
        rows.append(row("multitask", encoding, "addition", 1, 0.97, 0.99))
        rows.append(row("budget_1M", encoding, "multiplication", 4, 0.97, 0.99))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(6))
def test_every_rank_is_the_brute_force_count_of_intervals_entirely_above(seed):
    """Bugs: touching intervals counted as apart (>= for >); ranks over a protocol and task across
    every d (or across the protocols); another metric's or another study's rows ranked with them."""
    intervals = grid_intervals(seed)
    board = leaderboard.leaderboard(intervals)
    expected = oracle_ranks(intervals)
    assert board_ranks(board) == expected
    assert len(board) == len(expected)  # nothing ranked twice, nothing left out


def test_the_boundaries_of_the_rule_by_hand():
    """Touching, degenerate, equal and barely apart intervals, one case per cell (d)."""
    eps = 1e-12
    cases = {  # d: [(encoding, low, high)], expected ranks
        1: ([("bittokens", 0.5, 0.7), ("fone", 0.3, 0.5)], {"bittokens": 1, "fone": 1}),  # touching: tie
        2: ([("bittokens", 0.5 + eps, 0.7), ("fone", 0.3, 0.5)], {"bittokens": 1, "fone": 2}),  # apart by 1e-12
        3: (
            [("bittokens", 0.6, 0.6), ("fone", 0.6, 0.6), ("xval", 0.2, 0.6)],  # degenerate and equal; touching
            {"bittokens": 1, "fone": 1, "xval": 1},
        ),
        4: (
            [("bittokens", 0.6, 0.6), ("fone", 0.6 - eps, 0.6 - eps), ("xval", 0.1, 0.2)],
            {"bittokens": 1, "fone": 2, "xval": 3},
        ),  # a degenerate interval just below another
    }
    rows = [row("precision", e, "multiplication", d, lo, hi) for d, (given, _) in cases.items() for e, lo, hi in given]
    board = leaderboard.leaderboard(pd.DataFrame(rows), delta=0.0)  # the interval rule alone
    for d, (_, expected) in cases.items():
        cell = board[board.digits == d]
        assert dict(zip(cell.encoding, cell["rank"])) == expected, f"d={d}"


def test_a_gap_within_the_cross_cpu_spread_shares_a_rank():
    """Apart intervals whose means lie at most study.DELTA apart share a rank; a gap just above it
    does not."""
    d = study.DELTA
    rows = [
        row("precision", "bittokens", "division", 1, 0.5 + d - 0.001, 0.5 + d + 0.01, mean=0.5 + d),
        row("precision", "fone", "division", 1, 0.49, 0.5 + d - 0.002, mean=0.5),
        row("precision", "bittokens", "division", 2, 0.5 + d - 0.001, 0.5 + d + 0.01, mean=0.5 + d + 0.002),
        row("precision", "fone", "division", 2, 0.49, 0.5 + d - 0.002, mean=0.5),
    ]
    ranks = board_ranks(leaderboard.leaderboard(pd.DataFrame(rows)))
    assert ranks == {
        ("precision", "division", 1, "bittokens"): 1,
        ("precision", "division", 1, "fone"): 1,
        ("precision", "division", 2, "bittokens"): 1,
        ("precision", "division", 2, "fone"): 2,
    }


def test_an_encoding_far_ahead_at_one_d_does_not_push_the_others_down_at_another_d():
    """The same encodings at d = 1 and d = 2; BitTokens is far ahead only at d = 1, and the two
    protocols share a task name (multiplication) without sharing a cell."""
    rows = [
        row("precision", "bittokens", "multiplication", 1, 0.9, 1.0),
        row("precision", "fone", "multiplication", 1, 0.1, 0.2),
        row("precision", "bittokens", "multiplication", 2, 0.1, 0.2),
        row("precision", "fone", "multiplication", 2, 0.1, 0.2),
        row(study.NUMERIC_CHECKPOINT, "fone", "multiplication", 1, 0.0, 0.05),
        row(study.ZOO_MULTITASK, "abacus", "multiplication", 1, 0.0, 0.05),
    ]
    ranks = board_ranks(leaderboard.leaderboard(pd.DataFrame(rows)))
    assert ranks == {
        ("precision", "multiplication", 1, "bittokens"): 1,
        ("precision", "multiplication", 1, "fone"): 2,
        ("precision", "multiplication", 2, "bittokens"): 1,
        ("precision", "multiplication", 2, "fone"): 1,
        ("multitask", "multiplication", 1, "fone"): 1,
        ("multitask", "multiplication", 1, "abacus"): 1,
    }


def test_the_tables_mean_rank_is_the_mean_of_the_protocols_ranks():
    """The multi-task table's "mean rank" averages each encoding's ranks over the protocol's tasks
    (the precision protocol's ranks, at their own d, never enter it)."""
    intervals = grid_intervals(7)
    board = leaderboard.leaderboard(intervals)
    expected = {}
    for (protocol, _task, _digits, encoding), rank in oracle_ranks(intervals).items():
        if protocol == "multitask":
            expected.setdefault(encoding, []).append(rank)
    wide = leaderboard.table(board)
    got = dict(zip(wide.index, wide["mean rank"]))
    assert got == {encoders.label(e): round(float(np.mean(r)), 2) for e, r in expected.items()}
    assert list(wide["mean rank"]) == sorted(wide["mean rank"])  # best mean rank first


def test_pairs_of_the_oracle_cover_every_boundary():
    """The grids above hold every kind of boundary the rule has (else the comparison above would
    say nothing about them): touching pairs, degenerate intervals, equal intervals."""
    touching = degenerate = equal = 0
    for seed in range(6):
        frame = grid_intervals(seed)
        for (_, a), (_, b) in itertools.combinations(frame.iterrows(), 2):
            if (a.task, a.digits) != (b.task, b.digits):
                continue
            touching += a.low == b.high or b.low == a.high
            equal += (a.low, a.high) == (b.low, b.high)
        degenerate += int((frame.low == frame.high).sum())
    assert touching > 50 and degenerate > 50 and equal > 50
