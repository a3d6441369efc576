"""--prefetch process (workbench/training/batch_worker.py): the worker process builds the batches built in
the main process, bit for bit, across evaluations and a resume; it leaves no process and no file
behind; a failure in it is one error that names it; a run trained with it logs what one without
it logs."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from tiny import tiny

from workbench.runs import distributed
from workbench.runs.checkpoints import BestWriter
from workbench.training.batch_worker import BatchWorkerError, ProcessLoader
from workbench.training.batches import Batch, prefetch_mode
from workbench.training.train import TrainConfig, open_loader, save_checkpoint, setup, step_batches, train

TASKS = ("addition", "multiplication", "division")  # two curriculum tasks; BitTokens' binary pools and hand-over
STEPS, EVERY, RESUME_AT = 12, 3, 7


def same(here: list[Batch], there: list[Batch], step: int) -> None:
    assert len(here) == len(there), step
    for m, (a, b) in enumerate(zip(here, there)):
        assert set(a.tensors()) == set(b.tensors()), (step, m)
        for name, x in a.tensors().items():
            y = getattr(b, name)
            assert (x.dtype, x.shape) == (y.dtype, y.shape) and torch.equal(x, y), (step, m, name)


def adapt(run, step: int) -> None:
    """What an evaluation changes in the data (eq. 16's ratios, C.3's frontiers and level shares),
    from made-up scores: both runs get the same, without the cost of answering questions."""
    run.balancer.update({t: (k + 1) / (len(run.cfg.tasks) + 1) for k, t in enumerate(run.cfg.tasks)})
    for c in run.sampler.curricula.values():
        c.update({level: 1.0 if level <= c.frontier else 0.5 for level in range(c.max_difficulty + 1)}, step + 1, 1.0)


def config(encoding: str, out: Path, **settings) -> TrainConfig:
    values = tiny(2 * STEPS, encoding=encoding, tasks=TASKS, grad_accum=2, eval_every=EVERY, decades=(0, 3))
    return TrainConfig.of(**{**values, **settings}, out=str(out))


@pytest.mark.parametrize(
    "encoding", ["fone", pytest.param("bittokens", marks=pytest.mark.slow), "xval", "single_digit"]
)
def test_the_worker_builds_the_batches_built_here_across_evaluations_and_a_resume(encoding, tmp_path):
    here = setup(config(encoding, tmp_path / "here"))
    there = setup(config(encoding, tmp_path / "there", prefetch="process"))
    assert there.prefetch == "process" and (tmp_path / "there" / "pools").is_dir()
    frontiers = {t: c.frontier for t, c in here.sampler.curricula.items()}

    def follow(run, loader, steps):
        for step in steps:
            same(step_batches(here, step), loader.get(step), step)
            assert run.rng.bit_generator.state == here.rng.bit_generator.state
            if (step + 1) % EVERY == 0:  # as the loop: nothing built ahead across an evaluation
                adapt(here, step)
                adapt(run, step)
            elif step + 1 < STEPS:
                loader.prefetch(step + 1)

    with open_loader(there) as loader:
        distributed.drop_shared_pools(tmp_path / "there" / "pools", 0, 1)  # the worker's maps outlive the files
        follow(there, loader, range(RESUME_AT))
    there.state["step"], there.best_writer = RESUME_AT, BestWriter()
    save_checkpoint(there)
    there.best_writer.close()
    resumed = setup(config(encoding, tmp_path / "there", prefetch="process"), resume=True)
    with open_loader(resumed) as loader:
        follow(resumed, loader, range(RESUME_AT, STEPS))
    assert {t: c.frontier for t, c in here.sampler.curricula.items()} != frontiers  # the updates were taken
    assert len(set(here.balancer.ratios.values())) > 1


def test_auto_prefetch_is_a_process_on_cuda_and_off_on_a_cpu():
    assert prefetch_mode("auto", "cuda") == "process" and prefetch_mode("auto", "cpu") == "off"
    assert prefetch_mode("on", "cpu") == "thread" and prefetch_mode("process", "cpu") == "process"
    with pytest.raises(ValueError, match="--prefetch"):
        prefetch_mode("fork", "cuda")


# -- the worker's life, with a builder made up here -------------------------------------------------
class Made:
    """A worker builder without pools: step s's batch is s everywhere, larger every step (the
    slots grow), with 0-d, empty and bool tensors; it fails as `fail` says at step `at`."""

    def __init__(self, fail=None, at=None):
        self.fail, self.at = fail, at

    def open(self):
        return self

    def serve(self, step, state):
        if step == self.at and self.fail == "raise":
            raise ValueError(f"planted failure at step {step}")
        if step == self.at and self.fail == "die":
            os._exit(7)
        if step == self.at and self.fail == "hang":
            time.sleep(3600)
        n = 1000 * (step + 1) ** 2
        full = dict(
            ids=torch.full((2, n), step),
            values=torch.full((2, n), step / 3, dtype=torch.float64),
            positions=torch.arange(2 * n).view(2, n),
            doc_ids=torch.zeros(2, n, dtype=torch.int64),
            targets=torch.full((2, n), step),
            target_values=torch.zeros(2, n, dtype=torch.float64),
            loss_mask=torch.arange(2 * n).view(2, n) % 2 == 0,
            task_ids=torch.zeros(2, n, dtype=torch.int64),
            ce_count=torch.tensor(step),
            number_count=torch.tensor(0),
            loss_index=torch.arange(n),
            num_index=torch.empty(0, dtype=torch.int64),
            features=torch.full((3, 5), step, dtype=torch.float32),
        )
        return [Batch(**full), Batch(**full)], {"after": state["at"] + 1}


class Missing(Made):
    def open(self):
        raise FileNotFoundError("no pool files where the spec says")


def loader_of(spec, **options):
    adopted = []
    loader = ProcessLoader(spec, lambda step: {"at": step}, adopted.append, **options)
    return loader, adopted


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_worker_hands_over_views_and_the_generator_and_leaves_nothing_behind():
    loader, adopted = loader_of(Made())
    folder, pid = loader.folder, loader.pid
    for step in range(4):
        batches = loader.get(step)
        assert all(int(b.ce_count) == step and b.ids.shape == (2, 1000 * (step + 1) ** 2) for b in batches)
        assert torch.equal(batches[1].loss_mask, torch.arange(batches[1].ids.numel()).view(2, -1) % 2 == 0)
        assert batches[0].num_index.shape == (0,) and float(batches[0].features[2, 4]) == step
        assert adopted[-1] == {"after": step + 1}
        if step % 2 == 0:
            loader.prefetch(step + 1)
    assert list(folder.iterdir()) == []  # the slots are unlinked once both processes map them
    loader.close()
    assert gone(pid) and not folder.exists()


KILLED = """
import sys, time
sys.path[:0] = {path!r}
from test_batch_worker import Made, loader_of
loader, _ = loader_of(Made())
loader.get(0)
loader.prefetch(1)
print(loader.pid, loader.folder, flush=True)
time.sleep(600)
"""


def test_a_main_process_killed_takes_its_worker_and_files_with_it():
    main = subprocess.Popen([sys.executable, "-c", KILLED.format(path=sys.path)], stdout=subprocess.PIPE, text=True)
    try:
        pid, folder = main.stdout.readline().split()
    finally:
        main.kill()  # SIGKILL: no finally, no atexit in the main process
        main.wait()
    deadline = time.time() + 30
    while time.time() < deadline and not (gone(int(pid)) and not Path(folder).exists()):
        time.sleep(0.1)
    assert gone(int(pid)) and not Path(folder).exists()


@pytest.mark.parametrize(
    "fail, said",
    [("raise", r"failed building the batch of step 2: ValueError: planted failure at step 2"), ("die", "exit code 7")],
    ids=["raise", "die"],
)
def test_a_failure_in_the_worker_is_one_error_naming_it(fail, said):
    loader, _ = loader_of(Made(fail, at=2))
    folder, pid = loader.folder, loader.pid
    loader.get(0)
    loader.prefetch(1)
    loader.get(1)
    loader.prefetch(2)
    started = time.time()
    with pytest.raises(BatchWorkerError, match=rf"batch worker process \(pid {pid}\) .*{said}") as caught:
        loader.get(2)
    assert time.time() - started < 30
    if fail == "raise":  # the worker's own traceback comes with it
        assert "the worker's traceback" in str(caught.value) and "in serve" in str(caught.value)
    assert gone(pid) and not folder.exists()
    with pytest.raises(BatchWorkerError, match="stopped"):
        loader.get(3)
    loader.close()


def test_a_worker_that_stops_answering_is_an_error_not_a_hang():
    loader, _ = loader_of(Made("hang", at=1), timeout=3)
    pid = loader.pid
    loader.get(0)
    with pytest.raises(BatchWorkerError, match=r"gave no answer in 3 s building the batch of step 1"):
        loader.get(1)
    assert gone(pid)


def test_a_worker_that_cannot_start_says_why():
    with pytest.raises(BatchWorkerError, match=r"failed starting: .*no pool files"):
        loader_of(Missing())


# -- whole runs -------------------------------------------------------------------------------------
def rows(run: Path, name: str) -> list[dict]:
    """A log's rows without their clock."""
    return [
        {k: v for k, v in json.loads(line).items() if k != "time"} for line in (run / name).read_text().splitlines()
    ]


