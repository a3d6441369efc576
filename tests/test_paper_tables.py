"""The paper's Tables 1-15 as data: recomputed from the released per-sample results (Tables 1-3),
checked against the released Figure 4 values (Tables 4, 7) and for internal consistency (9-12)."""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench import tasks
from workbench.frontier import official, paper

OFFICIAL = Path(
    os.environ.get(official.ENV, Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "official_bittokens")
)
needs_official = pytest.mark.skipif(not OFFICIAL.is_dir(), reason="released BitTokens data not present")

# Tables 1 and 2 print percent with one decimal, Table 3 whole tokens: a recomputed cell must round
# to the printed one (+-0.1 printed units for 1 and 2, +-0.5 tokens for 3).
TOLERANCE = {1: 0.1, 2: 0.1, 3: 0.5}
# Table 3, Gemini 2.5 Flash without reasoning: a few runaway generations that hit the ~65.5k output
# cap are in combined_samples_long.csv; the paper (and the released avg_tokens_perf file) average
# without them. The printed value is the mean over that model's samples with <= 100 tokens.
EXPECTED_TABLE_DIFFERENCES = {
    (3, "Gemini 2.5 Flash", "none", "Mult"),
    (3, "Gemini 2.5 Flash", "none", "Div"),
    (3, "Gemini 2.5 Flash", "none", "Mean"),
    (3, "Gemini 2.5 Flash", "none", "Std"),
    (3, "Gemini 2.5 Flash", "none", "Exp"),
}


def test_tables_shapes_and_accessors():
    shapes = {
        1: (13, 9),
        2: (13, 6),
        3: (13, 9),
        4: (8, 6),
        5: (6, 10),
        6: (3, 6),
        7: (11, 6),
        8: (8, 7),
        9: (8, 3),
        10: (8, 6),
        11: (1, 2),
        12: (8, 6),
        13: (8, 4),
        14: (8, 4),
        15: (11, 9),
    }
    for n, shape in shapes.items():
        assert paper.table(n).shape == shape, n
    assert paper.table(1).loc[("DeepSeek v3.1", "maximal"), "Div"] == 84.2
    assert paper.table(5).loc["Div", ("FoNE", "input")] == 6.1
    assert paper.table(15).loc["Std", ("BitToken", 1.0)] == 0.324
    bars = paper.figure4_multitask()
    assert len(bars) == 8 * 5 and set(bars.columns) == {"task", "metric", "method", "value"}
    assert bars.query("task == 'Mult' and method == 'BitToken (Ours)'")["value"].item() == 0.991
    assert len(paper.figure4_solotask()) == 11 * 5
    with pytest.raises(ValueError):
        paper.table(16)


@needs_official
@pytest.mark.parametrize("n", [1, 2, 3])
def test_frontier_tables_recomputed_from_samples(n):
    ours, printed = official.recompute_table(n), paper.table(n)
    assert ours.index.equals(printed.index) and list(ours.columns) == list(printed.columns)
    off = (ours - printed).abs() > TOLERANCE[n] + 1e-9
    found = {(n, m, r, c) for (m, r), row in off.iterrows() for c, bad in row.items() if bad}
    assert found == {k for k in EXPECTED_TABLE_DIFFERENCES if k[0] == n}


@needs_official
def test_table3_gemini_flash_excludes_runaway_generations():
    s = official.load_samples()
    s = s[(s.paper_model == "Gemini 2.5 Flash") & (s.paper_reasoning == "none") & (s.tokens <= 100)]
    means = s.groupby("task")["tokens"].mean().rename(paper.table_columns(3))
    for _, model, reasoning, column in EXPECTED_TABLE_DIFFERENCES:
        assert abs(means[column] - paper.table(3).loc[(model, reasoning), column]) <= 0.5


@needs_official
def test_table1_matches_released_aggregate():
    agg = pd.read_csv(OFFICIAL / "perf_by_model_reasoning_task.csv")
    ours = official.recompute_table(1)
    for row in agg.itertuples():
        model, reasoning = official.MODELS[(row.model, row.reasoning)]
        task = {tasks.get(t).released_name: t for t in official.released_tasks()}[row.task]
        assert ours.loc[(model, reasoning), paper.table_columns(1)[task]] == pytest.approx(100 * row.mean_performance)


