"""TensorBoard's event files hold the numbers of a run's JSON logs and test summary, as TensorBoard
reads them back (its EventAccumulator); with them off a run trains the same."""

import json

import numpy as np
import pandas as pd
from tiny import tiny

from workbench import events
from workbench.optim import OptimConfig
from workbench.train import TrainConfig, train

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
