"""Decimal numbers as (mantissa, exponent) integer pairs, and labels rounded to 15 significant digits.

A number is M * 10**e with M a (signed) int64 of at most 17 digits. That pair is exactly what gets
printed, so the label can be computed from the printed question. Labels are computed in long double
(64-bit significand on x86) with an error bound; only rows where the bound straddles a rounding
midpoint (or a decade boundary) are redone exactly with Python integers / fractions.

Decades, powers of ten and other values that decide a draw are computed here without numpy's
transcendental functions (`floor_log10`, `pow10`, `digits`, `decade`, `round_power`): numpy
dispatches log10, log, exp and power at run time to SIMD kernels (AVX-512's SVML, AVX2, the
baseline) that differ in their last bits, so a decision taken on their results makes the same seed
draw other questions on another CPU (issue 46). Exact comparisons against tables built once from
Python integers give every x86-64 CPU the same bits. (Long double arithmetic runs on the x87 unit
everywhere and is never SIMD-dispatched.)
"""

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

DIGITS = 15  # significant digits of every label
LD = np.longdouble
EPS_LD = float(np.finfo(LD).eps)  # 2**-63 on x86, 2**-52 where long double is double

_POW10_LOW, _POW10_HIGH = -400, 308  # 10.0 ** k is 0.0 below the table and inf above it
_POW10 = np.array([float(f"1e{k}") for k in range(_POW10_LOW, _POW10_HIGH + 1)] + [np.inf])  # correctly rounded
_POW10_INT = 10 ** np.arange(19, dtype=np.int64)  # every power of ten an int64 holds, exact
_DECADE_LOW = -324  # below the smallest subnormal float64, 4.9e-324


def _at_least(q: Fraction) -> float:
    """The smallest float64 >= q (CPython converts a Fraction correctly rounded)."""
    f = float(q)
    return f if Fraction(f) >= q else float(np.nextafter(f, np.inf))


# _DECADES[i]: the smallest float64 >= 10**(i + _DECADE_LOW), so a float64 x >= 10**k exactly when
# x >= _DECADES[k - _DECADE_LOW]: a comparison of floats decides the decade.
_DECADES = np.array([_at_least(Fraction(10) ** k) for k in range(_DECADE_LOW, _POW10_HIGH + 1)])


def pow10(k):
    """10.0 ** k correctly rounded (what float(f"1e{k}") gives), for integer k (array or scalar).

    A table lookup: numpy's `10.0 ** array` is SIMD-dispatched, its kernels round some powers
    differently, and a power of ten is often the bound of a draw or the unit of a rounding."""
    k = np.asarray(k)
    if k.dtype.kind not in "iu":
        raise TypeError(f"pow10 takes integer exponents, got {k.dtype}")
    return _POW10[np.clip(k, _POW10_LOW, _POW10_HIGH + 1) - _POW10_LOW]


def floor_log10(a):
    """floor(log10 a) of positive float64 values (array or scalar), exact: int64.

    Found among the decade thresholds `_DECADES` by binary search, so no rounding of a logarithm
    can move a value next to a power of ten (np.floor(np.log10(x)) can, and differently on
    different CPUs). Zero and negative values give -325: mask them first. Long double values are
    refused (a float64 table cannot decide them)."""
    a = np.asarray(a)
    if a.dtype == LD and LD != np.float64:
        raise TypeError("floor_log10 decides float64 values; long double needs its own table")
    a = a.astype(np.float64, copy=False)
    return np.searchsorted(_DECADES, a, side="right").astype(np.int64) - 1 + _DECADE_LOW


def floor_log2(a):
    """floor(log2 a) of positive finite float64 values, exact (the binary exponent): int64."""
    return np.frexp(np.asarray(a, dtype=np.float64))[1].astype(np.int64) - 1


def digits(M):
    """Decimal digits of |M| for int64 M (1 for 0), by comparison with exact integer powers of ten."""
    return np.searchsorted(_POW10_INT, np.maximum(np.abs(np.asarray(M, dtype=np.int64)), 1), side="right")


def decade(M, e):
    """floor(log10 |M * 10**e|) of printed decimals, exactly (int64; M = 0 counts as one digit).

    The decimal exponent of the number as printed: a float64 next to a power of ten can fall on the
    other side of it (float(1e-6) < 10**-6), so the decade comes from the digits, not the float."""
    return np.asarray(e, dtype=np.int64) + digits(M) - 1


