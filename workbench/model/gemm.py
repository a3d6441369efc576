"""The workbench's own matrix products: torch's CPU `mm` family on cpu_kernels.c's GEMM, under
portable numerics.

MKL gives the same bits on Intel and AMD CPUs in one branch only, its COMPATIBLE (SSE2) code, which
made a cpu-tiny training step 2x slower than MKL's own choice; and even there the identity is MKL's
promise, not something its code shows. cpu_kernels.c's `gemm_f32` defines each output element as one
chain of fused multiply-adds, in increasing k from +0.0, whatever the shapes, strides and tiling, so
its bits follow from IEEE arithmetic alone: the same on every CPU with AVX2 and FMA, by construction.
Its AVX2 kernel runs about as fast as MKL's own branch on one thread (benchmarks/gemm_speed.py); with
more torch threads a large product is split by rows (or batch) among them, each element still its
own chain, so the bits do not depend on the thread count either.

`register()` (called by numerics.ensure("portable"), once per process, before a run computes)
replaces the CPU kernels of these aten operators, so every path to them takes it: F.linear (addmm,
or mm/bmm after folding), autograd's backward formulas, torch.matmul, Muon's Newton-Schulz
iterations, the fused loss's `mm(out=)` and torch.compile's extern kernels (the `.out` overloads):

    mm, mm.out                              C = A @ B
    addmm, addmm.out, addmm_                beta * input + alpha * (A @ B)
    bmm, bmm.out                            C[b] = A[b] @ B[b]
    baddbmm, baddbmm.out, baddbmm_          beta * input + alpha * (A[b] @ B[b])

Semantics, exactly: the product P is the chain; `addmm`'s result is then, in torch's element-wise
ops (each one IEEE rounding), P * alpha (skipped when alpha == 1; when alpha == 0 the product is not
computed, as BLAS does not), then + input * beta (input as is when beta == 1; when beta == 0 input is
not read, so a NaN there does not propagate, as in torch). float64 takes `gemm_f64`, the same chain
with double fma. bfloat16 and float16 are computed in float32 (inputs widened exactly, every step
above in float32) and rounded once to the dtype at the end, as torch's own CPU kernels accumulate
them in float32. Integer dtypes are exact sums of products (order does not matter for integers).
Other dtypes (complex, bool) are refused in one line.

Some matrix products stay MKL's, in its COMPATIBLE branch: those inside ATen's own kernels (the CPU
flash attention's blocks, `_addmm_activation`), and the vector products (mv, addmv, dot).

torch warns, in a UserWarning of ten lines at every run's start, that a kernel was overridden: the
override is the point, so register() silences that warning (warnings.catch_warnings around the
registration), and only it.

Native numerics never register: there torch keeps MKL's kernels. Without the C library
(`WORKBENCH_CPU_KERNELS=0`, no compiler) nothing is registered either, and the products run in
MKL's COMPATIBLE branch, with other bits: `numerics.state()` records which ("gemm": "workbench" or
"mkl") in each run's environment.json.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import Tensor

from . import cpu_kernels

_registered: torch.library.Library | None = None  # kept alive: dropping it removes the kernels
_f32 = _f64 = None
_FLOAT = (torch.float32, torch.float64)
_HALF = (torch.bfloat16, torch.float16)
_INTEGER = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def active() -> bool:
    """Whether this process's CPU matrix products are the workbench's."""
    return _registered is not None


def kind() -> str:
    """Which code does this process's CPU matrix products: workbench, mkl or torch (no MKL)."""
    if active():
        return "workbench"
    return "mkl" if torch.backends.mkl.is_available() else "torch"


def register() -> bool:
    """Replace the CPU kernels of the mm family with the workbench's GEMM (once per process; see
    the module's docstring). Returns whether they are the workbench's (False without the C
    library)."""
    global _registered, _f32, _f64
    if _registered is not None:
        return True
    lib = cpu_kernels.library()
    if lib is None:
        return False
    _f32, _f64 = lib.gemm_f32, lib.gemm_f64
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # torch warns once per operator that a kernel is overridden: what this module is for
        warnings.filterwarnings("ignore", message=r"(?s).*previously registered kernel")
        for name, function in KERNELS.items():
            library.impl(name, function, "CPU")
    _registered = library
    return True


