"""Dynamic task balancing of appendix C.4: tasks the model is bad at get more of each minibatch.

Eq. 16, with performance p in [0, 1] per task, momentum alpha = 0.5 and lambda = -1 (harmonic):

    r_new = alpha * r_old + (1 - alpha) * (1 - p)^(1 - lambda) / sum_tasks (1 - p)^(1 - lambda)

lambda = 1 ignores performance (uniform target), lambda = 0 is proportional to the error,
lambda < 0 oversamples the weakest tasks more aggressively (Table 14). An optional cap r_max
(Table 15) limits any one task's share; the excess goes to the other tasks in proportion.
"""
from __future__ import annotations

import math

import numpy as np


def _as_ratios(ratios) -> np.ndarray:
    r = np.asarray(ratios, dtype=np.float64)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"ratios must be a non-empty 1-D sequence, got shape {r.shape}")
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError(f"ratios must be finite and >= 0, got {r}")
    if abs(r.sum() - 1.0) > 1e-6:
        raise ValueError(f"ratios must sum to 1, they sum to {r.sum()}")
    return r


def cap_ratios(ratios, max_ratio: float) -> np.ndarray:
    """Clip every ratio to max_ratio and hand the excess to the uncapped tasks in proportion."""
    r = _as_ratios(ratios).copy()
    if not 0 < max_ratio <= 1 or max_ratio * r.size < 1 - 1e-12:
        raise ValueError(f"max_ratio must be in (0, 1] and >= 1/n_tasks = {1 / r.size}, got {max_ratio}")
    capped = np.zeros(r.size, dtype=bool)
    while np.any(r[~capped] > max_ratio):
        capped |= r > max_ratio
        r[capped] = max_ratio
        free = ~capped
        rest = 1.0 - max_ratio * capped.sum()
        r[free] = r[free] / r[free].sum() * rest if r[free].sum() > 0 else rest / free.sum()
    return r


def update_ratios(ratios, performance, lam: float = -1.0, alpha: float = 0.5,
                  max_ratio: float | None = None) -> np.ndarray:
    """One step of eq. 16 (then the optional cap). All tasks perfect -> ratios kept unchanged."""
    r = _as_ratios(ratios)
    p = np.asarray(performance, dtype=np.float64)
    if p.shape != r.shape:
        raise ValueError(f"performance has shape {p.shape}, ratios {r.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError(f"performance must be in [0, 1], got {p}")
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if not math.isfinite(lam) or lam > 1:
        raise ValueError(f"lam must be <= 1 (lam > 1 would favour the best tasks), got {lam}")
    weight = (1.0 - p) ** (1.0 - lam)  # lam = 1: 0**0 = 1, performance-independent
    new = r if weight.sum() == 0 else alpha * r + (1 - alpha) * weight / weight.sum()
    return cap_ratios(new, max_ratio) if max_ratio is not None else new / new.sum()


class TaskBalancer:
    """Sampling ratio per task, starting uniform, updated by eq. 16 after each evaluation."""

    def __init__(self, tasks, lam: float = -1.0, alpha: float = 0.5, max_ratio: float | None = None):
        self.tasks = list(tasks)
        if not self.tasks or len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks must be non-empty and unique, got {self.tasks}")
        self.lam, self.alpha, self.max_ratio = lam, alpha, max_ratio
        start = np.full(len(self.tasks), 1 / len(self.tasks))
        self._ratios = cap_ratios(start, max_ratio) if max_ratio is not None else start

    @property
    def ratios(self) -> dict[str, float]:
        return dict(zip(self.tasks, self._ratios.tolist()))

    def update(self, performance: dict[str, float]) -> dict[str, float]:
        """Eq. 16 on the tasks in `performance`; tasks without a score keep their share."""
        unknown = set(performance) - set(self.tasks)
        if unknown:
            raise ValueError(f"performance for unknown tasks {sorted(unknown)}")
        idx = [i for i, t in enumerate(self.tasks) if t in performance]
        mass = self._ratios[idx].sum()
        if idx and mass > 0:
            sub = update_ratios(self._ratios[idx] / mass, [performance[self.tasks[i]] for i in idx],
                                self.lam, self.alpha)
            self._ratios[idx] = sub * mass
        if self.max_ratio is not None:
            self._ratios = cap_ratios(self._ratios / self._ratios.sum(), self.max_ratio)
        return self.ratios

    def task_counts(self, n: int) -> dict[str, int]:
        """Split n samples by the ratios (largest remainders), so counts sum to n exactly."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        exact = self._ratios * n
        counts = np.floor(exact).astype(int)
        counts[np.argsort(counts - exact, kind="stable")[: n - counts.sum()]] += 1
        return dict(zip(self.tasks, counts.tolist()))

    def state_dict(self) -> dict:
        return {"tasks": list(self.tasks), "ratios": self._ratios.tolist()}

    def load_state_dict(self, state: dict) -> None:
        if list(state.get("tasks", [])) != self.tasks:
            raise ValueError(f"checkpoint tasks {state.get('tasks')} differ from {self.tasks}")
        self._ratios = _as_ratios(state["ratios"]).copy()
        if self._ratios.size != len(self.tasks):
            raise ValueError("checkpoint ratios do not match the number of tasks")


class LossNormalizer:
    """Scale each task's loss to 10 after warm-up ("normalize all losses to 10 after warmup", C.4).

    Our reading: keep a bias-corrected running mean (EMA, beta) of each task's detached loss from
    the first step; during warm-up return the loss unchanged, after it return
    loss * 10 / running_mean, so every task contributes about 10 to the objective whatever its
    loss magnitude (cross-entropy vs MSE vs BCE) while its gradient direction stays the same.
    """

    def __init__(self, warmup_steps: int, target: float = 10.0, beta: float = 0.99):
        if warmup_steps < 0 or target <= 0 or not 0 <= beta < 1:
            raise ValueError(f"need warmup_steps >= 0, target > 0, 0 <= beta < 1; got "
                             f"{warmup_steps}, {target}, {beta}")
        self.warmup_steps, self.target, self.beta = warmup_steps, target, beta
        self.ema: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def __call__(self, task: str, loss, step: int):
        value = float(loss.detach())
        if not math.isfinite(value):
            raise ValueError(f"loss of task {task!r} is {value} at step {step}")
        self.ema[task] = self.beta * self.ema.get(task, 0.0) + (1 - self.beta) * value
        self.count[task] = self.count.get(task, 0) + 1
        mean = self.ema[task] / (1 - self.beta ** self.count[task])
        if step < self.warmup_steps or mean <= 0:
            return loss
        return loss * (self.target / mean)

    def state_dict(self) -> dict:
        return {"ema": dict(self.ema), "count": dict(self.count)}

    def load_state_dict(self, state: dict) -> None:
        self.ema, self.count = dict(state["ema"]), dict(state["count"])
