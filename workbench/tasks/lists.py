"""List tasks (A.1.1, A.1.3): minmax, sorting, interval, mean, std.

Lists of 2-5 numbers (the regime's `list_lengths`) around a mean m ~ U(10^x, 10^(x+1)), x in the
regime's decades, with spread 10^s: of K candidate lists (offsets uniform in [-10^s, 10^s], rounded
to p ~ U{1..D} significant digits, D = the regime's max_digits) the one whose mean is closest to m
is kept (A.2 draws 1000 lists; we vectorize K = 32). All elements are shortest float64 round-trip
decimals, so comparing their float64 values compares the printed numbers exactly.

Spreads, so that one regime knob governs the lists as it does the operands:
    s in [max(x - min(13, D - 2), -14),  min(x + w, 13, high)],   w = 2 (minmax, sorting, interval)
                                                                  w = D (mean, std)
- Lower bound: with D digits an element near the mean has its last digit at 10^(x-D+1) (10^(x-D+2)
  past the decade's top), so a spread 10^s spans 2 * 10^(s-x+D-1) such steps. s >= x - (D - 2) gives
  at least 20 (2 near the top), enough for five distinct elements; a smaller spread collapses the
  list into duplicates. A.2's x - 13 is that bound at 15 digits; with 17 digits the paper's rule is
  kept exactly, with fewer the bound rises (D = 2: s >= x).
- Upper bound: A.2's x + 2 for the comparisons, x + 17 for mean/std, read as x + D: with D digits,
  elements 10^(x+D) apart cannot hold a mean near 10^x any more. Never above A.2's 13, nor above the
  regime's top decade (a wider spread puts most elements beyond the regime's bound).
- Lists whose elements collide after rounding are dropped, and so are lists with an element (or
  interval reference) outside the regime's magnitudes [10^low, 10^(high+1)) — A.2's [1e-14, 1e15)
  in the paper's regime.
- Digits, by the regime's `list_sampling`: "paper" draws p ~ U{1..D} whatever the spread (A.2) and
  keeps the surviving lists, so lengths skew short when few digits collide often (D = 2: 39 % of
  the lists have 2 elements, 16 % have 5). "resolved" draws p ~ U{clip(x - s + 2, 1, D)..D} (the
  authors' rule: digits enough for the spread) and redraws a rejected list at its drawn length, so
  every length stays equally frequent (only lengths the regime cannot fill at all, e.g. five
  distinct one-digit numbers within one decade, go missing). "auto" (the default) is "paper" at
  17 digits, so the paper's regime draws exactly A.2's lists, and "resolved" below.
"""

import math
from fractions import Fraction
from functools import partial

import numpy as np
import pandas as pd

from .. import metrics
from . import difficulty as dif
from .arithmetic import in_range, score_numbers
from .base import ARITHMETIC_PROMPT, HEADER_LIST, NO_TOOLS, NUMERIC_ANSWER, Task, accuracy, parse_float
from .exact import (
    EPS_LD,
    floor_log10,
    fmt_all,
    fraction,
    pow10,
    round_fast,
    round_fraction,
    round_sqrt_fraction,
    settle,
    value_ld,
)
from .registry import register
from .sampling import HIGH, LOW, decades, question_hash, round_to_digits

MAX_LEN, CANDIDATES = 5, 32
RETRIES = 16  # redraws of a rejected list at its length ("resolved" sampling)
LETTERS = "ABCDEF"
OPS = {"minmax": ("min", "max"), "sorting": ("asc", "desc"), "interval": ("intva",), "mean": ("mean",), "std": ("std",)}


def _round_float(v, p):
    """v rounded to p significant digits in float64 (the unit is an exact power of ten)."""
    a = np.abs(v)
    scale = pow10(floor_log10(np.where(a > 0, a, 1)) - p + 1)
    return np.rint(v / scale) * scale


