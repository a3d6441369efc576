"""Keep freed memory in the process for the next training step instead of handing it back to the kernel.

glibc's malloc serves large blocks (above a threshold that grows only as far as the largest block
freed so far) with fresh pages from the kernel and returns them, or trims the heap's top, when they
are freed. A CPU training step allocates and frees the same activations, gradients and optimizer
temporaries of a few MB every step, so every step paid for hundreds of fresh pages: ~800 page
faults per cpu-tiny step, ~70 with the thresholds raised here, which made the steps 6 % faster
(benchmarks/allocator.py). Nothing computed changes: only where the bytes live.

Linux with glibc only (elsewhere, or with another malloc preloaded that ignores mallopt, nothing
happens). The cost: a process keeps up to `TRIM_BYTES` of freed heap after training instead of
returning it, and blocks up to `MMAP_BYTES` come from the heap for the rest of its life.
"""

from __future__ import annotations

import ctypes
import functools
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
MMAP_BYTES = 32 << 20  # glibc's largest allowed mmap threshold on 64-bit machines
TRIM_BYTES = 1 << 30


@functools.cache  # once per process
def keep_freed_memory(device: str = "cpu") -> bool:
    """Set glibc's mmap and trim thresholds for reuse when the steps run on `device` (a name or a
    torch.device; on a GPU the host allocates little per step: nothing is set); True if malloc took
    both settings."""
    if str(device).split(":")[0] != "cpu" or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # a libc without mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
