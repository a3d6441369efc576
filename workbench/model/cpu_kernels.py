"""The C kernels of cpu_kernels.c, compiled on first use with the machine's C compiler.

On a CPU, QK-norm and RoPE are memory-bound: PyTorch reads and writes the [B, H, T, D] queries and
keys once per elementary op, seven times forward and eight backward, and at cpu-small they cost ~4 %
of a training step (benchmarks/train.py). The kernels do the same arithmetic in one pass forward and
two backward.

The library also holds the matrix products of portable numerics (gemm.py): `gemm_f32`, an AVX2
GEMM whose every output element is one chain of fused multiply-adds in increasing k, so its bits
follow from IEEE arithmetic alone, the same on every x86-64-v3 CPU (MKL promises that only in its
slow COMPATIBLE branch), at about the speed of MKL's own branch on one thread; `gemm_f64`, the same
chain in double; and `gemm_f32_reference`, the chain as a plain loop, for the tests.

The library is built once per machine into a folder private to the user, `cpu_kernels/` in the
user's cache folder (`$WORKBENCH_CACHE`, else `$XDG_CACHE_HOME/workbench`, else ~/.cache/workbench),
written under a temporary name and renamed, so concurrent runs never load a half-written file.
`library()` returns None, and the PyTorch path runs instead (the same numbers, more slowly; but the
matrix products of portable numerics then run in MKL's COMPATIBLE branch, with other bits), when
`WORKBENCH_CPU_KERNELS=0`, when there is no C compiler (`$CC`, else cc) or it fails, when the
built library does not load, or when the folder is not private (a link, another user's, or open
to others: chmod 700 it); the reason is given once as a warning. fused.py decides, by a check bit
for bit against PyTorch, whether to use it.

Loading a library runs its code, so nothing is loaded that this user's build did not write: the
folder must be the user's own with mode 0700, the file the user's and writable by nobody else,
and its SHA-256 must be the one recorded beside it when it was built. A file that fails any of
these, or loads without the kernels' functions, is built again (a damaged or foreign file costs
one build, never a run). On Linux the checked file is loaded through its open descriptor, so it
cannot be swapped between the check and the load.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import secrets
import shutil
import stat
import subprocess
import warnings
from pathlib import Path

from . import mode

SOURCE = Path(__file__).with_name("cpu_kernels.c")
# -march=native: the library is built for the machine that runs it (its name carries the host), or
# for x86-64-v3 (AVX2, FMA) under portable numerics, the same code on every such CPU;
# -ffp-contract=off: no fused multiply-add but the source's fmaf, so the rounding is the source's.
FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC"]


def flags() -> list[str]:
    """The compiler's flags in this process's numerics mode (mode.py)."""
    portable = mode.requested(strict=False) == "portable" and mode.pinnable()
    return [f if f != "-march=native" or not portable else "-march=x86-64-v3" for f in FLAGS]


POINTER, LONGS = ctypes.c_void_p, ctypes.POINTER(ctypes.c_long)
SIGNATURES = {  # C function: its arguments (n and strides are long[4] / long[3] arrays)
    "norm_rotate_forward": [LONGS, POINTER, LONGS, POINTER, LONGS, POINTER, LONGS, POINTER, LONGS, POINTER],
    "norm_rotate_backward_rotate": [
        LONGS,
        POINTER,
        LONGS,
        POINTER,
        LONGS,
        POINTER,
        LONGS,
        POINTER,
        LONGS,
        POINTER,
        LONGS,
        POINTER,
        POINTER,
    ],
    "norm_rotate_backward_norm": [LONGS, POINTER, POINTER, POINTER, LONGS, POINTER, LONGS, POINTER],
    # gemm.py's products: batch, M, N, K, then A and B each with its batch, row and column strides, then C
    **{
        gemm: [*[ctypes.c_long] * 4, POINTER, *[ctypes.c_long] * 3, POINTER, *[ctypes.c_long] * 3, POINTER]
        for gemm in ("gemm_f32", "gemm_f64", "gemm_f32_reference")
    },
}
RESULTS = {"gemm_f32": ctypes.c_int, "gemm_f64": ctypes.c_int}  # 1: no memory for the packing buffer


def cache_folder() -> Path:
    if os.environ.get("WORKBENCH_CACHE"):
        return Path(os.environ["WORKBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workbench"


def kernel_folder() -> Path:
    """Where the libraries are built: private to the user (mode 0700)."""
    return cache_folder() / "cpu_kernels"


class _NotPrivate(Exception):
    """The kernel folder is not the user's own private folder."""


def _skip(reason: str) -> None:
    warnings.warn(
        f"workbench: the C kernels are off ({reason}); the PyTorch path runs instead: the same "
        "numbers, a few percent slower, except portable numerics' matrix products, which then run in "
        "MKL's COMPATIBLE branch (other bits than the workbench's GEMM, 2x slower training)",
        RuntimeWarning,
        stacklevel=3,
    )


