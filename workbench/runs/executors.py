"""Where a plan's runs train: on this machine (in this process, or a pool of local processes), or
one submitit job per run (local processes, or a Slurm cluster). The study, the ablations and the
encoding comparisons all hand their runs here, so every plan resumes, reports and fails the same way.

    results = run_all({"fone-seed0": cfg, ...}, out=Path("runs/x"), jobs=2)
    results = run_all(runs, out, executor=Executor("slurm", partition="gpu", time=600))

Each run goes to OUT/<name> through `train_once` (finished runs of the same
configuration are read, not retrained; a killed run resumes from its checkpoint). With a submitit
executor a finished run is read here and never submitted; the others become jobs (logs in
OUT/jobs/<submission>/), and when they end their results are read here the same way, so the
tables are the local executor's. Each call submits into a folder of its own, made fresh with a
random name and mode 0700, and each batch of jobs into a subfolder of it: a job's result file is
read only from there, so a file planted in OUT/jobs, or an old job's result under a process ID
the new job got again, is never read (nor unpickled, which would run its code). A job with more
than one GPU starts torchrun inside it, one process per GPU. A run that fails, or whose job is
killed, does not stop the others: at the end `RunsFailed` names each one with its error (and its
job's log), after the finished ones were kept.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import active_children, get_context
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from ..cli import check_settings, setting, unknown
from ..model import numerics

EXECUTORS = ("local", "submitit-local", "slurm")
# Slurm's states of a job it ended before the job's program did (sacct's words).
SCHEDULER_KILLS = ("TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "DEADLINE", "BOOT_FAIL")
POLL_SECONDS = 1.0  # between looks at the running jobs


class RunsFailed(RuntimeError):
    """Some runs of a plan failed; the others finished and were kept."""


class Terminated(KeyboardInterrupt):
    """SIGTERM to the plan's process (`kill PID`, a scheduler's stop), raised where Ctrl-C's
    KeyboardInterrupt would be, so that it ends the workers the same way; `code` is the exit
    status a shell gives a process ended by the signal."""

    code = 128 + signal.SIGTERM


@dataclass
class Executor:
    """Where the runs train; the flags of every plan's command."""

    executor: str = setting(
        "local",
        "where the runs train: local (this machine, --jobs processes), "
        "submitit-local (one submitit job per run, on this machine), slurm (one Slurm job "
        "per run, sent with sbatch; run the command on a login node)",
        choices=EXECUTORS,
    )
    partition: str | None = setting(None, "Slurm partition of the jobs (default: the cluster's default partition)")
    time: int = setting(
        240,
        "time limit of each job, in minutes; a job killed at its limit keeps its checkpoint "
        "and the next call of the same command resumes it",
        low=1,
    )
    cpus_per_job: int = setting(1, "CPU cores per job (the runs' --threads stay as the plan sets them)", low=1)
    gpus_per_job: int = setting(
        0, "GPUs per job; more than one starts torchrun inside the job, one process per GPU", low=0
    )
    array_parallelism: int | None = setting(
        None,
        "jobs running at once (default: --jobs with submitit-local; all of them with slurm, as the scheduler allows)",
        low=1,
    )

    def __post_init__(self):
        check_settings(self)

    def check(self) -> None:
        """Raise ValueError, in one line, if this executor cannot start here (called before any job
        is submitted): submitit missing; for Slurm no sbatch, no answer from the controller or
        from job accounting (sacct), a partition that does not exist, or a time limit above the
        partition's."""
        if self.executor == "local":
            return
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise ValueError(
                f"--executor {self.executor} needs the submitit package (pip install -r requirements.txt)"
            ) from None
        if self.executor == "slurm":
            _check_slurm(self.partition, self.time)


