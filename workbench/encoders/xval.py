"""xVal: one learned [NUM] embedding multiplied by a scalar that stands for the number.

The paper rescales logarithmically so the whole task range fits in ±5 (section 6):
    s(x) = sign(x) · (log10|x| / 6 + 2.5)  for |x| >= 1e-14,  s = 0 otherwise.
[1e-14, 1e15] maps to ±[0.17, 5]; below 1e-14 everything is 0, and above 1e15 the scale leaves
±5, where normalization layers interfere (the paper's D4/D5 point). The head is an MLP
d -> 4d -> 1 trained with MSE on s(target); the prediction inverts the scaling.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import register
from .base import NumberEncoding, as_float64

SMALLEST = 1e-14


def scale(x: Tensor) -> Tensor:
    x = as_float64(x)
    magnitude = x.abs()
    s = torch.sign(x) * (torch.log10(magnitude.clamp(min=SMALLEST)) / 6 + 2.5)
    return torch.where(magnitude >= SMALLEST, s, torch.zeros_like(s))


def unscale(s: Tensor) -> Tensor:
    s = s.double()
    return torch.where(s == 0, torch.zeros_like(s), torch.sign(s) * 10 ** (6 * (s.abs() - 2.5)))


@register
class XVal(NumberEncoding):
    name = "xval"

    def __init__(self, d_model: int = 768):
        super().__init__(d_model)
        self.number_head = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                         nn.Linear(4 * d_model, 1))

    @property
    def width(self) -> int:
        return 1

    def encode(self, x) -> Tensor:
        return scale(x).unsqueeze(-1)

    def decode(self, encoding: Tensor) -> Tensor:
        return unscale(encoding.reshape(-1))

    def embed(self, num_embedding: Tensor, x: Tensor) -> Tensor:
        return num_embedding * self.encode(x).to(device=num_embedding.device, dtype=num_embedding.dtype)

    def head(self, hidden: Tensor) -> Tensor:
        return self.number_head(hidden).squeeze(-1)

    def loss(self, head_out: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(head_out.float(), scale(target).to(head_out.device, torch.float32))

    def predict(self, head_out: Tensor) -> Tensor:
        return unscale(head_out.detach().cpu())
