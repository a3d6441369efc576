"""Shared by the two multi-token schemes: a number stays text, cut into digit pieces.

"-" and "." are their own pieces; the integer part and the fraction part are each cut left to
right into groups of `group` digits (1: single digit, 3: triple digit as in GPT-4-style
tokenizers). There is no [NUM] token and no number head: the LM head writes the digits.
"""
from __future__ import annotations

from itertools import product

import torch
from torch import Tensor

from ..numbers import render
from .base import NumberEncoding, as_float64


class DigitEncoding(NumberEncoding):
    single_token = False
    group: int

    def __init__(self, d_model: int = 768):
        super().__init__(d_model)
        pieces = ["-", "."] + ["".join(p) for n in range(1, self.group + 1)
                               for p in product("0123456789", repeat=n)]
        self._pieces = pieces
        self._index = {p: i for i, p in enumerate(pieces)}

    def vocabulary(self) -> list[str]:
        return list(self._pieces)

    def number_tokens(self, text: str) -> list[str]:
        """"-1234.5" -> ["-", "123", "4", ".", "5"] for group 3."""
        out = []
        if text.startswith("-"):
            out.append("-")
            text = text[1:]
        integer, point, fraction = text.partition(".")
        if not (integer + fraction).isdigit() or (point and not fraction):
            raise ValueError(f"not a plain decimal number: {text!r}")
        out += [integer[i:i + self.group] for i in range(0, len(integer), self.group)]
        if point:
            out.append(".")
            out += [fraction[i:i + self.group] for i in range(0, len(fraction), self.group)]
        return out

    @property
    def width(self) -> int:
        return 0  # variable: encode pads to the longest number of the batch

    def encode(self, x) -> Tensor:
        """Piece ids of render(x, 17) (exact), padded with -1 to the longest number."""
        ids = [[self._index[p] for p in self.number_tokens(render(v, 17))] for v in as_float64(x).tolist()]
        longest = max((len(r) for r in ids), default=0)
        return torch.tensor([r + [-1] * (longest - len(r)) for r in ids], dtype=torch.float64).reshape(len(ids), longest)

    def decode(self, encoding: Tensor) -> Tensor:
        texts = ["".join(self._pieces[int(i)] for i in row if i >= 0) for row in encoding.tolist()]
        return torch.tensor([float(t) for t in texts], dtype=torch.float64)

    def _no_head(self, *args):
        raise TypeError(f"{self.name} writes numbers as text tokens: it has no [NUM] embedding "
                        "or number head")

    embed = head = loss = predict = _no_head
