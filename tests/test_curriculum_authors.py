"""The authors' curriculum (`--curriculum-rule authors`) on hand-derived cases: its start, step,
window, thresholds, level shares, mastery and the stall at a gap in the levels, which on Study 2's
binary division levels keeps it at level 5 for ever (so the mastery hand-over never happens)."""

from dataclasses import replace

import numpy as np
import pytest

from workbench import tasks
from workbench.training.curriculum import Curriculum
from workbench.training.curriculum_authors import AuthorsCurriculum

T = 1000  # steps; the lr warm-up is the first 100


def test_start_and_step_are_shares_of_the_held_levels():
    """Start: the level at index int(0.15 n); step: max(1, round(0.02 n)). 33 levels 2 … 34: index
    int(4.95) = 4, level 6, step 1; 101 levels 0 … 100: index 15, step round(2.02) = 2."""
    few = AuthorsCurriculum(34, T, 1.0, levels=range(2, 35))
    assert (few.frontier, few.step_size) == (6, 1)
    many = AuthorsCurriculum(100, T, 1.0)
    assert (many.frontier, many.step_size) == (15, 2)
    many.update({lv: 1.0 for lv in range(101)}, 50, 0.5)
    assert many.frontier == 17  # two levels at once


def test_the_three_highest_unlocked_levels_must_each_pass_in_the_latest_evaluation():
    """Frontier 6 of levels 2 … 34, early (every threshold 0.9): levels 4, 5, 6 must each score at
    least 0.9 in their latest evaluation; a level of the window never evaluated counts 0."""
    cur = AuthorsCurriculum(34, T, 1.0, levels=range(2, 35))
    assert not cur.update({4: 1.0, 5: 1.0, 6: 0.89}, 50, 1.0) and cur.frontier == 6
    assert cur.update({5: 1.0, 6: 1.0}, 50, 1.0) and cur.frontier == 7  # level 4's latest 1.0 still counts
    fresh = AuthorsCurriculum(34, T, 1.0, levels=range(2, 35))
    assert not fresh.update({5: 1.0, 6: 1.0, 2: 0.0, 3: 0.0}, 50, 1.0) and fresh.frontier == 6  # 4 never scored
    assert fresh.update({4: 0.9, 5: 0.95, 6: 1.0}, 50, 1.0) and fresh.frontier == 7  # p >= threshold passes


def test_thresholds_fall_piecewise_linearly_to_zero_at_progress_1_5():
    """progress = max(step / (0.5 T), (lr_max - lr) / (0.5 lr_max)); level l of highest 34 keeps 0.9
    until progress l / 34, then falls to 0 at l / 34 + 0.5. The lr counts as lr_max in the warm-up,
    and the schedule's multiplier maps to the authors' lr with its floor 0.1 x lr_max."""
    cur = AuthorsCurriculum(34, T, 1.0, levels=range(2, 35))
    assert cur.threshold(34, 500, 1.0) == pytest.approx(0.9)  # progress 1.0 = 34 / 34
    assert cur.threshold(34, 600, 1.0) == pytest.approx(0.9 * (1 - 0.2 / 0.5))  # progress 1.2
    assert cur.threshold(17, 500, 1.0) == pytest.approx(0.0)  # 1.0 = 0.5 + 0.5
    assert cur.threshold(17, 400, 1.0) == pytest.approx(0.9 * (1 - 0.3 / 0.5))
    assert [cur.threshold(lv, 750, 1.0) for lv in (2, 17, 34)] == [0.0, 0.0, 0.0]
    assert cur.threshold(2, 50, 0.0) == pytest.approx(0.9 * (1 - (0.1 - 2 / 34) / 0.5))  # warm-up: lr ignored
    lr = 0.5  # after the warm-up: the authors' lr is 0.1 + 0.9 x 0.5 = 0.55 of lr_max, progress 0.9
    assert cur.progress(200, lr) == pytest.approx(0.9) and cur.progress(400, lr) == pytest.approx(0.9)


def test_level_shares_are_the_mean_of_three_evaluations_without_momentum_floored_at_half_over_n():
    """Levels 0 … 9, frontier 1 (index int(1.5)): level 0 scored 0, 1, 1, 1 (mean of the last
    three 1, so 1 - p clamps at 0.01), level 1 scored 0.2, 0.4, 0.6 (mean 0.4, 1 - p = 0.6). Shares
    0.01 / 0.61 and 0.6 / 0.61, level 0 raised to 0.5 / 2 = 0.25, renormalised: 0.25 / 1.2336 and
    0.9836 / 1.2336; x 0.8, and C.3's preview 0.2 x 0.8^k / sum_{j=1..8} 0.8^j for level 1 + k."""
    cur = AuthorsCurriculum(9, T, 1.0)
    assert cur.frontier == 1
    for step, scores in zip((10, 20, 30, 40), ({0: 0.0}, {0: 1.0, 1: 0.2}, {0: 1.0, 1: 0.4}, {0: 1.0, 1: 0.6})):
        assert not cur.update(scores, step, 1.0)  # level 1 stays below its threshold (0.9)
    assert cur.history == {0: [1.0, 1.0, 1.0], 1: [0.2, 0.4, 0.6]}
    raised = np.array([0.25, 0.6 / 0.61])
    probs = cur.level_probabilities()
    assert probs[:2] == pytest.approx(0.8 * raised / raised.sum())
    preview = 0.8 ** np.arange(1, 9)
    assert probs[2:] == pytest.approx(0.2 * preview / preview.sum()) and probs.sum() == pytest.approx(1)


