"""The study's statistics against closed forms and exact enumerations (issue 40).

`hierarchical_bootstrap` resamples the seeds, then the questions within each drawn seed. For
S seeds with question means m_i, n_i questions and within-seed variances v_i (both with ddof 0),
one draw's mean is the mean of S independent draws Y of "pick a seed i uniformly, average n_i of
its questions drawn with replacement", so

    Var(draw) = Var(Y) / S = (Var_i(m_i) + mean_i(v_i / n_i)) / S

(law of total variance). An interval that ignores the seeds' spread drops the first term, one
that never resamples questions drops the second; both are caught below by the half-width of the
95 % interval against 1.96 x the closed form's standard deviation. The criteria are checked at
their exact thresholds."""

import json
from itertools import product

import numpy as np
import pandas as pd
import pytest

from workbench import study
from workbench.config import recorded

Z95 = 1.959964


def closed_form_sd(per_seed) -> float:
    s = len(per_seed)
    means = np.array([x.mean() for x in per_seed])
    within = np.mean([x.var() / len(x) for x in per_seed])
    return float(np.sqrt((means.var() + within) / s))


def half_width(per_seed, draws=4000):
    mean, low, high = study.hierarchical_bootstrap(per_seed, draws=draws)
    return mean, (high - low) / 2


def test_the_seed_level_spread_is_the_closed_forms():
    """Every question of a seed scores the same, so only the seeds' spread is left: the interval's
    half-width is 1.96 sd(seed means) / sqrt(S). Seeds of unequal size: the point estimate is the
    mean of the seed means, not of the pooled questions."""
    rng = np.random.default_rng(3)
    seeds = 40
    per_seed = [np.full(int(rng.integers(5, 60)), rng.normal()) for _ in range(seeds)]
    mean, half = half_width(per_seed)
    assert mean == pytest.approx(np.mean([x[0] for x in per_seed]), abs=1e-12)
    assert mean != pytest.approx(np.concatenate(per_seed).mean(), abs=1e-3)  # the unequal sizes matter
    assert half / Z95 == pytest.approx(closed_form_sd(per_seed), rel=0.1)


def test_the_question_level_spread_is_the_closed_forms():
    """Every seed has the same mean, so only the questions' spread is left."""
    rng = np.random.default_rng(4)
    per_seed = []
    for n in rng.integers(10, 40, 30):
        x = rng.normal(size=n)
        per_seed.append(x - x.mean() + 0.25)  # exactly the same mean in every seed
    mean, half = half_width(per_seed)
    assert mean == pytest.approx(0.25, abs=1e-12)
    assert half / Z95 == pytest.approx(closed_form_sd(per_seed), rel=0.1)


def test_both_levels_add_up_as_the_law_of_total_variance_says():
    """Seed spread and question spread of the same size: an interval missing either term is
    sqrt(2) too narrow (0.71 of the closed form), outside the 10 % allowed."""
    rng = np.random.default_rng(5)
    seeds, n = 30, 25
    centres = rng.normal(size=seeds)
    centres = (centres - centres.mean()) / centres.std() * 0.2  # seed spread: variance 0.04
    noise = [x - x.mean() for x in rng.normal(size=(seeds, n))]
    per_seed = [c + x for c, x in zip(centres, noise)]  # seed means exactly the centres; questions ~1 / 25
    seed_term = np.var([x.mean() for x in per_seed])
    question_term = np.mean([x.var() / len(x) for x in per_seed])
    assert 0.5 < seed_term / question_term < 2
    _, half = half_width(per_seed)
    assert half / Z95 == pytest.approx(closed_form_sd(per_seed), rel=0.1)


def test_a_seed_drawn_again_is_the_exact_discrete_distribution():
    """Two seeds whose questions all score 0 and 1: a draw's mean is 0, 0.5 or 1 with
    probabilities 1/4, 1/2, 1/4 (enumerated), so the 2.5 % and 97.5 % quantiles are 0 and 1."""
    per_seed = [np.zeros(30), np.ones(30)]
    outcomes = [np.mean(pick) for pick in product([0.0, 1.0], repeat=2)]
    assert np.quantile(outcomes, [0.0, 1.0]).tolist() == [0.0, 1.0]
    assert study.hierarchical_bootstrap(per_seed, draws=2000) == (0.5, 0.0, 1.0)