def _closest(raw, used, length, mean, p):
    """Index of the candidate list whose mean, after rounding each element to p digits, is nearest.

    Rounding moves an element by at most half the rounding unit of the row's largest element, so
    a candidate whose unrounded mean is that much (doubled, for safety) farther than the best cannot
    win; only the others are rounded. Ties go to the first candidate, as np.argmin over all does.
    """
    rw = np.where(used[:, None, :], raw, 0)
    n = length[:, None]
    top = np.abs(raw).max(axis=(1, 2))
    unit = pow10(floor_log10(np.where(top > 0, top, 1)) - p + 1)
    err = (unit + 1e-12 * (top + np.abs(mean)))[:, None]
    near = np.abs(rw.sum(-1) / n - mean[:, None])
    alive = near - err <= (near + err).min(axis=1, keepdims=True)
    r, k = np.nonzero(alive)
    vals = _round_float(raw[r, k], p[r, None])
    dist = np.full(alive.shape, np.inf)
    dist[r, k] = np.abs(np.where(used[r], vals, 0).sum(-1) / length[r] - mean[r])
    return np.argmin(dist, axis=1)


def spread_bounds(x, regime, wide):
    """Lowest and highest spread exponent s of lists around decade x (see the module's docstring)."""
    digits, top = regime.max_digits, regime.decades[1]
    high = np.minimum(np.minimum(x + (digits if wide else 2), HIGH - 1), top)
    low = np.maximum(x - min(13, digits - 2), LOW)
    return np.minimum(low, high), high


def _draw_lists(rng, m, regime, wide, check=None):
    """(M, e) arrays of shape (m, 5) (padding M=0 beyond each length), lengths, decades, spreads.

    check(rng, c) adds a task's own draws and validity (interval's reference, mean/std's answer
    range). The "resolved" sampling redraws rejected rows at their drawn length, so that every
    length stays equally frequent however often short digits collide."""
    shortest, longest = regime.list_lengths
    length = rng.integers(shortest, longest + 1, m)
    c = _lists(rng, length, regime, wide, check)
    if regime.list_rule == "resolved":
        for _ in range(RETRIES):
            bad = np.flatnonzero(~c["valid"])
            if not len(bad):
                break
            for k, v in _lists(rng, length[bad], regime, wide, check).items():
                c[k][bad] = v
    return c


def _lists(rng, length, regime, wide, check):
    m = len(length)
    x = decades(rng, m, regime)
    s_lo, s_hi = spread_bounds(x, regime, wide)
    s = rng.integers(s_lo, s_hi + 1)
    if regime.list_rule == "resolved":  # enough digits to resolve the spread (the authors' rule)
        p = rng.integers(np.clip(x - s + 2, 1, regime.max_digits), regime.max_digits + 1)
    else:
        p = rng.integers(1, regime.max_digits + 1, m)
    mean = rng.uniform(pow10(x), pow10(x + 1)) * np.where(rng.random(m) < 0.5, -1, 1)
    off = rng.uniform(-1, 1, (m, CANDIDATES, MAX_LEN)) * pow10(s)[:, None, None]
    raw = mean[:, None, None] + off
    used = np.arange(MAX_LEN)[None, :] < length[:, None]
    rows = np.arange(m)
    v = _round_float(raw[rows, _closest(raw, used, length, mean, p)], p[:, None])
    M, e = round_to_digits(v.ravel(), np.repeat(p, MAX_LEN))
    M, e = M.reshape(m, MAX_LEN), e.reshape(m, MAX_LEN)
    M, e = np.where(used, M, 0), np.where(used, e, 0)
    f = value_ld(M, e).astype(np.float64)
    ok_range = regime.in_bounds(f)
    fs = np.where(used, f, np.nan)
    srt = np.sort(fs, axis=1)
    distinct = ~(np.diff(srt, axis=1) == 0).any(axis=1)
    valid = ok_range.all(axis=1) & distinct
    c = dict(M=M, e=e, length=length, decade=x, spread=s, digits=p, valid=valid, sorted=srt)
    return c if check is None else check(rng, c, regime)


def _finish(c, op_codes, *extra_keys):
    c["key"] = question_hash(op_codes, c["length"], *c["M"].T, *c["e"].T, *extra_keys)
    return c


def draw_minmax(rng, m, regime):
    c = _draw_lists(rng, m, regime, wide=False)
    c["op"] = np.where(rng.random(m) < 0.5, "min", "max")
    return _finish(c, (c["op"] == "max").astype(np.int64) + 10)