def round_power(d, p, q):
    """round(d ** (p / q)) for non-negative integers d (array or scalar), exactly: int64.

    n is the nearest integer to d**(p/q) exactly when (2n - 1)**q <= 2**q * d**p < (2n + 1)**q,
    checked with Python integers for each distinct d (a tie would need an odd number equal to an
    even one, so there is none). A float power only gives the first guess."""
    d = np.asarray(d, dtype=np.int64)
    if (d < 0).any():
        raise ValueError("round_power takes non-negative integers")
    values, inverse = np.unique(d, return_inverse=True)
    out = []
    for v in values.tolist():
        target = 2**q * v**p
        n = round(float(v) ** (p / q))
        while (2 * n + 1) ** q <= target:
            n += 1
        while n > 0 and (2 * n - 1) ** q > target:
            n -= 1
        out.append(n)
    return np.asarray(out, dtype=np.int64)[inverse].reshape(d.shape)


def pow10_ld(k):
    """10**k in long double (exact for 0 <= k <= 27, one rounding otherwise)."""
    k = np.asarray(k, dtype=np.int64)
    mag = np.array([LD(10 ** int(i)) for i in range(0, 80)], dtype=LD)
    out = mag[np.abs(k)]
    return np.where(k >= 0, out, LD(1) / out)


def value_ld(M, e):
    """M * 10**e in long double (relative error <= 2 eps)."""
    M, e = np.asarray(M, dtype=np.int64), np.asarray(e, dtype=np.int64)
    mag = np.array([LD(10 ** int(i)) for i in range(0, 80)], dtype=LD)
    p = mag[np.abs(e)]
    m = M.astype(LD)
    return np.where(e >= 0, m * p, m / p)


def normalize(M, e):
    """Strip trailing zeros so that every value has one (M, e) form; zero becomes (0, 0)."""
    M, e = np.array(M, dtype=np.int64), np.array(e, dtype=np.int64)
    nonzero = M != 0
    for k in (16, 8, 4, 2, 1):  # an int64 has at most 18 trailing zeros: strip them in halving steps
        z = nonzero & (M % np.int64(10**k) == 0)
        if z.any():
            M[z] //= np.int64(10**k)
            e[z] += k
    e[~nonzero] = 0
    return M, e


def fmt(M, e):
    """Plain decimal string of M * 10**e: no exponent, no trailing zeros (M, e normalized)."""
    M, e = int(M), int(e)
    if M == 0:
        return "0"
    sign = "-" if M < 0 else ""
    s = str(abs(M))
    if e >= 0:
        return sign + s + "0" * e
    k = -e
    if len(s) > k:
        return sign + s[:-k] + "." + s[-k:]
    return sign + "0." + "0" * (k - len(s)) + s


_ZEROS = ["0" * i for i in range(64)]


def fmt_all(M, e):
    """fmt for arrays (normalized pairs), vectorized where it can be."""
    M, e = np.asarray(M, dtype=np.int64), np.asarray(e, dtype=np.int64)
    nd = digits(M)
    kind = np.where(e >= 0, 0, np.where(-e < nd, 1, 2)).tolist()
    Z = _ZEROS
    out = []
    for s, x, k, n, neg in zip(map(str, np.abs(M).tolist()), e.tolist(), kind, nd.tolist(), (M < 0).tolist()):
        t = s + Z[x] if k == 0 else (s[:x] + "." + s[x:] if k == 1 else "0." + Z[-x - n] + s)
        out.append("-" + t if neg else t)
    return out


def parse(s):
    """'-12.50' -> (-125, -1); exact, for plain decimals (an exponent suffix is also accepted)."""
    d = Decimal(s)
    if not d.is_finite():
        raise ValueError(f"not a finite number: {s!r}")
    sign, digits, exp = d.normalize().as_tuple()
    M = int("".join(map(str, digits)) or "0")
    return (-M if sign else M), (exp if M else 0)


def fraction(M, e):
    return Fraction(int(M) * 10 ** int(e)) if e >= 0 else Fraction(int(M), 10 ** -int(e))


def shortest_repr(x):
    """(M, e) of the shortest decimal that round-trips through float64 (what repr prints)."""
    mant, _, ex = repr(float(x)).partition("e")
    whole, _, frac = mant.partition(".")
    return int(whole + frac), int(ex or 0) - len(frac)


def round_fraction(x):
    """Exact Fraction -> (M, e) rounded half-even to 15 significant digits, normalized."""
    if x == 0:
        return 0, 0
    sign = -1 if x < 0 else 1
    num, den = abs(x.numerator), x.denominator
    E = len(str(num)) - len(str(den))  # floor(log10 x) is E or E - 1
    if num * 10 ** max(0, -E) < den * 10 ** max(0, E):
        E -= 1
    k = DIGITS - 1 - E  # scale so that x * 10**k is in [1e14, 1e15)
    a, b = (num * 10**k, den) if k >= 0 else (num, den * 10**-k)
    q, r = divmod(a, b)
    if 2 * r > b or (2 * r == b and q % 2 == 1):
        q += 1
    M, e = q, -k
    while M % 10 == 0:
        M //= 10
        e += 1
    return sign * M, e