def train_once(cfg, run_dir: Path, overwrite: bool = False) -> pd.DataFrame:
    """The run's test results in the results schema, with tokens per problem and training time;
    trains it first unless it finished before with this configuration, resuming a killed run from
    a checkpoint of this configuration. A finished run of another configuration is an error
    naming the settings that differ, or is retrained with `overwrite`. (Training is imported here,
    in the process that trains: planning a study needs no torch.)"""
    from ..results import results_from_summary
    from ..training.train import train
    from .folder import finished, recorded_differences, resumable

    cfg = cfg.updated(out=str(run_dir))
    differ = recorded_differences(cfg) if finished(cfg) else ""
    if differ and not overwrite:
        raise ValueError(f"{run_dir} holds a finished run of another configuration ({differ}); --overwrite retrains it")
    if differ or not finished(cfg):
        resume = resumable(cfg)  # a run killed before its first checkpoint, or another's, starts over
        train(cfg.updated(overwrite=not resume), resume=resume)
    summary = pd.read_csv(run_dir / "test_summary.csv")
    columns = [c for c in ("input_tokens", "output_tokens", "train_seconds") if c in summary]
    return results_from_summary(summary).join(summary.set_index("task")[columns], on="task")


def run_all(
    runs: dict, out: Path, jobs: int = 1, overwrite: bool = False, desc: str = "runs", executor: Executor | None = None
) -> dict[str, pd.DataFrame]:
    """Train (or read) every run {name: TrainConfig} into OUT/<name>; returns {name: its results
    table}. Local executor: `jobs` at a time, in this process when jobs is 1. Submitit executors:
    one job per run not finished yet."""
    executor = executor or Executor()
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs must be an integer >= 1, got {jobs!r}")
    modes = sorted({cfg.run.numerics for cfg in runs.values()})
    if len(modes) > 1:  # a process computes in one mode, fixed at its first computation (numerics.py)
        raise ValueError(
            f"the plan mixes --numerics {' and '.join(modes)}: a plan's runs share one mode; run each mode's as a plan of its own"
        )
    if modes:
        numerics.apply(modes[0])  # workers and jobs inherit the mode through the environment
    if executor.executor == "local":
        results, failed = _run_here(runs, Path(out), jobs, overwrite, desc)
    else:
        results, failed = _run_as_jobs(runs, Path(out), jobs, overwrite, desc, executor)
    if failed:
        shown = "\n".join(f"  {name} ({Path(out) / name}): {why}" for name, why in failed.items())
        raise RunsFailed(
            f"{len(failed)} of {len(runs)} runs failed (the {len(results)} others are kept; rerun the "
            f"same command to retry the failed ones):\n{shown}"
        )
    return results


def _one(cfg, run_dir: Path, overwrite: bool) -> pd.DataFrame:
    return train_once(cfg, run_dir, overwrite)


def _failed(name: str, err: BaseException) -> str:
    """Why a run failed, also written at once: a study of hours reports its failures only at its
    end, and one stopped before then would lose them."""
    why = f"{type(err).__name__}: {err}"
    tqdm.write(f"run {name} failed: {why}", file=sys.stderr)
    return why


def _run_here(runs: dict, out: Path, jobs: int, overwrite: bool, desc: str) -> tuple[dict, dict]:
    """The local executor: ({name: results}, {name: why it failed})."""
    results, failed = {}, {}
    if jobs == 1:
        for name, cfg in tqdm(runs.items(), desc=desc):
            try:
                results[name] = _one(cfg, out / name, overwrite)
            except (ValueError, OSError, RuntimeError, MemoryError) as err:
                failed[name] = _failed(name, err)
        return results, failed
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=_worker_starts)
    with pool, _sigterm_stops_the_plan():
        try:
            with _workers_ignore_ctrl_c():  # the pool spawns its workers here, at the submissions
                futures = {pool.submit(_one, cfg, out / name, overwrite): name for name, cfg in runs.items()}
            for future in tqdm(as_completed(futures), total=len(futures), desc=desc):
                try:
                    results[futures[future]] = future.result()
                except Exception as err:  # noqa: BLE001 - a worker's failure is reported with the others
                    failed[futures[future]] = _failed(futures[future], err)
        except KeyboardInterrupt:  # the workers ignore Ctrl-C and never see a SIGTERM sent to this process alone:
            # end them, or the pool would wait for their runs (or they would train on as orphans)
            for worker in active_children():
                worker.terminate()  # a run resumes from its last checkpoint, written whole (write_atomic)
                worker.join()
            # Wait for the pool's own thread to end: left running, it raced the interpreter's exit hook
            # that wakes it (Python 3.11 closes the wake-up pipe unlocked) and printed an OSError.
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return results, failed