def draw_sorting(rng, m, regime):
    c = _draw_lists(rng, m, regime, wide=False)
    c["op"] = np.where(rng.random(m) < 0.5, "asc", "desc")
    return _finish(c, (c["op"] == "desc").astype(np.int64) + 20)


def draw_interval(rng, m, regime):
    c = _draw_lists(rng, m, regime, wide=False, check=_reference)
    c["op"] = np.full(m, "intva")
    return _finish(c, np.full(m, 30), c["Mr"], c["er"])


def _reference(rng, c, regime):
    """Reference value of eq. 11: below, between or above the sorted list, rounded like its elements."""
    L, n = c["sorted"], c["length"]
    m = len(n)
    pos = rng.integers(0, n + 1)
    step = pow10(c["spread"]) / n
    rows = np.arange(m)
    first, last = L[:, 0], L[rows, n - 1]
    lo, hi = L[rows, np.maximum(pos - 1, 0)], L[rows, np.minimum(pos, n - 1)]
    ref = np.where(pos == 0, first - step, np.where(pos == n, last + step, rng.uniform(lo, np.maximum(hi, lo))))
    Mr, er = round_to_digits(ref, c["digits"])
    c["valid"] &= regime.in_bounds(value_ld(Mr, er).astype(np.float64))
    c.update(Mr=Mr, er=er)
    return c


def _mean_std_valid(c, std):
    v = value_ld(c["M"], c["e"])
    used = np.arange(MAX_LEN)[None, :] < c["length"][:, None]
    mean = v.sum(axis=1) / c["length"]
    big = np.abs(v).max(axis=1).astype(np.float64)
    if std:
        r = np.sqrt((np.where(used, v - mean[:, None], 0) ** 2).sum(axis=1) / c["length"]).astype(np.float64)
        return (r >= 1e-15 * big) & (r >= 1e-14) & (r < 1e15)
    r = np.abs(mean).astype(np.float64)
    unit = 0.5 * pow10(floor_log10(np.where(r > 0, r, 1)) - 14)
    small = np.where(used & (c["M"] != 0), np.abs(v).astype(np.float64), np.inf).min(axis=1) / c["length"]
    return (r >= 1e-15 * big) & (small >= unit) & (r > 0)


def _answer_check(std):
    def check(rng, c, regime):
        c["valid"] &= _mean_std_valid(c, std)
        return c

    return check


def draw_mean(rng, m, regime):
    c = _draw_lists(rng, m, regime, wide=True, check=_answer_check(std=False))
    c["op"] = np.full(m, "mean")
    return _finish(c, np.full(m, 40))


def draw_std(rng, m, regime):
    c = _draw_lists(rng, m, regime, wide=True, check=_answer_check(std=True))
    c["op"] = np.full(m, "std")
    return _finish(c, np.full(m, 50))


def _usable(M, e):
    return in_range(M, e) & (M != 0)


def _label_mean_std(c, std, limit):
    v = value_ld(c["M"], c["e"])
    n = c["length"]
    used = np.arange(MAX_LEN)[None, :] < n[:, None]
    absmax = np.abs(v).max(axis=1)
    if std:
        d = np.where(used, v - v[:, :1], 0)
        dev = np.where(used, d - (d.sum(axis=1) / n)[:, None], 0)
        r = np.sqrt((dev**2).sum(axis=1) / n)
        with np.errstate(divide="ignore"):
            rel = 4 * (n + 4) * EPS_LD * (absmax / r).astype(np.float64) + 8 * EPS_LD
    else:
        r = v.sum(axis=1) / n
        with np.errstate(divide="ignore"):
            rel = 2 * (n + 4) * EPS_LD * (np.abs(v).sum(axis=1) / np.abs(r)).astype(np.float64)
    M, e, ok = round_fast(r, np.nan_to_num(rel, posinf=1e300))

    def exact(i):
        xs = [fraction(c["M"][i, j], c["e"][i, j]) for j in range(n[i])]
        mu = sum(xs, Fraction(0)) / n[i]
        if std:
            return round_sqrt_fraction(sum(((x - mu) ** 2 for x in xs), Fraction(0)) / n[i])
        return round_fraction(mu)

    return M, e, settle(M, e, ok, _usable, exact, limit)


