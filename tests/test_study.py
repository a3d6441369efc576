"""The study's machinery: the pre-registered plan, the results table and the bootstrap intervals."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench import study
from workbench.config import recorded


def test_the_plan_is_the_pre_registered_one():
    runs = study.plan()
    precision = [r for r in runs if r.study == "precision"]
    multitask = [r for r in runs if r.study == "multitask"]
    assert len(precision) == 2 * 4 * 5 * 2 and len(multitask) == 5 * 3
    assert {r.config.data.max_digits for r in precision} == {1, 2, 3, 4}
    assert all(r.config.tasks == (r.task,) and r.config.tokens == 1e6 for r in precision)
    assert {r.config.encoding for r in runs} == {"bittokens", "fone", "xval", "single_digit", "triple_digit"}
    assert all(
        set(r.config.tasks) == {"addition", "multiplication", "division", "minmax", "sorting", "interval", "text"}
        and r.config.data.max_digits == 1
        for r in multitask
    )
    assert len({r.name for r in runs}) == len(runs)  # one folder per run
    # nothing but what each study varies differs from the recipe's defaults
    for r in runs:
        assert r.config.optim == study.PRECISION.optim and r.config.model.activation == "gelu_tanh"


def test_the_exploratory_part_changes_only_the_binary_pool_and_joins_its_study_as_a_sixth_line():
    runs = study.plan([study.DECIMAL_POOL])
    assert len(runs) == 2 * 4 * 2 + 3 and {r.encoding for r in runs} == {"bittokens"}
    twins = {(r.task, r.digits, r.seed): r for r in study.plan() if r.encoding == "bittokens"}
    for r in runs:
        twin = twins[(r.task, r.digits, r.seed)]
        assert r.study == f"{twin.study}_{study.DECIMAL_POOL}" and r.name != twin.name
        assert r.config == twin.config.updated(binary_pool=False) and twin.config.difficulty.binary_pool
    table = pd.DataFrame(
        dict(
            study=["precision", "precision_decimal_pool", "multitask_decimal_pool"],
            encoding=["bittokens"] * 3,
            score=[0.1, 0.2, 0.3],
        )
    )
    moved = study.exploratory_as_encoding(table)
    assert moved.study.tolist() == ["precision", "precision", "multitask"]
    assert moved.encoding.tolist() == ["bittokens", study.VARIANT, study.VARIANT]


def test_study_2b_is_study_2_with_the_checkpoint_chosen_without_text():
    runs = study.plan([study.NUMERIC_CHECKPOINT])
    twins = {(r.encoding, r.seed): r for r in study.plan() if r.study == "multitask"}
    assert len(runs) == len(twins) == 5 * 3
    for r in runs:
        twin = twins[(r.encoding, r.seed)]
        assert r.study == study.NUMERIC_CHECKPOINT and r.name != twin.name
        assert r.config == twin.config.updated(select_with_text=False) and twin.config.evaluation.select_with_text
    table = pd.DataFrame(
        dict(
            study=["multitask", study.NUMERIC_CHECKPOINT],
            encoding="fone",
            task="addition",
            metric="log_smape",
            score=[0.5, 0.9],
            seed=0,
            input_tokens=5.0,
            output_tokens=2.0,
        )
    )
    assert study.fig4_results(table, study.NUMERIC_CHECKPOINT).value.tolist() == [0.9]
    assert study.fig4_results(table).value.tolist() == [0.5]
    assert set(study.fig4_results(table).text_source) == {study.MULTITASK.data.text_source}  # Figure 4 names it


def test_hierarchical_bootstrap_centres_on_the_mean_and_covers_it():
    rng = np.random.default_rng(0)
    per_seed = [rng.binomial(1, 0.6, 500).astype(float), rng.binomial(1, 0.7, 500).astype(float)]
    mean, low, high = study.hierarchical_bootstrap(per_seed, draws=500)
    assert mean == pytest.approx((per_seed[0].mean() + per_seed[1].mean()) / 2)
    assert low < mean < high and high - low < 0.2
    # one seed of constant scores: no uncertainty at all
    assert study.hierarchical_bootstrap([np.ones(50)], draws=50) == (1.0, 1.0, 1.0)


def test_results_and_intervals_from_run_folders(tmp_path):
    runs = [
        r
        for r in study.plan(["precision"])
        if r.task == "multiplication" and r.digits == 1 and r.encoding in ("bittokens", "xval")
    ]
    for r in runs:
        folder = tmp_path / r.name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(recorded(r.config)))  # the run the plan asks for
        good = r.encoding == "bittokens"
        scores = np.full(10, 0.9 if good else 0.1)
        pd.DataFrame(
            {
                "task": ["multiplication"],
                "score": [scores.mean()],
                "exact": [0.5 if good else 0.0],
                "input_tokens": [6.0],
                "output_tokens": [2.0],
                "train_seconds": [60.0],
            }
        ).to_csv(folder / "test_summary.csv", index=False)
        pd.DataFrame({"task": "multiplication", "score": scores, "exact": [good] * 5 + [False] * 5}).to_csv(
            folder / "test_samples.csv", index=False
        )
    table = study.collect(runs, tmp_path)
    assert set(table.columns) >= {
        "study",
        "encoding",
        "task",
        "digits",
        "seed",
        "metric",
        "score",
        "input_tokens",
        "output_tokens",
        "train_seconds",
    }
    assert len(table) == len(runs) * 2 and set(table.metric) == {"log_smape", "exact_match"}
    intervals = study.bootstrap_intervals(runs, tmp_path, draws=100).set_index(["encoding", "metric"])
    assert intervals.loc[("bittokens", "log_smape"), "mean"] == pytest.approx(0.9)
    assert intervals.loc[("bittokens", "exact_match"), ["mean", "low", "high"]].tolist() == pytest.approx(
        [0.5, 0.2, 0.8], abs=0.21
    )
    assert (intervals.seeds == 2).all() and (intervals.questions == 10).all()

    # run_study with nothing left to train writes both tables of the finished runs; read_study reads them
    with pytest.raises(ValueError, match="holds no cpu-study.csv or cpu-study-intervals.csv"):
        study.read_study(tmp_path)
    written = study.run_study(which=(), out=tmp_path, jobs=1)
    read, read_intervals = study.read_study(tmp_path)
    assert read.score.tolist() == pytest.approx(written.score.tolist()) and len(read_intervals) == 4


def test_separation_and_ordering_follow_the_intervals():
    rows = []
    for digits, (bt, sd) in {
        1: ((0.9, 0.85, 0.95), (0.92, 0.88, 0.96)),
        2: ((0.6, 0.55, 0.65), (0.4, 0.35, 0.45)),
        3: ((0.2, 0.1, 0.3), (0.5, 0.4, 0.6)),
    }.items():
        for encoding, (mean, low, high) in (("bittokens", bt), ("single_digit", sd)):
            rows.append(
                dict(
                    study="precision",
                    encoding=encoding,
                    task="multiplication",
                    digits=digits,
                    metric="log_smape",
                    mean=mean,
                    low=low,
                    high=high,
                )
            )
    intervals = pd.DataFrame(rows)
    sep = study.separation(intervals)
    assert sep.ahead.tolist() == ["overlap", "bittokens", "single_digit"]
    assert study.first_difference(sep) == {"multiplication": (2, "bittokens")}
    order = study.ordering(intervals).set_index("digits").ordering
    assert order[3] == "single_digit 0.50 [0.40, 0.60] > bittokens 0.20 [0.10, 0.30]"


def test_task_scores_count_the_tasks_at_the_threshold_and_part_difference_compares_two_parts():
    rows = []
    for part, shift in (("multitask", 0.0), (study.NUMERIC_CHECKPOINT, 0.2)):
        for encoding, base in (("fone", 0.75), ("xval", 0.0)):
            for k, task in enumerate(("addition", "multiplication", "minmax")):
                mean = base + shift + 0.05 * k  # fone: 0.75, 0.80, 0.85 in Study 2; 0.95, 0.98, 0.98 in 2b
                mean = min(mean, 0.98)
                metric = "accuracy" if task == "minmax" else "log_smape"
                rows.append(
                    dict(
                        study=part,
                        encoding=encoding,
                        task=task,
                        digits=1,
                        metric=metric,
                        mean=mean,
                        low=mean - 0.03,
                        high=mean + 0.03,
                    )
                )
                if metric == "log_smape":  # exact match never counts towards the criterion
                    rows.append(dict(rows[-1], metric="exact_match", mean=1.0, low=1.0, high=1.0))
    intervals = pd.DataFrame(rows)
    before, after = study.task_scores(intervals), study.task_scores(intervals, study.NUMERIC_CHECKPOINT)
    assert before.at_threshold.to_dict() == {"fone": 0, "xval": 0}
    assert after.index[0] == "fone" and after.at_threshold.to_dict() == {"fone": 3, "xval": 0}
    assert after.loc["fone", "minmax"] == pytest.approx(0.98)
    diff = study.part_difference(intervals).set_index(["encoding", "task"])
    assert len(diff) == 6 and diff.loc[("fone", "addition"), "ahead"] == study.NUMERIC_CHECKPOINT
    assert diff.loc[("xval", "addition"), "mean_multitask"] == 0.0 and diff.loc[("xval", "addition"), "differ"]


def test_the_bootstrap_interval_is_a_95_percent_one():
    """Bug: quantiles that give a 90 % interval (or 99 %) labelled 95 %. With one seed of n normal
    scores (sd 1) the interval of the mean is mean ± 1.96 sd / sqrt(n); a 90 % one would be
    ± 1.645, a 99 % one ± 2.576."""
    scores = np.random.default_rng(1).normal(0.5, 1.0, 20_000)
    mean, low, high = study.hierarchical_bootstrap([scores], draws=4000)
    half_widths = np.array([mean - low, high - mean]) / (scores.std() / np.sqrt(scores.size))
    assert half_widths == pytest.approx([1.96, 1.96], abs=0.1)


def test_differ_means_strictly_apart_and_the_first_difference_is_the_smallest_d():
    """Bugs: touching intervals counted as apart (>= for >), or the first difference taken at the
    largest d. Each d sits on one side of the boundary: touching (overlap), apart by 1e-9
    (differ), apart the other way (differ), overlapping."""
    cases = {
        1: ((0.80, 0.70, 0.90), (0.60, 0.50, 0.70)),  # a.low == b.high: overlap
        2: ((0.80, 0.70 + 1e-9, 0.90), (0.60, 0.50, 0.70)),  # a.low just above b.high: a ahead
        3: ((0.20, 0.10, 0.30), (0.50, 0.30 + 1e-9, 0.60)),  # b ahead
        4: ((0.50, 0.40, 0.60), (0.70, 0.60, 0.80)),
    }  # b.low == a.high: overlap
    rows = [
        dict(
            study="precision", encoding=encoding, task="division", digits=d, metric="log_smape", mean=m, low=lo, high=hi
        )
        for d, pair in cases.items()
        for encoding, (m, lo, hi) in zip(("bittokens", "single_digit"), pair)
    ]
    sep = study.separation(pd.DataFrame(rows))
    assert sep.ahead.tolist() == ["overlap", "bittokens", "single_digit", "overlap"]
    assert sep.differ.tolist() == [False, True, True, False]
    assert study.first_difference(sep) == {"division": (2, "bittokens")}
    late = sep[sep.digits >= 3]
    assert study.first_difference(late) == {"division": (3, "single_digit")}
    assert study.first_difference(sep[sep.digits.isin([1, 4])]) == {"division": None}


def fake_finished(folder, cfg):
    """A run folder as training leaves it: the configuration it recorded and a test summary."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(recorded(cfg)))
    pd.DataFrame(
        {
            "task": [cfg.tasks[0]],
            "score": [0.5],
            "exact": [0.5],
            "input_tokens": [6.0],
            "output_tokens": [2.0],
            "train_seconds": [1.0],
        }
    ).to_csv(folder / "test_summary.csv", index=False)
    pd.DataFrame({"task": cfg.tasks[0], "score": [0.5] * 4, "exact": [True, False] * 2}).to_csv(
        folder / "test_samples.csv", index=False
    )


