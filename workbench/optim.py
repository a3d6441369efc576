"""Optimizers and schedules of appendix C.1: Muon for hidden matrices, Adam for the rest.

    hidden    (2-D matrices in the blocks)   Muon  lr 0.02, momentum 0.85 -> 0.95 over 300 steps
    embedding                                Adam  lr 0.03
    head      (lm head + number head)        Adam  lr 0.004
    scalar    (params with < 2 dims)         Adam  lr 0.02
    Adam betas (0.9, 0.95), no weight decay anywhere; lr: linear warm-up over 10 % of the
    steps, then cosine to 0.

Every param group remembers its base lr in group["initial_lr"]; `apply_schedule` sets
group["lr"] = initial_lr * lr_multiplier(step) (and Muon's momentum) before each step.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

GROUPS = ("hidden", "embedding", "head", "scalar")


def _newton_schulz_fp32(grad, ns_coefficients, ns_steps, eps):
    """torch.optim.Muon's Newton-Schulz iteration, in float32.

    torch runs it in bfloat16, which CPUs without bf16 matrix units execute ~100x slower than
    float32 (measured: 120 ms vs 1 ms for a 256x256 @ 256x1024 product on our 2-core machine).
    On such CPUs we run the same quintic iteration (same coefficients and steps) in float32; CPUs
    with AMX keep torch's bf16 iteration (`cpu_has_bf16_matrix_units`).

    For a wide m x n matrix (m < n, tall ones are transposed) the iteration
    X <- (a I + b A + c A^2) X with A = X X^T only ever multiplies X_0 by a polynomial P of
    A_0 = X_0 X_0^T, so we iterate on m x m matrices (Q = a I + b A + c A^2, P <- Q P,
    A <- Q A Q) and form P X_0 once. Counted in m x m x m multiply-adds, s steps cost
    2 n/m + 4 s - 3 (the first P and the last A product are never needed) instead of s (2 n/m + 1):
    25 instead of 45 for the 1:4 matrices of the MLP. Square matrices take the plain iteration.
    """
    a, b, c = ns_coefficients
    x = grad.float()
    tall = grad.size(0) > grad.size(1)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    m, n = x.shape
    if 2 * n / m + 4 * ns_steps - 3 < ns_steps * (2 * n / m + 1):  # the Gram form is cheaper
        gram = x @ x.T
        poly = None
        for step in range(ns_steps):
            q = torch.addmm(gram, gram, gram, beta=b, alpha=c)
            q.diagonal().add_(a)
            poly = q if poly is None else q @ poly
            if step < ns_steps - 1:  # the last step's Gram matrix is never used
                gram = q @ gram @ q
        x = poly @ x if poly is not None else x
    else:
        for _ in range(ns_steps):
            gram = x @ x.T
            x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


_bf16_newton_schulz = torch.optim._muon._zeropower_via_newtonschulz


@functools.cache  # a fact of the machine, asked for every matrix at every step
def cpu_has_bf16_matrix_units() -> bool:
    """True on CPUs with AMX tiles (Intel Sapphire Rapids and later), where bf16 products run
    several times faster than fp32 ones, so torch's own bf16 iteration is the fast one there."""
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)  # private in torch 2.13
    return bool(probe and probe())


def _newton_schulz(grad, ns_coefficients, ns_steps, eps):
    if grad.device.type == "cpu" and not cpu_has_bf16_matrix_units():
        return _newton_schulz_fp32(grad, ns_coefficients, ns_steps, eps)
    return _bf16_newton_schulz(grad, ns_coefficients, ns_steps, eps)


torch.optim._muon._zeropower_via_newtonschulz = _newton_schulz


@dataclass
class OptimConfig:
    kind: str = "muon"  # "muon" (paper) or "adamw" (Table 10 ablation: AdamW replaces Muon)
    hidden_lr: float = 0.02
    embedding_lr: float = 0.03
    head_lr: float = 0.004
    scalar_lr: float = 0.02
    # Muon. torch's defaults differ from the paper (weight_decay=0.1), so every value is set here.
    muon_momentum: float = 0.95
    muon_momentum_start: float = 0.85
    muon_momentum_warmup_steps: int = 300
    nesterov: bool = True
    ns_coefficients: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)
    ns_steps: int = 5
    ns_eps: float = 1e-7
    muon_adjust_lr_fn: str = "original"  # Keller Jordan's sqrt(max(1, rows/cols)) scaling
    # Adam for embedding / head / scalar.
    adam_betas: tuple[float, float] = (0.9, 0.95)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    # AdamW ablation: the paper gives no lr or decay for it; ours = the head lr and torch's default.
    adamw_hidden_lr: float = 0.004
    adamw_weight_decay: float = 0.01
    # Schedule.
    warmup_frac: float = 0.1