def _elements(c):
    """Each list's element texts (as printed), the prompt body "a, b, c" and the float64 values
    with NaN padding."""
    n = c["length"]
    flat = np.array(fmt_all(c["M"].ravel(), c["e"].ravel()), dtype=object).reshape(c["M"].shape).tolist()
    elems = [row[:k] for row, k in zip(flat, n.tolist())]
    values = value_ld(c["M"], c["e"]).astype(np.float64)
    values = np.where(np.arange(MAX_LEN)[None, :] < n[:, None], values, np.nan)
    return elems, [", ".join(x) for x in elems], values


def _frame(c, prompt, text, answer, d_2, d_sd, **extra):
    return pd.DataFrame(
        {
            "prompt": prompt,
            "text_prompt": text,
            "answer": answer,
            "difficulty": d_2,
            "difficulty_sd": d_sd,
            "op": c["op"].tolist(),
            "list_len": c["length"],
            "exp": c["decade"],
            "spread": c["spread"],
            "digits": c["digits"],
            **extra,
        }
    )


def build_mean_std(task, c, limit):
    """Mean or std (A.1.3), labelled exactly; candidates whose answer is out of range are dropped."""
    M, e, keep = _label_mean_std(c, task == "std", limit)
    c = {k: v[keep] for k, v in c.items()}
    _, body, _ = _elements(c)
    return _frame(
        c,
        [f"<|{task}|>{b}" for b in body],
        [f"What is the {task} of the list [{b}]?" for b in body],
        fmt_all(M[keep], e[keep]),
        dif.spread_difficulty(c["spread"], c["decade"], 2),
        dif.spread_difficulty(c["spread"], c["decade"], 10),
    )


def build_minmax(c, limit):
    c = {k: v[:limit] for k, v in c.items()}
    elems, body, values = _elements(c)
    idx = np.where(c["op"] == "min", np.nanargmin(values, axis=1), np.nanargmax(values, axis=1))
    op = c["op"].tolist()
    text = [f"What is the {'minimum' if o == 'min' else 'maximum'} of the list [{b}]?" for o, b in zip(op, body)]
    return _frame(
        c,
        [f"<|{o}|>{b}" for o, b in zip(op, body)],
        text,
        [x[i] for x, i in zip(elems, idx.tolist())],
        dif.shared_prefix(c["sorted"], 2),
        dif.shared_prefix(c["sorted"], 10),
    )


def build_sorting(c, limit):
    c = {k: v[:limit] for k, v in c.items()}
    elems, body, values = _elements(c)
    order = np.argsort(values, axis=1, kind="stable")  # NaN padding sorts last
    op = c["op"].tolist()
    answer = []
    for x, o, k, direction in zip(elems, order.tolist(), c["length"].tolist(), op):
        ascending = [x[i] for i in o[:k]]
        answer.append(", ".join(ascending if direction == "asc" else ascending[::-1]))
    text = [f"Sort the list [{b}] in {'ascending' if o == 'asc' else 'descending'} order." for o, b in zip(op, body)]
    return _frame(
        c,
        [f"<|{o}|>{b}" for o, b in zip(op, body)],
        text,
        answer,
        dif.shared_prefix(c["sorted"], 2),
        dif.shared_prefix(c["sorted"], 10),
    )


def build_interval(c, limit):
    """The list is printed sorted ascending, as the released data does; the answer is a letter."""
    c = {k: v[:limit] for k, v in c.items()}
    elems, _, values = _elements(c)
    n = c["length"]
    order = np.argsort(values, axis=1, kind="stable").tolist()
    refs = fmt_all(c["Mr"], c["er"])
    ref_values = value_ld(c["Mr"], c["er"]).astype(np.float64)
    position = (np.where(np.isnan(values), np.inf, values) <= ref_values[:, None]).sum(axis=1)
    prompt, text = [], []
    for x, o, k, r in zip(elems, order, n.tolist(), refs):
        s = [x[i] for i in o[:k]]
        prompt.append(f"<|intva|>{r}: " + " ".join(f"{LETTERS[i]} {v}" for i, v in enumerate(s)) + f" {LETTERS[k]}")
        parts = [f"A: x < {s[0]}"] + [f"{LETTERS[i + 1]}: {s[i]} <= x < {s[i + 1]}" for i in range(k - 1)]
        parts.append(f"{LETTERS[k]}: {s[-1]} <= x")
        text.append(f"What interval does x={r} belong to? " + ", ".join(parts))
    with_ref = np.sort(np.concatenate([c["sorted"], ref_values[:, None]], axis=1), axis=1)
    return _frame(
        c,
        prompt,
        text,
        [LETTERS[i] for i in position.tolist()],
        dif.shared_prefix(with_ref, 2),
        dif.shared_prefix(with_ref, 10),
        ref=refs,
    )


