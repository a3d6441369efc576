"""Curriculum over problem difficulty (appendix C.3), one `Curriculum` per task.

Difficulty levels are the integers 0..max_difficulty of appendix A.3. Levels up to the frontier
are unlocked; they share 80 % of the task's samples, split by eq. 16 with lambda = 0 on the
per-level performance (weak levels get more, which also fights forgetting). The other 20 % preview
the locked levels, decaying as 0.8^(level - frontier) (eq. 13). Only the levels the data hold
count (a level without questions could never pass: two operands have at least 2 digits, so
multiplication has no level 0 or 1): the frontier starts at the highest held level <= round(0.1 *
max_difficulty), or the lowest held level, and moves up to the next held level whenever the
performance at the frontier beats the threshold of eq. 14.

BitTokens train on base-2 difficulty and switch to the decimal (test) difficulty for the last part
of training (A.3). `Sampler` puts it together: for an encoding whose difficulty base is 2 the
curriculum tasks of the single-step family (multiplication, division) train on a separate pool of
binary-significance numbers (`Regime.significance = "binary"`), then hand over to the decimal pool:
for the last `endgame_share` of the steps (the paper's "fixed amount of tokens at the end") or,
the authors' rule, once the binary curriculum passes its highest level, then 90 % decimal and 10 %
binary. Without binary pools such an encoding samples the decimal pool by its base-2 difficulty
and uniformly at the end (`difficulty_column`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from workbench.training.balancing import update_ratios
from workbench.training.optim_config import lr_multiplier


def difficulty_column(difficulty_base: int, step: int, total_steps: int, switch_frac: float = 0.1) -> str:
    """Task-data column that drives sampling: "difficulty" (base 2) or "difficulty_sd" (base 10).

    Encodings whose difficulty base is 2 (BitTokens) use the binary difficulty until the last
    `switch_frac` of the steps; every other encoding, and BitTokens at the end, the decimal
    difficulty of the test set (A.3).
    """
    if not 0 <= switch_frac <= 1:
        raise ValueError(f"switch_frac must be in [0, 1], got {switch_frac}")
    if not 0 <= step <= total_steps:
        raise ValueError(f"step must be in [0, {total_steps}], got {step}")
    if difficulty_base not in (2, 10):
        raise ValueError(f"difficulty_base must be 2 or 10, got {difficulty_base!r}")
    binary = difficulty_base == 2
    return "difficulty" if binary and step < (1 - switch_frac) * total_steps else "difficulty_sd"


def levels_of(difficulties, max_difficulty: int) -> np.ndarray:
    """A pool's difficulty column as int64 levels, refused unless integers in [0, max_difficulty]."""
    d = np.asarray(difficulties)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("difficulties must be a non-empty 1-D array")
    integral = np.all(np.isfinite(d)) and np.all(d == np.round(d))
    if not integral or d.min() < 0 or d.max() > max_difficulty:
        raise ValueError(f"difficulties must be integers in [0, {max_difficulty}], got range [{d.min()}, {d.max()}]")
    return d.astype(np.int64)