def _shape(op: str, a: Tensor, b: Tensor, batched: bool) -> tuple:
    """The product's shape, [M, N] or [batch, M, N], after torch's checks of the operands."""
    dims = 3 if batched else 2
    if a.dim() != dims or b.dim() != dims:
        raise RuntimeError(f"{op}: expected {dims}-D tensors, got {a.dim()}-D and {b.dim()}-D")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{op}: expected both matrices to have the same dtype, but got {a.dtype} != {b.dtype}")
    if batched and a.shape[0] != b.shape[0]:
        raise RuntimeError(f"{op}: batch sizes differ: {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(
            f"{op}: mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, a.shape[-2:]))} and "
            f"{'x'.join(map(str, b.shape[-2:]))})"
        )
    if a.dtype not in _FLOAT + _HALF + _INTEGER:
        raise RuntimeError(
            f"{op}: the workbench's GEMM (portable numerics) computes float32, float64, bfloat16, float16 "
            f"and integer products, not {a.dtype}; compute it under WORKBENCH_NUMERICS=native"
        )
    return (*a.shape[:-1], b.shape[-1])


def _product(a: Tensor, b: Tensor, shape: tuple, into: Tensor | None = None) -> Tensor:
    """A @ B (checked by _shape) as the defined chain: contiguous, in `into` when given (contiguous,
    of the operands' dtype and the product's shape, overlapping neither)."""
    dtype = a.dtype
    if dtype in _HALF:
        wide = _product(a.float(), b.float(), shape)
        return wide.to(dtype) if into is None else into.copy_(wide)
    if dtype in _INTEGER:  # exact: any order of the sums gives the same integers
        exact = (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2, dtype=dtype)
        return exact if into is None else into.copy_(exact)
    c = torch.empty(shape, dtype=dtype) if into is None else into
    if c.numel():
        a, b = a.resolve_neg(), b.resolve_neg()  # a lazily negated view's memory holds the unnegated values
        if len(shape) == 2:
            batch, (m, k), n, sa, sb = 1, a.shape, shape[1], (0, *a.stride()), (0, *b.stride())
        else:
            (batch, m, k), n, sa, sb = a.shape, shape[2], a.stride(), b.stride()
        _run(_f32 if dtype == torch.float32 else _f64, batch, m, n, k, a, sa, b, sb, c)
    return c


# Products of at least this many multiply-adds are split among torch's threads (when it has more
# than one): by rows, or by batch. Each output element is still its own chain, so the bits are those
# of one thread; below this a task's start-up would cost more than it saves.
PARALLEL = 1 << 22
_pool: tuple | None = None  # (process id, threads, executor): a forked child builds its own


