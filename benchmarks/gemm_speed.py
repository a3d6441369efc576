"""One float32 product, three ways: MKL's own branch, MKL's COMPATIBLE branch, the workbench's GEMM.

    python benchmarks/gemm_speed.py [--repeats 7]

On one thread, for the shapes a cpu-tiny training step multiplies most (torch.profiler, record_shapes):
1024x128 @ 128x512 and the forward, backward and Muon products, with A or B transposed as autograd
passes them. MKL's branch is fixed per process at its first product, so each branch is timed in a
child process of its own; each child also times cpu_kernels.c's gemm_f32 (built for x86-64-v3, as
portable numerics build it) on the same operands. Times
are CPU time of the timing thread (time.thread_time: a busy machine's other processes inflate them
less than wall time), the best of `--repeats` rounds. Prints milliseconds per product.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# M, K, N, A transposed, B transposed (as autograd passes them: a weight gradient's A, F.linear's B)
SHAPES = [
    (1024, 128, 512, False, False),
    (128, 128, 128, False, False),
    (1024, 128, 384, False, True),
    (1024, 384, 128, False, False),
    (384, 1024, 128, True, False),
    (512, 1024, 128, True, False),
    (128, 1024, 512, True, False),
    (256, 128, 2060, False, True),
    (2060, 256, 128, True, False),
]
CHILD = """
import json, os, sys, time, torch
from workbench.model import cpu_kernels
os.environ["WORKBENCH_NUMERICS"] = "portable"  # MKL's branch is set by now; the library built as portable builds it
torch.set_num_threads(1)
lib, repeats, rows = cpu_kernels.library(), int(sys.argv[1]), []
def best(f, n):
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(n):
            f()
        times.append((time.thread_time() - start) / n)
    return 1e3 * min(times)
for m, k, n, ta, tb in json.loads(sys.argv[2]):
    a = torch.randn(k, m).T if ta else torch.randn(m, k)
    b = torch.randn(n, k).T if tb else torch.randn(k, n)
    c = torch.empty(m, n)
    ours = lambda: lib.gemm_f32(1, m, n, k, a.data_ptr(), 0, *a.stride(), b.data_ptr(), 0, *b.stride(), c.data_ptr())
    mkl = lambda: torch.mm(a, b, out=c)
    ours(), mkl()
    count = max(3, int(5e7 / (m * n * k)))
    rows.append([best(mkl, count), best(ours, count)])
print(json.dumps(rows))
"""


def child(branch: str | None, repeats: int) -> list:
    """[[MKL ms, gemm_f32 ms], ...] in a process whose MKL runs `branch` (None: MKL's own choice)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "WORKBENCH_NUMERICS")}
    env |= {
        "WORKBENCH_NUMERICS": "native",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    }
    if branch:
        env["MKL_CBWR"] = branch
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(repeats), json.dumps(SHAPES)], env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    native, compatible = child(None, args.repeats), child("COMPATIBLE", args.repeats)
    print(f"{'product (one thread)':<32} {'MKL own ms':>10} {'MKL COMPAT ms':>13} {'workbench ms':>12}")
    for (m, k, n, ta, tb), (mkl, ours_a), (compat, ours_b) in zip(SHAPES, native, compatible):
        name = f"{m}x{k}{'(T)' if ta else ''} @ {k}x{n}{'(T)' if tb else ''}"
        print(f"{name:<32} {mkl:>10.3f} {compat:>13.3f} {min(ours_a, ours_b):>12.3f}")


if __name__ == "__main__":
    main()
