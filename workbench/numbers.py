"""Finding numbers in text and writing them back (appendix C.2).

parse() replaces every number by the placeholder <|num|> and returns its float64 value: the value
a reader of the text means. A number is a run of ASCII digits with at most one fraction, the
paper's regex except that leading zeros stay in the run: ".5" is 0.5, "1.50" is 1.5, "-.5" is
-0.5, "007" is 7 (the paper's regex would read 0, 0, 7), "1.2.3" is 1.2 and .3.

Written forms. render(value, 17) writes each value one way ("0.5", "1.5", "7"), so text like
".5", "1.50" or "007" does not come back from the values alone. parse(text, forms=True) also
returns each number's written form, the text it was read from; unparse(template, values, forms)
and Tokenizer.decode(ids, values, forms) put the forms back and so give the text back exactly.
A number without a form (a model's output) is written canonically by render(value, 17).

Numbers float64 cannot carry (more than 17 significant digits, 2**53 + 1, beyond its range) are
split into parts that each write back their own text with at most 15 significant digits: a
40-digit run -> chunks of <= 15 digits, cut so that no chunk starts with a zero it could not
write. A "-" or "." that no part can start with stays text. Writing the parts one after another
gives the original text back: nothing is rounded or lost. The split takes time linear in the
length of the run (benchmarks/parse_numbers.py).

The minus sign (signed=True) belongs to the number only when it touches the digits and follows
no word character (letter, digit, "_") and no closing bracket: then it cannot be a binary
operator. So "x=-3", "(-3", "[-1.5, -2]" and "a -3" hold negative numbers, while "5-3", "x-3",
"(2)-3" and "a - b" keep their "-" as text. Scientific notation is not one number: "1e-5" is 1,
"e-", 5. With signed=False (FoNE) every "-" is text.

-0.0 renders as "-0" (and "-0" parses to -0.0), so the sign of zero survives the round trip.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import NamedTuple

NUM_TOKEN = "<|num|>"
# the retrofit's <|num|> with the space before it, for tokenizers that join the two (retrofit/tokens.py)
NUM_SPACE_TOKEN = "<|num_sp|>"
# The regexes of appendix C.2 (the paper's text lost some brackets; these are the working forms).
SIGNED_PATTERN = r"[-]?(?:(?:0(?!\.[0-9]))|(?:[0-9]*[.][0-9]+)|(?:[1-9][0-9]*))"
ABSOLUTE_PATTERN = r"(?:(?:0(?!\.[0-9]))|(?:[0-9]*[.][0-9]+)|(?:[1-9][0-9]*))"
# What we read as one number: ABSOLUTE_PATTERN with leading zeros kept in the run ("007" is 7).
NUMBER_PATTERN = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
# NUMBER_PATTERN plus the sign rule of the module docstring, as a look-behind.
_SIGNED = re.compile(r"(?:(?<![\w)\]}])-)?" + NUMBER_PATTERN)
_ABSOLUTE = re.compile(NUMBER_PATTERN)
_FORM = re.compile("-?" + NUMBER_PATTERN)  # one number as text, what a written form may be
_RUN = re.compile(r"-?(0|[1-9][0-9]*)(?:\.[0-9]+)?")  # the candidate parts at one position
_MAX_PART = 345  # longer than any text render(x, 17) gives: "-0.", 323 zeros, 17 digits
_MAX_CHUNK_DIGITS = 15  # parts cut from a longer number keep at most this many significant digits


class Number(NamedTuple):
    """One number read from text: its float64 value and its written form, the text it was read
    from ("1.50" for 1.5; a part of a split number is its own piece of the text)."""

    value: float
    text: str


def render(x: float, digits: int = 15) -> str:
    """Plain decimal text of x (never an exponent) with at most `digits` significant digits.

    Rounds the shortest round-trip decimal of x (its repr) half-to-even and strips trailing
    zeros, so digits=17 gives exactly the value's shortest representation.
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


def canonical(text: str) -> str:
    """A written number without the zeros that do not change its value: "-.50" -> "-0.5",
    "007" -> "7", "0.000" -> "0", "-0.0" -> "-0". Where float64 holds the number, this is
    render(value, 17)."""
    sign = "-" if text.startswith("-") else ""
    integer, _, fraction = text[len(sign) :].partition(".")
    fraction = fraction.rstrip("0")
    return sign + (integer.lstrip("0") or "0") + ("." + fraction if fraction else "")


def write(value: float, form: str | None = None) -> str:
    """The text of one number: its written form when it has one, else render(value, 17). A form
    must be a number that means `value` ("1.50" for 1.5): otherwise the text would say another."""
    if form is None:
        return render(value, 17)
    if not isinstance(form, str) or not _FORM.fullmatch(form) or canonical(form) != render(value, 17):
        raise ValueError(f"the written form {form!r} does not mean the value {value!r}")
    return form


