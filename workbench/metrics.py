"""Scores of the paper: log-sMAPE (eq. 1-2), exact match, list and interval accuracy, eq. 15.

All functions are elementwise over array-likes unless they reduce (generalized_mean, perplexity).
"""
from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Context, Decimal

import numpy as np

EPS = 1e-100
MAX_DIGITS = 15  # M of eq. 2


def smape(pred, target) -> np.ndarray:
    """Eq. 1: |p - t| / (|t| + |p| + eps), computed at half scale so huge values do not overflow."""
    p = np.asarray(pred, dtype=np.float64) / 2
    t = np.asarray(target, dtype=np.float64) / 2
    with np.errstate(invalid="ignore", over="ignore"):
        return np.abs(p - t) / (np.abs(t) + np.abs(p) + EPS / 2)


def log_smape(pred, target) -> np.ndarray:
    """Eq. 2: min(1, -log10(sMAPE + eps) / 15): the fraction of the 15 digits right before the
    first error. A NaN or infinite prediction scores 0."""
    s = smape(pred, target)
    score = np.minimum(1.0, -np.log10(s + EPS) / MAX_DIGITS)
    bad = ~np.isfinite(np.asarray(pred, dtype=np.float64)) | ~np.isfinite(score)
    return np.where(bad, 0.0, np.maximum(score, 0.0))


_ROUND15 = Context(prec=MAX_DIGITS, rounding=ROUND_HALF_EVEN)


def _digits15(x: float):
    if not math.isfinite(x):
        return None
    if x == 0:
        return (0, (0,), 0)
    d = _ROUND15.plus(Decimal(repr(x))).normalize()
    return d.as_tuple()


def exact_match(pred, target) -> np.ndarray:
    """Same sign, same decimal exponent and the same first 15 significant digits (both rounded
    half-to-even to 15 digits from their shortest decimal). NaN/inf never match."""
    p = np.atleast_1d(np.asarray(pred, dtype=np.float64))
    t = np.atleast_1d(np.asarray(target, dtype=np.float64))
    p, t = np.broadcast_arrays(p, t)
    out = np.fromiter(((a := _digits15(float(x))) is not None and a == _digits15(float(y))
                       for x, y in zip(p.ravel(), t.ravel())), dtype=bool, count=p.size)
    return out.reshape(p.shape)


def interval_accuracy(pred_letters, target_letters) -> np.ndarray:
    """Letter match after stripping spaces and case ("b" == "B")."""
    return np.array([str(p).strip().upper() == str(t).strip().upper()
                     for p, t in zip(pred_letters, target_letters)], dtype=bool)


def sorting_accuracy(pred_lists, target_lists) -> np.ndarray:
    """The whole list must be right: same length, every element equal as float64."""
    def same(p, t):
        return p is not None and len(p) == len(t) and all(float(a) == float(b) for a, b in zip(p, t))
    return np.array([same(p, t) for p, t in zip(pred_lists, target_lists)], dtype=bool)


def generalized_mean(performance, lam: float = -1.0, eps: float = 1e-6) -> float:
    """Eq. 15: ((1/|T|) sum (p + eps)^lam)^(1/lam); lam=-1 harmonic, 0 geometric, 1 arithmetic."""
    p = np.asarray(list(performance), dtype=np.float64) + eps
    if p.size == 0:
        raise ValueError("generalized_mean needs at least one task score")
    if np.any(p <= 0) or not np.all(np.isfinite(p)):
        raise ValueError(f"scores must be finite and > -eps, got {performance!r}")
    if lam == 0:
        return float(np.exp(np.mean(np.log(p))))
    return float(np.mean(p ** lam) ** (1.0 / lam))


def perplexity(mean_nll: float) -> float:
    """exp of the mean negative log-likelihood per token (natural log)."""
    return float(math.exp(mean_nll))
