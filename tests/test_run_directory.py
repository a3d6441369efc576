"""Nothing a run wrote is lost: --resume needs a checkpoint, an old run is never silently replaced,
the log is rewritten atomically, a killed write's temporaries are cleaned up, a full disk keeps the
previous checkpoint and says so; every flag is checked before anything is allocated."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tiny import tiny

from workbench.runs import checkpoints, memory, provenance
from workbench.runs import folder as run_folder
from workbench.runs.atomic import write_atomic
from workbench.tasks import text_sources
from workbench.training import train as T
from workbench.training.optim import OptimConfig

TINY = tiny(
    4,
    encoding="bittokens",
    tasks=("addition",),
    eval_every=2,
    checkpoint_every=2,
    decades=(0, 1),
    max_digits=2,
    optim=OptimConfig(newton_schulz="float32"),
)


def test_resume_without_a_checkpoint_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="--resume: there is no .*checkpoint.pt"):
        T.train(T.TrainConfig.of(**TINY, out=str(tmp_path / "run")), resume=True)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_an_existing_run_is_never_silently_replaced(tmp_path):
    out = tmp_path / "run"
    T.train(T.TrainConfig.of(**TINY, out=str(out)))
    before = (out / "metrics.jsonl").read_bytes()
    with pytest.raises(FileExistsError, match="--resume .* --overwrite .* new --out"):
        T.train(T.TrainConfig.of(**TINY, out=str(out)))
    assert (out / "metrics.jsonl").read_bytes() == before and (out / "best.pt").exists()
    (out / "marker").write_text("a file of the user's")
    T.train(T.TrainConfig.of(**TINY, out=str(out), overwrite=True))  # asked for: replaced
    losses = [
        [json.loads(r)["loss"] for r in log.splitlines()]
        for log in (before.decode(), (out / "metrics.jsonl").read_text())
    ]
    assert losses[0] == losses[1]  # the same seed gives the same curve, written afresh
    assert (out / "marker").exists()  # only the run's own files are replaced


def test_a_kill_while_the_log_is_rewritten_loses_nothing(tmp_path):
    """--resume drops the log rows after the checkpoint by rewriting the log; a kill at the worst
    moment (the new log written, not yet renamed) must leave the old log whole, and the next start
    removes the temporary it left."""
    out = tmp_path / "run"
    T.train(T.TrainConfig.of(**TINY, out=str(out)))
    log = out / "metrics.jsonl"
    rows = log.read_text().splitlines()
    log.write_text("\n".join(rows) + '\n{"step": 99, "loss": 1.0}\n')  # a row after the checkpoint
    before = log.read_bytes()
    code = (
        "import os, signal, sys; from pathlib import Path; from workbench.runs import logs; "
        "os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL); "
        "logs.truncate_log(Path(sys.argv[1]), 4)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True)
    assert proc.returncode == -9  # killed
    assert log.read_bytes() == before  # not emptied, not half-written
    leftovers = list(out.glob(".metrics.jsonl.*"))
    assert leftovers  # the kill left its temporary behind
    run_folder.prepare(T.TrainConfig.of(**TINY, out=str(out)), resume=True, rank=0)
    assert not list(out.glob(".metrics.jsonl.*")) and log.read_bytes() == before


def test_sigkilled_checkpoint_temporaries_are_removed_on_the_next_start(tmp_path):
    out = tmp_path / "run"
    T.train(T.TrainConfig.of(**TINY, out=str(out)))
    for name in (".checkpoint.pt.k2j3h4g5", ".best.pt.0a9s8d7f"):
        (out / name).write_bytes(b"half a checkpoint")
    (out / ".unrelated").write_text("not ours")
    T.train(T.TrainConfig.of(**TINY, out=str(out)), resume=True)  # finished: nothing to train, cleans up
    assert sorted(p.name for p in out.glob(".*")) == [".unrelated"]  # and the run took its lock file with it


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs (needs root and mount); skipped where it cannot be made."""
    folder = tmp_path / "small"
    folder.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_keeps_the_previous_checkpoint_and_says_so(full_disk):
    path = full_disk / "checkpoint.pt"
    small = {"model": torch.ones(1000)}
    write_atomic(path, lambda tmp: torch.save(small, tmp))
    big = {"model": torch.ones(1_000_000)}  # 4 MB: more than the disk holds
    with pytest.raises(
        OSError, match="the disk is full: could not write .*checkpoint.pt .*previous checkpoint.pt.* kept"
    ):
        write_atomic(path, lambda tmp: torch.save(big, tmp))
    assert torch.equal(checkpoints.load_checkpoint(path)["model"], small["model"])  # the old one, whole
    assert [p.name for p in full_disk.iterdir()] == ["checkpoint.pt"]  # no temporary left


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--checkpoint-every", "0"], "--checkpoint-every must be an integer >= 1"),
        (["--checkpoint-every", "-1"], "--checkpoint-every must be an integer >= 1"),
        (["--test-samples", "0"], "--test-samples must be an integer >= 1"),
        (["--val-samples", "0"], "--val-samples must be an integer >= 1"),
        (["--pool-size", "0"], "--pool-size must be an integer >= 1"),
        (["--tokens", "inf"], "--tokens must be a finite number"),
        (["--tokens", "nan"], "--tokens must be a finite number"),
        (["--context", "0"], "--context must be an integer in 8..65536"),
        (["--context", "100000"], "--context must be an integer in 8..65536"),
        (["--out", ""], "--out must name a run directory"),
        (["--encoding", "base64"], "unknown encoding 'base64'"),
        (["--tasks", "addition,nope"], "unknown task 'nope'"),
        (["--tasks", "additon"], "did you mean 'addition'?"),
        (["--encoding", "bittoken"], "did you mean 'bittokens'?"),
        (["--decades", "3", "1"], "decades must be integers with"),
        (["--encoding-option", "combine=glue"], "combine must be one of"),
        (["--encoding-option", "combine"], "--encoding-option takes KEY=VALUE"),
        (["--max-task-ratio", "0.1"], "--max-task-ratio must be in"),
        (["--text-source", "ftp:x"], "unknown text source kind"),
    ],
)
def test_every_bad_flag_is_refused_before_anything_runs(flags, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        T.main(flags + ["--out", str(tmp_path / "run")] if "--out" not in flags else flags)
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_configuration_that_cannot_fit_in_memory_is_refused_up_front():
    cfg = T.TrainConfig.of(**{**TINY, "batch_size": 64}, context=65536)
    with pytest.raises(
        MemoryError, match="needs about .* GiB but .* GiB are free: .* GiB for --batch-size 64 x --context 65536"
    ):
        memory.check_memory(cfg, vocab_size=2100)
    assert memory.check_memory(T.TrainConfig.of(**TINY), vocab_size=2100) < 2**30  # a small run passes


def test_every_user_error_is_one_or_two_lines(tmp_path, capsys):
    """No usage dump before the line that matters: a misspelled name, a bad value, a rerun into a
    finished run (issue 28's mistakes)."""
    for flags in (["--encoding", "bittoken"], ["--tasks", "additon"], ["--tokens", "0"]):
        with pytest.raises(SystemExit):
            T.main(flags + ["--out", str(tmp_path / "x")])
        assert len(capsys.readouterr().err.strip().splitlines()) <= 2
    T.train(T.TrainConfig.of(**TINY, out=str(tmp_path / "done")))
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        T.main(["--encoding", "bittokens", "--tasks", "addition", "--out", str(tmp_path / "done")])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "already holds a run" in err[0] and "--resume" in err[0]


def test_resume_with_another_configuration_names_the_settings_that_differ_and_touches_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    T.train(T.TrainConfig.of(**TINY, out=str(out)))
    capsys.readouterr()
    (out / ".checkpoint.pt.abcd1234").write_bytes(b"another process's temporary")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(SystemExit):
        T.main(
            [
                "--encoding",
                "bittokens",
                "--tasks",
                "addition",
                "--seed",
                "3",
                "--max-digits",
                "1",
                "--resume",
                "--out",
                str(out),
            ]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed: 0 (recorded) vs 3" in err[0] and "max_digits: 2 (recorded) vs 1" in err[0]
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # nothing touched


def test_a_resume_may_change_what_only_the_final_test_reads(tmp_path):
    out = tmp_path / "run"
    T.train(T.TrainConfig.of(**TINY, out=str(out)))
    T.train(T.TrainConfig.of(**{**TINY, "test_samples": 6}, out=str(out)), resume=True)
    assert len(T.pd.read_csv(out / "test_samples.csv")) == 6


@pytest.mark.slow
def test_two_processes_never_write_into_one_run_directory(tmp_path):
    """Bug: two runs started into one --out both write (every step logged twice, files from either).
    A second process is refused at once -- a new run, an --overwrite, a --resume -- in one line
    naming the first's PID, and the first runs on alone: each step logged once. (The first run is
    far longer than the refusals take, and is stopped once it has gone on past them: a fixed short
    run could end before the refusals on a quiet machine.)"""
    out = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "workbench.train",
        "--encoding",
        "bittokens",
        "--tasks",
        "addition",
        "--batch-size",
        "2",
        "--tokens",
        str(2 * 128 * 100_000),
        "--pool-size",
        "100",
        "--val-samples",
        "4",
        "--test-samples",
        "4",
        "--threads",
        "1",
        "--checkpoint-every",
        "5",
        "--out",
        str(out),
    ]
    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def steps():  # the steps logged so far (complete lines only: the first is still writing)
        text = (out / "metrics.jsonl").read_text()
        return [json.loads(line)["step"] for line in text[: text.rfind("\n") + 1].splitlines()]

    try:
        deadline = time.time() + 120
        while not (out / "metrics.jsonl").exists() and time.time() < deadline:
            time.sleep(0.05)
        for extra in ([], ["--overwrite"], ["--resume"]):
            second = subprocess.run(args + extra, capture_output=True, text=True, timeout=120)
            lines = second.stderr.strip().splitlines()
            assert second.returncode == 2 and len(lines) == 1, second.stderr
            assert f"in use by process {first.pid} " in lines[0] and str(out) in lines[0]
        assert first.poll() is None  # the refusals came while the first was running
        logged = len(steps())
        while len(steps()) < logged + 20 and time.time() < deadline + 120:
            time.sleep(0.05)
        assert first.poll() is None  # it ran on past the refusals
    finally:
        first.kill()
        first.wait()
    done = steps()
    assert len(done) >= logged + 20 and done == list(range(1, len(done) + 1))


def test_each_run_records_what_made_it(tmp_path):
    out = T.train(T.TrainConfig.of(**{**TINY, "tasks": ("addition", "text")}, out=str(tmp_path / "run")))
    env = json.loads((out / "environment.json").read_text())
    assert env["python"] == ".".join(map(str, sys.version_info[:3])) and env["torch"] == torch.__version__
    assert env["threads"] == 1 and env["bpe_corpus_sha256"] == env["text_source_sha256"]
    assert env["bpe_corpus_sha256"] == hashlib.sha256(text_sources.SHIPPED.read_bytes()).hexdigest()
    head = subprocess.run(
        ["git", "-C", str(Path(T.__file__).parents[1]), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if head:  # a git checkout: the run names the commit that made it (and whether the code differed)
        assert env["workbench_commit"] in (head, head + "+changes")
    # the machine: the kernels that did the arithmetic, and every "auto" as it resolved
    assert env["kernels"] == f"cpu/{torch.backends.cpu.get_cpu_capability()}" and env["cpu_model"]
    assert env["resolved"]["newton_schulz"] == "float32" and env["resolved"]["grad_accum"] == 1
    assert env["resolved"]["prefetch"] == "off" and env["resolved"]["list_sampling"] == "resolved"
    assert env["resolved"]["attention"] == "dense with the CPU block plan" and env["resolved"]["tf32"] is False
    assert env["tokenizer_sha256"].startswith("sha256:") and len(env["tokenizer_sha256"]) == 71


CAPABILITY_PROBE = """
import sys
from workbench.runs import folder as run_folder
from workbench.runs import provenance
from workbench.training import train as T
from workbench.training.optim import OptimConfig
cfg = T.TrainConfig.of(encoding="bittokens", tasks=("addition",), preset="cpu-tiny", batch_size=2, tokens=2 * 128 * 4,
                    pool_size=100, val_samples=4, test_samples=4, eval_every=2, checkpoint_every=2, decades=(0, 1),
                    max_digits=2, threads=1, optim=OptimConfig(newton_schulz="float32"), out=sys.argv[1],
                    same_kernels=sys.argv[2] == "1")
if sys.argv[3] == "train":
    T.train(cfg)
    print("kernels:", provenance.kernels(provenance.device_of("cpu")))
    sys.exit()
print("differences:", run_folder.recorded_differences(cfg))
try:
    T.train(cfg, resume=True)
    print("resumed")
except ValueError as err:
    print("refused:", err)
"""


def test_a_run_made_on_other_kernels_is_refused(tmp_path):
    """A native run made on AVX-512 kernels, resumed or counted on AVX2 ones (ATEN_CPU_CAPABILITY lowers
    torch's), would silently give other numbers: it is refused, naming both; --no-same-kernels
    lets it through. (Portable runs pin the kernels: numerics.py.)"""
    out = tmp_path / "run"
    # a shell's environment, not the test process's: `import workbench` here marked the portable
    # variables as its own (WORKBENCH_NUMERICS_SET), and a native child removes those of them that
    # still hold portable values; on an AVX-512 machine that is the avx2 set below for the resume
    from workbench.model.numerics import OURS, PORTABLE_ENV

    unset = (*PORTABLE_ENV, "NPY_DISABLE_CPU_FEATURES", OURS)
    native = {k: v for k, v in os.environ.items() if k not in unset}
    native |= {"WORKBENCH_NUMERICS": "native"}
    done = subprocess.run(
        [sys.executable, "-c", CAPABILITY_PROBE, str(out), "1", "train"], env=native, capture_output=True, text=True
    )
    here = done.stdout.split("kernels: cpu/")[-1].strip()
    assert done.returncode == 0 and here, done.stdout + done.stderr
    other = "avx2" if here != "AVX2" else "default"
    env = dict(native, ATEN_CPU_CAPABILITY=other)
    before = (out / "metrics.jsonl").read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", CAPABILITY_PROBE, str(out), "1", "resume"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert f"kernels: cpu/{here} (recorded) vs cpu/{other.upper()} here" in done.stdout, done.stdout + done.stderr
    assert "refused: --resume:" in done.stdout and "kernels: " in done.stdout.split("refused:")[1]
    assert (out / "metrics.jsonl").read_bytes() == before  # nothing written
    done = subprocess.run(
        [sys.executable, "-c", CAPABILITY_PROBE, str(out), "0", "resume"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "differences: \n" in done.stdout and "resumed" in done.stdout, done.stdout + done.stderr


def test_a_run_begun_on_another_cpu_model_is_not_resumed(tmp_path):
    """The same kernel label on another CPU (an AMD and an Intel CPU, both cpu/AVX512) trains the
    same run apart, so a resume there is refused, naming both models and writing nothing; the
    finished run still counts; a run under --no-same-kernels resumes. (A record without a model
    is no difference of models, but a resume refuses it: see the test below.)"""
    out = tmp_path / "run"
    cfg = T.TrainConfig.of(**TINY, out=str(out))
    T.train(cfg)
    assert provenance.cpu_difference(cfg) == ""
    path = out / "environment.json"
    env = json.loads(path.read_text())
    path.write_text(json.dumps(env | {"cpu_model": "AMD EPYC 9R14 96-Core Processor"}))
    _edit_checkpoint(out / "checkpoint.pt", cpu_model="AMD EPYC 9R14 96-Core Processor")  # made there, both say
    here = provenance.cpu_model()
    assert provenance.cpu_difference(cfg) == f"CPU: AMD EPYC 9R14 96-Core Processor (recorded) vs {here} here"
    before = (out / "metrics.jsonl").read_bytes()
    with pytest.raises(ValueError, match="CPU: AMD EPYC 9R14"):
        T.train(cfg, resume=True)
    assert (out / "metrics.jsonl").read_bytes() == before
    assert run_folder.recorded_differences(cfg) == ""  # counted as finished wherever it is read
    assert provenance.cpu_difference(cfg.updated(same_kernels=False)) == ""
    path.write_text(json.dumps({k: v for k, v in env.items() if k != "cpu_model"}))
    assert provenance.cpu_difference(cfg) == ""


def test_a_test_set_that_cannot_fit_is_refused_before_training(tmp_path, capsys):
    """Bug: the memory check ignored the questions, so --test-samples 3000000 trained every step,
    checkpointed, then died in the final test. Now it is refused before the first step."""
    with pytest.raises(SystemExit) as stop:
        T.main(
            [
                "--encoding",
                "bittokens",
                "--tasks",
                "addition,sorting",
                "--test-samples",
                "3000000",
                "--out",
                str(tmp_path / "run"),
            ]
        )
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--test-samples 3000000" in err and "GiB for the questions" in err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_best_weights_are_written_as_they_were_when_saved(tmp_path):
    """best.pt is written on a worker thread while training goes on changing the weights in place:
    the file must hold the weights of the evaluation that chose them, not later ones."""
    weights = {"w": torch.arange(1e6, dtype=torch.float32), "b": torch.ones(3)}
    expected = {k: v.clone() for k, v in weights.items()}
    writer = checkpoints.BestWriter()
    assert not writer.holds(tmp_path / "best.pt")
    writer.save(tmp_path / "best.pt", weights)
    assert writer.holds(tmp_path / "best.pt")
    for v in weights.values():
        v.add_(1.0)  # the next training steps
    writer.close()
    saved = torch.load(tmp_path / "best.pt", weights_only=True)
    assert all(torch.equal(saved[k], expected[k]) for k in expected)
    other = checkpoints.BestWriter()
    other.save(tmp_path / "elsewhere.pt", weights, write=False)  # another rank: notes it, writes nothing
    other.close()
    assert other.holds(tmp_path / "elsewhere.pt") and not (tmp_path / "elsewhere.pt").exists()


def test_without_out_every_run_gets_a_new_folder(tmp_path, monkeypatch):
    """A second quick `python -m workbench.train` without --out is not refused: each gets a new
    folder under runs/ (made at once, so two started in the same second differ too); --out is kept."""
    monkeypatch.chdir(tmp_path)
    seen = []
    monkeypatch.setattr(T, "train", lambda cfg, resume=False: seen.append(cfg.run.out) or Path(cfg.run.out))
    for _ in range(3):
        T.main(["--tokens", "1e4"])
    T.main(["--tokens", "1e4", "--out", "runs/mine"])
    runs = (tmp_path / "runs").resolve()  # absolute: the place outputs.output_path checked is the one written
    assert len(set(seen[:3])) == 3 and seen[3] == str(runs / "mine")
    assert all(Path(p).parent == runs and Path(p).name.startswith("train-") and Path(p).is_dir() for p in seen[:3])
    # under torchrun the ranks agree on one folder, named by the launch's rendezvous id
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "0f3c9a7e-5b1d")
    assert run_folder.fresh_run_dir() == run_folder.fresh_run_dir() == Path("runs/train-0f3c9a7e")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    with pytest.raises(ValueError, match="--out"):
        run_folder.fresh_run_dir()


# The flags of TINY, for resuming through the command as a user would
TINY_FLAGS = (
    "--encoding bittokens --tasks addition --preset cpu-tiny --batch-size 2 --tokens 1024 --pool-size 100 "
    "--val-samples 4 --test-samples 4 --threads 1 --eval-every 2 --checkpoint-every 2 --decades 0 1 "
    "--max-digits 2 --newton-schulz float32"
).split()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished tiny run, copied by each test that damages it."""
    out = tmp_path_factory.mktemp("provenance") / "run"
    T.train(T.TrainConfig.of(**TINY, out=str(out)))
    return out


def _edit_checkpoint(path, **changes):
    ckpt = torch.load(path, weights_only=True)
    ckpt["provenance"][-1].update(changes)
    torch.save(ckpt, path)


RECORD_DAMAGE = {
    "deleted": (lambda env, ckpt: env.unlink(), "environment.json is missing: it is the record of the machine"),
    "truncated": (
        lambda env, ckpt: env.write_bytes(env.read_bytes()[: len(env.read_bytes()) // 2]),
        "environment.json is not JSON (",
    ),
    "stripped of its keys": (
        lambda env, ckpt: env.write_text(
            json.dumps({k: v for k, v in json.loads(env.read_text()).items() if k not in ("kernels", "cpu_model")})
        ),
        "environment.json records no kernels and no cpu_model: the record of the machine is incomplete",
    ),
    "emptied to {}": (lambda env, ckpt: env.write_text("{}"), "environment.json records no kernels and no cpu_model"),
    "a JSON list": (
        lambda env, ckpt: env.write_text(json.dumps([json.loads(env.read_text())])),
        "environment.json holds a JSON list, not a record",
    ),
    "deeply nested": (
        lambda env, ckpt: env.write_text("[" * 100_000),
        "environment.json: JSON nested deeper than Python reads",
    ),
    "a FIFO": (lambda env, ckpt: (env.unlink(), os.mkfifo(env)), "environment.json is a FIFO (named pipe), not a file"),
    "edited kernels": (
        lambda env, ckpt: env.write_text(json.dumps(json.loads(env.read_text()) | {"kernels": "cpu/AVX512_BF16"})),
        "environment.json records kernels 'cpu/AVX512_BF16' but ",
    ),
    "edited numerics": (
        lambda env, ckpt: env.write_text(json.dumps(json.loads(env.read_text()) | {"numerics": "other"})),
        "environment.json records numerics 'other' but ",
    ),
    "checkpoint made elsewhere": (
        lambda env, ckpt: _edit_checkpoint(ckpt, cpu_model="AMD EPYC 9R14 96-Core Processor"),
        "the record was edited, or written by another process",
    ),
}


@pytest.mark.parametrize("damage", RECORD_DAMAGE)
def test_a_resume_refuses_a_record_of_the_machine_it_cannot_trust(trained, tmp_path, capsys, damage):
    """Bug: with environment.json deleted, truncated, stripped of its keys or not an object,
    --resume went through and recorded this machine as the run's; an edited record was believed;
    the checkpoint kept no copy of where it was made. Now the checkpoint keeps it, and the resume is
    refused in one line naming what is wrong, with nothing of the run changed; --no-same-kernels
    lets it through, as for a record of another machine."""
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    damaged, message = RECORD_DAMAGE[damage]
    damaged(out / "environment.json", out / "checkpoint.pt")
    before = _contents(out)
    with pytest.raises(SystemExit) as stop:
        T.main(TINY_FLAGS + ["--out", str(out), "--resume"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert message in err[0] and "--resume: " in err[0] and "--no-same-kernels" in err[0], err[0]
    assert _contents(out) == before  # nothing of the run changed, nothing added


def _contents(folder):
    """Every file under `folder` (its lock aside, which names the last process that held it) and its bytes."""
    return {
        p.relative_to(folder): p.read_bytes() if p.is_file() else None for p in folder.rglob("*") if p.name != ".lock"
    }


def test_no_same_kernels_resumes_past_a_lost_record_and_the_checkpoint_keeps_where_it_was_made(trained, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    kept = torch.load(out / "checkpoint.pt", weights_only=True)["provenance"]
    env = json.loads((out / "environment.json").read_text())
    assert [{k: v for k, v in e.items() if k != "from_step"} for e in kept] == [
        {k: env[k] for k in (*provenance.PROVENANCE, "workbench_commit")}
    ]
    assert kept[0]["from_step"] == 0 and kept[0]["kernels"] == provenance.kernels(torch.device("cpu"))
    (out / "environment.json").unlink()
    T.train(T.TrainConfig.of(**TINY, out=str(out), same_kernels=False), resume=True)
    assert json.loads((out / "environment.json").read_text())["kernels"] == kept[0]["kernels"]


def test_a_checkpoint_from_before_provenance_loads_as_one_without_a_record(trained, tmp_path):
    """A checkpoint written before checkpoints kept their machine still resumes, its environment.json
    taken as the record (there is nothing to check it against); a damaged record is still refused."""
    out = tmp_path / "run"
    shutil.copytree(trained, out)
    ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
    del ckpt["provenance"]
    torch.save(ckpt, out / "checkpoint.pt")
    assert checkpoints.checkpoint_problem(ckpt) == ""
    cfg = T.TrainConfig.of(**TINY, out=str(out))
    assert provenance.provenance_problem(cfg, ckpt) == ""
    env = out / "environment.json"
    env.write_text(env.read_text()[:10])
    assert "environment.json is not JSON" in provenance.provenance_problem(cfg, ckpt)
    for bad, why in (("a record", "its 'provenance' is a str"), (["a record"], "holds more than records")):
        assert why in checkpoints.checkpoint_problem(ckpt | {"provenance": bad})


def test_a_fifo_or_folder_in_place_of_a_checkpoint_is_refused_without_waiting(tmp_path):
    """torch.load of a FIFO waits for a writer forever (a dry run or a resume looked at one and hung)."""
    os.mkfifo(tmp_path / "checkpoint.pt")
    (tmp_path / "best.pt").mkdir()
    for name, kind in (("checkpoint.pt", r"a FIFO \(named pipe\)"), ("best.pt", "a folder")):
        with pytest.raises(ValueError, match=rf"{name} is {kind}, not a file a run wrote"):
            checkpoints.load_checkpoint(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        checkpoints.load_checkpoint(tmp_path / "absent.pt")