def sample_by_level(levels: np.ndarray, probabilities: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n indices into a pool whose questions have `levels`: a level per draw by `probabilities`
    (renormalized over the levels the pool holds), then a question of that level uniformly."""
    present = np.bincount(levels, minlength=len(probabilities)) > 0
    return _draw(present, lambda level: np.flatnonzero(levels == level), probabilities, n, rng)


def _draw(present: np.ndarray, questions_of, probabilities: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """The draw itself, in one place: a level per sample among the `present` ones, then a question
    of it uniformly (`questions_of(level)`: its positions in the pool), the generator consumed in
    this order so that every run retraces."""
    probs = probabilities * present
    if probs.sum() == 0:
        raise ValueError("no sample in the pool has a difficulty the curriculum can pick")
    drawn = rng.choice(len(probabilities), size=n, p=probs / probs.sum())
    out = np.empty(n, dtype=np.int64)
    for level in np.unique(drawn):
        pool = questions_of(level)
        where = drawn == level
        out[where] = pool[rng.integers(0, pool.size, size=where.sum())]
    return out


class LevelIndex:
    """A pool's questions grouped by level once, for `sample_by_level`'s draws at every step.

    `sample_by_level` checks the pool's whole difficulty column and finds each drawn level's
    questions again at every call, a fifth of a CPU training step; the column of a pool never
    changes during a run, so this does it once. `sample` consumes the generator exactly as
    `sample_by_level` does and returns the same indices (tests/test_curriculum.py compares them).
    """

    def __init__(self, difficulties, max_difficulty: int):
        self.levels = levels_of(difficulties, max_difficulty)
        self.counts = np.bincount(self.levels, minlength=max_difficulty + 1)
        self.positions = {int(lv): np.flatnonzero(self.levels == lv) for lv in np.flatnonzero(self.counts)}

    def sample(self, probabilities: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        if len(probabilities) != len(self.counts):
            return sample_by_level(self.levels, probabilities, n, rng)
        return _draw(self.counts > 0, lambda level: self.positions[int(level)], probabilities, n, rng)


_INDEXES: dict[tuple[int, int], tuple[object, LevelIndex]] = {}
_INDEXES_KEPT = 16  # a run samples two or three columns a task; a notebook trains a few runs


def level_index(difficulties, max_difficulty: int) -> LevelIndex:
    """The `LevelIndex` of a pool's difficulty column, built at its first use. Kept by the column's
    identity (the column itself is kept with it, so that its id is never another's), in the
    process that samples: in the batch worker too, where the curricula arrive anew every step."""
    key = (id(difficulties), int(max_difficulty))
    hit = _INDEXES.get(key)
    if hit is None or hit[0] is not difficulties:
        if len(_INDEXES) >= _INDEXES_KEPT:
            _INDEXES.pop(next(iter(_INDEXES)))
        hit = _INDEXES[key] = (difficulties, LevelIndex(difficulties, max_difficulty))
    return hit[1]


class Curriculum:
    """Frontier, per-level sampling probabilities and the advancement rule of C.3.

    Threshold (eq. 14), as we read it:

        zeta(level, step, lr) = min(zeta0,
                                    zeta0 * level / max_difficulty * min(S / step, L / (lr_max - lr)))

    - The min with zeta0 is ours: the raw formula exceeds zeta0 (and is infinite at step 0), but
      the text says the threshold starts at zeta0 = 0.9 and is only ever reduced.
    - S = decay_start_frac * total_steps; L = lr_max - lr(S), the drop of the learning rate (our
      cosine schedule, `optim.lr_multiplier`) by then. So for the highest level both terms reach
      1 at 50 % of training and the threshold starts to fall there; level d starts to fall earlier,
      once the factor drops below max_difficulty / d ("starting from the lowest difficulties").
    - The lr term is ignored during the warm-up, when lr rises towards lr_max rather than decaying.
    Both terms only shrink as training goes on, so the threshold never rises over time.
    Level 0 has threshold 0: it passes as soon as any performance is measured.
    `lr` and `lr_max` only need the same units: lr_max=1 with lr=optim.lr_multiplier(step) works.
    The paper uses the curriculum only for multiplication, division, exponentiation, mean and std.

    `levels`: the levels the data hold (the authors' indexing). The curriculum moves over those
    only: the frontier starts at the highest held level <= start_frac x max_difficulty (the lowest
    held level if none is that low), and advances to the next held level. Without `levels` every
    integer 0..max_difficulty is a level. (Multiplication's levels start at 2: with 0 and 1 as
    levels, a frontier at 0 would wait forever for a measurement at a level no question has.)
    """

    def __init__(
        self,
        max_difficulty: int,
        total_steps: int,
        lr_max: float,
        zeta0: float = 0.9,
        start_frac: float = 0.1,
        preview_frac: float = 0.2,
        preview_decay: float = 0.8,
        alpha: float = 0.5,
        decay_start_frac: float = 0.5,
        warmup_frac: float = 0.1,
        frontier: int | None = None,
        levels=None,
    ):
        if int(max_difficulty) != max_difficulty or max_difficulty < 0:
            raise ValueError(f"max_difficulty must be an integer >= 0, got {max_difficulty}")
        if total_steps < 1 or not lr_max > 0:
            raise ValueError(f"need total_steps >= 1 and lr_max > 0, got {total_steps}, {lr_max}")
        if not (
            0 < zeta0 <= 1
            and 0 <= preview_frac < 1
            and 0 < preview_decay <= 1
            and 0 < decay_start_frac <= 1
            and 0 <= start_frac <= 1
        ):
            raise ValueError("zeta0, preview_frac, preview_decay, decay_start_frac, start_frac out of range")
        self.max_difficulty, self.total_steps, self.lr_max = int(max_difficulty), total_steps, lr_max
        self.zeta0, self.alpha = zeta0, alpha
        self.preview_frac, self.preview_decay = preview_frac, preview_decay
        # preview_decay ** k, one Python float power at a time: numpy's power of an array is
        # SIMD-dispatched and its last bits, so the shares of eq. 13, would differ between CPUs
        self._decay_powers = np.array([float(preview_decay) ** k for k in range(self.max_difficulty + 1)])
        self.warmup_steps = round(warmup_frac * total_steps)
        self.S = decay_start_frac * total_steps
        decay_step = min(total_steps, round(self.S))
        self.L = lr_max * (1 - lr_multiplier(decay_step, total_steps, warmup_frac))
        held = np.arange(self.max_difficulty + 1) if levels is None else np.unique(np.asarray(levels, np.int64))
        if held.size == 0 or held.min() < 0 or held.max() > self.max_difficulty:
            raise ValueError(f"levels must be a non-empty set of integers in [0, {self.max_difficulty}]")
        self.held = np.zeros(self.max_difficulty + 1, dtype=bool)
        self.held[held] = True
        if frontier is None:
            low = held[held <= math.floor(start_frac * self.max_difficulty + 0.5)]
            frontier = low.max() if low.size else held.min()
        if not 0 <= frontier <= self.max_difficulty or not self.held[frontier]:
            raise ValueError(f"frontier must be one of the levels in [0, {self.max_difficulty}], got {frontier}")
        self.frontier = int(frontier)
        unlocked = self.held & (np.arange(self.max_difficulty + 1) <= self.frontier)
        self.ratios = unlocked / unlocked.sum()  # shares of the unlocked levels, sum 1
        self.mastered = False  # the highest level has passed its threshold (the authors' end-game trigger)

    def threshold(self, level: int, step: int, lr: float) -> float:
        """Eq. 14 (see the class docstring for our reading)."""
        step_term = self.S / step if step > 0 else math.inf
        gap = self.lr_max - lr
        lr_term = self.L / gap if step >= self.warmup_steps and gap > 0 and self.L > 0 else math.inf
        if level == 0:
            return 0.0
        return min(self.zeta0, self.zeta0 * level / self.max_difficulty * min(step_term, lr_term))

    def level_probabilities(self) -> np.ndarray:
        """Probability of each level 0..max_difficulty for the next samples (sums to 1)."""
        probs = self.ratios.copy()
        locked = np.flatnonzero(self.held[self.frontier + 1 :]) + self.frontier + 1
        if locked.size:
            preview = self._decay_powers[locked - self.frontier]  # eq. 13
            probs *= 1 - self.preview_frac
            probs[locked] = self.preview_frac * preview / preview.sum()
        return probs

    def sample(self, difficulties, n: int, rng: np.random.Generator) -> np.ndarray:
        """Indices into a pool (with replacement) drawn level by level from `level_probabilities`.

        Levels without samples in the pool drop out and the rest are renormalized.
        """
        return level_index(difficulties, self.max_difficulty).sample(self.level_probabilities(), n, rng)

    def update(self, performance_by_level: dict[int, float], step: int, lr: float) -> bool:
        """Re-weight the unlocked levels (eq. 16, lambda = 0); advance the frontier by one level if
        the frontier's performance beats the threshold. Returns whether it advanced."""
        for level, p in performance_by_level.items():
            if not 0 <= level <= self.max_difficulty or not 0 <= p <= 1:
                raise ValueError(
                    f"performance at level {level} must be in [0, 1] for a level in [0, {self.max_difficulty}], got {p}"
                )
        scored = [lv for lv in range(self.frontier + 1) if lv in performance_by_level and self.held[lv]]
        mass = self.ratios[scored].sum()
        if scored and mass > 0:
            perf = [performance_by_level[lv] for lv in scored]
            new = update_ratios(self.ratios[scored] / mass, perf, lam=0.0, alpha=self.alpha)
            self.ratios[scored] = mass * new
        p = performance_by_level.get(self.frontier)
        if p is None or not p > self.threshold(self.frontier, step, lr):
            return False
        higher = np.flatnonzero(self.held[self.frontier + 1 :])
        if not higher.size:  # the highest level passes: the curriculum is done
            self.mastered = True
            return False
        self.frontier += int(higher[0]) + 1
        n = int(self.held[: self.frontier + 1].sum())  # the new level joins with an equal share 1/n
        self.ratios *= (n - 1) / n
        self.ratios[self.frontier] = 1 / n
        return True

    def state_dict(self) -> dict:
        return {
            "max_difficulty": self.max_difficulty,
            "frontier": self.frontier,
            "ratios": self.ratios.tolist(),
            "mastered": self.mastered,
            "levels": np.flatnonzero(self.held).tolist(),
        }

    def load_state_dict(self, state: dict) -> None:
        if state.get("max_difficulty") != self.max_difficulty:
            raise ValueError(
                f"checkpoint curriculum has max_difficulty {state.get('max_difficulty')}, "
                f"this one {self.max_difficulty}"
            )
        if "levels" in state and state["levels"] != np.flatnonzero(self.held).tolist():
            raise ValueError("checkpoint curriculum was built on other difficulty levels than this one's")
        ratios = np.asarray(state["ratios"], dtype=np.float64)
        frontier = int(state["frontier"])
        if (
            ratios.shape != self.ratios.shape
            or not 0 <= frontier <= self.max_difficulty
            or np.any(ratios < 0)
            or abs(ratios.sum() - 1) > 1e-6
            or np.any(ratios[frontier + 1 :] != 0)
        ):
            raise ValueError("corrupt curriculum state (frontier/ratios do not fit together)")
        self.frontier, self.ratios, self.mastered = frontier, ratios, bool(state.get("mastered", False))


ENDGAMES = ("fixed", "mastery")
STANDBY = 0.1  # the binary pool's share after the authors' hand-over


@dataclass
class Sampler:
    """The samples of each task in the next batch, by curriculum and pool (C.3, A.3).

    pools: the decimal training pool of every task; binary: the binary pools of the tasks that
    have one, with their validation frames ({task: (pool, frame)}); curricula: {task: Curriculum}."""

    pools: dict
    curricula: dict
    difficulty_base: int
    total_steps: int
    binary: dict = field(default_factory=dict)
    endgame: str = "fixed"
    endgame_share: float = 0.1

    def __post_init__(self):
        if self.endgame not in ENDGAMES or not 0 <= self.endgame_share <= 1:
            raise ValueError(
                f"endgame must be one of {ENDGAMES} with a share in [0, 1], got {self.endgame!r}, {self.endgame_share}"
            )

    def in_endgame(self, task: str, step: int) -> bool:
        """The task has handed over from its binary pool to the decimal one."""
        if self.endgame == "mastery":
            return self.curricula[task].mastered
        return step >= (1 - self.endgame_share) * self.total_steps

    def sample(self, task: str, n: int, step: int, rng: np.random.Generator) -> list:
        pool = self.pools[task]
        if task in self.binary:
            decimal = (
                0 if not self.in_endgame(task, step) else n if self.endgame == "fixed" else round((1 - STANDBY) * n)
            )
            binary_pool = self.binary[task][0]
            picks = self.curricula[task].sample(binary_pool.difficulty, n - decimal, rng) if n > decimal else []
            return pool.take(rng.integers(0, len(pool.samples), decimal)) + binary_pool.take(picks)
        column = difficulty_column(self.difficulty_base, step, self.total_steps, self.endgame_share)
        binary_end_phase = self.difficulty_base == 2 and column == "difficulty_sd"
        if task not in self.curricula or binary_end_phase:
            return pool.take(rng.integers(0, len(pool.samples), n))
        return pool.take(self.curricula[task].sample(getattr(pool, column), n, rng))

    def to_evaluate(self, val: dict, step: int) -> dict:
        """{task: (validation frame, difficulty column)} whose per-level scores drive each
        curriculum now: a binary pool's own validation set until the hand-over."""
        out = {}
        for task in self.curricula:
            if task in self.binary:
                if not self.in_endgame(task, step):
                    out[task] = (self.binary[task][1], "difficulty")
            else:
                out[task] = (
                    val[task],
                    difficulty_column(self.difficulty_base, step, self.total_steps, self.endgame_share),
                )
        return out
