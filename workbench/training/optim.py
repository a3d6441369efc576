"""Optimizers and schedules of appendix C.1: Muon for hidden matrices, Adam for the rest.

    hidden    (2-D matrices in the blocks)   Muon  lr 0.02, momentum 0.85 -> 0.95 over 300 steps
    embedding (the token embedding)          Adam  lr 0.03
    head      (lm head, number head, joins)  Adam  lr 0.004
    scalar    (params with < 2 dims)         Adam  lr 0.02
    Adam betas (0.9, 0.95), eps 1e-10, no weight decay anywhere; lr: linear warm-up over 10 % of
    the steps, then cosine down to an absolute floor of 0.002 in every group (the authors' code;
    the paper names a cosine schedule only). docs/fidelity.md lists every choice.

Every param group remembers its base lr in group["initial_lr"]; `apply_schedule` sets
group["lr"] = initial_lr * lr_multiplier(step) (and Muon's momentum) before each step.
"""

from __future__ import annotations

import functools
import math

import torch

from .optim_config import OptimConfig, lr_multiplier, muon_momentum  # noqa: F401 (the settings, torch-free)

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


@functools.cache  # a fact of the machine
def cpu_has_bf16_matrix_units() -> bool:
    """True on CPUs with AMX tiles (Intel Sapphire Rapids and later), where bf16 products run
    several times faster than fp32 ones, so torch's own bf16 iteration is the fast one there."""
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)  # private in torch 2.13
    return bool(probe and probe())


class Muon(torch.optim.Optimizer):
    """torch.optim.Muon, term for term, with its Newton-Schulz iteration in `precision`: "float32"
    (`_newton_schulz_fp32`, for CPUs) or "bfloat16" (torch's own iteration, for GPUs); and with the
    iterations shared out over the data-parallel ranks.

    The update is torch's: momentum buffer lerp, Nesterov, the orthogonalized update, the
    "original" lr adjustment sqrt(max(1, rows / cols)), decoupled weight decay
    (tests/test_optim.py checks it step for step against torch.optim.Muon). Under torch.distributed
    every rank holds the same averaged gradients, so torch's Muon would run every iteration on
    every rank; here rank r orthogonalizes the matrices r, r + world, ... of each group, and one
    all-gather gives every rank all the updates (each computed once, so the result is the
    single-process one, bit for bit). 2-D parameters only, as torch's."""

    def __init__(
        self,
        params,
        lr: float,
        weight_decay: float,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients=(3.4445, -4.7750, 2.0315),
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str = "original",
        precision: str = "float32",
    ):
        if adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"adjust_lr_fn must be 'original' or 'match_rms_adamw', got {adjust_lr_fn!r}")
        if precision not in ("float32", "bfloat16"):
            raise ValueError(f"precision must be 'float32' or 'bfloat16', got {precision!r}")
        defaults = dict(
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            ns_coefficients=tuple(ns_coefficients),
            eps=eps,
            ns_steps=ns_steps,
            adjust_lr_fn=adjust_lr_fn,
        )
        super().__init__(params, defaults)
        self.precision = precision
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon takes only 2-D parameters, got shape {tuple(p.shape)}")

    def _iterate(self, update, group):
        if self.precision == "float32":
            return _newton_schulz_fp32(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
        from torch.optim._muon import _zeropower_via_newtonschulz  # torch's bf16 iteration

        return _zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        rank, world = _ranks()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            updates = []
            for i, p in enumerate(params):
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p.grad))
                buf.lerp_(p.grad, 1 - group["momentum"])
                update = p.grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
                updates.append(self._iterate(update, group) if i % world == rank else None)
            if world > 1:
                updates = _share(
                    updates, params, rank, world, torch.bfloat16 if self.precision == "bfloat16" else torch.float32
                )
            for p, update in zip(params, updates):
                rows, cols = p.shape
                scale = (
                    math.sqrt(max(1.0, rows / cols))
                    if group["adjust_lr_fn"] == "original"
                    else 0.2 * math.sqrt(max(rows, cols))
                )
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(update.to(p.dtype), alpha=-group["lr"] * scale)
        return loss


Float32Muon = Muon  # its earlier name (precision float32 is the default)


