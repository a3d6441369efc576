"""TensorBoard's event files hold the numbers of a run's JSON logs and test summary, as TensorBoard
reads them back (its EventAccumulator); with them off a run trains the same."""

import errno
import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from tiny import tiny

from workbench.runs import events
from workbench.training.optim import OptimConfig
from workbench.training.train import TrainConfig, train

TINY = tiny(
    8,
    encoding="bittokens",
    tasks=("addition", "multiplication"),
    pool_size=200,
    eval_every=4,
    checkpoint_every=4,
    decades=(0, 1),
    max_digits=2,
    optim=OptimConfig(newton_schulz="float32"),
)


def logged(path) -> dict[str, list[tuple[int, float]]]:
    """The oracle: {name: [(step, value as float32)]} of a JSON log, numbers only."""
    series = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        for name, value in row.items():
            if name not in ("step", "time") and isinstance(value, (int, float)) and not isinstance(value, bool):
                series.setdefault(name, []).append((row["step"], float(np.float32(value))))
    return series


def expected(run) -> dict[str, list[tuple[int, float]]]:
    out = {f"train/{k}": v for k, v in logged(run / "metrics.jsonl").items()}
    out.update({f"eval/{k}": v for k, v in logged(run / "evals.jsonl").items()})
    summary = pd.read_csv(run / "test_summary.csv")
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    out.update({f"test/{t}": [(last, float(np.float32(s)))] for t, s in zip(summary.task, summary.score)})
    return out


def test_tensorboard_reads_back_the_logged_numbers(tmp_path, monkeypatch):
    run = train(TrainConfig.of(**TINY, out=str(tmp_path / "run")))
    found, wanted = events.read(run), expected(run)
    assert {
        "train/loss",
        "train/lr",
        "eval/score/addition",
        "eval/harmonic_mean",
        "eval/frontier/multiplication",
        "test/addition",
    } <= set(found)
    assert found == wanted
    assert [s for s, _ in found["train/loss"]] == list(range(1, 9))

    monkeypatch.setenv("WORKBENCH_TENSORBOARD", "0")  # without events: no tb/, the same run
    bare = train(TrainConfig.of(**TINY, out=str(tmp_path / "bare")))
    assert not (bare / events.FOLDER).exists()
    assert logged(bare / "metrics.jsonl")["loss"] == wanted["train/loss"]


def test_overwrite_replaces_the_old_curves(tmp_path):
    out = tmp_path / "run"
    train(TrainConfig.of(**TINY, out=str(out)))
    train(TrainConfig.of(**{**TINY, "tokens": 2 * 128 * 4}, out=str(out), overwrite=True))
    assert len(list((out / events.FOLDER).glob(events.PREFIX + "*"))) == 1
    assert events.read(out) == expected(out)


def test_a_tb_folder_deleted_under_a_live_run_stops_the_events_in_one_line_and_the_run_goes_on(
    tmp_path, monkeypatch, capfd
):
    original = events.Events.add

    def add(self, group, row, step):
        if group == "train" and step == 3:
            shutil.rmtree(self.folder)  # as `rm -r RUN/tb` from another shell
        original(self, group, row, step)

    monkeypatch.setattr(events.Events, "add", add)
    run = train(TrainConfig.of(**TINY, out=str(tmp_path / "run")))
    err = capfd.readouterr().err
    said = [line for line in err.splitlines() if "TensorBoard" in line]
    assert len(said) == 1 and "tb was removed or replaced during the run; training goes on" in said[0]
    assert "Traceback" not in err and "Exception in thread" not in err
    assert [s for s, _ in logged(run / "metrics.jsonl")["loss"]] == list(range(1, 9))  # every step trained
    assert (run / "test_summary.csv").exists() and not (run / events.FOLDER).exists()


def test_a_tb_swapped_for_a_link_during_the_run_carries_no_event_there(tmp_path, capfd):
    run, victim = tmp_path / "run", tmp_path / "victim"
    run.mkdir()
    victim.mkdir()
    log = events.Events(run, rank=0)
    log.add("train", {"loss": 1.0}, 1)
    (run / "tb").rename(run / "tb.old")
    (run / "tb").symlink_to(victim)
    log.writer.add_scalar("train/loss", 2.0, 2)  # past the check in add: TensorBoard's own writes
    log.writer.flush()
    log.add("train", {"loss": 3.0}, 3)
    log.close()
    assert list(victim.iterdir()) == []
    assert len(list((run / "tb.old").glob(events.PREFIX + "*"))) == 1  # the folder it opened kept them
    assert capfd.readouterr().err.count("TensorBoard events stopped") == 1
    (run / "tb").unlink()
    (run / "tb").symlink_to(victim)  # a link made after the run's checks, before the events open
    with pytest.raises(ValueError, match=r"run/tb is a link: .*never through a link"):
        events.Events(run, rank=0)
    assert list(victim.iterdir()) == []


def test_a_full_disk_stops_the_events_in_one_line(tmp_path, monkeypatch, capfd):
    from tensorboard.compat.tensorflow_stub.io import gfile

    log = events.Events(tmp_path, rank=0)
    log.add("train", {"loss": 1.0}, 1)

    def full(self, filename, content, mode):  # what a write on a full file system raises
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)

    monkeypatch.setattr(gfile.LocalFileSystem, "_write", full)
    for step in range(2, 6):
        log.add("train", {"loss": float(step)}, step)
    log.close()
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("TensorBoard events stopped: No space left on device")
    assert str(tmp_path / "tb" / events.PREFIX) in err and "/proc/" not in err and "Traceback" not in err
