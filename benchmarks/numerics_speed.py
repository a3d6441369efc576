"""What portable numerics cost: the same runs trained under --numerics portable and native, alternately.

    python benchmarks/numerics_speed.py [--repeats 3] [--steps 300] [--cases tiny small study]
                                        [--before DIR]

Each case trains in a fresh process (one thread), portable, native, portable, native ... so that the
machine's load hits both alike, and is timed per step from metrics.jsonl's clock (set-up excluded):
the median step time after the first 20 steps, then its median over repeats. Prints per case both
medians and their ratio (native / portable: 1.0 means no cost; the goal is >= 0.8), and the kernels
each side ran on. `--before DIR`, another checkout of the workbench (e.g. `git worktree add DIR
COMMIT`), times its portable runs in the same alternation, a third column: what a change did to
portable's speed, on the same load. Cases: `tiny` (the first run: cpu-tiny, addition), `small` (cpu-small, addition
and multiplication), `study` (a Study 1/3 run: cpu-tiny, multiplication at d = 4, BitTokens without
binary pools), `single_digit` (the same with single digit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "tiny": ["--tasks", "addition"],
    "small": ["--preset", "cpu-small", "--tasks", "addition,multiplication", "--max-digits", "2"],
    "study": ["--tasks", "multiplication", "--max-digits", "4", "--no-binary-pool"],
    "single_digit": ["--encoding", "single_digit", "--tasks", "multiplication", "--max-digits", "4"],
}
CLEAN = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES", "WORKBENCH_NUMERICS")


def step_time(case: str, mode: str, steps: int, out: Path, root: Path = ROOT) -> tuple[float, str]:
    """(median seconds per step after the first 20, the kernels) of one run of the checkout `root`."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN and not k.startswith("WORKBENCH_NUMERICS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "workbench.train", "--numerics", mode, "--threads", "1", *CASES[case]]
    command += ["--tokens", str(8 * 128 * steps), "--eval-every", str(10 * steps), "--pool-size", "20000"]
    command += ["--test-samples", "8", "--out", str(out), "--overwrite"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=root)
    if done.returncode:
        raise RuntimeError(f"{case} ({mode}) failed:\n{done.stderr[-2000:]}")
    clock = [json.loads(line)["time"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    environment = json.loads((out / "environment.json").read_text())
    kernels = (
        f"{environment['cpu_capability']}/MKL {environment.get('mkl_branch')}/GEMM {environment.get('gemm', 'mkl')}"
    )
    return statistics.median(b - a for a, b in zip(clock[20:], clock[21:])), kernels


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--before", metavar="DIR", help="another checkout whose portable runs are timed too")
    args = parser.parse_args(argv)
    sides = {"portable": ("portable", ROOT), "native": ("native", ROOT)}
    header = f"{'case':<13} {'portable ms':>11} {'native ms':>10} {'native/portable':>15}"
    if args.before:
        sides["before"] = ("portable", Path(args.before).resolve())
        header += f" {'before ms':>10} {'native/before':>13}"
    print(f"{header}  kernels ({' | '.join(sides)})")
    with tempfile.TemporaryDirectory() as scratch:
        for case in args.cases:
            times, kernels = {side: [] for side in sides}, {}
            for _ in range(args.repeats):
                for side, (mode, root) in sides.items():
                    seconds, kernels[side] = step_time(case, mode, args.steps, Path(scratch) / f"{case}-{side}", root)
                    times[side].append(seconds)
            ms = {side: 1e3 * statistics.median(times[side]) for side in sides}
            line = f"{case:<13} {ms['portable']:>11.2f} {ms['native']:>10.2f} {ms['native'] / ms['portable']:>15.2f}"
            if args.before:
                line += f" {ms['before']:>10.2f} {ms['native'] / ms['before']:>13.2f}"
            print(f"{line}  {' | '.join(kernels.values())}", flush=True)


if __name__ == "__main__":
    main()
