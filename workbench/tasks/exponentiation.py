"""Exponentiation (A.1.3, eq. 12): integer powers b^k and integer roots b^(1/k), either sign.

A root exponent is printed as the shortest float64 text of 1/k (e.g. 0.3333333333333333), like
the released data. The label is the value of the printed expression, i.e. b raised to that exact
decimal (not to 1/3), computed at 60 digits where long double cannot decide the 15th digit.
"""

from fractions import Fraction

import numpy as np
import pandas as pd

from . import difficulty as dif
from .arithmetic import in_range, score_numbers
from .base import ARITHMETIC_PROMPT, Task
from .exact import (
    EPS_LD,
    decade,
    fmt_all,
    fraction,
    parse,
    pow_decimal,
    round_fast,
    round_fraction,
    settle,
    to_float,
    value_ld,
)
from .registry import register
from .sampling import numbers, question_hash

MAX_ROOT = 9
ROOTS = {k: parse(repr(1 / k)) for k in range(2, MAX_ROOT + 1)}  # k -> (M, e) of printed 1/k


def draw(rng, m, regime):
    """Base decades favour small |x| (weight 1/(|x|+1)); powers keep |k|(|x|+1) <= 14."""
    lo, hi = regime.decades
    xs = np.arange(lo, hi + 1)
    w = 1 / (np.abs(xs) + 1)
    x = rng.choice(xs, m, p=w / w.sum())
    p = rng.integers(1, regime.max_digits + 1, m)
    Mb, eb = numbers(rng, x, p)
    root = rng.random(m) < 0.5
    kmax = np.maximum(2, 14 // (np.abs(x) + 1))
    k = np.where(root, rng.integers(2, MAX_ROOT + 1, m), rng.integers(2, kmax + 1))
    Me = np.where(root, np.array([ROOTS[i][0] for i in range(2, MAX_ROOT + 1)])[np.clip(k - 2, 0, MAX_ROOT - 2)], k)
    ee = np.where(root, np.array([ROOTS[i][1] for i in range(2, MAX_ROOT + 1)])[np.clip(k - 2, 0, MAX_ROOT - 2)], 0)
    neg_exp = rng.random(m) < 0.5
    Me = np.where(neg_exp, -Me, Me)
    neg_base = ~root & (x >= 0) & (rng.random(m) < 0.5)
    Mb = np.where(neg_base, -Mb, Mb)
    valid = ~((Mb == 1) & (eb == 0))
    key = question_hash(Mb, eb, Me, ee)
    return dict(Mb=Mb, eb=eb, Me=Me, ee=ee, root=root, valid=valid, key=key)


def _usable(M, e):
    return in_range(M, e) & ~((np.abs(M) == 1) & (e == 0))  # result 1.00000000000000: base vanished


def _label(c, limit):
    b, x = value_ld(c["Mb"], c["eb"]), value_ld(c["Me"], c["ee"])
    with np.errstate(all="ignore"):
        r = np.power(np.abs(b), x)
        odd = ~c["root"] & (c["Me"] % 2 != 0)
        r = np.where((c["Mb"] < 0) & odd, -r, r)
        rel = (2 * np.abs(x) + np.abs(x * np.log(np.abs(b))) + 4).astype(np.float64) * 2 * EPS_LD
    M, e, ok = round_fast(r, rel)

    def exact(i):
        return exact_power(fraction(c["Mb"][i], c["eb"][i]), fraction(c["Me"][i], c["ee"][i]))

    return M, e, settle(M, e, ok, _usable, exact, limit)


def exact_power(base, exponent):
    """base ** exponent (Fractions) rounded to 15 significant digits: exact for integer exponents."""
    if exponent.denominator == 1:
        if base == 0 and exponent < 0:
            raise ValueError("zero to a negative power")
        return round_fraction(base ** int(exponent))
    if base < 0:
        raise ValueError("negative base with a non-integer exponent has no real value")
    if base == 0:
        return 0, 0
    return round_fraction(Fraction(pow_decimal(base, exponent)))


def build(c, limit):
    M, e, keep = _label(c, limit)
    c = {k: v[keep] for k, v in c.items()}
    M, e = M[keep], e[keep]
    b, x, ans = fmt_all(c["Mb"], c["eb"]), fmt_all(c["Me"], c["ee"]), fmt_all(M, e)
    prompt = [f"{u} ^ {v}" for u, v in zip(b, x)]
    fb, fx, fr = to_float(c["Mb"], c["eb"], b), to_float(c["Me"], c["ee"], x), to_float(M, e, ans)
    return pd.DataFrame(
        {
            "prompt": prompt,
            "text_prompt": [f"What is {p}?" for p in prompt],
            "answer": ans,
            "difficulty": dif.nonzero_bits(fb) * dif.nonzero_bits(fx) * dif.nonzero_bits(fr),
            "difficulty_sd": dif.nonzero_digits(c["Mb"]) * dif.nonzero_digits(c["Me"]) * dif.nonzero_digits(M),
            "num1": b,
            "num2": x,
            "op": "^",
            "root": c["root"],
            "num1_exp": decade(c["Mb"], c["eb"]),
        }
    )


def max_difficulty(base):
    return 17 * 17 * 15 if base == 10 else 53**3


EXPONENTIATION = register(
    Task(
        name="exponentiation",
        family="multi_step",
        label="Exp",
        answer="number",
        metric="log_smape",
        draw=draw,
        build=build,
        max_difficulty=max_difficulty,
        score=score_numbers,
        system_prompt=ARITHMETIC_PROMPT,
        curriculum=True,
        released_name="Exponentiation",
        difficulty_rule=dif.exponentiation_rule,
    )
)
