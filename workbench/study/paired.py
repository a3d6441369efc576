"""Study 4's verdict (docs/study/study4.md, Study 4's registration): the gap between two encodings measured
on matched seeds and questions, its own 95 % interval, and a smallest effect fixed on what a score
means rather than on kernel noise.

Two runs of one cell with the same seed answer the same test questions (a split's questions are drawn
from the seed and the regime, never from the encoding), so each seed gives one gap: the mean over its
questions of score_a - score_b. The cell's gap is the mean of those seed gaps, and its interval the
t interval over them (n - 1 degrees of freedom): a seed gap already carries its questions' noise, so
the spread of the seed gaps is all the uncertainty there is about the mean over seeds.
`paired_bootstrap` (seed pairs resampled, then questions within each, the same for both encodings) is
reported beside it. benchmarks/verdict_coverage.py measures both intervals' coverage by simulation.

SMALLEST_EFFECT is one significant digit: log-sMAPE counts the fraction of 15 significant digits right
up to the first error, so a gap of 1/15 is one more digit right on an average question.
"""

from __future__ import annotations

import math

import numpy as np

SMALLEST_EFFECT = 1 / 15
LEVEL = 0.95
AHEAD, SMALL, EQUIVALENT, UNDECIDED = "ahead", "smaller than a digit", "equivalent", "undecided"


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's method)."""
    if x <= 0 or x >= 1:
        return float(x >= 1)
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on this side; use the symmetry
        return 1 - _incomplete_beta(1 - x, b, a)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny, c, d = 1e-300, 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return front * f


def t_cdf(t: float, df: int) -> float:
    """Student's t distribution function with `df` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / (df + t * t), df / 2, 0.5)
    return 1 - tail if t > 0 else tail


def t_quantile(df: int, level: float = LEVEL) -> float:
    """Student's t quantile for a two-sided `level` interval with `df` degrees of freedom (bisection
    of t_cdf: no scipy needed)."""
    target, low, high = 0.5 + level / 2, 0.0, 1e6
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < target else (low, mid)
    return (low + high) / 2


def seed_gaps(per_seed_a: list[np.ndarray], per_seed_b: list[np.ndarray]) -> np.ndarray:
    """Per seed, the mean over its questions of a's score minus b's (the same questions, in order)."""
    if len(per_seed_a) != len(per_seed_b):
        raise ValueError(f"paired seeds: {len(per_seed_a)} against {len(per_seed_b)}")
    gaps = []
    for a, b in zip(per_seed_a, per_seed_b):
        if len(a) != len(b):
            raise ValueError(f"a seed's two runs answered {len(a)} and {len(b)} questions: not the same questions")
        gaps.append(float(np.mean(np.asarray(a, float) - np.asarray(b, float))))
    return np.array(gaps)


def paired_t(gaps: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """The mean seed gap and its t interval (needs two seeds or more)."""
    n = len(gaps)
    if n < 2:
        raise ValueError(f"a paired interval needs at least two seeds, got {n}")
    mean, sd = float(np.mean(gaps)), float(np.std(gaps, ddof=1))
    half = t_quantile(n - 1, level) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def paired_bootstrap(
    per_seed_a: list[np.ndarray], per_seed_b: list[np.ndarray], draws: int = 2000, seed: int = 0, level: float = LEVEL
) -> tuple[float, float, float]:
    """The mean seed gap and a percentile interval: each draw resamples the seeds as pairs, then the
    questions within each drawn seed (the same questions for both encodings)."""
    diffs = [np.asarray(a, float) - np.asarray(b, float) for a, b in zip(per_seed_a, per_seed_b)]
    seed_gaps(per_seed_a, per_seed_b)  # the same checks
    rng = np.random.default_rng(seed)
    means = np.empty(draws)
    for k in range(draws):
        chosen = rng.integers(0, len(diffs), len(diffs))
        means[k] = np.mean([diffs[i][rng.integers(0, len(diffs[i]), len(diffs[i]))].mean() for i in chosen])
    low, high = np.quantile(means, [0.5 - level / 2, 0.5 + level / 2])
    return float(np.mean([d.mean() for d in diffs])), float(low), float(high)


def verdict(mean: float, low: float, high: float, a: str = "a", b: str = "b", smallest: float = SMALLEST_EFFECT) -> str:
    """The registered reading of a paired gap's interval:
    "<a|b> ahead": the interval excludes 0 and the gap is at least `smallest`;
    SMALL: the interval excludes 0, the gap is under `smallest` (real, not called a difference);
    EQUIVALENT: the whole interval lies within (-smallest, smallest);
    UNDECIDED: none of these (the runs cannot tell)."""
    if low > 0 or high < 0:
        if abs(mean) >= smallest:
            return f"{a if mean > 0 else b} {AHEAD}"
        return SMALL
    if -smallest < low and high < smallest:
        return EQUIVALENT
    return UNDECIDED
