"""Portable numerics: the same bits from the same command on every x86-64 CPU.

A CPU run's last bits depend on which code does its sums. Two libraries pick that code by the CPU
they find: torch's vectorized kernels (AVX-512 on CPUs that have it, AVX2 on others) and MKL's
matrix products (a "branch" per instruction set and vendor). An Intel AVX-512 machine and an AMD
AVX2 one therefore train the same run apart, and a colleague on another machine cannot check a
number by rerunning it. Both choices can be pinned, and `portable` pins them:

- torch: `ATEN_CPU_CAPABILITY=avx2`, the AVX2 kernels, which every x86-64 CPU since 2013 runs;
- MKL: `MKL_CBWR=COMPATIBLE`, the branch MKL documents as giving the same results on Intel and
  compatible processors (`MKL_CBWR=AVX2` would not do: MKL honours it on Intel CPUs only);
- oneDNN (`ONEDNN_MAX_CPU_ISA=AVX2`) and numpy (`NPY_DISABLE_CPU_FEATURES`, its AVX-512 targets
  off), whose kernels the figures' arithmetic and any oneDNN path would otherwise pick by the CPU;
- the C kernels of cpu_kernels.c are built for x86-64-v3 (AVX2) instead of the machine's own.

`native` leaves every choice to the libraries (and honours the caller's own variables), which is
faster on some machines and is how every run published before this mode was made.

The libraries read these settings once, at their first computation, so they must be in place before
torch (or numpy) computes anything. `import workbench` applies the mode that `WORKBENCH_NUMERICS`
names (default: portable on x86-64, native elsewhere) to the environment, so every command, a
notebook kernel that imports the workbench first, an executor's worker and a torchrun child start
in it; a child inherits it through the environment. `ensure(mode)` is what training calls: it
applies the mode if nothing computed yet (MKL's branch can also be set through its own function
until its first product) and refuses, naming why, a process that already computes in the other.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys

# the mode itself (mode.py: what cpu_kernels.py needs, below the kernels this module registers)
from .mode import ENV, MODES, default, pinnable, requested  # noqa: F401

# The variables portable numerics set, and the names of the ones this module set itself (so that a
# later switch to native removes ours and never a variable the caller chose).
PORTABLE_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}
# numpy's dispatch targets above x86-64-v3, under the names of numpy 1.x and 2.x (numpy ignores a
# name it does not know)
NUMPY_OFF = "X86_V4 AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
OURS = "WORKBENCH_NUMERICS_SET"
# mkl_cbwr_get(MKL_CBWR_BRANCH)'s answers (mkl_cbwr.h)
MKL_BRANCHES = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX"}
MKL_BRANCHES |= {10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"}
MKL_COMPATIBLE, MKL_BRANCH = 3, 1


def _ours() -> set[str]:
    """The variables this module set that still hold its values (one the caller set since is theirs)."""
    ours = {**PORTABLE_ENV, "NPY_DISABLE_CPU_FEATURES": NUMPY_OFF}
    named = filter(None, os.environ.get(OURS, "").split(","))
    return {name for name in named if name in ours and os.environ.get(name) == ours[name]}


def apply(mode: str) -> list[str]:
    """Put `mode`'s variables into this process's environment (for its libraries, if they have not
    computed yet, and for every child it starts). Returns the conflicts: variables the caller set
    to other values, which portable numerics leave alone (`ensure` then refuses)."""
    if mode not in MODES:
        raise ValueError(f"--numerics {mode!r}: one of {', '.join(MODES)}")
    ours, conflicts = _ours(), []
    if mode == "native":
        for name in ours:
            os.environ.pop(name, None)
        ours = set()
    else:
        wanted = dict(PORTABLE_ENV)
        if "numpy" not in sys.modules:  # numpy reads it at import only
            wanted["NPY_DISABLE_CPU_FEATURES"] = NUMPY_OFF
        for name, value in wanted.items():
            have = os.environ.get(name)
            if have is None or name in ours:
                os.environ[name] = value
                ours.add(name)
            elif have.strip().lower() != value.lower() and name != "NPY_DISABLE_CPU_FEATURES":
                conflicts.append(f"{name}={have}")
    os.environ[ENV] = mode
    if ours:
        os.environ[OURS] = ",".join(sorted(ours))
    else:
        os.environ.pop(OURS, None)
    return conflicts


@functools.cache
def _mkl():
    """MKL's conditional-numerical-reproducibility functions, from the library torch links it into
    (None where torch has no MKL: other architectures, other builds)."""
    import torch

    for name in ("libtorch_cpu.so", "libtorch_cpu.dylib", "torch_cpu.dll"):
        path = os.path.join(os.path.dirname(torch.__file__), "lib", name)
        if os.path.exists(path):
            try:
                lib = ctypes.CDLL(path)
                get, put = lib.mkl_serv_cbwr_get, lib.mkl_serv_cbwr_set
            except (OSError, AttributeError):
                return None
            get.argtypes, get.restype, put.argtypes, put.restype = (
                [ctypes.c_int],
                ctypes.c_int,
                [ctypes.c_int],
                ctypes.c_int,
            )
            return get, put
    return None


def mkl_branch() -> str | None:
    """The code branch MKL's products take in this process (COMPATIBLE, OFF: its own choice by
    CPU, ...), None without MKL."""
    functions = _mkl()
    if functions is None:
        return None
    code = functions[0](MKL_BRANCH)
    return MKL_BRANCHES.get(code, str(code))


def state() -> dict:
    """How this process computes: the mode its libraries are in ("portable" when torch's kernels are
    AVX2 and MKL's branch the compatible one, else "native") and what decided it. Reading torch's
    capability fixes it for the process, as a first computation would."""
    import torch

    from . import gemm

    capability = torch.backends.cpu.get_cpu_capability()
    branch = mkl_branch()
    portable = capability == "AVX2" and branch in ("COMPATIBLE", None) and pinnable()
    return {
        "numerics": "portable" if portable else "native",
        "cpu_capability": capability,
        "mkl_branch": branch,
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
        "gemm": gemm.kind(),  # whose code does the matrix products: workbench (gemm.py), mkl, torch
    }


def ensure(mode: str) -> dict:
    """Make this process compute in `mode`, or refuse in one line why it cannot; returns `state()`.
    Called before a run trains: a run recorded as portable must have been computed so."""
    conflicts = apply(mode)
    if mode == "portable":
        if not pinnable():
            raise ValueError(
                f"--numerics portable pins x86-64's AVX2 kernels, and this CPU ({platform.machine()}) has "
                "none: pass --numerics native"
            )
        if conflicts:
            raise ValueError(
                f"--numerics portable: the environment sets {', '.join(conflicts)}; unset it, or pass --numerics native"
            )
        functions = _mkl()
        if functions is not None and functions[0](MKL_BRANCH) != MKL_COMPATIBLE:
            functions[1](MKL_COMPATIBLE)  # succeeds until MKL's first product in this process
    now = state()
    if mode == "portable" and now["numerics"] == "portable":
        from . import gemm

        gemm.register()  # the matrix products on the workbench's GEMM (gemm.py), from here on
        now["gemm"] = gemm.kind()
    if now["numerics"] != mode:
        raise ValueError(
            f"--numerics {mode}: this process already computes with {now['numerics']} numerics (torch's "
            f"kernels {now['cpu_capability']}, MKL's branch {now['mkl_branch']}), fixed at its first "
            f"computation: start a fresh process with {ENV}={mode} (the commands set it from --numerics)"
        )
    return now
