"""Log-scaled xVal (the variant of xVal that Zausinger et al., 2025, "Regress, don't guess", train
as their regression baseline; xVal: Golkar et al., 2023): one <|num|> token whose learned embedding
is multiplied by

    s(x) = sign(x) · log10(|x| + 1) / scale          decoded by   x = sign(s) · (10^(|s| · scale) - 1)

computed with log1p / expm1, so small |x| keep their digits. The +1 makes s continuous through 0
with the sign kept (s(0) = 0), unlike our xVal's offset. An MLP head d -> 4d -> 1 (GELU) predicts
the z-score (s - mean) / std of the target's s, trained with MSE; mean and std are those of every
target s seen in training steps so far (buffers, saved with the weights; frozen in eval mode and
when the output has no gradient), our stand-in for the training set's statistics, which the head
never sees.

Option `scale` (6: |x| up to 1e30, our tasks' range, stays within ±5, as this workbench's xVal).
What it can represent: every finite float64 down to ~1e-300, to ~1e-13 relative (decode is exact
up to float64 rounding of s); below, s itself underflows and subnormals come back as 0, and -0 as
0. inf and NaN are errors naming the encoding and the value.
"""
from __future__ import annotations

import math
from numbers import Real

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import register
from .base import NumberEncoding, NumberHead, as_float64

LN10 = math.log(10)


@register
class LogXVal(NumberEncoding):
    name = "log_xval"
    label = "xVal, log-scaled"

    def __init__(self, scale: float = 6.0):
        if isinstance(scale, bool) or not isinstance(scale, Real) or not 0 < scale < math.inf:
            raise ValueError(f"{self.name}: scale must be a finite number > 0, got {scale!r}")
        self.scale = float(scale)

    @property
    def width(self) -> int:
        return 1

    def encode(self, x) -> Tensor:
        x = as_float64(x).detach().cpu()
        bad = x[~torch.isfinite(x)]
        if len(bad):
            raise ValueError(f"{self.name} cannot encode {bad[0].item()!r}: only finite numbers have a scale")
        return (torch.sign(x) * torch.log1p(x.abs()) / (LN10 * self.scale)).unsqueeze(-1)

    def decode(self, encoding: Tensor) -> Tensor:
        if encoding.dim() != 2 or encoding.shape[1] != 1:
            raise ValueError(f"expected an encoding of shape [N, 1], got {tuple(encoding.shape)}")
        s = encoding[:, 0].detach().cpu().double()
        return torch.sign(s) * torch.expm1(s.abs() * (LN10 * self.scale))

    def number_head(self, d_model: int) -> LogXValHead:
        return LogXValHead(self, d_model)


class LogXValHead(NumberHead):
    """Scales the [NUM] embedding by s(x); an MLP regresses the z-scored s(target) (MSE)."""

    def __init__(self, encoding: LogXVal, d_model: int):
        super().__init__(encoding, d_model)
        self.output = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, 1))
        for name in ("count", "mean", "m2"):  # running statistics of the targets' s (Chan et al.)
            self.register_buffer(name, torch.zeros((), dtype=torch.float64))

    @property
    def std(self) -> Tensor:
        variance = self.m2 / self.count if self.count > 1 else torch.ones((), dtype=torch.float64)
        return variance.sqrt() if variance > 0 else torch.ones((), dtype=torch.float64)

    def embed(self, num_embedding: Tensor, x: Tensor) -> Tensor:
        return num_embedding * self.encoding.encode(x).to(device=num_embedding.device, dtype=num_embedding.dtype)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.output(hidden).squeeze(-1)

    @torch.no_grad()
    def observe(self, s: Tensor) -> None:
        """Merge a batch of targets' s into the running mean and variance."""
        s = s.to(self.mean.device, torch.float64)
        n, mean = len(s), s.mean()
        total = self.count + n
        delta = mean - self.mean
        self.m2 += ((s - mean) ** 2).sum() + delta ** 2 * self.count * n / total
        self.mean += delta * n / total
        self.count.fill_(total)

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        s = self.encoding.encode(target)[:, 0]
        if self.training and out.requires_grad:  # a training step; never a measurement of an ideal output
            self.observe(s)
        z = self.output_of(s[:, None])
        return F.mse_loss(out.float(), z.to(out.device), reduction="none")

    def predict(self, out: Tensor) -> Tensor:
        s = out.detach().cpu().double() * self.std.cpu() + self.mean.cpu()
        return self.encoding.decode(s[:, None])

    def target_vector(self, x) -> Tensor:
        return self.encoding.encode(x).double()

    def output_of(self, vector: Tensor) -> Tensor:
        return ((vector[:, 0].to(self.mean.device) - self.mean) / self.std).float()

    def ideal_output(self, x, confidence: float = 4.0) -> Tensor:
        """A regression head has no confidence to scale: the perfect output is the z-score itself."""
        return self.output_of(self.target_vector(x))

    def embedding_map(self, num_embedding: Tensor) -> tuple[Tensor, Tensor]:
        return num_embedding.double().reshape(self.d_model, 1), torch.zeros(self.d_model, dtype=torch.float64)