def max_difficulty(task, base):
    if task in ("mean", "std"):  # s - x + 15 with s <= x + 17
        return int(round(32 * (dif.LOG2_10 if base == 2 else 1)))
    per_pair = (17 if base == 10 else 53) + 2  # shared leading digits of two distinct float64 values, + 1
    pairs = MAX_LEN if task == "interval" else MAX_LEN - 1
    return per_pair * pairs


# -- scoring our models' answers --------------------------------------------------------------
def score_minmax(predictions, answers):
    """Right when the predicted number is the list element asked for (equal as float64)."""
    return accuracy([parse_float(p) == float(a) for p, a in zip(predictions, answers)])


def _as_list(text):
    items = [parse_float(x) for x in str(text).split(",")]
    return None if any(math.isnan(x) for x in items) else items


def score_sorting(predictions, answers):
    """Right when the whole list is right: same length, every element equal as float64."""
    return accuracy(metrics.sorting_accuracy([_as_list(p) for p in predictions], [_as_list(a) for a in answers]))


def score_interval(predictions, answers):
    """Right when the letter is the interval's letter."""
    return accuracy(metrics.interval_accuracy(predictions, answers))


def _prompt(answer_template, rule):
    return "\n".join([HEADER_LIST, answer_template, NO_TOOLS, rule])


MEAN = register(
    Task(
        name="mean",
        family="multi_step",
        label="Mean",
        answer="number",
        metric="log_smape",
        draw=draw_mean,
        build=partial(build_mean_std, "mean"),
        max_difficulty=partial(max_difficulty, "mean"),
        score=score_numbers,
        markers=("<|mean|>",),
        system_prompt=ARITHMETIC_PROMPT,
        curriculum=True,
        released_name="Mean",
    )
)
STD = register(
    Task(
        name="std",
        family="multi_step",
        label="Std",
        answer="number",
        metric="log_smape",
        draw=draw_std,
        build=partial(build_mean_std, "std"),
        max_difficulty=partial(max_difficulty, "std"),
        score=score_numbers,
        markers=("<|std|>",),
        system_prompt=ARITHMETIC_PROMPT,
        curriculum=True,
        released_name="Std",
    )
)
MINMAX = register(
    Task(
        name="minmax",
        family="comparison",
        label="MinMax",
        answer="number",
        metric="accuracy",
        draw=draw_minmax,
        build=build_minmax,
        max_difficulty=partial(max_difficulty, "minmax"),
        score=score_minmax,
        markers=("<|min|>", "<|max|>"),
        released_name="MinMax",
        system_prompt=_prompt(NUMERIC_ANSWER, "The answer must be a single number, exactly as it appears in the list."),
    )
)
SORTING = register(
    Task(
        name="sorting",
        family="comparison",
        label="Sort",
        answer="list",
        metric="accuracy",
        draw=draw_sorting,
        build=build_sorting,
        max_difficulty=partial(max_difficulty, "sorting"),
        score=score_sorting,
        markers=("<|asc|>", "<|desc|>"),
        released_name="Sorting",
        system_prompt=_prompt('{"answer": <sorted_list>}', "The answer must be a list of numbers."),
    )
)
INTERVAL = register(
    Task(
        name="interval",
        family="comparison",
        label="Interval",
        answer="letter",
        metric="accuracy",
        draw=draw_interval,
        build=build_interval,
        max_difficulty=partial(max_difficulty, "interval"),
        score=score_interval,
        markers=("<|intva|>",),
        released_name="Interval",
        system_prompt=_prompt(
            '{"answer": <interval_multiple_choice_answer>}',
            "The answer must be one of the following: A, B, C, D, E, F.",
        ),
    )
)