def _worker_starts() -> None:
    """A worker's bars share a thread lock, not tqdm's default one across processes: a worker ended
    at Ctrl-C would leave that lock's semaphore behind, and the resource tracker report it as leaked.
    And a worker dies with its plan (`_die_with_the_plan`)."""
    _die_with_the_plan()
    from tqdm import tqdm as bars

    bars.set_lock(threading.RLock())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the plan's process's to handle
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked since the spawn


PR_SET_PDEATHSIG = 1  # prctl(2): the signal the kernel sends this process when its parent ends


def _die_with_the_plan() -> None:
    """A plan killed outright (kill -9, the OOM killer) runs no clean-up: its workers went on
    training as orphans, holding their run folders, and the same command run again failed "in
    use". On Linux the kernel now sends a worker SIGTERM when the plan's process ends, however it
    ends (the default action of SIGTERM: the worker stops at once; its run resumes from its last
    checkpoint, written whole). A plan that died before the request was made is caught after it:
    the worker's parent is no longer the plan."""
    from multiprocessing import parent_process

    plan = parent_process()
    if plan is None or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl in this C library: the worker lives as before
        return
    if os.getppid() != plan.pid:
        os._exit(128 + signal.SIGTERM)


@contextmanager
def _workers_ignore_ctrl_c():
    """Processes spawned inside start with SIGINT blocked (a thread's signal mask stays through
    fork and exec), and `_worker_starts` then ignores it for good. Ctrl-C reaches every process of
    the terminal's group: a worker still importing printed a traceback of the import, and one idle
    between runs another, while the plan's own process ends them all and says one line.
    This process is not made to ignore SIGINT meanwhile: another of its threads (torch's) would
    take the signal and discard it, and a Ctrl-C in the middle of the spawning would be lost. It is
    held instead, and raised as KeyboardInterrupt when the workers are all started."""
    if threading.current_thread() is not threading.main_thread():  # signals belong to the main thread
        yield
        return
    held = []
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one still pending here raises at once
    if held:
        raise KeyboardInterrupt


