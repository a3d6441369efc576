"""Number sampling of appendix A.2, vectorized: decades, significant digits, signs, splits.

Every operand is a pair (M, e) = M * 10**e with at most 17 significant digits whose decimal text is
the shortest float64 round-trip form, so BitTokens (float64) see exactly the printed number.
"""

from dataclasses import dataclass

import numpy as np

from .exact import floor_log10, normalize, pow10, shortest_repr, value_ld
from .text_sources import DEFAULT as DEFAULT_TEXT_SOURCE
from .text_sources import parse as parse_text_source

LOW, HIGH = -14, 14  # decades: magnitudes 10**x with x in [-14, 14], i.e. numbers in [1e-14, 1e15)
MAX_DIGITS = 17
SPLITS = ("train", "val", "test")


SIGNIFICANCE = ("decimal", "binary")
EXP_DIFFICULTY = ("product", "damped")
BINARY_LABELS = ("rounded", "float64")
DIVISION_BITS = ("divisor", "reciprocal")
LIST_LENGTHS = (2, 5)
LIST_SAMPLING = ("auto", "paper", "resolved")


@dataclass(frozen=True)
class Regime:
    """How numbers are drawn, for every task. The default is the paper's; small experiments narrow it.

    decades, max_digits: magnitudes 10**x for x in `decades` (inclusive) with at most `max_digits`
        significant digits: the operands of the arithmetic tasks, the base of exponentiation (its
        exponent is an integer or the printed 1/k), the quotient and divisor of division (its
        dividend is their product) and every list element (lists.py says how spreads follow).
    list_lengths: (shortest, longest) list, within the paper's 2..5.
    list_sampling: "paper" (A.2: element digits p ~ U{1..D} whatever the spread; lists whose elements
        collide are dropped, which favours short lists when D is small), "resolved" (the authors'
        p >= x - s + 2, and a rejected list is redrawn at its length, so lengths stay uniform) or
        "auto": paper at 17 digits, resolved below.
    significance: "decimal" (A.2: significant digits) or "binary" (A.3's BitTokens training set:
        significant bits, ~U{2..2B} split between the operands like the digits, B = the bits of
        `max_digits` digits, at most 53; division as x / (1/y)). Binary applies to addition,
        multiplication and division; the other tasks ignore it.
    swap_operands: give the larger share of the digits to either operand of a multiplication or
        division at random (the authors' code swaps; A.2's text does not).
    difficulty_caps: the authors' bounds on the difficulty levels (multiplication at most 60 bits /
        32 digits; division's bits clipped to [30, 60], its binary set capped like multiplication;
        damped exponentiation's bits clipped to [5, 58]). False: A.3's raw counts.
    exp_difficulty: "product" of the non-zero digits of base, exponent and result (A.3's text) or
        "damped", round(product ** 0.4) (the authors' code).
    binary_labels: answers of the binary set: "rounded" (A.2: "round all answers to at most 15
        significant digits", exact like every other label) or "float64" (the authors' data: the
        float64 result of the drawn operands, x * y for division's x / (1/y), up to 17 digits).
        Decimal sets ignore it.
    division_bits: base-2 difficulty of decimal division, the non-zero bits of dividend and
        quotient plus those of the "divisor" (A.3's "dividend, divisor and quotient") or of its
        float64 "reciprocal" (the authors' code). The binary set ignores it (it prints 1/y).
    text_source: where the text task's prose comes from (text_sources.py; "shipped", the corpus shipped with the workbench, offline).
    """

    decades: tuple[int, int] = (LOW, HIGH)
    max_digits: int = MAX_DIGITS
    list_lengths: tuple[int, int] = LIST_LENGTHS
    list_sampling: str = "auto"
    significance: str = "decimal"
    swap_operands: bool = False
    difficulty_caps: bool = True
    exp_difficulty: str = "product"
    binary_labels: str = "rounded"
    division_bits: str = "divisor"
    text_source: str = DEFAULT_TEXT_SOURCE

    def __post_init__(self):
        lo, hi = self.decades
        if not (LOW <= lo <= hi <= HIGH) or lo != int(lo) or hi != int(hi):
            raise ValueError(f"decades must be integers with {LOW} <= low <= high <= {HIGH}, got {self.decades}")
        if not 1 <= self.max_digits <= MAX_DIGITS or self.max_digits != int(self.max_digits):
            raise ValueError(f"max_digits must be an integer in 1..{MAX_DIGITS}, got {self.max_digits}")
        shortest, longest = self.list_lengths
        if (
            not (LIST_LENGTHS[0] <= shortest <= longest <= LIST_LENGTHS[1])
            or shortest != int(shortest)
            or longest != int(longest)
        ):
            raise ValueError(
                f"list_lengths must be integers with {LIST_LENGTHS[0]} <= shortest <= longest <= "
                f"{LIST_LENGTHS[1]}, got {self.list_lengths}"
            )
        for name, value, allowed in (
            ("list_sampling", self.list_sampling, LIST_SAMPLING),
            ("significance", self.significance, SIGNIFICANCE),
            ("exp_difficulty", self.exp_difficulty, EXP_DIFFICULTY),
            ("binary_labels", self.binary_labels, BINARY_LABELS),
            ("division_bits", self.division_bits, DIVISION_BITS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        for name in ("swap_operands", "difficulty_caps"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        object.__setattr__(self, "decades", (int(lo), int(hi)))
        object.__setattr__(self, "max_digits", int(self.max_digits))
        parse_text_source(self.text_source)  # raises for a malformed one; the text task reads it
        object.__setattr__(self, "list_lengths", (int(shortest), int(longest)))
        object.__setattr__(self, "swap_operands", bool(self.swap_operands))
        object.__setattr__(self, "difficulty_caps", bool(self.difficulty_caps))

    @classmethod
    def of(cls, decades=None, max_digits=None, **options) -> "Regime":
        """The regime with these bounds, None meaning the paper's; `options` are the other fields."""
        return cls(
            tuple(decades) if decades is not None else (LOW, HIGH),
            MAX_DIGITS if max_digits is None else max_digits,
            **options,
        )

    @property
    def list_rule(self) -> str:
        """The list sampling in force: "auto" is the paper's at 17 digits, "resolved" below."""
        if self.list_sampling != "auto":
            return self.list_sampling
        return "paper" if self.max_digits == MAX_DIGITS else "resolved"

    @property
    def max_share(self) -> int:
        """Most significant digits (decimal) or bits (binary) of one operand."""
        return self.max_bits if self.significance == "binary" else self.max_digits

    @property
    def max_bits(self) -> int:
        """Significant bits per operand in the binary regime: as many as `max_digits` digits hold."""
        return min(53, (10**self.max_digits - 1).bit_length())  # ceil(log2 10**D), in integers

    def in_bounds(self, x):
        """|x| in [10**low, 10**(high+1)) (float64 array), or zero."""
        a = np.abs(x)
        lo, hi = self.decades
        return ((a >= pow10(lo)) & (a < pow10(hi + 1))) | (a == 0)


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
    long = np.flatnonzero(np.abs(M) >= 10**15)
    x = value_ld(M[long], e[long]).astype(np.float64)
    for i, v in zip(long.tolist(), x.tolist()):
        M[i], e[i] = shortest_repr(v)
    return normalize(M, e)


def round_to_digits(x, digits):
    """Float64 values rounded to `digits` significant digits, returned as (M, e).

    The rounding is float64's (a * 10**-e, then rint), approximate but fine for sampling; its decade
    and scale are exact (floor_log10, pow10), so it rounds alike on every CPU."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    E = floor_log10(np.where(a == 0, 1, a))
    e = E - digits + 1
    m = np.rint(a * pow10(-e))
    carry = m >= pow10(digits)
    m, e = np.where(carry, np.rint(m / 10), m), np.where(carry, e + 1, e)
    M = m.astype(np.int64)
    return round_trip(*normalize(np.where(x < 0, -M, M), e))


def split_total(rng, n, most):
    """A.2's split of a total p12 ~ U{2..2*most} into p1 ~ triangular(l, l+1, min(p12-1, most)),
    l = ceil(p12/2), and p2 = p12 - p1, both in 1..most (digits, or bits for the binary set)."""
    p12 = rng.integers(2, 2 * most + 1, n)
    left = (p12 + 1) // 2
    right = np.maximum(np.minimum(p12 - 1, most), left)
    mode = np.minimum(left + 1, right)
    flat = right == left
    p1 = rng.triangular(left, mode, np.where(flat, left + 1e-9, right))
    p1 = np.clip(np.rint(p1).astype(np.int64), 1, most)
    p2 = np.clip(p12 - p1, 1, most)
    return p1, p2


def split_operands(rng, n, regime: Regime):
    """Shares (p1, p2) of two operands: digits, or bits in the binary regime; the larger share p1
    goes to a random operand when the regime swaps."""
    p1, p2 = split_total(rng, n, regime.max_share)
    if regime.swap_operands:
        swap = rng.random(n) < 0.5
        p1, p2 = np.where(swap, p2, p1), np.where(swap, p1, p2)
    return p1, p2


def round_to_bits(x, bits):
    """Float64 values rounded half-even to `bits` significant bits (1..53): exact, like the
    significand of a shorter float."""
    m, E = np.frexp(np.asarray(x, dtype=np.float64))  # x = m * 2**E, 0.5 <= |m| < 1
    return np.ldexp(np.rint(np.ldexp(m, bits)), E - bits)


def binary_numbers(rng, decade, bits):
    """Uniform numbers in [10**decade, 10**(decade+1)) rounded to `bits` significant bits, as the
    (M, e) of their shortest decimal text and the float64 values (rounding may cross a decade)."""
    x = round_to_bits(rng.uniform(pow10(decade), pow10(decade + 1)), bits)
    return (*float_pairs(x), x)


def float_pairs(x):
    """(M, e) of the shortest round-trip decimal text of each float64 (what repr prints)."""
    pairs = [shortest_repr(v) for v in np.asarray(x, dtype=np.float64).tolist()]
    M = np.array([p[0] for p in pairs], dtype=np.int64).reshape(np.shape(x))
    e = np.array([p[1] for p in pairs], dtype=np.int64).reshape(np.shape(x))
    return normalize(M, e)


def operands(rng, decade, share, regime: Regime):
    """(M, e) of numbers in `decade` with `share` significant digits, or bits in the binary regime
    (those outside the regime's bounds after rounding are flagged False in the third array)."""
    if regime.significance == "binary":
        M, e, x = binary_numbers(rng, decade, share)
        return M, e, regime.in_bounds(x)
    M, e = numbers(rng, decade, share)
    return M, e, np.ones(len(M), dtype=bool)


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
