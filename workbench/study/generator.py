"""Questions no one here generated: reasoning-gym's arithmetic, in the workbench's format.

Study 3 scores its models three ways (docs/study/protocols.md); the third is on questions drawn by an
independent generator, so that a score cannot owe anything to how this workbench samples operands,
prints numbers or labels answers. The generator is the PyPI package reasoning-gym, pinned
(`pip install reasoning-gym==0.1.25`, or the extra `pip install -e .[independent]`); it runs offline
and is imported only when questions are drawn, so nothing else needs it.

Which of its datasets, each with two terms and otherwise its own defaults (SOURCES):

- multiplication: `products` (two non-negative integers of 1-5 digits) and `decimal_arithmetic`
  (numbers of 3 decimals in 0.001 ... 10 joined by a random one of + - * /: its "*" items);
- division: `basic_arithmetic` (signed integers of 1-4 digits and a random one of + - * /; a
  division's divisor divides its dividend, so the quotient is an integer: its "/" items) and
  `decimal_arithmetic` (its "/" items: quotients that rarely terminate).

How an item is converted (`convert`, a pure function of the item's question / answer / metadata
dict): its expression (metadata["expression"], or the question's "... = ?" line) must be one plain
`a op b` of two decimal numbers, optionally wrapped in parentheses; the operands are re-printed
as the workbench prints numbers (`exact.fmt`: no trailing zeros, so "3.400" becomes "3.4") and the
prompt is "a * b" or "a / b", as in tasks/arithmetic.py. The answer is computed here, exactly
(`fractions.Fraction` of the printed operands), and written as the workbench writes every label:
rounded half-even to 15 significant digits (`exact.round_fraction`), which leaves every product and
every integer quotient here exact. It is checked against reasoning-gym's own answer: equal, or, where
the question asks for a precision ("to a maximum of 12 significant digits"), equal to the exact
value rounded to it (half-even or half-up).

What is dropped, each counted by reason (DROP_REASONS): "shape", an expression that is not one
`a op b` (more terms, a negated group such as "-( 6775 / 271 )"); "operation", another operation
than the task's (decimal_arithmetic's and basic_arithmetic's + and -, and the other one of * and /);
"operand", an operand the workbench cannot print (over 17 significant digits, or a magnitude
outside 1e-14 ... 1e15); "answer", a result outside that range (or a division by zero); "disagrees",
reasoning-gym's answer differs from the exact one (none of the sources above did in 15,000 items;
basic_arithmetic with allow_parentheses=False does: it prints one divisor and divides by another,
"47 / 77" answered 3807, which is why the answer is never taken on trust). Zero operands are kept
(0 * 7 = 0 is a question the workbench can ask and score), though its own draws never make them.

reasoning-gym's decimal_arithmetic sets the decimal module's context precision of the calling thread
to 12 digits as it draws; `questions` draws inside a local context, so the caller's is untouched.
"""

from __future__ import annotations

import re
from collections import Counter
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Context, Decimal, InvalidOperation, localcontext
from fractions import Fraction

import pandas as pd

from ..tasks.exact import fmt, round_fraction
from ..tasks.sampling import HIGH, LOW, MAX_DIGITS

VERSION = "0.1.25"  # the reasoning-gym release these conversions were written and checked against
INSTALL = f"pip install reasoning-gym=={VERSION}  (or: pip install -e '.[independent]')"
OPERATIONS = {"multiplication": "*", "division": "/"}  # the workbench's tasks a source can feed
TWO_TERMS = dict(min_terms=2, max_terms=2)
SOURCES = {  # task -> (reasoning-gym dataset, its configuration); everything not named is its default
    "multiplication": (("products", TWO_TERMS), ("decimal_arithmetic", TWO_TERMS)),
    "division": (("basic_arithmetic", TWO_TERMS), ("decimal_arithmetic", TWO_TERMS)),
}
DROP_REASONS = ("shape", "operation", "operand", "answer", "disagrees")
SEED_STRIDE = 10**9  # source k of a task draws with seed + k * SEED_STRIDE: its items never repeat another's
MAX_TRIES = 200  # items drawn per question kept, at most, before a source is given up as too sparse

MAX_PRECISION = 100  # a stated precision read (reasoning-gym states 12); exact answers here have fewer digits
# An answer with more significant digits, or a magnitude further from 1, than this cannot equal any
# result here (operands of at most 17 digits in 1e-14 ... 1e15: a product has at most 34 digits, a
# terminating quotient well under 100): compared without building its integers.
ANSWER_BOUND = 200

_NUMBER = r"[+-]?[0-9]+(?:\.[0-9]+)?"  # ASCII digits, as reasoning-gym prints them
_PLAIN = re.compile(rf"^\s*({_NUMBER})\s*([-+*/])\s*({_NUMBER})\s*$")
_PRECISION = re.compile(r"maximum of ([0-9]+) significant digits")


class Dropped(ValueError):
    """An item the workbench cannot ask as its task's question; `reason` is one of DROP_REASONS."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _shown(text: str, limit: int = 60) -> str:
    """`text` as a short one-line repr for a message: a crafted item's expression can be megabytes."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text):,} characters)"


