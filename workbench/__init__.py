"""Numeracy workbench: number encodings for language models (BitTokens, FoNE, xVal, digits)."""

import getpass as _getpass
import os as _os
import tempfile as _tempfile

__version__ = "0.1.0"

# Portable or native numerics (workbench/model/numerics.py): applied to the environment before anything
# loads torch or numpy, so that this process, its workers and its children compute in one mode. A
# bad WORKBENCH_NUMERICS is reported where a run starts (numerics.ensure), not at import.
from .model import numerics as _numerics  # noqa: E402

try:
    _numerics.apply(_numerics.requested())
except ValueError:
    pass

# torch.compile's on-disk kernel cache does not tell CPU kernels built under one torch CPU capability
# from another's: a process started with ATEN_CPU_CAPABILITY=avx2 on an AVX-512 machine loads the
# AVX-512 build and crashes (SIGSEGV) in the compiled blocks. So a forced capability gets a cache folder
# of its own, unless the user chose one. Set here, before anything imports torch._dynamo, which fixes
# the folder for the process.
if "ATEN_CPU_CAPABILITY" in _os.environ and "TORCHINDUCTOR_CACHE_DIR" not in _os.environ:
    _os.environ["TORCHINDUCTOR_CACHE_DIR"] = _os.path.join(
        _tempfile.gettempdir(),
        f"torchinductor_{_getpass.getuser()}",
        "aten-" + _os.environ["ATEN_CPU_CAPABILITY"].strip().lower(),
    )
