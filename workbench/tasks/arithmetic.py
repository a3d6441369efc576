"""Single-step arithmetic (A.1.2): addition (+ and -), multiplication, division.

Each task has draw(rng, m, regime) -> candidate operands (vectorized) and a build -> DataFrame with
labels exact to the printed question (long double + error bound, exact Fractions where undecided);
a binary set with `Regime.binary_labels = "float64"` gets the authors' float64 result instead.
Answers are scored by log-sMAPE (eq. 2) and 15-digit exact match (`score_numbers`, shared with
the multi-step tasks).
"""

from functools import partial

import numpy as np
import pandas as pd

from .. import metrics
from . import difficulty as dif
from .base import ARITHMETIC_PROMPT, Task, parse_float
from .exact import EPS_LD, decade, fmt_all, fraction, pow10, round_fast, round_fraction, settle, to_float, value_ld
from .registry import register
from .sampling import (
    HIGH,
    LOW,
    decades,
    float_pairs,
    numbers,
    operands,
    question_hash,
    round_to_bits,
    round_to_digits,
    signs,
    split_operands,
    split_total,
)

OPS = {"+": 0, "-": 1, "*": 2, "/": 3}


def _candidates(M1, e1, M2, e2, op, valid, extra=None):
    c = dict(M1=M1, e1=e1, M2=M2, e2=e2, op=np.asarray(op), valid=valid)
    code = sum(np.where(c["op"] == o, k, 0) for o, k in OPS.items())
    c["key"] = question_hash(M1, e1, M2, e2, code)
    c.update(extra or {})
    return c


def draw_addition(rng, m, regime):
    """Similar exponents oversampled: half the pairs share the decade up to a normal offset (sd 3)."""
    x1 = decades(rng, m, regime)
    near = np.clip(x1 + np.rint(rng.normal(0, 3, m)).astype(np.int64), *regime.decades)
    x2 = np.where(rng.random(m) < 0.5, near, decades(rng, m, regime))
    p1, p2 = split_total(rng, m, regime.max_share)
    swap = rng.random(m) < 0.5
    p1, p2 = np.where(swap, p2, p1), np.where(swap, p1, p2)
    M1, e1, ok1 = operands(rng, x1, p1, regime)
    M2, e2, ok2 = operands(rng, x2, p2, regime)
    s1, s2 = signs(rng, m)
    op = np.where(rng.random(m) < 0.5, "+", "-")
    M1, M2 = s1 * M1, s2 * M2
    a, b = value_ld(M1, e1), value_ld(M2, e2)
    r = np.where(op == "+", a + b, a - b)
    small, big = np.minimum(np.abs(a), np.abs(b)), np.maximum(np.abs(a), np.abs(b))
    ar = np.abs(r)
    # no vanishing information: every operand moves the 15-digit answer, no cancellation past 15 digits
    # (long double: log10 and power run on the x87 unit, never SIMD-dispatched, alike on every CPU)
    valid = (ar >= 1e-15 * big) & (small >= 0.5 * 10.0 ** (np.floor(np.log10(np.where(ar > 0, ar, 1))) - 14))
    extra = dict(
        _bits(regime, p1, p2),
        **_float64_label(regime, lambda x, y: np.where(op == "+", x + y, x - y), (M1, e1), (M2, e2)),
    )
    return _candidates(M1, e1, M2, e2, op, valid & ok1 & ok2, extra)


def draw_multiplication(rng, m, regime):
    x1, x2 = decades(rng, m, regime), decades(rng, m, regime)
    p1, p2 = split_operands(rng, m, regime)
    M1, e1, ok1 = operands(rng, x1, p1, regime)
    M2, e2, ok2 = operands(rng, x2, p2, regime)
    s1, s2 = signs(rng, m)
    valid = (x1 + x2 >= LOW) & (x1 + x2 <= HIGH) & ok1 & ok2
    extra = dict(_bits(regime, p1, p2), **_float64_label(regime, np.multiply, (s1 * M1, e1), (s2 * M2, e2)))
    return _candidates(s1 * M1, e1, s2 * M2, e2, np.full(m, "*"), valid, extra)


