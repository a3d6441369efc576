"""Number sampling of appendix A.2, vectorized: decades, significant digits, signs, splits.

Every operand is a pair (M, e) = M * 10**e with at most 17 significant digits whose decimal text is
the shortest float64 round-trip form, so BitTokens (float64) see exactly the printed number.
"""
from dataclasses import dataclass

import numpy as np

from .exact import normalize, shortest_repr, value_ld
from .text_sources import DEFAULT as DEFAULT_TEXT_SOURCE, parse as parse_text_source

LOW, HIGH = -14, 14  # decades: magnitudes 10**x with x in [-14, 14], i.e. numbers in [1e-14, 1e15)
MAX_DIGITS = 17
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Regime:
    """The operand regime: magnitudes 10**x for x in `decades` (inclusive) with at most
    `max_digits` significant digits. The default is the paper's; small experiments narrow it.
    `text_source` is where the text task's prose comes from (text_sources.py; "pydoc" offline)."""

    decades: tuple[int, int] = (LOW, HIGH)
    max_digits: int = MAX_DIGITS
    text_source: str = DEFAULT_TEXT_SOURCE

    def __post_init__(self):
        lo, hi = self.decades
        if not (LOW <= lo <= hi <= HIGH) or lo != int(lo) or hi != int(hi):
            raise ValueError(f"decades must be integers with {LOW} <= low <= high <= {HIGH}, got {self.decades}")
        if not 1 <= self.max_digits <= MAX_DIGITS or self.max_digits != int(self.max_digits):
            raise ValueError(f"max_digits must be an integer in 1..{MAX_DIGITS}, got {self.max_digits}")
        object.__setattr__(self, "decades", (int(lo), int(hi)))
        object.__setattr__(self, "max_digits", int(self.max_digits))
        parse_text_source(self.text_source)  # raises for a malformed one; the text task reads it

    @classmethod
    def of(cls, decades=None, max_digits=None, text_source=DEFAULT_TEXT_SOURCE) -> "Regime":
        """The regime with these bounds, None meaning the paper's."""
        return cls(tuple(decades) if decades is not None else (LOW, HIGH),
                   MAX_DIGITS if max_digits is None else max_digits, text_source)


PAPER = Regime()


def decades(rng, n, regime: Regime):
    lo, hi = regime.decades
    return rng.integers(lo, hi + 1, n)


def mantissas(rng, digits):
    """Uniform integers with exactly `digits` digits (array)."""
    low = 10 ** (digits.astype(np.int64) - 1)
    return rng.integers(low, 10 * low)


def numbers(rng, decade, digits):
    """Uniform numbers in [10**decade, 10**(decade+1)) with `digits` significant digits, as (M, e)."""
    M = mantissas(rng, digits)
    return round_trip(*normalize(M, decade - digits + 1))


def round_trip(M, e):
    """Replace 16-17 digit mantissas by the shortest float64 round-trip form (few rows, Python)."""
    M, e = M.copy(), e.copy()
    long = np.flatnonzero(np.abs(M) >= 10 ** 15)
    x = value_ld(M[long], e[long]).astype(np.float64)
    for i, v in zip(long.tolist(), x.tolist()):
        M[i], e[i] = shortest_repr(v)
    return normalize(M, e)


def round_to_digits(x, digits):
    """Float64 values rounded to `digits` significant digits, returned as (M, e)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    E = np.floor(np.log10(np.where(a == 0, 1, a))).astype(np.int64)
    e = E - digits + 1
    m = np.rint(a * 10.0 ** (-e.astype(np.float64)))  # approximate rounding is fine: sampling only
    carry = m >= 10.0 ** digits
    m, e = np.where(carry, np.rint(m / 10), m), np.where(carry, e + 1, e)
    M = m.astype(np.int64)
    return round_trip(*normalize(np.where(x < 0, -M, M), e))


def split_digits(rng, n, regime: Regime):
    """Significant digits of two operands (A.2): total p12 ~ U{2..34}, p1 ~ triangular(l, l+1, min(p12-1, 17))."""
    most = regime.max_digits
    p12 = rng.integers(2, 2 * most + 1, n)
    left = (p12 + 1) // 2
    right = np.maximum(np.minimum(p12 - 1, most), left)
    mode = np.minimum(left + 1, right)
    flat = right == left
    p1 = rng.triangular(left, mode, np.where(flat, left + 1e-9, right))
    p1 = np.clip(np.rint(p1).astype(np.int64), 1, most)
    p2 = np.clip(p12 - p1, 1, most)
    return p1, p2


def signs(rng, n):
    """Sign schema of A.2: both positive 40 %, exactly one negative 40 %, both negative 20 %."""
    u = rng.random(n)
    first = rng.random(n) < 0.5
    one = (u >= 0.4) & (u < 0.8)
    both = u >= 0.8
    s1 = np.where(both | (one & first), -1, 1)
    s2 = np.where(both | (one & ~first), -1, 1)
    return s1, s2


def _mix(h):
    """splitmix64 finalizer on uint64 arrays."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def question_hash(*keys):
    """Deterministic 64-bit hash of integer arrays that together identify a printed question."""
    with np.errstate(over="ignore"):
        h = np.full(len(keys[0]), 0x9E3779B97F4A7C15, dtype=np.uint64)
        for k in keys:
            h = _mix(h ^ np.asarray(k).astype(np.int64).view(np.uint64))
    return h


def split_of(h):
    """Hash partition: bucket 0 of 10 is val, bucket 1 test, buckets 2-9 train."""
    b = (h % np.uint64(10)).astype(np.int64)
    return np.where(b == 0, 1, np.where(b == 1, 2, 0))
