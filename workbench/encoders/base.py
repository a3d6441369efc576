"""The one interface that every number encoding implements.

The data path is the same for all of them:

    text -> numbers.parse -> token ids + float64 values
         -> model: the encoding joins the <|num|> embedding (`embed`)
         -> final hidden state -> `head` -> `loss` (training) / `predict` (float64 value)

Single-token encodings (BitTokens, FoNE, xVal) put one <|num|> token per number in the
sequence and read the value back through a number head. Digit encodings (single_digit,
triple_digit) keep numbers as text tokens (`single_token = False`): they have no head and
their `encode` gives the digit tokens of a number instead of a vector.

A new encoding is one new file: subclass `NumberEncoding` and decorate it with
`@register` (see `workbench/encoders/__init__.py`).
"""
from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn


class NumberEncoding(nn.Module):
    """Fixed numeric encoding + how it joins the [NUM] embedding + number head, loss, decoding."""

    name: ClassVar[str]
    #: One <|num|> token per number (True) or numbers as digit text tokens (False).
    single_token: ClassVar[bool] = True
    #: The minus sign belongs to the number (True) or stays a text token (False, e.g. FoNE).
    signed: ClassVar[bool] = True

    def __init__(self, d_model: int = 768):
        super().__init__()
        self.d_model = d_model

    # -- the fixed encoding -------------------------------------------------------------
    @property
    def width(self) -> int:
        """Size of the last dimension of `encode`."""
        raise NotImplementedError

    def encode(self, x: Tensor) -> Tensor:
        """float64 values [N] -> fixed encoding [N, width] (no learned parameters); float32 where
        that is exact (BitTokens' ±1), float64 where precision matters (FoNE phases, xVal scale)."""
        raise NotImplementedError

    def decode(self, encoding: Tensor) -> Tensor:
        """Inverse of `encode`: [N, width] -> float64 [N]."""
        raise NotImplementedError

    # -- inside the model (single-token encodings only) --------------------------------
    def embed(self, num_embedding: Tensor, x: Tensor) -> Tensor:
        """Join the learned [NUM] embedding rows [N, d_model] with the encoding of x [N]."""
        raise NotImplementedError

    def head(self, hidden: Tensor) -> Tensor:
        """Final hidden states [N, d_model] at positions that predict <|num|> -> head output."""
        raise NotImplementedError

    def loss(self, head_out: Tensor, target: Tensor) -> Tensor:
        """Scalar number loss of the head output against float64 targets [N] (mean over N)."""
        raise NotImplementedError

    def predict(self, head_out: Tensor) -> Tensor:
        """Head output -> float64 values [N] (what the model writes as its number)."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"name={self.name!r}, d_model={self.d_model}"


def as_float64(x) -> Tensor:
    """Accept a tensor, array, list or scalar of values and return a 1-D float64 tensor."""
    t = torch.as_tensor(x, dtype=torch.float64)
    return t.reshape(-1)