def test_a_finished_run_of_another_configuration_is_refused_naming_what_differs(tmp_path):
    """Bug: a run counted as finished once its test summary existed, so copied addition-only runs
    passed as Study 2b's multi-task runs. Now the study refuses, naming the run and the settings;
    the results table leaves such runs out."""
    run = study.plan([study.NUMERIC_CHECKPOINT])[0]
    fake_finished(tmp_path / run.name, study.PRECISION.updated(tasks=("addition",)))
    with pytest.raises(
        ValueError,
        match=rf"1 run\(s\) in .* another configuration .*{run.name}: tasks: \['addition'\] "
        r"\(recorded\) vs \['addition', .*--overwrite retrains them",
    ):
        study.run_study([study.NUMERIC_CHECKPOINT], tmp_path, jobs=1, encodings=[run.encoding], seeds=[run.seed])
    with pytest.warns(UserWarning, match="left out of the results"):
        assert study.write_results(tmp_path).empty


def test_runs_are_selected_by_encoding_seed_task_and_digits(tmp_path):
    runs = study.select(study.plan(["precision"]), encodings=["fone"], seeds=[1], tasks_=["division"], digits=[2, 3])
    assert [(r.encoding, r.seed, r.task, r.digits) for r in runs] == [
        ("fone", 1, "division", 2),
        ("fone", 1, "division", 3),
    ]
    with pytest.raises(ValueError, match="no run of the chosen parts matches"):
        study.select(study.plan(["multitask"]), digits=[4])
    # a study whose selected runs are all finished trains nothing and writes the tables
    for r in runs:
        fake_finished(tmp_path / r.name, r.config)
    table = study.run_study(
        ["precision"], tmp_path, jobs=1, encodings=["fone"], seeds=[1], tasks_=["division"], digits=[2, 3]
    )
    assert sorted(set(zip(table.task, table.digits))) == [("division", 2), ("division", 3)]


