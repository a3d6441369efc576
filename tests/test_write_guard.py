"""One guard for every write (issue 66): no command writes into results/, figures/, the tracked
folders or the repository's root, from whatever folder it is started; a relative path means the
current folder, as the write itself takes it, and links are followed. Bugs: `experiments study
--out results` rewrote results/cpu-study.csv (1,667 rows) to 0 rows after a Ctrl-C; `compare
--csv results/cpu-study.csv` overwrote it; `retrofit.experiment --table` replaced the 16 published
rows with 2; from inside results/, `leaderboard --csv runs/board.csv` wrote results/runs/; from
outside the checkout `--csv board.csv` was refused. The oracle: the published files, byte for
byte, before and after every refusal, and the place an accepted output lands."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest

from workbench import experiments, leaderboard, notebook_parameters, notebooks, study
from workbench.runs import compare, outputs
from workbench.runs.outputs import FIGURES, RESULTS, ROOT, output_path

WHERE = ("root", "results", "notebooks", "outside")  # the current folder a command is started from
AIMS = ("results", "figures", "notebooks", "root")  # where its output is aimed
SHARP = "writes only outside the repository or inside its runs/ folder"  # in every refusal


def folder_of(where: str, tmp_path: Path) -> Path:
    return {"root": ROOT, "results": RESULTS, "notebooks": ROOT / "notebooks", "outside": tmp_path}[where]


def spelled(place: Path, cwd: Path) -> str:
    """`place` as a user in `cwd` types it: relative inside the checkout, absolute outside."""
    return os.path.relpath(place, cwd) if cwd.is_relative_to(ROOT) else str(place)


def stamp() -> list:
    """Every entry of results/, figures/ and notebooks/ with its size, inode and mtime: an atomic
    replacement, a new file (a lock, a temporary) or a removal changes it."""
    entries = []
    for folder in (RESULTS, FIGURES, ROOT / "notebooks"):
        for p in sorted(folder.rglob("*")):
            s = p.lstat()
            entries.append((str(p.relative_to(ROOT)), s.st_size, s.st_ino, s.st_mtime_ns))
    return entries


def content() -> str:
    digest = hashlib.sha256()
    for folder in (RESULTS, FIGURES):
        for p in sorted(folder.rglob("*")):
            digest.update(str(p.relative_to(ROOT)).encode())
            if p.is_file():
                digest.update(p.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module", autouse=True)
def published_bytes():
    """results/ and figures/ byte-identical over the whole file."""
    before = content()
    yield
    assert content() == before


@pytest.fixture(autouse=True)
def untouched():
    """... and not replaced, added to or removed from by any test."""
    before = stamp()
    yield
    assert stamp() == before


@pytest.fixture
def spies(monkeypatch):
    """What would train, run a notebook or fine-tune, replaced: a guard that let an output through
    fails the test here instead of writing."""
    from workbench.retrofit import finetune as F
    from workbench.training import train as T

    called = []

    def spy(name):
        return lambda *a, **k: called.append(name) or pytest.fail(f"{name} ran: the output was not refused")

    monkeypatch.setattr(T, "train", spy("train"))
    monkeypatch.setattr(study, "run_study", spy("run_study"))
    monkeypatch.setattr(experiments, "run_ablations", spy("run_ablations"))
    monkeypatch.setattr(experiments, "run_protocol", spy("run_protocol"))
    monkeypatch.setattr(notebooks, "execute", spy("execute"))
    monkeypatch.setattr(F, "resolve_model", spy("resolve_model"))
    monkeypatch.setattr(F, "finetune", spy("finetune"))
    return called


def run_folder(tmp_path: Path) -> Path:
    """The least compare reads: a run folder with its configuration."""
    folder = tmp_path / "some-run"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"encoding": "bittokens", "seed": 0}))
    return folder


def _train(argv):
    from workbench.training import train as T

    T.main(argv)


def _retrofit(argv):
    from workbench.retrofit import finetune as F

    F.main(["--model", "smollm2-135m", "--encoding", "bittokens", *argv])


def _retrofit_experiment(argv):
    from workbench.retrofit import experiment as E

    E.main(argv)


def _held(argv):
    from workbench.study import held

    held.main(argv)


# the command with its output flag: (how it runs with TARGET, what the flag names: a folder or a file, the flag)
COMMANDS = {
    "train --out": (lambda t, _: _train(["--tokens", "1e4", "--out", t]), "folder", "--out"),
    "experiments study": (lambda t, _: experiments.main(["study", "--out", t]), "folder", "--out"),
    "experiments study --dry-run": (
        lambda t, _: experiments.main(["study", "--out", t, "--dry-run"]),
        "folder",
        "--out",
    ),
    "experiments study --score-generator": (
        lambda t, _: experiments.main(["study", "--out", t, "--score-generator"]),
        "folder",
        "--out",
    ),
    "experiments ablations": (lambda t, _: experiments.main(["ablations", "--smoke", "--out", t]), "folder", "--out"),
    "experiments cpu-tier": (lambda t, _: experiments.main(["cpu-tier", "--out", t]), "folder", "--out"),
    "experiments paper-tier": (
        lambda t, _: experiments.main(["paper-tier", "--out", t, "--dry-run"]),
        "folder",
        "--out",
    ),
    "compare --csv": (lambda t, tmp: compare.main([str(run_folder(tmp)), "--csv", t]), "file", "--csv"),
    "leaderboard --csv": (lambda t, _: leaderboard.main(["--csv", t]), "file", "--csv"),
    "leaderboard --figures": (lambda t, _: leaderboard.main(["--figures", t]), "folder", "--figures"),
    "notebooks run --output-dir": (
        lambda t, _: notebooks.main(["run", "--only", "02_fone_locality", "--output-dir", t]),
        "folder",
        "--output-dir",
    ),
    "retrofit --out": (lambda t, _: _retrofit(["--out", t]), "folder", "--out"),
    "retrofit.experiment --csv": (lambda t, _: _retrofit_experiment(["--table", "--csv", t]), "file", "--csv"),
    "study.held restore": (lambda t, tmp: _held(["restore", str(run_folder(tmp).parent), t]), "folder", "TO"),
    "retrofit.experiment --runs": (
        lambda t, tmp: _retrofit_experiment(["--only", "none:lora", "--csv", str(tmp / "t.csv"), "--runs", t]),
        "folder",
        "--runs",
    ),
}


def aimed(aim: str, kind: str) -> Path:
    """The place a flag is aimed at: the folder itself, or the file in it (results/: a published file)."""
    folder = ROOT if aim == "root" else ROOT / aim
    if kind == "folder":
        return folder
    return folder / ("cpu-study.csv" if aim == "results" else "board.csv")


@pytest.mark.parametrize("aim", AIMS)
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_refuses_the_checkout_from_every_folder(
    command, where, aim, tmp_path, monkeypatch, spies, capsys
):
    run, kind, flag = COMMANDS[command]
    cwd = folder_of(where, tmp_path)
    monkeypatch.chdir(cwd)
    target = spelled(aimed(aim, kind), cwd)
    with pytest.raises(SystemExit) as stop:
        run(target, tmp_path)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and spies == []
    assert err.count("\n") == 1 and SHARP in err, err  # one line
    assert f"error: {flag} is {target!r}, the repository's " in err and "use e.g. " in err
    suggested = cwd / err.rstrip().rsplit("use e.g. ", 1)[1]
    assert suggested.resolve().is_relative_to(outputs.RUNS), err  # what to use instead works from here


@pytest.mark.parametrize("where", ["results", "notebooks"])
@pytest.mark.parametrize("command", ["leaderboard --csv", "compare --csv", "train --out", "notebooks run --output-dir"])
def test_a_relative_path_means_the_current_folder(command, where, tmp_path, monkeypatch, spies, capsys):
    """From inside results/ or notebooks/, runs/x is results/runs/x or notebooks/runs/x (where the
    write would go), not the repository's runs/x: refused, with ../runs/x offered instead."""
    run, kind, _ = COMMANDS[command]
    monkeypatch.chdir(folder_of(where, tmp_path))
    target = "runs/board.csv" if kind == "file" else "runs/x"
    with pytest.raises(SystemExit):
        run(target, tmp_path)
    err = capsys.readouterr().err
    assert f"the repository's {where}/{target}" in err and "relative to the current folder" in err
    assert err.rstrip().endswith(f"use e.g. ../{target}") and spies == []


