"""Fused forward/backward passes for the model's element-wise layers and its loss.

Written as autograd Functions because PyTorch's composite versions allocate a fresh tensor per
elementary op, and on a CPU these memory-bound ops, not the matrix products, made our GPT 20 %
slower than a plain GPT of the same size (benchmarks/train.py). Each function computes exactly what
its composite does (tests/test_fused.py checks values and gradients against it):

    relu_squared(x)                       F.relu(x).square()
    rms_norm(x)                           F.rms_norm(x, (x.shape[-1],))
    rotate(x, cos, sin)                   RoPE: channel pairs (i, i + D/2) rotated by the angles
    norm_rotate(x, cos, sin)              rotate(rms_norm(x), cos, sin): QK-norm, then RoPE
    linear_cross_entropy(h, w, t, r)      (r * F.cross_entropy(h @ w.T, t, reduction="none")).sum()
    masked_attention(q, k, v, mask, plan) F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

linear_cross_entropy never holds the whole [N, vocabulary] logits: it walks over row chunks and
forms the gradients during the forward pass (the chunk's softmax is at hand then), so the backward
pass only scales them. Same matrix products as the plain loss, a fraction of the memory traffic.

Under torch.compile the first four are their composites (the compiler fuses those itself).
norm_rotate runs as C (cpu_kernels.c: one pass over memory forward, two backward) on a CPU with one
thread, in float32, once that C has given PyTorch's bits on a probe; otherwise as the two functions.

masked_attention skips keys that the packed-sample mask hides anyway: each block of 32 queries only
sees the keys from the start of its earliest sample up to its own end (an attention plan, computed
once per batch by `attention_plan`). Samples of our numeric tasks are 8-30 tokens, so a block sees
~40 keys instead of the row's 256. It runs on the CPU's flash-attention kernel, block by block;
elsewhere (CUDA, torch.compile, or when the mask leaves nothing to skip) it is plain SDPA.
"""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

from . import cpu_kernels

