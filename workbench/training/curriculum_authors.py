"""The authors' curriculum (`dataloader/curriculum_manager.py` of KreitnerL/BitTokens, with the values
of their `train_argument_parser.py`), behind the interface of `curriculum.Curriculum`; chosen by
`--curriculum-rule authors`. `Curriculum` follows C.3's text; this one parts from it so:

- Levels are the difficulties the training pool holds, sorted: l_0 < l_1 < … < l_{n-1}. The
  frontier starts at l_{int(0.15 n)} (C.3: 0.1 x the highest difficulty).
- Advance (C.3: when the frontier passes ζ): every level held among frontier - 2 … frontier must
  score at least its threshold in the latest evaluation (a level never evaluated scores 0). Then
  the frontier moves to the highest held level in (frontier, frontier + k], k = max(1,
  round(0.02 n)). If no level is held there (a gap wider than k) it never moves again.
- Threshold (C.3: eq. 14): 0.9 x m(level), where with progress = max(step / (0.5 T), (lr_max -
  lr) / (0.5 lr_max)) m is 1 until progress = level / l_{n-1}, then falls linearly to 0 at
  progress = level / l_{n-1} + 0.5: every threshold is 0 from progress 1.5 on. During the lr
  warm-up lr counts as lr_max (the authors pass their base lr then).
- Level shares (C.3: eq. 16 with λ = 0, momentum α = 0.5): of the unlocked levels, no momentum:
  (1 - p) with p the mean of the last 3 evaluations (0 if none), clamped at (1 - p) >= 0.01,
  normalised, every share at least 0.5 / (number of unlocked levels), normalised again. The 20 %
  preview of the locked levels is C.3's (0.8^(level - frontier)).
- Mastery: the frontier is the highest level and its window passes. A task that hands over to
  another pool (`hand_over`, BitTokens' binary sets) keeps its level shares; any other samples its
  pool uniformly from then on (the authors' "random sampling from all difficulties").
- Their `advance_if_possible` runs over every task after each curriculum task's evaluation, so in
  a run with c curriculum tasks a task can advance up to c times per evaluation (`checks`).

`lr` and `lr_max` only need the same units: train passes the schedule's multiplier (lr_max = 1),
and `lr_floor` = 0.1 maps it to the authors' lr, whose cosine ends at 0.1 x lr_max.
"""

from __future__ import annotations

import numpy as np

from .curriculum import level_index

RULES = ("paper", "authors")  # --curriculum-rule: C.3's text (curriculum.Curriculum) or this
START_SHARE = 0.15  # the initial frontier's index as a share of the held levels
STEP_SHARE = 0.02  # levels advanced at once, as a share of the held levels
WINDOW = 3  # the highest unlocked levels (by value) that must each pass
HISTORY = 3  # evaluations averaged for the level shares
SHARE_FLOOR = 0.5  # every unlocked level's share is at least SHARE_FLOOR / (unlocked levels)
ERROR_FLOOR = 0.01  # (1 - p) is clamped at this before normalising (their inverse_generalized_mean)