def test_a_run_with_the_batches_built_in_a_process_logs_what_one_without_logs(tmp_path):
    settings = dict(tokens=2 * 128 * 12, eval_every=4, checkpoint_every=2, pool_size=200, val_samples=8, test_samples=8)
    off = train(config("fone", tmp_path / "off", **settings))
    process = train(config("fone", tmp_path / "process", prefetch="process", **settings))
    for name in ("metrics.jsonl", "evals.jsonl"):
        assert rows(off, name) == rows(process, name)
    assert len(rows(off, "metrics.jsonl")) == 6  # two micro-batches a step
    assert (off / "test_samples.csv").read_bytes() == (process / "test_samples.csv").read_bytes()
    assert not (process / "pools").exists()
    env = json.loads((process / "environment.json").read_text())
    assert env["resolved"]["prefetch"] == "process"


ARGS = [
    "--encoding",
    "bittokens",
    "--tasks",
    ",".join(TASKS),
    "--preset",
    "cpu-tiny",
    "--batch-size",
    "2",
    "--tokens",
    str(2 * 128 * 16),
    "--pool-size",
    "200",
    "--val-samples",
    "4",
    "--test-samples",
    "4",
    "--eval-every",
    "4",
    "--checkpoint-every",
    "2",
    "--decades",
    "0",
    "3",
    "--threads",
    "1",
]


