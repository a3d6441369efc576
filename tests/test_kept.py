"""Published runs kept beside their scores (workbench/study/kept.py): settings, curves and answers,
compressed, read back equal, never replaced; study.publish keeps the runs of the cells it publishes."""

import gzip
import json

import pandas as pd
import pytest

from workbench import study
from workbench.study import kept
from workbench.study.parts import STUDY4, plan


def _run_folder(path, steps=1000, evals=30, answers=7, seed=0):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"seed": seed, "numerics": "portable"}))
    (path / "environment.json").write_text(json.dumps({"numerics": "portable", "cpu_capability": "AVX2"}))
    (path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s + 1, "loss": 1 / (s + 1)}) + "\n" for s in range(steps))
    )
    (path / "evals.jsonl").write_text(
        "".join(
            json.dumps({"step": 100 * (e + 1), "val/multiplication": e / evals, "level": e}) + "\n"
            for e in range(evals)
        )
    )
    rows = [
        dict(task="multiplication", prompt=f"{q} * 3", answer=str(3 * q), prediction="007", score=q / answers)
        for q in range(answers)
    ]
    pd.DataFrame(rows).to_csv(path / "test_samples.csv", index=False)
    (path / "test_summary.csv").write_text("task,score\nmultiplication,0.5\n")
    return path


def test_thinning_keeps_the_first_and_last_and_at_most_the_limit():
    lines = [str(i) for i in range(2930)]
    kept_lines = kept.thinned(lines)
    assert len(kept_lines) == kept.METRIC_ROWS and kept_lines[0] == "0" and kept_lines[-1] == "2929"
    assert [int(x) for x in kept_lines] == sorted({int(x) for x in kept_lines})
    assert kept.thinned(lines[:12]) == lines[:12]


