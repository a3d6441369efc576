"""The GPU sprint (benchmarks/gpu_sprint.py) dry-run on the CPU: the same command at trial sizes, two
runs at once, stopped by its time limit mid-run, bundled, restored into a fresh folder and resumed to
the end, its rows written; the bundle's limits and its refusals; the part's registration (names,
TF32 off, the rule that fixes the levels); and TF32 as a recorded setting."""

import importlib.util
import io
import json
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import torch

from workbench.config import TrainConfig, recorded
from workbench.runs.checkpoints import load_run
from workbench.runs.folder import config_differences
from workbench.study import parts as P
from workbench.study.parts import Run

ROOT = Path(__file__).resolve().parents[1]
# two runs of one seed (each encoding of the pair), 40 steps of 2 rows, a checkpoint every 2 steps
TRIAL = [
    "--device",
    "cpu",
    "--jobs",
    "2",
    "--budgets",
    "30M",
    "--tasks",
    "multiplication",
    "--digits",
    "15",
    "--seeds",
    "0",
    "--tokens",
    str(2 * 128 * 40),
    "--batch-size",
    "2",
    "--pool-size",
    "100",
    "--val-samples",
    "4",
    "--test-samples",
    "4",
    "--eval-every",
    "10",
    "--checkpoint-every",
    "2",
]
NAMES = [f"trial-gpu_30M-multiplication-d15-{e}-seed0" for e in (P.VARIANT, "single_digit")]


@pytest.fixture(scope="module")
def sprint():
    spec = importlib.util.spec_from_file_location("gpu_sprint", ROOT / "benchmarks" / "gpu_sprint.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_lease_stopped_by_its_time_limit_resumes_from_its_bundle_in_a_fresh_folder(
    sprint, tmp_path, monkeypatch, capsys
):
    first, second, back = tmp_path / "lease1", tmp_path / "lease2", tmp_path / "here"

    def clock():  # the time limit passes as soon as a run has written its first checkpoint
        return 1e12 if any((first / n / "checkpoint.pt").exists() for n in NAMES) else 0.0

    monkeypatch.setattr(sprint, "clock", clock)
    rc = sprint.main([*TRIAL, "--out", str(first), "--time-limit", "600", "--bundle", str(tmp_path / "b1")])
    assert rc == 0
    states = {n: sprint.state(first / n)[0] for n in NAMES}
    assert "finished" not in states.values() and "in flight" in states.values(), states
    flying = [n for n in NAMES if states[n] == "in flight"]
    manifest = json.loads((tmp_path / "b1" / sprint.MANIFEST).read_text())
    assert [p["file"] for p in manifest["parts"]] == ["sprint-resume-01.tar.gz"]
    assert all(p["where"] == "bundle" and p["bytes"] <= sprint.PART_BYTES for p in manifest["parts"])
    speeds = pd.read_csv(first / sprint.SPEED_FILE)
    assert "(all)" in set(speeds.run) and (speeds.tokens_per_s > 0).all()
    assert {json.loads((first / n / sprint.LEASES).read_text())["from_step"] for n in flying} == {0}

    monkeypatch.setattr(sprint, "clock", lambda: 0.0)  # the next lease: no stop
    rc = sprint.main(
        [*TRIAL, "--out", str(second), "--from-bundle", str(tmp_path / "b1"), "--bundle", str(tmp_path / "b2")]
    )
    assert rc == 0
    for n in flying:  # resumed from the first lease's checkpoint, not begun again
        leases = [json.loads(line) for line in (second / n / sprint.LEASES).read_text().splitlines()]
        assert [x["from_step"] > 0 for x in leases] == [False, True] and leases[-1]["finished"], leases
    rows = pd.read_csv(second / sprint.ROWS_FILE)
    assert len(rows) == 4 and set(rows.study) == {"trial-gpu_30M"}  # two runs, log-sMAPE and exact match
    assert set(rows.metric) == {"log_smape", "exact_match"} and rows.score.between(0, 1).all()
    assert rows.device.str.startswith("cpu").all() and rows.command.str.contains("gpu_sprint.py").all()
    assert rows.commit.notna().all()
    parts = json.loads((tmp_path / "b2" / sprint.MANIFEST).read_text())["parts"]
    assert {p["kind"] for p in parts} == {"resume", "done"}
    assert sorted(n for p in parts if p["kind"] == "done" for n in p["runs"]) == sorted(NAMES)

    # back here: the finished runs restored whole, their best weights ready to answer other questions
    assert sprint.main([*TRIAL, "--out", str(back), "--from-bundle", str(tmp_path / "b2"), "--restore-only"]) == 0
    model, tok, cfg = load_run(back / NAMES[0])
    assert cfg.run.tf32 is False and (back / NAMES[0] / "test_samples.csv").is_file()
    capsys.readouterr()
    assert sprint.main(["--compare-cpu", str(second / NAMES[0]), str(back / NAMES[0])]) == 0
    assert "difference +0.0000; answers that differ 0.000" in capsys.readouterr().out