def _unwrap(expression: str) -> str:
    """The expression without parentheses around all of it ("( (1 * 2) )" -> "1 * 2"), in one pass
    over it: each "(" is paired with its ")" first, then the pairs that enclose everything are
    peeled, so 40,000 nested parentheses take no longer than 40,000 characters of anything."""
    text = expression.strip()
    partner, open_ = {}, []
    for i, char in enumerate(text):
        if char == "(":
            open_.append(i)
        elif char == ")" and open_:
            partner[open_.pop()] = i
    i, j = 0, len(text) - 1
    while i < j and text[i] == "(" and partner.get(i) == j:  # "(a) * (b)": the first closes early, kept
        i, j = i + 1, j - 1
        while i <= j and text[i].isspace():
            i += 1
        while j >= i and text[j].isspace():
            j -= 1
    return text[i : j + 1]


def fields(item) -> tuple[str, str, dict]:
    """An item's question, answer and metadata, each of the type reasoning-gym gives (text, text,
    a dict or nothing), or a ValueError of one line naming the field that is not."""
    if not isinstance(item, dict):
        raise ValueError(f"a reasoning-gym item is a dict of question, answer and metadata, not {_kind(item)}")
    for key in ("question", "answer"):
        if not isinstance(item.get(key), str):
            raise ValueError(f"a reasoning-gym item's {key} is text, not {_kind(item.get(key))}")
    metadata = item.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError(f"a reasoning-gym item's metadata is a dict, not {_kind(metadata)}")
    metadata = metadata or {}
    for key, kinds, name in (
        ("expression", str, "text"),
        ("source_dataset", str, "text"),  # kept in the questions' table, so checked as the rest
        ("source_index", int, "an integer"),
    ):
        value = metadata.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise ValueError(f"a reasoning-gym item's metadata {key} is {name}, not {_kind(value)}")
    return item["question"], item["answer"], metadata


def _kind(value) -> str:
    name = type(value).__name__
    return "missing" if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def expression_of(item: dict) -> str:
    """The arithmetic expression an item asks about: its metadata's, or its question's "... = ?"
    line (the text before a final "= ?" on the line where it starts)."""
    question, _, metadata = fields(item)
    expression = metadata.get("expression")
    if expression is None:
        # read from the end, not searched for: a regular expression tried at every start of a
        # 40,000-character line without "= ?" takes quadratic time
        text = question.rstrip()
        if not text.endswith("?") or not text[:-1].rstrip().endswith("="):
            raise Dropped("shape", f"no expression in {_shown(question)}")
        text = text[:-1].rstrip()[:-1].rstrip()
        expression = text[text.rfind("\n") + 1 :]
    return expression


def _operand(text: str) -> tuple[int, int]:
    """(M, e) of a plain decimal written as _NUMBER matches it, exactly, from its characters: the
    significant digits are counted before any integer is built (a 40,000-digit operand is dropped,
    never converted), and no decimal context's precision rounds it."""
    body = text.lstrip("+-")
    whole, _, decimals = body.partition(".")
    digits = (whole + decimals).lstrip("0")
    if not digits:
        return 0, 0
    significant = digits.rstrip("0")
    e = len(digits) - len(significant) - len(decimals)
    magnitude = e + len(significant) - 1
    if len(significant) > MAX_DIGITS:
        raise Dropped("operand", f"{_shown(text)} has {len(significant):,} significant digits, over {MAX_DIGITS}")
    if not LOW <= magnitude <= HIGH:
        raise Dropped("operand", f"{_shown(text)} lies outside 1e-14 ... 1e15")
    M = int(significant)
    return (-M if text.startswith("-") else M), e


def _value(M: int, e: int) -> Fraction:
    return Fraction(M) * Fraction(10) ** e


def agrees(exact: Fraction, answer: str, digits: int | None = None) -> bool:
    """reasoning-gym's `answer` is `exact`, or, with `digits` (1 ... MAX_PRECISION), `exact`
    rounded to that many significant digits (half-even, as its decimal context rounds, or half-up,
    as its question says)."""
    try:
        given = Decimal(str(answer).strip())
    except InvalidOperation:
        return False
    if not given.is_finite():
        return False
    sign, written, exponent = given.as_tuple()
    written = "".join(map(str, written))
    significant = written.strip("0")
    if not significant:
        return exact == 0
    exponent += len(written) - len(written.rstrip("0"))
    if len(significant) > ANSWER_BOUND or abs(exponent + len(significant)) > ANSWER_BOUND:
        return False  # no result here has such digits; Fraction(given) could take minutes to build
    given = Decimal((sign, tuple(map(int, significant)), exponent))
    if digits is None or exact == 0:
        return Fraction(given) == exact
    num, den = Decimal(exact.numerator), Decimal(exact.denominator)  # exact: Decimal(int) never rounds
    return any(Context(prec=digits, rounding=r).divide(num, den) == given for r in (ROUND_HALF_EVEN, ROUND_HALF_UP))


