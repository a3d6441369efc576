"""Study 4's paired verdict (workbench/study/paired.py) against independent oracles, and its plan."""

import math
from fractions import Fraction

import numpy as np
import pytest

from workbench.study import parts as P
from workbench.study.paired import (
    EQUIVALENT,
    SMALL,
    SMALLEST_EFFECT,
    UNDECIDED,
    paired_bootstrap,
    paired_t,
    seed_gaps,
    t_cdf,
    t_quantile,
    verdict,
)


def test_t_quantiles_equal_their_closed_forms_and_the_tables():
    # df = 1 is Cauchy: F^-1(p) = tan(pi (p - 1/2)); df = 2: (2p - 1) / sqrt(2 p (1 - p))
    for level in (0.5, 0.9, 0.95, 0.99):
        p = 0.5 + level / 2
        assert t_quantile(1, level) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-12)
        assert t_quantile(2, level) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-12)
    # df = 4 (five seeds): the t table's 2.776; the normal's 1.960 in the limit
    assert t_quantile(4) == pytest.approx(2.7764451051977987, rel=1e-10)
    assert t_quantile(100_000) == pytest.approx(1.959963984540054, rel=1e-4)
    # the cdf of df = 3 in closed form: 1/2 + (x/(sqrt3 (1+x^2/3)) + atan(x/sqrt3)) / pi
    for x in (-3.0, -0.4, 0.0, 0.7, 5.0):
        closed = 0.5 + (x / (math.sqrt(3) * (1 + x * x / 3)) + math.atan(x / math.sqrt(3))) / math.pi
        assert t_cdf(x, 3) == pytest.approx(closed, abs=1e-13)


def test_the_paired_interval_is_the_t_interval_of_the_seed_gaps():
    a = [np.array([0.5, 0.25, 1.0]), np.array([0.0, 0.5]), np.array([1.0])]
    b = [np.array([0.25, 0.25, 0.5]), np.array([0.5, 0.5]), np.array([0.5])]
    gaps = seed_gaps(a, b)
    exact = [Fraction(1, 4), Fraction(-1, 4), Fraction(1, 2)]  # per seed: mean of the differences
    assert list(gaps) == [float(g) for g in exact]
    mean = sum(exact) / 3
    sd = math.sqrt(float(sum((g - mean) ** 2 for g in exact) / 2))
    low, high = float(mean) - t_quantile(2) * sd / math.sqrt(3), float(mean) + t_quantile(2) * sd / math.sqrt(3)
    assert paired_t(gaps) == pytest.approx((float(mean), low, high), rel=1e-12)
    with pytest.raises(ValueError, match="not the same questions"):
        seed_gaps([np.ones(3)], [np.ones(2)])
    with pytest.raises(ValueError, match="paired seeds: 2 against 1"):
        seed_gaps([np.ones(3)] * 2, [np.ones(3)])
    with pytest.raises(ValueError, match="at least two seeds"):
        paired_t(np.array([0.1]))


def test_the_paired_bootstrap_pairs_questions_a_shared_shift_cancels():
    """Both encodings' scores share a large per-question part: the paired gap's interval ignores it,
    and a constant gap comes back exactly with a zero-width interval."""
    rng = np.random.default_rng(0)
    common = [rng.random(200) for _ in range(5)]
    assert paired_bootstrap([c + 0.1 for c in common], common, draws=300) == pytest.approx((0.1, 0.1, 0.1))


def test_the_verdict_reads_the_interval_against_one_digit():
    digit = SMALLEST_EFFECT
    assert digit == pytest.approx(1 / 15)
    assert verdict(0.10, 0.02, 0.18, "bittokens", "single_digit") == "bittokens ahead"
    assert verdict(-0.10, -0.18, -0.02, "bittokens", "single_digit") == "single_digit ahead"
    assert verdict(0.03, 0.01, 0.05) == SMALL  # real but under a digit: not called
    assert verdict(0.01, -0.03, 0.05) == EQUIVALENT
    assert verdict(0.05, -0.03, 0.13) == UNDECIDED
    assert verdict(0.0, -digit, 0.01) == UNDECIDED  # the bound itself is not inside


def test_study4_pairs_every_cell_on_five_seeds_in_portable_numerics():
    runs = P.plan([P.STUDY4])
    assert len(runs) == 120 + 15 and all(r.config.run.numerics == "portable" for r in runs)
    cells = {}
    for r in runs:
        cells.setdefault((r.study, r.task, r.digits), {}).setdefault(r.encoding, set()).add(r.seed)
    for cell, by in cells.items():
        assert "single_digit" in by and len(by) >= 2, cell  # every encoding is paired with single digit
        assert all(seeds == set(P.STUDY4_SEEDS) for seeds in by.values()), cell
    # the grid's runs are Study 3's runs of the cell, but for the numerics
    study3 = {
        (r.study.replace("budget", "study4"), r.task, r.digits, r.encoding, r.seed): r for r in P.plan(P.BUDGET_PARTS)
    }
    for r in runs:
        old = study3.get((r.study, r.task, r.digits, r.encoding, r.seed))
        if old is not None:
            assert r.config.updated(numerics="native") == old.config.updated(numerics="native")
    # the 3M level comes first, the 10M level last
    budgets = [r.config.tokens for r in runs]
    assert budgets[:60] == [3e6] * 60 and budgets[-60:] == [1e7] * 60
    lr = P.plan([P.STUDY4_LR])
    assert len(lr) == 20 and {(r.config.optim.hidden_lr, r.config.optim.head_lr) for r in lr} == {
        (0.01, 0.004),
        (0.04, 0.004),
        (0.02, 0.002),
        (0.02, 0.008),
        (0.02, 0.016),
    }
    # both parts in one command train in the registered order: the 3M level, the d = 15 cells, the
    # learning-rate check, the 10M level
    both = [r.name for r in P.plan([P.STUDY4, P.STUDY4_LR])]
    names = [r.name for r in runs]
    assert both == names[:-60] + [r.name for r in lr] + names[-60:]
