import math
from fractions import Fraction as F

import numpy as np
import pytest

from workbench import encoders
from workbench.training.curriculum import Curriculum, difficulty_column


def paper_lr(step, total, lr_max=1.0, warmup_frac=0.1):
    """Linear warm-up then cosine, written out independently of workbench.training.optim."""
    warmup = round(warmup_frac * total)
    if step < warmup:
        return lr_max * (step + 1) / warmup
    return lr_max * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


def paper_threshold(level, step, total, dmax, lr_max=1.0):
    """Eq. 14 capped at zeta0 = 0.9, S = 50 % of the steps, L = lr drop at that point."""
    S = 0.5 * total
    L = lr_max - paper_lr(round(S), total, lr_max)
    lr = paper_lr(step, total, lr_max)
    terms = [S / step if step else math.inf]
    if step >= 0.1 * total and lr < lr_max:
        terms.append(L / (lr_max - lr))
    return 0.0 if level == 0 else min(0.9, 0.9 * level / dmax * min(terms))


def test_starting_frontier_and_probabilities():
    cur = Curriculum(max_difficulty=10, total_steps=1000, lr_max=1.0)
    assert cur.frontier == 1  # round(0.1 * 10)
    assert Curriculum(25, 1000, 1.0).frontier == 3  # 2.5 rounds up
    probs = cur.level_probabilities()
    assert probs.shape == (11,) and probs.sum() == pytest.approx(1.0)
    assert probs[:2] == pytest.approx([0.4, 0.4])  # 80 % shared by levels 0 and 1
    # eq. 13: level frontier+k gets 0.2 * 0.8^k / sum_{j=1..9} 0.8^j
    norm = sum(F(4, 5) ** j for j in range(1, 10))
    for k in range(1, 10):
        assert probs[1 + k] == pytest.approx(float(F(1, 5) * F(4, 5) ** k / norm), rel=1e-12)
    assert np.allclose(probs[3:] / probs[2:-1], 0.8)


def test_frontier_starts_no_lower_than_the_lowest_level_the_data_hold():
    """Two operands have at least 2 digits: a narrowed multiplication pool holds levels 2 … 6,
    where round(0.1 * 6) = 1 would be a frontier no question could ever pass."""
    assert Curriculum(6, 100, 1.0).frontier == 1
    cur = Curriculum(6, 100, 1.0, levels=range(2, 7))
    assert cur.frontier == 2 and cur.level_probabilities()[:3] == pytest.approx([0, 0, 0.8])
    assert cur.update({2: 1.0, 3: 0.0}, 10, 1.0) and cur.frontier == 3
    assert Curriculum(34, 100, 1.0, levels=range(2, 35)).frontier == 3  # the paper's bound: 0.1 x 34 is higher
    with pytest.raises(ValueError, match="frontier must be one of the levels"):
        Curriculum(6, 100, 1.0, frontier=0, levels=range(2, 7))


def test_frontier_at_max_has_no_preview():
    cur = Curriculum(4, 100, 1.0, frontier=4)
    assert cur.level_probabilities() == pytest.approx([0.2] * 5)
    assert cur.update({4: 1.0}, step=50, lr=0.5) is False and cur.frontier == 4


def test_unlocked_levels_follow_eq16_with_lambda_zero():
    cur = Curriculum(10, 1000, 1.0)
    # ratios 1/2, 1/2; errors 1/10, 1/2 -> target 1/6, 5/6 -> 1/4 + 1/12 = 1/3, 1/4 + 5/12 = 2/3
    advanced = cur.update({0: 0.9, 1: 0.5}, step=1, lr=0.01)
    assert advanced is False
    probs = cur.level_probabilities()
    assert probs[:2] == pytest.approx([0.8 * 1 / 3, 0.8 * 2 / 3])
    assert probs.sum() == pytest.approx(1.0)


