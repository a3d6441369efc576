"""The GPU sprint (issue 67; docs/study/study4.md, "Exploratory: the GPU sprint"): Study 4's runs of Study 3's
recipe and cpu-tiny model, K at a time on one lent GPU, to budgets a 2-core CPU cannot reach, in
leases of minutes that a bundle of files carries from one to the next.

    python benchmarks/gpu_sprint.py --dry-run                                  # the plan, its time, the files
    python benchmarks/gpu_sprint.py --time-limit 400 --bundle $OUT             # the first lease
    python benchmarks/gpu_sprint.py --from-bundle B --time-limit 400 --bundle $OUT --rule-rate R   # the next ones
    python benchmarks/gpu_sprint.py --from-bundle B --restore-only --out runs/gpu_sprint           # back here

What one lease does: every run of the plan not finished in --out trains (runs with a checkpoint
first, so that no more than K are ever half done), K at a time; at --time-limit seconds after the
command began the plan gets SIGTERM, its workers are ended, and each run keeps its last checkpoint
(written whole, every --checkpoint-every steps). Then, whether the plan finished or was stopped:
per run this lease's steps/s and tokens/s, and the aggregate tokens/s over the plan's whole time
(set-up included), printed and appended to OUT/gpu-sprint-throughput.csv; each run's
OUT/<run>/leases.jsonl gets one line (device, commit, command, steps); OUT/gpu-study.csv holds
Study 3's rows of every finished run (its schema, plus the device, commit and command); and with
--bundle DIR the runs are packed (benchmarks/_sprint_bundle.py) into DIR as at most 8 files of at
most 16 MiB, 64 MiB in all:

    sprint-manifest.json       what is where: parts, their SHA-256, each run's state, this lease's speeds
    sprint-resume-NN.tar.gz    what the next lease needs: every run in flight (checkpoint.pt, best.pt, logs)
                               and a stub of every finished run (its settings and test summary)
    sprint-done-NN.tar.gz      what stays here: each run finished in this lease whole (best.pt, the
                               test answers, the logs), for scoring on other questions on a CPU

Each part is a gzipped tar of whole runs, readable alone. Parts beyond the limits are written to
OUT/bundle-overflow/ on the machine, named in the output, for a second call to fetch. The step logs
travel thinned to 2,000 rows (the first and last kept). Pools never travel: a 1M-question pool is
136 MB (BitTokens) to 620 MB (single digit) of arrays, and is built again by each run at its start or
resume (~70 s on one core here).

`--from-bundle DIR` restores the run folders of a bundle into --out before anything else (a run
already as far or further in --out is kept; the same state gains only the files it lacks), so the
same command resumes them; with `--restore-only` it stops there: back on a CPU, the finished runs
are then scored on the authors' and reasoning-gym's questions by the study's own command
(`python -m workbench.experiments study --studies study4_gpu --out OUT --score-official DATA`,
`... --score-generator`).

Why K worker processes of the study's executor (`run_all(..., jobs=K)`, each training one run at a
time with --device cuda) and not one process training a stack of models: every run is then the
tested `train()` of the recipe, with its own curricula, balancer, evaluations, checkpoints and
resume, failing alone; a stacked trainer would rewrite all of that per model and its runs would no
longer be Study 3's. The cost: each process holds a CUDA context (~0.5 GB) and the GPU time-slices
between processes instead of running their kernels at once; a cpu-tiny step is a few hundred small
kernels launched from Python, so one process leaves the GPU mostly idle and K of them fill the gaps.
K is bounded by what travels, not by the GPU: the K runs in flight at a lease's end come back as
~10.4 MB each (checkpoint.pt 9.6 MB raw, 6.9 MB gzipped, with Muon's and Adam's states; best.pt
3.7 MB, 3.4 MB gzipped) and go out again beside the repository (19 MB) in the next lease's 64 MiB,
so the default is K = 4.

Numerics: float32 with TF32 off (`--no-tf32`, the part's setting), so that the GPU computes what a
CPU would; the GPU still orders its sums otherwise (cuBLAS, atomics in some backward kernels), so a
GPU run does not retrace its CPU twin. The plan's first two runs are Study 4's 1M cell of
multiplication at d = 15, seed 0, whose CPU runs exist (study4_1M-...-seed0): the difference between
the two is measured there (`--compare-cpu`).
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import json
import os
import shlex
import signal
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._sprint_bundle import (  # noqa: E402
    BUNDLE_BYTES,
    BUNDLE_FILES,
    LEASES,
    MANIFEST,
    OVERFLOW,
    PART_BYTES,
    ROWS_FILE,
    SPEED_FILE,
    MiB,
    _plain,
    restore,
    state,
    steps_of,
    write_bundle,
)
from workbench.runs.atomic import write_atomic  # noqa: E402
from workbench.runs.executors import RunsFailed, Terminated, run_all  # noqa: E402
from workbench.runs.locks import InUse, hold  # noqa: E402
from workbench.runs.outputs import output_path  # noqa: E402
from workbench.study.parts import (  # noqa: E402
    GPU_LEASE_SECONDS,
    GPU_LEASES,
    GPU_LEVELS,
    Run,
    budget_label,
    gpu_levels,
    gpu_plan,
    select,
)
from workbench.study.run import collect  # noqa: E402

clock = time.monotonic  # the time limit's clock (the tests move it)

CARRY_BYTES = 44 * MiB  # what goes out to the next lease beside the repository (19 MB of a call's 64 MiB)

# What the dry run assumes until a lease measures it. On this 2-core CPU, Study 3's 10M runs trained
# ~10,000 tokens/s each (921-1,259 s, two side by side, one core each). On a GPU a cpu-tiny step is a
# few hundred small kernels launched from Python: a guess of 5x that per process, with K processes
# sharing the GPU. Not measured on a GPU: --rate replaces it, and the first lease's CSV measures it.
CPU_RATE, GPU_GUESS = 10_000, 5
POOL_SECONDS = 70  # building and tokenizing a 1M-question pool, one core of this CPU (measured: the docs)
START_SECONDS = 30  # the command's own imports and the workers' CUDA start (assumed)
# per run, gzipped, measured on a cpu-tiny run (0.93M parameters): checkpoint.pt + best.pt + logs,
# and best.pt + the test answers and logs of a finished run
IN_FLIGHT_BYTES, DONE_BYTES = 10.6e6, 3.6e6


def parser() -> argparse.ArgumentParser:
    import torch

    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--out", default="runs/gpu_sprint", help="the run folders, the rows and the throughput")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda or cpu")
    p.add_argument("--jobs", type=int, default=4, help="runs trained at once (K worker processes)")
    p.add_argument("--time-limit", type=float, help="seconds after the start at which the plan is stopped")
    p.add_argument("--bundle", help="write the runs into this folder as at most 8 files (sprint-*)")
    p.add_argument("--from-bundle", help="first restore the run folders of a returned bundle into --out")
    p.add_argument("--restore-only", action="store_true", help="with --from-bundle: restore, then stop")
    p.add_argument("--dry-run", action="store_true", help="print the plan, its time and the files; train nothing")
    p.add_argument(
        "--rate",
        type=float,
        default=CPU_RATE * GPU_GUESS,
        help="the dry run's tokens/s per run with K runs sharing the device (an assumption until measured)",
    )
    p.add_argument(
        "--rule-rate",
        type=float,
        help="train the levels that the registered rule (study.parts.gpu_levels) admits at this aggregate "
        "tokens/s, the first lease's; default: the numerics check and the first level only",
    )
    p.add_argument("--checkpoint-every", type=int, default=500, help="steps between checkpoints (what a stop loses)")
    p.add_argument(
        "--same-kernels",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="refuse to resume a run begun on another GPU model (--no-same-kernels: resume it; leases.jsonl keeps each lease's device)",
    )
    p.add_argument("--compare-cpu", nargs=2, metavar=("GPU_RUN", "CPU_RUN"), help="compare two run folders and stop")
    selection = p.add_argument_group("which runs (default: every run of the levels)")
    selection.add_argument("--budgets", nargs="+", metavar="TOKENS", help="e.g. 1M 30M")
    selection.add_argument("--tasks", nargs="+", metavar="TASK")
    selection.add_argument("--digits", nargs="+", type=int, metavar="D")
    selection.add_argument("--encodings", nargs="+", metavar="ENCODING")
    selection.add_argument("--seeds", nargs="+", type=int, metavar="SEED")
    trial = p.add_argument_group(
        "trial sizes (the CPU dry run): any of these makes the runs trials, named trial-gpu_..., never the registered ones"
    )
    for flag, kind in (
        ("tokens", float),
        ("pool-size", int),
        ("val-samples", int),
        ("test-samples", int),
        ("eval-every", int),
        ("batch-size", int),
    ):
        trial.add_argument(f"--{flag}", type=kind)
    return p


TRIAL = ("tokens", "pool_size", "val_samples", "test_samples", "eval_every", "batch_size")


def _tokens(text: str) -> float:
    return float(text[:-1]) * 1e6 if text.upper().endswith("M") else float(text)


def sprint_runs(args) -> list[Run]:
    """The runs of this command: the numerics check and the levels (the rule's at --rule-rate, else
    the first), narrowed by the selection flags, at --device; with trial sizes, renamed trials."""
    levels = gpu_levels(args.rule_rate) if args.rule_rate else [GPU_LEVELS[0]]
    runs = select(
        gpu_plan(levels),
        encodings=args.encodings,
        seeds=args.seeds,
        tasks_=args.tasks,
        digits=args.digits,
        budgets=[_tokens(b) for b in args.budgets] if args.budgets else None,
    )
    sizes = {k: getattr(args, k) for k in TRIAL if getattr(args, k) is not None}
    place = dict(device=args.device, checkpoint_every=args.checkpoint_every, same_kernels=args.same_kernels)
    return [
        replace(r, study=f"trial-{r.study}" if sizes else r.study, config=r.config.updated(**sizes, **place))
        for r in runs
    ]


# -- the time limit ------------------------------------------------------------------------------
class TimeLimit:
    """SIGTERM to this process once `clock()` passes the deadline: the plan stops as a scheduler's
    SIGTERM stops it (executors.Terminated: the workers ended, each run keeping its checkpoint)."""

    def __init__(self, deadline: float | None):
        self.deadline, self.fired, self.done = deadline, threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self.done.wait(0.2):
            if clock() >= self.deadline:
                self.fired.set()
                os.kill(os.getpid(), signal.SIGTERM)
                return

    def __enter__(self):
        def stop(signum, frame):
            raise Terminated(f"signal {signum}")

        self.previous = signal.signal(signal.SIGTERM, stop)
        if self.deadline is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        # a SIGTERM from now on must not cut the rows or the bundle in half: they are written whole
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return False

    def restore(self):
        signal.signal(signal.SIGTERM, self.previous)


# -- what a lease measured -----------------------------------------------------------------------
def _steps_logged(folder: Path) -> list[dict]:
    path = folder / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a line cut short by the stop
            pass
    return rows


def throughput(runs: list[Run], out: Path, before: dict, plan_seconds: float, lease: dict) -> pd.DataFrame:
    """Per run this lease's steps, steps/s and tokens/s (the runs' own clocks: training and its
    evaluations, not the set-up), and an aggregate row: every run's tokens over the plan's seconds."""
    rows = []
    for r in runs:
        _, start, start_seconds = before[r.name]
        if start < 0:  # finished before this lease
            continue
        logged = [row for row in _steps_logged(out / r.name) if row.get("step", 0) > start]
        if not logged:
            continue
        last = logged[-1]
        steps, per = last["step"] - start, steps_of(r.config)[1]
        seconds = max(last["time"] - start_seconds, 1e-9)
        now, step_now, _ = state(out / r.name)
        rows.append(
            dict(
                lease=lease["started"],
                device=lease["device"],
                run=r.name,
                study=r.study,
                encoding=r.encoding,
                task=r.task,
                digits=r.digits,
                seed=r.seed,
                from_step=start,
                to_step=last["step"],
                checkpoint_step=steps_of(r.config)[0] if now == "finished" else step_now,
                total_steps=steps_of(r.config)[0],
                finished=now == "finished",
                steps=steps,
                tokens=steps * per,
                seconds=seconds,
                steps_per_s=steps / seconds,
                tokens_per_s=steps * per / seconds,
            )
        )
    table = pd.DataFrame(rows)
    if len(table):
        whole = dict(
            lease=lease["started"],
            device=lease["device"],
            run="(all)",
            jobs=lease["jobs"],
            steps=int(table.steps.sum()),
            tokens=int(table.tokens.sum()),
            seconds=plan_seconds,
            steps_per_s=table.steps.sum() / plan_seconds,
            tokens_per_s=table.tokens.sum() / plan_seconds,
        )
        table = pd.concat([table, pd.DataFrame([whole])], ignore_index=True)
    return table


def record_lease(runs: list[Run], out: Path, speeds: pd.DataFrame, lease: dict) -> None:
    """One line in each run's leases.jsonl that trained in this lease: where, from what, how far."""
    for row in speeds[speeds.run != "(all)"].to_dict("records"):
        path = out / row["run"] / LEASES
        line = {k: lease[k] for k in ("started", "device", "commit", "command")} | {
            k: row[k] for k in ("from_step", "to_step", "checkpoint_step", "total_steps", "finished", "tokens_per_s")
        }
        old = path.read_text() if path.is_file() else ""
        write_atomic(path, lambda tmp, text=old + json.dumps(line, default=_plain) + "\n": Path(tmp).write_text(text))


