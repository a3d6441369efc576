"""Read what a chat model answered, two ways.

`paper_answer(text, task)` is the answer string the paper authors' scorer extracts (their public
repository, KreitnerL/BitTokens: frontier_model_analysis/evaluate_frontier_outputs.py and
eval_scripts/utils.py), rule for rule, so that scores of new outputs are comparable to Tables 1-3:

  P0  A response with exactly one '{' and one '}' is cut down to '{' + what lies between + '}'.
  P1  JSON: if the text is one JSON object with the key "answer", its value as Python's str()
      prints it. MinMax and sorting keep JSON numbers as written; the other tasks read them as
      float64 first (str gives the shortest repr: 3144148635.811509994967949 -> '3144148635.81151').
      An integer of more than 4300 digits does not parse (Python's limit) and falls through to P2.
  P2  Otherwise the first number anywhere in the text, read as float64 and printed by str():
      '0.8392156009458}' -> '0.8392156009458', a bare '100' -> '100.0', '1.02e-9' -> '1.02e-09';
      a number of any length is read ('1735300.000...' -> '1735300.0'; beyond float64 -> 'inf').
      "First number": a lone 0 (unless a decimal point and digit follow), else digits with a
      fraction ('-.0000772980859' too), else an integer not starting with 0; then an optional
      exponent. So '1,234' reads 1 and '10^3' reads 10.
  P3  Only when P1 and P2 found nothing (no ASCII digit in the text): the same on a cleaned text
      (leading 'json' label, <thought>/<reasoning> blocks and ``` fences removed), then the first
      balanced {...} containing "answer" (quoted) parsed as JSON, then for interval the first
      letter A-F standing alone ('"C"}' -> 'C'), for sorting a list of numbers, else a number.
  Nothing found: ''.

`parse_answer(text, task)` is a careful reader's value: a Decimal (numeric tasks), a list of
Decimals (sorting) or a letter (interval); None when the response states no answer. In order, the
last readable one of:

  C1  a value under the key "answer" (double or single quotes, at any depth: {"result": {"answer":
      ...}}, in or out of code fences, also in a truncated or unbalanced object);
  C2  \\boxed{...};
  C3  prose: "answer is", "answer:", "result =", "sorted list is", "the maximum is", "the mean
      is" ... followed by the value;
  C4  the content of a code fence, or the whole response, when it is nothing but the value.
  Numbers: plain, '-.5', '1.5e3', '1.5 \\times 10^{3}', '1.5 × 10^3', '1.5*10**3', a unicode
  minus, thousands grouped by ',', ' ', "'" or a thin/no-break space ('1 500', '1,234', "1'234";
  groups of exactly three digits, one separator kind, so '1,5' and '1,23' are refused as
  ambiguous). In lists commas separate elements, so only the other separators group thousands.
  A number followed by an operator ('answer is 3 + 4 = 7') is not an answer. Prose that states no
  answer gives None: an operand restated from the question is never taken for it.

Both readers run in time linear in the response (no backtracking regexes, no rescans per brace).
"""

import bisect
import json
import re
from decimal import Decimal, InvalidOperation

from workbench import tasks

_MISSING = object()
KINDS = ("number", "element", "list", "letter")


def answer_kind(task):
    """What an answer to `task` is, from the task's own record: "number" (arithmetic, scored by
    log-sMAPE), "element" (a number exactly as it appears in the question's list: min/max),
    "list" (sorting) or "letter" (interval)."""
    spec = tasks.get(task)
    if spec.answer == "number":
        return "number" if spec.metric == "log_smape" else "element"
    if spec.answer in ("list", "letter"):
        return spec.answer
    raise ValueError(f"task {task!r} has no frontier answer (its answers are {spec.answer})")


# ---- the paper's reading ---------------------------------------------------------------------

