"""Metrics against the paper's formulas, written out with fractions/statistics as oracles."""

import math
import statistics
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench import metrics

EPS = Fraction(1, 10**100)
finite = st.floats(allow_nan=False, allow_infinity=False)


def oracle_log_smape(p, t):
    """Eq. 1-2 in exact rational arithmetic; only the final log10 is a float."""
    if not math.isfinite(p):
        return 0.0
    s = abs(Fraction(p) - Fraction(t)) / (abs(Fraction(t)) + abs(Fraction(p)) + EPS)
    return min(1.0, -math.log10(s + EPS) / 15)


@pytest.mark.parametrize(
    "p,t",
    [
        (1.0, 1.0),
        (0.0, 0.0),
        (7.0, 8.0),
        (123.456, 123.457),
        (-5.0, 5.0),
        (1e15, 1e-14),
        (3.14159, 3.14),
        (1e308, -1e308),
        (5e-324, 0.0),
        (1.7976931348623157e308, 1e308),
    ],
)
def test_log_smape_matches_eq_2(p, t):
    assert float(metrics.log_smape(p, t)) == pytest.approx(oracle_log_smape(p, t), abs=1e-12)


@given(finite | st.just(math.nan), finite)
def test_log_smape_matches_eq_2_everywhere(p, t):
    assert float(metrics.log_smape(p, t)) == pytest.approx(oracle_log_smape(p, t), abs=1e-12)


def test_log_smape_by_hand():
    # sMAPE(1001, 999) = 2 / 2000 = 1e-3: three of 15 digits -> 0.2, as in the paper's reading
    assert float(metrics.log_smape(1001.0, 999.0)) == pytest.approx(3 / 15, abs=1e-12)
    # sMAPE(2, 1) = 1/3: less than one digit right
    assert float(metrics.log_smape(2.0, 1.0)) == pytest.approx(math.log10(3) / 15, abs=1e-15)
    # an error in the 4th significant digit
    assert 3 / 15 < float(metrics.log_smape(1235.0, 1234.0)) < 4 / 15
    # exact match and opposite signs are the two ends of the scale
    assert list(metrics.log_smape([2.0, 0.0, -3.0], [2.0, 0.0, 3.0])) == [1.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "p,t",
    [(2e-20, 1e-20), (3e-100, 1e-100), (1e-100, 1e-100), (1e-99, 0.0), (1.5e-30, -1.5e-30), (1.000001e-25, 1e-25)],
)
def test_log_smape_at_tiny_magnitudes_where_eps_matters(p, t):
    """Below 1e-18 the eps = 1e-100 of eq. 1 and 2 is what keeps the score right: at 1e-100 it is
    a third of the denominator. Hand-computed from eq. 1-2 with Fractions."""
    assert float(metrics.log_smape(p, t)) == pytest.approx(oracle_log_smape(p, t), abs=1e-12)


def test_log_smape_tiny_cases_by_hand():
    # sMAPE(2e-20, 1e-20) = 1/3: eps is negligible, log10(3) / 15
    assert float(metrics.log_smape(2e-20, 1e-20)) == pytest.approx(math.log10(3) / 15, rel=1e-9)
    # sMAPE(1e-99, 0) = 1e-99 / (1e-99 + 1e-100) = 10/11
    assert float(metrics.log_smape(1e-99, 0.0)) == pytest.approx(-math.log10(10 / 11) / 15, rel=1e-9)
    assert float(metrics.log_smape(1e-100, 1e-100)) == 1.0


def test_exact_match_decides_at_the_15th_significant_digit():
    t = 123456789012345.0  # 15 digits
    assert metrics.exact_match([123456789012346.0, 123456789012344.0], [t, t]).tolist() == [False, False]
    assert metrics.exact_match([123456789012345.4, 123456789012344.6], [t, t]).tolist() == [True, True]
    assert bool(metrics.exact_match(1.23456789012345e-20, 1.23456789012346e-20)[0]) is False
    assert bool(metrics.exact_match(1.234567890123451e-20, 1.23456789012345e-20)[0]) is True
    # the 16th digit 5 rounds half-even: 1.23456789012344|5 -> ...44, 1.23456789012345|5 -> ...46
    assert bool(metrics.exact_match(1.234567890123445, 1.23456789012344)[0]) is True
    assert bool(metrics.exact_match(1.234567890123455, 1.23456789012346)[0]) is True


def test_log_smape_shapes_and_bad_inputs():
    out = metrics.log_smape([[1.0, 2.0], [3.0, 4.0]], 2.0)
    assert out.shape == (2, 2) and out[0, 1] == 1.0
    assert list(metrics.log_smape([math.nan, math.inf, -math.inf], [1.0, 1.0, 1.0])) == [0, 0, 0]
    with pytest.raises(ValueError, match="finite"):
        metrics.log_smape(1.0, math.nan)
    with pytest.raises(ValueError, match="finite"):
        metrics.exact_match(1.0, math.inf)


