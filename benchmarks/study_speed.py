"""A Study 1 run's time before and after: the same runs of workbench.study's plan trained by the
code of a baseline git revision and by this working tree, alternately, one thread each, and
checked to retrace bit for bit.

    python benchmarks/study_speed.py --baseline 8cd1135 [--current REV] [--runs NAME ...] [--repeats 2] [--tokens 1e6]
                                     [--out /tmp/study-speed]
    python benchmarks/study_speed.py --set compile=true      # a flag's cost and drift, same code

Each run trains in a fresh process (as a study worker would, imports not counted): baseline,
current, baseline, current ... so that the machine's load hits both alike. Prints per run the
median wall time and CPU time of `train()` of each side and their ratio (baseline / current: above
1 is faster), each side's test score and exact-match share (the last training's), then whether the
two sides wrote the same results: every row of metrics.jsonl and evals.jsonl (but its "time"),
test_samples.csv and test_summary.csv (but train_seconds).

`--set NAME=VALUE` (TrainConfig settings, VALUE read as JSON where it parses: true, 2, "x") trains
the current side with those settings: with no --baseline both sides are the same code, so the
table is that setting's cost in time and its drift in scores (a setting that changes rounding,
such as compile, cannot retrace).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from workbench.cli import key_values
from workbench.config import OWNER, TOP
from workbench.runs.outputs import output_path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUNS = [
    f"precision-{task}-d2-{encoding}-seed0"
    for task in ("multiplication", "division")
    for encoding in ("bittokens", "single_digit")
]
# the child: one run of the study's plan, timed around train() only
CHILD = """
import json, sys, time
from dataclasses import replace
from workbench import study
try:
    from workbench.training.train import train
except ImportError:  # a baseline from before the floors of issue 62
    from workbench.train import train
run = {r.name: r for r in study.plan(study.PARTS)}[sys.argv[1]]
wall, cpu = time.perf_counter(), time.process_time()
settings = dict(out=sys.argv[2], overwrite=True, **json.loads(sys.argv[3]))
# code from before the grouped settings (config.TrainConfig.updated) takes them flat
train(run.config.updated(**settings) if hasattr(run.config, "updated") else replace(run.config, **settings))
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))
"""


def export(revision: str, into: Path) -> Path:
    """The tracked files of `revision` in `into` (git archive)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def train_once(tree: Path, name: str, out: Path, settings: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(out), json.dumps(settings)],
        env=env,
        cwd=out.parent,
        text=True,
        capture_output=True,
    )
    if done.returncode:
        raise SystemExit(f"{name} failed with the code in {tree}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def results(run_dir: Path) -> dict:
    """What a retraced run must reproduce: the logs without clock times, the test tables without
    train_seconds."""

    def rows(name):
        return [
            {k: v for k, v in json.loads(line).items() if k != "time"}
            for line in (run_dir / name).read_text().splitlines()
            if line.strip()
        ]

    summary = pd.read_csv(run_dir / "test_summary.csv").drop(columns="train_seconds")
    return {
        "metrics.jsonl": rows("metrics.jsonl"),
        "evals.jsonl": rows("evals.jsonl"),
        "test_samples.csv": (run_dir / "test_samples.csv").read_bytes(),
        "test_summary.csv": summary.to_csv(),
    }


def parse_settings(pairs: list[str]) -> dict:
    """NAME=VALUE pairs as TrainConfig settings (VALUE as JSON where it parses, else the string)."""
    try:
        return key_values(pairs, "--set", names=set(TOP) | set(OWNER))
    except ValueError as error:
        raise SystemExit(str(error)) from None


def scores(run_dir: Path) -> tuple[float, float]:
    summary = pd.read_csv(run_dir / "test_summary.csv")
    return float(summary["score"].mean()), float(summary["exact"].mean()) if "exact" in summary else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline",
        default=None,
        help="git revision of the code before (e.g. main, 8cd1135; "
        "default: the same code as the current side, with --set)",
    )
    parser.add_argument("--current", default=None, help="git revision of the code after (default: the working tree)")
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="run names of workbench.study.plan")
    parser.add_argument("--repeats", type=int, default=2, help="trainings per run and side")
    parser.add_argument("--tokens", type=float, default=None, help="a smaller token budget (a quick check)")
    parser.add_argument("--out", default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="training settings of the current side only (e.g. compile=true)",
    )
    args = parser.parse_args()
    settings = parse_settings(args.set)
    if args.baseline is None and not settings:
        parser.error("give --baseline REV, or --set NAME=VALUE to compare a setting on the same code")
    tokens = {"tokens": args.tokens} if args.tokens else {}
    side_settings = {"baseline": tokens, "current": {**tokens, **settings}}
    try:
        out = output_path(args.out, "--out") if args.out else Path(tempfile.mkdtemp(prefix="study-speed-"))
    except ValueError as err:
        parser.error(str(err))
    out.mkdir(parents=True, exist_ok=True)
    current = export(args.current, out / "current-code") if args.current else ROOT
    sides = {"baseline": export(args.baseline, out / "baseline-code") if args.baseline else current, "current": current}
    print(
        f"baseline {args.baseline or 'the same code'} vs {args.current or f'the working tree {ROOT}'}"
        f"{' with ' + ' '.join(args.set) if args.set else ''}; one thread; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs; runs in {out}"
    )
    rows = []
    for name in args.runs:
        times = {side: [] for side in sides}
        for _repeat in range(args.repeats):
            for side, tree in sides.items():
                times[side].append(train_once(tree, name, out / f"{side}-{name}", side_settings[side]))
        before, after = results(out / f"baseline-{name}"), results(out / f"current-{name}")
        same = {part: before[part] == after[part] for part in after}
        median = {
            f"{side} {clock} s": statistics.median(t[clock] for t in ts)
            for side, ts in times.items()
            for clock in ("wall", "cpu")
        }
        score = {
            f"{side} {kind}": value
            for side in sides
            for kind, value in zip(("score", "exact"), scores(out / f"{side}-{name}"))
        }
        rows.append(
            {
                "run": name,
                **median,
                **score,
                "wall ratio": median["baseline wall s"] / median["current wall s"],
                "cpu ratio": median["baseline cpu s"] / median["current cpu s"],
                "identical": all(same.values()) or ", ".join(p for p, s in same.items() if not s),
            }
        )
        print(pd.DataFrame(rows[-1:]).to_string(index=False, float_format="{:.3f}".format), flush=True)
    table = pd.DataFrame(rows)
    print(
        f"\nmedians of {args.repeats} trainings per run and side (ratio: baseline / current, above 1 is faster); "
        f"load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(table.to_string(index=False, float_format="{:.3f}".format))
    print(
        f"median ratio over the runs: wall {table['wall ratio'].median():.2f}x, cpu {table['cpu ratio'].median():.2f}x; "
        f"every result identical: {bool((table['identical'] == True).all())}"  # noqa: E712
    )


if __name__ == "__main__":
    main()
