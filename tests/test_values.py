"""Values followed to where they are used, under non-default settings: what the optimizer steps
with, what the curricula's thresholds read, what a packed batch keeps, which questions every
evaluation receives, and every state a resume restores. Each test names the one-line bug it
exists to catch (they are planted in tests/mutations.py)."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

import workbench.train
from workbench import tasks
from workbench.optim import OptimConfig
from workbench.train import TrainConfig, load_metrics, setup, train

# Every schedule setting away from its default, so a path that drops one falls back to another value.
OPTIM = OptimConfig(warmup_frac=0.3, lr_floor=0.001, hidden_lr=0.01, embedding_lr=0.05, head_lr=0.003,
                    scalar_lr=0.015)
TINY = dict(encoding="single_digit", tasks=("addition", "multiplication", "division"), preset="cpu-tiny",
            batch_size=2, tokens=2 * 128 * 10, pool_size=300, val_samples=16, test_samples=8, eval_every=2,
            checkpoint_every=2, decades=(0, 2), max_digits=3, threads=1, optim=OPTIM)


def cosine_schedule(step: int, total: int, base: float, warmup_frac: float, floor: float) -> float:
    """C.1's schedule written out: linear warm-up over round(warmup_frac x total) steps (step s
    gets (s + 1) / warmup), then a cosine from `base` down to `floor`."""
    warmup = round(warmup_frac * total)
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / (total - warmup)
    return floor + (base - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def test_the_curricula_use_the_runs_lr_warm_up(tmp_path):
    """Bug: `_sampler` builds each Curriculum without the run's warmup_frac, so eq. 14's lr term
    uses the default 10 % warm-up (its warm-up steps and the lr drop L by the decay start)."""
    run = setup(TrainConfig(**TINY, out=str(tmp_path / "run")))
    total = run.total_steps
    for curriculum in run.sampler.curricula.values():
        assert curriculum.warmup_steps == round(OPTIM.warmup_frac * total) == 3
        decay_start = round(0.5 * total)
        assert curriculum.L == pytest.approx(1 - cosine_schedule(decay_start, total, 1.0, OPTIM.warmup_frac, 0.0))
