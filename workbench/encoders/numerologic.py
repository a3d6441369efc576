"""NumeroLogic (Schwartz et al., 2024): single-digit tokens, each number's digits prefixed by their
count, so the model knows a digit's place value before it reads (or writes) the digit.

    "-1234.56" -> ["-", "<4>", "1", "2", "3", "4", ".", "<.2>", "5", "6"]

The integer part gets a count piece "<n>" (also "<0>" for ".5"), the fraction part a "<.n>" after
the point. Counts above MAX_COUNT share one piece ("<21+>", "<.21+>"). The text of a number is its
digit pieces without the counts (`number_text`), so a count the model writes wrongly never changes
the value read. Not in the BitTokens paper; added to the workbench as a related-work baseline.
"""

from __future__ import annotations

from functools import cached_property

from . import register
from .digits import DigitEncoding

MAX_COUNT = 20
_DIGIT_PIECES = ["-", "."] + list("0123456789")  # single-digit tokenization's pieces


def _count(n: int, prefix: str = "") -> str:
    return f"<{prefix}{n}>" if n <= MAX_COUNT else f"<{prefix}{MAX_COUNT + 1}+>"


@register
class NumeroLogic(DigitEncoding):
    name = "numerologic"
    label = "NumeroLogic"
    group = 1

    @cached_property
    def pieces(self) -> list[str]:
        return _DIGIT_PIECES + sorted(self._counts, key=lambda p: (p.startswith("<."), len(p), p))

    @cached_property
    def _counts(self) -> frozenset[str]:
        return frozenset([_count(n) for n in range(MAX_COUNT + 2)] + [_count(n, ".") for n in range(1, MAX_COUNT + 2)])

    def number_tokens(self, text: str) -> list[str]:
        digits = super().number_tokens(text)  # validates the text; "-", digits, ".", digits
        sign = digits[:1] if digits[:1] == ["-"] else []
        body = digits[len(sign) :]
        point = body.index(".") if "." in body else len(body)
        integer, fraction = body[:point], body[point + 1 :]
        out = sign + [_count(len(integer))] + integer
        if point < len(body):
            out += [".", _count(len(fraction), ".")] + fraction
        return out

    def number_text(self, pieces: list[str]) -> str:
        return "".join(p for p in pieces if p not in self._counts)
