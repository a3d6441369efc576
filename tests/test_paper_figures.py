"""Data preparation behind notebook 04: checked against the paper's tables, the released files
(skipped when absent) and closed-form statistics."""

import math
import os
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench import encoders, results
from workbench.figures import paper as pf
from workbench.frontier import paper
from workbench.tasks import generate, numeric

OFFICIAL = Path(
    os.environ.get("WORKBENCH_OFFICIAL_DATA")
    or Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "official_bittokens"
)
needs_official = pytest.mark.skipif(
    not (OFFICIAL / "combined_samples_long.csv").exists(), reason="released BitTokens data not available"
)


@pytest.fixture(scope="module")
def samples():
    if not (OFFICIAL / "combined_samples_long.csv").exists():
        pytest.skip("released BitTokens data not available")
    return pf.sources.official_samples(OFFICIAL)


def test_radar_data_equals_table_1_rows():
    table = paper.table(1).reset_index()
    radar = pf.frontier.radar_data(pf.sources.frontier_from_tables())
    assert len(radar) == len(table) == 13
    for _, row in table.iterrows():
        mine = radar[(radar["model"] == row["Model"]) & (radar["reasoning"] == row["Reasoning"])]
        assert len(mine) == 1
        for column, task in pf.sources.PAPER_TASKS.items():
            if column in table.columns:
                assert mine[task].item() == pytest.approx(row[column])


def test_radar_figure_draws_each_table_row_as_a_closed_polygon():
    table = paper.table(1).reset_index()
    fig = pf.frontier.radar_figure(pf.sources.frontier_from_tables())
    assert len(fig.data) == len(table)
    gpt5 = next(t for t in fig.data if t.name == "GPT 5" and t.subplot == "polar")
    row = table[(table["Model"] == "GPT 5") & (table["Reasoning"] == "maximal")].iloc[0]
    expected = [row[pf.sources.TASK_LABELS[t]] for t in pf.sources.RADAR_ORDER]
    assert list(gpt5.r) == pytest.approx(expected + expected[:1])
    minimal = next(t for t in fig.data if t.name == "GPT 5" and t.subplot == "polar2")  # minimal reasoning
    assert minimal.r[1] == pytest.approx(
        table[(table["Model"] == "GPT 5") & (table["Reasoning"] == "minimal")].iloc[0]["Mult"]
    )
    assert gpt5.line.color == minimal.line.color and gpt5.showlegend != minimal.showlegend  # one legend entry per model


def test_frontier_tables_join_performance_exact_and_tokens():
    frontier = pf.sources.frontier_from_tables()
    assert set(frontier["task"]) == set(numeric())
    assert len(frontier) == 13 * 9
    row = frontier[
        (frontier["model"] == "GPT 5") & (frontier["reasoning"] == "maximal") & (frontier["task"] == "exponentiation")
    ].iloc[0]
    t1, t2, t3 = (paper.table(n).reset_index() for n in (1, 2, 3))
    pick = lambda t: t[(t["Model"] == "GPT 5") & (t["Reasoning"] == "maximal")].iloc[0]["Exp"]
    assert row["performance"] == pytest.approx(pick(t1) / 100)
    assert row["exact"] == pytest.approx(pick(t2) / 100)
    assert row["tokens"] == pytest.approx(pick(t3))
    # list tasks have no exact-match column in Table 2
    assert frontier.loc[frontier["task"] == "sorting", "exact"].isna().all()