def test_two_studies_never_share_a_folder(tmp_path):
    """Bug: two study processes on one --out trained every run twice. A second one is refused at
    once, naming the first's PID."""
    import os
    import subprocess
    import sys

    from workbench.runs.locks import hold

    code = (
        "import sys\nfrom workbench import study\ntry:\n    study.run_study([], sys.argv[1], jobs=1)\n"
        "except Exception as e:\n    print(type(e).__name__, e)"
    )
    with hold(tmp_path):  # stands for a study running in this process
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("InUse") and f"in use by process {os.getpid()} " in done.stdout


def test_the_width_probe_compares_the_verdicts_at_both_widths():
    rows = [
        dict(
            study=study, encoding=e, task="division", digits=2, metric="log_smape", mean=m, low=m - 0.05, high=m + 0.05
        )
        for study, e, m in (
            ("precision", "bittokens", 0.2),
            ("precision", "single_digit", 0.8),
            ("width", "bittokens", 0.5),
            ("width", "single_digit", 0.52),
            ("precision", "bittokens", 0.9),
        )
    ]
    rows[-1]["digits"] = 3  # another d: not part of the probe
    table = study.width_comparison(pd.DataFrame(rows))
    assert table.d_model.tolist() == [128, 256] and table.ahead.tolist() == ["single_digit", "overlap"]