def fake_run(folder, run, scores):
    """A finished run as training leaves it: its configuration, summary and per-question scores."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(recorded(run.config)))
    pd.DataFrame(
        {
            "task": [run.task],
            "score": [float(np.mean(scores))],
            "exact": [float(np.mean(scores))],
            "input_tokens": [6.0],
            "output_tokens": [2.0],
            "train_seconds": [1.0],
        }
    ).to_csv(folder / "test_summary.csv", index=False)
    pd.DataFrame({"task": run.task, "score": scores, "exact": np.asarray(scores) == 1.0}).to_csv(
        folder / "test_samples.csv", index=False
    )


def test_the_intervals_from_run_folders_resample_each_runs_seed(tmp_path):
    """Two seeds of one point: all of seed 0's questions score 0, all of seed 1's score 1. Per
    seed, the interval is [0, 1] (above); questions pooled over the seeds as one sample would
    give 0.5 +- 0.13. Another point with one seed stays apart."""
    runs = [
        r
        for r in study.plan(["precision"])
        if r.task == "multiplication" and r.digits == 2 and r.encoding in ("bittokens", "fone")
    ]
    assert {r.seed for r in runs} == {0, 1}
    for r in runs:
        scores = [float(r.seed)] * 30 if r.encoding == "bittokens" else [0.25, 0.75] * 15
        fake_run(tmp_path / r.name, r, scores)
    intervals = study.bootstrap_intervals(runs, tmp_path, draws=2000)
    got = intervals.set_index(["encoding", "metric"])
    assert got.loc[("bittokens", "log_smape"), ["mean", "low", "high"]].tolist() == [0.5, 0.0, 1.0]
    assert got.loc[("bittokens", "exact_match"), ["mean", "low", "high"]].tolist() == [0.5, 0.0, 1.0]
    assert got.loc[("bittokens", "log_smape"), "seeds"] == 2 and got.loc[("bittokens", "log_smape"), "questions"] == 30
    fone = got.loc[("fone", "log_smape")]
    assert fone["mean"] == 0.5 and 0.3 < fone.low < 0.5 < fone.high < 0.7  # no seed spread: questions only


def intervals_for(part, means):
    rows = []
    for (encoding, task), mean in means.items():
        metric = "accuracy" if task == "minmax" else "log_smape"
        rows.append(
            dict(
                study=part,
                encoding=encoding,
                task=task,
                digits=1,
                metric=metric,
                mean=mean,
                low=mean - 0.01,
                high=mean + 0.01,
            )
        )
    return rows


def test_task_scores_count_a_mean_of_exactly_the_threshold():
    """Study 2's criterion is a seed-mean score >= 0.9: 0.9 itself counts, the float just below
    it does not; exact match and other parts never count."""
    below = np.nextafter(0.9, 0)
    rows = intervals_for(
        "multitask",
        {
            ("fone", "addition"): 0.9,
            ("fone", "multiplication"): below,
            ("fone", "minmax"): 1.0,
            ("xval", "addition"): below,
            ("xval", "multiplication"): 0.5,
            ("xval", "minmax"): 0.9,
        },
    )
    rows += [dict(r, metric="exact_match", mean=1.0) for r in rows if r["metric"] == "log_smape"]
    rows += intervals_for(study.NUMERIC_CHECKPOINT, {("xval", "addition"): 1.0, ("xval", "multiplication"): 1.0})
    scores = study.task_scores(pd.DataFrame(rows))
    assert scores.at_threshold.to_dict() == {"fone": 2, "xval": 1}
    assert scores.index.tolist() == ["fone", "xval"]
    custom = study.task_scores(pd.DataFrame(rows), threshold=0.5)
    assert custom.at_threshold.to_dict() == {"fone": 3, "xval": 3}


def test_part_difference_calls_touching_intervals_an_overlap():
    """Study 2 against 2b: intervals that touch (one's low is the other's high) overlap; apart by
    1e-9 they differ, in either direction."""
    eps = 1e-9
    rows = []
    for part, cases in (
        ("multitask", {"addition": (0.5, 0.7), "multiplication": (0.5 + eps, 0.7), "minmax": (0.1, 0.3 - eps)}),
        (study.NUMERIC_CHECKPOINT, {"addition": (0.3, 0.5), "multiplication": (0.3, 0.5), "minmax": (0.3, 0.5)}),
    ):
        for task, (low, high) in cases.items():
            rows.append(
                dict(
                    study=part,
                    encoding="fone",
                    task=task,
                    digits=1,
                    metric="accuracy" if task == "minmax" else "log_smape",
                    mean=(low + high) / 2,
                    low=low,
                    high=high,
                )
            )
    diff = study.part_difference(pd.DataFrame(rows)).set_index("task")
    assert diff.ahead.to_dict() == {
        "addition": "overlap",
        "minmax": study.NUMERIC_CHECKPOINT,
        "multiplication": "multitask",
    }
    assert diff.differ.to_dict() == {"addition": False, "minmax": True, "multiplication": True}


def _seeds(offset: float, spread: float = 0.05, rng_seed: int = 1) -> list[np.ndarray]:
    """Three seeds of 100 answer scores, their means `offset` + 0.5 - spread, + 0.5, + 0.5 + spread."""
    rng = np.random.default_rng(rng_seed)
    return [rng.uniform(0, 0.2, 100) + 0.4 + offset + o for o in (-spread, 0, spread)]


def test_verdict_stability_counts_the_verdict_of_every_bootstrap_seed():
    a, b = _seeds(0.3), _seeds(0.0, rng_seed=2)
    assert study.verdict_stability(a, b, seeds=range(5), draws=200) == {"a": 5}  # far apart: one verdict
    assert study.verdict_stability(b, b, seeds=range(5), draws=200) == {"overlap": 5}  # the same answers
    # apart intervals, gap within delta: never called a difference
    assert study.verdict_stability(_seeds(0.06, spread=0.0), _seeds(0.0, spread=0.0), seeds=range(5), draws=200) == {
        study.WITHIN: 5
    }
    # near the edge the bootstrap's own random numbers decide: both verdicts come out
    edge = study.verdict_stability(_seeds(0.08), b, seeds=range(20), draws=300)
    assert set(edge) == {"a", "overlap"} and sum(edge.values()) == 20
    # each seed's verdict is the rule applied to that seed's intervals, seed 0 the published one
    for seed in range(3):
        sides = [
            pd.DataFrame([dict(k=0, **dict(zip(["mean", "low", "high"], study.hierarchical_bootstrap(s, 300, seed))))])
            for s in (_seeds(0.08), b)
        ]
        expected = study.versus(*sides, ["k"], "a", "b").ahead.iloc[0]
        assert study.verdict_stability(_seeds(0.08), b, seeds=[seed], draws=300) == {expected: 1}


def test_budget_stability_reads_each_cell_of_a_level_from_its_run_folders(tmp_path):
    runs = [
        r for r in study.plan(["budget"]) if r.study == "budget_10M" and r.task == "division" and r.digits in (4, 15)
    ]
    for r in runs:
        if r.digits == 15 and r.encoding == "single_digit" and r.seed == 2:
            continue  # an unfinished cell: left out
        offset = 0.3 if r.encoding == "single_digit" else 0.0
        (tmp_path / r.name).mkdir()
        pd.DataFrame({"score": _seeds(offset, rng_seed=r.seed)[r.seed]}).to_csv(tmp_path / r.name / "test_samples.csv")
    table = study.budget_stability(tmp_path, "budget_10M", seeds=range(4), draws=100)
    assert table.to_dict("records") == [
        {"task": "division", "digits": 4, study.VARIANT: 0, "single_digit": 4, "overlap": 0, study.WITHIN: 0}
    ]
    # any two encodings of the level, either way round (budget_more's against the core's)
    swapped = study.budget_stability(
        tmp_path, "budget_10M", seeds=range(4), draws=100, a="single_digit", b=study.VARIANT
    )
    assert swapped.to_dict("records") == [
        {"task": "division", "digits": 4, "single_digit": 4, study.VARIANT: 0, "overlap": 0, study.WITHIN: 0}
    ]
    assert study.budget_stability(tmp_path, "budget_10M", seeds=range(4), draws=100, a="ntl").empty
