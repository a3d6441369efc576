"""Executors: submitit's local executor (real processes) gives the local executor's result rows bit
for bit, reports a killed job and a failed one while the others go on, and the next call resumes
the killed run without resubmitting the finished ones; a job with two GPUs runs torchrun; an
executor that cannot start is refused in one line before anything is submitted."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from tiny import tiny

from workbench import experiments
from workbench.runs.checkpoints import load_checkpoint
from workbench.runs.executors import Executor, RunsFailed, _minutes, run_all
from workbench.runs.locks import hold
from workbench.training.train import TrainConfig

# 16 steps, a checkpoint every 2: long enough to be killed between its first checkpoint and its end
TINY = TrainConfig.of(**tiny(16, eval_every=8, checkpoint_every=2))
PLAN = dict(seeds=(0,), encodings=["bittokens", "single_digit", "fone"])
JOBS = Executor("submitit-local", array_parallelism=3, time=10)


def rows(folder: Path) -> pd.DataFrame:
    """results.csv as text, the timing column aside."""
    return pd.read_csv(folder / "results.csv", dtype=str).drop(columns="train_seconds")


def losses(run: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def submitted(out: Path) -> int:
    return len(list((out / "jobs").rglob("*_submitted.pkl")))


def kill_after_first_checkpoint(run: Path) -> None:
    """SIGKILL the process training `run` (the lock's holder) once it wrote a checkpoint."""
    deadline = time.time() + 300
    while not (run / "checkpoint.pt").exists():
        assert time.time() < deadline, f"no job wrote {run / 'checkpoint.pt'}"
        time.sleep(0.02)
    os.kill(int((run / ".lock").read_text().split()[0]), signal.SIGKILL)


@pytest.mark.slow
def test_submitit_local_gives_the_local_rows_and_resumes_a_killed_job(tmp_path, monkeypatch, capsys):
    """Bugs: a job's results read differently from the local executor's; a killed job hangs the
    plan, stops the others or is reported as finished; a finished run is resubmitted; a killed
    run is retrained from scratch instead of resumed."""
    monkeypatch.setitem(experiments.PROTOCOLS, "tiny", TINY)
    local, out = tmp_path / "local", tmp_path / "submitit"
    experiments.run_protocol("tiny", out=local, **PLAN)
    killed, busy = out / "single_digit-seed0", out / "fone-seed0"
    first = {}

    def submit():
        try:
            experiments.run_protocol("tiny", out=out, executor=JOBS, **PLAN)
        except RunsFailed as err:
            first["error"] = str(err)

    with hold(busy):  # as if another process trained this run: its job fails, the others go on
        thread = threading.Thread(target=submit, daemon=True)  # a failed test leaves no waiting thread
        thread.start()
        kill_after_first_checkpoint(killed)
        thread.join(timeout=300)
    assert not thread.is_alive(), "the plan did not end after its jobs did"
    assert not (killed / "test_summary.csv").exists(), "the run finished before it could be killed"
    report = first["error"].splitlines()
    assert report[0].startswith("2 of 3 runs failed")
    [kill_line] = [line for line in report if "single_digit-seed0" in line]
    assert "was killed" in kill_line and "resumes it" in kill_line
    assert Path(kill_line.split("(log: ")[1].rstrip(")")).exists()
    [busy_line] = [line for line in report if "fone-seed0" in line]
    assert "InUse: the folder" in busy_line and "is in use by process" in busy_line and "log: " in busy_line
    assert (out / "bittokens-seed0" / "test_summary.csv").exists()
    assert "3 submitted: 1 finished, 1 killed, 1 failed" in capsys.readouterr().err
    step = load_checkpoint(killed / "checkpoint.pt")["state"]["step"]
    kept = [line for line in (killed / "metrics.jsonl").read_text().splitlines()[:step]]

    experiments.run_protocol("tiny", out=out, executor=JOBS, **PLAN)
    assert "1 finished before (read, not submitted), 2 submitted: 2 finished" in capsys.readouterr().err
    assert submitted(out) == 3 + 2  # the finished run was not submitted again
    # resumed from its checkpoint: the rows logged before it are the killed process's own (a
    # retrained run would rewrite them, with other times)
    assert (killed / "metrics.jsonl").read_text().splitlines()[:step] == kept and 0 < step < 16
    pd.testing.assert_frame_equal(rows(out), rows(local))  # bit for bit, as text
    for run in ("bittokens-seed0", "single_digit-seed0", "fone-seed0"):
        assert losses(out / run) == losses(local / run)


@pytest.mark.slow
def test_a_job_with_two_gpus_trains_its_run_under_torchrun(tmp_path):
    """Bug: paper-tier jobs train in one process on a node of 8 GPUs. Two (CPU) processes of one
    job share the batch: the token budget of 4 steps of 2 rows is spent in 2 steps."""
    cfg = TINY.updated(tokens=2 * 128 * 4, eval_every=2, device="cpu")
    run_all({"run": cfg}, tmp_path, executor=Executor("submitit-local", gpus_per_job=2, time=10))
    assert len(losses(tmp_path / "run")) == 2
    assert (tmp_path / "run" / "test_summary.csv").exists()


class Planted:
    """Unpickled, it runs code (touches a file) and reads as a finished job's result."""

    def __init__(self, mark):
        self.mark = mark

    def __reduce__(self):
        return Path.touch, (Path(self.mark),)


def test_a_result_file_planted_under_a_future_job_id_is_never_read(tmp_path):
    """Bug: a result file planted in OUT/jobs under the process ID a local job later got was
    unpickled (its code ran) and the killed job was reported finished; an old job of one's own
    under a reused process ID did the same."""
    import pickle

    from workbench.runs import executors

    out, mark = tmp_path / "out", tmp_path / "planted-code-ran"
    (out / "jobs").mkdir(parents=True)
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    data = pickle.dumps(("success", Planted(mark)))
    for pid in range(last + 1, last + 3000):  # the IDs the next processes will get
        (out / "jobs" / f"{pid}_0_result.pkl").write_bytes(data)
    ended = {}

    def submit():
        ended.update(executors._submit_and_wait({"run": TINY}, out, 1, False, "test", JOBS)[0])

    thread = threading.Thread(target=submit, daemon=True)
    thread.start()
    deadline = time.time() + 120
    while not list((out / "jobs").rglob("*_submitted.pkl")):
        assert time.time() < deadline, "no job was submitted"
        time.sleep(0.01)
    [job] = list((out / "jobs").rglob("*_submitted.pkl"))
    os.kill(int(job.name.split("_")[0]), signal.SIGKILL)  # the job ends without writing a result
    thread.join(timeout=120)
    assert not mark.exists(), "a planted result file was unpickled"
    assert ended["run"][0] == "killed", ended


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """A PATH of stand-ins: sbatch records its calls; sinfo and sacct answer as given."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    monkeypatch.setenv("PATH", str(bin_))

    def tools(sinfo="debug* 30:00\ngpu 1-00:00:00", sinfo_status=0, sacct_status=0, sbatch=True):
        scripts = {
            "sinfo": f"printf '{sinfo}\\n'; echo 'sinfo: error: Unable to contact slurm controller' >&2; "
            f"exit {sinfo_status}",
            "sacct": f"echo 'Slurm accounting storage is disabled' >&2; exit {sacct_status}",
        }
        if sbatch:
            scripts["sbatch"] = f"echo \"$@\" >> {tmp_path}/sbatch-calls; echo 'Submitted batch job 1'"
        for name, body in scripts.items():
            (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
            (bin_ / name).chmod(0o755)

    return tools


@pytest.mark.parametrize(
    "setup, flags, message",
    [
        (dict(sbatch=False), [], "there is no sbatch on PATH"),
        (
            {},
            ["--partition", "gpux", "--time", "10"],
            "--partition: unknown Slurm partition 'gpux'; did you mean 'gpu'?",
        ),
        ({}, [], "--time 240: partition 'debug' allows at most 30 minutes per job"),
        ({}, ["--partition", "gpu", "--time", "1441"], "--time 1441: partition 'gpu' allows at most 1440 minutes"),
        (dict(sinfo_status=1), [], "sinfo failed (sinfo: error: Unable to contact slurm controller); is the Slurm"),
        (
            dict(sacct_status=1),
            ["--time", "10"],
            "sacct failed (Slurm accounting storage is disabled); submitit follows",
        ),
        ({}, ["--array-parallelism", "0"], "--array-parallelism must be an integer >= 1, got 0"),
    ],
)
def test_an_executor_that_cannot_start_is_one_line_before_anything_is_submitted(
    fake_slurm, tmp_path, capsys, setup, flags, message
):
    fake_slurm(**setup)
    out = tmp_path / "out"
    with pytest.raises(SystemExit):
        experiments.main(
            ["cpu-tier", "--encodings", "fone", "--seeds", "0", "--out", str(out), "--executor", "slurm", *flags]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "sbatch-calls").exists() and not (out / "jobs").exists()


@pytest.mark.parametrize(
    "limit, minutes",
    [
        ("infinite", None),
        ("UNLIMITED", None),
        ("45", 45),
        ("30:00", 30),
        ("30:01", 31),
        ("2:00:00", 120),
        ("1-00:00:00", 1440),
        ("2-12:30:00", 2 * 1440 + 12 * 60 + 30),
    ],
)
def test_slurm_time_limits_read_as_minutes(limit, minutes):
    assert _minutes(limit) == minutes


def test_a_failed_run_is_reported_when_it_fails_not_only_at_the_end(tmp_path, monkeypatch, capsys):
    """Bug: a study of hours kept a failed run's reason until its end; stopped before then, it left
    only an empty run folder and no reason. The failure is written as it happens, and the others go on."""
    import workbench.runs.executors as executors

    def one(cfg, run_dir, overwrite):
        if run_dir.name == "bad":
            raise MemoryError("no room for the pools")
        run_dir.mkdir(parents=True)
        assert "run bad failed: MemoryError: no room for the pools" in capsys.readouterr().err  # before the next run
        return pd.DataFrame({"run": [run_dir.name]})

    monkeypatch.setattr(executors, "_one", one)
    with pytest.raises(RunsFailed, match="1 of 2 runs failed"):
        run_all({"bad": TINY, "good": TINY}, tmp_path, jobs=1)
    assert (tmp_path / "good").is_dir()


# A plan of three runs on two workers, stopped by Ctrl-C (SIGINT to the whole process group, as a
# terminal sends it), with the command's own one line.
CTRL_C_PLAN = """
import os
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from workbench.config import TrainConfig
from workbench.runs.executors import run_all

if __name__ == "__main__":
    if sys.argv[2:] == ["while_spawning"]:  # Ctrl-C right after the pool spawned its first worker
        submit = ProcessPoolExecutor.submit

        def submit_then_ctrl_c(self, *args, **kwargs):
            future = submit(self, *args, **kwargs)
            os.killpg(0, signal.SIGINT)
            return future

        ProcessPoolExecutor.submit = submit_then_ctrl_c
    cfg = TrainConfig.of(preset="cpu-tiny", batch_size=2, tokens=2 * 128 * 400, pool_size=100, val_samples=4,
                         test_samples=4, eval_every=100, checkpoint_every=2, threads=1)
    try:
        run_all({"a": cfg, "b": cfg.updated(seed=1), "c": cfg.updated(seed=2)}, Path(sys.argv[1]), jobs=2)
    except KeyboardInterrupt as stop:
        # a thread of the pool still running here raced the interpreter's exit (a traceback, at times)
        left = [t.name for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
        if left:
            print(f"threads left running: {left}", file=sys.stderr)
        print("\\ninterrupted", file=sys.stderr)
        sys.exit(getattr(stop, "code", 130))
"""


def _workers(session: int) -> list[int]:
    """The pool's worker processes in `session` (not its resource tracker), orphans included."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[3]) == session and b"spawn_main" in command:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    "when, stop",
    [
        ("while_spawning", "ctrl_c"),
        ("workers_starting", "ctrl_c"),
        ("runs_training", "ctrl_c"),
        ("runs_training", "sigterm"),
    ],
)
def test_a_stopped_plan_of_two_jobs_says_one_line_and_ends_every_worker(tmp_path, when, stop):
    """Bug: Ctrl-C with --jobs 2 printed each worker's traceback when it came while the workers were
    still importing (and tqdm's semaphores as leaked when it came while they trained); SIGTERM to the
    plan's process alone (`kill PID`) ended it at once and left its workers training as orphans.
    Then: a Ctrl-C while the pool spawned its workers was lost (the plan trained to its end), and at
    times the pool's own thread, still running at exit, printed an OSError traceback.
    Now the plan's process ends them and says its one line, with the shell's code for the signal;
    a stopped run's checkpoint loads for the resume."""
    import subprocess
    import sys

    (tmp_path / "plan.py").write_text(CTRL_C_PLAN)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "plan.py"), str(out)]
        + (["while_spawning"] if when == "while_spawning" else []),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while when != "while_spawning" and time.time() < deadline:
        if when == "workers_starting" and len(_workers(proc.pid)) == 2:
            assert not list(out.glob("*/config.json")), "a worker started training before the signal"
            break
        if when == "runs_training" and all((out / r / "checkpoint.pt").exists() for r in "ab"):
            break
        time.sleep(0.01)
    workers = _workers(proc.pid)
    if stop == "ctrl_c" and when != "while_spawning":
        os.killpg(proc.pid, signal.SIGINT)  # a terminal sends Ctrl-C to the whole group
    elif stop == "sigterm":
        os.kill(proc.pid, signal.SIGTERM)  # the plan's process alone
    try:
        _, err = proc.communicate(timeout=60)
    finally:  # a worker left behind by a failure here must not train on past the test
        alive = _workers(proc.pid)
        for worker in alive:
            os.kill(worker, signal.SIGKILL)
    assert not alive, f"{len(alive)} of the plan's workers outlived it"
    assert proc.returncode == 128 + (signal.SIGINT if stop == "ctrl_c" else signal.SIGTERM), err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "leaked" not in err, err[-2000:]
    assert "threads left running" not in err, err[-2000:]
    assert err.rstrip().endswith("\ninterrupted")
    if when != "while_spawning":
        assert len(workers) == 2
    if when == "runs_training":
        for run in "ab":
            assert 2 <= load_checkpoint(out / run / "checkpoint.pt")["state"]["step"] < 400