def test_study_3_is_the_registered_budget_by_precision_grid():
    """docs/study/study3.md's Study 3: the core (BitTokens without binary pools, single digit) at every
    (task, d in {4, 15, paper}, budget) cell, three seeds; d = 8; then the recipe's BitTokens and the
    strongest multi-token encoding, 10M first. Only budget, precision, encoding, seed and the pool
    of a million questions differ from Study 1's recipe."""
    core, d8, more = (study.plan([part]) for part in study.BUDGET_PARTS)
    assert len(core) == 2 * 3 * 3 * 2 * 3 and len(d8) == 2 * 3 * 2 * 3 and len(more) == 2 * 4 * 3 * 2 * 3
    assert {r.encoding for r in core + d8} == {study.VARIANT, "single_digit"}
    assert {r.encoding for r in more} == {"bittokens", study.STRONGEST_MULTI_TOKEN}
    assert {r.digits for r in core} == {4, 15, study.PAPER_REGIME} and {r.digits for r in d8} == {8}
    assert sum(r.config.tokens for r in core) == 504e6
    assert [r.config.tokens for r in more[:48]] == [1e7] * 48  # the 10M runs first
    budgets = [r.config.tokens for r in core]
    assert budgets == sorted(budgets)  # whole budgets first
    for r in core + d8 + more:
        c = r.config
        binary_pool, decades, max_digits = c.difficulty.binary_pool, c.data.decades, c.data.max_digits
        assert binary_pool == (r.encoding != study.VARIANT) and c.tasks == (r.task,) and c.seed in (0, 1, 2)
        paper = r.digits == study.PAPER_REGIME
        assert (decades, max_digits) == ((None, None) if paper else ((0, 1), r.digits))
        expected = study.PRECISION.updated(
            encoding=c.encoding,
            binary_pool=binary_pool,
            tasks=c.tasks,
            seed=c.seed,
            tokens=c.tokens,
            decades=decades,
            max_digits=max_digits,
            pool_size=1_000_000,
        )
        assert c == expected
        assert r.name == f"budget_{c.tokens / 1e6:g}M-{r.task}-d{r.digits}-{r.encoding}-seed{r.seed}"
    assert len({r.name for r in core + d8 + more}) == len(core + d8 + more)