def test_train_without_out_from_inside_results_is_refused(tmp_path, monkeypatch, spies, capsys):
    """Without --out a run goes to a new runs/train-DATE-TIME of the current folder: inside
    results/ that is results/runs/, refused before the folder is made."""
    monkeypatch.chdir(RESULTS)
    with pytest.raises(SystemExit):
        _train(["--tokens", "1e4"])
    assert "the repository's results/runs" in capsys.readouterr().err and spies == []


@pytest.mark.parametrize(
    "where, given, lands",
    [
        ("root", "runs/x", "{root}/runs/x"),
        ("results", "../runs/x", "{root}/runs/x"),
        ("notebooks", "../runs/board.csv", "{root}/runs/board.csv"),
        ("outside", "board.csv", "{tmp}/board.csv"),
        ("outside", "{root}/runs/x", "{root}/runs/x"),
        ("outside", "../elsewhere/x", "{tmp_parent}/elsewhere/x"),
    ],
)
def test_allowed_outputs_resolve_where_the_path_says(where, given, lands, tmp_path, monkeypatch):
    monkeypatch.chdir(folder_of(where, tmp_path))
    names = dict(root=ROOT, tmp=tmp_path.resolve(), tmp_parent=tmp_path.resolve().parent)
    assert output_path(given.format(**names), "--out") == Path(lands.format(**names))


