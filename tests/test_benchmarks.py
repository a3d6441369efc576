"""Every script in benchmarks/ runs to its end at its smallest size: a benchmark that no longer
runs against the package (a renamed function, a changed signature) fails here, not when someone
needs its numbers. Nothing is timed; each script's own output is its result."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDY_RUN = "precision-multiplication-d2-bittokens-seed0"
# script: its arguments at the smallest size ({tmp}: a fresh folder), and a line its output must hold
SMALLEST = {
    "activation.py": (["--preset", "cpu-tiny", "--batch", "1", "--repeats", "1"], "tanh GELU / this"),
    "allocator.py": (["--steps", "2", "--repeats", "1"], "losses bit for bit the same on both sides: True"),
    "cpu_kernels.py": (["--preset", "cpu-tiny", "--batch", "1", "--repeats", "1"], "outputs and gradients identical"),
    "encode.py": (["--n", "1000", "--repeats", "1"], "ratio"),
    "gemm_speed.py": (["--repeats", "1"], "workbench ms"),
    "gpu.py": (["--pool", "200", "--repeats", "1", "--loss-rows", "256"], "== memory of a training pool"),
    "help_time.py": (["--repeats", "1", "--commands", "tokenizer"], "python -m workbench.tokenizer"),
    "batch_worker.py": (
        ["--encodings", "single_digit", "--steps", "1", "--pool", "300", "--device-step", "0.05", "--launch", "0.01"],
        "| single_digit |",
    ),
    "gpu_sprint.py": (["--dry-run", "--time-limit", "60"], "nothing was trained or written (--dry-run)"),
    "numerics_speed.py": (["--repeats", "1", "--steps", "25", "--cases", "tiny"], "native/portable"),
    "portable_check.py": (["--runs", "default"], "verdict: all identical"),
    "verdict_coverage.py": (["--sims", "20", "--draws", "50"], "paired bootstrap"),
    "parse_answers.py": (["--scale", "0.01", "--repeats", "1"], "digit run"),
    "parse_numbers.py": (["--sizes", "100", "--old-limit", "100", "--repeats", "1"], "old/new"),
    "study_profile.py": (["--tokens", "2e4", "--out", "{tmp}/profile"], "backward"),
    "study_profile.py --ops": (["--ops", "2", "--out", "{tmp}/ops"], "at most"),
    "study_speed.py": (
        [
            "--baseline",
            "HEAD",
            "--current",
            "HEAD",
            "--runs",
            STUDY_RUN,
            "--repeats",
            "1",
            "--tokens",
            "2e4",
            "--out",
            "{tmp}/speed",
        ],
        "every result identical: True",
    ),
    # a setting that changes neither the training nor its results: both sides retrace
    "study_speed.py --set": (
        [
            "--set",
            "checkpoint_every=7",
            "--runs",
            STUDY_RUN,
            "--repeats",
            "1",
            "--tokens",
            "2e4",
            "--out",
            "{tmp}/setting",
        ],
        "every result identical: True",
    ),
    "tasks.py": (["--n", "200", "--repeats", "1"], "multiplication"),
    "retrofit_num_probability.py": (["init", "--model", "tiny", "--prompts", "4"], "p_write"),
    "retrofit_num_probability.py run": (
        ["run", "--model", "tiny", "--steps", "1", "--every", "1", "--prompts", "4", "--batch-tokens", "64"],
        "writes_num",
    ),
    "train.py": (
        [
            "--preset",
            "cpu-tiny",
            "--batch",
            "2",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--precisions",
            "fp32",
            "--threads",
            "1",
            "--data",
            "addition",
            "synthetic",
        ],
        "ours / this",
    ),
}
# scripts whose run on a CPU is a test of its own, named here: every check of gpu_check.py runs there
RUN_ELSEWHERE = {"gpu_check.py": "test_gpu_path.py::test_gpu_check_dry_run_on_the_cpu"}
# scripts that read a git revision of this repository: skipped where it is not at hand (a copy, a shallow clone)
REVISION = {"parse_numbers.py": "56144dc", "study_speed.py": "HEAD"}


def has_revision(revision: str) -> bool:
    return (
        subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "-e", f"{revision}^{{commit}}"], capture_output=True
        ).returncode
        == 0
    )


def test_every_benchmark_script_is_listed():
    """Every script of benchmarks/ runs here at its smallest size; a module named _*.py is a part
    of a script (imported by it), not a script."""
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")}
    assert {name.split()[0] for name in SMALLEST} | set(RUN_ELSEWHERE) == scripts
    for script, test in RUN_ELSEWHERE.items():
        file, function = test.split("::")
        assert (
            f"def {function}(" in (ROOT / "tests" / file).read_text() and script in (ROOT / "tests" / file).read_text()
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALLEST)
def test_benchmark_runs_at_its_smallest_size(name, tmp_path):
    arguments, expected = SMALLEST[name]
    script = name.split()[0]
    if name in REVISION and not has_revision(REVISION[name]):
        pytest.skip(f"{name} reads git revision {REVISION[name]}, which this copy of the repository lacks")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *(a.format(tmp=tmp_path) for a in arguments)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize(
    "pair, says",
    [("learning_rate=1", "--set: unknown key 'learning_rate'"), ("compile", "--set takes KEY=VALUE, got 'compile'")],
)
def test_study_speed_names_a_setting_it_does_not_know(pair, says):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "study_speed.py"), "--set", pair],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr
    if "=" in pair:  # the choices name the settings there are
        assert "batch_size" in done.stderr
