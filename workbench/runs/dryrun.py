"""What a plan of runs would do, without doing it (`python -m workbench.experiments ... --dry-run`):
how many runs, how many of them OUT already holds finished or resumable, the tokens left to train,
and an estimated time. Nothing is trained, written or made (not even OUT).

The estimate is the tokens left over a throughput, per run, summed, and shared by the runs that
train side by side (--jobs; a submitit executor's --array-parallelism; Slurm: every job at once).
The throughput of a model preset is measured where it can be: the median, over the plan's finished
runs of that preset in OUT, of their tokens over their train_seconds (which count the evaluations
and the final test too, as a run's time does). Where OUT has none, it is THROUGHPUT's figure for
the preset (docs/training.md, "Before a plan starts"), or no estimate for a preset without one.

What it reads is checked as it is read, since OUT can hold anything: a finished run's
train_seconds must be a finite number of seconds above 0 and --jobs a whole number from 1, or the
dry run stops with one line naming the file or flag (a negative time once printed "-200 s", a
NaN "nan s", an infinite one a ZeroDivisionError); a FIFO where a file should be is refused
without waiting on it, and a record nested too deep is read as no record.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .reading import read_text

# tokens per second of a whole run (evaluations and the final test included) on one core of a
# 2-core machine, two runs side by side: Study 1's runs (docs/training.md, "Before a plan starts")
THROUGHPUT = {"cpu-tiny": 7_300, "cpu-tiny-wide": 3_900}


@dataclass
class RunState:
    name: str
    preset: str
    tokens: float  # the run's budget
    state: str  # finished | other configuration | resumable | to train
    left: float  # tokens still to train
    seconds: float | None = None  # a finished run's train_seconds


def state_of(name: str, cfg, out: Path, overwrite: bool) -> RunState:
    """Where run `name` of the plan stands in OUT, read from its files (nothing is written)."""
    from . import checkpoints  # torch: imported when a plan is looked at, not when the command starts
    from . import folder as run_folder

    cfg = cfg.updated(out=str(out / name))
    run = RunState(name, cfg.model.preset, cfg.tokens, "to train", cfg.tokens)
    if run_folder.finished(cfg):
        if not run_folder.recorded_differences(cfg):
            return RunState(
                name, run.preset, cfg.tokens, "finished", 0.0, train_seconds(out / name / "test_summary.csv")
            )
        if not overwrite:
            run.state, run.left = "other configuration", 0.0
            return run
    path = out / name / "checkpoint.pt"
    if path.exists():
        try:
            ckpt = checkpoints.load_checkpoint(path)
        except ValueError:  # a corrupt checkpoint: the run starts over
            return run
        if not checkpoints.checkpoint_problem(ckpt) and not run_folder.config_differences(
            ckpt["config"], cfg, run_folder.RESUMABLE
        ):
            world = int(os.environ.get("WORLD_SIZE", 1))
            per_step = cfg.batch_size * cfg.model_config().block_size * world * cfg.accumulation(world)
            steps = max(1, math.ceil(cfg.tokens / per_step))
            run.state, run.left = "resumable", cfg.tokens * max(0, steps - ckpt["state"]["step"]) / steps
    return run


def train_seconds(path: Path) -> float | None:
    """A finished run's train_seconds (None where its summary has no such column: an older run),
    or a ValueError of one line naming the file: a time must be a finite number above 0."""
    try:
        summary = pd.read_csv(io.StringIO(read_text(path)))
    except (OSError, ValueError) as err:  # pandas' parse errors are ValueErrors
        raise ValueError(
            f"--dry-run: {path} is not a readable test summary: {' '.join(str(err).split())[:200]}"
        ) from None
    if "train_seconds" not in summary or not len(summary):
        return None
    value = summary["train_seconds"].iloc[0]
    seconds = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(
            f"--dry-run: {path} gives train_seconds {str(value)[:40]!r}, not the time of a run (a finite number of "
            "seconds above 0): the estimate would be meaningless; retrain that run (--overwrite) or move it out"
        )
    return float(seconds)


def throughputs(states: list[RunState]) -> dict[str, tuple[float, str]]:
    """{preset: (tokens per second, where the figure comes from)} for every preset of the plan that has one."""
    out = {}
    for preset in sorted({s.preset for s in states}):
        done = [s.tokens / s.seconds for s in states if s.preset == preset and s.state == "finished" and s.seconds]
        if done:
            speed = float(pd.Series(done).median())
            if not (math.isfinite(speed) and speed > 0):  # seconds of 1e-300 overflow the division
                raise ValueError(f"--dry-run: the finished runs of {preset} in OUT give {speed} tokens/s, not a speed")
            out[preset] = (speed, f"the median of {len(done)} finished run(s) in OUT")
        elif preset in THROUGHPUT:
            out[preset] = (float(THROUGHPUT[preset]), "workbench.runs.dryrun.THROUGHPUT")
    return out


def _hours(seconds: float) -> str:
    return (
        f"{seconds / 3600:.1f} h"
        if seconds >= 7200
        else f"{seconds / 60:.0f} min"
        if seconds >= 120
        else f"{seconds:.0f} s"
    )


def report(desc: str, runs: dict, out, jobs: int = 1, overwrite: bool = False, executor=None) -> str:
    """The dry run of plan `runs` ({name: TrainConfig}) into OUT, as printed."""
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"--jobs must be an integer >= 1, got {jobs!r}")
    out = Path(out)
    states = [state_of(name, cfg, out, overwrite) for name, cfg in runs.items()]
    count = {k: sum(s.state == k for s in states) for k in ("finished", "resumable", "to train", "other configuration")}
    total, left = sum(s.tokens for s in states), sum(s.left for s in states)
    lines = [
        f"{desc}: {len(states)} runs in {out}" + ("" if out.is_dir() else " (a folder not made yet)"),
        f"  finished before:   {count['finished']:>5} (read, not trained)",
        f"  resumable:         {count['resumable']:>5} (from their checkpoints)",
        f"  to train:          {count['to train']:>5}",
    ]
    if count["other configuration"]:
        lines.append(
            f"  finished with another configuration: {count['other configuration']} (refused unless "
            "--overwrite, which retrains them)"
        )
    lines.append(f"tokens to train: {left / 1e6:,.1f}M of the plan's {total / 1e6:,.1f}M")
    speeds = throughputs(states)
    pending = [s for s in states if s.left > 0]
    unknown = sorted({s.preset for s in pending if s.preset not in speeds})
    kind = executor.executor if executor is not None else "local"
    parallel = (
        len(pending)
        if kind == "slurm" and not executor.array_parallelism
        else (
            executor.array_parallelism
            if executor is not None and kind != "local" and executor.array_parallelism
            else jobs
        )
    )
    if unknown:
        lines.append(
            f"estimated time: none for preset(s) {', '.join(unknown)} (no finished run of theirs in {out} "
            "to measure, and no figure in workbench.runs.dryrun.THROUGHPUT)"
        )
    elif pending:
        seconds = [s.left / speeds[s.preset][0] for s in pending]
        wall = max(sum(seconds) / max(1, min(parallel, len(pending))), max(seconds))
        lines.append(
            f"estimated time: {_hours(sum(seconds))} of training, about {_hours(wall)} with "
            f"{min(parallel, len(pending))} run(s) side by side"
        )
        lines += [
            f"  {preset}: {speed:,.0f} tokens/s ({source})"
            for preset, (speed, source) in speeds.items()
            if any(s.preset == preset for s in pending)
        ]
    else:
        lines.append("estimated time: nothing left to train")
    lines.append("nothing was trained or written (--dry-run)")
    return "\n".join(lines)