def test_the_dry_run_prints_the_plan_its_time_and_the_files_and_writes_nothing(sprint, tmp_path, capsys):
    out = tmp_path / "never"
    assert sprint.main(["--dry-run", "--device", "cpu", "--out", str(out), "--time-limit", "400"]) == 0
    text = capsys.readouterr().out
    assert "gpu sprint: 42 runs" in text and "gpu_30M division d = 17: 10 runs" in text
    assert "gpu_1M multiplication d = 15: 2 runs" in text
    assert "assumed speed: 50,000 tokens/s per run" in text and "in flight at the stop" in text
    assert "sprint-resume-NN.tar.gz" in text and "the registered rule at 200,000 tokens/s" in text
    assert text.rstrip().endswith("nothing was trained or written (--dry-run)")
    assert not out.exists()


def _fake_run(folder: Path, finished: bool, step: int, size: int) -> None:
    folder.mkdir(parents=True)
    cfg = TrainConfig.of(tasks=("multiplication",), out=str(folder))
    (folder / "config.json").write_text(json.dumps(recorded(cfg)))
    (folder / "environment.json").write_text("{}")
    (folder / "best.pt").write_bytes(torch.randint(0, 255, (size,), dtype=torch.uint8).numpy().tobytes())
    if finished:
        (folder / "test_summary.csv").write_text("task,score\nmultiplication,0.5\n")
        (folder / "test_samples.csv").write_text("score\n0.5\n")
    else:
        torch.save({"state": {"step": step, "seconds": 1.0}}, folder / "checkpoint.pt")


def test_the_bundle_keeps_to_its_limits_and_what_does_not_fit_waits_on_the_machine(sprint, tmp_path, monkeypatch):
    bundle = sys.modules[sprint.write_bundle.__module__]  # benchmarks/_sprint_bundle.py, which packs
    monkeypatch.setattr(bundle, "PART_BYTES", 300_000)
    monkeypatch.setattr(bundle, "BUNDLE_FILES", 3)  # the manifest and two parts
    cfg = TrainConfig.of(tasks=("multiplication",))
    runs = [Run("s", "e", "multiplication", 4, k, cfg) for k in range(4)]
    out = tmp_path / "out"
    for k, r in enumerate(runs):
        _fake_run(out / r.name, finished=k >= 2, step=10 * (k + 1), size=200_000)
    before = {r.name: ("to train", 0, 0.0) for r in runs}
    manifest = sprint.write_bundle(runs, out, tmp_path / "b", before, {"started": "now"})
    parts = manifest["parts"]
    assert [p["kind"] for p in parts] == ["resume", "resume", "done", "done"]
    assert [p["where"] == "bundle" for p in parts] == [True, True, False, False]
    assert all(p["bytes"] <= 300_000 for p in parts) and len(list((tmp_path / "b").iterdir())) == 3
    assert (out / sprint.OVERFLOW / "sprint-done-01.tar.gz").is_file()
    lines = sprint.restore(tmp_path / "b", tmp_path / "again")
    assert any("left on the machine" in line for line in lines)
    assert sprint.state(tmp_path / "again" / runs[1].name)[:2] == ("in flight", 20)
    assert sprint.state(tmp_path / "again" / runs[3].name)[0] == "finished"
    assert not (tmp_path / "again" / runs[3].name / "best.pt").exists()  # its done part stayed behind
    # a run further on where it is restored is kept; the same state gains nothing
    torch.save({"state": {"step": 99, "seconds": 9.0}}, tmp_path / "again" / runs[0].name / "checkpoint.pt")
    again = dict(line.split(": ", 1) for line in sprint.restore(tmp_path / "b", tmp_path / "again")[1:])
    assert again[runs[0].name].startswith("kept") and again[runs[1].name].endswith("(nothing new)")


