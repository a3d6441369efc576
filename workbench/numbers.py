"""Finding numbers in text and writing them back (appendix C.2).

parse() replaces every number by the placeholder <|num|> and returns its float64 value. Numbers
that float64 cannot carry exactly as written (more than 17 significant digits, beyond its range,
or text that the value does not reproduce, like "1.50" or "007") are split into parts that it can
carry, with a "." or "-" left as text where no number can hold it. Writing the parts one after
another gives the original text back: nothing is rounded or lost.

The minus sign: with `signed=True` a "-" directly in front of the digits belongs to the number,
unless the character before it is a digit or a point ("5-3" is 5, "-", 3); "a - b" leaves the
"-" as text because a space follows it.
"""
from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_EVEN, Context, Decimal

NUM_TOKEN = "<|num|>"
SIGNED_PATTERN = r"[-]?(?:(?:0(?!\.[0-9]))|(?:[0-9]*[.][0-9]+)|(?:[1-9][0-9]*))"
ABSOLUTE_PATTERN = r"(?:(?:0(?!\.[0-9]))|(?:[0-9]*[.][0-9]+)|(?:[1-9][0-9]*))"
_SIGNED = re.compile(SIGNED_PATTERN)
_ABSOLUTE = re.compile(ABSOLUTE_PATTERN)
_MAX_PART = 340  # longest plain text a float64 renders to (0.000…0 with 17 digits, or 1e308)


def render(x: float, digits: int = 15) -> str:
    """Plain decimal text of x (never an exponent) with at most `digits` significant digits.

    Rounds the shortest round-trip decimal of x (its repr) half-to-even, strips trailing zeros.
    digits=17 gives back exactly the value's shortest representation. -0.0 renders as "-0".
    """
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"cannot render {x!r}: only finite numbers have a decimal text")
    if not 1 <= digits <= 17:
        raise ValueError(f"digits must be between 1 and 17, got {digits}")
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    d = Decimal(repr(x))
    if len(d.as_tuple().digits) > digits:
        d = Context(prec=digits, rounding=ROUND_HALF_EVEN).plus(d)
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _carries(text: str) -> bool:
    """True when float64 holds the number `text` exactly as written."""
    if not text or text[-1] == "." or text in ("-", "."):
        return False
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and render(value, 17) == text


def split_number(text: str) -> list[str | float]:
    """One matched number -> parts: floats (each renders back to its own text) and literal text.

    Greedy: the longest prefix that float64 carries exactly becomes a value; a "." or "-" that no
    value can start with stays text. Concatenating render(v, 17) / text gives `text` back.
    """
    if _carries(text):
        return [float(text)]
    parts: list[str | float] = []
    rest = text
    while rest:
        for end in range(min(len(rest), _MAX_PART), 0, -1):
            if _carries(rest[:end]):
                parts.append(float(rest[:end]))
                rest = rest[end:]
                break
        else:  # no number starts here: only "-" or "." can be in this position
            parts.append(rest[0])
            rest = rest[1:]
    return parts


def _spans(text: str, signed: bool):
    """(start, end) of each number, with the sign rule of the module docstring."""
    for match in (_SIGNED if signed else _ABSOLUTE).finditer(text):
        start, end = match.span()
        if signed and text[start] == "-" and start > 0 and (text[start - 1].isdigit()
                                                             or text[start - 1] == "."):
            start += 1  # "5-3": the minus is the operator
        yield start, end


def parse_parts(text: str, signed: bool = True) -> list[str | float]:
    """Text as a list of literal strings and float64 values, in order (values alone are numbers)."""
    out: list[str | float] = []
    last = 0
    for start, end in _spans(text, signed):
        if start > last:
            out.append(text[last:start])
        out.extend(split_number(text[start:end]))
        last = end
    if last < len(text):
        out.append(text[last:])
    return out


def parse(text: str, signed: bool = True) -> tuple[str, list[float]]:
    """Replace every number in `text` by "<|num|>"; return (template, values)."""
    if not isinstance(text, str):
        raise ValueError(f"parse expects a string, got {type(text).__name__}")
    template, values = [], []
    for part in parse_parts(text, signed):
        if isinstance(part, float):
            template.append(NUM_TOKEN)
            values.append(part)
        else:
            template.append(part)
    return "".join(template), values


def unparse(template: str, values: list[float]) -> str:
    """Inverse of parse: put the rendered values back into the template."""
    pieces = template.split(NUM_TOKEN)
    if len(pieces) != len(values) + 1:
        raise ValueError(f"template has {len(pieces) - 1} placeholders but {len(values)} values")
    out = [pieces[0]]
    for value, piece in zip(values, pieces[1:]):
        out.append(render(value, 17))
        out.append(piece)
    return "".join(out)
