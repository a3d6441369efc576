"""Notebook 03's figures, from a tiny run's directory: the end phase of A.3, the four training
panels, and the test score per decimal difficulty checked against test_samples.csv itself."""

from dataclasses import replace

import pandas as pd
import pytest
from tiny import tiny

from workbench.config import TrainConfig
from workbench.figures import training as training_figures
from workbench.runs import logs, provenance
from workbench.training.curriculum import difficulty_column
from workbench.training.train import train


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """BitTokens on multiplication (binary pools and a curriculum) and minmax (neither)."""
    out = tmp_path_factory.mktemp("run") / "run"
    cfg = TrainConfig.of(
        **tiny(
            10, encoding="bittokens", tasks=("multiplication", "minmax"), eval_every=5, test_samples=12, out=str(out)
        )
    )
    return train(cfg), cfg


@pytest.mark.parametrize("total", [10, 100, 977, 9766])
def test_the_end_phase_is_the_last_tenth_of_the_steps(total):
    evals = pd.DataFrame({"step": [0], "endgame/multiplication": [0]})
    start = training_figures.end_phase(total, evals)
    # A.3: binary difficulty until the last 10 % of the steps (an independent count of them)
    assert start == min(s for s in range(total + 1) if s >= 0.9 * total)
    assert (
        difficulty_column(2, start, total) == "difficulty_sd" and difficulty_column(2, start - 1, total) == "difficulty"
    )
    assert training_figures.end_phase(total, evals.drop(columns="endgame/multiplication")) is None


def test_the_curves_draw_every_logged_series_and_name_the_run(run):
    run_dir, cfg = run
    steps, evals = logs.load_metrics(run_dir)
    fig = training_figures.curves(run_dir, cfg, finished=True)
    by_name = {}
    for trace in fig.data:
        by_name.setdefault(trace.name, []).append(trace)
    # the training loss, step by step, as metrics.jsonl holds it
    assert list(by_name["total loss (weighted)"][0].y) == list(steps["loss"])
    # multiplication: score, ratio and frontier; minmax has no curriculum, so no frontier line
    assert len(by_name["multiplication"]) == 3 and len(by_name["minmax"]) == 2
    assert list(by_name["minmax"][0].y) == list(evals["score/minmax"])
    notes = [a.text for a in fig.layout.annotations]
    assert "no curriculum, no line: minmax" in notes
    assert "decimal end phase (A.3)" in notes  # BitTokens learn multiplication on binary pools
    title = fig.layout.title.text
    assert f"{cfg.tokens:,.0f} tokens" in title and "cpu-tiny" in title and "seed 0" in title
    assert f"{provenance.recorded_kernels(run_dir)} kernels" in title
    # while it trains the end phase is not drawn
    assert "decimal end phase (A.3)" not in [a.text for a in training_figures.curves(run_dir, cfg).layout.annotations]


def test_the_curves_read_apart_share_one_step_range_and_keep_the_titles_clear(run):
    """Bugs: cross-entropy (dotted) and the number-head loss (dashed) were one grey, the panels'
    step ranges differed (the loss from step 1, the evaluations from the first evaluation), and
    "decimal end phase (A.3)" sat against the loss panel's title."""
    run_dir, cfg = run
    steps, evals = logs.load_metrics(run_dir)
    fig = training_figures.curves(run_dir, cfg, finished=True)
    losses = [t for t in fig.data if t.legendgroup == "loss"]
    assert [t.name for t in losses] == ["total loss (weighted)", "cross-entropy", "number-head loss"]
    assert len({t.line.color for t in losses}) == 3 and len({t.line.dash for t in losses}) == 3
    assert not {t.line.color for t in losses} & {t.line.color for t in fig.data if t.legendgroup in cfg.tasks}
    axes = [fig.layout[a] for a in ("xaxis", "xaxis2", "xaxis3", "xaxis4")]
    assert all(a.range == axes[0].range for a in axes) and [a.matches for a in axes] == ["x"] * 4
    last = max(steps["step"].max(), evals["step"].max())
    assert axes[0].range[0] == 0 and last < axes[0].range[1] <= 1.05 * last
    [note] = [a for a in fig.layout.annotations if a.text == "decimal end phase (A.3)"]
    start = training_figures.end_phase(int(steps["step"].max()), evals)
    assert note.textangle == -90 and note.y == 0.5 and start < note.x < steps["step"].max()  # inside its band


def test_a_run_without_curriculum_says_why_its_frontier_panel_is_empty(run):
    run_dir, cfg = run
    fig = training_figures.curves(run_dir, replace(cfg, difficulty=replace(cfg.difficulty, curriculum=False)))
    assert any("curriculum=False" in (a.text or "") for a in fig.layout.annotations)


def test_score_by_difficulty_averages_every_test_answer(run):
    run_dir, cfg = run
    samples = pd.read_csv(run_dir / "test_samples.csv")
    by_level = training_figures.score_by_difficulty(run_dir, cfg)
    assert by_level["n"].sum() == len(samples) == 2 * 12
    # the same means per task, weighted back: the table loses no answer
    for task, part in by_level.groupby("task"):
        assert (part["score"] * part["n"]).sum() == pytest.approx(samples.loc[samples["task"] == task, "score"].sum())
    fig = training_figures.difficulty_figure(by_level, cfg, run_dir)
    bars = [t for t in fig.data if t.type == "bar"]
    assert sum(sum(b.y) for b in bars) == len(samples)
    assert "24 held-out questions" in fig.layout.title.subtitle.text


def test_answers_that_find_no_question_are_refused_by_name(run, tmp_path):
    run_dir, cfg = run
    samples = pd.read_csv(run_dir / "test_samples.csv")
    (tmp_path / "test_samples.csv").write_text(samples.assign(prompt="1+1=").to_csv(index=False))
    with pytest.raises(ValueError, match="24 test answers found no question"):
        training_figures.score_by_difficulty(tmp_path, cfg)