def test_a_kept_run_reads_back_equal_and_is_the_same_bytes_every_time(tmp_path):
    run = _run_folder(tmp_path / "runs" / "r")
    into = tmp_path / "results" / "runs"
    assert kept.keep({"r": run}, {"r": "study4_3M"}, into) == 1
    folder = into / "study4_3M" / "r"
    back = kept.read_kept(folder)
    assert back["evals"].to_dict("records") == [json.loads(x) for x in (run / "evals.jsonl").read_text().splitlines()]
    assert len(back["steps"]) == kept.METRIC_ROWS and back["steps"].step.iloc[[0, -1]].tolist() == [1, 1000]
    pd.testing.assert_frame_equal(
        pd.read_csv(folder / "test_samples.csv.gz", dtype=str), pd.read_csv(run / "test_samples.csv", dtype=str)
    )
    assert back["config"]["numerics"] == "portable"
    with gzip.open(folder / "metrics.jsonl.gz") as f:  # a valid gzip with its clock zeroed
        f.read()
    assert (folder / "metrics.jsonl.gz").read_bytes()[4:8] == b"\0\0\0\0"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert kept.keep({"r": run}, {"r": "study4_3M"}, into) == 0  # again: nothing new, the same bytes
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    (run / "evals.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(ValueError, match="already keeps run r with other files: a kept run is never replaced"):
        kept.keep({"r": run}, {"r": "study4_3M"}, into)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    with pytest.raises(ValueError, match="is not a finished run: it has no evals.jsonl"):
        (run / "evals.jsonl").unlink()
        kept.keep({"r": run}, {"r": "x"}, into)


def test_publish_keeps_the_runs_of_the_cells_it_publishes(tmp_path):
    cell = [r for r in plan([STUDY4]) if r.study == "study4_3M" and r.task == "multiplication" and r.digits == 4]
    assert len(cell) == 10
    folder = tmp_path / "runs" / "study4"
    rows, intervals = [], []
    for r in cell:
        _run_folder(folder / r.name, seed=r.seed)
        rows.append(
            dict(
                study=r.study,
                encoding=r.encoding,
                task=r.task,
                digits=r.digits,
                seed=r.seed,
                metric="log_smape",
                score=0.5,
            )
        )
    for encoding in {r.encoding for r in cell}:
        intervals.append(
            dict(
                study="study4_3M",
                encoding=encoding,
                task="multiplication",
                digits=4,
                metric="log_smape",
                mean=0.5,
                low=0.4,
                high=0.6,
                seeds=5,
                questions=7,
            )
        )
    pd.DataFrame(rows).to_csv(folder / study.RESULTS_FILE, index=False)
    pd.DataFrame(intervals).to_csv(folder / study.INTERVALS_FILE, index=False)
    published = tmp_path / "results"
    published.mkdir()
    added = study.publish(folder, ["study4_3M"], seeds=5, into=published)
    assert added == {study.RESULTS_FILE: 10, study.INTERVALS_FILE: 2, "runs": 10}
    assert sorted(p.name for p in kept.kept_runs(published / "runs", "study4_3M")) == sorted(r.name for r in cell)


def test_learning_curves_come_from_the_kept_runs(tmp_path):
    from workbench.study import curves

    cell = [r for r in plan([STUDY4]) if r.study == "study4_3M" and r.task == "multiplication" and r.digits == 4]
    into = tmp_path / "results" / "runs"
    for r in cell[:2] + cell[5:7]:  # two seeds of each encoding
        run = _run_folder(tmp_path / "runs" / r.name, seed=r.seed)
        (run / "config.json").write_text(
            json.dumps({"seed": r.seed, "batch_size": 8, "preset": "cpu-tiny", "context": None})
        )
        (run / "evals.jsonl").write_text(
            "".join(
                json.dumps({"step": 100 * e, "harmonic_mean": e / 10 + r.seed, "frontier/multiplication": e}) + "\n"
                for e in (1, 2, 3)
            )
        )
        kept.keep({r.name: run}, {r.name: r.study}, into)
    table = curves.validation_curves(kept.kept_runs(into, "study4_3M"))
    assert len(table) == 12 and set(table.encoding) == {r.encoding for r in cell}
    assert sorted(set(table.tokens)) == [100 * 8 * 128, 200 * 8 * 128, 300 * 8 * 128]  # cpu-tiny rows of 128
    assert table[table.seed == 1].validation.min() == pytest.approx(1.1) and table.frontier.max() == 3
    titles = [curves.level_title(level) for level in ("study4_3M", "study4_plateau_3M")]
    assert titles == ["Study 4, 3M tokens", "Study 4's intervention (no curriculum), 3M tokens"]
    fig = curves.curves_figure(table, titles[0])
    assert len(fig.data) == 2 * (2 + 1)  # per encoding: each seed and the mean
    assert fig.layout.title.text == "Study 4, 3M tokens" and fig.layout.yaxis.title.text.startswith(
        "validation log-sMAPE"
    )


def _nonzero_digits(text: str) -> int:
    return sum(c in "123456789" for c in text)


def test_the_plateau_reads_levels_losses_and_rates_from_the_kept_runs(tmp_path):
    """study.plateau: each test answer gets the difficulty of the question it answered (oracle: A.3's
    multiplication level counted by hand, the non-zero digits of both operands), and each evaluation
    the losses and rates of the last kept step at or before it."""
    from workbench.config import recorded
    from workbench.study import plateau
    from workbench.training.train import TrainConfig

    cell = [r for r in plan([STUDY4]) if r.study == "study4_3M" and r.task == "multiplication" and r.digits == 4]
    into = tmp_path / "results" / "runs"
    for r in (cell[0], cell[5]):  # seed 0 of each encoding
        cfg = recorded(TrainConfig.of(encoding="single_digit", tasks=("multiplication",), seed=r.seed, test_samples=40))
        run = _run_folder(tmp_path / "runs" / r.name, seed=r.seed)
        (run / "config.json").write_text(json.dumps(cfg))
        questions = plateau.test_questions(cfg, "multiplication")
        scores = [0.25 * (k % 5) for k in range(len(questions))]
        frame = pd.DataFrame(dict(task="multiplication", prompt=questions.prompt, answer=questions.answer,
                                  prediction="0", score=scores, exact=[s == 1.0 for s in scores]))  # fmt: skip
        frame.to_csv(run / "test_samples.csv", index=False)
        (run / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "ce": 10 - s / 100, "number": s / 1000, "lr/hidden": s}) + "\n" for s in (1, 150, 250))
        )  # fmt: skip
        (run / "evals.jsonl").write_text(
            "".join(json.dumps({"step": s, "harmonic_mean": s / 1000, "frontier/multiplication": s // 100}) + "\n" for s in (100, 200, 300))
        )  # fmt: skip
        kept.keep({r.name: run}, {r.name: r.study}, into)
    runs = kept.kept_runs(into, "study4_3M")
    levels = plateau.by_difficulty(runs)
    level = [_nonzero_digits(a) + _nonzero_digits(b) for a, b in (p.split(" * ") for p in questions.prompt)]
    expected = pd.DataFrame(dict(level=level, score=scores)).groupby("level").score.agg(["size", "mean"])
    one = levels[levels.encoding == cell[0].encoding].set_index("level")
    assert one.n.to_dict() == expected["size"].to_dict()
    assert one.score.to_numpy() == pytest.approx(expected["mean"].to_numpy())
    table = plateau.traces(runs)
    first = table[table.encoding == cell[0].encoding].sort_values("step")
    assert first.ce.tolist() == pytest.approx([10 - 0.01, 10 - 1.5, 10 - 2.5])  # steps 1, 150, 250 before 100, 200, 300
    assert first.lr_hidden.tolist() == [1, 150, 250] and first.frontier.tolist() == [1, 2, 3]
    fig = plateau.figure(runs, "multiplication", 4)
    assert "multiplication, d = 4" in fig.layout.title.text
    # a run whose answers are not its settings' questions is refused, not misread
    bad = next(p for p in runs if p.name == cell[0].name)
    with gzip.open(bad / "test_samples.csv.gz", "wt") as f:
        frame.assign(prompt=frame.prompt[::-1].to_numpy()).to_csv(f, index=False)
    with pytest.raises(ValueError, match="not the questions its settings draw"):
        plateau.by_difficulty([bad])
