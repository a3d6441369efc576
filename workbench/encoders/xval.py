"""xVal: one learned [NUM] embedding multiplied by a scalar that stands for the number.

The BitTokens paper rescales logarithmically so the task range fits in ±5 (section 6); the
authors' code (`xVal_embedding.py`) writes it with an offset inside the logarithm:
    s(x) = sign(x) · (log10(|x| + offset) / 6 + 2.5)  for |x| >= 1e-14,  s = 0 otherwise,
    decode: ŝ -> sign(ŝ) · (10^(6 (|ŝ| - 2.5)) - offset)  for |ŝ| >= s(1e-14),  0 otherwise.
Option `offset`: 1e-14 (default, the authors'; the text gives only "logarithmic rescale to
[-5, 5]"), so s(1e-14) = log10(2e-14) / 6 + 2.5 ≈ 0.217 is the smallest scale and the decode
threshold. offset=0 is this workbench's earlier formula, s(x) = sign(x) · (log10|x| / 6 + 2.5),
decoded with its own s(1e-14) = 1/6 as the threshold (below it the earlier decode gave magnitudes
under 1e-14, which no encode gives). (The authors also clamp |x| to 1e15 before scaling; we do not, see below.)

What the scaling can and cannot represent (the paper's D4 point):
  - 1e-14 <= |x| <= 1e15 maps to ±[s(1e-14), 5], one-to-one; decode inverts it up to float64
    rounding of s (relative error ~1e-14, not bit-exact: s carries log10|x| with an absolute
    precision of ~1e-16, which spends most of float64's digits on the exponent).
  - 0 < |x| < 1e-14 is a ValueError naming the value (the authors' code maps all of them to 0,
    sign and value lost). The cut-off is needed: for |x| < 1e-15 the bracket is negative, so a
    tiny positive x would land on the scale of a negative number (s(1e-20) = s(-1e-10) = -5/6
    without offset): the sign would be ambiguous. 0 (and -0) is s = 0.
  - |x| > 1e15 is still invertible but leaves ±5, where normalization layers squash it (D5).
    Up to float64's largest number (relative error up to ~1e-13 there): float rounding of s
    could push the largest floats past it (to inf), so decode keeps every s up to s(max) finite.
  - inf and NaN have no scale: encode and loss raise ValueError naming the value. decode of NaN
    is NaN, and an s beyond s(max) (a head output out of range) decodes to ±inf.
  - decode (a head's output, any s) gives 0 below the threshold s(1e-14) (with either offset)
    and at least 1e-14 above it, so a model's own number, fed back during generation, encodes.
  - The head's output is float32, as every model's output is: an ideal head (`ideal_output`,
    the desiderata's D7/D8) carries s to float32's ~6e-8, so its predictions are exact to about
    1e-6 relative (6 ln 10 |s| times that), not the encoding's ~1e-14.
The head is an MLP d -> head_width -> 1 (GELU) trained with MSE on s(target); the prediction is
s^-1 of the head output. Option `head_width`: 3072 (default, the authors' fixed
`dim_feedforward`; the text gives no width), or 0 for 4·d (this workbench's earlier head). The two
agree at the paper's d = 768; at cpu-tiny (d = 128) they are 3072 and 512.
"""

from __future__ import annotations

import math
from numbers import Real

import torch
import torch.nn.functional as F
from torch import Tensor

from . import register
from .base import NumberEncoding, RegressionHead, as_float64

SMALLEST = 1e-14
LARGEST = torch.finfo(torch.float64).max
OFFSET = 1e-14  # the authors' offset inside the logarithm
HEAD_WIDTH = 3072  # the authors' hidden width of the head, whatever d_model
# The widest head taken: twice the MLP width of the largest models' blocks. A crafted saved
# folder asking for 10^9 would otherwise fail deep in the allocator, or succeed and swap.
MAX_HEAD_WIDTH = 65_536


