"""Base-10 layouts of a float64 for BitTokens' "changing the numeric base" ablation (D.3, Table 9).

Both write |x| = d1.d2…d17 × 10^E with the digits of the shortest round-trip decimal of x
(Python's repr: at most 17 significant digits, zero-filled to 17). The digits are exact, so
decoding gives every finite float64 back bit for bit, subnormals and -0.0 included.

"onehot" (the authors' layout, their `base10_embedding.py`): 21 decimal digits, each one-hot over
its 10 classes, ±1 (210 dims per value):
    sign (1 = non-negative, 0 = negative) | 3 digits of E + 500 | d1 … d17
+0.0 is [1 | 500 | 0…0] as in the authors' code; -0.0 gets sign 0 (theirs loses it). The authors'
format has no NaN or inf (their float arithmetic turns them into garbage digits, e.g. the
reciprocal of 0); ours reserves the biased exponent 999 as IEEE 754 reserves its all-ones
exponent: 999 with d = 0…0 is ±inf, 999 with d = 1 0…0 is NaN (payload not kept). Finite float64
never reach 999 (E + 500 lies in 176 … 808). Any other digits decode as the decimal they spell
(E + 500 > 808 overflows to ±inf, a d1 of 0 is just a smaller number); a sign digit other than 0
reads as non-negative, as in the authors' decoder.

"bcd" (this workbench's first base-10 variant): a binary-coded decimal analogue of IEEE 754, 84
bits per value: [negative, is_inf, is_nan] + 3 digits of |E| + 17 significand digits (4 bits
each, MSB first) + [E negative]. ±0 has all digits 0 and keeps its sign; NaN and inf set their
flag (digits 0).

Digits are exact integers from `decimal_parts`; the authors compute them in float64 arithmetic
(floor(log10|x|), |x| / 10^E), which can miss the last digits or the exponent near powers of 10.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor

from .base import as_float64
from .digits import decimal_parts

SIGNIFICAND = 17
EXPONENT_BIAS = 500
RESERVED_EXPONENT = 999  # biased exponent of inf and NaN (onehot)
ONEHOT_DIGITS = 1 + 3 + SIGNIFICAND  # sign, exponent, significand
ONEHOT_WIDTH = 10 * ONEHOT_DIGITS
BCD_WIDTH = 3 + 4 * 3 + 4 * SIGNIFICAND + 1  # flags, exponent digits, significand digits, exp sign

_POW10 = 10 ** np.arange(18, dtype=np.int64)
_DIGIT_BITS = ((torch.arange(16).unsqueeze(1) >> torch.arange(3, -1, -1)) & 1).float() * 2 - 1


def scientific(x: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(significand, exponent) int64 [N]: |x| = significand × 10^(exponent - 16) with exactly 17
    digits (d1 != 0) from the shortest decimal; (0, 0) for ±0 and for inf and NaN."""
    finite = torch.isfinite(x)
    m, q = decimal_parts(torch.where(finite, x, torch.zeros_like(x)))
    n_digits = (m[:, None] >= _POW10[None, :]).sum(1)  # digits of m (0 for m = 0)
    significand = m * _POW10[SIGNIFICAND - np.maximum(n_digits, 1)]
    return significand, np.where(m > 0, q + n_digits - 1, 0)


def _digits(values: np.ndarray, count: int) -> np.ndarray:
    """The last `count` decimal digits of each value, most significant first: int64 [N, count]."""
    return values[:, None] // _POW10[None, count - 1 :: -1] % 10


# -- onehot: the authors' 21 one-hot digits -----------------------------------------------------
@torch.compiler.disable  # NumPy digit arithmetic, run eagerly under torch.compile
def onehot_digits(x) -> Tensor:
    """float64 [N] -> the 21 digits of the onehot layout, int64 [N, 21]."""
    x = as_float64(x).detach().cpu()
    significand, exponent = scientific(x)
    nan, finite = x.isnan().numpy(), torch.isfinite(x).numpy()
    biased = np.where(finite, exponent + EXPONENT_BIAS, RESERVED_EXPONENT)
    significand = np.where(nan, _POW10[SIGNIFICAND - 1], significand)
    sign = np.where(torch.signbit(x).numpy(), 0, 1)
    return torch.from_numpy(np.concatenate([sign[:, None], _digits(biased, 3), _digits(significand, SIGNIFICAND)], 1))


