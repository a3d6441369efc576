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
from einops import rearrange
from torch import Tensor, nn

from . import register
from .base import NumberEncoding, NumberHead, as_float64
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
    return torch.from_numpy(rearrange(bits, "(n byte) bit -> n (byte bit)", byte=8))


def bits_to_float64(bits: Tensor) -> Tensor:
    """[N, 64] bits MSB first (any value > 0 is a 1) -> float64 [N], bit-exact."""
    if bits.shape[-1] != 64:
        raise ValueError(f"expected 64 bits per value, got shape {tuple(bits.shape)}")
    ones = (rearrange(bits.detach().cpu(), "... (byte bit) -> (...) byte bit", bit=8) > 0).long()
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
    digit_bits = rearrange(_DIGIT_BITS[codes], "n digit bit -> n (digit bit)")
    return torch.cat([flags[:, :3], digit_bits, flags[:, 3:]], 1)


def decimal_bits_to_float64(bits: Tensor) -> Tensor:
    """Inverse of decimal_bits (any value > 0 is a 1; a 4-bit code above 9 reads as 9)."""
    if bits.shape[-1] != _DECIMAL_WIDTH:
        raise ValueError(f"expected {_DECIMAL_WIDTH} decimal bits per value, got {tuple(bits.shape)}")
    b = (bits.detach().cpu().reshape(-1, _DECIMAL_WIDTH) > 0).long()
    digit_bits = rearrange(b[:, 3:-1], "n (digit bit) -> n digit bit", bit=4)
    codes = (digit_bits * torch.tensor([8, 4, 2, 1])).sum(-1).clamp(max=9).numpy()
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
    difficulty_base = 2
    paper_label = "BitToken"
    paper_verdicts = {"D1": "pass", "D2": "pass", "D3": "pass", "D4": "pass", "D5": "pass",
                      "D6": "pass", "D7": "trade-off", "D8": "pass", "D9": "pass"}

    def __init__(self, combine: str = "zero_pad", head: str = "linear", reciprocal: bool = True,
                 base: int = 2):
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

    @property
    def width(self) -> int:
        return self.bits * (2 if self.reciprocal else 1)

    def value_bits(self, x) -> Tensor:
        """The ±1 bits of the values themselves (no reciprocal): what the head predicts."""
        return float64_bits(x) if self.base == 2 else decimal_bits(x)

    def encode(self, x) -> Tensor:
        x = _cpu_float64(x)
        if not self.reciprocal:
            return self.value_bits(x)
        with torch.no_grad():
            reciprocal = x.reciprocal()
        if self.base == 2:  # one table lookup for x and 1/x together
            both = float64_bits(torch.stack((x, reciprocal), 1).reshape(-1))
            return rearrange(both, "(n pair) bit -> n (pair bit)", pair=2)
        return torch.cat([self.value_bits(x), self.value_bits(reciprocal)], 1)

    def decode(self, encoding: Tensor) -> Tensor:
        """Value bits (the first `bits` dims) -> float64; the reciprocal half is not needed.
        A NaN is neither a 1 nor a 0 bit: a row with NaN among its value bits decodes to NaN."""
        if encoding.dim() != 2 or encoding.shape[1] != self.width:
            raise ValueError(f"expected an encoding of shape [N, {self.width}], got {tuple(encoding.shape)}")
        value_bits = encoding[:, : self.bits]
        values = self.bits_to_values(value_bits)
        return torch.where(value_bits.detach().cpu().isnan().any(1), math.nan, values)

    def bits_to_values(self, bits: Tensor) -> Tensor:
        """Value bits or logits (> 0 is a 1) -> float64."""
        return bits_to_float64(bits) if self.base == 2 else decimal_bits_to_float64(bits)

    def number_head(self, d_model: int) -> BitTokensHead:
        return BitTokensHead(self, d_model)


class BitTokensHead(NumberHead):
    """Joins the bits to [NUM] by `combine`; predicts the value bits as logits (`head`), trained
    with the mean BCE over the bits (every bit weighted equally, section 5)."""

    def __init__(self, encoding: BitTokens, d_model: int):
        super().__init__(encoding, d_model)
        width, bits, combine, head = encoding.width, encoding.bits, encoding.combine, encoding.head_kind
        if combine in ("sum", "product", "concat", "zero_pad") and d_model < width:
            raise ValueError(f"combine={combine!r} pads the {width}-dim encoding to d_model, "
                             f"so d_model must be >= {width}, got {d_model}")
        if head == "none" and d_model < bits:
            raise ValueError(f"head='none' reads {bits} logits from the hidden state; "
                             f"d_model must be >= {bits}, got {d_model}")
        if combine in ("weighted", "weighted_sum"):
            self.combine = nn.Linear(width, d_model, bias=False)
        if head == "linear":
            self.output = nn.Linear(d_model, bits)
        elif head == "mlp":
            self.output = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(), nn.Linear(d_model, bits))

    def embed(self, num_embedding: Tensor, x: Tensor) -> Tensor:
        enc = self.encoding.encode(x).to(device=num_embedding.device, dtype=num_embedding.dtype)
        combine, width = self.encoding.combine, self.encoding.width
        if combine in ("weighted", "weighted_sum"):
            projected = self.combine(enc)
            return projected if combine == "weighted" else num_embedding + projected
        pad = self.d_model - width
        if combine == "product":
            return num_embedding * F.pad(enc, (0, pad), value=1.0)
        padded = F.pad(enc, (0, pad))
        if combine == "sum":
            return num_embedding + padded
        if combine == "concat":
            return F.pad(num_embedding[:, width:], (width, 0)) + padded
        return padded * math.sqrt(self.d_model / width)  # zero_pad: unit RMS like other tokens

    def forward(self, hidden: Tensor) -> Tensor:
        """Logits of the value bits [N, bits] (the reciprocal is input only)."""
        if self.encoding.head_kind == "none":
            return hidden[..., : self.encoding.bits]
        return self.output(hidden)

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        """Mean BCE over the bits of each target: [N]."""
        target_bits = (self.encoding.value_bits(target) > 0).to(device=out.device, dtype=out.dtype)
        return F.binary_cross_entropy_with_logits(out, target_bits, reduction="none").mean(-1)

    def predict(self, out: Tensor) -> Tensor:
        """Threshold the logits at 0 (sigmoid 0.5) and reinterpret the bits as float64; a row with a
        NaN logit (a broken model) is NaN, never a number."""
        logits = out.detach().float().cpu()
        return torch.where(logits.isnan().any(1), math.nan, self.encoding.bits_to_values(logits))

    def target_vector(self, x) -> Tensor:
        return self.encoding.value_bits(x).double()

    def output_of(self, vector: Tensor) -> Tensor:
        return vector.float()

    def embedding_map(self, num_embedding: Tensor) -> tuple[Tensor, Tensor]:
        d, w = self.d_model, self.encoding.width
        pad = torch.eye(d, w, dtype=torch.float64)
        if self.encoding.combine == "sum":
            return pad, num_embedding.double()
        if self.encoding.combine == "zero_pad":
            return pad * math.sqrt(d / w), torch.zeros(d, dtype=torch.float64)
        return super().embedding_map(num_embedding)