def _ranks() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _share(updates: list, params: list, rank: int, world: int, dtype: torch.dtype) -> list:
    """Rank r computed updates r, r + world, ... (in `dtype`, the iteration's): one all-gather of
    each rank's share, flattened and padded to the longest, gives every rank all of them."""
    import torch.distributed as dist

    owners = [i % world for i in range(len(params))]
    sizes = [sum(params[i].numel() for i in range(len(params)) if owners[i] == r) for r in range(world)]
    mine = [u.flatten() for u in updates if u is not None]
    longest = max(sizes)
    send = torch.zeros(longest, dtype=dtype, device=params[0].device)
    if mine:
        send[: sizes[rank]] = torch.cat(mine)
    gathered = [torch.empty_like(send) for _ in range(world)]
    dist.all_gather(gathered, send)
    offsets = [0] * world
    out = []
    for i, p in enumerate(params):
        r = owners[i]
        out.append(gathered[r][offsets[r] : offsets[r] + p.numel()].view_as(p))
        offsets[r] += p.numel()
    return out


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
                raise ValueError(f"a parameter of shape {tuple(p.shape)} is in groups {owner[id(p)]!r} and {name!r}")
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
    if cfg.optimizer not in ("muon", "adamw"):
        raise ValueError(f"optimizer must be 'muon' or 'adamw', not {cfg.optimizer!r}")
    groups = _checked_groups(model)
    lrs = {"embedding": cfg.embedding_lr, "head": cfg.head_lr, "scalar": cfg.scalar_lr}
    adam_groups = [dict(params=groups[n], lr=lrs[n], initial_lr=lrs[n], name=n) for n in lrs if groups[n]]
    optimizers = []
    if groups["hidden"] and cfg.optimizer == "muon":
        optimizers.append(
            Muon(
                [dict(params=groups["hidden"], initial_lr=cfg.hidden_lr, name="hidden")],
                lr=cfg.hidden_lr,
                weight_decay=cfg.weight_decay,
                momentum=cfg.muon_momentum_start,
                nesterov=cfg.nesterov,
                ns_coefficients=cfg.ns_coefficients,
                eps=cfg.ns_eps,
                ns_steps=cfg.ns_steps,
                adjust_lr_fn=cfg.muon_adjust_lr_fn,
                precision=newton_schulz_dtype(cfg, groups["hidden"][0].device),
            )
        )
    elif groups["hidden"]:
        optimizers.append(
            torch.optim.AdamW(
                [dict(params=groups["hidden"], initial_lr=cfg.adamw_hidden_lr, name="hidden")],
                lr=cfg.adamw_hidden_lr,
                betas=cfg.adam_betas,
                eps=cfg.adam_eps,
                weight_decay=cfg.adamw_weight_decay,
            )
        )
    if adam_groups:
        # CPU: foreach, the same update bit for bit (tests/test_optim.py) in one call per group
        # instead of one per tensor. CUDA: fused, one kernel for all groups, its step counters on
        # the device (the host never reads them)
        on_gpu = adam_groups[0]["params"][0].device.type == "cuda"
        optimizers.append(
            torch.optim.Adam(
                adam_groups,
                betas=cfg.adam_betas,
                eps=cfg.adam_eps,
                weight_decay=cfg.weight_decay,
                **({"fused": True} if on_gpu else {"foreach": True}),
            )
        )
    return optimizers


def newton_schulz_dtype(cfg: OptimConfig, device: torch.device) -> str:
    """The precision of Muon's iteration: cfg.newton_schulz, "auto" being float32 on every CPU and
    bfloat16 on a GPU. Not the machine's fastest: bf16 runs fast only on CPUs with AMX, so a
    machine-dependent choice would train another recipe on each CPU (docs/fidelity.md)."""
    if cfg.newton_schulz not in ("auto", "float32", "bfloat16"):
        raise ValueError(f"newton_schulz must be 'auto', 'float32' or 'bfloat16', got {cfg.newton_schulz!r}")
    if cfg.newton_schulz != "auto":
        return cfg.newton_schulz
    return "float32" if device.type == "cpu" else "bfloat16"


def apply_schedule(optimizers, step: int, total_steps: int, cfg: OptimConfig | None = None) -> float:
    """Set every group's lr and Muon's momentum for `step`; return the multiplier. Warm-up: base x
    multiplier; cosine: floor + (base - floor) x multiplier, floor = min(cfg.lr_floor, base)."""
    cfg = cfg or OptimConfig()
    if cfg.lr_floor < 0:
        raise ValueError(f"lr_floor must be >= 0, got {cfg.lr_floor}")
    mult = lr_multiplier(step, total_steps, cfg.warmup_frac)
    warming = step < round(cfg.warmup_frac * total_steps)
    momentum = muon_momentum(step, cfg.muon_momentum_warmup_steps, cfg.muon_momentum_start, cfg.muon_momentum)
    for opt in optimizers:
        for group in opt.param_groups:
            base = group["initial_lr"]
            floor = 0.0 if warming else min(cfg.lr_floor, base)
            group["lr"] = floor + (base - floor) * mult
            if isinstance(opt, (torch.optim.Muon, Muon)):
                group["momentum"] = momentum
    return mult
