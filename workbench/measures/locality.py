"""Section 4 measured: FoNE adds locally (Lemma 4.2) but must look far to multiply (Prop. 4.3).

Lemma 4.2: F(x + y) = F(x) ⊙ F(y) for the complex form F(x) = exp(2πi x / 10^φ).
Proposition 4.3: with P distinguishable states per component, the operator that produces output
frequency φ of F(x·y) must read ≥ ceil(log_P |X|) components of each input. Two probes:
  (a) exact: conditional entropy H(output component | input components in a window of width w)
      over every pair of a grid of D-digit integers, components quantized to P states;
  (b) learned: a small MLP sees only a window of w input components and predicts one output
      component, for FoNE, log-FoNE (FoNE of log10 x) and BitTokens bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..encoders import fone
from ..encoders.bittokens import float64_bits

OPS = {"add": np.add, "mul": np.multiply}


# -- Lemma 4.2 -------------------------------------------------------------------------------
def complex_fone(phases: np.ndarray) -> np.ndarray:
    """Phases (fractions of a turn) [N, k] -> points on the torus exp(2πi θ) [N, k]."""
    return np.exp(2j * np.pi * phases)


def homomorphism_error(n: int = 1_000, seed: int = 0, digits: int = 6) -> pd.DataFrame:
    """max_x,y |F(x + y) - F(x) ⊙ F(y)| per period 10^φ, for random decimals with `digits`
    fraction digits: from exact phases (fone.phases), from the float32 encoding, and the same
    test for multiplication, F(x·y) vs F(x) ⊙ F(y), which has no such rule."""
    if n < 1 or not 1 <= digits <= 8:
        raise ValueError(f"need n >= 1 and 1 <= digits <= 8, got {n}, {digits}")
    rng = np.random.default_rng(seed)
    scale = 10**digits
    a, b = rng.integers(0, 10 ** (digits + 4), (2, n))
    x, y = a / scale, b / scale  # exact decimals with `digits` fraction digits, < 10^4
    s = np.array([float(Fraction(int(i) + int(j), scale)) for i, j in zip(a, b)])
    p = np.array([float(Fraction(int(i) * int(j), scale * scale)) for i, j in zip(a, b)])
    Fx, Fy, Fs, Fp = (complex_fone(fone.phases(torch.from_numpy(v))) for v in (x, y, s, p))
    codec = fone.FoNE()
    enc = [codec.encode(torch.from_numpy(v)).double().numpy().reshape(n, -1, 2) for v in (x, y, s)]
    ex, ey, es = (e[..., 0] + 1j * e[..., 1] for e in enc)
    return pd.DataFrame(
        dict(
            period_exponent=fone.EXPONENTS,
            add_exact_phases=np.abs(Fs - Fx * Fy).max(0),
            add_float32_encoding=np.abs(es - ex * ey).max(0),
            mul_exact_phases=np.abs(Fp - Fx * Fy).max(0),
        )
    )


# -- Proposition 4.3 (a): conditional entropy on an exhaustive grid ---------------------------
def quantized_phase(values: np.ndarray, exponent: int, P: int) -> np.ndarray:
    """floor(P · frac(v / 10^exponent)) for non-negative integers v (exact integer arithmetic)."""
    v = np.asarray(values, dtype=np.int64)
    if exponent < 0:
        raise ValueError("integer grids need exponent >= 0")
    return ((v % 10**exponent) * P) // 10**exponent


def entropy_bits(labels: np.ndarray, given: np.ndarray) -> float:
    """H(labels | given) in bits, from counts (both non-negative integer arrays)."""
    _, g = np.unique(given, return_inverse=True)
    joint = g.astype(np.int64) * (int(labels.max()) + 1) + labels
    _, joint_counts = np.unique(joint, return_counts=True)
    _, given_counts = np.unique(g, return_counts=True)
    n = len(labels)
    return float(
        -(joint_counts * np.log2(joint_counts / n)).sum() / n + (given_counts * np.log2(given_counts / n)).sum() / n
    )


def window_entropy(digits: int = 3, P: int = 10, ops=("add", "mul")) -> pd.DataFrame:
    """For every pair of integers 0 ≤ x, y < 10^digits: H(output component φ of x op y |
    components of x and y in the best contiguous window of w input periods), for every φ, w.

    Components: periods 10^1 … 10^digits for the inputs (the others are constant on the grid),
    10^1 … 10^(2·digits) for the result, each quantized to P states."""
    if not 1 <= digits <= 3 or P < 2:
        raise ValueError(f"need 1 <= digits <= 3 and P >= 2, got {digits}, {P}")
    grid = np.arange(10**digits, dtype=np.int64)
    x, y = (g.ravel() for g in np.meshgrid(grid, grid, indexing="ij"))
    inputs = range(1, digits + 1)
    qx = {e: quantized_phase(x, e, P) for e in inputs}
    qy = {e: quantized_phase(y, e, P) for e in inputs}
    rows = []
    for op in ops:
        z = OPS[op](x, y)
        outputs = [e for e in range(1, 2 * digits + 1) if len(np.unique(quantized_phase(z, e, P))) > 1]
        for w in range(1, digits + 1):
            for start in range(1, digits - w + 2):
                key = np.zeros(len(x), dtype=np.int64)
                for e in range(start, start + w):
                    key = (key * P + qx[e]) * P + qy[e]
                for e_out in outputs:
                    rows.append(
                        dict(
                            op=op,
                            output_period=e_out,
                            width=w,
                            window_start=start,
                            entropy=entropy_bits(quantized_phase(z, e_out, P), key),
                        )
                    )
    df = pd.DataFrame(rows)
    best = df.groupby(["op", "output_period", "width"], as_index=False)["entropy"].min()
    best["pigeonhole_bound"] = math.ceil(math.log(10**digits, P))
    return best


def width_needed(best: pd.DataFrame, tol: float = 1e-9) -> pd.DataFrame:
    """Smallest window width at which H reaches 0, per op and output period."""
    rows = []
    for (op, e), g in best.groupby(["op", "output_period"]):
        zero = g[g["entropy"] <= tol]["width"]
        rows.append(
            dict(
                op=op,
                output_period=e,
                width_needed=int(zero.min()) if len(zero) else None,
                entropy_at_width_1=float(g[g["width"] == 1]["entropy"].iloc[0]),
            )
        )
    return pd.DataFrame(rows)


# -- Proposition 4.3 (b): learned probes on windows ------------------------------------------
def _fone_of(transform):
    """FoNE probe of transform(v): components (cos, sin) per period 10^φ, targets the digit a
    period reads."""

    def components(v):
        angle = 2 * np.pi * fone.phases(transform(v))
        return np.stack([np.cos(angle), np.sin(angle)], -1), fone.EXPONENTS.copy()

    def target(v, position):
        return fone.digits_at(transform(v))[:, int(np.flatnonzero(fone.EXPONENTS == position)[0])]

    return components, target


def _bits_components(v):
    return float64_bits(v).numpy()[..., None], np.arange(64)


def _bit_target(v, position):
    return (float64_bits(v).numpy()[:, position] > 0).astype(np.int64)


class Probe(NamedTuple):
    """A probe encoding: its components [N, k, c] and the position of each, the class of one output
    component, the registered encoding it reads and what of it (for its display name)."""

    components: Callable
    target: Callable
    encoding: str
    reads: str = ""


PROBES = {
    "fone": Probe(*_fone_of(lambda v: v), "fone"),
    "log_fone": Probe(*_fone_of(torch.log10), "fone", " of log10 x"),
    "bittokens": Probe(_bits_components, _bit_target, "bittokens", " bits"),
}


def _probe(encoding: str):
    if encoding not in PROBES:
        raise ValueError(f"unknown probe encoding {encoding!r}; choose one of {list(PROBES)}")
    return PROBES[encoding]


def features(encoding: str, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Components [N, k, c] of an encoding and the position of each component (for windows):
    fone: (cos, sin) per period 10^φ; log_fone: the same of log10 v; bittokens: the 64 bits."""
    return _probe(encoding).components(torch.from_numpy(np.asarray(values, dtype=np.float64)))


