"""Portable numerics (workbench/model/numerics.py): the mode a process computes in, set before torch
computes, recorded with every run, refused where it cannot hold; and the committed reference runs
retraced bit for bit (benchmarks/portable_check.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny import tiny

from workbench.config import TrainConfig
from workbench.model import cpu_kernels, numerics
from workbench.runs.executors import run_all

ROOT = Path(__file__).resolve().parents[1]
PINS = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "ONEDNN_MAX_CPU_ISA",
    "NPY_DISABLE_CPU_FEATURES",
    numerics.ENV,
    numerics.OURS,
)
pytestmark = pytest.mark.skipif(not numerics.pinnable(), reason="portable numerics need an x86-64 CPU with AVX2")


def clean_env(**extra) -> dict:
    """This environment without any numerics setting (a fresh shell's), plus `extra`."""
    return {k: v for k, v in os.environ.items() if k not in PINS} | extra


def probe(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=clean_env(**env), capture_output=True, text=True, cwd=ROOT)


STATE = """
import json, sys, torch
from workbench.model import numerics
if "compute" in sys.argv: torch.ones(8, 8) @ torch.ones(8, 8)  # MKL computes before the mode is asked for
try:
    print(json.dumps(numerics.ensure(sys.argv[-1] if len(sys.argv) > 1 else numerics.requested())))
except ValueError as err:
    print("refused:", err)
"""


def state(*argv, **env) -> str:
    done = subprocess.run(
        [sys.executable, "-c", STATE, *argv], env=clean_env(**env), capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_fresh_process_computes_portably_and_native_is_one_variable_away():
    portable = json.loads(state())
    assert portable == {
        "numerics": "portable",
        "cpu_capability": "AVX2",
        "mkl_branch": "COMPATIBLE",
        "onednn_max_cpu_isa": "AVX2",
        "gemm": "workbench" if cpu_kernels.library() is not None else "mkl",  # workbench/model/gemm.py
    }
    native = json.loads(state(WORKBENCH_NUMERICS="native"))
    assert native["numerics"] == "native" and native["mkl_branch"] == "OFF" and native["onednn_max_cpu_isa"] is None
    assert native["gemm"] == "mkl"


def test_a_process_that_computed_in_one_mode_is_refused_the_other():
    """MKL fixes its branch at its first product: a process that multiplied natively cannot train a
    portable run (and the other way round); the refusal names both and how to start afresh."""
    refused = state("compute", "portable", WORKBENCH_NUMERICS="native")
    assert refused.startswith("refused: --numerics portable: this process already computes with native numerics")
    assert "MKL's branch OFF" in refused and "WORKBENCH_NUMERICS=portable" in refused
    refused = state("compute", "native")
    assert refused.startswith("refused: --numerics native: this process already computes with portable numerics")
    # before anything computed, either mode can still be had: the variables and MKL's own switch
    assert json.loads(state("portable", WORKBENCH_NUMERICS="native"))["mkl_branch"] == "COMPATIBLE"
    assert json.loads(state("native"))["mkl_branch"] == "OFF"


def test_a_callers_own_setting_is_never_overwritten_and_a_conflict_is_one_line():
    refused = state(ATEN_CPU_CAPABILITY="default")
    assert refused == (
        "refused: --numerics portable: the environment sets ATEN_CPU_CAPABILITY=default; unset it, or pass "
        "--numerics native"
    )
    # native honours the caller's emulation of another CPU (the variable is theirs, not the mode's)
    assert json.loads(state(WORKBENCH_NUMERICS="native", ATEN_CPU_CAPABILITY="default"))["cpu_capability"] == "DEFAULT"
    done = probe("import workbench.training.train", WORKBENCH_NUMERICS="bogus")
    assert done.returncode == 0  # importing never fails; the command refuses (below)
    done = subprocess.run(
        [sys.executable, "-m", "workbench.train", "--tokens", "1e3"],
        env=clean_env(WORKBENCH_NUMERICS="bogus"),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "WORKBENCH_NUMERICS='bogus': numerics are one of portable, native" in done.stderr


def test_children_inherit_the_mode_and_switching_removes_only_what_the_mode_set():
    code = """
import os, subprocess, sys
from workbench.model import numerics
numerics.apply("native")
child = "import torch, workbench; print(torch.backends.cpu.get_cpu_capability(), os.environ.get('MKL_CBWR'))"
print(subprocess.run([sys.executable, "-c", "import os;" + child], capture_output=True, text=True).stdout.strip())
numerics.apply("portable")
print(subprocess.run([sys.executable, "-c", "import os;" + child], capture_output=True, text=True).stdout.strip())
"""
    done = probe(code)
    assert done.returncode == 0, done.stderr
    native, portable = done.stdout.strip().splitlines()
    assert native.endswith(" None") and portable == "AVX2 COMPATIBLE"


def test_the_c_kernels_are_built_for_x86_64_v3_under_portable_numerics(monkeypatch):
    monkeypatch.setenv(numerics.ENV, "portable")
    assert "-march=x86-64-v3" in cpu_kernels.flags() and "-march=native" not in cpu_kernels.flags()
    monkeypatch.setenv(numerics.ENV, "native")
    assert "-march=native" in cpu_kernels.flags()


def test_a_run_records_its_numerics_and_a_resume_in_the_other_mode_is_refused(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "workbench.train", "--tokens", str(2 * 128 * 4), "--batch-size", "2"]
    command += ["--pool-size", "100", "--val-samples", "4", "--test-samples", "4", "--eval-every", "2"]
    command += ["--out", str(out)]
    done = subprocess.run(command, env=clean_env(), capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((out / "config.json").read_text())["numerics"] == "portable"
    env = json.loads((out / "environment.json").read_text())
    assert (env["numerics"], env["cpu_capability"], env["mkl_branch"]) == ("portable", "AVX2", "COMPATIBLE")
    assert env["gemm"] == ("workbench" if cpu_kernels.library() is not None else "mkl")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"}
    done = subprocess.run(
        command + ["--resume", "--numerics", "native"], env=clean_env(), capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 2
    assert "numerics: 'portable' (recorded) vs 'native'" in done.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"} == before


def test_a_plan_that_mixes_the_modes_is_refused_before_anything_trains(tmp_path):
    cfg = TrainConfig.of(**tiny(2))
    with pytest.raises(ValueError, match="the plan mixes --numerics native and portable"):
        run_all({"a": cfg.updated(numerics="portable"), "b": cfg.updated(numerics="native")}, tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_the_first_run_gives_the_committed_bits():
    """The first run's command trains to the losses, evaluations, answers and weights committed in
    benchmarks/reference/portable.json, wherever the suite runs (the references were made on one
    machine, and the same bits on every x86-64 CPU is the mode's promise), and, where ../shared
    holds it, to the reference run made on an AMD machine at commit 0ce36f7."""
    done = subprocess.run(
        [sys.executable, "benchmarks/portable_check.py", "--runs", "default"],
        env=clean_env(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "default: identical" in done.stdout and "verdict: all identical" in done.stdout