def test_strongest_multi_token_encoding_is_the_registered_rule_on_the_published_results():
    """The rule fixed at registration: the highest mean log-sMAPE over Study 1's eight cells among
    the multi-token encodings other than single digit, from results/."""
    from pathlib import Path

    from workbench import encoders

    table = pd.read_csv(Path(__file__).resolve().parents[1] / "results" / "cpu-study-intervals.csv")
    cells = table[table.study.isin(["precision", "zoo_precision"]) & (table.metric == "log_smape")]
    multi = [e for e in cells.encoding.unique() if e != "single_digit" and not encoders.get(e).single_token]
    means = cells[cells.encoding.isin(multi)].groupby("encoding")["mean"].mean()
    assert means.idxmax() == study.STRONGEST_MULTI_TOKEN and cells.groupby("encoding").size().min() == 8


def test_a_gap_within_the_cross_cpu_spread_is_not_a_difference():
    """Issue 38's rule: apart intervals with a gap of means at most DELTA (0.071, the largest change
    of a published run's score between AVX-512 and AVX2 kernels) are not called a difference; one
    just above it is."""
    d = study.DELTA
    cases = {
        1: ((0.50 + d, 0.50 + d - 0.01, 0.50 + d + 0.01), (0.50, 0.49, 0.50 + 0.005)),  # gap exactly delta
        2: ((0.50 + d + 0.002, 0.50 + d - 0.008, 0.50 + d + 0.012), (0.50, 0.49, 0.505)),  # just above
        3: ((0.50, 0.49, 0.51), (0.53, 0.515, 0.545)),
    }  # apart intervals, gap 0.03
    rows = [
        dict(
            study="precision", encoding=encoding, task="division", digits=k, metric="log_smape", mean=m, low=lo, high=hi
        )
        for k, pair in cases.items()
        for encoding, (m, lo, hi) in zip(("bittokens", "single_digit"), pair)
    ]
    sep = study.separation(pd.DataFrame(rows))
    assert sep.ahead.tolist() == [study.WITHIN, "bittokens", study.WITHIN]
    assert sep.differ.tolist() == [False, True, False]
    assert study.separation(pd.DataFrame(rows), delta=0.0).differ.tolist() == [True, True, True]


def test_study_3_verdicts_find_the_smallest_budget_at_which_the_encodings_differ():
    """Per (task, d) the budgets in order: overlap at 1M, apart by less than the cross-CPU spread at
    3M, apart beyond it at 10M: the smallest budget at which they differ is 10M; a cell that never
    separates says None. The figure draws one panel per task and d."""
    rows = []
    for budget, (bt, sd) in {"1M": (0.30, 0.32), "3M": (0.40, 0.40 + study.DELTA - 0.01), "10M": (0.70, 0.50)}.items():
        for digits, shift in ((4, 0.0), (15, None)):
            for encoding, mean in ((study.VARIANT, bt), ("single_digit", sd)):
                mean = mean if shift is not None else 0.1  # d = 15: both at 0.1 everywhere
                rows.append(
                    dict(
                        study=f"budget_{budget}",
                        encoding=encoding,
                        task="division",
                        digits=digits,
                        metric="log_smape",
                        mean=mean,
                        low=mean - 0.02,
                        high=mean + 0.02,
                        seeds=3,
                        questions=500,
                    )
                )
    intervals = pd.DataFrame(rows)
    verdicts = study.budget_verdicts(intervals)
    four = verdicts[verdicts.digits == 4].set_index("budget").ahead.to_dict()
    assert four == {1e6: "overlap", 3e6: study.WITHIN, 1e7: study.VARIANT}
    assert study.smallest_budget(verdicts) == {("division", 4): (1e7, study.VARIANT), ("division", 15): None}
    fig = study.budget_figure(intervals)
    assert [a.text for a in fig.layout.annotations][:2] == ["multiplication, d = 4", "multiplication, d = 15"]


