"""Decoding-based regression (RegressLM: Song et al., 2025, google-deepmind/regress-lm; after
optformer's P10 tokens): a number is decoded as a short sequence of sign, exponent and mantissa
tokens from a vocabulary of its own, the source's `IEEEFloatTokenizer` (base 10):

    <sign> <exponent sign> <exponent digits> <mantissa digits>        value = ±m1.m2m3... x 10^(±e)
    "123.4" -> <+> <+> <0> <2> <1> <2> <3> <4>         "-0.05" -> <-> <-> <0> <2> <5>

with the twelve tokens "<+>", "<->", "<0>" ... "<9>" (the source's own strings), the mantissa's
first digit not 0 (but for 0 itself: <+> <+> <0> <0> <0>), so the model writes the sign and the
scale of a number before any digit of it.

Options: exponent_digits (2: |e| <= 99; the source's default is 1), mantissa_digits (0, ours: as
many mantissa digits as the number has significant digits, at least one; k > 0: exactly k, the
source's fixed length, its default being 4, padded with zeros). A number that does not fit, its
exponent past the exponent digits or more significant digits than k, is an error naming it and
the option: the text of every number is kept exactly, where the source rounds (overflow to the
largest number, underflow to 0) and truncates the mantissa to its k digits. Why the variable
length by default: the workbench reads and writes numbers exactly, and the shipped corpus holds a
number of 28 significant digits (2^96), which a fixed length would make every number pay for.

Like scientific notation (scientific.py), the text keeps the value, not the written form ("1.50"
comes back "1.5"); -0 keeps its sign (the source writes it <+>). Pieces that form no number (a
model's sign without an exponent) are written as they are. A number starts at a sign token that
follows a digit, so numbers written next to each other split as the text did.
"""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property
from numbers import Integral

from ..numbers import canonical
from . import register
from .digits import DigitEncoding, shown

SIGNS = ["<+>", "<->"]
DIGITS = [f"<{d}>" for d in range(10)]


@register
class DecodingRegression(DigitEncoding):
    name = "decoding_regression"
    label = "Decoding regression"
    group = 1

    def __init__(self, exponent_digits: int = 2, mantissa_digits: int = 0):
        for option, value, low, high in (
            ("exponent_digits", exponent_digits, 1, 3),
            ("mantissa_digits", mantissa_digits, 0, 40),
        ):
            if isinstance(value, bool) or not isinstance(value, Integral) or not low <= value <= high:
                raise ValueError(f"{self.name}: {option} must be an integer in {low}..{high}, got {value!r}")
        self.exponent_digits, self.mantissa_digits = int(exponent_digits), int(mantissa_digits)

    @cached_property
    def pieces(self) -> list[str]:
        return SIGNS + DIGITS  # the source's all_tokens(), in its order

    def number_tokens(self, text: str) -> list[str]:
        super().number_tokens(text)  # validates the plain decimal text
        sign, value = ("-", Decimal(text[1:])) if text.startswith("-") else ("+", Decimal(text))
        if value == 0:
            exponent, mantissa = 0, "0"
        else:
            exponent = value.adjusted()
            mantissa = "".join(map(str, value.as_tuple().digits)).strip("0")  # exact significant digits
        if len(str(abs(exponent))) > self.exponent_digits:
            raise ValueError(
                f"{self.name}: {shown(text)} is of the order 10^{exponent}, beyond {self.exponent_digits} exponent "
                "digit(s); raise the option exponent_digits"
            )
        if self.mantissa_digits:
            if len(mantissa) > self.mantissa_digits:
                raise ValueError(
                    f"{self.name}: {shown(text)} has {len(mantissa)} significant digits, more than mantissa_digits="
                    f"{self.mantissa_digits}; raise it (or 0: as many as the number has)"
                )
            mantissa = mantissa.ljust(self.mantissa_digits, "0")
        head = [sign, "-" if exponent < 0 else "+"] + list(str(abs(exponent)).zfill(self.exponent_digits))
        return [f"<{c}>" for c in head + list(mantissa)]

    def number_text(self, pieces: list[str]) -> str:
        groups, current = [], []
        for piece in pieces:  # a sign after a digit starts the next number
            if piece in SIGNS and current and current[-1] in DIGITS:
                groups.append(current)
                current = []
            current.append(piece)
        return "".join(self._text(g) for g in groups + [current] if g)

    def _text(self, group: list[str]) -> str:
        e = self.exponent_digits
        head, digits = group[: 2 + e], group[2 + e :]
        well_formed = (
            len(digits) >= 1
            and all(p in SIGNS for p in head[:2])
            and all(p in DIGITS for p in head[2:] + digits)
            and len(head) == 2 + e
            and (not self.mantissa_digits or len(digits) == self.mantissa_digits)
        )
        if not well_formed:
            return "".join(group)
        chars = [p[1:-1] for p in group]
        exponent = int("".join(chars[2 : 2 + e])) * (-1 if chars[1] == "-" else 1)
        value = Decimal(f"{'-' if chars[0] == '-' else ''}{chars[2 + e]}.{''.join(chars[3 + e :])}E{exponent}")
        return canonical(format(value, "f"))  # "-0" keeps its sign
