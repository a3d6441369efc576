"""`python -m workbench.runs.compare`: the settings that differ and what each run reached, read from run
folders made here by hand (the oracle: the numbers written into them)."""

import json
import os
import signal

import pandas as pd
import pytest

from workbench.config import TrainConfig, recorded
from workbench.runs import compare
from workbench.training.optim import OptimConfig


def make_run(folder, cfg, losses, evals, test=None):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(recorded(cfg.updated(out=str(folder)))))
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i + 1, "loss": v}) + "\n" for i, v in enumerate(losses))
    )
    (folder / "evals.jsonl").write_text("".join(json.dumps({"step": s, "harmonic_mean": m}) + "\n" for s, m in evals))
    if test:
        pd.DataFrame([{"task": t, "score": s, "train_seconds": 90.0} for t, s in test.items()]).to_csv(
            folder / "test_summary.csv", index=False
        )
    return folder


def test_compare_shows_what_differs_and_what_each_reached(tmp_path, capsys):
    base = TrainConfig.of(tasks=("addition", "division"))
    a = make_run(tmp_path / "a", base, [3.0, 2.0, 1.5], [(2, 0.4), (3, 0.3)], {"addition": 0.9, "division": 0.5})
    b = make_run(
        tmp_path / "b", base.updated(encoding="fone", optim=OptimConfig(optimizer="adamw")), [3.0, 2.5], [(2, 0.6)]
    )
    table = compare.compare([a, b])
    assert list(table.columns[:3]) == ["run", "encoding", "optim.optimizer"]  # only the settings that differ
    assert "seed" not in table and "out" not in table
    first, second = table.iloc[0], table.iloc[1]
    assert (first.encoding, second.encoding, second["optim.optimizer"]) == ("bittokens", "fone", "adamw")
    assert (first.status, first.steps, first.last_loss, first.best_val, first.best_step) == ("finished", 3, 1.5, 0.4, 2)
    assert (first["test/addition"], first["test/division"], first.minutes) == (0.9, 0.5, 1.5)
    assert (second.status, second.last_loss, second.best_val) == ("stopped at step 2", 2.5, 0.6)
    assert pd.isna(second["test/addition"])
    assert "seed" in compare.compare([a, b], everything=True)

    compare.main([str(a), str(b), "--csv", str(tmp_path / "t.csv")])
    assert "adamw" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "t.csv"), table, check_dtype=False)


def test_a_folder_that_is_not_a_run_is_a_clear_error(tmp_path, capsys):
    make_run(tmp_path / "study" / "r1", TrainConfig(), [1.0], [])
    with pytest.raises(ValueError, match=r"is not a run folder .*holds 1 run folders \(r1\): pass them"):
        compare.compare([tmp_path / "study"])
    with pytest.raises(ValueError, match="no such folder"):
        compare.compare([tmp_path / "nope"])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(SystemExit):
        compare.main([str(tmp_path / "bad")])
    err = capsys.readouterr().err
    assert "not readable as a run's configuration" in err and "Traceback" not in err


def _config(folder):
    return folder / "config.json"


def _deep(folder):
    _config(folder).write_text("[" * 100_000 + "]" * 100_000)


def _fifo(name):
    def make(folder):
        (folder / name).unlink(missing_ok=True)
        os.mkfifo(folder / name)

    return make


def _append(name, text):
    def add(folder):
        with open(folder / name, "a") as f:
            f.write(text)

    return add


def _summary(**columns):
    def write(folder):
        pd.DataFrame(columns).to_csv(folder / "test_summary.csv", index=False)

    return write


# (what is done to a finished run folder, the file named, what the line says after it)
BAD = {
    "a 100k-deep JSON": (_deep, "config.json", ": JSON nested deeper than Python reads"),
    "config.json a FIFO": (_fifo("config.json"), "config.json", " is a FIFO (named pipe), not a file a run wrote"),
    "metrics.jsonl a FIFO": (_fifo("metrics.jsonl"), "metrics.jsonl", " is a FIFO (named pipe)"),
    "a step of 1e400": (
        _append("metrics.jsonl", '{"step": 1e400, "loss": 1.0}\n'),
        "metrics.jsonl",
        ", row 4, 'step': inf is not",
    ),
    "a step as text": (
        _append("metrics.jsonl", '{"step": "4", "loss": 1.0}\n'),
        "metrics.jsonl",
        ", row 4, 'step': '4' is not",
    ),
    "a loss as text": (
        _append("metrics.jsonl", '{"step": 4, "loss": "low"}\n'),
        "metrics.jsonl",
        ", row 4, 'loss': 'low' is not a number",
    ),
    "a row that is a list": (
        _append("metrics.jsonl", "[4, 1.0]\n"),
        "metrics.jsonl",
        ", line 4: a JSON list, not a row",
    ),
    "a bad line before the last": (
        _append("metrics.jsonl", '{"step": 4\n{"step": 5, "loss": 1.0}\n'),
        "metrics.jsonl",
        ", line 4 is not JSON",
    ),
    "an evaluation without its step": (
        _append("evals.jsonl", '{"harmonic_mean": 0.5}\n'),
        "evals.jsonl",
        ", row 3, 'step': None is not",
    ),
    "a summary without a score": (_summary(task=["addition"]), "test_summary.csv", " lacks column(s) ['score']"),
    "a score as text": (
        _summary(task=["addition"], score=["high"]),
        "test_summary.csv",
        ", row 1, column 'score': 'high' is not a finite number",
    ),
    "a summary that is a folder": (
        lambda f: ((f / "test_summary.csv").unlink(), (f / "test_summary.csv").mkdir()),
        "test_summary.csv",
        " is a folder",
    ),
    "a summary not UTF-8": (
        lambda f: (f / "test_summary.csv").write_bytes(b"task,score\n\xff\xfe,1\n"),
        "test_summary.csv",
        " is not UTF-8 text",
    ),
}


@pytest.mark.parametrize("bad", BAD)
def test_what_a_run_folder_should_not_hold_is_one_line_naming_the_file(tmp_path, capsys, bad):
    """Bug: compare gave tracebacks (a 100k-deep JSON, a step of 1e400, missing columns), hung on a
    FIFO, and a torn line gave an error naming no file. Each is now one line naming the file (and
    the row and column where there is one), at once."""
    run = make_run(tmp_path / "run", TrainConfig(), [3.0, 2.0, 1.5], [(2, 0.4), (3, 0.3)], {"addition": 0.9})
    damage, name, message = BAD[bad]
    damage(run)
    signal.alarm(60)  # a read that blocks (a FIFO opened for reading) fails the test instead of hanging it
    try:
        with pytest.raises(SystemExit) as stop:
            compare.main([str(run)])
    finally:
        signal.alarm(0)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{run / name}{message}" in err, err


def test_a_line_torn_by_a_kill_is_left_out(tmp_path):
    run = make_run(tmp_path / "run", TrainConfig(), [3.0, 2.0, 1.5], [(2, 0.4)])
    _append("metrics.jsonl", '{"step": 4, "lo')(run)  # the last row, cut short: no newline after it
    row = compare.compare([run]).iloc[0]
    assert (row.status, row.steps, row.last_loss) == ("stopped at step 3", 3, 1.5)


def test_names_and_settings_read_from_files_are_printed_escaped(tmp_path, capsys):
    """Bug: compare printed names and cells read from the files raw: an escape sequence in a
    setting or a folder's name retitled or cleared the terminal. It shows as \\x1b now; the CSV
    keeps the value as the file holds it."""
    base = TrainConfig(tasks=("addition",))
    a = make_run(tmp_path / "a\x1b[2J", base, [1.0], [])
    b = make_run(tmp_path / "b", base, [1.0], [])
    record = json.loads((b / "config.json").read_text()) | {"encoding": "\x1b]0;owned\x07fone", "\x9bkey": 1}
    (b / "config.json").write_text(json.dumps(record))
    compare.main([str(a), str(b), "--csv", str(tmp_path / "t.csv")])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "a\\x1b[2J" in out and "\\x1b]0;owned\\x07fone" in out and "\\x9bkey" in out
    assert pd.read_csv(tmp_path / "t.csv").encoding.tolist()[1] == "\x1b]0;owned\x07fone"