def test_scored_cells_gives_each_cell_its_mean_and_a_run_level_interval():
    """The second and third scorings of Study 3 are reported with intervals like the first: the
    mean of the runs' means, and a 95 % interval that resamples runs, then questions."""
    rng = np.random.default_rng(0)
    rows = [
        dict(study="budget_1M", task="division", digits=4, encoding=e, run=f"{e}-{r}", score=s, exact=s > 0.9)
        for e, centre in (("a", 0.2), ("b", 0.8))
        for r in range(3)
        for s in np.clip(rng.normal(centre + 0.05 * r, 0.1, 200), 0, 1)
    ]
    table = pd.DataFrame(rows)
    cells = study.scored_cells(table, draws=500).set_index("encoding")
    for e in ("a", "b"):
        part = table[table.encoding == e]
        assert cells.loc[e, "score"] == pytest.approx(part.groupby("run").score.mean().mean())
        assert cells.loc[e, "low"] < cells.loc[e, "score"] < cells.loc[e, "high"]
        assert cells.loc[e, "exact"] == pytest.approx(part.exact.mean())
        assert (cells.loc[e, "runs"], cells.loc[e, "answers"]) == (3, 600)
    assert cells.loc["a", "high"] < cells.loc["b", "low"]


def test_study3_models_join_the_frontier_figure_as_stars_on_their_tasks():
    """Study 3's paper-regime models scored on the authors' questions are drawn in Figure 3's
    multiplication and division panels, at their tokens per answer and score, in their
    encoding's colour; the other regimes and the generator's scoring are not drawn."""
    from workbench.figures import paper as pf
    from workbench.figures import plots

    cells = pd.DataFrame(
        [
            dict(
                study="budget_1M",
                task=t,
                digits=d,
                encoding=e,
                score=0.01 * (i + 1),
                low=0,
                high=1,
                exact=0,
                runs=3,
                answers=1500,
                output_tokens=2.0 if e != "single_digit" else 20.0,
                scoring=sc,
            )
            for i, (t, d, e, sc) in enumerate(
                (t, d, e, sc)
                for t in ("multiplication", "division")
                for d in (4, 17)
                for e in ("bittokens_decimal_pool", "single_digit")
                for sc in ("authors_test_sets", "reasoning_gym")
            )
        ]
    )
    ours = study.frontier_points(cells)
    assert len(ours) == 4 and set(ours.task) == {"multiplication", "division"}
    assert set(ours.encoding) == {"bittokens", "single_digit"}
    assert {m for m in ours.model if "BitTokens" in m} == {"cpu-tiny BitTokens decimal pool (1M tokens)"}
    fig = pf.frontier.tokens_figure(pf.sources.frontier_from_tables(), ours)
    stars = [t for t in fig.data if t.marker.symbol == "star"]
    assert sum(len(t.x) for t in stars) == 4
    drawn = {(t.name.split(",")[0], float(x), round(float(y), 6)) for t in stars for x, y in zip(t.x, t.y)}
    expected = {(m, float(k), round(100 * s, 6)) for m, k, s in zip(ours.model, ours.tokens, ours.performance)}
    assert drawn == expected
    bit = next(t for t in stars if "BitTokens" in t.name)
    assert bit.marker.color == plots.encoding_color("bittokens")
    # a second budget: its stars drawn larger, so that the two models do not coincide
    longer = study.frontier_points(cells.assign(study="budget_3M", score=cells.score + 0.1))
    fig = pf.frontier.tokens_figure(pf.sources.frontier_from_tables(), pd.concat([ours, longer], ignore_index=True))
    size = {t.name.split(" (")[1].split(")")[0]: t.marker.size for t in fig.data if t.marker.symbol == "star"}
    assert size["1M tokens"] < size["3M tokens"], size