def draw_division(rng, m, regime):
    """Quotient and divisor are drawn (A.2); the dividend is their float64 product, printed."""
    if regime.significance == "binary":
        return _draw_division_binary(rng, m, regime)
    xq, xd = decades(rng, m, regime), decades(rng, m, regime)
    pq, pd_ = split_operands(rng, m, regime)
    Mq, eq = numbers(rng, xq, pq)
    Md, ed = numbers(rng, xd, pd_)
    valid = (xq + xd >= LOW) & (xq + xd <= HIGH - 1)
    prod = (value_ld(Mq, eq) * value_ld(Md, ed)).astype(np.float64)
    M1, e1 = round_to_digits(prod, np.minimum(pq + pd_, 17))
    s1, s2 = signs(rng, m)
    extra = dict(quotient_digits=pq, divisor_digits=pd_)
    if regime.division_bits == "reciprocal":  # the authors' base-2 difficulty counts the bits of 1/divisor
        extra["reciprocal_bits"] = dif.nonzero_bits(1.0 / to_float(Md, ed, fmt_all(Md, ed)))
    return _candidates(s1 * M1, e1, s2 * Md, ed, np.full(m, "/"), valid, extra)


def _draw_division_binary(rng, m, regime):
    """The authors' binary division set ("DivM"): x / d with d the shortest text of 1/y, where x and
    the multiplier y share the drawn bits like a multiplication's operands, so the quotient (about
    x * y) has a short binary expansion. The divisor d lies in a decade of the regime. Difficulty as
    the authors score it: non-zero bits of x and of the printed d, non-zero digits of x and of y."""
    x1, xd = decades(rng, m, regime), decades(rng, m, regime)
    p1, p2 = split_operands(rng, m, regime)
    M1, e1, ok1 = operands(rng, x1, p1, regime)
    y = round_to_bits(rng.uniform(pow10(-xd - 1), pow10(-xd)), p2)  # 1/y in (10**xd, 10**(xd+1)]
    d = 1.0 / y
    Md, ed = float_pairs(d)
    s1, s2 = signs(rng, m)
    xq = x1 - xd - 1  # the decade of x * y
    valid = (xq >= LOW) & (xq <= HIGH) & ok1 & regime.in_bounds(d)
    extra = dict(
        _bits(regime, p1, p2), multiplier=y, **_float64_label(regime, np.multiply, (s1 * M1, e1), (s2 * y, None))
    )
    return _candidates(s1 * M1, e1, s2 * Md, ed, np.full(m, "/"), valid, extra)


def _bits(regime, p1, p2):
    """The drawn significant bits of the two operands (the multiplier y for division), binary only."""
    return dict(num1_bits=p1, num2_bits=p2) if regime.significance == "binary" else {}


def _float64_label(regime, op, a, b):
    """{"label64": op(x, y)} in float64 for a binary set with the authors' labels, else {}.

    a, b: (M, e) of a drawn operand, or (float64 values, None). Binary operands are float64 values
    printed in full, and long double holds M * 10**e to 2**-62, so the cast back is exact."""
    if regime.significance != "binary" or regime.binary_labels != "float64":
        return {}
    x, y = (v if e is None else value_ld(v, e).astype(np.float64) for v, e in (a, b))
    return {"label64": op(x, y)}


def _label(c, limit):
    """(M, e) of the answer and the first `limit` rows in range: fast where the bound decides, exact elsewhere."""
    a, b = value_ld(c["M1"], c["e1"]), value_ld(c["M2"], c["e2"])
    op = c["op"]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.select([op == "+", op == "-", op == "*"], [a + b, a - b, a * b], a / b)
        cancel = (np.abs(a) + np.abs(b)) / np.abs(r)
    rel = np.where(
        (op == "+") | (op == "-"), 4 * EPS_LD * np.nan_to_num(cancel.astype(np.float64), posinf=1e300), 6 * EPS_LD
    )
    M, e, ok = round_fast(r, rel)

    def exact(i):
        x, y = fraction(c["M1"][i], c["e1"][i]), fraction(c["M2"][i], c["e2"][i])
        return round_fraction({"+": x + y, "-": x - y, "*": x * y, "/": x / y}[op[i]])

    return M, e, settle(M, e, ok, in_range, exact, limit)