@functools.cache  # once per process
def library() -> ctypes.CDLL | None:
    """The compiled kernels, or None (see the module's docstring)."""
    if os.environ.get("WORKBENCH_CPU_KERNELS", "1") == "0":
        return None
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        _skip(f"no C compiler {compiler!r} on the PATH")
        return None
    key = hashlib.sha256(
        "\0".join([SOURCE.read_text(), compiler, *flags(), platform.machine(), platform.node()]).encode()
    ).hexdigest()[:16]
    name = f"cpu_kernels-{key}.so"
    folder = kernel_folder()
    try:
        folder_fd = _private_folder(folder)
    except _NotPrivate as why:
        _skip(str(why))
        return None
    try:
        for attempt in range(2):  # a cached file that fails a check or lacks the kernels is built once more
            fd = _checked(folder_fd, name)
            if fd is None:
                _build(compiler, folder_fd, folder, name)
                fd = _checked(folder_fd, name)
                if fd is None:
                    raise OSError(f"the library just built in {folder} does not match its recorded SHA-256")
            # a loaded library's descriptor stays open: the loader knows it by that name, which must
            # not come back for another file
            try:
                lib = ctypes.CDLL(_path(folder_fd, folder, name, fd))
            except OSError:  # a damaged file: not loaded
                os.close(fd)
                if attempt:
                    raise
                os.unlink(name, dir_fd=folder_fd)
                continue
            try:
                for function, arguments in SIGNATURES.items():
                    getattr(lib, function).argtypes = arguments
                    getattr(lib, function).restype = RESULTS.get(function)
                return lib
            except AttributeError as err:  # a library without the kernels
                if attempt:
                    raise OSError(f"the library lacks the kernels ({err})") from None
                os.unlink(name, dir_fd=folder_fd)
    except (OSError, subprocess.SubprocessError) as err:
        _skip(f"building or loading {folder / name} failed: {str(err).strip()[-300:]}")
        return None
    finally:
        os.close(folder_fd)


def _private_folder(folder: Path) -> int:
    """An open descriptor of `folder` (made with mode 0700 if missing), checked to be a real folder,
    the user's own and closed to others; _NotPrivate names what is wrong otherwise."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as err:
        raise _NotPrivate(f"cannot make {folder}: {err.strerror}") from None
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise _NotPrivate(
            f"{folder} is not a folder (a link or a file); the kernels load only from a folder "
            "private to you: remove it"
        ) from None
    st = os.fstat(fd)
    why = (
        f"belongs to another user (uid {st.st_uid})"
        if st.st_uid != os.getuid()
        else f"is open to other users (mode {stat.S_IMODE(st.st_mode):03o})"
        if st.st_mode & 0o077
        else ""
    )
    if why:
        os.close(fd)
        raise _NotPrivate(
            f"{folder} {why}; the kernels load only from a folder private to you: chmod 700 it, or remove it"
        )
    return fd


def _path(folder_fd: int, folder: Path, name: str, fd: int | None = None) -> str:
    """The name to open or load: through the open descriptor where /proc has one (nothing can be
    swapped in between), else the path in the checked folder."""
    here = f"/proc/{os.getpid()}/fd"  # by PID, not "self": the compiler, another process, writes there
    if os.path.isdir(f"{here}/{folder_fd}"):
        return f"{here}/{fd}" if fd is not None else f"{here}/{folder_fd}/{name}"
    return str(folder / name)


def _checked(folder_fd: int, name: str) -> int | None:
    """An open descriptor of the library `name` if it is a plain file of this user's, writable by
    nobody else, whose SHA-256 is the one recorded at its build; else None (build it again)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise OSError("not a library of this user's build")
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        if digest.hexdigest() != _recorded(folder_fd, name):
            raise OSError("its SHA-256 is not the recorded one")
        return fd
    except OSError:
        os.close(fd)
        return None


def _recorded(folder_fd: int, name: str) -> str:
    """The SHA-256 recorded beside the library when it was built ("" if none)."""
    try:
        fd = os.open(f"{name}.sha256", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError:
        return ""
    try:
        return os.read(fd, 200).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def _build(compiler: str, folder_fd: int, folder: Path, name: str) -> None:
    """Compile into a temporary file of the private folder, record its SHA-256, rename both into place."""
    temporary = f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        subprocess.run(
            [compiler, *flags(), "-o", _path(folder_fd, folder, temporary), str(SOURCE), "-lm"],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        fd = os.open(temporary, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
        try:
            os.fchmod(fd, 0o700)
            digest = hashlib.sha256()
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
        finally:
            os.close(fd)
        record = f"{temporary}.sha256"
        fd = os.open(
            record, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder_fd
        )
        with os.fdopen(fd, "w") as f:
            f.write(digest.hexdigest() + "\n")
        # the record first: a reader that finds the new library finds its record (a concurrent build
        # writes the same bytes; if not, the mismatch is one more build, never a wrong load)
        os.replace(record, f"{name}.sha256", src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        os.replace(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except subprocess.CalledProcessError as err:
        raise subprocess.SubprocessError(err.stderr) from None
    finally:
        for leftover in (temporary, f"{temporary}.sha256"):
            try:
                os.unlink(leftover, dir_fd=folder_fd)
            except FileNotFoundError:
                pass


def longs(values) -> ctypes.Array:
    return (ctypes.c_long * len(values))(*values)