def _run(function, batch, m, n, k, a, sa, b, sb, c) -> None:
    """The C product, on several threads for a large one (ctypes calls without the GIL)."""
    threads = torch.get_num_threads()
    pa, pb, pc, size = a.data_ptr(), b.data_ptr(), c.data_ptr(), c.element_size()
    parts = min(threads, batch if batch > 1 else m // 12) if batch * m * n * k >= PARALLEL else 1
    if parts < 2:
        if function(batch, m, n, k, pa, *sa, pb, *sb, pc):
            raise MemoryError("the workbench's GEMM found no memory for its packing buffer")
        return
    global _pool
    if _pool is None or _pool[:2] != (os.getpid(), threads):
        _pool = (os.getpid(), threads, ThreadPoolExecutor(threads, thread_name_prefix="workbench-gemm"))
    if batch > 1:
        cuts = [batch * i // parts for i in range(parts + 1)]
        calls = [
            (
                cuts[i + 1] - cuts[i],
                m,
                pa + cuts[i] * sa[0] * size,
                pb + cuts[i] * sb[0] * size,
                pc + cuts[i] * m * n * size,
            )
            for i in range(parts)
        ]
    else:  # whole rows of C, in multiples of the kernel's 6
        cuts = [m * i // parts // 6 * 6 for i in range(parts)] + [m]
        calls = [
            (1, cuts[i + 1] - cuts[i], pa + cuts[i] * sa[1] * size, pb, pc + cuts[i] * n * size) for i in range(parts)
        ]
    done = _pool[2].map(lambda call: function(call[0], call[1], n, k, call[2], *sa, call[3], *sb, call[4]), calls)
    if any(list(done)):
        raise MemoryError("the workbench's GEMM found no memory for its packing buffer")


def _into(out: Tensor, shape: tuple, dtype: torch.dtype, *reads: Tensor) -> Tensor | None:
    """`out`, resized to `shape` as torch's out= variants do, if the product can be written straight
    into it (contiguous, of the product's dtype, sharing no storage with what the op reads)."""
    if tuple(out.shape) != shape:
        out.resize_(shape)
    if out.dtype != dtype or dtype not in _FLOAT or not out.is_contiguous():
        return None
    mine = out.untyped_storage().data_ptr()
    if any(t.untyped_storage().data_ptr() == mine for t in reads):
        return None
    return out


def _finish(out: Tensor, result: Tensor, inplace: bool = False) -> Tensor:
    """`result` copied into `out` (resized as torch's out= variants are; an in-place op's self never is)."""
    if out.dtype != result.dtype:
        raise RuntimeError(f"expected out to have dtype {result.dtype}, but got {out.dtype}")
    if out.shape != result.shape:
        if inplace:
            raise RuntimeError(
                f"the in-place result of shape {tuple(result.shape)} does not fit self {tuple(out.shape)}"
            )
        out.resize_(result.shape)
    return out.copy_(result)


def _matmul(op: str, a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    shape = _shape(op, a, b, batched=op.startswith("bmm"))
    if out is None:
        return _product(a, b, shape)
    target = _into(out, shape, a.dtype, a, b)
    return _product(a, b, shape, target) if target is not None else _finish(out, _product(a, b, shape))


def _addmm(op: str, input: Tensor, a: Tensor, b: Tensor, beta, alpha, out: Tensor | None = None) -> Tensor:
    """input * beta + (A @ B) * alpha in the module's order (its docstring)."""
    shape = _shape(op, a, b, batched=op.startswith("baddbmm"))
    if input.dtype != a.dtype:
        raise RuntimeError(f"{op}: expected self and mat2 to have the same dtype, but got {input.dtype} != {a.dtype}")
    if len(input.shape) > len(shape) or any(s not in (1, t) for s, t in zip(input.shape[::-1], shape[::-1])):
        raise RuntimeError(f"{op}: the input of shape {tuple(input.shape)} does not broadcast to {shape}")
    dtype, target = a.dtype, None
    if dtype in _HALF:  # float32 throughout, rounded once at the end
        a, b, input = a.float(), b.float(), input.float()
    elif out is not None:
        target = _into(out, shape, dtype, a, b, input)
    if alpha == 0:  # BLAS reads neither matrix: a NaN there stays out
        result = target.zero_() if target is not None else torch.zeros(shape, dtype=a.dtype)
    else:
        result = _product(a, b, shape, target)
        if alpha != 1:
            result.mul_(alpha)
    if beta != 0:
        result.add_(input if beta == 1 else input * beta)
    if dtype in _HALF:
        result = result.to(dtype)
    return result if out is None or result is out else _finish(out, result)


def mm(self: Tensor, mat2: Tensor) -> Tensor:
    return _matmul("mm", self, mat2)


def mm_out(self: Tensor, mat2: Tensor, *, out: Tensor) -> Tensor:
    return _matmul("mm.out", self, mat2, out)


def bmm(self: Tensor, mat2: Tensor) -> Tensor:
    return _matmul("bmm", self, mat2)


def bmm_out(self: Tensor, mat2: Tensor, *, out: Tensor) -> Tensor:
    return _matmul("bmm.out", self, mat2, out)


def addmm(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    return _addmm("addmm", self, mat1, mat2, beta, alpha)


def addmm_out(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1, out: Tensor) -> Tensor:
    return _addmm("addmm.out", self, mat1, mat2, beta, alpha, out)


def addmm_(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    return _finish(self, _addmm("addmm_", self, mat1, mat2, beta, alpha), inplace=True)


def baddbmm(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    return _addmm("baddbmm", self, batch1, batch2, beta, alpha)


def baddbmm_out(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1, out: Tensor) -> Tensor:
    return _addmm("baddbmm.out", self, batch1, batch2, beta, alpha, out)


def baddbmm_(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    return _finish(self, _addmm("baddbmm_", self, batch1, batch2, beta, alpha), inplace=True)


KERNELS = {
    "mm": mm,
    "mm.out": mm_out,
    "addmm": addmm,
    "addmm.out": addmm_out,
    "addmm_": addmm_,
    "bmm": bmm,
    "bmm.out": bmm_out,
    "baddbmm": baddbmm,
    "baddbmm.out": baddbmm_out,
    "baddbmm_": baddbmm_,
}