def test_mastery_then_uniform_sampling_unless_the_task_hands_over():
    """At the highest level a passing window masters the curriculum; without a hand-over the pool
    is then sampled uniformly (the authors' 'random sampling from all difficulties'), with one
    (BitTokens' binary sets) by the level shares."""
    pool = np.array([0] * 90 + [1] * 10)
    rng = np.random.default_rng(0)
    for hand_over, share_of_1 in ((False, 0.1), (True, 0.5)):
        cur = AuthorsCurriculum(1, T, 1.0, hand_over=hand_over)
        assert cur.frontier == 0
        cur.update({0: 1.0, 1: 1.0}, 200, 1.0)  # 0 -> 1
        assert cur.frontier == 1 and not cur.mastered
        cur.update({0: 0.5, 1: 0.5}, 200, 1.0)  # level 1's 0.5 < 0.9: not yet
        assert not cur.mastered
        cur.update({0: 0.5, 1: 0.5}, 800, 0.0)  # progress 1.6: every threshold 0
        assert cur.mastered and cur.frontier == 1
        picks = pool[cur.sample(pool, 20000, rng)]
        assert (picks == 1).mean() == pytest.approx(share_of_1, abs=0.02)


def test_checks_let_a_task_advance_several_times_per_evaluation():
    """Their advance_if_possible runs over all tasks after each curriculum task's evaluation: with
    two curriculum tasks a task may advance twice on one evaluation's scores."""
    once, twice = (
        AuthorsCurriculum(34, T, 1.0, levels=range(2, 35)),
        AuthorsCurriculum(34, T, 1.0, levels=range(2, 35), checks=2),
    )
    for cur in (once, twice):
        cur.update({lv: 1.0 for lv in range(2, 35)}, 50, 1.0)
    assert (once.frontier, twice.frontier) == (7, 8)


def test_a_gap_in_the_levels_stops_it_for_good():
    """Levels 2, 3, 4, 5, 15: step max(1, round(0.1)) = 1, so from 5 the next frontier would be 6,
    which no question has: perfect scores for the whole run, thresholds at 0, and still at 5.
    The paper's rule moves to the next held level and masters the task."""
    levels = [2, 3, 4, 5, 15]
    authors, paper = AuthorsCurriculum(15, T, 1.0, levels=levels), Curriculum(15, T, 1.0, levels=levels)
    for step in range(100, T + 1, 100):
        for cur in (authors, paper):
            cur.update({lv: 1.0 for lv in levels}, step, 1.0)
    assert (authors.frontier, authors.mastered) == (5, False)
    assert (paper.frontier, paper.mastered) == (15, True)


def test_on_study_2s_binary_division_levels_it_never_passes_level_5():
    """Study 2's BitTokens binary division pool (magnitudes 1 … 100, one digit; 20,000 questions
    as `--pool-size` gives) holds levels 2 … 5, then 15 and up: 17 levels, start index int(2.55) =
    2 (level 4), step 1. With every level perfect at every evaluation of a 3,907-step run (Study
    2's) and 2 checks per evaluation (two curriculum tasks) the frontier ends at 5, never mastered,
    so `--endgame mastery` would never hand division over to the decimal pool."""
    regime = replace(tasks.Regime.of((0, 1), 1), significance="binary")
    held = np.unique(tasks.generate("division", 20_000, seed=0, split="train", regime=regime).difficulty)
    assert held[:4].tolist() == [2, 3, 4, 5] and held[4] > 6 and held.size == 17
    cur = AuthorsCurriculum(int(held.max()), 3907, 1.0, levels=held, hand_over=True, checks=2)
    assert (cur.frontier, cur.step_size) == (4, 1)
    frontiers = []
    for step in range(100, 3907 + 1, 100):
        cur.update({int(lv): 1.0 for lv in held}, step, 0.5)
        frontiers.append(cur.frontier)
    assert frontiers[0] == 5 and set(frontiers) == {5} and not cur.mastered


def test_state_round_trip_and_bad_input():
    cur = AuthorsCurriculum(34, T, 1.0, levels=range(2, 35))
    cur.update({4: 1.0, 5: 1.0, 6: 1.0}, 50, 1.0)
    copy = AuthorsCurriculum(34, T, 1.0, levels=range(2, 35))
    copy.load_state_dict(cur.state_dict())
    assert (copy.frontier, copy.history, copy.mastered) == (cur.frontier, cur.history, cur.mastered)
    assert np.array_equal(copy.level_probabilities(), cur.level_probabilities())
    with pytest.raises(ValueError, match="authors"):
        AuthorsCurriculum(34, T, 1.0, levels=range(3, 35)).load_state_dict(cur.state_dict())
    with pytest.raises(ValueError, match="authors"):
        copy.load_state_dict(Curriculum(34, T, 1.0, levels=range(2, 35)).state_dict())
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        cur.update({5: 1.5}, 60, 1.0)
    with pytest.raises(ValueError, match="levels"):
        AuthorsCurriculum(10, T, 1.0, levels=[11])