def _leases(folder: Path) -> list[dict]:
    path = folder / LEASES
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def sprint_rows(runs: list[Run], out: Path) -> pd.DataFrame:
    """Study 3's rows (study.run.collect) of every finished run of the plan whose recorded settings
    are the plan's, with the devices and commits of its leases and the last lease's command."""
    from workbench.runs.folder import config_differences

    done = []
    for r in runs:
        folder = out / r.name
        if (folder / "test_summary.csv").is_file():
            record = json.loads((folder / "config.json").read_text())
            if not config_differences(record, r.config):
                done.append(r)
    table = collect(done, out)
    if table.empty:
        return table
    provenance = {}
    for r in done:
        leases = _leases(out / r.name)
        environment = json.loads((out / r.name / "environment.json").read_text())
        provenance[r.name] = dict(
            device=" + ".join(dict.fromkeys(x["device"] for x in leases)) or environment.get("kernels"),
            commit=" + ".join(dict.fromkeys(str(x["commit"]) for x in leases)) or environment.get("workbench_commit"),
            command=leases[-1]["command"] if leases else "",
        )
    names = {(r.study, r.encoding, r.task, r.digits, r.seed): r.name for r in done}
    keys = zip(table.study, table.encoding, table.task, table.digits, table.seed)
    extra = pd.DataFrame([provenance[names[k]] for k in keys], index=table.index)
    return pd.concat([table, extra], axis=1)


