"""Study 4's analysis (workbench/study/study4.py) on run folders whose answers are known."""

import json

import numpy as np
import pandas as pd
import pytest

from workbench.study import study4
from workbench.study.paired import paired_t
from workbench.study.parts import STUDY4, STUDY4_LR, VARIANT, plan


def _run(folder, scores, evals=None, warmup_frac=0.1):
    folder.mkdir(parents=True)
    pd.DataFrame({"task": "multiplication", "score": scores}).to_csv(folder / "test_samples.csv", index=False)
    (folder / "config.json").write_text(json.dumps({"optim": {"warmup_frac": warmup_frac}}))
    rows = evals or [{"step": 100, "harmonic_mean": 0.0}]
    (folder / "evals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _cell(tmp_path, study="study4_3M", task="multiplication", digits=4, gaps=(0.1, 0.12, 0.08, 0.11, 0.09)):
    rng = np.random.default_rng(0)
    runs = [r for r in plan([STUDY4]) if (r.study, r.task, r.digits) == (study, task, digits)]
    for r in runs:
        base = rng.random(20) * 0.5  # the same per-question part for both encodings is not needed: gaps are means
        shift = gaps[r.seed] if r.encoding == VARIANT else 0.0
        _run(tmp_path / r.name, np.full(20, 0.3 + shift) if r.encoding != "bittokens" else base)
    return runs


def test_a_cell_s_verdict_is_the_t_interval_of_its_seed_gaps(tmp_path):
    _cell(tmp_path)
    found = study4.answers([tmp_path])
    table = study4.verdicts(found)
    row = table[(table.a == VARIANT)].iloc[0]
    gaps = np.array([0.1, 0.12, 0.08, 0.11, 0.09])
    assert (row.gap, row.low, row.high) == pytest.approx(paired_t(gaps))
    assert row.verdict == f"{VARIANT} ahead" and row.stuck_seed is None
    assert row.seed_gaps == "+0.100 +0.120 +0.080 +0.110 +0.090"
    assert len(table) == 1  # binary-pool BitTokens are not in this cell


def test_a_stuck_seed_is_flagged_and_an_incomplete_cell_left_out(tmp_path):
    _cell(tmp_path, gaps=(0.1, 0.11, 0.09, 0.10, 0.45))
    row = study4.verdicts(study4.answers([tmp_path])).iloc[0]
    assert row.stuck_seed == 4
    assert study4.stuck_seed(np.array([0.1, 0.11, 0.09, 0.1])) is None
    (tmp_path / "study4_3M-multiplication-d4-single_digit-seed3" / "test_samples.csv").unlink()
    assert study4.verdicts(study4.answers([tmp_path])).empty


def test_the_learning_rate_check_keeps_the_recipe_unless_a_rate_beats_it(tmp_path):
    def evals(best):  # 30 evaluations; the best eligible one is `best` (one before the warm-up is higher)
        return [{"step": 100 * (e + 1), "harmonic_mean": 0.9 if e == 1 else best * (e + 1) / 30} for e in range(30)]

    grid = [r for r in plan([STUDY4]) if r.study == "study4_3M" and r.task == "multiplication" and r.digits == 4]
    for r in grid:
        if r.seed in (0, 1):
            _run(tmp_path / r.name, [0.5], evals(0.40))
    for r in plan([STUDY4_LR]):
        score = {"study4_lr_head0.008_3M": 0.404, "study4_lr_hidden0.04_3M": 0.46}.get(r.study, 0.3)
        if r.encoding == "single_digit" and r.study == "study4_lr_hidden0.04_3M":
            score = 0.403  # within 0.005 of the recipe: the recipe stays
        _run(tmp_path / r.name, [0.5], evals(score))
    table = study4.rate_choice([tmp_path])
    chosen = table[table.chosen].set_index("encoding").setting.to_dict()
    assert chosen == {VARIANT: "hidden0.04", "single_digit": "recipe"}
    recipe = table[(table.encoding == VARIANT) & (table.setting == "recipe")].iloc[0]
    assert recipe.validation == pytest.approx(0.40) and recipe.seeds == 2


def test_study3_is_re_decided_both_ways_alike():
    study3 = pd.DataFrame(
        [
            dict(
                study="budget_3M",
                encoding=e,
                task="multiplication",
                digits=4,
                metric="log_smape",
                mean=m,
                low=m - 0.02,
                high=m + 0.02,
            )
            for e, m in ((VARIANT, 0.36), ("single_digit", 0.51))
        ]
        + [
            dict(
                study="budget_3M",
                encoding=e,
                task="division",
                digits=4,
                metric="log_smape",
                mean=m,
                low=m - 0.1,
                high=m + 0.1,
            )
            for e, m in ((VARIANT, 0.30), ("single_digit", 0.35))
        ]
    )
    table = pd.DataFrame(
        [
            dict(
                study="study4_3M",
                task="multiplication",
                digits=4,
                a=VARIANT,
                b="single_digit",
                verdict="single_digit ahead",
            ),
            dict(study="study4_3M", task="division", digits=4, a=VARIANT, b="single_digit", verdict="undecided"),
        ]
    )
    out = study4.redecided(table, study3).set_index("task")
    assert out.loc["multiplication", "outcome"] == "stands" and out.loc["multiplication", "study3"] == "single_digit"
    assert out.loc["division", "outcome"] == "cannot be decided" and out.loc["division", "study3"] == "overlap"
    table.loc[0, "verdict"] = f"{VARIANT} ahead"
    assert study4.redecided(table, study3).set_index("task").loc["multiplication", "outcome"] == "changes"
    table.loc[0, "verdict"] = "equivalent"
    assert study4.redecided(table, study3).set_index("task").loc["multiplication", "outcome"] == "changes"


def test_the_plateau_intervention_is_the_grid_cell_without_the_curriculum():
    """study4_plateau: the main grid's ten runs of multiplication at d = 4 and 3M, each changed in
    the curriculum alone (its recorded settings otherwise the grid twin's), BitTokens first."""
    from workbench.config import recorded
    from workbench.study import parts as P

    runs = P.plan([P.STUDY4_PLATEAU])
    grid = {r.name: r for r in P.study4_plan()}
    assert [r.encoding for r in runs] == [P.VARIANT] * 5 + ["single_digit"] * 5
    for r in runs:
        twin = grid[r.name.replace(P.STUDY4_PLATEAU, P.STUDY4, 1)]
        a, b = recorded(r.config), recorded(twin.config)
        assert {k for k in a if a[k] != b[k]} == {"curriculum"} and a["curriculum"] is False
        assert (r.task, r.digits, r.seed, r.config.tokens) == ("multiplication", 4, twin.seed, 3e6)


def test_the_intervention_s_comparisons_are_paired_by_seed():
    from workbench.study import plateau
    from workbench.study.parts import VARIANT

    rng = np.random.default_rng(0)
    base = {s: rng.uniform(0, 1, 50) for s in range(5)}
    found = {
        ("study4_3M", "multiplication", 4): {VARIANT: base, "single_digit": {s: base[s] + 0.2 for s in base}},
        ("study4_plateau_3M", "multiplication", 4): {VARIANT: {s: base[s] + 0.1 + 0.01 * s for s in base}},
    }
    table = plateau.intervention(found)
    assert len(table) == 2  # single digit without the curriculum is missing: its rows are left out
    first = table.iloc[0]
    assert first.gap == pytest.approx(0.12) and first.verdict.startswith("BitTokens without curriculum")
    assert table.iloc[1].gap == pytest.approx(-0.08)


def test_the_secondary_sets_are_paired_question_by_question():
    """A scored table (cpu-study-generator.csv's columns) gives the same verdict as the run folders
    would: each seed's gap is the mean over the questions it shares with the other encoding; rows of
    one run interleaved with another's keep their question order; other questions are refused."""
    rng = np.random.default_rng(1)
    prompts = [f"{i} * 7" for i in range(30)]
    rows, lift = [], {0: 0.1, 1: 0.2, 2: 0.15, 3: 0.05, 4: 0.12}
    for seed in range(5):
        base = rng.random(30)
        for encoding, add in ((VARIANT, lift[seed]), ("single_digit", 0.0)):
            for prompt, score in zip(prompts, base + add):
                rows.append(
                    dict(
                        study="study4_3M",
                        task="multiplication",
                        digits=4,
                        encoding=encoding,
                        seed=seed,
                        prompt=prompt,
                        score=score,
                    )
                )
    # runs interleaved question by question, each run's own rows still in its questions' order
    table = pd.DataFrame(rows).assign(q=lambda t: t.prompt.map(prompts.index)).sort_values("q", kind="stable")
    row = study4.verdicts(study4.scored_answers(table)).iloc[0]
    gaps = np.array([lift[s] for s in range(5)])
    assert (row.gap, row.low, row.high) == pytest.approx(paired_t(gaps))
    assert row.a == VARIANT and row.verdict == f"{VARIANT} ahead"
    swapped = table.copy().reset_index(drop=True)
    mask = (swapped.encoding == "single_digit") & (swapped.seed == 2)
    swapped.loc[mask, "prompt"] = swapped.loc[mask, "prompt"].to_numpy()[::-1]
    with pytest.raises(ValueError, match="single_digit seed 2 answered other questions"):
        study4.scored_answers(swapped)