def test_links_are_followed(tmp_path, monkeypatch):
    """A path through a link is where the link points: a link to results/ is results/; a link out
    of the checkout from runs/ is outside it."""
    (tmp_path / "published").symlink_to(RESULTS)
    with pytest.raises(ValueError, match=r"the repository's results/cpu-study\.csv \(through a link"):
        output_path(tmp_path / "published" / "cpu-study.csv", "--csv")
    (tmp_path / "tracked").symlink_to(ROOT / "notebooks")  # a ".." after a link leaves the link's target
    with pytest.raises(ValueError, match=r"the repository's results/x \(through a link"):
        output_path(tmp_path / "tracked" / ".." / "results" / "x", "--out")
    (tmp_path / "mine").mkdir()
    (tmp_path / "to-mine").symlink_to(tmp_path / "mine")
    assert output_path(tmp_path / "to-mine" / "x.csv", "--csv") == tmp_path.resolve() / "mine" / "x.csv"


def test_figures_only_for_make_figures_own_run():
    with pytest.raises(ValueError, match="figures/ is written only by the default run, make figures"):
        output_path(FIGURES, "--figures")
    assert output_path(FIGURES, "figures_dir", figures=True) == FIGURES
    with pytest.raises(ValueError, match="the repository's figures/runs"):  # figures/ itself, nothing below it
        output_path(FIGURES / "runs", "figures_dir", figures=True)


def test_notebook_parameters_mean_the_repository_root(monkeypatch):
    """The notebooks run in the repository root (each changes to it): out_dir=runs/x is the
    repository's runs/x from any folder, and notebook 03's options={"out": "results"} is results/."""
    monkeypatch.chdir(ROOT / "notebooks")
    notebook_parameters.check_limits("03_training", {"out_dir": "runs/x"})
    assert notebook_parameters.check_output_folder("runs/x", "out_dir") == ROOT / "runs" / "x"
    for options in ({"out": "results"}, {"out": "figures/x"}, {"out": "."}):
        with pytest.raises(ValueError, match=r"notebook 03_training: parameter options\['out'\] is"):
            notebook_parameters.check_limits("03_training", {"options": options})
    notebook_parameters.check_limits("03_training", {"options": {"out": "runs/mine", "curriculum": False}})


