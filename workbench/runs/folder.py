"""A run directory: what is in it, and whether a new run or a resume may use it; Ctrl-C's line on
how to go on. What is kept there is read and written by its own modules: where the run came from
(provenance.py), its checkpoints and best weights (checkpoints.py), its logs (logs.py).

    OUT/config.json         the configuration, one key per flag (config.recorded)
    OUT/environment.json    commit, libraries, the machine and its kernels, every "auto" as resolved
    OUT/metrics.jsonl       one row per step           OUT/evals.jsonl  one row per evaluation
    OUT/checkpoint.pt       all a resume needs         OUT/best.pt      the best evaluation's weights
    OUT/test_samples.csv    every test answer          OUT/test_summary.csv  per task
    OUT/tb/                 TensorBoard's event files: the logs' numbers as scalars (events.py)

Every file is written atomically. A resume, or a study counting a finished run, needs the same
configuration (`config_differences`; the settings of PLACE_AND_PACE and RESUMABLE aside) and the
same kernels (`provenance.kernel_difference`); a resume also the same CPU model
(`provenance.cpu_difference`), and a record of the machine it can trust
(`provenance.provenance_problem`): environment.json readable and whole, and agreeing with the copy
of it that every checkpoint keeps (`provenance.provenance`).
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from ..config import TrainConfig, recorded
from . import events
from .atomic import clean_temporaries
from .checkpoints import checkpoint_problem, load_checkpoint
from .outputs import check_run_folder
from .provenance import cpu_difference, kernel_difference, provenance_problem
from .reading import read_json

RUN_FILES = (
    "config.json",
    "environment.json",
    "metrics.jsonl",
    "evals.jsonl",
    "checkpoint.pt",
    "best.pt",
    "test_samples.csv",
    "test_summary.csv",
)
# Settings that change neither the training nor its results: where a run lives and how it is run.
PLACE_AND_PACE = ("out", "overwrite", "device", "checkpoint_every", "prefetch", "same_kernels")
# A resumed run may also change the kernels (threads, compile, the attention kernel: they change the
# floating-point sums, so a finished run's results, but not what it trains) and what only the final
# test reads.
RESUMABLE = PLACE_AND_PACE + ("threads", "compile", "attention", "test_samples")
# Settings added after runs were published, with the value every earlier run had: a record
# without them trained with that value.
ADDED_SINCE = {"text_bpe": "corpus", "loss_reference": "text", "numerics": "native", "tf32": True}


def prepare(cfg: TrainConfig, resume: bool, rank: int) -> tuple[Path, dict | None]:
    """The run directory, checked before anything in it is touched: a resume needs a checkpoint of
    the same configuration (returned, loaded); a new run never silently replaces an old one. Only
    then are the temporaries a killed atomic write left removed (the caller holds the folder's lock)."""
    out = Path(cfg.run.out)
    check_run_folder(out, RUN_FILES)
    existing = [name for name in RUN_FILES if (out / name).exists()]
    if resume and not (out / "checkpoint.pt").exists():
        raise FileNotFoundError(
            f"--resume: there is no {out / 'checkpoint.pt'} to continue from; start the run "
            "without --resume" + (f" (add --overwrite to replace {existing})" if existing else "")
        )
    if not resume and existing and not cfg.run.overwrite:
        raise FileExistsError(
            f"{out} already holds a run ({', '.join(existing)}): pass --resume to continue "
            "it, --overwrite to replace it, or choose a new --out"
        )
    ckpt = None
    if resume:
        ckpt = load_checkpoint(out / "checkpoint.pt")
        why = checkpoint_problem(ckpt)
        if why:
            raise ValueError(
                f"--resume: {out / 'checkpoint.pt'} is not a checkpoint this workbench wrote ({why}); "
                "start the run again with --overwrite"
            )
        differ = config_differences(ckpt["config"], cfg, ignore=RESUMABLE)
        if differ:
            raise ValueError(
                f"--resume: {out} was trained with another configuration ({differ}); resume with "
                "those values, or start a new run (--overwrite or another --out)"
            )
        # the machine: a record of it the resume can trust, then whether it is this one
        why, differ = provenance_problem(cfg, ckpt), kernel_difference(cfg) or cpu_difference(cfg)
        if differ and not why:
            why = f"{out} was made on another machine ({differ})"
        if why:
            raise ValueError(
                f"--resume: {why}; --no-same-kernels resumes it anyway (its numbers then retrace on no one "
                "machine), or start a new run (--overwrite or another --out)"
            )
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        clean_temporaries(out, RUN_FILES)
        if not resume:
            for name in existing:
                (out / name).unlink()
            events.remove(out)
    return out, ckpt


def finished(cfg: TrainConfig) -> bool:
    """cfg.run.out holds a finished run (its test summary is the last thing training writes)."""
    return (Path(cfg.run.out) / "test_summary.csv").exists()


def recorded_differences(cfg: TrainConfig) -> str:
    """The settings that change results in which the run recorded in cfg.run.out (config.json)
    differs from `cfg`; "" when it is this run."""
    path = Path(cfg.run.out) / "config.json"
    try:  # bounded, regular files only: a plan reads every run's record, crafted ones included
        record = read_json(path)
    except (OSError, ValueError):
        return f"no readable {path}"
    return config_differences(record if isinstance(record, dict) else {}, cfg) or kernel_difference(cfg)


def resumable(cfg: TrainConfig) -> bool:
    """cfg.run.out holds a checkpoint of this configuration (the settings a resume may change aside)."""
    path = Path(cfg.run.out) / "checkpoint.pt"
    try:
        if not path.exists():
            return False
        ckpt = load_checkpoint(path)
        return not checkpoint_problem(ckpt) and not config_differences(ckpt["config"], cfg, RESUMABLE)
    except ValueError:  # a corrupt checkpoint: not one to continue from
        return False


def config_differences(record: dict, cfg: TrainConfig, ignore=PLACE_AND_PACE) -> str:
    """The settings in which a recorded configuration differs from `cfg` ("" if none), those in
    `ignore` aside: "seed: 1 (recorded) vs 2; tasks: ...". A setting the record lacks differs,
    unless it came later (ADDED_SINCE) and `cfg` has the value every earlier run had."""
    record = {**ADDED_SINCE, **record}
    now, missing = recorded(cfg), object()
    keys = [k for k in now if k not in ignore and record.get(k, missing) != now[k]]
    shown = [
        f"{k}: {record[k]!r} (recorded) vs {now[k]!r}" if k in record else f"{k}: not recorded vs {now[k]!r}"
        for k in keys[:6]
    ]
    return "; ".join(shown) + (f"; and {len(keys) - 6} more" if len(keys) > 6 else "")


def fresh_run_dir(root="runs", prefix="train") -> Path:
    """A new run directory for a run started without --out: ROOT/PREFIX-DATE-TIME, made at once
    (-2, -3, ... when two runs start in the same second). Under torchrun every rank must name the
    same one: ROOT/PREFIX-<the rendezvous id>, which torchrun --standalone makes unique per launch."""
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
        if run_id in ("", "none"):
            raise ValueError(
                "under torchrun without --standalone the ranks cannot agree on a new run directory: name one with --out"
            )
        return Path(root) / f"{prefix}-{run_id[:8]}"
    base = Path(root) / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    Path(root).mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()  # exclusive: two runs started at once never share a folder
            return path
        except FileExistsError:
            continue
    raise OSError(f"no free run directory {base}-N in {root}: name one with --out")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while a run trained: the step it reached and the checkpoint's (None before the first
    one), for `main`'s one line on how to resume."""

    def __init__(self, out: Path, step: int, total: int, checkpoint: int | None):
        super().__init__(f"interrupted at step {step} of {total}")
        self.out, self.step, self.total, self.checkpoint = out, step, total, checkpoint