def in_range(M, e):
    """|M * 10**e| in [1e-14, 1e15) or zero."""
    lead = decade(M, e)
    return (M == 0) | ((lead >= LOW) & (lead <= HIGH))


def build(task, c, limit):
    """DataFrame of the first `limit` candidates whose answer is in range (formatting is the cost)."""
    if "label64" in c:  # the authors' binary labels: the float64 result, printed in full
        M, e = float_pairs(c["label64"])
        keep = np.flatnonzero(in_range(M, e))[:limit]
    else:
        M, e, keep = _label(c, limit)
    c = {k: v[keep] for k, v in c.items()}
    M, e = M[keep], e[keep]
    a, b, ans = fmt_all(c["M1"], c["e1"]), fmt_all(c["M2"], c["e2"]), fmt_all(M, e)
    op = c["op"].tolist()
    prompt = [f"{x} {o} {y}" for x, o, y in zip(a, op, b)]
    fa, fb, fr = to_float(c["M1"], c["e1"], a), to_float(c["M2"], c["e2"], b), to_float(M, e, ans)
    nz_a, nz_b = dif.nonzero_digits(c["M1"]), dif.nonzero_digits(c["M2"])
    bits_a, bits_b = dif.nonzero_bits(fa), dif.nonzero_bits(fb)
    if task == "multiplication":
        d_sd, d_2 = nz_a + nz_b, bits_a + bits_b
    elif "multiplier" in c:  # binary division, the authors' rule: scored as the multiplication x * y
        d_sd, d_2 = nz_a + dif.nonzero_digits(float_pairs(c["multiplier"])[0]), bits_a + bits_b
    else:  # division (A.3) and addition (ours): operands and result; division_bits="reciprocal": 1/b's bits
        bits_b = c.get("reciprocal_bits", bits_b)
        d_sd, d_2 = nz_a + nz_b + dif.nonzero_digits(M), bits_a + bits_b + dif.nonzero_bits(fr)
    df = pd.DataFrame(
        {
            "prompt": prompt,
            "text_prompt": [f"What is {p}?" for p in prompt],
            "answer": ans,
            "difficulty": d_2,
            "difficulty_sd": d_sd,
            "num1": a,
            "num2": b,
            "op": op,
            "num1_exp": decade(c["M1"], c["e1"]),
            "num2_exp": decade(c["M2"], c["e2"]),
        }
    )
    for k in ("quotient_digits", "divisor_digits", "num1_bits", "num2_bits"):
        if k in c:
            df[k] = c[k]
    if "multiplier" in c:  # binary division: the y of x / (1/y), as its shortest text
        df["multiplier"] = fmt_all(*float_pairs(c["multiplier"] * np.sign(c["M2"])))
    return df


def max_difficulty(task, base):
    digits, result = (17, 15) if base == 10 else (53, 53)
    return 2 * digits + (0 if task == "multiplication" else result)


def score_numbers(predictions, answers) -> pd.DataFrame:
    """log-sMAPE (eq. 1-2) and 15-digit exact match of each predicted number against its label."""
    pred = np.array([parse_float(p) for p in predictions], dtype=np.float64)
    target = np.array([float(a) for a in answers], dtype=np.float64)
    return pd.DataFrame({"score": metrics.log_smape(pred, target), "exact": metrics.exact_match(pred, target)})


def _task(name, label, draw, curriculum, released_name, rule=None):
    return register(
        Task(
            name=name,
            family="single_step",
            label=label,
            answer="number",
            metric="log_smape",
            draw=draw,
            build=partial(build, name),
            max_difficulty=partial(max_difficulty, name),
            score=score_numbers,
            system_prompt=ARITHMETIC_PROMPT,
            curriculum=curriculum,
            released_name=released_name,
            difficulty_rule=rule,
        )
    )


ADDITION = _task("addition", "Add", draw_addition, False, "Addition")
MULTIPLICATION = _task("multiplication", "Mult", draw_multiplication, True, "Multiplication", dif.multiplication_rule)
DIVISION = _task("division", "Div", draw_division, True, "Division", dif.division_rule)