# -- the dry run ---------------------------------------------------------------------------------
def _schedule(lengths: list[float], jobs: int, limit: float | None) -> tuple[float, int, int]:
    """(seconds until the last run ends, runs finished by `limit`, runs in flight at `limit`) of
    runs of `lengths` seconds taken in order by `jobs` workers."""
    free = [0.0] * max(1, jobs)
    ends = []
    for length in lengths:
        begin = heapq.heappop(free)
        ends.append((begin, begin + length))
        heapq.heappush(free, begin + length)
    last = max((e for _, e in ends), default=0.0)
    if limit is None:
        return last, len(ends), 0
    return last, sum(e <= limit for _, e in ends), sum(b < limit < e for b, e in ends)


def dry_run(runs: list[Run], out: Path, args) -> str:
    rows, left_tokens, lengths = [], 0.0, []
    counts = {"finished": 0, "in flight": 0, "to train": 0}
    for r in runs:
        now, step, _ = state(out / r.name)
        counts[now] += 1
        total, per = steps_of(r.config)
        left = 0 if now == "finished" else (total - step) * per
        left_tokens += left
        if left:
            lengths.append(POOL_SECONDS + left / args.rate)
        rows.append((r.study, r.task, r.digits))
    levels = pd.Series(rows).value_counts(sort=False)
    limit = args.time_limit - START_SECONDS if args.time_limit else None
    last, finished, flying = _schedule(lengths, args.jobs, limit)
    aggregate = args.rate * args.jobs
    lines = [
        f"gpu sprint: {len(runs)} runs in {out} on {args.device}, {args.jobs} at a time"
        + ("" if out.is_dir() else " (a folder not made yet)"),
        *[f"  {study} {task} d = {digits}: {n} runs" for (study, task, digits), n in levels.items()],
        f"  finished {counts['finished']}, in flight {counts['in flight']} (resumed first), to train {counts['to train']}",
        f"tokens to train: {left_tokens / 1e6:,.1f}M",
        f"assumed speed: {args.rate:,.0f} tokens/s per run with {args.jobs} sharing the device, {aggregate:,.0f} in all "
        f"(--rate; an assumption, not measured on a GPU: {CPU_RATE:,} tokens/s per run on a CPU core here x {GPU_GUESS}); "
        f"each run started or resumed first builds its pool: {POOL_SECONDS} s (measured on one core here)",
        f"estimated: {last / 60:,.1f} min of plan time for all of it ({len(lengths)} runs, the longest "
        f"{max(lengths, default=0) / 60:,.1f} min)",
    ]
    if limit is not None:
        lines.append(
            f"with --time-limit {args.time_limit:g} s ({START_SECONDS} s of it assumed for the start): ~{finished} runs "
            f"finish, ~{flying} in flight at the stop, resumable by the next lease"
        )
    else:
        flying, finished = 0, len(lengths)
    resume, done = flying * IN_FLIGHT_BYTES + counts["finished"] * 4e3, finished * DONE_BYTES
    lines += [
        f"files back (--bundle DIR): {MANIFEST}; sprint-resume-NN.tar.gz ~{resume / MiB:,.1f} MiB ({flying} runs in "
        f"flight x {IN_FLIGHT_BYTES / 1e6:.1f} MB, stubs of the finished); sprint-done-NN.tar.gz "
        f"~{done / MiB:,.1f} MiB ({finished} runs x {DONE_BYTES / 1e6:.1f} MB); at most {BUNDLE_FILES} files of "
        f"{PART_BYTES // MiB} MiB, {BUNDLE_BYTES // MiB} MiB in all, the rest in OUT/{OVERFLOW}",
    ]
    if resume > CARRY_BYTES:
        lines.append(
            f"  warning: the resume parts exceed {CARRY_BYTES // MiB} MiB, what travels to the next lease beside the "
            "repository: use fewer --jobs"
        )
    taken = gpu_levels(aggregate)
    lines.append(
        f"the registered rule at {aggregate:,.0f} tokens/s ({GPU_LEASES} leases x {GPU_LEASE_SECONDS} s): "
        + "; ".join(f"{budget_label(b)} at d = {', '.join(map(str, d))}" for b, d in taken)
    )
    lines.append("nothing was trained or written (--dry-run)")
    return "\n".join(lines)


