"""A tiny plan through `--executor slurm` on a real one-node Slurm cluster on this machine
(scripts/slurm-single-node.sh): the local executor's rows bit for bit, and a job cancelled by the
scheduler reported as killed and resumed by the next call.

Runs where Slurm is installed (or a cluster already answers): the test starts the cluster with
`scripts/slurm-single-node.sh check`, which never installs anything, and stops what it started.
Skips, with the reason, where Slurm is not installed (as root, `scripts/slurm-single-node.sh start`
installs it once, with apt-get), where this is not root, or where the daemons fail to start."""

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from test_executors import TINY, losses, rows

from workbench import experiments
from workbench.runs.checkpoints import load_checkpoint
from workbench.runs.executors import Executor, RunsFailed

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm-single-node.sh"
PLAN = dict(seeds=(0,), encodings=["bittokens", "single_digit"])
SLURM = Executor("slurm", partition="debug", time=10)


def answers() -> bool:
    try:
        return all(
            subprocess.run([tool, "--noheader"], capture_output=True, timeout=10).returncode == 0
            for tool in ("sinfo", "sacct")
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def cluster():
    if answers():
        yield  # someone else's cluster: used, left running
        return
    if shutil.which("slurmctld") is None:
        pytest.skip("Slurm is not installed here (as root, scripts/slurm-single-node.sh start installs it)")
    if os.geteuid() != 0:
        pytest.skip("not root: the one-node Slurm cluster cannot be started")
    started = subprocess.run([str(SCRIPT), "check"], capture_output=True, text=True, timeout=300)
    if started.returncode != 0:
        pytest.skip(f"the one-node Slurm cluster did not start: {started.stderr.strip()}")
    yield
    subprocess.run([str(SCRIPT), "stop"], capture_output=True, timeout=120)


def cancel_after_first_checkpoint(run: Path) -> None:
    """scancel the Slurm job training `run` (the lock's holder) once it wrote a checkpoint. Slurm
    sends SIGCONT and SIGTERM (which submitit ignores), then SIGKILL seconds later: the process is
    held stopped meanwhile, so that the run cannot finish before the scheduler kills it."""
    deadline = time.time() + 300
    while not (run / "checkpoint.pt").exists():
        assert time.time() < deadline, f"no job wrote {run / 'checkpoint.pt'}"
        time.sleep(0.02)
    pid = int((run / ".lock").read_text().split()[0])
    os.kill(pid, signal.SIGSTOP)
    environ = dict(v.split("=", 1) for v in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in v)
    subprocess.run(["scancel", f"{environ['SLURM_ARRAY_JOB_ID']}_{environ['SLURM_ARRAY_TASK_ID']}"], check=True)
    while time.time() < deadline:
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def test_a_tiny_plan_through_slurm_gives_the_local_rows_and_resumes_a_cancelled_job(
    cluster, tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(experiments.PROTOCOLS, "tiny", TINY)
    local, out = tmp_path / "local", tmp_path / "slurm"
    experiments.run_protocol("tiny", out=local, **PLAN)
    cancelled, first = out / "single_digit-seed0", {}

    def submit():
        try:
            experiments.run_protocol("tiny", out=out, executor=SLURM, **PLAN)
        except RunsFailed as err:
            first["error"] = str(err)

    thread = threading.Thread(target=submit, daemon=True)  # a failed test leaves no waiting thread
    thread.start()
    cancel_after_first_checkpoint(cancelled)
    thread.join(timeout=600)
    assert not thread.is_alive(), "the plan did not end after its jobs did"
    assert not (cancelled / "test_summary.csv").exists(), "the run finished before it could be cancelled"
    [line] = [line for line in first["error"].splitlines() if "single_digit-seed0" in line]
    assert "was killed by the scheduler (CANCELLED)" in line and "resumes it" in line
    assert "2 submitted: 1 finished, 1 killed, 0 failed" in capsys.readouterr().err
    step = load_checkpoint(cancelled / "checkpoint.pt")["state"]["step"]
    kept = (cancelled / "metrics.jsonl").read_text().splitlines()[:step]

    experiments.run_protocol("tiny", out=out, executor=SLURM, **PLAN)
    assert "1 finished before (read, not submitted), 1 submitted: 1 finished" in capsys.readouterr().err
    assert (cancelled / "metrics.jsonl").read_text().splitlines()[:step] == kept and 0 < step < 16  # resumed
    pd.testing.assert_frame_equal(rows(out), rows(local))  # bit for bit, as text
    for run in ("bittokens-seed0", "single_digit-seed0"):
        assert losses(out / run) == losses(local / run)