QUERY_BLOCK = 32


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
        # mean(x²) from the norm: a reduction that allocates no [N, D] temporary
        rstd = torch.linalg.vector_norm(xf, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()
        y = xf * rstd
        ctx.save_for_backward(y, rstd)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        # y = x * rstd  =>  dx = rstd * (g - y * mean(g * y)), all in one [N, D] buffer
        y, rstd = ctx.saved_tensors
        g = grad.to(y.dtype)
        out = torch.mul(g, y)
        mean_gy = out.mean(-1, keepdim=True)
        return torch.addcmul(g, y, mean_gy, value=-1.0, out=out).mul_(rstd).to(grad.dtype)


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


def _rstd(x: Tensor) -> Tensor:
    """1 / sqrt(mean(x²) + eps) over the last dimension, as _RMSNorm computes it."""
    return (
        torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        .square_()
        .div_(x.shape[-1])
        .add_(torch.finfo(x.dtype).eps)
        .rsqrt_()
    )


class _NormRotate(torch.autograd.Function):
    """rotate(rms_norm(x), cos, sin) for float32 x [B, H, T, D] on the C kernels: the row norms by
    PyTorch, the rest in one pass; backward the rotation back and the norm's backward in two."""

    @staticmethod
    def forward(ctx, x, cos, sin):
        lib, rstd = cpu_kernels.library(), _rstd(x)
        cos, sin = (t.expand(*x.shape[:-1], x.shape[-1] // 2) for t in (cos, sin))
        out = x.new_empty(x.shape)
        lib.norm_rotate_forward(_shape(x), *_at(x), *_at(rstd), *_at(cos), *_at(sin), out.data_ptr())
        ctx.save_for_backward(x, rstd, cos, sin)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, rstd, cos, sin = ctx.saved_tensors
        lib, n = cpu_kernels.library(), _shape(x)
        if grad.stride(-1) != 1:
            grad = grad.contiguous()
        grad_y, product, grad_x = (x.new_empty(x.shape) for _ in range(3))
        lib.norm_rotate_backward_rotate(
            n, *_at(grad), *_at(x), *_at(rstd), *_at(cos), *_at(sin), grad_y.data_ptr(), product.data_ptr()
        )
        mean = product.mean(-1)  # PyTorch's reduction, so PyTorch's rounding
        lib.norm_rotate_backward_norm(n, grad_y.data_ptr(), mean.data_ptr(), *_at(x), *_at(rstd), grad_x.data_ptr())
        return grad_x, None, None


def _shape(x: Tensor):
    return cpu_kernels.longs(x.shape)


def _at(t: Tensor):
    """(address, strides of the first three dimensions) of a [B, H, T, ·] tensor for the C kernels."""
    return t.data_ptr(), cpu_kernels.longs(t.stride()[:3])


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, row_weights, chunk_rows, want_grad):
        exact = torch.promote_types(torch.promote_types(hidden.dtype, weight.dtype), torch.float32)
        losses = torch.empty(hidden.shape[0], dtype=exact, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if want_grad else None
        grad_weight = torch.zeros_like(weight, dtype=exact) if want_grad else None
        for start in range(0, hidden.shape[0], chunk_rows):
            rows = slice(start, start + chunk_rows)
            h, t = hidden[rows], targets[rows]
            logits = (h @ weight.T).to(exact)
            target_logits = logits.gather(1, t[:, None])
            top = logits.amax(1, keepdim=True)
            exp = logits.sub_(top).exp_()  # in place: one exp per logit serves the loss and the softmax
            total_exp = exp.sum(1, keepdim=True)
            losses[rows] = (top + total_exp.log() - target_logits)[:, 0]  # log-sum-exp - logit[target]
            if want_grad:
                g = exp.div_(total_exp)  # softmax = d(lse - logit[t]) / d logits + one-hot
                g[torch.arange(len(t), device=t.device), t] -= 1.0
                g.mul_(row_weights[rows, None].to(exact))
                g = g.to(weight.dtype)  # under autocast the products below run in its dtype anyway
                if torch.is_autocast_enabled(hidden.device.type):
                    grad_hidden[rows] = g @ weight  # out= would bypass autocast (a float32 product)
                else:
                    torch.mm(g, weight, out=grad_hidden[rows])
                grad_weight += g.T @ h
        ctx.save_for_backward(grad_hidden, grad_weight.to(weight.dtype) if want_grad else None)
        ctx.mark_non_differentiable(losses)
        return (losses * row_weights.to(exact)).sum(), losses

    @staticmethod
    def backward(ctx, grad, _):
        grad_hidden, grad_weight = ctx.saved_tensors
        return (
            grad_hidden * grad.to(grad_hidden.dtype),
            grad_weight * grad.to(grad_weight.dtype),
            None,
            None,
            None,
            None,
        )


class _LinearAtRows(torch.autograd.Function):
    """x @ w.T + b for `rows` (indices into the `total` rows of a layer's input) only. The weight and
    bias gradients are the products over all `total` rows, zero where no row was computed: the
    same reduction, so the same rounding, as the layer run on every row."""

    @staticmethod
    def forward(ctx, x, weight, bias, rows, total):
        ctx.save_for_backward(x, weight, rows)
        ctx.total, ctx.has_bias = total, bias is not None
        return torch.addmm(bias, x, weight.t()) if bias is not None else torch.mm(x, weight.t())

    @staticmethod
    def backward(ctx, grad):
        x, weight, rows = ctx.saved_tensors
        every_grad = grad.new_zeros(ctx.total, grad.shape[1]).index_copy_(0, rows, grad)
        every_x = x.new_zeros(ctx.total, x.shape[1]).index_copy_(0, rows, x)
        return (grad.mm(weight), every_grad.t().mm(every_x), every_grad.sum(0) if ctx.has_bias else None, None, None)


class _ScaleAtRows(torch.autograd.Function):
    """y * weight for the rows `rows` of a [B, T, d] activation (`shape`); the weight's gradient is
    the sum over the whole [B, T, d] activation, zero where no row was computed (the same
    reduction as the layer run on every row)."""

    @staticmethod
    def forward(ctx, y, weight, rows, shape):
        ctx.save_for_backward(y, weight, rows)
        ctx.shape = shape
        return y * weight

    @staticmethod
    def backward(ctx, grad):
        y, weight, rows = ctx.saved_tensors
        every = grad.new_zeros(ctx.shape)
        every.view(-1, ctx.shape[-1]).index_copy_(0, rows, grad * y)
        return grad * weight, every.sum(tuple(range(len(ctx.shape) - 1))), None, None


class _BlockAttention(torch.autograd.Function):
    """Attention of each query block [start, end) to its keys [lo, hi) only, on the CPU flash kernel."""

    @staticmethod
    def forward(ctx, q, k, v, bias, blocks):
        B, H, T, D = q.shape
        out = q.new_empty(B, T, H, D).transpose(1, 2)  # the layout the next projection reads
        lse = None
        for start, end, lo, hi in blocks:
            o, block_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                q[:, :, start:end], k[:, :, lo:hi], v[:, :, lo:hi], attn_mask=bias[:, :, start:end, lo:hi]
            )
            if lse is None:
                lse = block_lse.new_empty(B, H, T)
            out[:, :, start:end], lse[:, :, start:end] = o, block_lse
        ctx.save_for_backward(q, k, v, bias, out, lse)
        ctx.blocks = blocks
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, bias, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for start, end, lo, hi in ctx.blocks:
            gq, gk, gv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
                grad[:, :, start:end],
                q[:, :, start:end],
                k[:, :, lo:hi],
                v[:, :, lo:hi],
                out[:, :, start:end],
                lse[:, :, start:end],
                0.0,
                False,
                attn_mask=bias[:, :, start:end, lo:hi],
            )
            dq[:, :, start:end] = gq
            dk[:, :, lo:hi] += gk  # the key windows of neighbouring blocks overlap
            dv[:, :, lo:hi] += gv
        return dq, dk, dv, None, None


def attention_plan(mask: Tensor, block: int = QUERY_BLOCK, max_work: float = 0.5):
    """For a boolean mask [B, 1, T, S] (True = attend): (the additive float mask, made once for all
    layers; [(start, end, lo, hi)] per block of `block` queries, with every key a query of the block
    may see, in any row, in [lo, hi)). The blocks are None when they would still compute more than
    `max_work` of the full T x S scores (long samples): then plain SDPA is as fast. None off the CPU.

    One window for all rows: per row or per group of rows, the extra kernel calls cost what the
    narrower windows save (measured with benchmarks/train.py)."""
    if mask.device.type != "cpu" or torch.compiler.is_compiling():
        return None
    T, S = mask.shape[-2:]
    visible = mask.flatten(0, -3).view(torch.uint8)  # [B * heads, T, S]; argmax finds the first 1
    first = visible.argmax(-1).amin(0).tolist()  # (a query that sees no key gets the whole row)
    last = (S - 1 - visible.flip(-1).argmax(-1)).amax(0).tolist()
    blocks = []
    for start in range(0, T, block):
        end = min(T, start + block)
        blocks.append((start, end, min(first[start:end]), max(last[start:end]) + 1))
    if sum((e - s) * (h - lo) for s, e, lo, h in blocks) > max_work * T * S:
        blocks = None
    return torch.zeros(mask.shape, dtype=torch.float32).masked_fill_(~mask, float("-inf")), blocks


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, plan=None) -> Tensor:
    """F.scaled_dot_product_attention(q, k, v, attn_mask=mask) for q, k, v [B, H, T, D]; with the
    `attention_plan(mask)`, only the keys each query block may see are computed."""
    if plan is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    bias, blocks = plan
    bias = bias.to(torch.promote_types(q.dtype, torch.float32))
    if blocks is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return _BlockAttention.apply(q, k, v, bias, blocks)


