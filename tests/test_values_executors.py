"""Executors: a plan larger than the array parallelism (issue 40).

The submitit executors submit the runs as arrays of at most the parallelism's size, a new array
whenever jobs end. Every run must be submitted once, in its own array slot with its own
configuration and its own folder, never more jobs running than allowed, and each run's results
read back from its folder. Submitit is replaced by an in-process stand-in (its jobs end after a
few looks, in a scrambled order); what a job runs is the executor's own `_train_job`, with the
training itself (`_one`) replaced by a stand-in that writes what training leaves in a finished
run folder, so the results are read back by the real `executors.train_once`."""

import json
from pathlib import Path

import pandas as pd
import pytest

from workbench.config import TrainConfig, recorded
from workbench.runs import executors
from workbench.runs.executors import Executor, RunsFailed, run_all

BASE = TrainConfig.of(
    preset="cpu-tiny", batch_size=2, tokens=2 * 128 * 4, pool_size=100, val_samples=4, test_samples=4, threads=1
)


def score_of(cfg) -> float:
    return round(0.01 * cfg.seed + 0.001, 6)


def fake_training(cfg, run_dir: Path, overwrite: bool):
    """What a finished run leaves: its configuration and a test summary whose score names the run."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(recorded(cfg.updated(out=str(run_dir)))))
    pd.DataFrame(
        {
            "encoding": [cfg.encoding],
            "seed": [cfg.seed],
            "task": [cfg.tasks[0]],
            "score": [score_of(cfg)],
            "exact": [0.0],
            "input_tokens": [6.0],
            "output_tokens": [2.0],
            "train_seconds": [1.0],
        }
    ).to_csv(run_dir / "test_summary.csv", index=False)


class FakeJob:
    def __init__(self, submitter, fn, args, polls):
        self.submitter, self.fn, self.args, self.polls, self.ended = submitter, fn, args, polls, False

    def done(self):
        if not self.ended:
            self.polls -= 1
            if self.polls <= 0:  # the job runs its function when it ends
                self.fn(*self.args)
                self.ended = True
                self.submitter.running -= 1
        return self.ended


class FakeSubmitter:
    """map_array as submitit's: one job per element of the argument lists."""

    def __init__(self):
        self.arrays, self.running, self.most_running, self.count = [], 0, 0, 0

    def map_array(self, fn, *iterables):
        calls = list(zip(*iterables))
        self.arrays.append(calls)
        jobs = []
        for args in calls:
            self.count += 1
            jobs.append(FakeJob(self, fn, args, polls=1 + (self.count * 7) % 4))  # ends after 1 to 4 looks
        self.running += len(jobs)
        self.most_running = max(self.most_running, self.running)
        return jobs


@pytest.fixture
def fake_submitit(monkeypatch):
    submitter = FakeSubmitter()
    monkeypatch.setattr(executors, "_submitit_executor", lambda executor, folder, desc: submitter)
    monkeypatch.setattr(executors, "_outcome", lambda job: ("finished", ""))
    monkeypatch.setattr(executors, "_one", fake_training)
    monkeypatch.setattr(executors, "POLL_SECONDS", 0.0)
    return submitter


@pytest.mark.parametrize("runs, parallelism, jobs", [(7, 2, 1), (5, 3, 1), (6, 1, 1), (4, None, 3), (3, 5, 1)])
def test_every_array_trains_its_own_runs_in_their_own_folders(fake_submitit, tmp_path, runs, parallelism, jobs):
    """Bugs: a second array given the first array's folders or configurations; the runs beyond
    the first array dropped or submitted twice; more jobs at once than the parallelism."""
    plan = {f"run{k}": BASE.updated(seed=k) for k in range(runs)}
    results = run_all(plan, tmp_path, jobs=jobs, executor=Executor("submitit-local", array_parallelism=parallelism))
    limit = parallelism or jobs
    submitted = [call for array in fake_submitit.arrays for call in array]
    assert len(submitted) == runs and len(fake_submitit.arrays) >= -(-runs // limit)
    assert all(len(array) <= limit for array in fake_submitit.arrays)
    assert fake_submitit.most_running <= limit
    by_folder = {Path(folder): cfg for cfg, folder, overwrite, gpus in submitted}
    assert by_folder == {(tmp_path / name).resolve(): cfg for name, cfg in plan.items()}
    for name, cfg in plan.items():
        read = results[name].set_index("metric")
        assert read.loc["log_smape", "value"] == score_of(cfg) and read.loc["log_smape", "seed"] == cfg.seed, name


def test_a_failed_run_in_a_later_array_is_named_and_the_others_are_kept(fake_submitit, tmp_path, monkeypatch):
    """The run in the third array fails; the five others are read from their folders."""
    plan = {f"run{k}": BASE.updated(seed=k) for k in range(6)}
    monkeypatch.setattr(
        executors,
        "_outcome",
        lambda job: ("failed", "job 9 failed: boom") if job.args[0].seed == 4 else ("finished", ""),
    )
    with pytest.raises(RunsFailed) as err:
        run_all(plan, tmp_path, executor=Executor("submitit-local", array_parallelism=2))
    assert str(err.value).splitlines()[0].startswith("1 of 6 runs failed (the 5 others are kept")
    assert "run4" in str(err.value) and "boom" in str(err.value)