def _writes_back(text: str) -> bool:
    """True when float64 holds the number `text` and render(value, 17) gives `text` again."""
    if len(text) > _MAX_PART:  # longer than any render(x, 17): no need to read it
        return False
    try:
        value = float(text)
    except ValueError:
        return False
    if not math.isfinite(value):
        return False
    shortest = repr(value)
    if "e" not in shortest:  # fast path: a plain repr is render(value, 17) plus maybe ".0"
        return text == (shortest[:-2] if shortest.endswith(".0") else shortest)
    return render(value, 17) == text


def _part_ends(text: str, start: int) -> list[int]:
    """Every end such that text[start:end] writes back exactly with <= 15 significant digits."""
    # no part is longer than _MAX_PART: matching further would make a long run quadratic
    run = _RUN.match(text, start, start + _MAX_PART + 1)
    if run is None:
        return []
    ends, digits = [], 0
    for end in range(run.start(1) + 1, run.end() + 1):
        ch = text[end - 1]
        if ch == ".":
            continue
        if digits or ch != "0":
            digits += 1  # digits from the first significant one on
        if digits > _MAX_CHUNK_DIGITS and ch != "0":
            break
        if end <= run.end(1) and digits <= _MAX_CHUNK_DIGITS:
            ends.append(end)  # an integer below 10**15 always writes back: no need to check
        # integer prefixes may end in zeros, a fraction may not ("1.50" never writes back)
        elif (end <= run.end(1) or ch != "0") and _writes_back(text[start:end]):
            ends.append(end)
    return ends


def split_number(text: str) -> tuple[str | Number, ...]:
    """One matched number -> its parts: Numbers, plus "-" or "." as text where no part can start.

    A number float64 carries (its canonical text writes back) stays whole, whatever its zeros.
    Otherwise the fewest parts, each writing back its own text with <= 15 significant digits;
    ties go to the longer first part. So the parts' texts and the text parts spell `text`.
    """
    whole = canonical(text)
    if _writes_back(whole):
        return (Number(float(whole), text),)
    n = len(text)
    count = [0] * (n + 1)  # count[i]: fewest parts that spell text[i:]
    step: list[int] = [0] * n  # end of the first part of that spelling (0: one character of text)
    for i in range(n - 1, -1, -1):
        count[i], step[i] = count[i + 1] + 1, 0
        for end in reversed(_part_ends(text, i)):
            if count[end] + 1 < count[i] or (step[i] == 0 and count[end] + 1 == count[i]):
                count[i], step[i] = count[end] + 1, end
    parts: list[str | Number] = []
    i = 0
    while i < n:
        if step[i]:
            parts.append(Number(float(text[i : step[i]]), text[i : step[i]]))
            i = step[i]
        else:
            parts.append(text[i])
            i += 1
    return tuple(parts)


def number_spans(text: str, signed: bool = True) -> list[tuple[int, int]]:
    """(start, end) of every number in `text`, with the sign rule of the module docstring."""
    return [m.span() for m in (_SIGNED if signed else _ABSOLUTE).finditer(text)]


def parse_parts(text: str, signed: bool = True) -> list[str | Number]:
    """`text` as literal strings and Numbers in order; adjacent text is joined, so a str is
    never followed by a str. The single parsing path under parse() and the tokenizer."""
    if not isinstance(text, str):
        raise ValueError(f"expected a string, got {type(text).__name__}")
    if NUM_TOKEN in text:
        raise ValueError(
            f"the text contains the placeholder {NUM_TOKEN!r} itself: a parsed template would be ambiguous"
        )
    out: list[str | Number] = []

    def add_text(piece):
        if out and isinstance(out[-1], str):
            out[-1] += piece
        else:
            out.append(piece)

    last = 0
    for start, end in number_spans(text, signed):
        if start > last:
            add_text(text[last:start])
        for part in split_number(text[start:end]):
            add_text(part) if isinstance(part, str) else out.append(part)
        last = end
    if last < len(text):
        add_text(text[last:])
    return out


def parse(text: str, signed: bool = True, forms: bool = False):
    """Replace every number in `text` by "<|num|>"; return (template, values), or with
    forms=True (template, values, forms) where forms[i] is values[i] as written (".5")."""
    template, values, written = [], [], []
    for part in parse_parts(text, signed):
        if isinstance(part, str):
            template.append(part)
        else:
            template.append(NUM_TOKEN)
            values.append(part.value)
            written.append(part.text)
    return ("".join(template), values, written) if forms else ("".join(template), values)


def unparse(template: str, values: list[float], forms: list[str | None] | None = None) -> str:
    """Inverse of parse: put the numbers back into the template, each as its written form (the
    exact text parse read) or, without forms or where a form is None, as render(value, 17)."""
    pieces = template.split(NUM_TOKEN)
    if len(pieces) != len(values) + 1:
        raise ValueError(f"template has {len(pieces) - 1} placeholders but {len(values)} values")
    forms = [None] * len(values) if forms is None else list(forms)
    if len(forms) != len(values):
        raise ValueError(f"{len(values)} values but {len(forms)} written forms")
    out = [pieces[0]]
    for value, form, piece in zip(values, forms, pieces[1:]):
        out.append(write(value, form))
        out.append(piece)
    return "".join(out)