def _released(name):
    return pd.read_csv(OFFICIAL / name).set_index("Task")


@needs_official
def test_table4_against_multitask_csv():
    released, t4 = _released("multitask.csv"), paper.table(4)
    for task in released.index.drop("Fineweb"):
        for method in paper.METHODS:
            assert released.loc[task, method] == t4.loc[task, method], (task, method)
    # Known inconsistency: multitask.csv's Fineweb perplexities (behind Figure 4) are not Table 4's
    # (67.60 vs 74.83 for Subword, ...); the paper prints the larger ones. Neither set is derived.
    assert (released.loc["Fineweb", paper.METHODS].astype(float).values < t4.loc["Fineweb", paper.METHODS].values).all()


@needs_official
def test_table7_against_solotask_csv():
    released, t7 = _released("solotask.csv"), paper.table(7)
    checked = 0
    for task in released.index:
        for method in paper.METHODS:
            value = pd.to_numeric(str(released.loc[task, method]).strip(), errors="coerce")
            if np.isfinite(value):
                assert value == t7.loc[task, method], (task, method)
                checked += 1
    assert checked >= 30  # solotask.csv leaves some cells blank


# Deltas printed in Tables 9-12 that do not equal value - baseline (baselines in paper.DELTA_BASELINE),
# beyond the +-0.0005 (+-0.005 for perplexity) that rounding allows. (table, task, column, stated, derived)
PAPER_DELTA_ERRATA = [
    (9, "Min/Max", "Base 10", -0.007, -0.008),  # measured against Sum (0.999) while the rest use Zero Pad (1.000)
    (10, "Add", "xVal", 0.007, 0.005),
    (10, "Div", "xVal", -0.003, 0.003),  # sign flipped: 0.096 vs 0.093
    (10, "Fineweb", "Single Digit", 0.37, 10.23),
    (10, "Fineweb text only", "Subword", 5.06, 3.33),
    (10, "Fineweb text only", "Single Digit", 6.74, 11.45),
    (10, "Fineweb text only", "xVal", 31.50, 34.80),  # copies the Fineweb delta of the row above
    (10, "Fineweb text only", "BitToken", 34.80, 28.38),  # equals the xVal delta that should be there
]


def test_ablation_deltas_are_value_minus_baseline():
    found = []
    for n in (9, 10, 11, 12):
        stated, derived = paper.stated_deltas(n), paper.derived_deltas(n)
        for task in stated.index:
            tol = 0.0051 if stated.loc[task, "Metric"] == "Perplexity" else 0.00051
            for column in stated.columns.drop("Metric"):
                if abs(stated.loc[task, column] - derived.loc[task, column]) > tol:
                    found.append(
                        (
                            n,
                            task,
                            column,
                            stated.loc[task, column],
                            round(derived.loc[task, column], 2 if tol > 0.001 else 3),
                        )
                    )
    assert found == PAPER_DELTA_ERRATA


def test_table4_baseline_is_not_what_tables_9_and_10_compare_bittokens_to():
    # The BitToken deltas of Tables 9/10 fit Table 8's Zero Pad run, not Table 4's BitToken. Table 4's
    # BitToken is Table 8's Sum except Sorting (0.998 vs 0.990: the paper is inconsistent there).
    t4, t8 = paper.table(4), paper.table(8)
    same = t4["BitToken (Ours)"] == t8["Sum"]
    assert list(same[~same].index) == ["Sorting"]
    d9 = paper.stated_deltas(9)["Layer norm"]
    assert np.allclose(paper.table(9)["Layer norm"] - t8["Zero Pad"], d9, atol=0.0051)
    assert not np.allclose(paper.table(9)["Layer norm"] - t4["BitToken (Ours)"], d9, atol=0.0051)


def test_table5_tokens():
    t5 = paper.table(5)
    # single-token encodings need far fewer tokens than digit tokenizers for every task
    for task in t5.index:
        total = {m: t5.loc[task, (m, "input")] + t5.loc[task, (m, "output")] for m in paper.METHODS}
        assert total["BitToken (Ours)"] < total["Subword"] < total["Single Digit"] or task == "Interval"
