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

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
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
    """Accept a tensor, array, list or scalar of real values and return a 1-D float64 tensor.

    An integer that float64 cannot hold exactly (2**53 + 1, 10**400) is an error naming it, and
    so is complex or non-numeric input: converting would silently make it another number."""
    if isinstance(x, Tensor):
        if x.is_complex():
            raise ValueError(f"expected real numbers, got a complex tensor ({x.dtype})")
        if not x.is_floating_point():
            _check_integers(x.detach().cpu().reshape(-1).numpy())
        return x.to(torch.float64).reshape(-1)
    a = np.asarray(x, dtype=object) if isinstance(x, (list, tuple)) else np.asarray(x)
    if a.dtype == object:  # Python numbers, ints beyond int64 included: check each one
        for v in a.flat:
            if not isinstance(v, Real):
                raise ValueError(f"expected real numbers, got {v!r} ({type(v).__name__})")
        _check_integers(np.array([int(v) for v in a.flat if isinstance(v, Integral)], dtype=object))
        a = a.astype(np.float64)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"expected real numbers, got an array of dtype {a.dtype}")
    if a.dtype.kind in "iu":
        _check_integers(a.reshape(-1))
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).reshape(-1)


def _check_integers(ints: np.ndarray) -> None:
    """Raise for the first integer float64 cannot hold exactly (all |n| <= 2**53 can)."""
    for n in ints[(ints > 2**53) | (ints < -2**53)].tolist():
        try:
            exact = float(n) == n  # Python compares an int with a float exactly
        except OverflowError:
            exact = False
        if not exact:
            shown = n if n.bit_length() < 1000 else f"of {n.bit_length()} bits"
            raise ValueError(f"the integer {shown} has no exact float64 (it would be rounded); "
                             "pass it as a float if rounding is meant")
