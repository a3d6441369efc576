"""The retrofit's registrations (workbench.retrofit.experiment): the cells each one runs, its table,
and for `learns` Study 4's paired comparison with the digit baseline, checked on run folders made
here against the t interval computed by hand."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.retrofit import experiment as E
from workbench.study import kept

PROMPTS = [f"{a} + {a + 1} = " for a in range(6)]


def fake_run(folder: Path, encoding: str, seed: int, scores, prompts=PROMPTS, commit="abc1234") -> Path:
    """A complete run folder of the `learns` layout: answers, perplexity, summary, curves, provenance
    (a zero-shot reference: answers, summary and provenance only)."""
    folder.mkdir(parents=True)
    trained = E.ZERO_SHOT not in folder.name
    common = dict(encoding=encoding, lora=True, seed=seed, best_step=10)
    pd.DataFrame(
        [
            dict(task="addition", prompt=p, answer="1", prediction="1", score=s, exact=s == 1.0, **common)
            for p, s in zip(prompts, scores)
        ]
    ).to_csv(folder / "test_samples.csv", index=False)
    pd.DataFrame([dict(task="addition", train_seconds=100.0, **common)]).to_csv(
        folder / "test_summary.csv", index=False
    )
    (folder / "retrofit.json").write_text(json.dumps({"encoding": encoding, "seed": seed}))
    (folder / "environment.json").write_text(json.dumps({"workbench_commit": commit}))
    if trained:
        (folder / "model").mkdir()
        pd.DataFrame(
            [dict(when="before", ppl_text=10.0, **common), dict(when="after", ppl_text=11.0, **common)]
        ).to_csv(folder / "perplexity.csv", index=False)
        (folder / "evals.jsonl").write_text('{"step": 10, "score/addition": 0.5}\n')
        (folder / "metrics.jsonl").write_text("".join(f'{{"step": {i}, "loss": 1.0}}\n' for i in range(1, 501)))
    return folder


def test_cells_of_each_registration():
    assert len(E.cells(E.FIRST)) == 16 and len(E.cells(E.LEARNS)) == 25
    assert E.cells(E.LEARNS)[:5] == [("none", "zero-shot", s) for s in range(5)]  # the references first
    assert E.cells(E.LEARNS, ["xval:lora"]) == [("xval", "lora", s) for s in range(5)]
    assert not E.config("none", "zero-shot", 0, reg=E.LEARNS).lora
    with pytest.raises(ValueError, match="none:full"):
        E.cells(E.LEARNS, ["none:full"])  # the learns registration has LoRA only
    cfg = E.config("bittokens", "lora", 3, reg=E.LEARNS)
    assert (cfg.frame, cfg.num_init, cfg.digit_mass) == ("equals", "digits", "merge")  # issue 68's joining
    assert cfg.run.out.endswith("retrofit-learns/bittokens-lora-seed3") and cfg.lora and cfg.seed == 3
    first = E.config("bittokens", "full", 1)
    assert (first.frame, first.num_init, first.digit_mass, first.loss_logits) == ("markers", "mean", "drop", "full")


def test_the_paired_gap_is_the_t_interval_over_the_seed_gaps(tmp_path):
    rng = np.random.default_rng(0)
    base = {s: rng.uniform(0, 1, len(PROMPTS)) for s in E.LEARNS.seeds}
    lift = {0: 0.10, 1: 0.20, 2: 0.05, 3: 0.15, 4: 0.12}
    for s in E.LEARNS.seeds:
        fake_run(tmp_path / f"none-zero-shot-seed{s}", "none", s, base[s] * 0 + (0.1 if s else 0.4))
        fake_run(tmp_path / f"none-lora-seed{s}", "none", s, base[s])
        fake_run(tmp_path / f"bittokens-lora-seed{s}", "bittokens", s, base[s] + lift[s])
    both = E.table(tmp_path, E.LEARNS, draws=200)
    found = both[both["mode"] == "lora"].set_index("encoding")
    gaps = np.array([lift[s] for s in E.LEARNS.seeds])
    half = 2.7764451051977987 * gaps.std(ddof=1) / math.sqrt(5)  # t quantile, 4 degrees of freedom
    row = found.loc["bittokens"]
    assert row["versus"] == "none (lora)" and row["gap"] == pytest.approx(gaps.mean(), abs=1e-12)
    assert (row["gap_low"], row["gap_high"]) == pytest.approx((gaps.mean() - half, gaps.mean() + half), abs=1e-9)
    assert row["verdict"] == "bittokens ahead"  # the interval excludes 0 and the gap is over 1/15
    assert row["commits"] == "abc1234" and row["seeds"] == 5 and row["ppl_ratio"] == pytest.approx(1.1)
    # the trained baseline against its untrained answers to the same questions
    learned = np.array([base[s].mean() - (0.1 if s else 0.4) for s in E.LEARNS.seeds])
    assert found.loc["none", "versus"] == "none (zero-shot)"
    assert found.loc["none", "gap"] == pytest.approx(learned.mean(), abs=1e-12)
    assert found.loc["none", "seed_gaps"] == " ".join(f"{g:+.3f}" for g in learned)
    reference = both[both["mode"] == "zero-shot"].iloc[0]
    assert reference["tokens"] == 0 and pd.isna(reference["ppl_before"]) and pd.isna(reference["gap"])


def test_runs_that_answered_other_questions_are_refused(tmp_path):
    for s in E.LEARNS.seeds:
        fake_run(tmp_path / f"none-lora-seed{s}", "none", s, [0.5] * 6)
        other = PROMPTS if s != 2 else PROMPTS[::-1]
        fake_run(tmp_path / f"fone-lora-seed{s}", "fone", s, [0.5] * 6, prompts=other)
    with pytest.raises(ValueError, match=r"fone-lora-seed2 and none \(lora\)'s seed 2 answered other addition"):
        E.table(tmp_path, E.LEARNS, draws=50)


def test_publishing_keeps_every_run_small_and_never_replaces_one(tmp_path):
    runs = tmp_path / "runs"
    for e, m, s in E.cells(E.LEARNS):
        fake_run(runs / f"{e}-{m}-seed{s}", e, s, [0.25] * 6)
    reg = E.Registration(**{**E.LEARNS.__dict__, "kept": tmp_path / "kept"})
    assert E.keep(reg, runs) == 25 and E.keep(reg, runs) == 0  # the same bytes: left as they are
    reference = tmp_path / "kept" / "retrofit-learns" / "none-zero-shot-seed0"
    assert sorted(p.name for p in reference.iterdir()) == sorted([*kept.ZERO_SHOT_PLAIN, "test_samples.csv.gz"])
    folder = tmp_path / "kept" / "retrofit-learns" / "xval-lora-seed4"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [*kept.RETROFIT_PLAIN, "evals.jsonl.gz", "metrics.jsonl.gz", "test_samples.csv.gz"]
    )
    with gzip.open(folder / "metrics.jsonl.gz", "rt") as f:
        steps = [json.loads(line)["step"] for line in f]
    assert len(steps) == kept.METRIC_ROWS and steps[0] == 1 and steps[-1] == 500  # thinned, first and last kept
    (runs / "xval-lora-seed4" / "perplexity.csv").write_text("when,ppl_text\nbefore,1\n")
    with pytest.raises(ValueError, match="never replaced"):
        E.keep(reg, runs)


def test_the_published_table_is_drawn_with_every_reading_and_the_untrained_reference(tmp_path):
    for s in E.LEARNS.seeds:
        fake_run(tmp_path / f"none-zero-shot-seed{s}", "none", s, [0.1] * 6)
        fake_run(tmp_path / f"none-lora-seed{s}", "none", s, [0.5] * 6)
        fake_run(tmp_path / f"bittokens-lora-seed{s}", "bittokens", s, [0.2] * 6)
    published = E.table(tmp_path, E.LEARNS, draws=50)
    fig = E.figure(published)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == ["own digit tokens", "BitTokens"]  # the registry's order, baseline first
    assert [list(t.y) for t in bars] == [pytest.approx([0.5]), pytest.approx([0.2])]
    ppl = [t for t in fig.data if t.type == "scatter"]
    assert [list(t.y) for t in ppl] == [pytest.approx([10.0, 11.0])] * 2  # before, after
    subtitle = fig.layout.title.subtitle.text
    assert "LoRA, 5 seeds, 6 test questions" in subtitle and "untrained: addition 0.1" in subtitle
    with pytest.raises(ValueError, match="no rows of mode 'full'"):
        E.figure(published, mode="full")