def test_rising_scores_advance_the_frontier_to_the_top():
    dmax, total = 20, 1000
    cur = Curriculum(dmax, total, lr_max=1.0)
    frontiers = []
    for step in range(0, total + 1, 10):
        skill = 2 + 30 * step / total  # the model masters levels below `skill`
        perf = {lv: 0.99 if lv < skill else 0.1 for lv in range(dmax + 1)}
        cur.update(perf, step, paper_lr(step, total))
        frontiers.append(cur.frontier)
        assert cur.level_probabilities().sum() == pytest.approx(1.0)
    assert frontiers[0] >= 2 and all(a <= b for a, b in zip(frontiers, frontiers[1:]))
    assert frontiers[-1] == dmax and max(frontiers) <= dmax


def test_flat_low_scores_wait_for_the_threshold_to_decay():
    dmax, total, p = 20, 1000, 0.26
    cur = Curriculum(dmax, total, lr_max=1.0)
    assert cur.frontier == 2
    advances = []
    for step in range(0, total + 1, 10):
        before = cur.frontier
        advanced = cur.update({lv: p for lv in range(dmax + 1)}, step, paper_lr(step, total))
        assert advanced == (before < dmax and p > paper_threshold(before, step, total, dmax))
        assert cur.frontier == before + advanced
        if advanced:
            advances.append(step)
    # level 2: 0.9 * 2/20 * 500/step < 0.26  <=>  step > 173.1 -> first update after that is 180
    assert advances[0] == 180
    # at the end the factor is min(S / total, L / lr_max) = L = 1 - (1 + cos(4/9 pi)) / 2 = 0.4132:
    # level 13 passes (0.9 * 13/20 * 0.4132 = 0.2417 < 0.26), level 14 never does (0.2603)
    assert cur.frontier == 14


def test_threshold_properties():
    dmax, total = 12, 2000
    cur = Curriculum(dmax, total, lr_max=3e-3)
    starts = {}
    for level in range(dmax + 1):
        values = [cur.threshold(level, s, 3e-3 * paper_lr(s, total) / 1.0) for s in range(total + 1)]
        assert max(values) <= 0.9
        assert all(a >= b - 1e-15 for a, b in zip(values, values[1:]))  # never rises
        for s in range(0, total + 1, 50):
            assert values[s] == pytest.approx(paper_threshold(level, s, total, dmax, lr_max=3e-3))
        below = [s for s, v in enumerate(values) if v < 0.9 - 1e-12]
        starts[level] = below[0] if below else None
    assert starts[dmax] == total // 2 + 1  # the highest level starts to decay after 50 %
    assert starts[0] == 0 and all(starts[a] < starts[a + 1] for a in range(1, dmax))


def test_sample_follows_probabilities_and_skips_empty_levels():
    cur = Curriculum(10, 1000, 1.0)
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 11, size=5000)
    pool[pool == 5] = 4  # level 5 has no samples
    idx = cur.sample(pool, 200_000, np.random.default_rng(1))
    probs = cur.level_probabilities()
    probs[5] = 0
    probs /= probs.sum()
    freq = np.bincount(pool[idx], minlength=11) / idx.size
    assert np.allclose(freq, probs, atol=4e-3)
    assert freq[5] == 0
    again = cur.sample(pool, 1000, np.random.default_rng(1))
    assert np.array_equal(again, cur.sample(pool, 1000, np.random.default_rng(1)))
    with pytest.raises(ValueError, match="difficulties"):
        cur.sample(np.array([0, 11]), 5, rng)
    with pytest.raises(ValueError, match="difficulties"):
        cur.sample(np.array([0.5, 1.0]), 5, rng)


def test_state_round_trip_and_corrupt_state():
    cur = Curriculum(10, 1000, 1.0)
    for step in range(0, 400, 20):
        cur.update({lv: 0.95 for lv in range(11)}, step, paper_lr(step, 1000))
    copy = Curriculum(10, 1000, 1.0)
    copy.load_state_dict(cur.state_dict())
    assert copy.frontier == cur.frontier > 1
    assert np.array_equal(copy.level_probabilities(), cur.level_probabilities())
    perf = {lv: 0.7 for lv in range(11)}
    assert copy.update(perf, 500, 0.5) == cur.update(perf, 500, 0.5)
    assert np.array_equal(copy.level_probabilities(), cur.level_probabilities())
    bad = cur.state_dict() | {"frontier": 0}  # ratios beyond the frontier
    with pytest.raises(ValueError, match="corrupt"):
        copy.load_state_dict(bad)
    with pytest.raises(ValueError, match="max_difficulty"):
        Curriculum(9, 1000, 1.0).load_state_dict(cur.state_dict())


