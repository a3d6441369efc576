"""The optimizer's settings (appendix C.1) and the schedules they give: the lr multiplier (linear
warm-up, then cosine) and Muon's momentum warm-up. Apart from optim.py, which builds the optimizers
with torch, so that a command's flags (`config.py`) and the curriculum read them without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..cli import setting


@dataclass
class OptimConfig:
    """Appendix C.1's optimizer settings; every value is set here (torch's Muon defaults differ)."""

    optimizer: str = setting(
        "muon", "Muon for the hidden matrices (C.1) or AdamW in their place (Table 10)", choices=("muon", "adamw")
    )
    hidden_lr: float = setting(0.02, "learning rate of the hidden matrices (Muon)")
    embedding_lr: float = setting(0.03, "learning rate of the token embedding (Adam; the authors' code: 0.3)")
    head_lr: float = setting(0.004, "learning rate of the lm head, the number head and its joins (Adam)")
    scalar_lr: float = setting(0.02, "learning rate of parameters with fewer than 2 dimensions (Adam)")
    muon_momentum: float = setting(0.95, "Muon momentum after its warm-up")
    muon_momentum_start: float = setting(0.85, "Muon momentum at step 0")
    muon_momentum_warmup_steps: int = setting(300, "steps of Muon's linear momentum warm-up")
    nesterov: bool = setting(True, "Nesterov momentum in Muon")
    ns_coefficients: tuple[float, float, float] = setting(
        (3.4445, -4.7750, 2.0315), "Newton-Schulz quintic coefficients a b c"
    )
    ns_steps: int = setting(5, "Newton-Schulz steps")
    ns_eps: float = setting(1e-7, "Newton-Schulz normalization epsilon")
    muon_adjust_lr_fn: str = setting(
        "original",
        "Muon's per-matrix lr scaling: sqrt(max(1, rows/cols)) (Keller Jordan's) or torch's RMS match",
        choices=("original", "match_rms_adamw"),
    )
    newton_schulz: str = setting(
        "auto",
        "precision of Muon's iteration: torch's bfloat16 or our float32; auto: "
        "float32 on every CPU (one recipe whatever its matrix units), bfloat16 on GPUs "
        "(torch's and the authors')",
        choices=("auto", "float32", "bfloat16"),
    )
    adam_betas: tuple[float, float] = setting((0.9, 0.95), "Adam betas")
    adam_eps: float = setting(1e-10, "Adam epsilon (the authors' 1e-10; torch's default is 1e-8)")
    weight_decay: float = setting(0.0, "weight decay of Muon and Adam (C.1: none)")
    adamw_hidden_lr: float = setting(
        0.02,
        "AdamW ablation (Table 10): lr of the hidden matrices (the paper "
        "gives none; the authors' code keeps Muon's 0.02)",
    )
    adamw_weight_decay: float = setting(0.0, "AdamW ablation: weight decay (the authors' code: none)")
    warmup_frac: float = setting(0.1, "share of the steps for the linear lr warm-up (C.1: 10 %)")
    lr_floor: float = setting(
        0.002,
        "the cosine ends at this absolute lr in every group (the paper is "
        "silent; the authors' 0.1 x the Muon lr); 0: cosine to 0",
    )


def lr_multiplier(step: int, total_steps: int, warmup_frac: float = 0.1) -> float:
    """Linear warm-up to 1 over round(warmup_frac * total_steps) steps, then cosine to 0 at total_steps.

    Warm-up step s (0-based) gets (s + 1) / warmup so the first update is not wasted at lr 0.
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    if not 0 <= step <= total_steps:
        raise ValueError(f"step must be in [0, {total_steps}], got {step}")
    if not 0 <= warmup_frac < 1:
        raise ValueError(f"warmup_frac must be in [0, 1), got {warmup_frac}")
    warmup = round(warmup_frac * total_steps)
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total_steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def muon_momentum(step: int, warmup_steps: int = 300, start: float = 0.85, end: float = 0.95) -> float:
    """Muon momentum, linear from `start` at step 0 to `end` at `warmup_steps`, constant after."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    frac = min(step / warmup_steps, 1.0) if warmup_steps > 0 else 1.0
    return start + frac * (end - start)