def target_component(encoding: str, values: np.ndarray, position: int) -> np.ndarray:
    """The class of one output component: the digit a FoNE period reads, or one bit."""
    return _probe(encoding).target(torch.from_numpy(np.asarray(values, dtype=np.float64)), position)


# Output component probed per encoding: a middle digit / bit of the result of 2-3 digit operands.
PROBE_OUTPUT = {"fone": 3, "log_fone": -2, "bittokens": 12 + 8}


def probe_windows(
    encodings=("fone", "log_fone", "bittokens"),
    ops=("add", "mul"),
    widths=(1, 2, 4, 8, 64),
    n_train: int = 4_000,
    n_test: int = 1_000,
    steps: int = 300,
    hidden: int = 128,
    seed: int = 0,
    digits: int = 3,
) -> pd.DataFrame:
    """Held-out accuracy of an MLP that sees only the w input components nearest to the output
    component (of both x and y), for integer operands 1 ≤ x, y < 10^digits."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 10**digits, n_train + n_test).astype(np.float64)
    y = rng.integers(1, 10**digits, n_train + n_test).astype(np.float64)
    rows = []
    for name in encodings:
        fx, position = features(name, x)
        fy, _ = features(name, y)
        out_pos = PROBE_OUTPUT[name]
        order = np.argsort(np.abs(position - out_pos) + 0.1 * (position > out_pos), kind="stable")
        for op in ops:
            label = target_component(name, OPS[op](x, y), out_pos)
            classes = int(label.max()) + 1
            baseline = np.bincount(label[n_train:]).max() / n_test
            for w in widths:
                window = np.sort(order[: min(w, len(position))])
                inp = torch.from_numpy(
                    np.concatenate([fx[:, window].reshape(len(x), -1), fy[:, window].reshape(len(y), -1)], 1)
                ).float()
                acc = _train_probe(inp, torch.from_numpy(label), classes, n_train, steps, hidden, seed)
                rows.append(
                    dict(
                        encoding=name,
                        op=op,
                        output_component=out_pos,
                        width=len(window),
                        accuracy=acc,
                        majority_baseline=float(baseline),
                    )
                )
    return pd.DataFrame(rows)


def _train_probe(inp, label, classes, n_train, steps, hidden, seed) -> float:
    torch.manual_seed(seed)
    mlp = nn.Sequential(
        nn.Linear(inp.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes)
    )
    opt = torch.optim.Adam(mlp.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, n_train, (256,), generator=gen)
        loss = nn.functional.cross_entropy(mlp(inp[idx]), label[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return float((mlp(inp[n_train:]).argmax(1) == label[n_train:]).float().mean())
