"""The workbench's GEMM (cpu_kernels.c's gemm_f32, gemm.py's aten kernels): every output element is
the defined chain of fused multiply-adds, checked against exact rational arithmetic; the same bits
whatever the shapes, strides and tiling; torch's mm family on it under portable numerics, with
torch's semantics; and never under native numerics."""

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tiny import tiny

from workbench.config import TrainConfig
from workbench.model import cpu_kernels, gemm, numerics
from workbench.training.train import train

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    not numerics.pinnable() or cpu_kernels.library() is None,
    reason="the workbench's GEMM needs an x86-64 CPU with AVX2 and a C compiler",
)


@pytest.fixture(scope="module")
def registered():
    """torch's mm family on the workbench's GEMM in this process, as training's numerics.ensure does
    (the test suite runs portably unless WORKBENCH_NUMERICS says otherwise)."""
    if numerics.requested(strict=False) != "portable":
        pytest.skip("the suite runs under native numerics: the aten kernels are MKL's")
    assert numerics.ensure("portable")["gemm"] == "workbench"
    assert gemm.active()


def call(function: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """cpu_kernels.c's `function` on [M, K] @ [K, N] or batched operands, read where they lie."""
    batched = a.dim() == 3
    shape = (*a.shape[:-1], b.shape[-1])
    c = torch.full(shape, float("nan"), dtype=a.dtype)  # every element must be written
    sa, sb = (a.stride(), b.stride()) if batched else ((0, *a.stride()), (0, *b.stride()))
    batch, m, k = a.shape if batched else (1, *a.shape)
    result = getattr(cpu_kernels.library(), function)(
        batch, m, b.shape[-1], k, a.data_ptr(), *sa, b.data_ptr(), *sb, c.data_ptr()
    )
    assert not result
    return c


def same_bits(x: torch.Tensor, y: torch.Tensor) -> bool:
    integer = {torch.float32: torch.int32, torch.float64: torch.int64}[x.dtype]
    return x.shape == y.shape and torch.equal(x.contiguous().view(integer), y.contiguous().view(integer))


def round_float32(x: Fraction) -> float:
    """The float32 nearest to x, ties to even (subnormals and overflow included)."""
    if x == 0:
        return 0.0
    sign, x = (-1 if x < 0 else 1), abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()  # 2^e <= x < 2^(e+2)
    if Fraction(2) ** e > x:
        e -= 1
    quantum = Fraction(2) ** (max(e, -126) - 23)
    rounded = round(x / quantum) * quantum  # Fraction's round: half to even
    return sign * (math.inf if rounded >= 2**128 else float(rounded))


def chain(a: np.ndarray, b: np.ndarray, wide: bool = False) -> np.ndarray:
    """The defined chain in exact arithmetic: acc = +0.0; acc = fma(a[i, k], b[k, j], acc), each
    step one rounding (to float32, or float64 with `wide`)."""
    rounding = float if wide else round_float32  # float(Fraction) rounds to the nearest double, ties to even
    c = np.zeros((a.shape[0], b.shape[1]), dtype=np.float64 if wide else np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = 0.0
            for k in range(a.shape[1]):
                acc = rounding(Fraction(float(a[i, k])) * Fraction(float(b[k, j])) + Fraction(acc))
            c[i, j] = acc
    return c


def operands(m, k, n, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g, dtype=dtype), torch.randn(k, n, generator=g, dtype=dtype)


def test_the_reference_is_the_exact_chain_of_fused_multiply_adds():
    """The scalar reference against exact arithmetic, on values whose sums cancel, underflow to
    subnormals and carry ties: one rounding per step, none per product (an unfused a*b + c fails)."""
    g = torch.Generator().manual_seed(1)
    for m, k, n in [(1, 1, 1), (3, 5, 4), (5, 17, 3), (2, 40, 2)]:
        a = torch.randn(m, k, generator=g) * torch.logspace(-3, 3, k)
        b = torch.randn(k, n, generator=g)
        if k > 4:
            a[0, :4], b[:4, 0] = torch.tensor([1.0, 2.0**-24, -1.0, 3.0]), torch.tensor([1.0 + 2.0**-23, 1.0, 1.0, 0.0])
            a[-1, 1] = 2.0**-140  # a subnormal product
        assert np.array_equal(call("gemm_f32_reference", a, b).numpy(), chain(a.numpy(), b.numpy()))
    # the fused step differs from a rounded product then a sum: the oracle tells them apart
    x, y = torch.tensor([[1.0 + 2.0**-12]]), torch.tensor([[1.0 - 2.0**-12]])
    assert call("gemm_f32_reference", x, y).item() == round_float32(Fraction(1) - Fraction(2) ** -24)


def test_float64_is_the_same_chain_with_double_fma():
    a, b = operands(4, 23, 5, seed=2, dtype=torch.float64)
    assert np.array_equal(call("gemm_f64", a, b).numpy(), chain(a.numpy(), b.numpy(), wide=True))


SHAPES = [(1, 1, 1), (7, 3, 17), (6, 256, 16), (13, 257, 33), (145, 600, 50), (5, 300, 3100), (64, 1000, 64)]


@pytest.mark.parametrize("m, k, n", SHAPES)
@pytest.mark.parametrize("layout", ["rows", "a transposed", "b transposed", "both transposed", "strided"])
def test_the_fast_kernel_gives_the_references_bits(m, k, n, layout):
    """Every edge of the AVX2 kernel's tiling (M % 6, N % 16, K past one block, N past one panel
    block) and every layout the aten kernels pass: the same bits as the scalar chain."""
    g = torch.Generator().manual_seed(m * n + k)
    a = (
        torch.randn(k, m, generator=g).T
        if "a transposed" in layout or "both" in layout
        else torch.randn(m, k, generator=g)
    )
    b = (
        torch.randn(n, k, generator=g).T
        if "b transposed" in layout or "both" in layout
        else torch.randn(k, n, generator=g)
    )
    if layout == "strided":
        a, b = torch.randn(2 * m, 3 * k, generator=g)[::2, ::3], torch.randn(k, 2 * n + 1, generator=g)[:, 1::2]
    assert same_bits(call("gemm_f32", a, b), call("gemm_f32_reference", a, b))
    assert torch.allclose(call("gemm_f32", a, b), (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-3)


def test_the_bits_do_not_depend_on_the_tiling():
    """An element's value is its chain, not its tile's: the blocks of a product, cut anywhere, are
    products of the blocks, bit for bit."""
    a, b = operands(151, 531, 203, seed=3)
    whole = call("gemm_f32", a, b)
    for i0, i1, j0, j1 in [(0, 1, 0, 1), (5, 11, 3, 19), (6, 151, 16, 203), (100, 151, 0, 17), (1, 150, 1, 202)]:
        assert same_bits(call("gemm_f32", a[i0:i1].contiguous(), b[:, j0:j1].contiguous()), whole[i0:i1, j0:j1])
    # each row alone, each column alone
    assert same_bits(torch.cat([call("gemm_f32", a[i : i + 1], b) for i in range(a.shape[0])]), whole)
    assert same_bits(torch.cat([call("gemm_f32", a, b[:, j : j + 1]) for j in range(b.shape[1])], 1), whole)


def test_broadcast_and_batched_operands():
    g = torch.Generator().manual_seed(4)
    row = torch.randn(1, 37, generator=g).expand(9, 37)  # stride 0 along M
    b = torch.randn(37, 20, generator=g)
    assert same_bits(call("gemm_f32", row, b), call("gemm_f32", row.contiguous(), b))
    a3 = torch.randn(3, 9, 37, generator=g)
    b3 = torch.randn(37, 20, generator=g).expand(3, 37, 20)  # stride 0 along the batch
    c3 = call("gemm_f32", a3, b3)
    assert all(same_bits(c3[i], call("gemm_f32", a3[i], b3[i])) for i in range(3))


def test_empty_dimensions():
    for m, k, n in [(0, 4, 3), (3, 4, 0), (3, 0, 5), (0, 0, 0)]:
        a, b = torch.randn(m, k), torch.randn(k, n)
        c = call("gemm_f32", a, b)
        assert c.shape == (m, n) and torch.equal(c, torch.zeros(m, n))  # K = 0: zeros


# torch's kernels on it


def test_torchs_products_are_the_chain(registered):
    a, b = operands(70, 129, 45, seed=5)
    reference = call("gemm_f32_reference", a, b)
    assert same_bits(torch.mm(a, b), reference) and same_bits(a @ b, reference)
    assert same_bits(torch.matmul(a, b), reference)
    out = torch.empty(3)  # resized, as torch's out= variants are
    assert same_bits(torch.mm(a, b, out=out), reference) and same_bits(out, reference)
    out = torch.empty(45, 70).T  # not contiguous: written through
    torch.mm(a, b, out=out)
    assert same_bits(out, reference)
    square = a[:45, :45].clone()
    expected = call("gemm_f32_reference", square, square)
    torch.mm(square, square, out=square)  # the output is an operand
    assert same_bits(square, expected)
    a3, b3 = torch.randn(4, 7, 33), torch.randn(4, 33, 18)
    expected = torch.stack([call("gemm_f32_reference", x, y) for x, y in zip(a3, b3)])
    assert same_bits(torch.bmm(a3, b3), expected) and same_bits(a3 @ b3, expected)
    assert same_bits(torch.bmm(a3, b3, out=torch.empty(0)), expected)


def test_addmm_follows_torchs_semantics_in_the_documented_order(registered):
    a, b = operands(20, 33, 12, seed=6)
    bias, full = torch.randn(12), torch.randn(20, 12)
    product = call("gemm_f32_reference", a, b)
    exact = a.double() @ b.double()
    for input in (bias, full, torch.randn(20, 1)):
        assert same_bits(torch.addmm(input, a, b), product + input)
        got = torch.addmm(input, a, b, beta=0.5, alpha=-3.0)
        assert same_bits(got, product * -3.0 + input * 0.5)  # P * alpha, then + input * beta
        assert torch.allclose(got.double(), 0.5 * input.double() + -3.0 * exact, rtol=1e-5, atol=1e-4)
    nan = torch.full((20, 12), float("nan"))
    assert same_bits(torch.addmm(nan, a, b, beta=0), product)  # beta = 0 ignores the input, NaN included
    assert same_bits(torch.addmm(full, a * float("nan"), b, alpha=0, beta=2.0), full * 2.0)  # alpha = 0: no product
    assert torch.addmm(bias, torch.randn(20, 0), torch.randn(0, 12)).equal(bias.expand(20, 12))  # K = 0
    x = full.clone()
    assert x.addmm_(a, b) is not None and same_bits(x, product + full)
    out = torch.empty(1)
    torch.addmm(bias, a, b, beta=2.0, out=out)
    assert same_bits(out, product + bias * 2.0)
    y = full.clone()
    torch.addmm(y, a, b, out=y)  # the output is the input
    assert same_bits(y, product + full)
    with pytest.raises(RuntimeError):
        torch.addmm(torch.randn(3), a, b)  # does not broadcast


def test_baddbmm_and_linear_layers_forward_and_backward(registered):
    g = torch.Generator().manual_seed(7)
    input, a3, b3 = (
        torch.randn(5, 1, 9, generator=g),
        torch.randn(5, 6, 11, generator=g),
        torch.randn(5, 11, 9, generator=g),
    )
    products = torch.stack([call("gemm_f32_reference", x, y) for x, y in zip(a3, b3)])
    assert same_bits(torch.baddbmm(input, a3, b3, alpha=0.25, beta=-1.0), products * 0.25 + input * -1.0)
    assert torch.allclose(
        torch.baddbmm(input, a3, b3).double(), input.double() + a3.double() @ b3.double(), rtol=1e-5, atol=1e-5
    )
    # nn.Linear on a [B, T, d] input: addmm forward, mm backward, each product the chain
    x = torch.randn(3, 10, 24, generator=g, requires_grad=True)
    w, bias = torch.randn(40, 24, generator=g, requires_grad=True), torch.randn(40, generator=g, requires_grad=True)
    y = F.linear(x, w, bias)
    grad = torch.randn(y.shape, generator=g)
    y.backward(grad)
    flat = x.detach().reshape(30, 24)
    assert same_bits(y.detach().reshape(30, 40), call("gemm_f32_reference", flat, w.detach().T) + bias.detach())
    assert same_bits(x.grad.reshape(30, 24), call("gemm_f32_reference", grad.reshape(30, 40), w.detach()))
    assert same_bits(w.grad, call("gemm_f32_reference", grad.reshape(30, 40).T, flat))


def test_other_dtypes_autograd_and_empty_operands(registered):
    a, b = operands(6, 9, 5, seed=8, dtype=torch.float64)
    assert np.array_equal(torch.mm(a, b).numpy(), chain(a.numpy(), b.numpy(), wide=True))
    assert torch.autograd.gradcheck(
        lambda x, y: torch.addmm(y[0], x, y, beta=0.5).sum(0), (a.requires_grad_(), b.requires_grad_())
    )
    assert torch.autograd.gradcheck(
        lambda x, y: torch.bmm(x, y), (a[None].detach().requires_grad_(), b[None].detach().requires_grad_())
    )
    a32, b32 = operands(6, 9, 5, seed=9)
    for dtype in (torch.bfloat16, torch.float16):  # float32 throughout, rounded once at the end
        x, y = a32.to(dtype), b32.to(dtype)
        assert torch.equal(torch.mm(x, y), call("gemm_f32", x.float(), y.float()).to(dtype))
        bias = torch.randn(5).to(dtype)
        assert torch.equal(torch.addmm(bias, x, y), (call("gemm_f32", x.float(), y.float()) + bias.float()).to(dtype))
    ints = torch.randint(-1000, 1000, (7, 8)), torch.randint(-1000, 1000, (8, 3))
    assert np.array_equal(torch.mm(*ints).numpy(), ints[0].numpy() @ ints[1].numpy())
    with pytest.raises(RuntimeError, match="workbench's GEMM"):
        torch.mm(torch.randn(2, 2, dtype=torch.complex64), torch.randn(2, 2, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(torch.randn(2, 3), torch.randn(4, 2))
    for m, k, n in [(0, 4, 3), (3, 4, 0), (3, 0, 5)]:
        assert torch.equal(torch.mm(torch.randn(m, k), torch.randn(k, n)), torch.zeros(m, n))
        assert torch.equal(torch.bmm(torch.randn(2, m, k), torch.randn(2, k, n)), torch.zeros(2, m, n))


def test_several_threads_give_one_threads_bits(registered):
    """A large product is split among torch's threads, by rows or by batch: the same bits."""
    a, b = operands(301, 200, 150, seed=11)
    a3, b3 = torch.randn(5, 64, 200), torch.randn(5, 200, 150).transpose(1, 2).contiguous().transpose(1, 2)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = torch.mm(a, b), torch.bmm(a3, b3)
        torch.set_num_threads(3)
        assert gemm.PARALLEL <= 301 * 200 * 150
        many = torch.mm(a, b), torch.bmm(a3, b3)
    finally:
        torch.set_num_threads(before)
    assert all(same_bits(x, y) for x, y in zip(one, many))
    assert same_bits(one[0], call("gemm_f32_reference", a, b))


def test_a_compiled_function_runs_on_it(registered):
    """torch.compile's extern kernels call the `.out` overloads: they run, with eager's values."""
    a, b, bias = *operands(33, 47, 21, seed=10), torch.randn(21)
    compiled = torch.compile(lambda x, y, z: torch.relu(torch.addmm(z, x, y)) @ y.T, dynamic=False)
    eager = torch.relu(torch.addmm(bias, a, b)) @ b.T
    assert torch.allclose(compiled(a, b, bias), eager, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_portable_run_trains_and_retraces_its_bits(registered, tmp_path):
    cfg = TrainConfig.of(**tiny(40, tasks=("addition",), eval_every=20))
    folders = [train(cfg.updated(out=str(tmp_path / name))) for name in ("a", "b")]
    metrics = [(folder / "metrics.jsonl").read_text().splitlines() for folder in folders]
    losses = [json.loads(line)["loss"] for line in metrics[0]]
    assert sum(losses[-5:]) < sum(losses[:5])
    strip = lambda lines: [{k: v for k, v in json.loads(line).items() if k != "time"} for line in lines]
    assert strip(metrics[0]) == strip(metrics[1])
    assert json.loads((folders[0] / "environment.json").read_text())["gemm"] == "workbench"


PROBE = """
import json, warnings, torch
warnings.simplefilter("error")  # torch's "overriding a previously registered kernel" stays unheard
from workbench.model import gemm, numerics
state = numerics.ensure(numerics.requested())
ours = "workbench/model/gemm.py" in torch._C._dispatch_dump("aten::mm")
print(json.dumps([state["gemm"], gemm.active(), ours]))
"""


@pytest.mark.parametrize("mode, expected", [("portable", ["workbench", True, True]), ("native", ["mkl", False, False])])
def test_only_portable_numerics_replace_torchs_kernels(mode, expected):
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", numerics.OURS)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env | {numerics.ENV: mode}, capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected
