"""Difficulty heuristics of appendix A.3 in base 10 (`difficulty_sd`) and base 2 (`difficulty`).

Non-zero digits: base 10 counts the digits 1-9 of the printed number; base 2 counts the one-bits of
its float64 significand (the binary expansion of the float64 is exact and finite).
Rules (`*_rule`, per task): the regime turns those raw counts into levels. With difficulty_caps
(the default) they follow the authors' code, on which A.3's text is silent: multiplication at most 60
bits / 32 digits, division's bits clipped to [30, 60] (digits uncapped; the binary set is capped like
multiplication), damped exponentiation's bits clipped to [5, 58]. exp_difficulty="damped" is the authors' round(product ** 0.4) for exponentiation.
List tasks (our definition, A.3 gives none): for each neighbouring pair of the sorted list (plus the
reference for interval) the number of leading digits one must read before they differ,
floor(log_b max(|a|,|b|)) - floor(log_b |a-b|) + 1, summed over pairs.
Every level is computed exactly (exact.py): a level decides what the curriculum feeds a model, so it
must not depend on the last bits of a logarithm, which differ between CPUs.
"""

from decimal import Decimal, localcontext

import numpy as np

from .exact import floor_log2, floor_log10, round_power


def _log2_10() -> float:
    """log2(10) correctly rounded to float64, from decimal arithmetic (not the platform's libm)."""
    with localcontext() as ctx:
        ctx.prec = 50
        return float(Decimal(10).ln() / Decimal(2).ln())


LOG2_10 = _log2_10()


def nonzero_digits(M):
    """Digits 1-9 of the printed decimal M * 10**e (they are the non-zero digits of M)."""
    M = np.abs(np.asarray(M, dtype=np.int64))
    count = np.zeros(M.shape, dtype=np.int64)
    for _ in range(5):  # four digits at a time, looked up: an int64 has at most 19 digits
        count += _NONZERO4[M % 10_000]
        M = M // 10_000
    return count


_NONZERO4 = np.array([sum(ch != "0" for ch in f"{i:04d}") for i in range(10_000)], dtype=np.int64)


def nonzero_bits(x):
    """One-bits of the float64 significand (implicit leading bit included); 0 for zero."""
    bits = np.asarray(x, dtype=np.float64).view(np.uint64)
    exp = (bits >> np.uint64(52)) & np.uint64(0x7FF)
    m = bits & np.uint64((1 << 52) - 1)
    m = np.where(exp > 0, m | np.uint64(1 << 52), m)
    count = np.zeros(m.shape, dtype=np.int64)
    for shift in range(0, 56, 8):  # popcount byte by byte
        byte = ((m >> np.uint64(shift)) & np.uint64(0xFF)).astype(np.int64)
        count += _POP8[byte]
    return count


_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def shared_prefix(sorted_values, base):
    """Sum over neighbouring pairs of the leading digits (in `base`) they share, plus one each."""
    v = np.asarray(sorted_values, dtype=np.float64)
    a, b = v[:, :-1], v[:, 1:]
    valid = ~(np.isnan(a) | np.isnan(b))
    top = np.maximum(np.abs(np.nan_to_num(a)), np.abs(np.nan_to_num(b)))
    gap = np.abs(np.nan_to_num(b) - np.nan_to_num(a))
    floor_log = {2: floor_log2, 10: floor_log10}[base]
    d = floor_log(np.where(top > 0, top, 1)) - floor_log(np.where(gap > 0, gap, 1))
    d = np.maximum(d, 0) + 1
    return np.where(valid, d, 0).sum(axis=1).astype(np.int64)


def spread_difficulty(spread, decade, base):
    """delta_Mean = s - x + 15 (A.3), in digits of `base`; also used for std."""
    d = (spread - decade + 15).astype(np.float64)
    return np.maximum(0, np.rint(d * (LOG2_10 if base == 2 else 1))).astype(np.int64)


def multiplication_rule(d, base, regime):
    """The authors' caps: at most 60 non-zero bits (base 2), 32 non-zero digits (base 10)."""
    return np.minimum(d, 60 if base == 2 else 32) if regime.difficulty_caps else d


def division_rule(d, base, regime):
    """The authors' caps: bits clipped to [30, 60], digits uncapped; their binary set ("DivM", scored
    as a multiplication) is capped like multiplication."""
    if not regime.difficulty_caps:
        return d
    if regime.significance == "binary":
        return multiplication_rule(d, base, regime)
    return np.clip(d, 30, 60) if base == 2 else d


def exponentiation_rule(d, base, regime):
    """A.3's product of non-zero digits, or the authors' round(product ** 0.4) ("damped"), whose bits
    they clip to [5, 58]."""
    if regime.exp_difficulty == "product":
        return d
    d = round_power(d, 2, 5)  # round(d ** 0.4), exactly
    return np.clip(d, 5, 58) if regime.difficulty_caps and base == 2 else d