def test_accepted_outputs_are_written_where_the_path_says(tmp_path, monkeypatch, capsys):
    """From outside the checkout `--csv board.csv` is ./board.csv (it was refused); from the root
    runs/NAME is the repository's runs/NAME."""
    run = run_folder(tmp_path)
    outside = tmp_path / "cwd"
    outside.mkdir()
    monkeypatch.chdir(outside)
    compare.main([str(run), "--csv", "board.csv"])
    leaderboard.main(["--csv", "board-lb.csv"])
    assert (outside / "board.csv").is_file() and (outside / "board-lb.csv").is_file()
    mine, had_runs = f"write-guard-{uuid.uuid4().hex[:8]}", outputs.RUNS.exists()
    monkeypatch.chdir(ROOT)
    try:
        compare.main([str(run), "--csv", f"runs/{mine}/board.csv"])
        assert (outputs.RUNS / mine / "board.csv").is_file()
    finally:
        shutil.rmtree(outputs.RUNS / mine, ignore_errors=True)
        if not had_runs and not any(outputs.RUNS.iterdir()):
            outputs.RUNS.rmdir()


def test_commands_write_to_the_place_they_checked(tmp_path, monkeypatch):
    """train and notebooks run get the absolute place the check resolved, not a relative path a
    later chdir (the notebooks run in the root) would move."""
    from workbench.training import train as T

    seen = []
    monkeypatch.setattr(T, "train", lambda cfg, resume=False: seen.append(cfg.run.out) or Path(cfg.run.out))
    monkeypatch.setattr(notebooks, "execute", lambda name, params, out, **k: seen.append((params, out)) or out)
    monkeypatch.chdir(ROOT / "notebooks")
    T.main(["--tokens", "1e4", "--out", "../runs/x"])
    monkeypatch.chdir(tmp_path)
    notebooks.main(["run", "--only", "02_fone_locality", "--output-dir", "nb"])
    nb = tmp_path.resolve() / "nb"
    assert seen == [str(ROOT / "runs" / "x"), ({"figures_dir": str(nb / "figures")}, nb)]


def test_a_run_folder_whose_tb_or_log_is_a_link_is_refused(tmp_path):
    """TensorBoard writes into RUN/tb/ and a resume appends to RUN/metrics.jsonl: through a link
    they would write wherever it points (results/, say). Refused before the run touches anything."""
    from workbench.config import TrainConfig
    from workbench.runs import folder as run_folder

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.csv").write_text("kept\n")
    for name in ("tb", "metrics.jsonl"):
        run = tmp_path / f"run-{name}"
        run.mkdir()
        (run / name).symlink_to(victim if name == "tb" else victim / "keep.csv")
        with pytest.raises(ValueError, match=rf"run-{name}/{name} is a link .*never through a link"):
            run_folder.prepare(TrainConfig.of(out=str(run), overwrite=True), resume=False, rank=0)
        assert (run / name).is_symlink()
    assert sorted(p.name for p in victim.iterdir()) == ["keep.csv"] and (victim / "keep.csv").read_text() == "kept\n"


def test_the_library_refuses_too(tmp_path):
    """Behind the commands: train, a study, a protocol, the retrofit (notebook 03 calls train with
    its `options`) refuse results/ before their lock or anything else is written."""
    from workbench.config import TrainConfig
    from workbench.retrofit import finetune as F
    from workbench.retrofit.config import RetrofitConfig
    from workbench.training import train as T

    for call in (
        lambda: T.train(TrainConfig.of(out=str(RESULTS))),
        lambda: study.run_study(["precision"], RESULTS),
        lambda: study.write_results(RESULTS),
        lambda: study.generator_scores(RESULTS),
        lambda: experiments.run_protocol("cpu-tier", out=str(RESULTS)),
        lambda: experiments.run_ablations(out=ROOT),
        lambda: F.finetune(RetrofitConfig.of(model="smollm2-135m", out=str(RESULTS / "x"))),
    ):
        with pytest.raises(ValueError, match=SHARP):
            call()


