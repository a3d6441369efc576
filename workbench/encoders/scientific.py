"""Scientific-notation tokens (NumBERT: Zhang et al., 2020, "Do language embeddings capture
scales?"): a number is written as its significant digits, the mantissa, followed by one token
for its power of ten, so the model reads a number's scale from a single token:

    "314.1" -> 3 1 4 1 <e+2>      "-0.0015" -> - 1 5 <e-3>      "1200" -> 1 2 <e+3>      "0" -> 0 <e+0>

The value is d1.d2d3... x 10^e. NumBERT writes "3141 [EXP] 2" and leaves mantissa and exponent to
BERT's word pieces; here each mantissa digit is its own token and each exponent one token
<e-K> ... <e+K> (K = option `max_exponent`, 30 by default: the paper's task range 1e-14 ... 1e15,
products up to 1e30, and the longest number of the pydoc corpus, 29 digits). A number beyond it
is an error naming the number and the option, never another number.

What the text keeps: the value, not the written form ("1.50" and "01.5" both come back as "1.5";
trailing and leading zeros are not significant digits), so `Tokenizer.encode(text, forms=True)`,
which promises the text back exactly, refuses such a number, naming it. -0 keeps its sign. `number_text` writes
each mantissa + exponent group as plain decimal text; pieces that form no such group (a model's
mantissa without an exponent) are written as they are, "<e+2>" included, so they never read as a
number the tokens do not mean. Numbers written next to each other in text ("1.0.5" is 1.0 and .5)
come back as their values' texts side by side ("10.5"), as single-token numbers without their
written forms do.
"""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property
from numbers import Integral

from ..numbers import canonical
from . import register
from .digits import DigitEncoding, shown

DIGITS = list("0123456789")


@register
class Scientific(DigitEncoding):
    name = "scientific"
    label = "Scientific notation"
    group = 1

    def __init__(self, max_exponent: int = 30):
        if isinstance(max_exponent, bool) or not isinstance(max_exponent, Integral) or not 0 <= max_exponent <= 400:
            raise ValueError(f"{self.name}: max_exponent must be an integer in 0..400, got {max_exponent!r}")
        self.max_exponent = int(max_exponent)

    @cached_property
    def exponents(self) -> dict[str, int]:
        """Exponent token -> its power of ten."""
        return {f"<e{k:+d}>": k for k in range(-self.max_exponent, self.max_exponent + 1)}

    @cached_property
    def pieces(self) -> list[str]:
        return ["-"] + DIGITS + list(self.exponents)

    def number_tokens(self, text: str) -> list[str]:
        super().number_tokens(text)  # validates the plain decimal text
        sign, body = (["-"], text[1:]) if text.startswith("-") else ([], text)
        value = Decimal(body)
        if value == 0:
            return sign + ["0", "<e+0>"]
        exponent = value.adjusted()
        if abs(exponent) > self.max_exponent:
            raise ValueError(
                f"{self.name}: {shown(text)} is of the order 10^{exponent}, beyond the exponent tokens "
                f"±{self.max_exponent}; raise the option max_exponent"
            )
        digits = "".join(map(str, value.as_tuple().digits)).rstrip("0")  # exact (normalize() would round)
        return sign + list(digits) + [f"<e{exponent:+d}>"]

    def number_text(self, pieces: list[str]) -> str:
        out, pending = [], []
        for piece in pieces:
            if piece in self.exponents:
                mantissa = pending[1:] if pending[:1] == ["-"] else pending
                if mantissa and all(p in DIGITS for p in mantissa):
                    sign = "-" if len(mantissa) < len(pending) else ""
                    value = Decimal(f"{sign}{mantissa[0]}.{''.join(mantissa[1:])}E{self.exponents[piece]}")
                    out.append(canonical(format(value, "f")))
                else:
                    out.append("".join(pending) + piece)
                pending = []
            else:
                pending.append(piece)
        return "".join(out + pending)