def _checked_groups(model) -> dict[str, list[torch.nn.Parameter]]:
    """model.param_groups(), verified: known names, every parameter in exactly one group."""
    groups = model.param_groups()
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise ValueError(f"unknown parameter groups {sorted(unknown)}; expected {GROUPS}")
    owner: dict[int, str] = {}
    for name, params in groups.items():
        for p in params:
            if id(p) in owner:
                raise ValueError(f"a parameter of shape {tuple(p.shape)} is in groups "
                                 f"{owner[id(p)]!r} and {name!r}")
            owner[id(p)] = name
    named = dict(model.named_parameters())
    missing = [n for n, p in named.items() if id(p) not in owner]
    if missing:
        raise ValueError(f"parameters in no optimizer group: {missing}")
    if len(owner) != len(named):
        raise ValueError("param_groups() holds parameters that are not the model's")
    flat = [(n, p) for n, p in named.items() if owner[id(p)] == "hidden" and p.ndim != 2]
    if flat:
        shapes = [(n, tuple(p.shape)) for n, p in flat]
        raise ValueError(f"Muon takes only 2-D matrices; 'hidden' holds {shapes}")
    return {name: list(groups.get(name, [])) for name in GROUPS}


def build_optimizers(model, cfg: OptimConfig | None = None) -> list[torch.optim.Optimizer]:
    """[Muon(hidden), Adam(embedding, head, scalar)] with the base lrs of C.1 (empty groups skipped)."""
    cfg = cfg or OptimConfig()
    if cfg.kind not in ("muon", "adamw"):
        raise ValueError(f"OptimConfig.kind must be 'muon' or 'adamw', not {cfg.kind!r}")
    groups = _checked_groups(model)
    lrs = {"embedding": cfg.embedding_lr, "head": cfg.head_lr, "scalar": cfg.scalar_lr}
    adam_groups = [dict(params=groups[n], lr=lrs[n], initial_lr=lrs[n], name=n)
                   for n in lrs if groups[n]]
    optimizers = []
    if groups["hidden"] and cfg.kind == "muon":
        optimizers.append(torch.optim.Muon(
            [dict(params=groups["hidden"], initial_lr=cfg.hidden_lr, name="hidden")],
            lr=cfg.hidden_lr, weight_decay=cfg.weight_decay, momentum=cfg.muon_momentum_start,
            nesterov=cfg.nesterov, ns_coefficients=cfg.ns_coefficients, eps=cfg.ns_eps,
            ns_steps=cfg.ns_steps, adjust_lr_fn=cfg.muon_adjust_lr_fn))
    elif groups["hidden"]:
        optimizers.append(torch.optim.AdamW(
            [dict(params=groups["hidden"], initial_lr=cfg.adamw_hidden_lr, name="hidden")],
            lr=cfg.adamw_hidden_lr, betas=cfg.adam_betas, eps=cfg.adam_eps,
            weight_decay=cfg.adamw_weight_decay))
    if adam_groups:
        optimizers.append(torch.optim.Adam(adam_groups, betas=cfg.adam_betas, eps=cfg.adam_eps,
                                           weight_decay=cfg.weight_decay))
    return optimizers


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


def apply_schedule(optimizers, step: int, total_steps: int, cfg: OptimConfig | None = None) -> float:
    """Set every group's lr (base * multiplier) and Muon's momentum for `step`; return the multiplier."""
    cfg = cfg or OptimConfig()
    mult = lr_multiplier(step, total_steps, cfg.warmup_frac)
    momentum = muon_momentum(step, cfg.muon_momentum_warmup_steps, cfg.muon_momentum_start,
                             cfg.muon_momentum)
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"] * mult
            if isinstance(opt, torch.optim.Muon):
                group["momentum"] = momentum
    return mult