@contextmanager
def _sigterm_stops_the_plan():
    """SIGTERM ended the plan's process at once, and its workers trained on as orphans: within this
    block it raises `Terminated`, which ends them as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_as_jobs(runs: dict, out: Path, jobs: int, overwrite: bool, desc: str, executor: Executor) -> tuple[dict, dict]:
    """The submitit executors: finished runs read here, the others one job each; every ended job's
    run read here as the local executor reads it. ({name: results}, {name: why it failed})."""
    executor.check()  # before anything is submitted
    from .folder import finished, recorded_differences

    results, failed, todo = {}, {}, {}

    def read(name, cfg):  # a finished run's results, or why they cannot be read (another configuration)
        try:
            results[name] = train_once(cfg, out / name, overwrite)
        except (ValueError, OSError) as err:
            failed[name] = f"{type(err).__name__}: {err}"

    for name, cfg in runs.items():
        placed = cfg.updated(out=str(out / name))
        if finished(placed) and not (overwrite and recorded_differences(placed)):
            read(name, cfg)
        else:
            todo[name] = cfg
    ended, logs = _submit_and_wait(todo, out, jobs, overwrite, desc, executor) if todo else ({}, None)
    for name, (outcome, why) in ended.items():
        if outcome == "finished":
            read(name, todo[name])
        else:
            failed[name] = why
    counts = {k: sum(o == k for o, _ in ended.values()) for k in ("finished", "killed", "failed")}
    print(
        f"{desc} ({executor.executor}): {len(runs)} runs: {len(runs) - len(todo)} finished before (read, not "
        f"submitted), {len(todo)} submitted: {counts['finished']} finished, {counts['killed']} killed, "
        f"{counts['failed']} failed" + (f"; job logs in {logs}" if todo else ""),
        file=sys.stderr,
    )
    return results, failed


def _submit_and_wait(
    todo: dict, out: Path, jobs: int, overwrite: bool, desc: str, executor: Executor
) -> tuple[dict, Path]:
    """Submit one job per run, at most the parallelism at a time (on Slurm: one array, the
    scheduler keeps to it), and wait for all; ({name: (finished | killed | failed, why)}, the
    submission's folder)."""
    folder = submission_folder(out)
    limit = len(todo) if executor.executor == "slurm" else executor.array_parallelism or jobs
    waiting, running, ended, batches = list(todo), {}, {}, 0
    with tqdm(total=len(todo), desc=f"{desc} ({executor.executor} jobs)") as bar:
        while waiting or running:
            names, waiting = waiting[: limit - len(running)], waiting[limit - len(running) :]
            if names:
                # a batch's jobs run at once, so their process IDs (a local job's ID) differ; a later
                # batch gets a folder of its own, where no earlier job's result can wait
                batches += 1
                batch = folder / str(batches)
                batch.mkdir(mode=0o700)
                submitter = _submitit_executor(executor, batch, desc)
                submitted = submitter.map_array(
                    _train_job,
                    [todo[n] for n in names],
                    [(out / n).resolve() for n in names],
                    [overwrite] * len(names),
                    [executor.gpus_per_job] * len(names),
                )
                running.update(zip(submitted, names))
            for job in [j for j in running if j.done()]:
                ended[running.pop(job)] = _outcome(job)
                bar.update()
            if running:
                time.sleep(POLL_SECONDS)
    return ended, folder


def submission_folder(out: Path) -> Path:
    """OUT/jobs/<date>-<time>-<random>/: made fresh (mode 0700) for one call's jobs."""
    jobs = Path(out) / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=jobs))


