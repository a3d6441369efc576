"""Multi-task learning of appendix C.4: task balancing (eq. 16) and loss normalisation.

Eq. 16, with performance p in [0, 1] per task, momentum alpha = 0.5 and lambda = -1 (harmonic):

    r_new = alpha * r_old + (1 - alpha) * (1 - p)^(1 - lambda) / sum_tasks (1 - p)^(1 - lambda)

lambda = 1 ignores performance (uniform target), lambda = 0 is proportional to the error,
lambda < 0 oversamples the weakest tasks more aggressively (Table 14). (1 - p) is bounded below by
`floor` (the authors' 0.01; the text is silent), so a solved task keeps a share. An optional cap
r_max (Table 15) limits any one task's share; the excess goes to the other tasks in proportion. The
authors cap eq. 16's target before the momentum mix (`cap="target"`, the default); capping the
mixed ratios instead (`cap="ratios"`) gives other shares (up to 0.12 apart at r_max = 0.3).

`LossNormalizer`: "we normalize all losses to 10 after warmup" (C.4), as the authors' code does it.
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


CAPS = ("target", "ratios")  # what r_max bounds: eq. 16's target before the mix (the authors'), or the mix


def update_ratios(
    ratios,
    performance,
    lam: float = -1.0,
    alpha: float = 0.5,
    max_ratio: float | None = None,
    floor: float = 0.0,
    cap: str = "target",
) -> np.ndarray:
    """One step of eq. 16 with (1 - p) bounded below by `floor` and the optional cap r_max on the
    target before the momentum mix (cap="target") or on the mixed ratios (cap="ratios"). All tasks
    perfect with floor 0 -> ratios kept unchanged."""
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
    if not 0 <= floor < 1:
        raise ValueError(f"floor must be in [0, 1), got {floor}")
    if cap not in CAPS:
        raise ValueError(f"cap must be one of {CAPS}, got {cap!r}")
    weight = np.maximum(1.0 - p, floor) ** (1.0 - lam)  # lam = 1: 0**0 = 1, performance-independent
    if weight.sum() == 0:
        return cap_ratios(r, max_ratio) if max_ratio is not None else r / r.sum()
    target = weight / weight.sum()
    if max_ratio is not None and cap == "target":
        return alpha * cap_ratios(r, max_ratio) + (1 - alpha) * cap_ratios(
            target, max_ratio
        )  # r: capped already in use
    new = alpha * r + (1 - alpha) * target
    return cap_ratios(new, max_ratio) if max_ratio is not None else new / new.sum()


class TaskBalancer:
    """Sampling ratio per task, starting uniform, updated by eq. 16 after each evaluation."""

    def __init__(
        self,
        tasks,
        lam: float = -1.0,
        alpha: float = 0.5,
        max_ratio: float | None = None,
        floor: float = 0.0,
        cap: str = "target",
    ):
        self.tasks = list(tasks)
        if not self.tasks or len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks must be non-empty and unique, got {self.tasks}")
        if cap not in CAPS:
            raise ValueError(f"cap must be one of {CAPS}, got {cap!r}")
        self.lam, self.alpha, self.max_ratio, self.floor, self.cap = lam, alpha, max_ratio, floor, cap
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
        if idx and mass > 0 and len(idx) == len(self.tasks):
            self._ratios = update_ratios(
                self._ratios,
                [performance[t] for t in self.tasks],
                self.lam,
                self.alpha,
                self.max_ratio,
                self.floor,
                self.cap,
            )
        elif idx and mass > 0:  # the unscored tasks keep their shares; the cap then bounds the whole
            sub = update_ratios(
                self._ratios[idx] / mass,
                [performance[self.tasks[i]] for i in idx],
                self.lam,
                self.alpha,
                floor=self.floor,
            )
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
    """Per-task loss weights: "we normalize all losses to 10 after warmup" (C.4), the authors' way.

    Every step adds each task's summed per-token loss and token count (`observe`); every evaluation
    (`update`) turns the means since the last evaluation into weights:
      - until the first evaluation at or after `warmup_tokens`: w_task = target / mean_task, so each
        task's weighted per-token loss is about `target` (10);
      - after it, with a `reference` task (text, in the authors' multi-task runs): each other task's
        weight is set to the one that makes its weighted loss equal the reference's, w_ref mean_ref
        / mean_t (the reference's weight stays), as the authors do at every evaluation; `momentum` m
        > 0 moves it only part of the way, w <- m w + (1 - m) w_ref mean_ref / mean_t (our earlier
        rule used m = 0.5, a misreading of the authors' 0.5, which is eq. 16's alpha on the sampling
        ratios); without a reference the weights stay as they are.
    A task not seen since the last evaluation keeps its weight. `enabled=False`: every weight 1.
    """

    def __init__(
        self,
        tasks,
        warmup_tokens: float,
        reference: str | None = None,
        target: float = 10.0,
        enabled: bool = True,
        momentum: float = 0.0,
    ):
        self.tasks = list(tasks)
        if reference is not None and reference not in self.tasks:
            raise ValueError(f"reference task {reference!r} is not one of {self.tasks}")
        if warmup_tokens < 0 or not target > 0:
            raise ValueError(f"need warmup_tokens >= 0 and target > 0, got {warmup_tokens}, {target}")
        if not 0 <= momentum <= 1:
            raise ValueError(f"momentum must be in [0, 1], got {momentum}")
        self.warmup_tokens, self.reference, self.target, self.enabled = warmup_tokens, reference, target, enabled
        self.momentum = momentum
        self.weights = np.ones(len(self.tasks))
        self.sums, self.counts = np.zeros(len(self.tasks)), np.zeros(len(self.tasks))
        self.warm = False  # the first evaluation at or after warmup_tokens has happened

    def observe(self, task_loss, task_tokens) -> None:
        """Add one step's summed per-token losses and target counts per task (arrays [n_tasks])."""
        loss, tokens = np.asarray(task_loss, np.float64), np.asarray(task_tokens, np.float64)
        if loss.shape != self.weights.shape or tokens.shape != self.weights.shape:
            raise ValueError(f"expected {len(self.tasks)} per-task values, got {loss.shape} and {tokens.shape}")
        if not np.all(np.isfinite(loss)):
            raise ValueError(f"a task's loss is not finite: {dict(zip(self.tasks, loss.tolist()))}")
        self.sums += loss
        self.counts += tokens

    def update(self, tokens_seen: float) -> np.ndarray:
        """New weights from the mean losses since the last call; returns them."""
        seen = self.counts > 0
        mean = np.divide(self.sums, self.counts, out=np.zeros_like(self.sums), where=seen)
        usable = seen & (mean > 0)
        if self.enabled and not self.warm:
            self.weights[usable] = self.target / mean[usable]
            self.warm = tokens_seen >= self.warmup_tokens
        elif self.enabled and self.reference is not None:
            ref = self.tasks.index(self.reference)
            if usable[ref]:
                others = usable & (np.arange(len(self.tasks)) != ref)
                goal = self.weights[ref] * mean[ref] / mean[others]
                self.weights[others] = self.momentum * self.weights[others] + (1 - self.momentum) * goal
        self.sums[:], self.counts[:] = 0.0, 0.0
        return self.weights

    def state_dict(self) -> dict:
        return {
            "tasks": self.tasks,
            "weights": self.weights.tolist(),
            "sums": self.sums.tolist(),
            "counts": self.counts.tolist(),
            "warm": self.warm,
        }

    def load_state_dict(self, state: dict) -> None:
        if list(state.get("tasks", [])) != self.tasks:
            raise ValueError(f"checkpoint tasks {state.get('tasks')} differ from {self.tasks}")
        self.weights, self.sums, self.counts = (np.asarray(state[k], np.float64) for k in ("weights", "sums", "counts"))
        self.warm = bool(state["warm"])


def weight_changes(evals, rtol: float = 0.01) -> list[int]:
    """The evaluation steps after which the loss weights of C.4 (the `loss_weight/<task>` columns
    of a run's evals, `train.load_metrics`) differ by more than `rtol` from the ones before (a run
    starts with weight 1): there the weighted total loss changes scale without the model changing."""
    weights = evals.filter(like="loss_weight/").to_numpy(dtype=float)
    if weights.size == 0:
        return []
    before = np.vstack([np.ones((1, weights.shape[1])), weights[:-1]])
    changed = (np.abs(weights - before) > rtol * np.abs(before)).any(axis=1)
    return [int(s) for s in evals["step"].to_numpy()[changed]]
