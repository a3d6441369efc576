"""BitTokens (section 5): a number is the 64 IEEE 754 bits of its float64 value, MSB first
(sign, 11 exponent, 52 significand), followed by the 64 bits of its reciprocal, scaled to ±1
(bit 1 -> +1, bit 0 -> -1). One <|num|> token per number; ±0, ±inf, NaN and subnormals included.

Bits come from a 256 x 8 byte lookup table instead of one shift-and-mask per bit: the same
result, many times faster (benchmarks/encode.py). The head predicts the 64 bits of x as logits;
the loss is the mean BCE over the bits; a logit > 0 is a 1 bit, and the 64 bits are the float64.

Options (appendix D.3's ablations). Defaults follow the paper's text; where it is silent, the
authors' code (KreitnerL/BitTokens); the other behaviour is one option away.
  combine (Table 8)  how the encoding joins the learned [NUM] embedding e:
      "sum" (default; section 5's text "zero-pad ... then add the vector to the learned [NUM]
      token", and Table 4 / Fig. 4 equal Table 8's Sum column) e + pad(enc);
      "zero_pad" (the authors' released configs; the baseline of Tables 9, 10, 13, 14) no e at
      all, pad(enc) * sqrt(d_model / width) so the token has unit RMS like the others (base 10:
      see base10_pad_scale);
      "product" e * pad(enc, value=1); "concat" [enc, e[width:]]: the bits replace the first
      `width` dims of e; "weighted" W enc; "weighted_sum" e + W enc (W a learned linear layer).
  concat_rescale     True (default, the authors'; Table 8's numbers came from their code): concat
      divides the kept part e[width:] by its own RMS, so it has unit RMS like the ±1 bits.
      False: e[width:] as it is (this workbench's earlier concat).
  head (Table 13)    "linear" (default) d_model -> 64 logits; "none" the first 64 hidden dims
      are the logits; "mlp" ("2-layer MLP with ReLU") d_model -> hidden -> ReLU -> 64.
  mlp_hidden         the MLP's hidden width as a fraction of d_model, int(d_model * mlp_hidden):
      0.5 (default, the authors' d/2; the text gives no width); 1.0 is this workbench's earlier d.
  reciprocal (Table 11)  False drops the 64 bits of 1/x (width 64 instead of 128).
  base (Table 9)     10: digits instead of bits (layouts in base10.py), from the shortest decimal
      of x, so every finite float64 round-trips exactly. base 10 samples the decimal curriculum
      (`difficulty_base` 10), as the authors' base-10 config does.
  base10_layout      "onehot" (default, the authors'; the text is silent): 21 decimal digits -
      sign, 3 exponent digits biased by 500, 17 significand digits - each one-hot x 10 (210
      dims, 420 with 1/x); the head writes 210 logits, trained with the cross-entropy of each
      digit summed over the 21 digits, decoded by the argmax digit. inf and NaN use a reserved
      exponent (999), which the authors' format lacks. "bcd": a binary-coded decimal analogue
      of IEEE 754, 84 bits per value (168 with 1/x), trained with BCE like the binary bits.
  base10_pad_scale   zero_pad's scale at base 10: "value" (default, the authors' base-10 module;
      the text is silent) sqrt(d_model / the value's dims), 210 for onehot even with the
      reciprocal, so the token's RMS is sqrt(2) = 1.41 with it; "width" sqrt(d_model / width),
      unit RMS like base 2 (where the authors scale by the whole width too).
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from . import base10, register
from .base import NumberEncoding, NumberHead, as_float64

COMBINE = ("sum", "product", "concat", "zero_pad", "weighted", "weighted_sum")
HEADS = ("linear", "none", "mlp")
BASE10_LAYOUTS = ("onehot", "bcd")
PAD_SCALES = ("value", "width")

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


@register
class BitTokens(NumberEncoding):
    name = "bittokens"
    difficulty_base = 2
    label = "BitTokens"
    paper_label = "BitToken"
    paper_verdicts = {
        "D1": "pass",
        "D2": "pass",
        "D3": "pass",
        "D4": "pass",
        "D5": "pass",
        "D6": "pass",
        "D7": "trade-off",
        "D8": "pass",
        "D9": "pass",
    }

    def __init__(
        self,
        combine: str = "sum",
        head: str = "linear",
        reciprocal: bool = True,
        base: int = 2,
        concat_rescale: bool = True,
        mlp_hidden: float = 0.5,
        base10_layout: str = "onehot",
        base10_pad_scale: str = "value",
    ):
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, got {combine!r}")
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        if base not in (2, 10):
            raise ValueError(f"base must be 2 or 10, got {base!r}")
        if base10_layout not in BASE10_LAYOUTS:
            raise ValueError(f"base10_layout must be one of {BASE10_LAYOUTS}, got {base10_layout!r}")
        if base10_pad_scale not in PAD_SCALES:
            raise ValueError(f"base10_pad_scale must be one of {PAD_SCALES}, got {base10_pad_scale!r}")
        for option, value in (("reciprocal", reciprocal), ("concat_rescale", concat_rescale)):
            if not isinstance(value, bool):
                raise ValueError(f"{option} must be True or False, got {value!r}")
        # at most 16 x d_model, four times a transformer block's own MLP: a crafted saved folder's
        # 1e9 would otherwise fail deep in the allocator, or succeed and swap
        if isinstance(mlp_hidden, bool) or not isinstance(mlp_hidden, Real) or not 0 < mlp_hidden <= 16:
            raise ValueError(
                f"mlp_hidden is the MLP's hidden width as a fraction of d_model "
                f"(0.5: d_model // 2), a positive number up to 16; got {mlp_hidden!r}"
            )
        self.combine, self.head_kind, self.reciprocal, self.base = combine, head, reciprocal, base
        self.concat_rescale, self.mlp_hidden, self.base10_layout = concat_rescale, mlp_hidden, base10_layout
        self.base10_pad_scale = base10_pad_scale
        self.layout = "binary" if base == 2 else base10_layout
        self.bits = {"binary": 64, "onehot": base10.ONEHOT_WIDTH, "bcd": base10.BCD_WIDTH}[self.layout]
        if base == 10:  # the authors train base 10 on the decimal sets and curriculum (Table 9)
            self.difficulty_base = 10

    @property
    def width(self) -> int:
        return self.bits * (2 if self.reciprocal else 1)

    def zero_pad_scale(self, d_model: int) -> float:
        """zero_pad's factor: sqrt(d_model / width), or at base 10 with base10_pad_scale="value"
        sqrt(d_model / the value's dims) (the authors', whether or not 1/x is appended)."""
        dims = self.bits if self.base == 10 and self.base10_pad_scale == "value" else self.width
        return math.sqrt(d_model / dims)

    def value_bits(self, x) -> Tensor:
        """The ±1 dims of the values themselves (no reciprocal): what the head predicts."""
        return {"binary": float64_bits, "onehot": base10.onehot, "bcd": base10.bcd}[self.layout](x)

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
        """Value dims (the first `bits`) -> float64; the reciprocal half is not needed.
        A NaN is neither a 1 nor a 0 bit: a row with NaN among its value dims decodes to NaN."""
        if encoding.dim() != 2 or encoding.shape[1] != self.width:
            raise ValueError(f"expected an encoding of shape [N, {self.width}], got {tuple(encoding.shape)}")
        value_bits = encoding[:, : self.bits]
        values = self.bits_to_values(value_bits)
        return torch.where(value_bits.detach().cpu().isnan().any(1), math.nan, values)

    def bits_to_values(self, bits: Tensor) -> Tensor:
        """Value dims or logits -> float64: a bit is 1 where > 0; a one-hot digit is its argmax."""
        return {"binary": bits_to_float64, "onehot": base10.onehot_to_float64, "bcd": base10.bcd_to_float64}[
            self.layout
        ](bits)

    def number_head(self, d_model: int) -> BitTokensHead:
        return BitTokensHead(self, d_model)


def unit_rms(v: Tensor) -> Tensor:
    """Each row divided by its own RMS (a zero row stays zero); computed in float32 or wider."""
    wide = v if v.dtype == torch.float64 else v.float()
    rms = wide.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(torch.finfo(torch.float32).tiny)
    return (wide / rms).to(v.dtype)


class BitTokensHead(NumberHead):
    """Joins the encoding to [NUM] by `combine`; predicts the value dims as logits (`head`):
    bits with the mean BCE over the bits (section 5), one-hot digits with the cross-entropy
    of each digit summed over the 21 digits (the authors' base-10 loss)."""

    def __init__(self, encoding: BitTokens, d_model: int):
        super().__init__(encoding, d_model)
        width, bits, combine, head = encoding.width, encoding.bits, encoding.combine, encoding.head_kind
        if combine in ("sum", "product", "concat", "zero_pad") and d_model < width:
            raise ValueError(
                f"combine={combine!r} pads the {width}-dim encoding to d_model, "
                f"so d_model must be >= {width}, got {d_model}"
            )
        if head == "none" and d_model < bits:
            raise ValueError(
                f"head='none' reads {bits} logits from the hidden state; d_model must be >= {bits}, got {d_model}"
            )
        if combine in ("weighted", "weighted_sum"):
            self.combine = nn.Linear(width, d_model, bias=False)
        if head == "linear":
            self.output = nn.Linear(d_model, bits)
        elif head == "mlp":
            hidden = int(d_model * encoding.mlp_hidden)
            if hidden < 1:
                raise ValueError(f"mlp_hidden={encoding.mlp_hidden} leaves no hidden unit at d_model={d_model}")
            self.output = nn.Sequential(nn.Linear(d_model, hidden), nn.ReLU(), nn.Linear(hidden, bits))

    def features(self, x) -> Tensor:
        return self.encoding.encode(x)

    def join(self, num_embedding: Tensor, features: Tensor) -> Tensor:
        enc = features.to(device=num_embedding.device, dtype=num_embedding.dtype)
        combine, width = self.encoding.combine, self.encoding.width
        if combine in ("weighted", "weighted_sum"):
            projected = self.combine(enc)
            return projected if combine == "weighted" else num_embedding + projected
        if combine == "concat":
            return torch.cat([enc, self.kept(num_embedding)], 1)
        pad = self.d_model - width
        if combine == "product":
            return num_embedding * F.pad(enc, (0, pad), value=1.0)
        padded = F.pad(enc, (0, pad))
        if combine == "sum":
            return num_embedding + padded
        return padded * self.encoding.zero_pad_scale(self.d_model)  # zero_pad: no [NUM] at all

    def kept(self, num_embedding: Tensor) -> Tensor:
        """concat's part of [NUM]: dims width…d, rescaled to unit RMS when concat_rescale."""
        kept = num_embedding[..., self.encoding.width :]
        return unit_rms(kept) if self.encoding.concat_rescale else kept

    def forward(self, hidden: Tensor) -> Tensor:
        """Logits of the value dims [N, bits] (the reciprocal is input only)."""
        if self.encoding.head_kind == "none":
            return hidden[..., : self.encoding.bits]
        return self.output(hidden)

    def loss_target(self, x) -> Tensor:
        """The 21 digits (onehot, int64) or the value bits as True/False."""
        if self.encoding.layout == "onehot":
            return base10.onehot_digits(x)
        return self.encoding.value_bits(x) > 0

    def loss_from(self, out: Tensor, wanted: Tensor) -> Tensor:
        """Per number [N]: mean BCE over the bits, or (onehot) the summed cross-entropy of the digits."""
        if self.encoding.layout == "onehot":
            logits = rearrange(out, "n (digit cls) -> n cls digit", cls=10)
            return F.cross_entropy(logits, wanted.to(out.device), reduction="none").sum(-1)
        target_bits = wanted.to(device=out.device, dtype=out.dtype)
        return F.binary_cross_entropy_with_logits(out, target_bits, reduction="none").mean(-1)

    def predict(self, out: Tensor) -> Tensor:
        """Bits: threshold the logits at 0 (sigmoid 0.5); digits: the argmax class. A row with a
        NaN logit (a broken model) is NaN, never a number."""
        logits = out.detach().float().cpu()
        return torch.where(logits.isnan().any(1), math.nan, self.encoding.bits_to_values(logits))

    def target_vector(self, x) -> Tensor:
        return self.encoding.value_bits(x).double()

    def output_of(self, vector: Tensor) -> Tensor:
        return vector.float()

    def embedding_map(self, num_embedding: Tensor) -> tuple[Tensor, Tensor]:
        """Every combination is affine in the encoding for a fixed [NUM] embedding e."""
        d, w, combine = self.d_model, self.encoding.width, self.encoding.combine
        e = num_embedding.detach().double().reshape(d)
        pad, zeros = torch.eye(d, w, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
        if combine == "sum":
            return pad, e
        if combine == "zero_pad":
            return pad * self.encoding.zero_pad_scale(d), zeros
        if combine == "concat":
            return pad, torch.cat([zeros[:w], self.kept(e)])
        if combine == "product":
            return pad * e[:, None], torch.cat([zeros[:w], e[w:]])
        weight = self.combine.weight.detach().double()
        return weight, (e if combine == "weighted_sum" else zeros)
