"""The encoding sweep: one results table, finished runs skipped on a rerun (resumable)."""

import json
import os
import re

import pandas as pd
import pytest
from tiny import tiny

from workbench import experiments
from workbench.training.train import TrainConfig

TINY = TrainConfig.of(
    **tiny(
        4,
        tasks=("addition", "minmax"),
        pool_size=200,
        test_samples=6,
        eval_every=4,
        checkpoint_every=2,
        decades=(0, 1),
        max_digits=2,
    )
)


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
    assert (paper.model.preset, paper.tokens, 8 * paper.batch_size) == ("paper", 1e10, 192)  # on 8 GPUs
    assert paper.accumulation(4) == 2 and paper.accumulation(8) == 1  # batch 192 on fewer GPUs too
    assert (paper.model.text_bpe, paper.evaluation.eval_every, paper.evaluation.val_samples) == (
        "gpt2",
        64,
        384,
    )  # --config paper's
    assert set(paper.tasks) >= set(cpu.tasks)


def test_summarize_averages_seeds_and_ranks_encodings():
    rows = []
    for encoding, scores in {"bittokens": (0.6, 0.8), "xval": (0.1, 0.3)}.items():
        for seed, score in enumerate(scores):
            common = dict(
                encoding=encoding,
                task="division",
                seed=seed,
                input_tokens=7.0,
                output_tokens=2.0 + seed,
                train_seconds=120.0,
            )
            rows += [dict(common, metric="log_smape", value=score), dict(common, metric="exact_match", value=score / 2)]
    rows.append(
        dict(
            encoding="xval",
            task="minmax",
            seed=0,
            input_tokens=11.0,
            output_tokens=2.0,
            train_seconds=60.0,
            metric="accuracy",
            value=0.5,
        )
    )
    summary = experiments.summarize(pd.DataFrame(rows))
    division = summary[summary.task == "division"]
    assert division.encoding.tolist() == ["bittokens", "xval"]  # best first
    first = division.iloc[0]
    assert first.score == pytest.approx(0.7) and first.score_std == pytest.approx(0.1414213, rel=1e-5)
    assert first.exact == pytest.approx(0.35) and first.tokens == pytest.approx(9.5)
    assert first.minutes == pytest.approx(2.0) and first.seeds == 2 and first.metric == "log_smape"
    minmax = summary[summary.task == "minmax"].iloc[0]
    assert minmax.metric == "accuracy" and pd.isna(minmax.exact)


