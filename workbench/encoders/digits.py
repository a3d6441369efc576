"""Shared by the multi-token schemes: a number stays text, cut into digit pieces.

"-" and "." are their own pieces; the integer part and the fraction part are each cut into
pieces by `cut`: here left to right into groups of `group` digits (1: single digit); triple
digit (triple_digit.py) cuts its own way. There is no [NUM] token and no number head: the LM
head writes the digits.

Also home of `decimal_parts`, the exact shortest decimal of a float64 that FoNE and the
base-10 BitTokens read their digits from.
"""

from __future__ import annotations

import re
from functools import cached_property
from itertools import product

import numpy as np
import torch
from torch import Tensor

from ..numbers import render
from .base import NumberEncoding, as_float64

_PLAIN_DECIMAL = re.compile(r"(-)?(?=\.?[0-9])([0-9]*)(?:\.([0-9]+))?")


def decimal_parts(x) -> tuple[np.ndarray, np.ndarray]:
    """|x| = m · 10^q exactly, from the shortest round-trip decimal of x (Python's repr):
    m int64 with at most 17 digits, q int64. Digits below float64's precision are 0 here.

    The texts are cut with NumPy's string functions, not a Python loop: a training batch's
    thousands of numbers pass through here twice (FoNE's features and digit labels), on the
    host while the GPU waits for the next batch."""
    values = as_float64(x).detach().cpu().abs()
    if not torch.isfinite(values).all():
        raise ValueError("only finite numbers have a decimal expansion, got inf or NaN")
    if not values.numel():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    texts = np.array(list(map(repr, values.tolist())), dtype=bytes)  # e.g. "1234.5", "1e-05", "1.2345e+20"
    mantissa, _, exponent = np.strings.partition(texts, b"e")
    integer, _, fraction = np.strings.partition(mantissa, b".")
    m = np.strings.add(integer, fraction).astype(np.int64)
    q = -np.strings.str_len(fraction).astype(np.int64)
    scientific = np.strings.str_len(exponent) > 0
    q[scientific] += exponent[scientific].astype(np.int64)
    return m, q


def shown(text: str, most: int = 40) -> str:
    """A number's text for an error message: whole when short, else its ends and its length."""
    return repr(text) if len(text) <= most else f"'{text[:16]}...{text[-8:]}' ({len(text)} characters)"


class DigitEncoding(NumberEncoding):
    """A number stays text: `number_tokens` cuts its text into pieces (each its own token id),
    `number_text` joins pieces back into the number's text. No [NUM] token, no number head."""

    single_token = False
    group: int  # digits per piece

    @cached_property
    def pieces(self) -> list[str]:
        """Every piece `number_tokens` can give (ids follow this order)."""
        return ["-", "."] + ["".join(p) for n in range(1, self.group + 1) for p in product("0123456789", repeat=n)]

    def vocabulary(self) -> list[str]:
        return list(self.pieces)

    def number_tokens(self, text: str) -> list[str]:
        """ "-1234.5" -> ["-", "123", "4", ".", "5"] for group 3 (ASCII digits only)."""
        match = _PLAIN_DECIMAL.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"not a plain decimal number: {text!r}")
        sign, integer, fraction = match.groups()
        out = ["-"] if sign else []
        out += self.cut(integer)
        if fraction is not None:
            out.append(".")
            out += self.cut(fraction)
        return out

    def cut(self, digits: str) -> list[str]:
        """A run of digits -> its pieces: left to right, `group` digits each."""
        return [digits[i : i + self.group] for i in range(0, len(digits), self.group)]

    def number_text(self, pieces: list[str]) -> str:
        """Inverse of `number_tokens`: the text of a number's pieces."""
        return "".join(pieces)

    @property
    def width(self) -> int:
        return 0  # variable: encode pads to the longest number of the batch

    def encode(self, x) -> Tensor:
        """Piece ids of render(x, 17) (exact), padded with -1 to the longest number."""
        index = {p: i for i, p in enumerate(self.pieces)}
        ids = [[index[p] for p in self._value_pieces(v)] for v in as_float64(x).tolist()]
        longest = max((len(r) for r in ids), default=0)
        return torch.tensor([r + [-1] * (longest - len(r)) for r in ids], dtype=torch.float64).reshape(
            len(ids), longest
        )

    def _value_pieces(self, value: float) -> list[str]:
        """The pieces of render(value, 17); an error names the encoding and the value."""
        try:
            return self.number_tokens(render(value, 17))
        except ValueError as err:
            raise ValueError(f"{self.name} cannot encode {value!r}: {err}") from None

    def decode(self, encoding: Tensor) -> Tensor:
        """Piece ids (-1 = padding) -> the float64 of the text they spell."""
        if encoding.dim() != 2:
            raise ValueError(f"expected piece ids of shape [N, length], got {tuple(encoding.shape)}")
        pieces = self.pieces
        out = []
        for row in encoding.detach().cpu().tolist():
            if any(i != int(i) or not -1 <= i < len(pieces) for i in row):
                raise ValueError(f"piece ids must be integers in [-1, {len(pieces)}), got {row}")
            text = self.number_text([pieces[int(i)] for i in row if i >= 0])
            self.number_tokens(text)  # raises on a malformed number
            out.append(float(text))
        return torch.tensor(out, dtype=torch.float64)