def _study3_tables() -> list[list[list[str]]]:
    """docs/study/study3.md's three Study 3 tables (own questions, the authors', reasoning-gym) as cell lists."""
    lines = (Path(__file__).resolve().parents[1] / "docs" / "study" / "study3.md").read_text().splitlines()
    tables = []
    for i, line in enumerate(lines):
        if line.startswith("| task | d | budget | BitTokens (decimal pool) | single digit |"):
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip("|").split("|")])
            tables.append(rows)
    return tables


def _key(row: list[str]) -> tuple:
    digits = 17 if row[1].startswith("paper's regime") else int(row[1])
    return row[0], digits, float(row[2].removesuffix("M")) * 1e6


def _interval(mean, low, high) -> str:
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


VERDICT_WORDS = {study.VARIANT: "BitTokens ahead", "single_digit": "single digit ahead", "overlap": "overlap"}


def _says(cell: str, ahead: str) -> bool:
    return cell.replace("**", "").startswith(VERDICT_WORDS.get(ahead, ahead))


def test_the_study_3_tables_of_the_docs_are_the_published_results():
    """Every row of docs/study/study3.md's three Study 3 tables has the means, intervals, gap, verdict and
    exact match of results/ (formatted here, not by the code that wrote the docs), and every
    published cell has its row: the docs neither lose a cell nor keep a number results/ lost."""
    own, authors, generator = _study3_tables()
    _, intervals = study.read_studies([study.PUBLISHED])
    verdicts = study.budget_verdicts(intervals)
    exact = study.budget_rows(intervals[intervals.metric == "exact_match"]).set_index(
        ["task", "digits", "budget", "encoding"]
    )
    v, s = study.VARIANT, "single_digit"
    rows = {_key(r): r for r in own}
    assert len(rows) == len(own) == len(verdicts) > 0
    for r in verdicts.itertuples():
        row = rows[(r.task, int(r.digits), r.budget)]
        mean_v, mean_s = getattr(r, f"mean_{v}"), getattr(r, f"mean_{s}")
        assert row[3] == _interval(mean_v, getattr(r, f"low_{v}"), getattr(r, f"high_{v}")), row
        assert row[4] == _interval(mean_s, getattr(r, f"low_{s}"), getattr(r, f"high_{s}")), row
        assert row[5] == f"{mean_v - mean_s:+.3f}".replace("-", "−"), row
        assert _says(row[6], r.ahead), row
        ex_v, ex_s = (exact.loc[(r.task, r.digits, r.budget, e)] for e in (v, s))
        assert row[7] == f"{_interval(*ex_v[['mean', 'low', 'high']])} / {_interval(*ex_s[['mean', 'low', 'high']])}", (
            row
        )
    cells = pd.read_csv(study.PUBLISHED / study.OTHER_QUESTIONS_FILE).rename(columns={"score": "mean"})
    cells = cells.assign(budget=cells.study.map(study.budget_of))
    for scoring, table in (("authors_test_sets", authors), ("reasoning_gym", generator)):
        part = cells[cells.scoring == scoring]
        rows = {_key(r): r for r in table}
        versus = study.versus(part[part.encoding == v], part[part.encoding == s], ["task", "digits", "budget"], v, s)
        assert len(rows) == len(table) == len(versus) > 0, scoring
        by = part.set_index(["task", "digits", "budget", "encoding"])
        for r in versus.itertuples():
            row = rows[(r.task, int(r.digits), r.budget)]
            assert row[3] == _interval(getattr(r, f"mean_{v}"), getattr(r, f"low_{v}"), getattr(r, f"high_{v}")), row
            assert row[4] == _interval(getattr(r, f"mean_{s}"), getattr(r, f"low_{s}"), getattr(r, f"high_{s}")), row
            assert _says(row[5], r.ahead), row
            if scoring == "authors_test_sets":
                exact_v, exact_s = (by.loc[(r.task, r.digits, r.budget, e), "exact"] for e in (v, s))
                assert row[6] == f"{exact_v:.3f} / {exact_s:.3f}", row