def test_bad_arguments():
    with pytest.raises(ValueError):
        Curriculum(-1, 100, 1.0)
    with pytest.raises(ValueError):
        Curriculum(10, 100, 1.0, frontier=11)
    with pytest.raises(ValueError, match="level"):
        Curriculum(10, 100, 1.0).update({3: float("nan")}, 1, 0.1)


def test_difficulty_column_switches_bittokens_to_base10_at_the_end():
    binary = encoders.get("bittokens").difficulty_base
    assert difficulty_column(binary, 0, 1000) == "difficulty"
    assert difficulty_column(binary, 899, 1000) == "difficulty"
    assert difficulty_column(binary, 900, 1000) == "difficulty_sd"
    assert difficulty_column(binary, 500, 1000, switch_frac=0.5) == "difficulty_sd"
    for name in ["single_digit", "triple_digit", "xval", "fone"]:
        assert difficulty_column(encoders.get(name).difficulty_base, 0, 1000) == "difficulty_sd"
    with pytest.raises(ValueError):
        difficulty_column(binary, 0, 1000, switch_frac=1.5)
    with pytest.raises(ValueError, match="difficulty_base"):
        difficulty_column(3, 0, 1000)


def _pool(tag, levels):
    """A stand-in pool: samples are (tag, index) and both difficulty columns are `levels`."""
    from workbench.training.data import Pool

    levels = np.asarray(levels)
    return Pool(tag, None, [(tag, i) for i in range(len(levels))], levels, levels)


@pytest.mark.parametrize("endgame", ["fixed", "mastery"])
def test_a3_hand_over_from_the_binary_pool_to_the_decimal_one(endgame):
    """A.3: the binary pool (sampled by the curriculum) until the hand-over, then the decimal pool:
    all of it for the last 10 % of steps (the paper), or 90 % once the binary curriculum has passed
    its highest level, the binary pool keeping 10 % (the authors)."""
    from workbench.training.curriculum import Sampler

    decimal, binary = _pool("decimal", [0, 1, 2, 3] * 5), _pool("binary", [0, 1, 2] * 5)
    curriculum = Curriculum(2, 100, 1.0, frontier=0)
    sampler = Sampler(
        {"multiplication": decimal},
        {"multiplication": curriculum},
        2,
        100,
        {"multiplication": (binary, "val frame")},
        endgame=endgame,
    )
    rng = np.random.default_rng(0)

    def share_decimal(step):
        drawn = sampler.sample("multiplication", 1000, step, rng)
        return np.mean([tag == "decimal" for tag, _ in drawn])

    assert share_decimal(0) == 0 and share_decimal(89) == (0 if endgame == "fixed" else 0)
    levels = [binary.difficulty[i] for _, i in sampler.sample("multiplication", 500, 0, rng)]
    assert set(levels) <= {0, 1, 2} and np.mean(np.array(levels) == 0) > 0.7  # frontier 0 + preview
    assert sampler.to_evaluate({"multiplication": "decimal val"}, 0) == {"multiplication": ("val frame", "difficulty")}
    if endgame == "fixed":
        assert share_decimal(90) == 1.0 and share_decimal(99) == 1.0
    else:
        assert share_decimal(99) == 0  # never mastered yet
        curriculum.frontier = 2
        curriculum.update({2: 1.0}, 50, 0.5)
        assert curriculum.mastered and share_decimal(10) == 0.9
    assert sampler.to_evaluate({"multiplication": "decimal val"}, 99) == {}  # handed over: no binary curriculum
    with pytest.raises(ValueError, match="endgame"):
        Sampler({}, {}, 2, 10, endgame="later")