FIRST_NUMBER = re.compile(r"[+-]?(?:0(?![.][0-9])|[0-9]*[.][0-9]+|[1-9][0-9]*)(?:[eE][+-]?[0-9]+)?")
_JSON_LABEL = re.compile(r"^\s*(?:JSON|Json|json)\s*[:\-]?\s*")
_FENCE_OPEN = re.compile(r"```(?:json|python|txt)?\s*", re.I)
_ANSWER_QUOTED = re.compile(r"(?=\"answer\"|'answer')")
_LONE_LETTER = re.compile(r"(?<![A-Z])([A-F])(?![A-Z])", re.I)


def _single_object(text):
    """P0: with exactly one '{' and one '}', keep only what lies between them."""
    if text.count("{") != 1 or text.count("}") != 1:
        return text
    after = text[text.index("{") + 1 :]
    return "{" + after.split("}")[0] + "}"


def _json_answer(text, raw):
    """The "answer" value of `text` parsed as one JSON object (numbers as strings if raw)."""
    try:
        obj = json.loads(text, parse_float=str, parse_int=str) if raw else json.loads(text)
    except (ValueError, RecursionError):
        return _MISSING
    return obj["answer"] if isinstance(obj, dict) and "answer" in obj else _MISSING


def _json_or_first_number(text, raw):
    """P1, else P2: the JSON answer as str, else str(float) of the first number, else ''."""
    value = _json_answer(text, raw)
    if value is not _MISSING:
        return str(value)
    m = FIRST_NUMBER.search(text)
    return str(float(m.group())) if m else ""


def _drop_blocks(text, tag):
    """Each <tag>...</tag> (case-insensitive, shortest) becomes one space; one pass, linear."""
    opening, closing = re.compile(f"<{tag}>", re.I), re.compile(f"</{tag}>", re.I)
    parts, pos = [], 0
    while (m := opening.search(text, pos)) and (c := closing.search(text, m.end())):
        parts += [text[pos : m.start()], " "]
        pos = c.end()
    return "".join(parts) + text[pos:]


def _cleaned(text):
    text = _JSON_LABEL.sub("", text.strip())
    text = _drop_blocks(_drop_blocks(text, "thought"), "reasoning").strip()
    return _FENCE_OPEN.sub("", text).strip()


