"""solve(text_prompt): the exact answer of a frontier-form question (ours or the released ones).

Numbers are read as exact decimals; arithmetic uses Fractions (60-digit decimals for non-integer
powers); numeric answers are rounded half-even to 15 significant digits and printed plainly.
"""

import re
from fractions import Fraction

from .exact import fmt, fraction, parse, round_fraction, round_sqrt_fraction
from .exponentiation import exact_power

NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
BINARY = re.compile(rf"What is ({NUM}) ([-+*/^]) ({NUM})\?")
LIST = re.compile(r"What is the (minimum|maximum|mean|std) of the list \[(.*)\]\?")
SORT = re.compile(r"Sort the list \[(.*)\] in (ascending|descending) order\.")
INTERVAL = re.compile(rf"What interval does x=({NUM}) belong to\? (.*)")


def _num(s):
    s = s.strip()
    if not re.fullmatch(NUM, s):
        raise ValueError(f"not a number: {s!r}")
    return fraction(*parse(s))


def _items(body):
    items = [t.strip() for t in body.split(",")]
    if not items or any(not t for t in items):
        raise ValueError(f"malformed list: [{body}]")
    return items, [_num(t) for t in items]


def solve(text_prompt):
    """Exact answer string of a frontier-form question; ValueError if it is not one of ours."""
    if not isinstance(text_prompt, str):
        raise ValueError(f"text_prompt must be a string, got {type(text_prompt).__name__}")
    q = text_prompt.strip()
    if m := BINARY.fullmatch(q):
        a, op, b = _num(m[1]), m[2], _num(m[3])
        if op == "/" and b == 0:
            raise ValueError("division by zero")
        if op == "^":
            return fmt(*exact_power(a, b))
        return fmt(*round_fraction({"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0}[op]))
    if m := LIST.fullmatch(q):
        texts, xs = _items(m[2])
        if m[1] == "minimum":
            return texts[min(range(len(xs)), key=xs.__getitem__)]
        if m[1] == "maximum":
            return texts[max(range(len(xs)), key=xs.__getitem__)]
        mu = sum(xs, Fraction(0)) / len(xs)
        if m[1] == "mean":
            return fmt(*round_fraction(mu))
        return fmt(*round_sqrt_fraction(sum(((x - mu) ** 2 for x in xs), Fraction(0)) / len(xs)))
    if m := SORT.fullmatch(q):
        texts, xs = _items(m[1])
        order = sorted(range(len(xs)), key=xs.__getitem__, reverse=m[2] == "descending")
        return ", ".join(texts[i] for i in order)
    if m := INTERVAL.fullmatch(q):
        x = _num(m[1])
        bounds = re.findall(rf"({NUM}) <= x", m[2])
        first = re.match(rf"A: x < ({NUM})", m[2])
        if not first or not bounds:
            raise ValueError(f"malformed interval options: {m[2]!r}")
        edges = [_num(b) for b in bounds]
        if _num(first[1]) != edges[0] or edges != sorted(edges):
            raise ValueError(f"interval bounds are not increasing: {m[2]!r}")
        return "ABCDEFGHIJ"[sum(e <= x for e in edges)]
    raise ValueError(f"not a recognised task question: {text_prompt[:80]!r}")