def test_a_finished_run_of_another_protocol_is_not_taken_as_this_ones(tmp_path, tiny_protocol, monkeypatch, capsys):
    """Bug: paper-tier accepted a cpu-tiny 4,000-token run as its result. A finished run whose
    recorded configuration differs is refused, naming the settings (in one line at the command
    line), or retrained with --overwrite."""
    experiments.run_protocol(tiny_protocol, seeds=(0,), out=tmp_path, encodings=["single_digit"])
    monkeypatch.setitem(experiments.PROTOCOLS, "other", TINY.updated(tokens=2 * 128 * 6))
    with pytest.raises(experiments.RunsFailed, match=r"another configuration \(tokens: 1024 \(recorded\) vs 1536\)"):
        experiments.run_protocol("other", seeds=(0,), out=tmp_path, encodings=["single_digit"])
    with pytest.raises(SystemExit):
        experiments.main(["cpu-tier", "--encodings", "single_digit", "--seeds", "0", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert "another configuration" in err and "Traceback" not in err
    table = experiments.run_protocol("other", seeds=(0,), out=tmp_path, encodings=["single_digit"], overwrite=True)
    assert json.loads((tmp_path / "single_digit-seed0" / "config.json").read_text())["tokens"] == 1536
    assert len(table) == 3


def test_dry_run_counts_the_plan_and_estimates_from_finished_runs(tmp_path, tiny_protocol):
    """--dry-run: the runs, which of them OUT holds finished or resumable, the tokens left, and a
    time from the finished runs' own throughput; nothing trained, nothing written."""
    import torch

    from workbench.runs import dryrun

    experiments.run_protocol(tiny_protocol, seeds=(0,), out=tmp_path, encodings=["bittokens", "single_digit"])
    (tmp_path / "single_digit-seed0" / "test_summary.csv").unlink()  # stopped half way: 2 of its 4 steps
    path = tmp_path / "single_digit-seed0" / "checkpoint.pt"
    ckpt = torch.load(path, weights_only=True)
    ckpt["state"]["step"] = 2
    torch.save(ckpt, path)
    before = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    runs = experiments.protocol_runs(tiny_protocol, (0,), ["bittokens", "single_digit", "fone"])
    text = dryrun.report("tiny", runs, tmp_path, jobs=2)
    assert sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before
    assert "tiny: 3 runs" in text
    counts = {m[0]: int(m[1]) for m in re.findall(r"^  (finished before|resumable|to train): +(\d+)", text, re.M)}
    assert counts == {"finished before": 1, "resumable": 1, "to train": 1}
    left = TINY.tokens * 1.5  # fone's budget and half of single digit's
    assert f"tokens to train: {left / 1e6:,.1f}M of the plan's {3 * TINY.tokens / 1e6:,.1f}M" in text
    seconds = pd.read_csv(tmp_path / "bittokens-seed0" / "test_summary.csv").train_seconds.iloc[0]
    speed = TINY.tokens / seconds  # the oracle: the one finished run's tokens over its time
    assert f"cpu-tiny: {speed:,.0f} tokens/s (the median of 1 finished run(s) in OUT)" in text
    assert f"estimated time: {left / speed:.0f} s of training" in text  # a few seconds: the runs are tiny


def test_dry_run_wall_time_is_never_shorter_than_the_longest_run(tmp_path, tiny_protocol):
    """Runs side by side share the cores, but a plan never ends before its longest run: one run
    of 4x the others' budget beside three short ones, two at a time, takes the long run's time."""
    from workbench.runs import dryrun

    runs = experiments.protocol_runs(tiny_protocol, (0,), ["bittokens", "single_digit", "fone", "xval"])
    runs["bittokens-seed0"] = runs["bittokens-seed0"].updated(tokens=4 * TINY.tokens)
    text = dryrun.report("tiny", runs, tmp_path / "none", jobs=2)
    speed = dryrun.THROUGHPUT["cpu-tiny"]
    longest, total = 4 * TINY.tokens / speed, 7 * TINY.tokens / speed  # the oracle: by hand
    assert total / 2 < longest
    assert f"estimated time: {total:.0f} s of training, about {longest:.0f} s with 2 run(s) side by side" in text
    even = experiments.protocol_runs(tiny_protocol, (0,), ["bittokens", "single_digit", "fone", "xval"])
    assert f"about {2 * TINY.tokens / speed:.0f} s with 2 run(s)" in dryrun.report("tiny", even, tmp_path, jobs=2)


def test_dry_run_refuses_impossible_records_in_one_line(tmp_path, tiny_protocol, capsys):
    """A finished run's test summary can say anything: a time below 0, NaN, infinite, text or
    1e-300 s gives no estimate but a one-line error naming the file; a FIFO in place of the summary
    or of a checkpoint is refused without waiting on it; a 100,000-deep config.json is no record
    (the run counts as another configuration); --jobs below 1 is refused."""
    from workbench.runs import dryrun

    experiments.run_protocol(tiny_protocol, seeds=(0,), out=tmp_path, encodings=["bittokens"])
    summary = tmp_path / "bittokens-seed0" / "test_summary.csv"
    kept = pd.read_csv(summary)
    runs = experiments.protocol_runs(tiny_protocol, (0,), ["bittokens", "single_digit"])
    for bad in (-200.0, "nan", "inf", "-inf", 0, "soon", 5e-324):
        kept.assign(train_seconds=bad).to_csv(summary, index=False)
        with pytest.raises(ValueError) as error:
            dryrun.report("tiny", runs, tmp_path, jobs=2)
        message = str(error.value)
        assert "\n" not in message and str(summary) in message or "tokens/s, not a speed" in message
    kept.drop(columns="train_seconds").to_csv(summary, index=False)  # an older run: no time, the preset's figure
    assert "workbench.runs.dryrun.THROUGHPUT" in dryrun.report("tiny", runs, tmp_path, jobs=2)
    summary.unlink()
    os.mkfifo(summary)
    with pytest.raises(ValueError, match=r"test_summary.csv is a FIFO"):
        dryrun.report("tiny", runs, tmp_path, jobs=2)
    summary.unlink()
    kept.to_csv(summary, index=False)
    for jobs in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="--jobs must be an integer >= 1"):
            dryrun.report("tiny", runs, tmp_path, jobs=jobs)
    with pytest.raises(SystemExit):
        experiments.main(["cpu-tier", "--dry-run", "--jobs", "-5", "--out", str(tmp_path / "elsewhere")])
    err = capsys.readouterr().err
    assert "--jobs must be an integer >= 1, got -5" in err and "Traceback" not in err
    (tmp_path / "bittokens-seed0" / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    assert "finished with another configuration: 1" in dryrun.report("tiny", runs, tmp_path, jobs=2)
    stopped = tmp_path / "single_digit-seed0"
    stopped.mkdir()
    os.mkfifo(stopped / "checkpoint.pt")  # torch.load of a FIFO waits for a writer forever
    assert re.search(r"to train: +1$", dryrun.report("tiny", runs, tmp_path, jobs=2), re.M)


def test_study_runs_are_chosen_by_the_encoding_name_of_the_results(tmp_path, capsys):
    """--encodings takes the names of the results' encoding column, BitTokens without binary pools
    among them: one Study 3 cell's variant runs, not the recipe's BitTokens."""
    from workbench import study

    out = tmp_path / "study"
    args = ["study", "--studies", "budget", "budget_more", "--budgets", "1M", "--tasks", "division"]
    experiments.main([*args, "--digits", "4", "--encodings", study.VARIANT, "--dry-run", "--out", str(out)])
    assert "3 runs in" in capsys.readouterr().out  # three seeds, the decimal pool's only
    experiments.main([*args, "--digits", "4", "--encodings", "bittokens", "--dry-run", "--out", str(out)])
    assert "3 runs in" in capsys.readouterr().out  # budget_more's binary-pool runs
    with pytest.raises(SystemExit):
        experiments.main([*args, "--encodings", "bittokens_binary", "--dry-run", "--out", str(out)])
    assert "unknown value 'bittokens_binary'" in capsys.readouterr().err
    assert not out.exists()


def test_dry_run_on_the_command_line_makes_nothing(tmp_path, capsys):
    from workbench import study
    from workbench.training import ablations

    out = tmp_path / "study"
    experiments.main(["study", "--dry-run", "--out", str(out)])
    text = capsys.readouterr().out
    assert f"{len(study.plan(study.PREREGISTERED))} runs in {out}" in text and "estimated time:" in text
    assert "cpu-tiny: 7,300 tokens/s (workbench.runs.dryrun.THROUGHPUT)" in text
    experiments.main(["ablations", "--smoke", "--tables", "8", "9", "--dry-run", "--out", str(tmp_path / "abl")])
    planned = ablations.plan([8, 9], experiments.PROTOCOLS["cpu-tier"], [0])
    assert f"ablations (tables 8 9): {planned.run.nunique()} runs" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())
