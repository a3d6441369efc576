"""Fused forward/backward passes for the model's element-wise layers and its loss.

Written as autograd Functions because PyTorch's composite versions allocate a fresh tensor per
elementary op, and on a CPU these memory-bound ops, not the matrix products, made our GPT 20 %
slower than a plain GPT of the same size (benchmarks/train.py). Each function computes exactly what
its composite does (tests/test_fused.py checks values and gradients against it):

    relu_squared(x)                       F.relu(x).square()
    rms_norm(x)                           F.rms_norm(x, (x.shape[-1],))
    rotate(x, cos, sin)                   RoPE: channel pairs (i, i + D/2) rotated by the angles
    linear_cross_entropy(h, w, targets)   F.cross_entropy(h @ w.T, targets, reduction="sum")

linear_cross_entropy never holds the whole [N, vocabulary] logits: it walks over row chunks and
forms the gradients during the forward pass (the chunk's softmax is at hand then), so the backward
pass only scales them. Same matrix products as the plain loss, a fraction of the memory traffic.
"""
from __future__ import annotations

import torch
from torch import Tensor


class _ReLUSquared(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x).square_()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.relu(x).mul_(grad).mul_(2.0)


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        xf = x.to(torch.promote_types(x.dtype, torch.float32))
        eps = torch.finfo(x.dtype).eps  # F.rms_norm's default
        rstd = torch.rsqrt(xf.square().mean(-1, keepdim=True).add_(eps))
        y = xf * rstd
        ctx.save_for_backward(y, rstd)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        # y = x * rstd  =>  dx = rstd * (g - y * mean(g * y))
        y, rstd = ctx.saved_tensors
        g = grad.to(y.dtype)
        mean_gy = (g * y).mean(-1, keepdim=True)
        return torch.addcmul(g, y, mean_gy, value=-1.0).mul_(rstd).to(grad.dtype)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    out = torch.empty(x.shape, dtype=torch.promote_types(x.dtype, cos.dtype), device=x.device)
    o1, o2 = out.chunk(2, dim=-1)
    torch.mul(x1, cos, out=o1).addcmul_(x2, sin, value=-1.0)
    torch.mul(x1, sin, out=o2).addcmul_(x2, cos)
    return out


class _Rotate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _rotate(x, cos, sin).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors  # a rotation's transpose rotates back
        return _rotate(grad, cos, -sin).to(grad.dtype), None, None


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk_rows, want_grad):
        exact = torch.promote_types(torch.promote_types(hidden.dtype, weight.dtype), torch.float32)
        total = torch.zeros((), dtype=exact, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if want_grad else None
        grad_weight = torch.zeros_like(weight, dtype=exact) if want_grad else None
        for start in range(0, hidden.shape[0], chunk_rows):
            h, t = hidden[start:start + chunk_rows], targets[start:start + chunk_rows]
            logits = (h @ weight.T).to(exact)
            lse = torch.logsumexp(logits, -1, keepdim=True)
            total += (lse.squeeze(1) - logits.gather(1, t[:, None]).squeeze(1)).sum()
            if want_grad:
                g = logits.sub_(lse).exp_()  # softmax in place; d(lse - logit[t]) / d logits
                g[torch.arange(len(t), device=t.device), t] -= 1.0
                g = g.to(weight.dtype)  # under autocast the products below run in its dtype anyway
                torch.mm(g, weight, out=grad_hidden[start:start + chunk_rows])
                grad_weight += g.T @ h
        ctx.save_for_backward(grad_hidden, grad_weight.to(weight.dtype) if want_grad else None)
        return total

    @staticmethod
    def backward(ctx, grad):
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad.to(grad_hidden.dtype), grad_weight * grad.to(grad_weight.dtype), None, None, None


def relu_squared(x: Tensor) -> Tensor:
    return _ReLUSquared.apply(x)


def rms_norm(x: Tensor) -> Tensor:
    return _RMSNorm.apply(x)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x [..., D] with cos, sin [..., D/2] broadcasting against x's halves."""
    return _Rotate.apply(x, cos, sin)


def linear_cross_entropy(hidden: Tensor, weight: Tensor, targets: Tensor, chunk_elements: int = 1 << 21) -> Tensor:
    """Sum over rows of the cross-entropy of logits hidden [N, d] @ weight[V, d].T against targets [N],
    in chunks of about `chunk_elements` logits (8 MB in float32: the chunk stays in cache)."""
    if hidden.ndim != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden must be [N, d] and targets [N]; got {tuple(hidden.shape)} and {tuple(targets.shape)}")
    want_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    return _LinearCrossEntropy.apply(hidden, weight, targets, max(1, chunk_elements // weight.shape[0]), want_grad)
