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

Options: `scale` (6: |x| up to 1e30, our tasks' range, stays within ±5, as this workbench's xVal),
`variant` ("ours", or "source": the authors' scale and head, below).
What it can represent: every finite float64 from `smallest` (the |x| whose s is float64's
smallest normal number: ~3.1e-307 at scale 6) up, and 0, to ~1e-13 relative (decode is exact up
to float64 rounding of s). A smaller nonzero |x| (subnormals, 5e-324) is a ValueError naming it:
its s would underflow and it would come back as 0 or worse. -0 comes back as 0. inf and NaN are
errors naming the encoding and the value. decode gives 0 for an s below the smallest normal, so
what it returns always encodes again (a model's own number, fed back during generation).

`variant="source"`: the authors' code (tum-ai/number-token-loss, `T5RegressionModelXval`, with
log_scale_embeddings as their config xval.yaml sets it), where it differs from ours:
  - the scale: s(x) = sign(x) · log10(|x| + 1) / (log10(V_MAX) / 10) with V_MAX = 3e9, i.e.
    `scale` = log10(3e9) / 10 ≈ 0.948, 6.33 times ours (|x| = 1e30 gives s ≈ 31.7, not 5);
  - the head: an MLP d -> 1024 -> 1 (GELU; their `dim_feedforward` default) that predicts x
    itself, trained with the MSE between the z-scores of prediction and target, the mean and
    the (unbiased) std + 1e-6 taken over the batch's predictions and targets together, with the
    gradient through them; the prediction is the output as it is;
  - the mixing: theirs is (CE + MSE) / 2 with both means; the head's loss weight is 1 (ours: C.1's
    10), so with `--loss separate_means` the loss is CE + MSE, theirs times 2, a constant factor
    the updates of Adam (but for its eps) and Muon do not see.