@pytest.mark.parametrize("member", ["../escape/config.json", "run/not-a-run-file.sh", "/abs/config.json", "link"])
def test_a_part_holding_anything_else_than_run_files_is_refused(sprint, tmp_path, member):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo(member)
        if member == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        else:
            info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "sprint-resume-01.tar.gz").write_bytes(raw.getvalue())
    with pytest.raises(ValueError, match="refused"):
        sprint.restore(tmp_path / "b", tmp_path / "out")
    assert not list((tmp_path / "out").rglob("*.json"))


def test_the_sprints_runs_are_study4s_with_tf32_off_named_apart_and_levelled_by_the_rule():
    runs = P.plan([P.STUDY4_GPU])
    assert all(r.study.startswith("gpu_") for r in runs) and len({r.name for r in runs}) == len(runs)
    study4 = {r.name.replace("study4_", "gpu_"): r for r in P.study4_plan()}
    assert not {r.name for r in runs} & {r.name for r in study4.values()}
    for r in P.gpu_check_runs():  # the numerics check is Study 4's CPU run, with what a CPU does made explicit
        mine, twin = recorded(r.config), recorded(study4[r.name].config)
        assert {k for k in mine if mine[k] != twin[k]} == {"tf32", "optim"} and mine["tf32"] is False
        assert {k for k in mine["optim"] if mine["optim"][k] != twin["optim"][k]} == {"newton_schulz"}
        assert mine["optim"]["newton_schulz"] == "float32"
    level = P.gpu_level(3e7, P.GPU_DIGITS)
    assert len(level) == 40 and all(r.config.tokens == 3e7 and r.config.run.numerics == "portable" for r in level)
    assert [(r.seed, r.encoding) for r in level[:4]] == [
        (0, P.VARIANT),
        (0, "single_digit"),
        (1, P.VARIANT),
        (1, "single_digit"),
    ]
    cap = P.GPU_LEASES * P.GPU_LEASE_SECONDS
    assert P.gpu_levels(0) == [(3e7, P.GPU_DIGITS)]  # the first level runs whatever the speed
    assert P.gpu_levels(5.19e9 / cap) == [(3e7, P.GPU_DIGITS)]  # 1.2B + 4B tokens do not fit
    assert P.gpu_levels(5.21e9 / cap) == [(3e7, P.GPU_DIGITS), (1e8, P.GPU_DIGITS)]
    assert P.gpu_levels(5.81e9 / cap)[2] == (3e7, P.GPU_MORE_DIGITS)
    rates = [2.5e5 * k for k in range(48)]  # a faster device never runs fewer levels
    assert all(len(P.gpu_levels(a)) <= len(P.gpu_levels(b)) for a, b in zip(rates, rates[1:]))
    assert len(P.gpu_levels(1e12)) == len(P.GPU_LEVELS)


def test_tf32_is_recorded_and_runs_recorded_before_it_had_it_on():
    cfg = TrainConfig.of(tasks=("multiplication",))
    record = recorded(cfg)
    assert record["tf32"] is True
    del record["tf32"]
    assert config_differences(record, cfg) == ""
    assert "tf32" in config_differences(record, cfg.updated(tf32=False))
