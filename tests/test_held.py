"""Finished runs held before publication and restored on a new machine (workbench/study/held.py):
a held run comes back as the folder it was, less what was never kept; a published study run's
summary is rebuilt from its answers and must equal the published scores to the last bit; the
frozen plans' own "finished" tests accept a restored folder."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from workbench.measures.evaluate import summarize
from workbench.study import held, kept
from workbench.study.parts import STUDY4, plan
from workbench.study.run import finished, stale

ROOT = Path(__file__).resolve().parent.parent


def _finished_run(path, seed=0, steps=50):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"seed": seed}))
    (path / "environment.json").write_text(json.dumps({"numerics": "portable"}))
    (path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s + 1, "loss": 1 / (s + 1)}) + "\n" for s in range(steps))
    )
    (path / "evals.jsonl").write_text('{"step": 10, "level": 3}\n')
    samples = pd.DataFrame(
        dict(
            task="division",
            prompt=[f"{q} / 7" for q in range(9)],
            answer="1",
            prediction="1",
            score=[q / 9 + 0.1 / 3 for q in range(9)],  # values whose mean is not a round number
            exact=[q % 2 == 0 for q in range(9)],
            input_tokens=12,
            output_tokens=7,
        )
    )
    samples.to_csv(path / "test_samples.csv", index=False)
    summarize(samples).assign(encoding="single_digit", seed=seed, train_seconds=61.5).to_csv(
        path / "test_summary.csv", index=False
    )
    (path / "latest.pt").write_bytes(b"weights are never held")
    return path


def test_a_held_run_is_restored_as_the_folder_it_was(tmp_path):
    runs = tmp_path / "runs" / "study4"
    done = _finished_run(runs / "a-seed0")
    (runs / "b-seed1").mkdir(parents=True)  # in flight: no test_summary.csv yet
    (runs / "b-seed1" / "metrics.jsonl").write_text('{"step": 1}\n')
    into = tmp_path / "results" / "held"
    published = tmp_path / "results" / "runs"
    assert held.hold(runs, into, published) == 1
    assert sorted(p.name for p in (into / "study4").iterdir()) == ["a-seed0"]
    assert held.hold(runs, into, published) == 0  # again: nothing new, nothing rewritten
    kept.keep({"a-seed0": done}, {"a-seed0": "s"}, published)  # once its cell is published ...
    assert held.hold(runs, tmp_path / "again", published) == 0  # ... it is never held again
    assert not list((into / "study4" / "a-seed0").glob("*.pt"))

    machine = tmp_path / "new" / "study4"
    assert held.restore(into / "study4", machine) == ["a-seed0"]
    back = machine / "a-seed0"
    for name in ("config.json", "environment.json", "evals.jsonl", "test_samples.csv", "test_summary.csv"):
        assert (back / name).read_bytes() == (done / name).read_bytes(), name
    assert (back / "metrics.jsonl").read_text() == (done / "metrics.jsonl").read_text()  # 50 rows: under the thinning
    assert "no weights" in (back / held.RESTORED).read_text()
    assert held.hold(machine, tmp_path / "again") == 0  # a restored folder is never held as a new run
    assert held.restore(into / "study4", machine) == []  # a folder already there is left


def test_a_held_run_changed_afterwards_is_refused(tmp_path):
    runs = tmp_path / "runs" / "p"
    done = _finished_run(runs / "a-seed0")
    into = tmp_path / "held"
    held.hold(runs, into)
    (done / "test_summary.csv").write_text("task,score\ndivision,0.9\n")
    with pytest.raises(ValueError, match="never replaced"):
        held.hold(runs, into)


def test_a_restored_retrofit_run_is_complete_for_its_experiment(tmp_path):
    from workbench.retrofit import experiment

    runs = tmp_path / "runs"
    run = _finished_run(runs / "bittokens-lora-seed0")
    (run / "retrofit.json").write_text("{}")
    (run / "perplexity.csv").write_text("when,perplexity\nbefore,17.2\nafter,14.9\n")
    zero = _finished_run(runs / "none-zero-shot-seed0")
    (zero / "retrofit.json").write_text("{}")
    (zero / "evals.jsonl").unlink()
    (zero / "metrics.jsonl").unlink()
    assert held.hold(runs, tmp_path / "held") == 2
    machine = tmp_path / "machine"
    assert held.restore(tmp_path / "held" / "runs", machine) == ["bittokens-lora-seed0", "none-zero-shot-seed0"]
    assert experiment.done(machine / "bittokens-lora-seed0") and experiment.done(machine / "none-zero-shot-seed0")
    assert (machine / "bittokens-lora-seed0" / "perplexity.csv").read_bytes() == (run / "perplexity.csv").read_bytes()
    assert not (machine / "none-zero-shot-seed0" / "evals.jsonl").exists()


def test_a_published_run_without_a_summary_is_refused_unless_one_is_given(tmp_path):
    runs = tmp_path / "runs" / "p"
    _finished_run(runs / "a-seed0")
    kept.keep({"a-seed0": runs / "a-seed0"}, {"a-seed0": "s"}, tmp_path / "kept")
    with pytest.raises(ValueError, match="keeps no test_summary.csv"):
        held.restore(tmp_path / "kept" / "s", tmp_path / "machine")
    assert not (tmp_path / "machine" / "a-seed0").exists()


@pytest.mark.skipif(not (ROOT / "results" / "runs" / "study4_3M").is_dir(), reason="no published Study 4 runs")
def test_published_study4_runs_rebuild_their_published_scores_to_the_last_bit(tmp_path):
    table = pd.read_csv(ROOT / "results" / "cpu-study.csv")
    published = sorted((ROOT / "results" / "runs" / "study4_3M").iterdir())
    names = {r.name for r in plan([STUDY4])}
    assert published and {p.name for p in published} <= names
    some = published[:: max(1, len(published) // 6)]
    for folder in some:
        summary = held.published_summary(folder, table)
        row = table[(table.study == "study4_3M") & (table.seed == summary.seed[0]) & (table.metric == "log_smape")]
        assert summary.score[0] in set(row.score)
    # restored, they are finished runs of the plan as it stands, trained with its settings: a plan skips them
    sample = tmp_path / "kept"
    for folder in some:
        shutil.copytree(folder, sample / folder.name)
    machine = tmp_path / "machine"
    assert held.restore(sample, machine, {f.name: held.published_summary(f, table) for f in some}) == [
        f.name for f in some
    ]
    runs = [r for r in plan([STUDY4]) if r.name in {f.name for f in some}]
    assert len(runs) == len(some) and all(finished(r.config.updated(out=str(machine / r.name))) for r in runs)
    assert stale(runs, machine) == {}
    # a changed answer no longer gives the published score: refused, nothing restored
    tampered = tmp_path / "study4_3M" / published[0].name
    shutil.copytree(published[0], tampered)
    answers = pd.read_csv(tampered / "test_samples.csv.gz")
    answers.loc[0, "score"] = 1.0 - answers.loc[0, "score"] + 1e-3
    answers.to_csv(tampered / "test_samples.csv.gz", index=False)
    with pytest.raises(ValueError, match="do not give its published log_smape scores"):
        held.published_summary(tampered, table)


def test_the_command_line_restores_and_says_what_was_wrong(tmp_path, capsys):
    runs = tmp_path / "runs" / "p"
    _finished_run(runs / "a-seed0")
    held.main(["hold", str(runs), "--into", str(tmp_path / "held")])
    held.main(["restore", str(tmp_path / "held" / "p"), str(tmp_path / "m")])
    assert (tmp_path / "m" / "a-seed0" / "test_summary.csv").is_file()
    with pytest.raises(SystemExit) as stop:
        held.main(["restore", str(tmp_path / "nowhere"), str(tmp_path / "m")])
    assert stop.value.code == 2 and "holds no kept runs" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # held runs go to results/held/ or outside the repository only
        held.main(["hold", str(runs), "--into", str(ROOT / "results" / "runs")])
    assert stop.value.code == 2 and "writes only outside the repository" in capsys.readouterr().err


def test_hold_every_few_seconds_holds_what_finishes_between_passes(tmp_path, capsys, monkeypatch):
    from workbench.study import held as module

    runs = tmp_path / "runs" / "p"
    _finished_run(runs / "a-seed0")
    later = tmp_path / "runs" / "q"  # a plan that has not started yet
    naps = []

    def nap(seconds):  # between the passes a second run finishes
        naps.append(seconds)
        _finished_run(runs / "b-seed1")

    monkeypatch.setattr(module.time, "sleep", nap)
    held.main(["hold", str(runs), str(later), "--into", str(tmp_path / "held"), "--every", "7", "--passes", "2"])
    out = capsys.readouterr().out.splitlines()
    assert naps == [7] and out == [
        f"1 finished run(s) newly held in {tmp_path / 'held' / 'p'}",
        f"1 finished run(s) newly held in {tmp_path / 'held' / 'p'}",
    ]
    assert sorted(p.name for p in (tmp_path / "held" / "p").iterdir()) == ["a-seed0", "b-seed1"]
    with pytest.raises(SystemExit) as stop:
        held.main(["hold", str(runs), "--into", str(tmp_path / "held"), "--every", "-1"])
    assert stop.value.code == 2 and "--every takes seconds >= 0" in capsys.readouterr().err
