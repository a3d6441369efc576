"""A forced torch CPU capability compiles into its own Inductor cache (workbench/__init__.py): sharing
the default cache with the machine's own capability crashed compiled training (SIGSEGV)."""

import os
import subprocess
import sys

import pytest

PROBE = "import os, workbench, torch._dynamo; print(os.environ['TORCHINDUCTOR_CACHE_DIR'])"


def _cache_dir(**env) -> str:
    drop = ("ATEN_CPU_CAPABILITY", "TORCHINDUCTOR_CACHE_DIR", "WORKBENCH_NUMERICS", "WORKBENCH_NUMERICS_SET")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.slow
def test_a_forced_capability_gets_its_own_cache_and_a_chosen_cache_is_kept(tmp_path):
    default = _cache_dir(WORKBENCH_NUMERICS="native")  # the machine's own capability: torch's own cache
    forced = _cache_dir(WORKBENCH_NUMERICS="native", ATEN_CPU_CAPABILITY="avx2")
    assert os.path.basename(forced) == "aten-avx2" and forced != default
    assert _cache_dir(ATEN_CPU_CAPABILITY="avx2", TORCHINDUCTOR_CACHE_DIR=str(tmp_path)) == str(tmp_path)
    if sys.platform == "linux" and os.uname().machine == "x86_64":  # portable numerics force AVX2 by default
        assert _cache_dir() == forced