# A plan of two tiny runs on two workers, each long enough to be killed while it trains; the same
# command again resumes them from their checkpoints.
KILLED_PLAN = """
import sys
from pathlib import Path

from workbench.config import TrainConfig
from workbench.runs.executors import run_all

if __name__ == "__main__":
    cfg = TrainConfig.of(preset="cpu-tiny", batch_size=2, tokens=2 * 128 * 60, pool_size=100, val_samples=4,
                         test_samples=4, eval_every=100, checkpoint_every=2, threads=1)
    run_all({"a": cfg, "b": cfg.updated(seed=1)}, Path(sys.argv[1]), jobs=2)
"""


@pytest.mark.slow
def test_a_plan_killed_outright_takes_its_workers_with_it(tmp_path):
    """Bug: after kill -9 of a --jobs 2 plan its workers trained on as orphans, and the same command
    run again at once failed "in use" (1 of 2 trials). Now each worker asks the kernel for SIGTERM
    when the plan dies: they are gone within seconds, and the rerun resumes both runs to their end."""
    import subprocess
    import sys

    (tmp_path / "plan.py").write_text(KILLED_PLAN)
    out = tmp_path / "out"
    command = [sys.executable, str(tmp_path / "plan.py"), str(out)]
    proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 300
        while not all((out / r / "checkpoint.pt").exists() for r in "ab"):
            assert time.time() < deadline and proc.poll() is None, "the plan's runs never checkpointed"
            time.sleep(0.01)
        workers = _workers(proc.pid)
        assert len(workers) == 2 and not any((out / r / "test_summary.csv").exists() for r in "ab")
        os.kill(proc.pid, signal.SIGKILL)  # the plan alone, with no chance to clean up
        proc.wait()
        gone = time.time() + 10
        while _workers(proc.pid) and time.time() < gone:
            time.sleep(0.05)
        left = _workers(proc.pid)
    finally:
        for worker in _workers(proc.pid):  # a failure here must not leave them training past the test
            os.kill(worker, signal.SIGKILL)
    assert not left, f"{len(left)} of the plan's workers outlived it"
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "in use" not in again.stderr
    for run in "ab":
        assert (out / run / "test_summary.csv").exists()
        steps = [json.loads(line)["step"] for line in (out / run / "metrics.jsonl").read_text().splitlines()]
        assert steps == list(range(1, 61))  # resumed from its checkpoint: every step logged once
