"""BitTokens (section 5): a number is the 64 IEEE 754 bits of its float64 value, MSB first
(sign, 11 exponent, 52 significand), followed by the 64 bits of its reciprocal, scaled to ±1.

Bits come from a 256 x 8 byte lookup table instead of one shift-and-mask per bit: the same
result, many times faster (benchmarks/encode.py). The head predicts the 64 bits of x as logits;
the loss is the mean BCE over the bits; a logit > 0 is a 1 bit.

Ablations: `combine` (Table 8), `head` (Table 13), `reciprocal=False` (Table 11) and `base=10`
(Table 9), where the bits are a binary-coded decimal instead of IEEE 754:
    sign, is_inf, is_nan, 3 exponent digits and 17 significand digits (4 bits each), exponent sign
so x = ±d1.d2…d17 × 10^exponent written from its shortest round-trip decimal (84 bits).
"""
from __future__ import annotations

import math
from decimal import Decimal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import register
from .base import NumberEncoding, as_float64

COMBINE = ("sum", "product", "concat", "zero_pad", "weighted", "weighted_sum")
HEADS = ("linear", "none", "mlp")

# _BYTE_BITS[b] = the 8 bits of byte b, MSB first, as ±1 (exact in float32).
_BYTE_BITS = ((torch.arange(256).unsqueeze(1) >> torch.arange(7, -1, -1)) & 1).float() * 2 - 1
_BIT_WEIGHTS = 1 << torch.arange(7, -1, -1)


def float64_bits(x: Tensor) -> Tensor:
    """float64 [N] -> ±1 float32 [N, 64]: IEEE 754 bits, MSB first (one table row per byte)."""
    x = as_float64(x).contiguous()
    big_endian = x.view(torch.uint8).view(-1, 8).flip(-1)
    return _BYTE_BITS.index_select(0, big_endian.reshape(-1).int()).reshape(-1, 64)


def bits_to_float64(bits: Tensor) -> Tensor:
    """[N, 64] bits MSB first (any value > 0 is a 1) -> float64 [N], bit-exact."""
    ones = (bits.reshape(-1, 8, 8) > 0).long()
    big_endian = (ones * _BIT_WEIGHTS).sum(-1).to(torch.uint8)
    return big_endian.flip(-1).contiguous().view(torch.float64).reshape(-1)


_DIGIT_BITS = ((torch.arange(10).unsqueeze(1) >> torch.arange(3, -1, -1)) & 1).float() * 2 - 1
_BCD_WIDTH = 4 + 4 * 20


def decimal_bits(x: Tensor) -> Tensor:
    """float64 [N] -> ±1 float32 [N, 84]: the binary-coded decimal layout of the module docstring."""
    rows = []
    for v in as_float64(x).tolist():
        flags = [math.copysign(1.0, v) < 0, math.isinf(v), math.isnan(v)]
        exponent, digits = 0, [0] * 17
        if math.isfinite(v) and v != 0:
            sign, ds, exp = Decimal(repr(abs(v))).as_tuple()
            exponent = exp + len(ds) - 1
            digits = list(ds) + [0] * (17 - len(ds))
        codes = [1 if exponent < 0 else 0] + [int(c) for c in f"{abs(exponent):03d}"] + digits
        rows.append(torch.cat([torch.tensor(flags, dtype=torch.float32) * 2 - 1,
                               _DIGIT_BITS[torch.tensor(codes[1:])].reshape(-1),
                               torch.tensor([codes[0] * 2 - 1.0])]))
    return torch.stack(rows) if rows else torch.zeros(0, _BCD_WIDTH)


def decimal_bits_to_float64(bits: Tensor) -> Tensor:
    """Inverse of decimal_bits (a 4-bit code above 9 reads as 9)."""
    b = (bits.reshape(-1, _BCD_WIDTH) > 0).long()
    codes = (b[:, 3:83].reshape(-1, 20, 4) * torch.tensor([8, 4, 2, 1])).sum(-1).clamp(max=9)
    out = []
    for flag, code, exp_negative in zip(b[:, :3].tolist(), codes.tolist(), b[:, 83].tolist()):
        negative, inf, nan = flag
        if nan:
            out.append(math.nan)
            continue
        if inf:
            out.append(-math.inf if negative else math.inf)
            continue
        exponent = int("".join(map(str, code[:3]))) * (-1 if exp_negative else 1)
        digits = "".join(map(str, code[3:]))
        value = float(Decimal(f"{digits[0]}.{digits[1:]}e{exponent}")) if int(digits) else 0.0
        out.append(-value if negative else value)
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
        self.combine, self.head_kind, self.reciprocal, self.base = combine, head, reciprocal, base
        self.bits = 64 if base == 2 else _BCD_WIDTH
        if combine in ("sum", "product", "concat", "zero_pad") and d_model < self.width:
            raise ValueError(f"combine={combine!r} pads the {self.width}-dim encoding to d_model, "
                             f"so d_model must be >= {self.width}, got {d_model}")
        if head == "none" and d_model < self.bits:
            raise ValueError(f"head='none' reads {self.bits} logits from the hidden state; "
                             f"d_model must be >= {self.bits}")
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

    def _bits(self, x: Tensor) -> Tensor:
        return float64_bits(x) if self.base == 2 else decimal_bits(x)

    def encode(self, x) -> Tensor:
        x = as_float64(x)
        if not self.reciprocal:
            return self._bits(x)
        if self.base == 2:  # one table lookup for x and 1/x together
            return float64_bits(torch.stack((x, x.reciprocal()), 1).reshape(-1)).reshape(-1, 128)
        return torch.cat([self._bits(x), self._bits(x.reciprocal())], 1)

    def decode(self, encoding: Tensor) -> Tensor:
        value_bits = encoding[..., : self.bits]
        return bits_to_float64(value_bits) if self.base == 2 else decimal_bits_to_float64(value_bits)

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
        if self.head_kind == "none":
            return hidden[..., : self.bits]
        return self.number_head(hidden)

    def loss(self, head_out: Tensor, target: Tensor) -> Tensor:
        target_bits = (self._bits(target).to(head_out.device) > 0).to(head_out.dtype)
        return F.binary_cross_entropy_with_logits(head_out, target_bits)

    def predict(self, head_out: Tensor) -> Tensor:
        logits = head_out.detach().float().cpu()
        return bits_to_float64(logits) if self.base == 2 else decimal_bits_to_float64(logits)
