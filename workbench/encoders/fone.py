"""FoNE (Fourier number embeddings): (cos, sin)(2π x / T) for the periods T = 10^i, i = -31 … 17.

Period 10^(k+1) reads the digit at place 10^k, so these 49 periods hold 17 integer and 32
fraction digits (98 dims), zero-padded and added to the [NUM] embedding. The minus sign stays
a text token (`signed = False`): FoNE encodes |x|.

Phases are computed from the shortest decimal of x, m · 10^q with an integer m of at most 17
digits: frac(x / 10^i) = (m mod 10^(i-q)) / 10^(i-q), exact integer arithmetic. Computing
x / 10^i in float64 instead (as the authors do) would turn every digit below float64's
precision into noise.

What it can carry: the digits of x >= 0 at places 10^-32 … 10^16 (its fixed m, n of the FoNE
paper). Anything else is a ValueError naming the encoding and the value, never another number:
x >= 1e17 (the phases would wrap around, |x| mod 10^17: 1e20 would read as 0), a digit below
10^-32 (1e-40 would read as 0), a negative x (the minus sign is a text token: pass |x|; -0 is 0),
inf and NaN. The paper's range, 1e-14 … 1e15 with up to 17 significant digits, lies inside. The
module function `phases` still computes the wrapped phases of any finite |x| (the locality
probes and figures read it). The heads read and predict |target| (their labels are the digits of
|target|), with the same range. decode reads phases, and the finest one still holds what lies
below 10^-32, so decode of any phases rounds to the nearest multiple of 10^-32 (half to even);
seventeen 9s before the point round up to 1e17 in float64, which the periods cannot hold, so
decode and predict give the largest float64 below it instead: what they return always encodes
again (a model's own number, fed back during generation, never fails). An encoding with NaN or
inf in a row decodes to NaN (it has no digits to read).

Options. Defaults follow the paper's text, where it is silent the authors' code
(KreitnerL/BitTokens, `fone_embedding.py`); the other behaviour is one option away.
  head           how the final hidden state h is read as 49 (cos, sin) pairs, each scored by dot
      product against the ten digit prototypes (cos, sin)(2π j / 10), trained with the
      cross-entropy averaged over the 49 digits, predicted as the argmax digit at each place:
      "layernorm" (default; section 4: "the final hidden state can directly be interpreted as a
      sinusoidal encoding", and the authors have no linear head): the first 98 dims of a
      learnable LayerNorm(h) (eps 1e-5; its weight and bias are 1-D, so they join the scalar
      optimizer group). "linear": a Linear(d_model -> 98) map (this workbench's earlier head).
  zero_features  False (default, the authors'; the text is silent): 0 (and -0) gets no features,
      an all-zero encoding, so its token is the [NUM] embedding alone. True: 0 gets phase 0,
      i.e. (1, 0) at every period (this workbench's earlier encoding). decode reads both as 0:
      atan2(0, 0) = 0 is phase 0, digit 0 everywhere. The head's target for 0 is the same under
      both choices: digit 0 at every place (prototype (1, 0)), as in the authors' digit labels;
      only the input side of 0 differs.
  digit_labels   the 49 digits the loss trains the head on: "exact" (default): the digits of the
      number (`digits_at`); a label is by definition the number's digit, so the text speaks.
      "float64" (the authors' `compute_num_loss`): round(|x| · 1e32) // 10^k % 10 in float64
      (`float64_digits`): places below float64's precision, and those divided by a 10^k that
      float64 lacks (k >= 23), come out of float rounding. 1 reads 1 at 10^0 but 9 at 10^-7
      (float64's 1e25 is 10000000000000000905969664, so 1e32 // 1e25 = 9999999) and noise below
      10^-16. Such labels follow no digit the model reads, so their cross-entropy cannot fall to
      0: a loss floor the exact labels lack (docs/fidelity.md measures both).
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

EXPONENTS = np.arange(-31, 18)  # period 10^i
PERIODS = len(EXPONENTS)
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_POW10_FLOAT = np.array([float(10**k) if k <= 308 else np.inf for k in range(400)])
HEADS = ("layernorm", "linear")
DIGIT_LABELS = ("exact", "float64")
_PROTOTYPES = torch.stack(
    [torch.cos(2 * math.pi * torch.arange(10) / 10), torch.sin(2 * math.pi * torch.arange(10) / 10)], 1
)  # [10, 2]


LARGEST = float(np.nextafter(1e17, 0))  # the largest float64 whose digits the periods hold
FINEST = -32  # the place of the finest period's digit, 10^-32


def check_range(x, name: str = "fone", sign: bool = True) -> Tensor:
    """x as float64, each value one the 49 periods hold exactly (module docstring); else a
    ValueError naming the encoding and the value. sign=False: check |x| (the heads' targets)."""
    x = as_float64(x).detach().cpu()
    bad = x[~torch.isfinite(x)]
    if len(bad):
        raise ValueError(f"{name} cannot encode {bad[0].item()!r}: only finite numbers have digits")
    if sign and (x < 0).any():
        raise ValueError(
            f"{name} cannot encode {x[x < 0][0].item()!r}: it encodes |x| (the minus sign is a text "
            "token, signed=False); pass the magnitude"
        )
    magnitude = x.abs()
    if (magnitude > LARGEST).any():
        raise ValueError(
            f"{name} cannot encode {x[magnitude > LARGEST][0].item()!r}: its periods hold the digits at "
            "places 10^-32 … 10^16, so 1e17 and more would wrap around (|x| mod 10^17)"
        )
    m, q = decimal_parts(magnitude)
    for k in np.flatnonzero((q < FINEST) & (m != 0)).tolist():
        if int(m[k]) % 10 ** (FINEST - int(q[k])):
            raise ValueError(
                f"{name} cannot encode {x[k].item()!r}: its finest period reads the digit at 10^-32, "
                "and this value has digits below it (they would be lost)"
            )
    return x


def phases(x: Tensor) -> np.ndarray:
    """frac(|x| / 10^i) for every period, float64 [N, 49], from exact integer arithmetic."""
    m, q = decimal_parts(x)
    shift = EXPONENTS[None, :] - q[:, None]  # i - q: how many of m's digits sit below the period
    kept = np.clip(shift, 0, 18)  # m < 10^17, so 10^18 keeps all of it
    remainder = m[:, None] % _POW10[kept]
    # 10^shift beyond float64 range (inf) gives phase 0: the true phase is below 1e-290
    return np.where(shift <= 0, 0.0, remainder / _POW10_FLOAT[np.clip(shift, 0, 399)])


def digits_at(x: Tensor) -> np.ndarray:
    """The decimal digit each period reads: digit at place 10^(i-1), int64 [N, 49]."""
    m, q = decimal_parts(x)
    shift = EXPONENTS[None, :] - q[:, None]
    below = np.clip(shift - 1, 0, 18)
    digit = (m[:, None] // _POW10[below]) % 10
    return np.where((shift >= 1) & (shift - 1 <= 17), digit, 0)


def float64_digits(x: Tensor) -> np.ndarray:
    """The authors' digit labels, computed in float64: digit k of round(|x| · 10^32), int64 [N, 49]
    in `digits_at`'s column order (column k reads place 10^(k-32))."""
    x = as_float64(x).detach().cpu()
    bad = x[~torch.isfinite(x)]
    if len(bad):
        raise ValueError(f"fone cannot label {bad[0].item()!r}: only finite numbers have digit labels")
    scaled = torch.round(x.abs() * 10.0**32)
    powers = torch.pow(10, torch.arange(PERIODS, dtype=torch.float64))
    return ((scaled.unsqueeze(1) // powers) % 10).long().numpy()


def digits_to_float64(digits: np.ndarray) -> Tensor:
    """Digits per period (column j reads place 10^(j-32)) -> float64, correctly rounded from
    the exact decimal: integer places 10^0…10^16 and two halves of 16 fraction places."""
    d = np.asarray(digits, dtype=np.int64).reshape(-1, PERIODS)
    integer = (d[:, 32:] * _POW10[:17]).sum(1)  # < 10^17, exact in int64
    high = (d[:, 16:32] * _POW10[:16]).sum(1)  # places 10^-1 … 10^-16
    low = (d[:, :16] * _POW10[:16]).sum(1)  # places 10^-17 … 10^-32
    text = (f"{i}.{h:016d}{lo:016d}" for i, h, lo in zip(integer.tolist(), high.tolist(), low.tolist()))
    # seventeen 9s before the point round up to 1e17, beyond the periods: the float64 below it
    return torch.tensor([float(t) for t in text], dtype=torch.float64).clamp(max=LARGEST)


@register
class FoNE(NumberEncoding):
    name = "fone"
    signed = False
    label = "FoNE"
    paper_label = "FoNE"
    paper_verdicts = {
        "D1": "pass",
        "D2": "pass",
        "D3": "pass",
        "D4": "pass",
        "D5": "pass",
        "D6": "pass",
        "D7": "pass",
        "D8": "pass",
        "D9": "fail",
    }

    def __init__(self, head: str = "layernorm", zero_features: bool = False, digit_labels: str = "exact"):
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        if not isinstance(zero_features, bool):
            raise ValueError(f"zero_features must be True or False, got {zero_features!r}")
        if digit_labels not in DIGIT_LABELS:
            raise ValueError(f"digit_labels must be one of {DIGIT_LABELS}, got {digit_labels!r}")
        self.head_kind, self.zero_features, self.digit_labels = head, zero_features, digit_labels

    @property
    def width(self) -> int:
        return 2 * PERIODS

    def encode(self, x) -> Tensor:
        x = check_range(x, self.name)
        angle = torch.from_numpy(2 * math.pi * phases(x))
        enc = rearrange([torch.cos(angle), torch.sin(angle)], "cs n period -> n (period cs)")
        if not self.zero_features:  # the authors' 0: no features at all
            enc[x == 0] = 0.0
        return enc

    def decode(self, encoding: Tensor) -> Tensor:
        """Digits from the finest period up: d = round(10·phase_i − r) mod 10, where r is the
        phase the digits already decoded below imply. Using r instead of the measured lower
        phase keeps a noisy all-zero place (phase 1 − ε) from reading as 9."""
        if encoding.dim() != 2 or encoding.shape[1] != self.width:
            raise ValueError(f"expected an encoding of shape [N, {self.width}], got {tuple(encoding.shape)}")
        pairs = rearrange(encoding.detach().cpu().double(), "n (period cs) -> n period cs", cs=2)
        readable = torch.isfinite(pairs).flatten(1).all(1)
        phase = (torch.atan2(pairs[..., 1], pairs[..., 0]) / (2 * math.pi)) % 1.0
        digits = torch.zeros(phase.shape, dtype=torch.long)
        below = torch.zeros(phase.shape[0], dtype=torch.float64)
        for j in range(PERIODS):
            digits[:, j] = torch.round(10 * phase[:, j] - below).long() % 10
            below = (digits[:, j] + below) / 10
        return torch.where(readable, digits_to_float64(digits.numpy()), math.nan)

    def number_head(self, d_model: int) -> FoNEHead:
        return FoNEHead(self, d_model)


class FoNEHead(NumberHead):
    """Adds the zero-padded encoding to [NUM]; reads 98 dims (`head`) whose (cos, sin) pairs are
    scored against the ten digit prototypes, trained with cross-entropy averaged over the digits."""

    def __init__(self, encoding: FoNE, d_model: int):
        super().__init__(encoding, d_model)
        if d_model < encoding.width:
            raise ValueError(f"FoNE adds a {encoding.width}-dim encoding; d_model must be >= {encoding.width}")
        if encoding.head_kind == "layernorm":
            self.norm = nn.LayerNorm(d_model, eps=1e-5)
        else:
            self.output = nn.Linear(d_model, encoding.width)
        # on the head's device: a copy from the host at every call would make the GPU wait for it
        self.register_buffer("prototypes", _PROTOTYPES.clone(), persistent=False)

    def features(self, x) -> Tensor:
        return self.encoding.encode(x)

    def join(self, num_embedding: Tensor, features: Tensor) -> Tensor:
        enc = features.to(device=num_embedding.device, dtype=num_embedding.dtype)
        return num_embedding + F.pad(enc, (0, self.d_model - self.encoding.width))

    def forward(self, hidden: Tensor) -> Tensor:
        """Digit logits [..., 49, 10]: each (cos, sin) slice against the ten prototypes."""
        if self.encoding.head_kind == "layernorm":
            read = self.norm(hidden)[..., : self.encoding.width]
        else:
            read = self.output(hidden)
        pairs = rearrange(read, "... (period cs) -> ... period cs", cs=2)
        return pairs @ self.prototypes.to(pairs.dtype).T

    def loss_target(self, x) -> Tensor:
        """The 49 digit labels of |x| (int64 [N, 49]): exact, or the authors' float64 ones (`digit_labels`)."""
        label = digits_at if self.encoding.digit_labels == "exact" else float64_digits
        return torch.from_numpy(label(check_range(x, self.encoding.name, sign=False).abs()))

    def loss_from(self, out: Tensor, wanted: Tensor) -> Tensor:
        """Cross-entropy of the digit logits against the 49 digits of |target|, mean over digits: [N]."""
        per_digit = F.cross_entropy(
            rearrange(out.float(), "n period digit -> n digit period"), wanted.to(out.device), reduction="none"
        )
        return per_digit.mean(-1)

    def predict(self, out: Tensor) -> Tensor:
        """The argmax digit at every place, assembled as an exact decimal, then rounded to float64;
        a row with a NaN logit is NaN."""
        logits = out.detach().cpu()
        values = digits_to_float64(logits.argmax(-1).numpy())
        return torch.where(logits.isnan().flatten(1).any(1), math.nan, values)

    def target_vector(self, x) -> Tensor:
        digits = torch.from_numpy(digits_at(check_range(x, self.encoding.name, sign=False).abs()))
        return rearrange(_PROTOTYPES.double()[digits], "n period cs -> n (period cs)")

    def output_of(self, vector: Tensor) -> Tensor:
        pairs = rearrange(vector, "n (period cs) -> n period cs", cs=2)
        return (pairs @ _PROTOTYPES.to(pairs).T).float()

    def embedding_map(self, num_embedding: Tensor) -> tuple[Tensor, Tensor]:
        return torch.eye(self.d_model, self.encoding.width, dtype=torch.float64), num_embedding.double()