def compare(gpu: Path, cpu: Path) -> str:
    """Two runs of one configuration made on two devices: the step losses, the evaluations and the
    test scores side by side (a kept run's .gz files are read too)."""

    def jsonl(folder: Path, name: str) -> pd.DataFrame:
        path = folder / name
        text = path.read_text() if path.is_file() else gzip.open(f"{path}.gz", "rt").read()
        return pd.DataFrame([json.loads(line) for line in text.splitlines() if line.strip()])

    def test(folder: Path) -> pd.DataFrame:
        path = folder / "test_samples.csv"
        return pd.read_csv(path if path.is_file() else f"{path}.gz")

    steps = jsonl(gpu, "metrics.jsonl").merge(jsonl(cpu, "metrics.jsonl"), on="step", suffixes=("_gpu", "_cpu"))
    loss = (steps.loss_gpu - steps.loss_cpu).abs()
    evals = jsonl(gpu, "evals.jsonl").merge(jsonl(cpu, "evals.jsonl"), on="step", suffixes=("_gpu", "_cpu"))
    score = (evals.harmonic_mean_gpu - evals.harmonic_mean_cpu).abs()
    a, b = test(gpu), test(cpu)
    return "\n".join(
        [
            f"{gpu.name} (gpu) against {cpu.name} (cpu): {len(steps)} common logged steps",
            f"  loss |difference|: step {int(steps.step.iloc[0])} {loss.iloc[0]:.3g}, median {loss.median():.3g}, "
            f"largest {loss.max():.3g}",
            f"  validation score |difference| over {len(evals)} evaluations: median {score.median():.3g}, "
            f"largest {score.max():.3g}",
            f"  test log-sMAPE: gpu {a.score.mean():.4f}, cpu {b.score.mean():.4f}, difference "
            f"{a.score.mean() - b.score.mean():+.4f}; answers that differ {(a.prediction.astype(str) != b.prediction.astype(str)).mean():.3f}",
        ]
    )


