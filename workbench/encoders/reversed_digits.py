"""Reversed digits (Lee et al., 2023, "Teaching arithmetic to small transformers"): single-digit
tokens, each number written least significant digit first, the order in which carries propagate,
so the model can write a sum or product digit by digit as it computes it.

    "1234" -> 4 3 2 1      "-12.5" -> - 5 . 2 1      ".25" -> . 5 2      "0.5" -> 5 . 0

The sign stays in front. A number with an integer part is reversed as a whole (its last fraction
digit first); a number without one (".25") keeps its point in front, so that numbers written next
to each other ("1.2.3" is 1.2 and .3) stay apart in the token stream: every run of pieces then
splits into numbers exactly as the text did, and `number_text` un-reverses each.

What we do differently: Lee et al. reverse the integer answers of addition only; we reverse every
number, operands, fractions and the numbers in prose included (as the Abacus paper does), so the
model reads and writes one format. No options.
"""

from __future__ import annotations

import re

from . import register
from .digits import DigitEncoding

_NUMBER = re.compile(r"(-?)([0-9]+(?:\.[0-9]+)?|\.[0-9]+)")


def reverse(body: str) -> str:
    """Digits and point of one unsigned number, reversed as the module docstring says; its own
    inverse (reverse(reverse(b)) == b)."""
    if body.startswith("."):
        return "." + body[:0:-1]
    return body[::-1]


@register
class ReversedDigits(DigitEncoding):
    name = "reversed_digits"
    label = "Reversed digits"
    group = 1

    def number_tokens(self, text: str) -> list[str]:
        pieces = super().number_tokens(text)  # validates; "-", digits, ".", digits in written order
        sign = pieces[:1] if pieces[:1] == ["-"] else []
        return sign + list(reverse("".join(pieces[len(sign) :])))

    def number_text(self, pieces: list[str]) -> str:
        """The text of a run of pieces: each number in it un-reversed; pieces that form no number
        (a model's stray "." or "-") stay as they are."""
        return _NUMBER.sub(lambda m: m.group(1) + reverse(m.group(2)), "".join(pieces))