def _first_answer_object(text):
    """The first balanced {...} (braces counted, strings not) that contains a quoted "answer",
    found with one stack pass over the braces instead of a scan per '{'."""
    closes, stack = {}, []
    for m in re.finditer(r"[{}]", text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            closes[stack.pop()] = m.start()
    keys = [m.start() for m in _ANSWER_QUOTED.finditer(text)]
    for start in sorted(closes):
        i = bisect.bisect_left(keys, start)
        if i < len(keys) and keys[i] + 8 <= closes[start] + 1:
            return text[start : closes[start] + 1]
    return None


def paper_answer(text, task):
    """The authors' extracted answer string (rules P0-P3 above); '' when they find none."""
    kind = answer_kind(task)
    if not isinstance(text, str):
        return ""
    raw = kind in ("element", "list")
    text = _single_object(text)
    if found := _json_or_first_number(text, raw):
        return found
    cleaned = _cleaned(text)
    if found := _json_or_first_number(cleaned, raw):
        return found
    if (obj := _first_answer_object(cleaned)) is not None:
        if (value := _json_answer(obj, raw)) is not _MISSING:
            return str(value)
    if kind == "letter" and (m := _LONE_LETTER.search(cleaned)):
        return m.group(1).upper()
    if kind == "list" and (values := paper_list(cleaned)):
        return json.dumps(values, separators=(",", ":"))
    if m := FIRST_NUMBER.search(cleaned):
        return m.group() if kind == "element" else str(float(m.group()))
    return ""


_COMMA_NUMBERS = re.compile(r"\s*[-+]?[0-9.]+(?:\s*,\s*[-+]?[0-9.]+)*\s*")


def _floats(values):
    """float of each JSON list element (numbers, or strings of numbers); None if any fails."""
    try:
        if all(isinstance(x, (int, float)) for x in values):
            return [float(x) for x in values]
        if all(isinstance(x, (int, float, str)) for x in values):
            return [float(str(x).strip()) for x in values]
    except (ValueError, OverflowError):
        pass
    return None


def paper_list(text):
    """The authors' list reading (sorting answers and labels): the text as a JSON list, or
    bracketed, or its first [...] part; else every number in it as float64. None if no number."""
    if not isinstance(text, str):
        return None
    s = text.strip()
    candidates = []
    if s.startswith("[") and s.endswith("]"):
        candidates.append(s)
    elif _COMMA_NUMBERS.fullmatch(s):
        candidates.append("[" + s + "]")
    if (i := s.find("[")) >= 0 and (j := s.find("]", i + 1)) >= 0:
        candidates.append(s[i : j + 1])
    for candidate in candidates:
        try:
            values = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(values, list) and (floats := _floats(values)) is not None:
            return floats
    numbers = [float(m.group()) for m in FIRST_NUMBER.finditer(s)]
    return numbers or None


def paper_letter(text):
    """The first letter A-F standing alone in `text` (upper case), '' if none."""
    m = _LONE_LETTER.search(text) if isinstance(text, str) else None
    return m.group(1).upper() if m else ""


# ---- the careful reading ---------------------------------------------------------------------

_SEPARATORS = ",' \u00a0\u202f\u2009"
_MINUS = "-+\u2212"


def _number_pattern(separators):
    """A number whose thousands may be grouped by one of `separators`, with optional exponent
    (e, x 10^k, \\times 10^{k}); not followed by a digit or by '.5', ',5', "'5"."""
    group = rf"[0-9]{{1,3}}(?P<sep>[{separators}])[0-9]{{3}}(?:(?P=sep)[0-9]{{3}})*"
    power = r"[-+\u2212]?[0-9]+"
    exponent = (
        rf"(?:[eE](?P<e>{power})|\s*(?:\\times|\\cdot|×|·|\*|x)\s*10\s*(?:\^|\*\*)\s*"
        rf"(?:\{{\s*(?P<e1>{power})\s*\}}|\(\s*(?P<e2>{power})\s*\)|(?P<e3>{power})))?"
    )
    return (
        rf"(?P<sign>[{_MINUS}])?(?:(?P<int>{group}|[0-9]+)(?P<frac>\.[0-9]+)?|(?P<frac0>\.[0-9]+))"
        rf"{exponent}(?![0-9]|[.,'][0-9])"
    )


_NUMBER = re.compile(_number_pattern(_SEPARATORS))
_ELEMENT = re.compile(_number_pattern(_SEPARATORS.replace(",", "")))
_NOT_AN_OPERAND = re.compile(r"\s*(?:[-+*/=×÷·^<>]|x\s*[0-9])")
_ITEM = (
    rf"""["']?[{_MINUS}]?(?:[0-9]{{1,3}}(?:[{_SEPARATORS[1:]}][0-9]{{3}})+|[0-9]+)?(?:\.[0-9]+)?"""
    rf"""(?:[eE][{_MINUS}]?[0-9]+)?["']?"""
)
_LIST = re.compile(rf"\[\s*(?:{_ITEM}(?:\s*[,;]\s*{_ITEM})*)?\s*\]|{_ITEM}(?:\s*[,;]\s*{_ITEM})+")
_LETTER = re.compile(r"(?:(?:option|interval)\s+)?\(?([A-J])\)?(?![A-Za-z0-9])", re.I)
_QUOTED = re.compile(r"""(["'])([^"'\n]*)\1""")
_WRAPPERS = re.compile(r"""[\s*$`]*""")
_STRIP = "*$`\"' \t\r\n"
_KEY = re.compile(r"""["']answer["']\s*:\s*""", re.I)
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_PROSE = re.compile(
    r"\b(?:final answer|answer|result|sorted (?:list|order)|sum|difference|product|quotient|"
    r"mean|average|standard deviation|maximum|minimum|max|min)\**\s*(?:is\b\s*:?|[:=])\s*",
    re.I,
)


def _decimal(m):
    """The Decimal of a _NUMBER / _ELEMENT match, or None (unrepresentable exponent)."""
    sign = "-" if m.group("sign") in ("-", "\u2212") else ""
    integer = re.sub(f"[{_SEPARATORS}]", "", m.group("int") or "0")
    exponent = next((e for e in m.group("e", "e1", "e2", "e3") if e is not None), "0").replace("\u2212", "-")
    try:
        d = Decimal(f"{sign}{integer}{m.group('frac') or m.group('frac0') or ''}E{exponent}")
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() else None


def _number_at(text, pos):
    m = _NUMBER.match(text, pos)
    if m is None or _NOT_AN_OPERAND.match(text, m.end()):
        return None
    return _decimal(m)


def _list_of(span):
    """Decimals of a list span '[1, 2.5]' / '1, 2.5' / "['1', '2']"; None if an element is bad."""
    body = span.strip().removeprefix("[").removesuffix("]").strip()
    values = []
    for item in re.split(r"\s*[,;]\s*", body) if body else []:
        item = item.strip("\"'")
        m = _ELEMENT.fullmatch(item)
        if m is None or (d := _decimal(m)) is None:
            return None
        values.append(d)
    return values


def _value_at(text, pos, kind):
    """The value that starts at `pos` (after markdown/math wrappers), or None."""
    pos = _WRAPPERS.match(text, pos).end()
    if (q := _QUOTED.match(text, pos)) is not None:
        return _whole(q.group(2), kind)
    if kind == "list":
        m = _LIST.match(text, pos)
        return _list_of(m.group()) if m else None
    if kind == "letter":
        m = _LETTER.match(text, pos)
        return m.group(1).upper() if m and m.group(1).isupper() else None
    return _number_at(text, pos)


def _unwrapped(text):
    """`text` without surrounding markdown/math wrappers, quotes, a full stop, and braces that
    have no partner ('0.8392156009458}', '"C"}': remnants of a broken JSON object)."""
    s = text.strip(_STRIP)
    opens, closes, start, end = s.count("{"), s.count("}"), 0, len(s)
    while end > start and s[end - 1] == "}" and closes > opens:
        end, closes = end - 1, closes - 1
    while start < end and s[start] == "{" and opens > closes:
        start, opens = start + 1, opens - 1
    return s[start:end].strip(_STRIP).removesuffix(".").strip(_STRIP)


def _whole(text, kind):
    """The value when `text` (unwrapped) is nothing else."""
    s = _unwrapped(text)
    if kind == "letter":
        m = re.fullmatch(r"(?:(?:option|interval)\s+)?\(?([A-J])\)?(?:\s*[:.)]\s*.*)?", s, re.I | re.S)
        return m.group(1).upper() if m else None
    if kind == "list":
        return _list_of(s) if _LIST.fullmatch(s) else None
    m = _NUMBER.fullmatch(s)
    return _decimal(m) if m else None


def _last_value(pattern, text, kind, group=None):
    """Of all matches of `pattern`, the value of the last one that reads."""
    for m in reversed(list(pattern.finditer(text))):
        value = _whole(m.group(group), kind) if group else _value_at(text, m.end(), kind)
        if value is not None:
            return value
    return None


def parse_answer(text, task):
    """The careful reading (rules C1-C4 above): Decimal, list[Decimal] or letter; None if none."""
    kind = answer_kind(task)
    if not isinstance(text, str):
        return None
    for pattern, group in ((_KEY, None), (_BOXED, 1), (_PROSE, None)):
        if (value := _last_value(pattern, text, kind, group)) is not None:
            return value
    parts = text.split("```")
    for body in reversed(parts[1::2] if len(parts) > 2 else []):
        if (value := _whole(re.sub(r"^[A-Za-z]*\s", "", body, count=1), kind)) is not None:
            return value
    return _whole(text, kind)


def parse_reference(label, task):
    """A label of the benchmark read exactly (Decimal, list of Decimals, letter); a label that is
    not well formed is a ValueError, since a score against it would mean nothing."""
    value = _whole(label, answer_kind(task)) if isinstance(label, str) else None
    if value is None:
        raise ValueError(f"reference answer {label!r} of task {task!r} is not well formed")
    return value
