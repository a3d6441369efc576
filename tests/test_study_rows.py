"""Study rows are checked where they enter (workbench/study/rows.py): what is not a result is one
line naming the file, the row and the column, for study.read_study, study.publish and the
leaderboard alike, and nothing is written.

Bugs (issue 66): a mean outside its own interval ranked #1; a NaN digits got rank 0; seeds of -5
drew "−5–2 seeds" in the figure; seeds inf or text gave tracebacks; publish appended NaN, inf and
7.5 scores, a 1-seed cell claiming 3 seeds, repeated rows and a metric with an embedded newline."""

import hashlib
import re

import pandas as pd
import pytest

from workbench import leaderboard, study

CELLS = [("zoo_precision", "abacus", "division", 2), ("zoo_precision", "ntl", "division", 2)]


def folder_of(path, seeds=(0, 1)):
    """A small valid study folder of two precision-protocol cells, as run_study writes it."""
    path.mkdir(parents=True, exist_ok=True)
    rows, intervals = [], []
    for k, (studied, encoding, task, digits) in enumerate(CELLS):
        cell = dict(study=studied, encoding=encoding, task=task, digits=digits)
        for seed in seeds:
            for metric, score in (("log_smape", 0.3 + 0.1 * k + 0.01 * seed), ("exact_match", 0.1 * seed)):
                rows.append(dict(cell, seed=seed, input_tokens=6.0, output_tokens=2.0, metric=metric, score=score))
        for metric, (mean, low, high) in (("log_smape", (0.4, 0.3, 0.5)), ("exact_match", (0.05, 0.0, 0.1))):
            intervals.append(dict(cell, metric=metric, mean=mean, low=low, high=high, seeds=len(seeds), questions=500))
    pd.DataFrame(rows).to_csv(path / study.RESULTS_FILE, index=False)
    pd.DataFrame(intervals).to_csv(path / study.INTERVALS_FILE, index=False)
    return path


def _set(name, row, column, value):
    def edit(folder):
        path = folder / name
        frame = pd.read_csv(path)
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
        frame.to_csv(path, index=False)

    return edit


def _repeat(folder):
    path = folder / study.RESULTS_FILE
    frame = pd.read_csv(path)
    pd.concat([frame, frame.iloc[[2]]], ignore_index=True).to_csv(path, index=False)


