"""Scores of the paper: log-sMAPE (eq. 1-2), exact match, list and interval accuracy, eq. 15.

The per-sample scores are elementwise over scalars, lists or arrays of real numbers: prediction
and target have the same shape, or one of them is a scalar (no other broadcasting: a [3, 1]
prediction against [3] targets would silently score 9 pairs). generalized_mean and perplexity
reduce. A prediction may be any real number (NaN, inf: it scores 0 / no match); a target must be
finite, because a score against a broken label would be meaningless. Complex or non-numeric
input is an error, never a number with its imaginary part dropped.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Context, Decimal
from numbers import Real

import numpy as np

EPS = 1e-100  # epsilon of eq. 1 and eq. 2
MAX_DIGITS = 15  # M of eq. 2: the most significant digits a task asks for


def _real(x, name: str) -> np.ndarray:
    try:
        a = np.asarray(x)
    except ValueError as error:  # ragged nesting
        raise ValueError(f"{name} must be real numbers in a regular array: {error}") from None
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be real numbers, got an array of dtype {a.dtype}")
    return a.astype(np.float64)


def _pred_target(pred, target) -> tuple[np.ndarray, np.ndarray]:
    p, t = _real(pred, "pred"), _real(target, "target")
    if p.shape != t.shape and p.ndim and t.ndim:
        raise ValueError(f"pred has shape {p.shape} but target {t.shape}: they must be equal (or one a scalar)")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"targets must be finite numbers, got {t[~np.isfinite(t)][:5]}")
    return np.broadcast_arrays(p, t)


def smape(pred, target) -> np.ndarray:
    """Eq. 1: |p - t| / (|t| + |p| + eps). Computed on halves so 1e308 - -1e308 cannot overflow
    (halving changes no ratio; it only flushes values below 1e-323, where eps dominates anyway)."""
    p, t = _pred_target(pred, target)
    with np.errstate(invalid="ignore", over="ignore"):  # a signalling NaN (decoded noise) warns on any arithmetic
        p, t = p / 2, t / 2
        return np.abs(p - t) / (np.abs(t) + np.abs(p) + EPS / 2)


def log_smape(pred, target) -> np.ndarray:
    """Eq. 2: min(1, -log10(sMAPE + eps) / 15), the fraction of the 15 digits that are right up
    to the first error. A NaN or infinite prediction scores 0."""
    s = smape(pred, target)
    with np.errstate(invalid="ignore"):
        score = np.minimum(1.0, -np.log10(s + EPS) / MAX_DIGITS)
    finite = np.isfinite(_real(pred, "pred")) & np.isfinite(score)
    return np.where(finite, np.maximum(score, 0.0), 0.0)  # maximum: -0.0 -> 0.0 when p = -t


_ROUND = Context(prec=MAX_DIGITS, rounding=ROUND_HALF_EVEN)


def _first_digits(x: float):
    """(sign, digits, exponent) of x rounded half-to-even to 15 significant digits from its
    shortest decimal (repr): what a 15-digit answer writes. Zero is (0, (0,), 0) for both signs."""
    if x == 0:
        return (0, (0,), 0)
    return _ROUND.plus(Decimal(repr(x))).normalize().as_tuple()


def exact_match(pred, target) -> np.ndarray:
    """Same sign, same decimal exponent and the same first 15 significant digits. NaN/inf
    predictions never match. Always at least 1-D (a scalar pair gives shape [1])."""
    p, t = (np.atleast_1d(a) for a in _pred_target(pred, target))
    out = np.array(
        [
            math.isfinite(a) and _first_digits(a) == _first_digits(b)
            for a, b in zip(p.ravel().tolist(), t.ravel().tolist())
        ],
        dtype=bool,
    )
    return out.reshape(p.shape)


def _pairs(preds, targets, what: str) -> list:
    preds, targets = list(preds), list(targets)
    if len(preds) != len(targets):
        raise ValueError(f"{len(preds)} predicted {what} but {len(targets)} targets")
    return list(zip(preds, targets))


def interval_accuracy(pred_letters, target_letters) -> np.ndarray:
    """Exact letter match ("B" == " B "; "b" != "B", the answer is a capital letter A-F)."""
    return np.array(
        [
            p is not None and str(p).strip() == str(t).strip()
            for p, t in _pairs(pred_letters, target_letters, "letters")
        ],
        dtype=bool,
    )


def sorting_accuracy(pred_lists, target_lists) -> np.ndarray:
    """The whole list must be right: same length and every element equal as float64."""

    def same(p, t):
        return p is not None and len(p) == len(t) and all(float(a) == float(b) for a, b in zip(p, t))

    return np.array([same(p, t) for p, t in _pairs(pred_lists, target_lists, "lists")], dtype=bool)


def generalized_mean(performance, lam: float = -1.0, eps: float = 1e-6) -> float:
    """Eq. 15: ((1/|T|) sum_T (p + eps)^lam)^(1/lam) - eps. lam=-1 harmonic (the paper's choice:
    weak tasks pull hardest), lam=0 geometric (the limit lam -> 0), lam=1 arithmetic.

    eps keeps a score of 0 from sending the harmonic and geometric means to 0 (every other
    task's score would then count for nothing); it is taken off again afterwards, so that the
    mean of scores lies between the lowest and the highest of them: eq. 15 as printed gives
    1.000001 for perfect scores. A shift by a constant, it ranks evaluations, and so chooses the
    best checkpoint, as eq. 15 as printed does (but for differences within the last bit). The
    result is kept within the scores' range against that last bit of rounding."""
    for name, value in (("lam", lam), ("eps", eps)):
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    scores = _real(list(performance), "performance")
    p = scores + eps
    if p.size == 0:
        raise ValueError("generalized_mean needs at least one task score")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or (lam <= 0 and np.any(p == 0)):
        raise ValueError(f"scores + eps must be finite and > 0 (>= 0 for lam > 0), got {p}")
    shifted = np.exp(np.mean(np.log(p))) if lam == 0 else np.mean(p**lam) ** (1.0 / lam)
    return float(np.clip(shifted - eps, scores.min(), scores.max()))


def perplexity(mean_nll: float) -> float:
    """exp of the mean negative log-likelihood per token (natural log); inf if it overflows."""
    mean_nll = float(mean_nll)
    if math.isnan(mean_nll) or mean_nll < 0:
        raise ValueError(f"a mean negative log-likelihood is a number >= 0, got {mean_nll}")
    return math.exp(mean_nll) if mean_nll < 709 else math.inf
