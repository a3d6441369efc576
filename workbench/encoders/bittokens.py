"""BitTokens (section 5): a number is the 64 IEEE 754 bits of its float64 value, MSB first
(sign, 11 exponent, 52 significand), followed by the 64 bits of its reciprocal, scaled to ±1
(bit 1 -> +1, bit 0 -> -1). One <|num|> token per number; ±0, ±inf, NaN and subnormals included.

Bits come from a 256 x 8 byte lookup table instead of one shift-and-mask per bit: the same
result, many times faster (benchmarks/encode.py). The head predicts the 64 bits of x as logits;
the loss is the mean BCE over the bits; a logit > 0 is a 1 bit, and the 64 bits are the float64.

Ablations of appendix D.3:
  combine (Table 8)  how the encoding joins the learned [NUM] embedding e:
      "sum" e + pad(enc); "product" e * pad(enc, value=1); "concat" e with its first `width`
      dims zeroed + pad(enc); "zero_pad" (default, the authors' configs) no e at all,
      pad(enc) * sqrt(d_model / width) so the token has unit RMS like the others;
      "weighted" W enc; "weighted_sum" e + W enc (W a learned linear layer).
  head (Table 13)    "linear" (default) d_model -> 64 logits; "none" the first 64 hidden dims
      are the logits; "mlp" d_model -> d_model -> ReLU -> 64.
  reciprocal (Table 11)  False drops the 64 bits of 1/x (width 64 instead of 128).
  base (Table 9)     10: a binary-coded decimal analogue of IEEE 754, 84 bits per value:
      [negative, is_inf, is_nan] + 3 exponent digits + 17 significand digits (4 bits each, MSB
      first) + [exponent negative], for |x| = d1.d2…d17 × 10^exponent written from the shortest
      round-trip decimal of x (Python's repr, at most 17 digits, so this is exact). ±0 has all
      digits 0 and keeps its sign; NaN and inf set their flag (digits 0). Width 168 with 1/x.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import register
from .base import NumberEncoding, as_float64
from .digits import decimal_parts

COMBINE = ("sum", "product", "concat", "zero_pad", "weighted", "weighted_sum")
HEADS = ("linear", "none", "mlp")

# _BYTE_BITS[b] = the 8 bits of byte b, MSB first, as ±1 (exact in float32).
_BYTE_BITS = ((torch.arange(256).unsqueeze(1) >> torch.arange(7, -1, -1)) & 1).float() * 2 - 1
_BYTE_BITS_NP = _BYTE_BITS.numpy()
_BIT_WEIGHTS = 1 << torch.arange(7, -1, -1)


def _cpu_float64(x) -> Tensor:
    return as_float64(x).detach().cpu()


@torch.compiler.disable  # NumPy byte tables: under torch.compile this part runs eagerly
def float64_bits(x) -> Tensor:
    """float64 [N] -> ±1 float32 [N, 64]: IEEE 754 bits, MSB first (one table row per byte).

    The bytes are made big-endian by an integer byteswap (never a float operation, so NaN
    payloads survive), then each byte picks its row of the table."""
    values = _cpu_float64(x).contiguous().numpy()
    big_endian = values.view(np.uint64)
    if np.little_endian:
        big_endian = big_endian.byteswap()
    bits = np.take(_BYTE_BITS_NP, big_endian.view(np.uint8), axis=0)
    return torch.from_numpy(bits).reshape(-1, 64)


def bits_to_float64(bits: Tensor) -> Tensor:
    """[N, 64] bits MSB first (any value > 0 is a 1) -> float64 [N], bit-exact."""
    if bits.shape[-1] != 64:
        raise ValueError(f"expected 64 bits per value, got shape {tuple(bits.shape)}")
    ones = (bits.detach().cpu().reshape(-1, 8, 8) > 0).long()
    big_endian = (ones * _BIT_WEIGHTS).sum(-1).to(torch.uint8)
    if np.little_endian:
        big_endian = big_endian.flip(-1)
    return big_endian.contiguous().view(torch.float64).reshape(-1)


# -- base 10 (Table 9) ------------------------------------------------------------------------
_DIGIT_BITS = ((torch.arange(16).unsqueeze(1) >> torch.arange(3, -1, -1)) & 1).float() * 2 - 1
_DECIMAL_WIDTH = 3 + 4 * 3 + 4 * 17 + 1  # flags, exponent digits, significand digits, exp sign
_SIGNIFICAND = 17
_POW10 = 10 ** np.arange(18, dtype=np.int64)


@torch.compiler.disable  # NumPy digit arithmetic, run eagerly under torch.compile
def decimal_bits(x) -> Tensor:
    """float64 [N] -> ±1 float32 [N, 84]: the binary-coded decimal layout of the module docstring."""
    x = _cpu_float64(x)
    finite = torch.isfinite(x)
    m, q = decimal_parts(torch.where(finite, x, torch.zeros_like(x)))
    n_digits = (m[:, None] >= _POW10[None, :]).sum(1)  # digits of m (0 for m = 0)
    significand = m * _POW10[_SIGNIFICAND - np.maximum(n_digits, 1)]  # exactly 17 digits
    exponent = np.where(m > 0, q + n_digits - 1, 0)
    sig_digits = significand[:, None] // _POW10[None, _SIGNIFICAND - 1::-1] % 10
    exp_digits = np.abs(exponent)[:, None] // _POW10[None, 2::-1] % 10
    codes = torch.from_numpy(np.concatenate([exp_digits, sig_digits], 1))
    flags = torch.stack([torch.signbit(x), torch.isinf(x), torch.isnan(x),
                         torch.from_numpy(exponent < 0)], 1).float() * 2 - 1
    return torch.cat([flags[:, :3], _DIGIT_BITS[codes].reshape(len(x), 80), flags[:, 3:]], 1)


def decimal_bits_to_float64(bits: Tensor) -> Tensor:
    """Inverse of decimal_bits (any value > 0 is a 1; a 4-bit code above 9 reads as 9)."""
    if bits.shape[-1] != _DECIMAL_WIDTH:
        raise ValueError(f"expected {_DECIMAL_WIDTH} decimal bits per value, got {tuple(bits.shape)}")
    b = (bits.detach().cpu().reshape(-1, _DECIMAL_WIDTH) > 0).long()
    codes = (b[:, 3:-1].reshape(-1, 20, 4) * torch.tensor([8, 4, 2, 1])).sum(-1).clamp(max=9).numpy()
    exponent = (codes[:, :3] * _POW10[2::-1]).sum(1) * np.where(b[:, -1].numpy() == 1, -1, 1)
    significand = (codes[:, 3:] * _POW10[_SIGNIFICAND - 1::-1]).sum(1)
    out = []
    for sig, exp, (negative, inf, nan) in zip(significand.tolist(), exponent.tolist(), b[:, :3].tolist()):
        value = math.nan if nan else math.inf if inf else float(f"{sig}e{exp - _SIGNIFICAND + 1}")
        out.append(-value if negative and not nan else value)
    return torch.tensor(out, dtype=torch.float64)


@register
class BitTokens(NumberEncoding):
    name = "bittokens"

    def __init__(self, d_model: int = 768, combine: str = "zero_pad", head: str = "linear",
                 reciprocal: bool = True, base: int = 2):
        super().__init__(d_model)
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, got {combine!r}")
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        if base not in (2, 10):
            raise ValueError(f"base must be 2 or 10, got {base!r}")
        if not isinstance(reciprocal, bool):
            raise ValueError(f"reciprocal must be True or False, got {reciprocal!r}")
        self.combine, self.head_kind, self.reciprocal, self.base = combine, head, reciprocal, base
        self.bits = 64 if base == 2 else _DECIMAL_WIDTH  # bits of one value (x or 1/x)
        if combine in ("sum", "product", "concat", "zero_pad") and d_model < self.width:
            raise ValueError(f"combine={combine!r} pads the {self.width}-dim encoding to d_model, "
                             f"so d_model must be >= {self.width}, got {d_model}")
        if head == "none" and d_model < self.bits:
            raise ValueError(f"head='none' reads {self.bits} logits from the hidden state; "
                             f"d_model must be >= {self.bits}, got {d_model}")
        if combine in ("weighted", "weighted_sum"):
            self.combine_proj = nn.Linear(self.width, d_model, bias=False)
        if head == "linear":
            self.number_head = nn.Linear(d_model, self.bits)
        elif head == "mlp":
            self.number_head = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(),
                                             nn.Linear(d_model, self.bits))

    @property
    def width(self) -> int:
        return self.bits * (2 if self.reciprocal else 1)

    def _bits(self, x) -> Tensor:
        return float64_bits(x) if self.base == 2 else decimal_bits(x)

    def encode(self, x) -> Tensor:
        x = _cpu_float64(x)
        if not self.reciprocal:
            return self._bits(x)
        with torch.no_grad():
            reciprocal = x.reciprocal()
        if self.base == 2:  # one table lookup for x and 1/x together
            return float64_bits(torch.stack((x, reciprocal), 1).reshape(-1)).reshape(-1, 128)
        return torch.cat([self._bits(x), self._bits(reciprocal)], 1)

    def decode(self, encoding: Tensor) -> Tensor:
        """Value bits (the first `bits` dims) -> float64; the reciprocal half is not needed.
        A NaN is neither a 1 nor a 0 bit: a row with NaN among its value bits decodes to NaN."""
        if encoding.dim() != 2 or encoding.shape[1] != self.width:
            raise ValueError(f"expected an encoding of shape [N, {self.width}], got {tuple(encoding.shape)}")
        value_bits = encoding[:, : self.bits]
        values = bits_to_float64(value_bits) if self.base == 2 else decimal_bits_to_float64(value_bits)
        return torch.where(value_bits.detach().cpu().isnan().any(1), math.nan, values)

    def embed(self, num_embedding: Tensor, x: Tensor) -> Tensor:
        enc = self.encode(x).to(device=num_embedding.device, dtype=num_embedding.dtype)
        if self.combine in ("weighted", "weighted_sum"):
            projected = self.combine_proj(enc)
            return projected if self.combine == "weighted" else num_embedding + projected
        pad = self.d_model - self.width
        if self.combine == "product":
            return num_embedding * F.pad(enc, (0, pad), value=1.0)
        padded = F.pad(enc, (0, pad))
        if self.combine == "sum":
            return num_embedding + padded
        if self.combine == "concat":
            return F.pad(num_embedding[:, self.width:], (self.width, 0)) + padded
        return padded * math.sqrt(self.d_model / self.width)  # zero_pad

    def head(self, hidden: Tensor) -> Tensor:
        """Logits of the value bits [N, bits] (the reciprocal is input only)."""
        if self.head_kind == "none":
            return hidden[..., : self.bits]
        return self.number_head(hidden)

    def loss(self, head_out: Tensor, target: Tensor) -> Tensor:
        """Mean BCE over the bits of the target, every bit weighted equally (section 5)."""
        target_bits = (self._bits(target) > 0).to(device=head_out.device, dtype=head_out.dtype)
        return F.binary_cross_entropy_with_logits(head_out, target_bits)

    def predict(self, head_out: Tensor) -> Tensor:
        """Threshold the logits at 0 (sigmoid 0.5) and reinterpret the bits as float64."""
        logits = head_out.detach().float().cpu()
        return bits_to_float64(logits) if self.base == 2 else decimal_bits_to_float64(logits)