# -- the command ---------------------------------------------------------------------------------
def _lease(args, argv: list[str]) -> dict:
    import torch

    from workbench.runs.provenance import _commit, cpu_model

    device = torch.device(args.device)
    return dict(
        started=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu: {cpu_model()}",
        commit=_commit(),
        command=shlex.join(["python", "benchmarks/gpu_sprint.py", *argv]),
        jobs=args.jobs,
    )


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    begun = clock()
    p = parser()
    args = p.parse_args(argv)
    if args.compare_cpu:
        print(compare(*map(Path, args.compare_cpu)))
        return 0
    if args.jobs < 1:
        p.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.restore_only and not args.from_bundle:
        p.error("--restore-only restores a bundle: name it with --from-bundle")
    try:
        out = output_path(args.out, "--out")
        dest = output_path(args.bundle, "--bundle") if args.bundle else None
        runs = sprint_runs(args)
    except ValueError as err:
        p.error(str(err))
    if args.dry_run:
        print(dry_run(runs, out, args))
        return 0
    trial = any(getattr(args, k) is not None for k in TRIAL)
    if not (trial or args.restore_only or args.device.startswith("cuda")):
        # a registered gpu_* run trained on a CPU would be a CPU run under a GPU study's name
        p.error(
            f"the sprint's registered runs train on a GPU, not on --device {args.device} (trial sizes, --tokens ..., run anywhere)"
        )
    try:
        with hold(out):
            return _lease_of(args, argv, begun, out, dest, runs)
    except (ValueError, OSError, InUse) as err:
        print(f"gpu_sprint: {err}", file=sys.stderr)
        return 2


