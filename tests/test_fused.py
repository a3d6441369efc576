"""The fused functions against PyTorch's composite versions: same values, same gradients."""

import pytest
import torch
import torch.nn.functional as F

from workbench.model.fused import attention_plan, linear_cross_entropy, masked_attention, relu_squared, rms_norm, rotate
from workbench.model.gpt import packed_mask


def composite_rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def angles(shape, gen):
    theta = torch.rand(*shape, generator=gen, dtype=torch.float64) * 6.3
    return theta.cos(), theta.sin()


CASES = {
    "relu_squared": (relu_squared, lambda x: F.relu(x).square(), lambda gen: ()),
    "rms_norm": (rms_norm, lambda x: F.rms_norm(x, (x.shape[-1],)), lambda gen: ()),
    "rotate": (rotate, composite_rotate, lambda gen: angles((3, 1, 5, 4), gen)),
}


@pytest.mark.parametrize("name", CASES)
def test_fused_matches_the_composite_in_value_and_gradient(name):
    fused, composite, extra = CASES[name]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 2, 5, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    args = extra(gen)
    grad_out = torch.randn(3, 2, 5, 8, generator=gen, dtype=torch.float64)
    got, want = fused(x, *args), composite(x, *args)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    (g_got,) = torch.autograd.grad(got, x, grad_out)
    (g_want,) = torch.autograd.grad(want, x, grad_out)
    assert torch.allclose(g_got, g_want, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda t: fused(t, *args), (x,))


def test_fused_norm_and_rotation_of_non_contiguous_float32_views():
    """Non-contiguous views (q, k are slices of the qkv projection) give the composite's result."""
    gen = torch.Generator().manual_seed(1)
    qkv = torch.randn(2, 7, 3, 2, 8, generator=gen).transpose(1, 3)  # [2, 2, 3, 7, 8] view
    q = qkv[:, :, 0]
    cos, sin = (t.float() for t in angles((2, 1, 7, 4), gen))
    assert torch.allclose(rotate(rms_norm(q), cos, sin), composite_rotate(F.rms_norm(q, (8,)), cos, sin), atol=1e-6)
    assert rotate(rms_norm(q), cos, sin).dtype == torch.float32