@needs_official
def test_per_sample_means_reproduce_tables_1_and_3(samples):
    tables = pf.sources.frontier_from_tables()
    both = pf.sources.frontier_from_samples(samples, drop_unknown_tokens=False).merge(
        tables, on=["model", "reasoning", "task"], suffixes=("", "_table")
    )
    assert len(both) == 13 * 9
    # Table 1 prints percentages with one decimal: rounding error at most 0.05 pp
    assert (100 * (both["performance"] - both["performance_table"])).abs().max() <= 0.05 + 1e-9
    # Table 3 (whole tokens) agrees except for Gemini 2.5 Flash without reasoning, whose released
    # samples contain runaway generations at the ~65k output cap that the printed table leaves out
    off = both[(both["tokens"] - both["tokens_table"]).abs() > 0.5 + 1e-9]
    assert len(off) <= 9 and set(zip(off["model"], off["reasoning"])) <= {("Gemini 2.5 Flash", "none")}
    for task in off["task"]:
        cell = samples[
            (samples["model"] == "Gemini 2.5 Flash") & (samples["reasoning"] == "none") & (samples["task"] == task)
        ]
        assert cell["tokens"].max() >= 65_000
    # dropping the "-1 = unknown" token counts can only raise the mean
    dropped = pf.sources.frontier_from_samples(samples).merge(
        tables, on=["model", "reasoning", "task"], suffixes=("", "_table")
    )
    assert (dropped["tokens"] >= dropped["tokens_table"] - 0.5).all()


def test_stability_spread_follows_the_binomial_standard_error():
    rng = np.random.default_rng(1)
    answers = pd.DataFrame(
        {"task": "minmax", "model": "m", "reasoning": "none", "performance": (rng.random(500) < 0.5).astype(float)}
    )
    spread = pf.difficulty.stability(answers, sizes=(25, 100, 400), draws=2000, seed=0)
    p = answers["performance"].mean()
    for row in spread.itertuples():
        assert row.std == pytest.approx(math.sqrt(p * (1 - p) / row.n), rel=0.1)
    assert spread["std"].is_monotonic_decreasing
    assert (spread["q95"] - spread["q05"]).is_monotonic_decreasing


def test_stability_is_reproducible_and_checks_arguments():
    answers = pd.DataFrame({"task": "add", "model": "m", "reasoning": "none", "performance": np.linspace(0, 1, 50)})
    a = pf.difficulty.stability(answers, sizes=(5, 10), draws=20, seed=3)
    pd.testing.assert_frame_equal(a, pf.difficulty.stability(answers, sizes=(5, 10), draws=20, seed=3))
    with pytest.raises(ValueError, match="draws"):
        pf.difficulty.stability(answers, draws=1)
    with pytest.raises(ValueError, match="positive"):
        pf.difficulty.stability(answers, sizes=(0, 10))


@needs_official
def test_stability_on_released_samples_shrinks_with_n(samples):
    spread = pf.difficulty.stability(samples, sizes=(25, 100, 500), draws=50, seed=0)
    median = spread.groupby("n")["std"].median()
    assert median[25] > median[100] > median[500]
    assert spread.loc[spread["n"] == 500, "std"].max() < 0.05  # the paper: stable at 500 samples


@needs_official
def test_difficulty_curves_count_every_answer(samples):
    curves = pf.difficulty.difficulty_curves(samples)
    assert curves["n"].sum() == len(samples)
    weighted = (
        (curves["performance"] * curves["n"]).groupby([curves["task"], curves["model"], curves["reasoning"]]).sum()
    )
    means = samples.groupby(["task", "model", "reasoning"])["performance"].sum()
    pd.testing.assert_series_equal(weighted.sort_index(), means.sort_index(), check_names=False)