def linear_at_rows(x: Tensor, layer: torch.nn.Linear, rows: Tensor, total: int) -> Tensor:
    """layer(x) for x [N, in]: the rows `rows` [N] of an input of `total` rows (see _LinearAtRows)."""
    return _LinearAtRows.apply(x, layer.weight, layer.bias, rows, total)


def scale_at_rows(y: Tensor, weight: Tensor, rows: Tensor, shape) -> Tensor:
    """y * weight for y [N, d]: the rows `rows` [N] of an activation of `shape` (see _ScaleAtRows)."""
    return _ScaleAtRows.apply(y, weight, rows, tuple(shape))


# Under torch.compile the composites: the compiler fuses them itself, and the functions' `out=`
# writes into strided halves would break the graph (dynamo cannot trace them).
def relu_squared(x: Tensor) -> Tensor:
    if torch.compiler.is_compiling():
        return F.relu(x).square()
    return _ReLUSquared.apply(x)


def rms_norm(x: Tensor) -> Tensor:
    if torch.compiler.is_compiling():
        return F.rms_norm(x, (x.shape[-1],))
    return _RMSNorm.apply(x)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x [..., D] with cos, sin [..., D/2] broadcasting against x's halves."""
    if torch.compiler.is_compiling():
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)
    return _Rotate.apply(x, cos, sin)


