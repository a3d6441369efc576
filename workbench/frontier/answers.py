"""Parse what a chat model answered: the JSON the system prompt asks for, or the usual deviations
(code fences, prose around it, a bare number, a list). Anything we cannot read is None, never a guess.

Numbers come back as exact Decimals so that 17-digit list entries are compared digit for digit.
"""
import json
import re
from decimal import Decimal, InvalidOperation

NUMERIC_TASKS = ("addition", "multiplication", "division", "exponentiation", "mean", "std", "minmax")

_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.S)
_ANSWER_KEY = re.compile(r'"?answer"?\s*:\s*', re.I)
_PROSE = re.compile(r"(?:answer|result)\s*(?:is|=|:)\s*", re.I)
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_PLAIN = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_MISSING = object()
_SCI_TIMES = re.compile(r"^(.*?)\s*(?:\*|x|\u00d7)\s*10\s*\^\s*\(?([-+]?\d+)\)?$")


def _json_answer(text):
    """The value under "answer" of the last JSON object in `text` that has one (or a missing value)."""
    decoder = json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=lambda c: None)
    found, i = _MISSING, 0
    while (i := text.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            i += 1
            continue
        if isinstance(obj, dict):
            key = next((k for k in obj if k.strip().lower() == "answer"), None)
            if key is not None:
                found = obj[key]
        i = end
    return found


def extract(text):
    """The raw answer payload: a JSON value (str/list/None) or the text after "answer is"/"answer:"
    or the whole stripped text. None for non-strings."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    for body in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        value = _json_answer(body)
        if value is not _MISSING:
            return value
    m = None
    for m in _ANSWER_KEY.finditer(text):
        pass
    if m is None:
        for m in _PROSE.finditer(text):
            pass
    if m is not None:
        rest = text[m.end():].strip()
        if rest.startswith("["):
            return rest[:rest.find("]") + 1] if "]" in rest else rest
        return rest.split("\n")[0].strip().rstrip(".").strip()
    return text


def parse_number(value):
    """A finite Decimal from a JSON number/string: accepts '1,234.5', '5.4e-8', '5.4 x 10^-8',
    a unicode minus, surrounding quotes/'$'/'**'; None when it is not exactly one number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, Decimal)):
        value = str(value)
    if not isinstance(value, str):
        return None
    s = value.strip().strip("*`$\"' ").replace("\u2212", "-").replace("\u2009", "").replace("_", "")
    s = s.rstrip(".")  # a sentence's full stop
    if m := _SCI_TIMES.match(s):
        mantissa = parse_number(m.group(1))
        if mantissa is None:
            return None
        try:
            return _finite(mantissa.scaleb(int(m.group(2))))
        except (InvalidOperation, OverflowError, ValueError):
            return None
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    if not _PLAIN.fullmatch(s) or len(s) > 400:
        return None
    try:
        return _finite(Decimal(s))
    except InvalidOperation:
        return None


def _finite(d):
    return d if d.is_finite() else None


def parse_list(value):
    """A list of Decimals from a JSON list or a '[1, 2.5, -3]' / '1, 2.5, -3' string; None if any
    element is not a number (list elements are split on commas, so no thousands separators)."""
    if isinstance(value, str):
        s = value.strip().strip("`")
        if s.startswith("[") and s.endswith("]"):
            s = s[1:-1]
        if not s.strip():
            return []
        items = s.split(",")
    elif isinstance(value, list):
        items = value
    else:
        return None
    out = []
    for item in items:
        if isinstance(item, str) and "," in item:
            return None
        x = parse_number(item)
        if x is None:
            return None
        out.append(x)
    return out


def parse_letter(value):
    """One interval letter A-J from 'B', 'b', '(B)', 'B: 1 <= x < 2'; None otherwise."""
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\(?([A-Ja-j])\)?(?:\s*[:.)]\s*.*)?", value.strip().strip("*`\"' "), re.S)
    return m.group(1).upper() if m else None


def parse_answer(text, task):
    """Decimal (numeric tasks), list[Decimal] (sorting) or letter (interval); None if unreadable."""
    value = extract(text)
    if task == "sorting":
        return parse_list(value)
    if task == "interval":
        return parse_letter(value)
    if task in NUMERIC_TASKS:
        if isinstance(value, list):
            return parse_number(value[0]) if len(value) == 1 else None
        return parse_number(value)
    raise ValueError(f"unknown task {task!r}; expected one of {list(NUMERIC_TASKS) + ['sorting', 'interval']}")