def scale(x, offset: float = OFFSET) -> Tensor:
    """s(x) of the module docstring, float64; a ValueError names a value it cannot scale."""
    x = as_float64(x).detach()
    bad = x[~torch.isfinite(x)]
    if len(bad):
        raise ValueError(f"xval cannot encode {bad[0].item()!r}: only finite numbers have a scale")
    magnitude = x.abs()
    small = (magnitude < SMALLEST) & (magnitude > 0)
    if small.any():
        raise ValueError(
            f"xval cannot encode {x[small][0].item()!r}: its scale holds magnitudes from 1e-14 up "
            "(and 0); smaller ones would all read as 0, their sign ambiguous (see xval.py)"
        )
    s = torch.sign(x) * (torch.log10(magnitude.clamp(min=SMALLEST) + offset) / 6 + 2.5)
    return torch.where(magnitude >= SMALLEST, s, torch.zeros_like(s))


def unscale(s: Tensor, offset: float = OFFSET) -> Tensor:
    """s^-1: sign(s) · (10^(6 (|s| - 2.5)) - offset) where |s| >= the threshold s(SMALLEST), else
    0; finite up to s(LARGEST). Never a magnitude below SMALLEST but 0 (what encode takes)."""
    s = s.detach().double()
    magnitude = 10 ** (6 * (s.abs() - 2.5)) - offset
    magnitude = torch.where(s.abs() <= _largest_scale(offset), magnitude.clamp(max=LARGEST), magnitude)
    magnitude = magnitude.clamp(min=SMALLEST)  # float rounding at the threshold could dip below it
    threshold = float(scale(SMALLEST, offset))
    return torch.where((s.abs() < threshold) | (s == 0), torch.zeros_like(s), torch.sign(s) * magnitude)


def _largest_scale(offset: float) -> float:
    """s of the largest float64: every encode(x) is at most this."""
    return float(scale(LARGEST, offset))


@register
class XVal(NumberEncoding):
    name = "xval"
    label = "xVal"
    paper_label = "xVal"
    paper_verdicts = {
        "D1": "pass",
        "D2": "pass",
        "D3": "pass",
        "D4": "fail",
        "D5": "pass",
        "D6": "fail",
        "D7": "pass",
        "D8": "pass",
        "D9": "fail",
    }

    def __init__(self, offset: float = OFFSET, head_width: int = HEAD_WIDTH):
        if isinstance(offset, bool) or not isinstance(offset, Real) or not 0 <= offset < math.inf:
            raise ValueError(f"offset must be a finite number >= 0 (1e-14: the authors', 0: none), got {offset!r}")
        if isinstance(head_width, bool) or not isinstance(head_width, int) or not 0 <= head_width <= MAX_HEAD_WIDTH:
            raise ValueError(
                f"head_width must be an integer from 0 to {MAX_HEAD_WIDTH:,} (3072: the authors', 0: 4 x d_model), "
                f"got {head_width!r}"
            )
        self.offset, self.head_width = float(offset), head_width

    @property
    def width(self) -> int:
        return 1

    def encode(self, x) -> Tensor:
        return scale(x, self.offset).unsqueeze(-1)

    def decode(self, encoding: Tensor) -> Tensor:
        if encoding.dim() != 2 or encoding.shape[1] != 1:
            raise ValueError(f"expected an encoding of shape [N, 1], got {tuple(encoding.shape)}")
        return unscale(encoding.reshape(-1), self.offset)

    def number_head(self, d_model: int) -> XValHead:
        return XValHead(self, d_model)


class XValHead(RegressionHead):
    """Scales the [NUM] embedding by s(x); an MLP d -> head_width -> 1 (GELU) regresses s(target) (MSE)."""

    def __init__(self, encoding: XVal, d_model: int):
        super().__init__(encoding, d_model, hidden=encoding.head_width or 4 * d_model)

    def loss_target(self, x) -> Tensor:
        """s(x), float64 [N]."""
        return scale(x, self.encoding.offset)

    def loss_from(self, out: Tensor, wanted: Tensor) -> Tensor:
        return F.mse_loss(out.float(), wanted.to(out.device, torch.float32), reduction="none")

    def predict(self, out: Tensor) -> Tensor:
        return unscale(out.cpu(), self.encoding.offset)

    def output_of(self, vector: Tensor) -> Tensor:
        return vector[:, 0].float()