def test_a_signalling_nan_prediction_scores_zero_without_a_warning():
    # decoding a noisy BitTokens vector can give a NaN with the quiet bit clear; any arithmetic
    # on it raises numpy's "invalid value" warning (notebook 01 printed it from D8)
    snan = np.array([0x7FF0000000000001], dtype=np.uint64).view(np.float64)
    with np.errstate(all="raise"):
        assert list(metrics.log_smape(snan, [7.0])) == [0.0]
        assert np.isnan(metrics.smape(snan, [7.0])).all()


def test_mismatched_shapes_are_an_error_not_a_broadcast():
    # a [3, 1] column against [3] targets used to give a 3x3 score (0.355 for perfect predictions)
    for metric in (metrics.log_smape, metrics.exact_match, metrics.smape):
        with pytest.raises(ValueError, match=r"pred has shape \(3, 1\) but target \(3,\)"):
            metric(np.array([[1.0], [2.0], [3.0]]), np.array([1.0, 2.0, 3.0]))
        with pytest.raises(ValueError, match="shape"):
            metric([1.0, 2.0], [1.0, 2.0, 3.0])
    assert list(metrics.exact_match(2.0, [1.0, 2.0])) == [False, True]  # a scalar still pairs with all


@pytest.mark.parametrize(
    "pred,target,name",
    [([1 + 2j], [1.0], "pred"), ([1.0], [1 + 0j], "target"), (["1.5"], [1.5], "pred"), ([1.5], [None], "target")],
)
def test_complex_or_non_numeric_input_is_an_error(pred, target, name):
    for metric in (metrics.log_smape, metrics.exact_match):
        with pytest.raises(ValueError, match=f"{name} must be real numbers"):
            metric(pred, target)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"lam": math.nan}, "lam"),
        ({"lam": math.inf}, "lam"),
        ({"lam": "1"}, "lam"),
        ({"eps": math.nan}, "eps"),
        ({"eps": -1e-3}, "eps"),
    ],
)
def test_generalized_mean_rejects_bad_lam_and_eps(kwargs, name):
    with pytest.raises(ValueError, match=name):
        metrics.generalized_mean([0.5], **kwargs)
    with pytest.raises(ValueError, match="performance must be real numbers"):
        metrics.generalized_mean([0.5, 1j])


def oracle_exact(p, t):
    """Round the written (shortest) decimal of each value to 15 significant digits half-to-even
    with integers and Fractions, then compare sign, exponent and digits."""

    def key(x):
        f = Fraction(repr(x))
        if f == 0:
            return (0,)
        a = abs(f)
        e = len(str(a.numerator)) - len(str(a.denominator))  # within one of floor(log10 a)
        while a >= Fraction(10) ** (e + 1):
            e += 1
        while a < Fraction(10) ** e:
            e -= 1
        digits = round(a / Fraction(10) ** (e - 14))  # round(Fraction) is half-to-even
        if digits == 10**15:
            digits, e = 10**14, e + 1
        return (f < 0, e, digits)

    return math.isfinite(p) and key(p) == key(t)


@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(min_value=-3, max_value=3))
def test_exact_match_against_fraction_oracle(x, ulps):
    y = x
    for _ in range(abs(ulps)):
        y = math.nextafter(y, math.inf if ulps > 0 else -math.inf)
    assert bool(metrics.exact_match(y, x)[0]) == oracle_exact(y, x)


@given(
    st.decimals(min_value=-(10**20), max_value=10**20, allow_nan=False, allow_infinity=False, places=20),
    st.integers(min_value=14, max_value=17),
)
def test_exact_match_against_fraction_oracle_on_near_ties(d, digits):
    # values written with 14-17 digits: the 15-digit rounding boundary is where errors would hide
    x = float(f"{d:.{digits}g}")
    y = float(f"{d:.{digits - 1}g}")
    assert bool(metrics.exact_match(y, x)[0]) == oracle_exact(y, x)


def test_exact_match_cases():
    pred = [1.0, 1.0000000000000002, 123456789012345.6, 1.0, -1.0, math.nan, 0.0, 99.99999999999999]
    target = [1.0, 1.0, 123456789012345.0, 1.1, 1.0, 1.0, -0.0, 100.0]
    assert list(metrics.exact_match(pred, target)) == [True, True, False, False, False, False, True, True]