def resume_command(argv: list[str], out, flag: str = "--resume") -> str:
    """The command line that continues this run: the same flags (a resume needs the same
    configuration), its run directory named, and --resume (or `flag`)."""
    argv = [a for a in argv if a not in ("--resume", "--overwrite")]
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", str(out)]
    world = int(os.environ.get("WORLD_SIZE", 1))
    launcher = f"torchrun --nproc_per_node {os.environ.get('LOCAL_WORLD_SIZE', world)}" if world > 1 else "python"
    return f"{launcher} -m workbench.train {shlex.join(argv + [flag])}"


def stop_line(stop: KeyboardInterrupt, argv: list[str], out) -> str:
    """Ctrl-C's one line: where the run stopped and how to go on."""
    if not isinstance(stop, Interrupted):  # before training began
        again = resume_command(argv, out) if (Path(out) / "checkpoint.pt").exists() else None
        return "interrupted before training began" + (f"; resume with: {again}" if again else "")
    where = f"interrupted at step {stop.step} of {stop.total}"
    if stop.checkpoint is None:
        return (
            f"{where}, before its first checkpoint (--checkpoint-every): nothing to resume; start again "
            f"with: {resume_command(argv, stop.out, '--overwrite')}"
        )
    return f"{where}; resume from the checkpoint of step {stop.checkpoint} with: {resume_command(argv, stop.out)}"
