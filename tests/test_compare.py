"""`python -m workbench.compare`: the settings that differ and what each run reached, read from run
folders made here by hand (the oracle: the numbers written into them)."""

import json

import pandas as pd
import pytest

from workbench import compare
from workbench.config import TrainConfig, recorded
from workbench.optim import OptimConfig


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