def test_the_curriculum_moves_over_the_levels_the_data_hold():
    """Multiplication's levels start at 2 (each operand has a non-zero digit): a frontier at 0 would
    wait forever. With `levels`, it starts at the lowest held level and advances level by level."""
    cur = Curriculum(8, 100, 1.0, levels=[2, 3, 5, 8, 3, 2])
    assert cur.frontier == 2
    probs = cur.level_probabilities()
    assert probs[[0, 1, 4, 6, 7]].sum() == 0 and probs.sum() == pytest.approx(1)
    assert probs[2] == pytest.approx(0.8)  # the unlocked level; 20 % previews 3, 5, 8 as 0.8^(d - 2)
    preview = np.array([0.8**1, 0.8**3, 0.8**6])
    assert probs[[3, 5, 8]] == pytest.approx(0.2 * preview / preview.sum())
    steps = []
    for _ in range(3):
        assert cur.update({cur.frontier: 1.0}, 10, 1.0)
        steps.append(cur.frontier)
    assert steps == [3, 5, 8] and cur.ratios[[2, 3, 5, 8]] == pytest.approx([0.25] * 4, abs=0.2)
    assert not cur.mastered and not cur.update({8: 1.0}, 10, 1.0) and cur.mastered
    draws = cur.sample(np.array([2, 3, 5, 8] * 10), 400, np.random.default_rng(0))
    assert set(np.array([2, 3, 5, 8] * 10)[draws]) <= {2, 3, 5, 8}
    restored = Curriculum(8, 100, 1.0, levels=[2, 3, 5, 8])
    restored.load_state_dict(cur.state_dict())
    assert restored.frontier == 8 and restored.mastered
    with pytest.raises(ValueError, match="other difficulty levels"):
        Curriculum(8, 100, 1.0, levels=[2, 4]).load_state_dict(cur.state_dict())
    with pytest.raises(ValueError, match="frontier must be one of the levels"):
        Curriculum(8, 100, 1.0, levels=[2, 4], frontier=3)


def test_the_level_index_draws_what_sample_by_level_draws():
    """The index built once per pool consumes the generator as `sample_by_level` does and gives the
    same indices: the published runs retrace bit for bit through it."""
    from workbench.training.curriculum import LevelIndex, level_index, sample_by_level

    setup = np.random.default_rng(7)
    for trial in range(40):
        top = int(setup.integers(1, 40))
        held = setup.choice(top + 1, size=int(setup.integers(1, top + 2)), replace=False)
        levels = setup.choice(held, size=int(setup.integers(1, 3000))).astype(float)  # a pool's column
        probs = setup.random(top + 1) * (setup.random(top + 1) < 0.7)
        probs[int(setup.choice(held))] += 0.1  # at least one level the pool holds
        n = int(setup.integers(1, 700))
        a, b = np.random.default_rng(trial), np.random.default_rng(trial)
        want = sample_by_level(levels.astype(np.int64), probs / probs.sum(), n, a)
        got = LevelIndex(levels, top).sample(probs / probs.sum(), n, b)
        assert np.array_equal(want, got) and a.bit_generator.state == b.bit_generator.state
    column = np.array([2.0, 3.0, 3.0, 5.0])
    assert level_index(column, 9) is level_index(column, 9)  # built once per column
    assert level_index(column.copy(), 9) is not level_index(column, 9)
    with pytest.raises(ValueError, match="integers in"):
        LevelIndex(np.array([1.5, 2.0]), 9)
    with pytest.raises(ValueError, match="no sample in the pool"):
        LevelIndex(column, 9).sample(np.eye(10)[0], 3, np.random.default_rng(0))


def test_a_curriculum_samples_as_it_did_before_the_index():
    """Curriculum.sample through the index against the function it replaced, step after step."""
    from workbench.training.curriculum import levels_of, sample_by_level

    pool = np.random.default_rng(3).integers(2, 9, size=5000).astype(float)
    c = Curriculum(max_difficulty=8, total_steps=100, lr_max=0.02, levels=np.unique(pool))
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    for step in range(1, 60):
        want = sample_by_level(levels_of(pool, 8), c.level_probabilities(), 300, a)
        assert np.array_equal(c.sample(pool, 300, b), want)
        c.update({lv: 0.95 for lv in range(9)}, step, 0.02 * (1 - step / 100))
    assert c.frontier > 2  # the frontier moved, and the draws followed it