def precision_of(question: str) -> int | None:
    """The significant digits a question asks for ("to a maximum of 12 significant digits"), or
    None; a ValueError for a number of digits outside 1 ... MAX_PRECISION."""
    found = _PRECISION.search(question)
    if found is None:
        return None
    written = found.group(1).lstrip("0") or "0"
    if len(written) > 3 or not 1 <= int(written) <= MAX_PRECISION:
        raise ValueError(
            f"a reasoning-gym question asks for {_shown(found.group(1), 20)} significant digits; "
            f"1 to {MAX_PRECISION} are read"
        )
    return int(written)


def convert(item: dict, task: str) -> dict:
    """One reasoning-gym item (its dict of question, answer, metadata) as a workbench question of
    `task`: {"prompt", "answer", "answer_exact", "source", "source_index", "question", "given"}
    (answer_exact: the 15-digit answer is the exact result; question, given: reasoning-gym's
    question and answer). Raises Dropped (with its reason) for an item the workbench cannot ask as
    `task`."""
    if task not in OPERATIONS:
        raise ValueError(f"reasoning-gym questions are converted for {sorted(OPERATIONS)} only, not {task!r}")
    question, answer, metadata = fields(item)
    expression = expression_of(item)
    plain = _PLAIN.match(_unwrap(expression))
    if plain is None:
        raise Dropped("shape", f"{_shown(expression)} is not one 'a op b'")
    left, op, right = plain.groups()
    if op != OPERATIONS[task]:
        raise Dropped("operation", f"{_shown(expression)} is not a {task}")
    (M1, e1), (M2, e2) = _operand(left), _operand(right)
    a, b = _value(M1, e1), _value(M2, e2)
    if op == "/" and b == 0:
        raise Dropped("answer", f"{_shown(expression)} divides by zero")
    exact = a * b if op == "*" else a / b
    M, e = round_fraction(exact)
    digits = len(str(abs(M)))
    if M != 0 and not LOW <= e + digits - 1 <= HIGH:
        raise Dropped("answer", f"{_shown(expression)} = {float(exact):g} lies outside 1e-14 ... 1e15")
    if not agrees(exact, answer, precision_of(question)):
        raise Dropped("disagrees", f"{_shown(expression)}: reasoning-gym answers {_shown(answer)}, exactly {exact}")
    return dict(
        prompt=f"{fmt(M1, e1)} {op} {fmt(M2, e2)}",
        answer=fmt(M, e),
        answer_exact=_value(M, e) == exact,
        source=metadata.get("source_dataset"),
        source_index=metadata.get("source_index"),
        question=question,
        given=answer,
    )


def _reasoning_gym():
    try:
        import reasoning_gym
    except ImportError:
        raise ImportError(
            f"questions from an independent generator need the package reasoning-gym: {INSTALL}"
        ) from None
    return reasoning_gym


def check_draw(n, seed) -> None:
    """n: a positive integer, seed: a non-negative one (reasoning-gym seeds Python's Random with seed + index)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of generator questions must be a positive integer, got {n!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"the generator's seed must be a non-negative integer, got {seed!r}")


def questions(task: str, n: int = 500, seed: int = 0, sources=None) -> pd.DataFrame:
    """`n` questions of `task` converted from reasoning-gym (`convert`), in the columns of `convert`:
    the task's SOURCES (or `sources`, pairs of dataset name and configuration) share `n` as evenly
    as they can, source k drawing its items 0, 1, ... with seed `seed + k * SEED_STRIDE`. The same
    arguments give the same questions. `.attrs["dropped"]`: {source: {reason: count}} of the items
    drawn and dropped; `.attrs["drawn"]`: {source: items drawn}."""
    if task not in OPERATIONS:
        raise ValueError(f"reasoning-gym questions are converted for {sorted(OPERATIONS)} only, not {task!r}")
    check_draw(n, seed)
    sources = tuple(sources or SOURCES[task])
    rg = _reasoning_gym()
    rows, dropped, drawn = [], {}, {}
    for k, (name, config) in enumerate(sources):
        share = n // len(sources) + (k < n % len(sources))
        kept, reasons, tries = [], Counter(), share * MAX_TRIES
        with localcontext():  # decimal_arithmetic sets the thread's decimal precision as it draws
            dataset = rg.create_dataset(name, **dict(config), seed=seed + k * SEED_STRIDE, size=tries)
            index = 0
            while len(kept) < share and index < tries:
                try:
                    kept.append(convert(dataset[index], task))
                except Dropped as why:
                    reasons[why.reason] += 1
                except ValueError as err:  # not an item of the package's kind: say which one
                    raise ValueError(f"reasoning-gym's {name}, item {index}: {err}") from None
                index += 1
        if len(kept) < share:
            raise ValueError(
                f"reasoning-gym's {name} gave {len(kept)} {task} questions of {share} in {tries} items "
                f"(dropped: {dict(reasons)})"
            )
        rows += kept
        dropped[name], drawn[name] = {r: reasons[r] for r in DROP_REASONS}, index
    table = pd.DataFrame(
        rows, columns=["prompt", "answer", "answer_exact", "source", "source_index", "question", "given"]
    )
    table.attrs.update(dropped=dropped, drawn=drawn)
    return table