def _own_file(path: Path) -> bool:
    """A plain file (no link) of this user's: what one of our jobs writes."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()


def _submitit_executor(executor: Executor, folder: Path, desc: str):
    import submitit

    slurm = executor.executor == "slurm"
    submitter = submitit.AutoExecutor(folder, cluster="slurm" if slurm else "local")
    submitter.update_parameters(
        name=desc,
        timeout_min=executor.time,
        cpus_per_task=executor.cpus_per_job,
        gpus_per_node=executor.gpus_per_job,
        nodes=1,
        tasks_per_node=1,
    )
    if slurm:
        submitter.update_parameters(
            slurm_array_parallelism=executor.array_parallelism or 256,
            **({"slurm_partition": executor.partition} if executor.partition else {}),
        )
    return submitter


def _outcome(job) -> tuple[str, str]:
    """(finished | killed | failed, why) of an ended job; `why` names its log. A job that left no
    result (ended by the scheduler, a signal or the memory limit) was killed: its run resumes."""
    from submitit.core.utils import FailedJobError

    state = job.state.split(" ")[0].upper()  # "CANCELLED by 0": cancelled
    log = f"(log: {job.paths.stderr})"
    resumes = f"its run keeps its last checkpoint and the next call resumes it {log}"
    if job.paths.result_pickle.exists() and not _own_file(job.paths.result_pickle):
        return "failed", f"job {job.job_id} left a result file that is not a plain file of yours; it was not read {log}"
    if not job.paths.result_pickle.exists():
        if state in SCHEDULER_KILLS:
            return "killed", f"job {job.job_id} was killed by the scheduler ({state}); {resumes}"
        if state in ("FINISHED", "INTERRUPTED"):  # a local job, whose process is gone
            return "killed", f"job {job.job_id} was killed (its process ended without a result); {resumes}"
    err = job.exception()  # waits a little for the result file on a slow shared disk
    if err is None:
        return "finished", ""
    if not isinstance(err, FailedJobError):
        return "killed", f"job {job.job_id} ended without a result ({state}); {resumes}"
    parts = str(err).split("-" * 22)  # submitit's message holds the job's traceback between two rules
    trace = (parts[1] if len(parts) > 2 else str(err)).strip().splitlines()
    return "failed", f"job {job.job_id} failed: {trace[-1] if trace else err} {log}"


def _train_job(cfg, run_dir: Path, overwrite: bool, gpus: int) -> None:
    """What a job runs: its run trained, resumed or read by `train_once`; with more than one GPU
    under torchrun, one process per GPU (every rank trains, rank 0 writes)."""
    if gpus <= 1:
        _one(cfg, run_dir, overwrite)
        return
    with tempfile.TemporaryDirectory() as tmp:  # the run, handed to this job's own torchrun processes
        spec = Path(tmp) / "run.pkl"
        spec.write_bytes(pickle.dumps((cfg, run_dir, overwrite)))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc-per-node={gpus}",
                "-m",
                "workbench.runs.executors",
                str(spec),
            ],
            check=True,
        )


def _check_slurm(partition: str | None, minutes: int) -> None:
    if shutil.which("sbatch") is None:
        raise ValueError(
            "--executor slurm: there is no sbatch on PATH (run the command on the cluster's login node; "
            "--executor submitit-local runs the same jobs on this machine)"
        )
    listing = _ask(["sinfo", "--noheader", "--format=%P %l"], "is the Slurm controller up?")
    _ask(
        ["sacct", "--noheader", "--starttime", "now"], "submitit follows its jobs with sacct: job accounting is needed"
    )
    limits, default = {}, None
    for line in listing.splitlines():
        name, limit = line.split()
        if name.endswith("*"):  # sinfo marks the default partition
            name = default = name[:-1]
        limits[name] = _minutes(limit)
    if partition is not None and partition not in limits:
        raise ValueError("--partition: " + unknown("Slurm partition", partition, limits))
    chosen = partition or default
    if chosen is None:
        raise ValueError(
            f"--executor slurm: the cluster has no default partition; name one with --partition "
            f"(partitions: {', '.join(limits) or 'none'})"
        )
    if limits[chosen] is not None and minutes > limits[chosen]:
        raise ValueError(f"--time {minutes}: partition {chosen!r} allows at most {limits[chosen]} minutes per job")


def _ask(command: list[str], hint: str) -> str:
    """The output of a Slurm command; a one-line ValueError with its error and `hint` if it fails."""
    try:
        answer = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ValueError(f"--executor slurm: {command[0]} did not answer ({err}); {hint}") from None
    if answer.returncode != 0:
        first = (answer.stderr.strip().splitlines() or ["no message"])[0]
        raise ValueError(f"--executor slurm: {command[0]} failed ({first}); {hint}")
    return answer.stdout


def _minutes(limit: str) -> int | None:
    """Minutes of a Slurm time limit as sinfo prints it ([days-]hours:minutes:seconds, minutes:seconds,
    minutes; rounded up); None for no limit."""
    if limit.lower() in ("infinite", "unlimited", "n/a"):
        return None
    days, _, clock = limit.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    hours, minutes, seconds = ([0, 0] + parts)[-3:] if len(parts) > 1 else (0, parts[0], 0)
    return int(days or 0) * 1440 + hours * 60 + minutes + (seconds > 0)


if __name__ == "__main__":  # one rank of a job's torchrun (see _train_job)
    _one(*pickle.loads(Path(sys.argv[1]).read_bytes()))