T, IV = study.RESULTS_FILE, study.INTERVALS_FILE
# (the edit, the file named, the message after "row N, column 'X': ")
BAD = {
    "a mean outside its interval": (
        _set(IV, 0, "mean", 0.9),
        IV,
        r"row 1, column 'mean': 0.9 \[0.3, 0.5\] lies outside",
    ),
    "NaN digits": (_set(IV, 1, "digits", float("nan")), IV, "row 2, column 'digits': nan is not a positive integer"),
    "negative seeds": (_set(IV, 0, "seeds", -5), IV, "row 1, column 'seeds': -5 is not a positive integer"),
    "seeds inf": (_set(IV, 0, "seeds", float("inf")), IV, "row 1, column 'seeds': inf is not a positive integer"),
    "seeds as text": (_set(IV, 0, "seeds", "three"), IV, "row 1, column 'seeds': 'three' is not a positive integer"),
    "a NaN score": (_set(T, 3, "score", float("nan")), T, "row 4, column 'score': nan is not a finite number"),
    "an inf score": (_set(T, 3, "score", float("inf")), T, "row 4, column 'score': inf is not a finite number"),
    "a score of 7.5": (_set(T, 3, "score", 7.5), T, r"row 4, column 'score': 7.5 lies outside \[0, 1\]"),
    "a perplexity below 1": (
        lambda f: (_set(T, 0, "metric", "perplexity")(f), _set(T, 0, "score", 0.5)(f)),
        T,
        "row 1, column 'score': 0.5 is below 1",
    ),
    "a repeated row": (_repeat, T, "row 9: repeats row 3's study, encoding, task, digits, metric, seed"),
    "a metric with a newline": (
        _set(T, 0, "metric", "log_smape\nexact_match"),
        T,
        r"row 1, column 'metric': 'log_smape\\nexact_match' holds a control character",
    ),
    "an escape sequence": (
        _set(T, 0, "encoding", "\x1b]0;owned\x07abacus"),
        T,
        r"row 1, column 'encoding': '\\x1b\]0;owned\\x07abacus' holds a control character",
    ),
    "an empty study": (_set(T, 0, "study", float("nan")), T, "row 1, column 'study': nan is empty or not a name"),
    "a negative seed": (_set(T, 0, "seed", -1), T, "row 1, column 'seed': -1 is not an integer >= 0"),
    "a 1-seed cell claiming 3 seeds": (
        _set(IV, 0, "seeds", 3),
        IV,
        "row 1, column 'seeds': 3 seeds claimed for zoo_precision abacus division d=2 log_smape, but .* holds 2",
    ),
}


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("bad", BAD)
def test_what_is_not_a_result_is_refused_where_it_enters(tmp_path, capsys, bad):
    edit, name, message = BAD[bad]
    folder = folder_of(tmp_path / "runs" / "study")
    edit(folder)
    with pytest.raises(ValueError) as err:
        study.read_study(folder)
    assert re.search(re.escape(f"{folder / name}, ") + message, str(err.value)), str(err.value)
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)

    published = folder_of(tmp_path / "results")
    before = digest(published)
    with pytest.raises(ValueError, match=re.escape(str(folder / name))):
        study.publish(folder, ["zoo_precision"], seeds=2, into=published, keep_runs=False)
    assert digest(published) == before  # nothing written

    with pytest.raises(SystemExit) as stop:
        leaderboard.main(["--study", str(folder), "--alone"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(folder / name) in err and "\x1b" not in err


def test_a_valid_folder_reads_typed():
    table, intervals = study.read_study(study.PUBLISHED)
    assert table.digits.dtype.kind == intervals.seeds.dtype.kind == "i" and len(table) and len(intervals)


def test_merging_own_folders_skips_an_empty_one_and_keeps_every_folder_after_it(tmp_path):
    """A study folder with no finished run yet (empty tables) between two others adds nothing and
    hides nothing: the cells of the folder after it are merged as without it."""
    whole = folder_of(tmp_path / "whole")
    parts = []
    for k, cell in enumerate(CELLS):  # one folder per cell, split from the whole one
        part = tmp_path / f"part{k}"
        part.mkdir()
        for name in (study.RESULTS_FILE, study.INTERVALS_FILE):
            frame = pd.read_csv(whole / name)
            frame[
                [tuple(r) == cell for r in frame[["study", "encoding", "task", "digits"]].itertuples(index=False)]
            ].to_csv(part / name, index=False)
        parts.append(part)
    empty = tmp_path / "empty"
    empty.mkdir()
    for name in (study.RESULTS_FILE, study.INTERVALS_FILE):
        (empty / name).write_text("")  # what run_study writes before its first run finishes
    table, intervals = study.read_studies([parts[0], empty, parts[1]])
    expected_table, expected_intervals = study.read_study(whole)  # the oracle: both cells, as one folder
    for got, expected in ((table, expected_table), (intervals, expected_intervals)):
        order = list(expected.columns)
        assert sorted(map(tuple, got[order].astype(str).values)) == sorted(map(tuple, expected.astype(str).values))


def test_appending_scored_answers_keeps_the_earlier_rows_as_written(tmp_path, monkeypatch):
    """The scored-answers file is rewritten whole after every run: the earlier rows' question,
    answer and prediction come back as the text written ("007" is not 7.0, "36" not 36.0, an
    empty prediction stays empty), so the old lines are the new file's first lines, byte for byte."""
    from workbench.frontier import official
    from workbench.study import questions

    out = tmp_path / "study"
    out.mkdir()
    earlier = (
        "run,prompt,answer,prediction,score\n"
        "a-seed0,0.5 * 14,7,007,1.0\n"
        "a-seed0,6 * 6,36,36.0,1.0\n"
        "a-seed0,1.50 * 2,3,,0.0\n"
        "a-seed0,-0 * 1,0,-0,1.0\n"
    )
    (out / questions.OFFICIAL_FILE).write_text(earlier)
    run = type("Run", (), {"name": "b-seed0", "task": "multiplication"})()
    monkeypatch.setattr(questions, "_unscored", lambda out, which, table, **s: [run])
    monkeypatch.setattr(
        official, "load_test_set", lambda task, data: pd.DataFrame({"prompt": ["2 * 2"], "answer": ["4"]})
    )
    new = pd.DataFrame({"run": ["b-seed0"], "prompt": ["2 * 2"], "answer": ["4"], "prediction": ["04"], "score": [1.0]})
    monkeypatch.setattr(questions, "_answer", lambda out, r, q: new)
    questions.official_scores(out)
    written = (out / questions.OFFICIAL_FILE).read_text()
    assert written.startswith(earlier) and written[len(earlier) :] == "b-seed0,2 * 2,4,04,1.0\n"