def onehot(x) -> Tensor:
    """float64 [N] -> ±1 float32 [N, 210]: each digit one-hot over 10 classes."""
    return rearrange(F.one_hot(onehot_digits(x), 10).float() * 2 - 1, "n digit cls -> n (digit cls)")


def onehot_to_float64(scores: Tensor) -> Tensor:
    """[N, 210] one-hot encodings or digit logits -> float64 [N]: the argmax class of each digit."""
    if scores.shape[-1] != ONEHOT_WIDTH:
        raise ValueError(f"expected {ONEHOT_WIDTH} one-hot dims per value, got {tuple(scores.shape)}")
    digits = rearrange(scores.detach().cpu().float(), "... (digit cls) -> (...) digit cls", cls=10).argmax(-1)
    return digits_to_float64(digits.numpy())


def digits_to_float64(digits: np.ndarray) -> Tensor:
    """[N, 21] onehot-layout digits -> float64, correctly rounded from the decimal they spell."""
    d = np.asarray(digits, dtype=np.int64).reshape(-1, ONEHOT_DIGITS)
    biased = (d[:, 1:4] * _POW10[2::-1]).sum(1)
    significand = (d[:, 4:] * _POW10[SIGNIFICAND - 1 :: -1]).sum(1)
    out = []
    for sign, exp, sig in zip(d[:, 0].tolist(), biased.tolist(), significand.tolist()):
        if exp == RESERVED_EXPONENT:
            value = math.nan if sig else math.inf
        else:
            value = float(f"{sig}e{exp - EXPONENT_BIAS - SIGNIFICAND + 1}")
        out.append(-value if sign == 0 else value)
    return torch.tensor(out, dtype=torch.float64)


# -- bcd: binary-coded decimal ------------------------------------------------------------------
@torch.compiler.disable
def bcd(x) -> Tensor:
    """float64 [N] -> ±1 float32 [N, 84]: the binary-coded decimal layout of the module docstring."""
    x = as_float64(x).detach().cpu()
    significand, exponent = scientific(x)
    codes = torch.from_numpy(np.concatenate([_digits(np.abs(exponent), 3), _digits(significand, SIGNIFICAND)], 1))
    flags = (
        torch.stack([torch.signbit(x), torch.isinf(x), torch.isnan(x), torch.from_numpy(exponent < 0)], 1).float() * 2
        - 1
    )
    digit_bits = rearrange(_DIGIT_BITS[codes], "n digit bit -> n (digit bit)")
    return torch.cat([flags[:, :3], digit_bits, flags[:, 3:]], 1)


def bcd_to_float64(bits: Tensor) -> Tensor:
    """Inverse of bcd (any value > 0 is a 1; a 4-bit code above 9 reads as 9)."""
    if bits.shape[-1] != BCD_WIDTH:
        raise ValueError(f"expected {BCD_WIDTH} decimal bits per value, got {tuple(bits.shape)}")
    b = (bits.detach().cpu().reshape(-1, BCD_WIDTH) > 0).long()
    digit_bits = rearrange(b[:, 3:-1], "n (digit bit) -> n digit bit", bit=4)
    codes = (digit_bits * torch.tensor([8, 4, 2, 1])).sum(-1).clamp(max=9).numpy()
    exponent = (codes[:, :3] * _POW10[2::-1]).sum(1) * np.where(b[:, -1].numpy() == 1, -1, 1)
    significand = (codes[:, 3:] * _POW10[SIGNIFICAND - 1 :: -1]).sum(1)
    out = []
    for sig, exp, (negative, inf, nan) in zip(significand.tolist(), exponent.tolist(), b[:, :3].tolist()):
        value = math.nan if nan else math.inf if inf else float(f"{sig}e{exp - SIGNIFICAND + 1}")
        out.append(-value if negative and not nan else value)
    return torch.tensor(out, dtype=torch.float64)