class AuthorsCurriculum:
    """The authors' frontier, thresholds and level shares (module docstring), one task."""

    def __init__(
        self,
        max_difficulty: int,
        total_steps: int,
        lr_max: float,
        zeta0: float = 0.9,
        preview_frac: float = 0.2,
        preview_decay: float = 0.8,
        warmup_frac: float = 0.1,
        levels=None,
        hand_over: bool = False,
        checks: int = 1,
        lr_floor: float = 0.1,
    ):
        held = np.arange(int(max_difficulty) + 1) if levels is None else np.unique(np.asarray(levels, np.int64))
        if held.size == 0 or held.min() < 0 or held.max() > max_difficulty:
            raise ValueError(f"levels must be a non-empty set of integers in [0, {max_difficulty}]")
        if total_steps < 1 or not lr_max > 0 or checks < 1 or not 0 <= lr_floor < 1:
            raise ValueError(
                f"need total_steps >= 1, lr_max > 0, checks >= 1 and lr_floor in [0, 1), got "
                f"{total_steps}, {lr_max}, {checks}, {lr_floor}"
            )
        self.max_difficulty, self.levels = int(max_difficulty), held
        self.total_steps, self.lr_max, self.lr_floor = total_steps, lr_max, lr_floor
        self.zeta0, self.preview_frac, self.preview_decay = zeta0, preview_frac, preview_decay
        self.warmup_steps = round(warmup_frac * total_steps)
        self.hand_over, self.checks = hand_over, checks
        self.step_size = max(1, round(STEP_SHARE * held.size))
        self.frontier = int(held[min(int(START_SHARE * held.size), held.size - 1)])
        self.history: dict[int, list[float]] = {}
        self.mastered = False

    def progress(self, step: int, lr: float) -> float:
        """max(step / (0.5 T), (lr_max - lr) / (0.5 lr_max)), lr at lr_max during the warm-up."""
        lr = self.lr_max if step <= self.warmup_steps else self.lr_floor * self.lr_max + (1 - self.lr_floor) * lr
        return max(step / (0.5 * self.total_steps), (self.lr_max - lr) / (0.5 * self.lr_max))

    def threshold(self, level: int, step: int, lr: float) -> float:
        """0.9 x m(level): 1 until progress = level / highest, linearly to 0 half a unit later."""
        top = int(self.levels[-1])
        start = level / top if top else 0.0
        multiplier = min(1.0, max(0.0, 1 - (self.progress(step, lr) - start) / 0.5)) if top else 1.0
        return self.zeta0 * multiplier

    def unlocked(self) -> np.ndarray:
        return self.levels[self.levels <= self.frontier]

    def level_probabilities(self) -> np.ndarray:
        """Probability of each level 0..max_difficulty for the next samples (sums to 1)."""
        unlocked = self.unlocked()
        recent = np.array([np.mean(self.history[lv][-HISTORY:]) if self.history.get(lv) else 0.0 for lv in unlocked])
        shares = np.maximum(1 - recent, ERROR_FLOOR)
        shares = np.maximum(shares / shares.sum(), SHARE_FLOOR / unlocked.size)
        probs = np.zeros(self.max_difficulty + 1)
        probs[unlocked] = shares / shares.sum()
        locked = self.levels[self.levels > self.frontier]
        if locked.size:
            # one Python float power at a time: numpy's power of an array is SIMD-dispatched, and its
            # last bits (so the shares) would differ between CPUs
            preview = np.array([float(self.preview_decay) ** int(k) for k in locked - self.frontier])
            probs *= 1 - self.preview_frac
            probs[locked] = self.preview_frac * preview / preview.sum()
        return probs

    def sample(self, difficulties, n: int, rng: np.random.Generator) -> np.ndarray:
        """Indices into a pool (with replacement): level by level from `level_probabilities`, or,
        once mastered without a hand-over, uniformly over the pool."""
        index = level_index(difficulties, self.max_difficulty)
        if self.mastered and not self.hand_over:
            return rng.integers(0, index.levels.size, n)
        return index.sample(self.level_probabilities(), n, rng)

    def passes(self, step: int, lr: float) -> bool:
        """Every held level among frontier - 2 … frontier scores at least its threshold (latest evaluation)."""
        window = self.levels[(self.levels > self.frontier - WINDOW) & (self.levels <= self.frontier)]
        latest = {lv: (self.history[lv][-1] if self.history.get(lv) else 0.0) for lv in window.tolist()}
        return bool(self.history) and all(p >= self.threshold(lv, step, lr) for lv, p in latest.items())

    def update(self, performance_by_level: dict[int, float], step: int, lr: float) -> bool:
        """Record the evaluation; advance up to `checks` times. Returns whether the frontier moved."""
        for level, p in performance_by_level.items():
            if not 0 <= level <= self.max_difficulty or not 0 <= p <= 1:
                raise ValueError(
                    f"performance at level {level} must be in [0, 1] for a level in [0, {self.max_difficulty}], got {p}"
                )
            self.history[int(level)] = (self.history.get(int(level), []) + [float(p)])[-HISTORY:]
        start = self.frontier
        for _ in range(self.checks):
            if self.mastered or not self.passes(step, lr):
                break
            if self.frontier >= self.levels[-1]:
                self.mastered = True
                break
            ahead = self.levels[(self.levels > self.frontier) & (self.levels <= self.frontier + self.step_size)]
            if not ahead.size:  # a gap wider than the step: the authors' curriculum stops here
                break
            self.frontier = int(ahead.max())
        return self.frontier != start

    def state_dict(self) -> dict:
        return {
            "rule": "authors",
            "max_difficulty": self.max_difficulty,
            "frontier": self.frontier,
            "history": {str(k): v for k, v in self.history.items()},
            "mastered": self.mastered,
            "levels": self.levels.tolist(),
        }

    def load_state_dict(self, state: dict) -> None:
        if (
            state.get("rule") != "authors"
            or state.get("levels") != self.levels.tolist()
            or state.get("max_difficulty") != self.max_difficulty
        ):
            raise ValueError("checkpoint curriculum is not an authors' curriculum on these difficulty levels")
        frontier = int(state["frontier"])
        history = {int(k): [float(p) for p in v] for k, v in state["history"].items()}
        if frontier not in self.levels or any(not 0 <= p <= 1 for v in history.values() for p in v):
            raise ValueError("corrupt curriculum state (frontier or history out of range)")
        self.frontier, self.history, self.mastered = frontier, history, bool(state["mastered"])