def test_generalized_mean_is_harmonic_geometric_arithmetic():
    p = [0.2, 0.5, 0.9, 0.05]
    assert metrics.generalized_mean(p, -1, eps=0) == pytest.approx(statistics.harmonic_mean(p))
    assert metrics.generalized_mean(p, 0, eps=0) == pytest.approx(statistics.geometric_mean(p))
    assert metrics.generalized_mean(p, 1, eps=0) == pytest.approx(statistics.mean(p))
    # lam=0 is the limit of eq. 15
    assert metrics.generalized_mean(p, 1e-9, eps=0) == pytest.approx(metrics.generalized_mean(p, 0, eps=0), rel=1e-6)
    # eps shifts every score before the mean, and the mean back
    assert metrics.generalized_mean([0.0, 1.0], -1, eps=0.5) == pytest.approx(
        statistics.harmonic_mean([0.5, 1.5]) - 0.5
    )
    assert metrics.generalized_mean([0.0, 1.0], 1, eps=0) == 0.5


def oracle_power_mean(scores, lam: int, eps: float) -> Fraction:
    """Eq. 15 for lam = -1 or 1 in exact rational arithmetic, eps taken off again."""
    shifted = [Fraction(s) + Fraction(eps) for s in scores]
    mean = sum(x**lam for x in shifted) / len(shifted)
    return mean ** Fraction(1, lam) - Fraction(eps)


# no score so small that 1/score overflows (eps = 0): that sum is inf, a different question
unit = st.floats(0, 1).filter(lambda x: x == 0 or x > 1e-300) | st.sampled_from([0.0, 1.0, 1 - 2**-53, 2**-60])


@given(st.lists(unit, min_size=1, max_size=9), st.sampled_from([-1, 1]), st.sampled_from([1e-6, 0.5, 0.0]))
def test_a_mean_of_scores_stays_within_them_against_fractions(scores, lam, eps):
    """Bug: eq. 15 as printed, ((1/|T|) sum (p + eps)^lam)^(1/lam), gave 1.000001 for scores of 1:
    "harmonic_mean" read above the best possible score. The mean of scores in [0, 1] is the exact
    mean to the last bits, never above the highest score (so never above 1) nor below the lowest."""
    if eps == 0 and lam == -1 and 0.0 in scores:
        return  # a harmonic mean with a score of 0 and no eps: refused (test_generalized_mean_rejects_bad_scores)
    got = metrics.generalized_mean(scores, lam, eps=eps)
    assert min(scores) <= got <= max(scores) <= 1
    assert math.isclose(got, float(oracle_power_mean(scores, lam, eps)), rel_tol=1e-12, abs_tol=1e-15)


def test_perfect_and_equal_scores_are_their_own_mean():
    for lam in (-1, 0, 1):
        assert metrics.generalized_mean([1.0, 1.0, 1.0], lam) == 1.0  # was 1.000001
        assert metrics.generalized_mean([0.25, 0.25], lam) == 0.25
        assert metrics.generalized_mean([0.0, 0.0], lam) == 0.0


def test_the_order_of_evaluations_is_eq_15_as_printed():
    """Taking eps off again is a shift by a constant: evaluations rank as under eq. 15 as printed
    (computed as before), and the best checkpoint, the first of the highest, is the same one."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        rounds = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0, rng.random()], size=3) for _ in range(40)]
        printed = np.array([np.mean((r + 1e-6) ** -1.0) ** -1.0 for r in rounds])
        ours = np.array([metrics.generalized_mean(r) for r in rounds])
        order = np.argsort(printed, kind="stable")
        assert np.all(np.diff(ours[order]) >= 0) and np.array_equal(printed == printed[:, None], ours == ours[:, None])
        assert np.argmax(ours) == np.argmax(printed)


@pytest.mark.parametrize("bad,lam", [([], -1), ([0.0, 1.0], -1), ([0.0], 0), ([-0.5], 1), ([math.nan], -1)])
def test_generalized_mean_rejects_bad_scores(bad, lam):
    with pytest.raises(ValueError):
        metrics.generalized_mean(bad, lam, eps=0)


def test_interval_and_sorting_accuracy():
    assert list(metrics.interval_accuracy(["A", " B", "C", None, "b"], ["A", "B", "D", "A", "B"])) == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert list(
        metrics.sorting_accuracy(
            [[1, 2], [2, 1], None, [1], [0.1, 0.2]], [[1, 2], [1, 2], [1], [1, 2], [0.1, 0.2000000000000001]]
        )
    ) == [True, False, False, False, False]
    with pytest.raises(ValueError, match="targets"):
        metrics.interval_accuracy(["A"], ["A", "B"])
    with pytest.raises(ValueError, match="targets"):
        metrics.sorting_accuracy([[1]], [])


def test_perplexity():
    assert metrics.perplexity(math.log(50.0)) == pytest.approx(50.0)
    assert metrics.perplexity(0.0) == 1.0
    assert metrics.perplexity(np.float32(1000.0)) == math.inf
    with pytest.raises(ValueError):
        metrics.perplexity(math.nan)