@pytest.mark.slow
def test_ctrl_c_leaves_no_process_behind_and_a_resume_retraces_the_run(tmp_path):
    settings = dict(tokens=2 * 128 * 16, grad_accum=1, eval_every=4, checkpoint_every=2, pool_size=200)
    reference = train(config("bittokens", tmp_path / "reference", **settings))
    folders = set(Path("/dev/shm").glob("workbench-batches-*"))
    out = tmp_path / "stopped"
    command = [sys.executable, "-m", "workbench.train", *ARGS, "--prefetch", "process", "--out", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    children = []
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        children = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        if children and (out / "checkpoint.pt").exists() and (out / "metrics.jsonl").exists():
            if len((out / "metrics.jsonl").read_text().splitlines()) >= 5:
                break
        time.sleep(0.05)
    assert proc.poll() is None and children, "the run ended before it could be stopped"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "--resume" in err, err
    deadline = time.time() + 30
    while time.time() < deadline and not all(gone(pid) for pid in children):
        time.sleep(0.1)
    assert all(gone(pid) for pid in children)
    assert set(Path("/dev/shm").glob("workbench-batches-*")) <= folders  # no slot folder left
    subprocess.run([*command, "--resume"], check=True, capture_output=True, timeout=600)
    assert rows(out, "metrics.jsonl") == rows(reference, "metrics.jsonl")
