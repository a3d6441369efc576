"""Which numerics mode this process asks for (numerics.py says what the modes are): read from
`WORKBENCH_NUMERICS` and the CPU, without torch. Its own module because the C kernels' build
(cpu_kernels.py) needs it and numerics.py's `ensure` registers the GEMM built on those kernels."""

from __future__ import annotations

import os
import platform

MODES = ("portable", "native")
ENV = "WORKBENCH_NUMERICS"


def pinnable() -> bool:
    """Portable numerics need an x86-64 CPU with AVX2 (torch's and MKL's pinned code is x86-64's)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        return True  # not Linux: torch's own check (ensure) decides


def default() -> str:
    """The mode of a process whose caller named none: portable where it can be pinned."""
    return "portable" if pinnable() else "native"


def requested(strict: bool = True) -> str:
    """The mode `WORKBENCH_NUMERICS` names, else `default()` (also for a name that is not a mode,
    unless `strict`, which refuses it in one line)."""
    mode = os.environ.get(ENV, "").strip().lower() or default()
    if mode not in MODES:
        if strict:
            raise ValueError(f"{ENV}={os.environ[ENV]!r}: numerics are one of {', '.join(MODES)}")
        return default()
    return mode