Not switched: their head's Xavier-uniform initialisation (ours: torch's default), and the
batch over which the statistics are taken: theirs is one device's batch, ours one micro-batch.
The z-score is computed in float64 (theirs in float32, whose squares overflow beyond |x| ~ 1e19,
inside our tasks' range). Ours is the default because every published run of this workbench was
trained with it; its s stays within ±5 over our tasks' range as our xVal's, and its head
predicts the logarithm s, with the same relative precision at every magnitude, where a head that
predicts x itself must regress values 30 decades apart with one float32 output.
"""

from __future__ import annotations

import math
from numbers import Real

import torch
import torch.nn.functional as F
from torch import Tensor

from . import register
from .base import NumberEncoding, RegressionHead, as_float64

LN10 = math.log(10)
TINY = torch.finfo(torch.float64).tiny  # float64's smallest normal number
VARIANTS = ("ours", "source")
SOURCE_SCALE = math.log10(3e9) / 10  # the authors' log10(V_MAX) / 10, V_MAX = 3e9
SOURCE_HEAD_WIDTH = 1024  # the authors' dim_feedforward default, whatever d_model
SOURCE_STD_EPS = 1e-6  # added to the std of the authors' per-batch z-score


@register
class LogXVal(NumberEncoding):
    name = "log_xval"
    label = "xVal, log-scaled"

    def __init__(self, scale: float = 6.0, variant: str = "ours"):
        if isinstance(scale, bool) or not isinstance(scale, Real) or not 0 < scale < math.inf:
            raise ValueError(f"{self.name}: scale must be a finite number > 0, got {scale!r}")
        if variant not in VARIANTS:
            raise ValueError(
                f"{self.name}: variant must be one of {VARIANTS} (source: the authors' scale and head), got {variant!r}"
            )
        if variant == "source" and scale != 6.0:
            raise ValueError(
                f"{self.name}: variant=source sets the authors' scale (log10(3e9) / 10); give no scale, "
                f"got scale={scale!r}"
            )
        self.variant = variant
        self.scale = SOURCE_SCALE if variant == "source" else float(scale)

    @property
    def width(self) -> int:
        return 1

    @property
    def smallest(self) -> float:
        """The smallest |x| > 0 it encodes: s(x) is then at least float64's smallest normal number."""
        return TINY * LN10 * self.scale

    def encode(self, x) -> Tensor:
        x = as_float64(x).detach().cpu()
        bad = x[~torch.isfinite(x)]
        if len(bad):
            raise ValueError(f"{self.name} cannot encode {bad[0].item()!r}: only finite numbers have a scale")
        s = torch.sign(x) * torch.log1p(x.abs()) / (LN10 * self.scale)
        small = (s.abs() < TINY) & (x != 0)
        if small.any():
            raise ValueError(
                f"{self.name} cannot encode {x[small][0].item()!r}: its scale s would underflow below "
                f"float64's normal numbers (|x| from {self.smallest:.3g} up, and 0, are encoded)"
            )
        return s.unsqueeze(-1)

    def decode(self, encoding: Tensor) -> Tensor:
        if encoding.dim() != 2 or encoding.shape[1] != 1:
            raise ValueError(f"expected an encoding of shape [N, 1], got {tuple(encoding.shape)}")
        s = encoding[:, 0].detach().cpu().double()
        s = torch.where(s.abs() < TINY, torch.zeros_like(s), s)  # no encode gives these: 0, as encode's 0
        return torch.sign(s) * torch.expm1(s.abs() * (LN10 * self.scale))

    def number_head(self, d_model: int) -> LogXValHead | SourceLogXValHead:
        return SourceLogXValHead(self, d_model) if self.variant == "source" else LogXValHead(self, d_model)


class LogXValHead(RegressionHead):
    """Scales the [NUM] embedding by s(x); an MLP regresses the z-scored s(target) (MSE)."""

    def __init__(self, encoding: LogXVal, d_model: int):
        super().__init__(encoding, d_model, hidden=4 * d_model)
        for name in ("count", "mean", "m2"):  # running statistics of the targets' s (Chan et al.)
            self.register_buffer(name, torch.zeros((), dtype=torch.float64))

    @property
    def std(self) -> Tensor:
        variance = self.m2 / self.count if self.count > 1 else torch.ones((), dtype=torch.float64)
        return variance.sqrt() if variance > 0 else torch.ones((), dtype=torch.float64)

    @torch.no_grad()
    def observe(self, s: Tensor) -> None:
        """Merge a batch of targets' s into the running mean and variance."""
        s = s.to(self.mean.device, torch.float64)
        n, mean = len(s), s.mean()
        total = self.count + n
        delta = mean - self.mean
        self.m2 += ((s - mean) ** 2).sum() + delta**2 * self.count * n / total
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

    def output_of(self, vector: Tensor) -> Tensor:
        return ((vector[:, 0].to(self.mean.device) - self.mean) / self.std).float()


class SourceLogXValHead(RegressionHead):
    """variant="source": scales the [NUM] embedding by s(x) as ours; an MLP d -> 1024 -> 1 predicts
    x itself, trained with the MSE of the z-scores over the batch's predictions and targets."""

    loss_weight = 1.0  # the authors' CE and MSE weigh alike (with --loss separate_means)

    def __init__(self, encoding: LogXVal, d_model: int):
        super().__init__(encoding, d_model, hidden=SOURCE_HEAD_WIDTH)

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        """Each number's squared difference of z-scores; their mean is the authors' MSE. The
        statistics are those of this batch's outputs and targets, float64 (see the module)."""
        x = as_float64(target)
        bad = x[~torch.isfinite(x)]
        if len(bad):
            raise ValueError(f"{self.encoding.name} cannot encode {bad[0].item()!r}: only finite numbers have a scale")
        if len(x) == 0:  # no number in the batch: no statistics, nothing to add (the head still ran)
            return out.float() * 0
        pred, x = out.double(), x.to(out.device)
        combined = torch.cat([pred, x])
        mean, std = combined.mean(), combined.std() + SOURCE_STD_EPS
        return ((pred - mean) / std - (x - mean) / std).square().float()

    def predict(self, out: Tensor) -> Tensor:
        return out.detach().cpu().double()

    def target_vector(self, x) -> Tensor:
        """x itself: the output this head is trained towards (its loss compares z-scores of both)."""
        return as_float64(x)[:, None]

    def output_of(self, vector: Tensor) -> Tensor:
        return vector[:, 0].float()