def test_official_folder_rejects_wrong_paths(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        pf.sources.official_folder(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="combined_samples_long.csv"):
        pf.sources.official_folder(tmp_path)


def test_method_scores_are_tables_4_and_7():
    for n in (4, 7):
        table = paper.table(n).reset_index()
        scores = pf.methods.method_scores(n)
        assert len(scores) == len(table) * len(pf.sources.PAPER_METHODS)
        for _, row in table.iterrows():
            for method, encoding in pf.sources.PAPER_METHODS.items():
                value = scores[(scores["row"] == row["Task"]) & (scores["encoding"] == encoding)]["value"]
                assert value.item() == pytest.approx(float(row[method]))
        assert set(scores.loc[scores["metric"] == "perplexity", "task"]) == {"text"}
    with pytest.raises(ValueError):
        pf.methods.method_scores(5)


def _results(**change):
    frame = pd.DataFrame(
        {
            "encoding": ["bittokens", "bittokens", "xval"],
            "task": ["addition", "addition", "text"],
            "metric": ["log_smape", "log_smape", "perplexity"],
            "value": [0.2, 0.4, 30.0],
            "seed": [0, 1, 0],
        }
    )
    for column, value in change.items():
        frame[column] = [value] + frame[column].tolist()[1:]
    return frame


def test_valid_results_pass_with_types():
    out = results.validate_results(_results().assign(extra="ignored"))
    assert list(out.columns) == results.RESULTS_COLUMNS
    assert out["seed"].dtype.kind == "i" and out["value"].dtype.kind == "f"


@pytest.mark.parametrize(
    "frame, message",
    [
        (_results().drop(columns="seed"), "lack column"),
        (_results(encoding="bpe"), "encoding"),
        (_results(task="calculus"), "task"),
        (_results(metric="mse"), "metric"),
        (_results(value=float("nan")), "finite"),
        (_results(value=1.5), "range"),
        (_results().assign(value=[0.2, 0.4, 0.5]), "range"),  # a perplexity below 1
        (_results(seed=-1), "seed"),
        (_results(seed=0.5), "seed"),
        (_results(seed=1), "repeat"),
    ],
)
def test_results_schema_rejects_bad_frames(frame, message):
    with pytest.raises(ValueError, match=message):
        results.validate_results(frame)


def test_read_results_names_a_missing_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        results.read_results(tmp_path / "missing.csv")
    _results().to_csv(tmp_path / "r.csv", index=False)
    assert len(results.read_results(tmp_path / "r.csv")) == 3


def test_results_from_summary_names_the_metrics():
    summary = pd.DataFrame(
        {"task": ["addition", "sorting"], "score": [0.7, 0.5], "exact": [0.1, 0.5], "encoding": "fone", "seed": 2}
    )
    out = results.results_from_summary(summary).set_index(["task", "metric"])["value"]
    assert out.to_dict() == {
        ("addition", "log_smape"): 0.7,
        ("sorting", "accuracy"): 0.5,
        ("addition", "exact_match"): 0.1,
    }


def _traces(fig, row, col):
    """The traces drawn in subplot (row, col) of a make_subplots figure."""
    axes = fig.get_subplot(row, col)
    x, y = axes.yaxis.anchor, axes.xaxis.anchor  # "x6", "y6"
    return [t for t in fig.data if t.xaxis == x and t.yaxis == y]


def test_methods_figure_adds_our_mean_over_seeds():
    fig = pf.methods.methods_figure(_results())
    ours = [t for t in _traces(fig, 3, 1) if t.name == "BitTokens"]
    assert len(ours) == 1 and list(ours[0].y) == pytest.approx([0.3])
    assert list(ours[0].error_y.array) == pytest.approx([np.std([0.2, 0.4], ddof=1)])
    xval_ppl = [t for t in _traces(fig, 3, 2) if t.name == "xVal"]
    assert list(xval_ppl[0].y) == [30.0]  # our perplexity fills our row's perplexity panel
    assert not any("not measured" in a.text for a in fig.layout.annotations)
    assert "± std over 1–2 seeds" in " ".join(a.text for a in fig.layout.annotations)


def test_methods_figure_rows_follow_the_paper_and_say_what_they_show():
    results = pd.DataFrame(
        {
            "encoding": "fone",
            "task": ["addition", "sorting", "minmax", "division"],
            "metric": ["log_smape", "accuracy", "accuracy", "log_smape"],
            "value": 0.5,
            "seed": 0,
        }
    )
    fig = pf.methods.methods_figure(results, source="results/x.csv")
    for row, expected in (
        (1, ["Min/Max", "Interval", "Sorting", "Add", "Mult", "Div"]),
        (2, ["Min/Max", "Interval", "Sorting", "Add", "Mult", "Div", "Exp", "Mean", "Std"]),
        (3, ["Min/Max", "Sorting", "Add", "Div"]),
    ):
        axis = fig.get_subplot(row, 1).xaxis
        assert list(axis.categoryarray) == expected
        names = {"Add": "log-sMAPE", "Div": "log-sMAPE", "Min/Max": "accuracy", "Sorting": "accuracy"}
        for text, label in zip(axis.ticktext, axis.tickvals):
            assert text.startswith(label) and (label not in names or names[label] in text)
    text = fig.layout.title.text + fig.layout.title.subtitle.text + " ".join(a.text for a in fig.layout.annotations)
    assert "results_csv" not in text and "Figure 4" in fig.layout.title.text
    assert "results/x.csv" in text and "one seed, no error bars" in text
    assert "regime not recorded" in text and "perplexity<br>not measured" in text
    assert "117M" in text and "10B tokens" in text  # the paper's regime


def test_regime_is_read_from_the_results_columns():
    results = _results().assign(preset="cpu-tiny", tokens=3e6, decades="0 1", max_digits=2)
    assert pf.methods.describe_regime(results) == (
        "cpu-tiny model, 3M tokens, operands 10<sup>0</sup> … 10<sup>2</sup>, ≤ 2 significant digits"
    )
    full = _results().assign(preset="paper", tokens=1e10, decades=None, max_digits=None)
    assert pf.methods.describe_regime(full) == (
        "paper model, 10B tokens, the paper's full operand range, all significant digits"
    )
    mixed = _results().assign(tokens=[1e6, 1e6, 2.5e5])
    assert pf.methods.describe_regime(mixed).startswith("1M tokens / 250k tokens, regime not recorded (preset, decades")
    fig = pf.methods.methods_figure(results)
    assert any("cpu-tiny model, 3M tokens" in a.text for a in fig.layout.annotations)


def test_frontier_series_stay_distinct():
    spread = (
        pf.difficulty.stability(pf.sources.official_samples(OFFICIAL), sizes=(25, 50), draws=2)
        if (OFFICIAL / "combined_samples_long.csv").exists()
        else None
    )
    rows = pd.DataFrame(paper.FRONTIER_ROWS, columns=["model", "reasoning"])
    if spread is None:
        spread = pd.concat([rows.assign(task=t, n=n, std=0.01) for t in ("addition", "std") for n in (25, 50)])
    fig = pf.difficulty.stability_figure(spread)
    styles = {(t.name, t.line.color, t.line.dash, t.marker.symbol) for t in fig.data}
    assert len(styles) == len({(t.name, t.line.dash) for t in fig.data}) == 13  # each series its own look
    assert (
        len({t.legendgroup for t in fig.data}) == len(set(pf.style.MODEL_COLORS.values())) == len(pf.style.MODELS) == 8
    )
    assert sum(t.showlegend is not False for t in fig.data) == 8  # one legend entry per model


def test_frontier_panels_hold_one_setting_each_and_every_series():
    """Review of issue 45: Figure 8 and the per-difficulty curves drew all 13 series in one panel per
    task. Now each task has a panel per reasoning setting, and every series is still drawn."""
    rows = pd.DataFrame(paper.FRONTIER_ROWS, columns=["model", "reasoning"])
    spread = pd.concat([rows.assign(task=t, n=n, std=0.01) for t in ("addition", "std", "sorting") for n in (25, 50)])
    curves = pd.concat([rows.assign(task="division", difficulty_sd=d, performance=0.5, n=9) for d in range(1, 30)])
    for fig, tasks in ((pf.difficulty.stability_figure(spread), 3), (pf.difficulty.difficulty_figure(curves), 1)):
        panels = {}
        for t in fig.data:
            panels.setdefault((t.xaxis, t.yaxis), []).append(t)
        assert len(panels) == 2 * tasks
        for traces in panels.values():
            dashes = {t.line.dash for t in traces}
            assert len(dashes) == 1 and len(traces) <= 8  # one setting: at most the eight models
        assert len(fig.data) == 13 * tasks  # every (model, setting) of Table 1, per task
        assert all(t.name in t.hovertemplate or t.name in str(t.hovertemplate) for t in fig.data)


def test_difficulty_bins_keep_every_share_and_use_one_set_of_bins():
    frames = {t: generate(t, 300, seed=0, split="test") for t in ("exponentiation", "mean")}
    half = {t: f.iloc[:150] for t, f in frames.items()}
    shares = pf.datasets.difficulty_distribution({"all": frames, "half": half})
    binned = pf.datasets.difficulty_bins(shares, bins=10)
    assert binned.groupby(["source", "task"])["share"].sum().to_numpy() == pytest.approx(np.ones(4))
    for task, part in binned.groupby("task"):
        bins = {source: set(zip(g["low"], g["high"])) for source, g in part.groupby("source")}
        assert bins["half"] <= bins["all"]  # one set of edges per task, whatever the source
        values = frames[task]["difficulty_sd"]
        assert part["low"].min() == values.min() and part["high"].max() >= values.max()
        assert len(part[part["source"] == "all"]) <= 10
    log = binned.groupby("task")["log"].first()
    assert bool(log["exponentiation"]) == (frames["exponentiation"]["difficulty_sd"].max() > 100)
    assert not log["mean"]


def test_binned_difficulty_curves_keep_counts_and_means():
    curves = pd.DataFrame(
        {
            "task": "mean",
            "model": "m",
            "reasoning": "none",
            "difficulty_sd": np.arange(30),
            "performance": np.linspace(0, 1, 30),
            "n": np.arange(1, 31),
        }
    )
    binned = pf.difficulty.bin_difficulty(curves, bins=4)
    assert len(binned) == 4 and binned["n"].sum() == curves["n"].sum()
    total = (binned["performance"] * binned["n"]).sum()
    assert total == pytest.approx((curves["performance"] * curves["n"]).sum())


def test_exponent_pairs_are_decimal_exponents_of_the_operands():
    frame = generate("multiplication", 300, seed=5, split="train")
    pairs = pf.datasets.exponent_pairs(frame)
    for column, operand in (("num1_exp", "num1"), ("num2_exp", "num2")):
        expected = [Decimal(x).adjusted() for x in frame[operand]]
        assert pairs[column].tolist() == expected
    with pytest.raises(ValueError, match="num1_exp"):
        pf.datasets.exponent_pairs(frame.drop(columns="num1_exp"))


def test_exponent_cells_without_questions_are_not_coloured_as_small_shares():
    """Review of issue 45: Figures 5 and 6 drew a cell without questions in the colour of the
    smallest shares."""
    frame = generate("addition", 3000, 0, "train")
    pairs = pf.datasets.exponent_pairs(frame)
    fig = pf.datasets.exponent_figure({"ours": frame}, "t")
    z = np.array(fig.data[0].z, dtype=float)
    counted = pairs.value_counts()  # an independent count: (num1_exp, num2_exp) -> questions
    for i, y in enumerate(fig.data[0].y):
        for j, x in enumerate(fig.data[0].x):
            n = counted.get((x, y), 0)
            assert np.isnan(z[i, j]) if n == 0 else z[i, j] == pytest.approx(100 * n / len(pairs)), (x, y)
    assert np.isnan(z).sum() > 100 and np.nansum(z) == pytest.approx(100)  # empty cells exist, and are NaN
    scale = {c.lower() for _, c in fig.layout.coloraxis.colorscale}
    assert fig.layout.plot_bgcolor.lower() not in scale  # what shows through a NaN cell is no share's colour


def test_difficulty_distribution_shares_sum_to_one():
    frames = {t: generate(t, 200, seed=0, split="test") for t in ("addition", "mean")}
    shares = pf.datasets.difficulty_distribution({"ours": frames})
    assert shares.groupby("task")["share"].sum().to_numpy() == pytest.approx([1.0, 1.0])
    counts = frames["addition"]["difficulty_sd"].value_counts()
    mine = shares[shares["task"] == "addition"].set_index("difficulty_sd")["share"]
    assert (mine * 200).round().astype(int).to_dict() == counts.to_dict()
    with pytest.raises(ValueError, match="difficulty_sd"):
        pf.datasets.difficulty_distribution({"bad": {"addition": frames["addition"].drop(columns="difficulty_sd")}})


@needs_official
def test_released_test_sets_feed_figures_5_to_7():
    sets = pf.sources.official_test_sets(OFFICIAL, ("addition", "multiplication"))
    assert len(pf.datasets.exponent_pairs(sets["addition"])) == 500
    fig = pf.datasets.exponent_figure({"released": sets["multiplication"]}, "t")
    assert len(fig.data) == 1 and np.nansum(np.array(fig.data[0].z, dtype=float)) == pytest.approx(100)
    assert pf.datasets.exponent_shares(sets["multiplication"])[1].sum() == 500


def test_figure_4_bars_are_the_paper_tables_and_low_bars_say_their_value():
    fig = pf.methods.methods_figure()
    for row, n in ((1, 4), (2, 7)):
        table = paper.table(n)
        scores = table[table["Metric"] != "Perplexity"]
        for trace in _traces(fig, row, 1):
            method = next(m for m, e in pf.sources.PAPER_METHODS.items() if encoders.label(e) == trace.name)
            assert list(trace.x) == list(scores.index)
            assert list(trace.y) == pytest.approx(scores[method].tolist())  # the bars are the table
            # xVal's 0.001 and 0.000 (Min/Max, Sorting) would be invisible bars: they carry "0.00"
            assert list(trace.text) == [f"{v:.2f}" if v < pf.methods.SMALL_BAR else "" for v in scores[method]]
    assert {t.name for t in fig.data} == {encoders.label(e) for e in pf.sources.PAPER_METHODS.values()}
    assert "Subword" in fig.layout.title.subtitle.text and "Triple digit" in fig.layout.title.subtitle.text


def test_figure_4_marks_a_cell_our_results_lack_as_not_available():
    results = pd.DataFrame(
        {
            "encoding": ["bittokens", "bittokens", "xval"],
            "task": ["addition", "minmax", "addition"],
            "metric": ["log_smape", "accuracy", "log_smape"],
            "value": [0.5, 0.0, 0.01],
            "seed": 0,
        }
    )
    fig = pf.methods.methods_figure(results)
    bars = {t.name: t for t in _traces(fig, 3, 1)}
    by_row = {name: dict(zip(t.x, zip(t.y, t.text))) for name, t in bars.items()}
    assert by_row["BitTokens"] == {"Add": (0.5, ""), "Min/Max": (0.0, "0.00")}
    # xVal has no Min/Max result: a bar of height 0 labelled n/a, not a silent gap like a 0.00
    assert by_row["xVal"] == {"Add": (0.01, "0.01"), "Min/Max": (0, "n/a")}
    assert pf.methods.bar_labels([np.nan, 0.0, 0.049, 0.05, 0.9]) == ["n/a", "0.00", "0.05", "", ""]


def test_text_from_a_results_file_is_escaped_in_figure_4():
    results = _results().assign(preset="<b>x</b>", tokens=1e6, decades="<i>0</i>", max_digits=2)
    fig = pf.methods.methods_figure(results, source="<script>r.csv")
    text = " ".join(a.text for a in fig.layout.annotations)
    assert "&lt;b&gt;x&lt;/b&gt; model" in text and "&lt;script&gt;r.csv" in text
    assert "<b>" not in text and "<script>" not in text


def test_released_folder_auto_is_the_documented_folder_when_present(monkeypatch, tmp_path):
    assert pf.sources.released_folder(None) is None
    monkeypatch.setenv("WORKBENCH_OFFICIAL_DATA", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="is not a directory"):  # set on purpose and wrong: said, not ignored
        pf.sources.released_folder("auto")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "combined_samples_long.csv").write_text("x\n")
    monkeypatch.setenv("WORKBENCH_OFFICIAL_DATA", str(tmp_path / "data"))
    assert pf.sources.released_folder("auto") == tmp_path / "data"
    monkeypatch.delenv("WORKBENCH_OFFICIAL_DATA")
    monkeypatch.setattr(pf.sources.official, "data_dir", lambda path=None: tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    assert pf.sources.released_folder("auto") is None  # a folder without the files: run without them


def test_distribution_distance_is_total_variation():
    shares = pd.DataFrame(
        {
            "source": ["a", "a", "b", "b", "c"],
            "task": "add",
            "difficulty_sd": [1, 2, 2, 3, 9],
            "share": [0.5, 0.5, 0.25, 0.75, 1.0],
        }
    )
    # |0.5 - 0| + |0.5 - 0.25| + |0 - 0.75| = 1.5, halved
    assert pf.datasets.distribution_distance(shares, "a", "b")["add"] == pytest.approx(0.75)
    assert pf.datasets.distribution_distance(shares, "a", "a")["add"] == 0
    assert pf.datasets.distribution_distance(shares, "a", "c")["add"] == pytest.approx(1.0)  # nothing in common


def test_radar_rings_are_labelled_between_spokes_and_absent_models_are_named():
    """Review of issue 45: the radial axis had no tick labels, and the models without a row in a
    panel's setting were missing without a note."""
    frontier = pf.sources.frontier_from_tables()
    fig = pf.frontier.radar_figure(frontier)
    spokes = 360 / len(pf.sources.RADAR_ORDER)
    for polar in (fig.layout.polar, fig.layout.polar2):
        radial = polar.radialaxis
        assert radial.showticklabels is not False and list(radial.tickvals) == [0, 25, 50, 75, 100]
        assert (90 - radial.angle) % spokes == pytest.approx(spokes / 2)  # halfway between two spokes
    notes = [a.text for a in fig.layout.annotations if "not drawn" in a.text]
    assert len(notes) == 2
    assert "maximal" in notes[0] and "Kimi K2 0905, Llama 4 Maverick" in notes[0]  # Table 1: no maximal rows
    assert "GPT OSS 120B" in notes[1] and "Kimi" not in notes[1]
    fewer = pf.frontier.radar_figure(frontier[~((frontier.model == "GPT 5") & (frontier.reasoning == "minimal"))])
    assert "GPT OSS 120B, GPT 5" in " ".join(a.text for a in fewer.layout.annotations)


def test_figure_4_keeps_our_perplexity_off_fineweb_and_the_subtitle_clear_of_the_panels():
    """Review of issue 45: our perplexity (another corpus) sat where Fineweb's did, under no word
    of its corpus, and the stacked subtitle collided with the legend and the panels in the lab."""
    fig = pf.methods.methods_figure(_results().assign(text_source="shipped"))
    titles = [a.text for a in fig.layout.annotations]
    assert sum(t == "perplexity on Fineweb" for t in titles) == 2  # the paper's rows name their corpus
    ours = next(t for t in titles if "another corpus" in t)
    assert "not Fineweb" in ours and "pydoc" in ours
    hatched = {t.name: t.marker.pattern.shape for t in _traces(fig, 3, 2)}
    assert hatched and set(hatched.values()) == {"/"}  # our perplexity bars look unlike the paper's
    assert all(t.marker.pattern.shape in (None, "") for row in (1, 2) for t in _traces(fig, row, 2))
    assert "unrecorded" in pf.methods.describe_corpus(_results())  # no column: said, never taken for Fineweb
    # Title, subtitle and legend are placed in pixels from the top, above the first row's title.
    layout = fig.layout
    assert layout.title.yref == "container" and layout.legend.yref == "container"
    height, top = layout.height, layout.margin.t
    lines = layout.title.subtitle.text.count("<br>") + 1
    title_px = (1 - layout.title.y) * height
    legend_px = (1 - layout.legend.y) * height
    assert title_px + 30 + 20 * lines <= legend_px and legend_px + 40 <= top - 30
