"""The same seed draws the same data on every x86-64 CPU (issue 46).

numpy picks SIMD kernels for log10, log, exp and power when it starts (AVX-512 with SVML, AVX2, the
baseline), and their results differ in the last bits. The tasks decide nothing on such values
(workbench/tasks/exact.py), so the data must come out identical whichever kernels numpy uses. One
machine checks that: the same generation runs in two fresh interpreters, once as numpy starts by
default and once with its AVX-512 kernels switched off (NPY_DISABLE_CPU_FEATURES, as an AVX2-only
CPU would run), and every hash must agree. On a machine without AVX-512 both runs use the same
kernels and the comparison holds trivially; it bites wherever AVX-512 is present (the development
machine and most CI runners).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Every numeric task in the paper's regime (capped and uncapped, binary sets, damped exponentiation)
# and in the study's regimes (magnitudes 1 ... 100, d = 1..4 significant digits, decimal and binary),
# the text task, two training pools through make_pool and the curriculum's level shares.
SCRIPT = r"""
import hashlib, json, sys
import numpy as np
from workbench import tasks as T
from workbench.training.curriculum import Curriculum
from workbench.training.data import make_pool
from workbench.tokenizer import Tokenizer
try:
    from numpy._core import _multiarray_umath as umath
except ImportError:  # numpy 1.x
    from numpy.core import _multiarray_umath as umath

N, SEED = 300, 3
def sha(data):
    return hashlib.sha256(data).hexdigest()[:16]
def frame(task, regime, n=N):
    return sha(T.generate(task, n, seed=SEED, regime=regime).to_csv(index=False).encode())

hashes = {}
regimes = {"paper": T.Regime(), "paper-uncapped": T.Regime(difficulty_caps=False)}
regimes.update({f"study-d{d}": T.Regime.of((0, 1), d) for d in (1, 2, 3, 4)})
for name, regime in regimes.items():
    for task in T.numeric():
        hashes[f"{task} {name}"] = frame(task, regime)
binary = {"paper-binary": T.Regime(significance="binary", binary_labels="float64")}
binary.update({f"study-d{d}-binary": T.Regime.of((0, 1), d, significance="binary") for d in (1, 2, 3, 4)})
for name, regime in binary.items():
    for task in T.names("single_step"):
        hashes[f"{task} {name}"] = frame(task, regime)
hashes["exponentiation paper-damped"] = frame("exponentiation", T.Regime(exp_difficulty="damped"))
hashes["text"] = frame("text", T.Regime(), 20)
tokenizer = Tokenizer("bittokens", cache_dir=sys.argv[1])
for task, regime in (("multiplication", T.Regime.of((0, 1), 2, significance="binary")), ("minmax", T.Regime())):
    pool = make_pool(task, N, tokenizer, SEED, "train", regime)
    parts = [a.tobytes() for sample in pool.samples for a in sample]
    hashes[f"pool {task}"] = sha(b"".join(parts + [pool.difficulty.tobytes(), pool.difficulty_sd.tobytes()]))
shares = Curriculum(T.max_difficulty("exponentiation", 10), 1000, 1.0).level_probabilities()
hashes["curriculum"] = sha(shares.tobytes())
print(json.dumps({"dispatch": list(umath.__cpu_dispatch__),
                  "features": {k: bool(v) for k, v in umath.__cpu_features__.items()}, "hashes": hashes}))
"""


def _avx512_targets(run: dict) -> list[str]:
    """numpy's AVX-512 dispatch targets that a run used (what an AVX2-only CPU lacks)."""
    return [t for t in run["dispatch"] if (t.startswith("AVX512") or t == "X86_V4") and run["features"].get(t)]


def _run(cache: Path, env: dict) -> dict:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout's code
    inherited = {k: v for k, v in os.environ.items() if k not in ("NPY_DISABLE_CPU_FEATURES", "ATEN_CPU_CAPABILITY")}
    env = {**inherited, **env, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(cache)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_data_do_not_depend_on_the_cpus_simd_kernels(tmp_path):
    default = _run(tmp_path, {})  # every kernel numpy finds on this CPU, whatever the caller's environment
    off = _avx512_targets(default)
    avx2 = _run(tmp_path, {"NPY_DISABLE_CPU_FEATURES": " ".join(off), "ATEN_CPU_CAPABILITY": "avx2"})
    assert not _avx512_targets(avx2), "numpy kept AVX-512 kernels the run switched off"
    differ = sorted(k for k in default["hashes"] if default["hashes"][k] != avx2["hashes"][k])
    assert not differ, f"data differ without AVX-512 ({' '.join(off) or 'none on this CPU'}): {differ}"
    assert len(default["hashes"]) == len(avx2["hashes"]) == 9 * 6 + 3 * 5 + 5