def test_the_docs_rows_that_a_level_adds_are_written_from_results():
    """`insert_table_rows` gives back, from results/ alone, every docs row it can write: with all
    such rows taken out of docs/study/study3.md, it puts each back where it was, word for word; on the
    whole docs it adds nothing, and rows carrying a remark are left as written."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "study" / "study3.md").read_text()
    written = {
        row for table in ("own", "authors_test_sets", "reasoning_gym") for row in study.table_rows(table).values()
    }
    lines = text.split("\n")
    kept = [line for line in lines if line not in written]
    assert len(lines) - len(kept) >= 50  # most rows of the three tables
    again, added = study.insert_table_rows("\n".join(kept))
    assert again == text and sorted(added) == sorted(set(lines) & written)
    assert study.insert_table_rows(text) == (text, [])
    # a row whose verdict carries a remark stays; only the missing cell is added
    remark = next(line for line in lines if line.startswith("|") and "(touching at" in line)
    assert remark not in written and remark in study.insert_table_rows("\n".join(kept))[0]
    with pytest.raises(ValueError, match="expected 3 tables"):
        study.insert_table_rows("no tables here")


def test_the_budget_more_table_sets_each_encoding_against_both_core_encodings(tmp_path):
    """budget_more's table: one row per cell of the recipe's BitTokens and NTL, its own score and
    a gap and verdict against single digit and against the decimal pool, from cells built here so
    that each verdict is known by construction (apart by more than δ, apart by less, overlapping)."""
    cells = [  # (encoding, mean, low, high) at division, d = 4, 10M
        ("single_digit", 0.50, 0.45, 0.55),
        (study.VARIANT, 0.30, 0.25, 0.35),
        ("bittokens", 0.40, 0.37, 0.43),  # −0.10 vs single digit, apart: single digit ahead; +0.10 vs pool
        ("ntl", 0.53, 0.51, 0.56),  # +0.03 vs single digit, overlapping; +0.23 vs the pool, apart
    ]
    rows = [
        dict(study="budget_10M", encoding=e, task="division", digits=4, metric=m, mean=mean, low=low, high=high)
        | dict(seeds=3, questions=500)
        for e, mean, low, high in cells
        for m in ("log_smape", "exact_match")
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "cpu-study-intervals.csv", index=False)
    seeds = [dict(r, seed=s, score=r["mean"]) for r in rows for s in range(3)]  # the 3 seeds the intervals claim
    pd.DataFrame(seeds).drop(columns=["mean", "low", "high"]).to_csv(tmp_path / "cpu-study.csv", index=False)
    table = study.table_rows("more", tmp_path)
    assert set(table) == {("division", 4, 1e7, "bittokens"), ("division", 4, 1e7, "ntl")}
    bt = [c.strip() for c in table[("division", 4, 1e7, "bittokens")].strip("|").split("|")]
    assert bt[3:] == [
        "`bittokens`",
        "0.400 [0.370, 0.430]",
        "−0.100, **single digit ahead**",
        "+0.100, **`bittokens` ahead**",
        "not scored",
        "not scored",
    ]
    ntl = [c.strip() for c in table[("division", 4, 1e7, "ntl")].strip("|").split("|")]
    assert ntl[5:7] == ["+0.030, overlap", "+0.230, **`ntl` ahead**"]
    # insert_table_rows puts each row into the fourth table, after the three tables of the core
    (tmp_path / study.OTHER_QUESTIONS_FILE).write_text(
        "study,task,digits,encoding,score,low,high,exact,runs,answers,output_tokens,scoring\n"
    )
    text = "".join(f"{study.HEADER} x |\n|---|\n\n" for _ in range(3)) + f"{study.MORE_HEADER} x |\n|---|\nend\n"
    written, added = study.insert_table_rows(text, tmp_path)
    assert len(added) == 3 and sorted(added[1:]) == sorted(table.values())  # the own table's core row, then these
    assert written.endswith("\n".join(added[1:]) + "\nend\n")
    assert study.insert_table_rows(written, tmp_path) == (written, [])
