"""The C kernels of cpu_kernels.c, compiled on first use with the machine's C compiler.

On a CPU, QK-norm and RoPE are memory-bound: PyTorch reads and writes the [B, H, T, D] queries and
keys once per elementary op, seven times forward and eight backward, and at cpu-small they cost ~4 %
of a training step (benchmarks/train.py). The kernels do the same arithmetic in one pass forward and
two backward.

The library is built once per machine into the user's cache folder (`$WORKBENCH_CACHE`, else
`$XDG_CACHE_HOME/workbench`, else ~/.cache/workbench), written under a temporary name and renamed,
so concurrent runs never load a half-written file. `library()` returns None, and the PyTorch path
runs instead (the same numbers, more slowly), when `WORKBENCH_CPU_KERNELS=0`, when there is no C
compiler (`$CC`, else cc) or it fails, or when the built library does not load; the reason is
given once as a warning. fused.py decides, by a check bit for bit against PyTorch, whether to use it.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

SOURCE = Path(__file__).with_name("cpu_kernels.c")
# -march=native: the library is built for the machine that runs it (its name carries the host);
# -ffp-contract=off: no fused multiply-add but the source's fmaf, so the rounding is the source's.
FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC"]
POINTER, LONGS = ctypes.c_void_p, ctypes.POINTER(ctypes.c_long)
SIGNATURES = {  # C function: its arguments (n and strides are long[4] / long[3] arrays)
    "norm_rotate_forward": [LONGS, POINTER, LONGS, POINTER, LONGS, POINTER, LONGS, POINTER, LONGS, POINTER],
    "norm_rotate_backward_rotate": [LONGS, POINTER, LONGS, POINTER, LONGS, POINTER, LONGS, POINTER, LONGS,
                                    POINTER, LONGS, POINTER, POINTER],
    "norm_rotate_backward_norm": [LONGS, POINTER, POINTER, POINTER, LONGS, POINTER, LONGS, POINTER],
}


def cache_folder() -> Path:
    if os.environ.get("WORKBENCH_CACHE"):
        return Path(os.environ["WORKBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workbench"


def _skip(reason: str) -> None:
    warnings.warn(f"workbench: the C kernels are off ({reason}); the PyTorch path runs instead: the same "
                  "numbers, a few percent slower", RuntimeWarning, stacklevel=3)


@functools.cache  # once per process
def library() -> ctypes.CDLL | None:
    """The compiled kernels, or None (see the module's docstring)."""
    if os.environ.get("WORKBENCH_CPU_KERNELS", "1") == "0":
        return None
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        _skip(f"no C compiler {compiler!r} on the PATH")
        return None
    key = hashlib.sha256("\0".join([SOURCE.read_text(), compiler, *FLAGS, platform.machine(),
                                    platform.node()]).encode()).hexdigest()[:16]
    target = cache_folder() / f"cpu_kernels-{key}.so"
    try:
        if not target.exists():
            _build(compiler, target)
        try:
            lib = ctypes.CDLL(str(target))
        except OSError:  # a damaged file (renames are atomic, but disks are not): build it again
            _build(compiler, target)
            lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as err:
        _skip(f"building or loading {target} failed: {str(err).strip()[-300:]}")
        return None
    for name, arguments in SIGNATURES.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = arguments, None
    return lib


def _build(compiler: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    try:
        subprocess.run([compiler, *FLAGS, "-o", temporary, str(SOURCE), "-lm"], check=True, capture_output=True,
                       text=True, timeout=120)
        os.replace(temporary, target)  # whole or not at all; a concurrent build writes the same bytes
    except subprocess.CalledProcessError as err:
        raise subprocess.SubprocessError(err.stderr) from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def longs(values) -> ctypes.Array:
    return (ctypes.c_long * len(values))(*values)
