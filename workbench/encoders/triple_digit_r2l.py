"""Right-to-left digit groups (Singh & Strouse, 2024, "Tokenization counts: the impact of
tokenization on arithmetic in frontier LLMs"): the integer part is cut into groups of three from
the right, as a comma-separated number is read, so each piece holds one place group (units,
thousands, ...) and the pieces of two numbers line up:

    "1234567" -> 1 234 567      "1000000" -> 1 000 000      "-12345.6789" -> - 12 345 . 678 9

Singh & Strouse force this cut on GPT-3.5's left-to-right pieces with commas; here it is the
tokenizer itself. What we do differently: they study integers only; we cut a fraction from the
point to the right (the point is where places line up), and every string of 1 to `group` digits
is a piece ("000", "007"), which the cut needs. Option `group`: 3 (the paper's) or 2.
"""

from __future__ import annotations

from . import register
from .digits import DigitEncoding


@register
class TripleDigitR2L(DigitEncoding):
    name = "triple_digit_r2l"
    label = "Triple digit, right to left"

    def __init__(self, group: int = 3):
        if group not in (2, 3) or isinstance(group, bool):
            raise ValueError(f"{self.name}: group must be 2 or 3 digits per piece, got {group!r}")
        self.group = group

    def number_tokens(self, text: str) -> list[str]:
        pieces = super().number_tokens(text)  # validates; integer and fraction cut left to right
        sign = pieces[:1] if pieces[:1] == ["-"] else []
        integer, point, fraction = "".join(pieces[len(sign) :]).partition(".")
        head = len(integer) % self.group  # the leftmost group is the short one
        out = sign + ([integer[:head]] if head else []) + self.cut(integer[head:])
        return out + ([point] + self.cut(fraction) if point else [])
