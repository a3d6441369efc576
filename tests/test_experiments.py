"""The encoding sweep: one results table, finished runs skipped on a rerun (resumable)."""
import pandas as pd
import pytest

from workbench import experiments
from workbench.train import TrainConfig

TINY = TrainConfig(tasks=("addition", "minmax"), preset="cpu-tiny", batch_size=2, tokens=2 * 128 * 4,
                   pool_size=200, val_samples=4, test_samples=6, eval_every=4, checkpoint_every=2,
                   decades=(0, 1), max_digits=2, threads=1)


@pytest.fixture
def tiny_protocol(monkeypatch):
    monkeypatch.setitem(experiments.PROTOCOLS, "tiny", TINY)
    return "tiny"


def test_sweep_writes_one_table_and_skips_finished_runs(tmp_path, tiny_protocol):
    table = experiments.run_protocol(tiny_protocol, seeds=(0,), out=tmp_path, encodings=["bittokens", "single_digit"])
    saved = pd.read_csv(tmp_path / "results.csv")
    assert len(saved) == len(table) == 2 * 3  # per encoding: log-sMAPE + exact (addition), accuracy (minmax)
    assert set(saved.encoding) == {"bittokens", "single_digit"} and set(saved.task) == {"addition", "minmax"}
    assert {"value", "metric", "seed", "input_tokens", "output_tokens", "train_seconds"} <= set(saved.columns)
    assert saved.value.between(0, 1).all()
    # digits spend more input tokens per problem than one <|num|> per number (Table 5)
    tokens = saved.groupby("encoding").input_tokens.mean()
    assert tokens["single_digit"] > tokens["bittokens"]

    kept = tmp_path / "bittokens-seed0" / "test_summary.csv"
    stamp = kept.stat().st_mtime_ns
    redo = tmp_path / "single_digit-seed0"
    (redo / "test_summary.csv").unlink()  # as if the sweep had stopped during this run
    again = experiments.run_protocol(tiny_protocol, seeds=(0,), out=tmp_path, encodings=["bittokens", "single_digit"])
    assert kept.stat().st_mtime_ns == stamp  # finished run not retrained
    assert (redo / "test_summary.csv").exists()
    pd.testing.assert_frame_equal(again.drop(columns="train_seconds"), table.drop(columns="train_seconds"))


def test_unknown_protocol_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown protocol"):
        experiments.run_protocol("gpu-tier", out=tmp_path)


def test_cpu_tier_is_one_protocol_for_every_encoding():
    cpu = experiments.PROTOCOLS["cpu-tier"]
    assert set(cpu.tasks) >= {"addition", "multiplication", "division", "minmax", "sorting", "interval"}
    paper = experiments.PROTOCOLS["paper-tier"]  # appendix C.1: 117M model, 10B tokens, batch 192
    assert (paper.preset, paper.tokens, paper.batch_size) == ("paper", 1e10, 192)
    assert set(paper.tasks) >= set(cpu.tasks)
