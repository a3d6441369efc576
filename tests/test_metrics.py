"""Metrics against the paper's formulas, written out with fractions/decimal/statistics."""
import math
import statistics
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

from workbench import metrics


def oracle_log_smape(p, t):
    if not math.isfinite(p):
        return 0.0
    num = abs(Fraction(p) - Fraction(t))
    den = abs(Fraction(t)) + abs(Fraction(p)) + Fraction(1, 10**100)
    s = num / den + Fraction(1, 10**100)
    return min(1.0, -math.log10(s) / 15) if s > 0 else 1.0


@pytest.mark.parametrize("p,t", [(1.0, 1.0), (0.0, 0.0), (7.0, 8.0), (123.456, 123.457),
                                 (-5.0, 5.0), (1e15, 1e-14), (3.14159, 3.14), (1e308, -1e308)])
def test_log_smape_matches_eq_2(p, t):
    assert metrics.log_smape(p, t) == pytest.approx(oracle_log_smape(p, t), abs=1e-12)


def test_log_smape_counts_correct_digits():
    # an error in the 4th significant digit: about 3-4 of 15 digits right
    score = float(metrics.log_smape(1235.0, 1234.0))
    assert 3 / 15 < score < 4 / 15
    assert float(metrics.log_smape(2.0, 2.0)) == 1.0


def test_log_smape_nan_and_inf_predictions_score_zero():
    assert list(metrics.log_smape([math.nan, math.inf, -math.inf], [1.0, 1.0, 1.0])) == [0, 0, 0]


def oracle_exact(p, t):
    def key(x):
        f = Fraction(x)
        if f == 0:
            return (0,)
        sign, a = (f < 0), abs(f)
        e = math.floor(math.log10(a))
        while a >= Fraction(10) ** (e + 1):
            e += 1
        while a < Fraction(10) ** e:
            e -= 1
        # round the shortest decimal (what is written) to 15 digits, half-even
        d = Decimal(repr(x))
        q = d.quantize(Decimal(1).scaleb(d.adjusted() - 14), rounding="ROUND_HALF_EVEN")
        return (sign, q.normalize())
    if not (math.isfinite(p) and math.isfinite(t)):
        return False
    return key(p) == key(t)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
       st.integers(min_value=-3, max_value=3))
def test_exact_match_against_decimal(x, ulps):
    y = x
    for _ in range(abs(ulps)):
        y = math.nextafter(y, math.inf if ulps > 0 else -math.inf)
    assert bool(metrics.exact_match(y, x)[0]) == oracle_exact(y, x)


def test_exact_match_cases():
    assert list(metrics.exact_match([1.0, 1.0000000000000002, 123456789012345.6, 1.0, -1.0, math.nan],
                                    [1.0, 1.0, 123456789012345.0, 1.1, 1.0, math.nan])) == \
        [True, True, False, False, False, False]


def test_generalized_mean_is_harmonic_geometric_arithmetic():
    p = [0.2, 0.5, 0.9]
    assert metrics.generalized_mean(p, -1, eps=0) == pytest.approx(statistics.harmonic_mean(p))
    assert metrics.generalized_mean(p, 0, eps=0) == pytest.approx(statistics.geometric_mean(p))
    assert metrics.generalized_mean(p, 1, eps=0) == pytest.approx(statistics.mean(p))
    with pytest.raises(ValueError):
        metrics.generalized_mean([])


def test_interval_sorting_perplexity():
    assert list(metrics.interval_accuracy(["A", " b", "C"], ["A", "B", "D"])) == [True, True, False]
    assert list(metrics.sorting_accuracy([[1, 2], [2, 1], None, [1]], [[1, 2], [1, 2], [1], [1, 2]])) == \
        [True, False, False, False]
    assert metrics.perplexity(math.log(50.0)) == pytest.approx(50.0)
