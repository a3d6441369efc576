"""Place-value tokens (the Regression Transformer: Born & Manica, 2023, "Regression Transformer
enables concurrent sequence regression and generation for molecular language modelling"): every
digit is one token that carries both the digit and its place, _d_p_ for d x 10^p:

    "12.5" -> _1_1_ _2_0_ . _5_-1_      "-0.07" -> - _0_0_ . _0_-1_ _7_-2_      "007" -> _0_2_ _0_1_ _7_0_

so the model never has to count digits to know a place. Options `max_place` and `min_place`
bound the places (30 and -32 by default: the paper's task numbers reach 10^14 and 10^-30, the
longest number of the pydoc corpus 10^28, the desiderata's 15-digit values 10^-28); a digit
beyond them is an error naming the number and the option, never another number.

What we do differently: RT also adds a numerical encoding of each token's value to its embedding;
we keep the tokens only (the point of this entry is the tokenization; the learned embedding of
_d_p_ can learn what the fixed one gives). RT writes the point as "_._"; ours is ".", as in the
other digit encodings. The text of a number is its digits in the order written (`number_text`),
so a place the model writes wrongly never changes the value read, as NumeroLogic's counts.
"""

from __future__ import annotations

import re
from functools import cached_property
from numbers import Integral

from . import register
from .digits import DigitEncoding, shown

_PIECE = re.compile(r"_([0-9])_(-?[0-9]+)_")


@register
class PlaceValue(DigitEncoding):
    name = "place_value"
    label = "Place-value tokens"
    group = 1

    def __init__(self, max_place: int = 30, min_place: int = -32):
        for option, value in (("max_place", max_place), ("min_place", min_place)):
            if isinstance(value, bool) or not isinstance(value, Integral) or not -400 <= value <= 400:
                raise ValueError(f"{self.name}: {option} must be an integer in -400..400, got {value!r}")
        if not min_place <= 0 <= max_place:
            raise ValueError(f"{self.name}: need min_place <= 0 <= max_place, got {min_place} and {max_place}")
        self.max_place, self.min_place = int(max_place), int(min_place)

    @cached_property
    def pieces(self) -> list[str]:
        return ["-", "."] + [f"_{d}_{p}_" for p in range(self.max_place, self.min_place - 1, -1) for d in range(10)]

    def number_tokens(self, text: str) -> list[str]:
        pieces = super().number_tokens(text)  # validates; "-", digits, ".", digits in written order
        sign = pieces[:1] if pieces[:1] == ["-"] else []
        integer, point, fraction = "".join(pieces[len(sign) :]).partition(".")
        if len(integer) - 1 > self.max_place or -len(fraction) < self.min_place:
            raise ValueError(
                f"{self.name}: {shown(text)} has digits at places 10^{len(integer) - 1} ... "
                f"10^{-len(fraction)}, beyond max_place {self.max_place} / min_place "
                f"{self.min_place}; widen those options"
            )
        out = sign + [f"_{d}_{len(integer) - 1 - k}_" for k, d in enumerate(integer)]
        return out + ([point] + [f"_{d}_{-1 - k}_" for k, d in enumerate(fraction)] if point else [])

    def number_text(self, pieces: list[str]) -> str:
        return "".join(_PIECE.sub(r"\1", p) for p in pieces)