def _lease_of(args, argv, begun, out: Path, dest: Path | None, runs: list[Run]) -> int:
    if args.from_bundle:
        for line in restore(Path(args.from_bundle), out):
            print(f"restored {line}")
    if args.restore_only:  # back here: the rows of every finished run, for a look before scoring
        rows = sprint_rows(runs, out)
        write_atomic(out / ROWS_FILE, lambda tmp: rows.to_csv(tmp, index=False))
        return 0
    lease = _lease(args, argv)
    before = {r.name: state(out / r.name) for r in runs}
    flying = [r for r in runs if before[r.name][0] == "in flight"]  # first: never more than K half done
    todo = {r.name: r.config for r in flying + [r for r in runs if before[r.name][0] == "to train"]}
    print(
        f"gpu sprint on {lease['device']} at {lease['commit']}: {len(todo)} of {len(runs)} runs to train "
        f"({len(flying)} resumed), {args.jobs} at a time"
        + (f", stopped at {args.time_limit:g} s" if args.time_limit else ""),
        flush=True,
    )
    limit = TimeLimit(begun + args.time_limit if args.time_limit else None)
    stopped, failed, started = None, None, time.time()
    try:
        with limit:
            try:
                run_all(todo, out, jobs=args.jobs, desc="gpu sprint")
            except RunsFailed as err:
                failed = err
            except KeyboardInterrupt as stop:  # the time limit, a SIGTERM or Ctrl-C: the workers are ended
                stopped = "time limit" if limit.fired.is_set() else type(stop).__name__
        plan_seconds = time.time() - started
        speeds = throughput(runs, out, before, plan_seconds, lease)
        if len(speeds):
            record_lease(runs, out, speeds, lease)
            old = pd.read_csv(out / SPEED_FILE) if (out / SPEED_FILE).is_file() else pd.DataFrame()
            table = pd.concat([old, speeds], ignore_index=True)
            write_atomic(out / SPEED_FILE, lambda tmp: table.to_csv(tmp, index=False))
            shown = ["run", "from_step", "to_step", "checkpoint_step", "total_steps", "steps_per_s", "tokens_per_s"]
            print(speeds[shown].round(1).to_string(index=False))
        rows = sprint_rows(runs, out)
        write_atomic(out / ROWS_FILE, lambda tmp: rows.to_csv(tmp, index=False))
        if len(rows):
            print(
                rows[rows.metric == "log_smape"][["study", "encoding", "task", "digits", "seed", "score"]].to_string(
                    index=False
                )
            )
        if dest is not None:
            manifest = write_bundle(runs, out, dest, before, lease)
            for part in manifest["parts"]:
                print(
                    f"bundle: {part['file']} {part['bytes'] / MiB:.1f} MiB in {part['where']} ({len(part['runs'])} runs)"
                )
            if late := [p["file"] for p in manifest["parts"] if p["where"] != "bundle"]:
                print(
                    f"bundle: {len(late)} part(s) over the limits are in {out / OVERFLOW}: fetch them with a second call"
                )
    finally:
        limit.restore()
    states = pd.Series([state(out / r.name)[0] for r in runs]).value_counts().to_dict()
    print(f"gpu sprint: {states}" + (f"; stopped by {stopped}: run the same command to go on" if stopped else ""))
    if failed is not None:
        print(str(failed), file=sys.stderr)
        return 1
    if stopped in (None, "time limit"):
        return 0
    return 128 + (signal.SIGTERM if stopped in ("Terminated", "Interrupted") else signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main())