def norm_rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """rotate(rms_norm(x), cos, sin) for x [B, H, T, D], cos and sin [B or 1, 1 or H, T, D/2]."""
    if (
        x.device.type == "cpu"
        and x.dim() == 4
        and cos.dim() == 4
        and x.dtype == cos.dtype == sin.dtype == torch.float32
        and x.stride(-1) == cos.stride(-1) == sin.stride(-1) == 1
        and not torch.compiler.is_compiling()
        and torch.get_num_threads() == 1
        and _kernels_agree(x.shape[-1])
    ):
        return _NormRotate.apply(x, cos, sin)
    return rotate(rms_norm(x), cos, sin)


@functools.cache
def _kernels_agree(head_size: int) -> bool:
    """Whether the C kernels exist here and give PyTorch's bits, forward and backward, on a probe of
    strided keys of `head_size` (ordinary, huge, tiny and zero rows) and broadcast angles."""
    if cpu_kernels.library() is None:
        return False
    with torch.inference_mode(False), torch.enable_grad():  # the first call may come from generation
        generator = torch.Generator().manual_seed(0)
        qkv = torch.randn(2, 7, 3, 3, head_size, generator=generator)  # [B, T, qkv, H, D]
        qkv[0, 1] *= 1e30
        qkv[0, 2] *= 1e-30
        qkv[1, 3] = 0.0
        x = qkv[:, :, 1].transpose(1, 2)  # [B, H, T, D], strided like a model's keys
        angles = torch.rand(2, 1, 7, head_size // 2, generator=generator) * 50
        cos, sin = angles.cos(), angles.sin()
        grad = torch.randn(x.shape, generator=generator)
        outputs = []
        for function in (lambda t: rotate(rms_norm(t), cos, sin), lambda t: _NormRotate.apply(t, cos, sin)):
            leaf = x.detach().requires_grad_()
            y = function(leaf)
            y.backward(grad)
            outputs.append((y.detach(), leaf.grad))
    agree = all(torch.equal(a, b) for a, b in zip(*outputs))
    if not agree:
        warnings.warn(
            "workbench: the C kernels' QK-norm + RoPE differ from PyTorch's in the last bits on this "
            "machine; the PyTorch path runs (the same numbers as elsewhere, a few percent slower)",
            RuntimeWarning,
            stacklevel=2,
        )
    return agree


def chunk_elements(device: torch.device) -> int:
    """Logits per chunk of `linear_cross_entropy`. A CPU: 2^21 (8 MB in float32, the chunk stays in
    cache). A GPU: 2^26 (256 MiB in float32): large products, and the [V, d] weight gradient read
    and written once per chunk, ~15 times a micro-batch at V = 50k (a few GB of traffic, ~2 ms on
    an H100), while a chunk's float32 logits stay a quarter of what 2^28 held (benchmarks/gpu.py)."""
    return 1 << 26 if device.type == "cuda" else 1 << 21


def linear_cross_entropy(
    hidden: Tensor, weight: Tensor, targets: Tensor, row_weights: Tensor | None = None, chunk_elements: int = 1 << 21
) -> tuple[Tensor, Tensor]:
    """(sum over rows of row_weight x the cross-entropy of logits hidden [N, d] @ weight[V, d].T
    against targets [N], and each row's unweighted cross-entropy [N], detached), in chunks of about
    `chunk_elements` logits (8 MB in float32: the chunk stays in a CPU's cache; `chunk_elements(device)`)."""
    if hidden.ndim != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden must be [N, d] and targets [N]; got {tuple(hidden.shape)} and {tuple(targets.shape)}")
    if row_weights is None:
        row_weights = torch.ones(hidden.shape[0], device=hidden.device)
    if row_weights.shape != targets.shape:
        raise ValueError(f"row_weights must be [N] like targets; got {tuple(row_weights.shape)}")
    want_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    return _LinearCrossEntropy.apply(
        hidden, weight, targets, row_weights.detach(), max(1, chunk_elements // weight.shape[0]), want_grad
    )