@pytest.mark.parametrize("chunk_elements", [7, 40, 1 << 21])
def test_linear_cross_entropy_matches_the_plain_loss(chunk_elements):
    gen = torch.Generator().manual_seed(2)
    hidden = torch.randn(13, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(9, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 9, (13,), generator=gen)
    row_weights = torch.rand(13, generator=gen, dtype=torch.float64) * 3
    got, per_row = linear_cross_entropy(hidden, weight, targets, row_weights, chunk_elements=chunk_elements)
    plain = F.cross_entropy(hidden @ weight.T, targets, reduction="none")
    want = (row_weights * plain).sum()
    assert got.dtype == torch.float64 and torch.allclose(got, want, rtol=1e-12)
    assert torch.allclose(per_row, plain.detach(), rtol=1e-12) and not per_row.requires_grad
    g_got = torch.autograd.grad(got * 3.0, (hidden, weight))
    g_want = torch.autograd.grad(want * 3.0, (hidden, weight))
    for a, b in zip(g_got, g_want):
        assert a.dtype == torch.float64 and torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_linear_cross_entropy_under_bf16_autocast_and_without_grad():
    gen = torch.Generator().manual_seed(3)
    hidden = torch.randn(50, 16, generator=gen, requires_grad=True)
    weight = torch.randn(30, 16, generator=gen, requires_grad=True)
    targets = torch.randint(0, 30, (50,), generator=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, _ = linear_cross_entropy(hidden, weight, targets, chunk_elements=64)
        want = F.cross_entropy((hidden @ weight.T).float(), targets, reduction="sum")
    assert torch.allclose(got, want, rtol=1e-3)
    g_got = torch.autograd.grad(got, (hidden, weight))
    g_want = torch.autograd.grad(want, (hidden, weight))
    for a, b in zip(g_got, g_want):
        assert a.dtype == torch.float32 and torch.allclose(a, b, rtol=0.02, atol=0.02 * b.abs().max().item())
    with torch.no_grad():
        assert torch.allclose(linear_cross_entropy(hidden, weight, targets)[0], got.detach(), rtol=1e-2)


def test_linear_cross_entropy_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="targets"):
        linear_cross_entropy(torch.zeros(4, 3), torch.zeros(5, 3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="row_weights"):
        linear_cross_entropy(torch.zeros(4, 3), torch.zeros(5, 3), torch.zeros(4, dtype=torch.long), torch.ones(3))


def random_packing(rows, T, longest, gen):
    """doc ids [rows, T] of samples 1..longest tokens long, packed back to back."""
    lengths = torch.randint(1, longest + 1, (rows, T), generator=gen)
    return torch.stack([torch.repeat_interleave(torch.arange(T), n)[:T] for n in lengths])


@pytest.mark.parametrize("longest, block", [(3, 4), (9, 8), (30, 16)])
def test_block_attention_matches_sdpa_with_the_full_mask(longest, block):
    """Same output and gradients as SDPA over the whole mask, in float64, for packed samples shorter
    and longer than a query block (T = 50 leaves a short last block)."""
    gen = torch.Generator().manual_seed(3)
    mask = packed_mask(random_packing(2, 50, longest, gen))
    plan = attention_plan(mask, block=block, max_work=1.0)
    assert plan[1] is not None and all(lo <= s and e <= hi for s, e, lo, hi in plan[1])
    q, k, v = (torch.randn(2, 3, 50, 4, generator=gen, dtype=torch.float64, requires_grad=True) for _ in range(3))
    got, want = masked_attention(q, k, v, mask, plan), F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    grad_out = torch.randn(2, 3, 50, 4, generator=gen, dtype=torch.float64)
    for g_got, g_want in zip(
        torch.autograd.grad(got, (q, k, v), grad_out), torch.autograd.grad(want, (q, k, v), grad_out)
    ):
        assert torch.allclose(g_got, g_want, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda *t: masked_attention(*t, mask, plan), (q, k, v), fast_mode=True)


def test_attention_plan_skips_only_hidden_keys_and_falls_back_for_long_samples():
    gen = torch.Generator().manual_seed(4)
    doc = random_packing(4, 256, 8, gen)
    mask = packed_mask(doc)
    bias, blocks = attention_plan(mask)
    for start, end, lo, hi in blocks:  # every visible key of the block is inside its window ...
        visible = mask[:, 0, start:end].any(1).any(0).nonzero().squeeze(1)
        assert lo == visible.min() and hi == visible.max() + 1
        assert end - 32 <= start and hi - lo <= end - start + 8  # ... which short samples keep narrow
    assert torch.equal(bias == 0, mask)
    long_mask = packed_mask(torch.zeros(4, 256, dtype=torch.long))
    long_plan = attention_plan(long_mask)
    assert long_plan[1] is None  # one long sample: nothing worth skipping, SDPA over the float mask
    for dtype in (torch.float64, torch.bfloat16):
        q, k, v = (torch.randn(4, 2, 256, 8, generator=gen, dtype=dtype) for _ in range(3))
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=long_mask)
        assert torch.equal(masked_attention(q, k, v, long_mask, long_plan), want)
    under_compile = torch.compile(lambda m: attention_plan(m) is None, backend="eager")
    assert under_compile(mask)


def test_block_attention_under_bf16_autocast():
    gen = torch.Generator().manual_seed(5)
    mask = packed_mask(random_packing(2, 64, 6, gen))
    q, k, v = (torch.randn(2, 2, 64, 8, generator=gen).bfloat16().requires_grad_() for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = masked_attention(q, k, v, mask, attention_plan(mask))
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert got.dtype == torch.bfloat16 and torch.allclose(got.float(), want.float(), atol=2e-2)
    got.float().sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