def round_sqrt_fraction(x):
    """sqrt of an exact non-negative Fraction, rounded half-even to 15 significant digits (exact)."""
    if x < 0:
        raise ValueError("square root of a negative number")
    if x == 0:
        return 0, 0
    num, den = x.numerator, x.denominator
    E = math.floor(math.log10(math.sqrt(num / den)))  # estimate, corrected below
    for _ in range(8):  # find k with sqrt(x) * 10**k in [1e14, 1e15)
        k = DIGITS - 1 - E
        a, b = (num * 10 ** (2 * k), den) if k >= 0 else (num, den * 10 ** (-2 * k))
        t = math.isqrt(4 * a // b)  # floor(2 y), y = sqrt(a / b)
        if t < 2 * 10 ** (DIGITS - 1):
            E -= 1
        elif t >= 2 * 10**DIGITS:
            E += 1
        else:
            break
    q = t // 2
    if t % 2 == 1:  # y >= q + 1/2: round up unless it is an exact tie with q even
        tie = 4 * a == t * t * b
        q += 0 if (tie and q % 2 == 0) else 1
    M, e = q, -k
    while M % 10 == 0:
        M //= 10
        e += 1
    return M, e


def pow_decimal(base, exponent, prec=60):
    """|base| ** exponent (Fractions) at `prec` digits, for non-integer exponents of positive bases."""
    with localcontext() as ctx:
        ctx.prec = prec
        b = Decimal(base.numerator) / Decimal(base.denominator)
        x = Decimal(exponent.numerator) / Decimal(exponent.denominator)
        return (x * b.ln()).exp()


def round_fast(v, rel_err):
    """Round long-double values to 15 significant digits where the error bound allows it.

    v: long double values whose relative error is at most rel_err (array). Returns (M, e, ok):
    ok is False where the bound straddles a rounding midpoint or a power of ten (redo exactly).
    """
    v = np.asarray(v, dtype=LD)
    a = np.abs(v)
    zero = a == 0
    E = np.floor(np.log10(np.where(zero, 1, a))).astype(np.int64)
    k = DIGITS - 1 - E
    scaled = a * pow10_ld(k)
    lo, hi = LD(10.0 ** (DIGITS - 1)), LD(10.0**DIGITS)
    low = scaled < lo  # log10 was off by one near a power of ten
    k = np.where(low, k + 1, k)
    high = scaled >= hi
    k = np.where(high, k - 1, k)
    scaled = np.where(low | high, a * pow10_ld(k), scaled)
    bound = scaled * LD(np.asarray(rel_err, dtype=np.float64) + 6 * EPS_LD)
    n = np.floor(scaled)
    frac = scaled - n
    ok = (np.abs(frac - LD(0.5)) > bound) & (scaled - bound >= lo) & (scaled + bound < hi - LD(0.5))
    M = (n + (frac > 0.5)).astype(np.int64) * np.where(v < 0, -1, 1)
    ok = ok | zero
    M = np.where(zero, 0, M)
    M, e = normalize(M, np.where(zero, 0, -k))
    return M, e, ok


def settle(M, e, ok, usable, exact_row, limit):
    """Indices of the first `limit` usable rows, redoing exactly only the undecided rows among them.

    usable(M, e) -> bool mask; exact_row(i) -> (M, e) of row i. Rows past the answer's last index are
    never labelled exactly (their labels are not used), which is where most exact work would go.
    """
    ok = ok.copy()
    while True:
        first = np.flatnonzero(usable(M, e) | ~ok)[:limit]
        todo = first[~ok[first]]
        if not len(todo):
            return first
        for i in todo.tolist():
            M[i], e[i] = exact_row(i)
        ok[todo] = True


def to_float(M, e, text):
    """float64 of the decimal M * 10**e (its `text`), correctly rounded like float(text).

    |M| < 2**53 and |e| <= 22 make both operands exact, so one IEEE multiply/divide rounds correctly;
    the other rows are parsed from their text.
    """
    M, e = np.asarray(M, dtype=np.int64), np.asarray(e, dtype=np.int64)
    p = pow10(np.minimum(np.abs(e), 22))  # 10**0 ... 10**22 are exact in float64
    m = M.astype(np.float64)
    x = np.where(e >= 0, m * p, m / p)
    for i in np.flatnonzero((np.abs(M) >= 2**53) | (np.abs(e) > 22)).tolist():
        x[i] = float(text[i])
    return x