class TestRetrofitTable:
    """A registration's table in results/ is written by --publish only, and only whole."""

    ROW = pd.DataFrame([{"encoding": "none", "mode": "full", "task": "addition", "score": 0.5}])

    def test_the_table_goes_to_runs_by_default(self, tmp_path, monkeypatch):
        from workbench.retrofit import experiment as E

        monkeypatch.setattr(E, "table", lambda runs, reg: self.ROW)
        monkeypatch.chdir(tmp_path)
        E.main(["--table"])
        assert pd.read_csv(tmp_path / "runs" / "retrofit-learns.csv").equals(self.ROW)
        E.main(["--table", "--registration", "first"])
        assert pd.read_csv(tmp_path / "runs" / "retrofit-smollm2.csv").equals(self.ROW)

    def test_no_complete_run_says_so_writes_nothing_and_exits_1(self, tmp_path, monkeypatch, capsys):
        """Bug: `--table` on a fresh clone printed nothing and exited 0. Now one line: where it
        looked, that nothing was written, and the command that makes runs."""
        from workbench.retrofit import experiment as E

        monkeypatch.chdir(tmp_path)
        (tmp_path / "partial" / "none-full-seed0").mkdir(parents=True)  # an interrupted run: not complete
        prog = "python -m workbench.retrofit.experiment"
        for registration, runs, line in (
            ("first", "runs/retrofit-smollm2", f"`{prog} --registration first` (all 16) or "),
            ("first", "partial", f"`{prog} --registration first` (all 16) or "),
            ("learns", "runs/retrofit-learns", f"`{prog}` (all 25) or `{prog} --only none:lora` (5)"),
        ):
            with pytest.raises(SystemExit) as stop:
                E.main(["--table", "--runs", runs, "--registration", registration])
            out, err = capsys.readouterr()
            assert stop.value.code == E.NOTHING == 1 and out == ""
            assert err.startswith(f"{prog}: no complete run in {runs} to tabulate, nothing written; make them with ")
            assert line in err and err.endswith(")\n")
        assert sorted(p.name for p in tmp_path.rglob("*")) == ["none-full-seed0", "partial"]

    def test_publish_needs_every_run_and_no_csv(self, tmp_path, monkeypatch, capsys):
        from dataclasses import replace

        from workbench.retrofit import experiment as E

        monkeypatch.setattr(E, "table", lambda runs, reg: self.ROW)
        with pytest.raises(SystemExit):
            E.main(["--table", "--publish", "--runs", str(tmp_path), "--registration", "first"])
        assert "--publish writes the registered table whole, from all 16 runs; 16 are not complete" in (
            capsys.readouterr().err
        )
        with pytest.raises(SystemExit):
            E.main(["--table", "--publish", "--csv", str(tmp_path / "t.csv")])
        assert "leave out --csv" in capsys.readouterr().err
        monkeypatch.setattr(E, "done", lambda run: True)
        # the one path into results/, stood in for
        first = replace(E.FIRST, published=tmp_path / "published.csv")
        monkeypatch.setitem(E.REGISTRATIONS, "first", first)
        E.main(["--table", "--publish", "--runs", str(tmp_path), "--registration", "first"])
        assert pd.read_csv(tmp_path / "published.csv").equals(self.ROW)
        assert E.FIRST.csv == Path("runs/retrofit-smollm2.csv") and E.FIRST.published.parent.name == "results"


def _cli(module: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", module, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("where", WHERE)
def test_a_study_aimed_at_results_is_refused_before_anything(where, tmp_path):
    """The command of the bug, as a user types it: the plan and the dry run alike stop in one
    line and results/cpu-study.csv keeps every byte."""
    cwd = folder_of(where, tmp_path)
    target = spelled(RESULTS, cwd)
    tiny = ["--studies", "precision", "--encodings", "single_digit", "--seeds", "0", "--tasks", "multiplication"]
    for argv in (["--dry-run"], [*tiny, "--digits", "2", "--jobs", "1"]):
        done = _cli("workbench.experiments", "study", "--out", target, *argv, cwd=cwd)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr.count("\n") == 1 and f"--out is {target!r}" in done.stderr and SHARP in done.stderr
        assert "the published results, written only by publishing" in done.stderr
