"""Answer parsing on hostile model outputs: seconds per response for both readings of
`workbench.frontier.answers` (paper_answer, parse_answer), at full size and at a tenth of it.

A reader that is linear in the response takes about 10x longer at 10x the size ("growth" column);
a quadratic one 100x. Each cell is the slowest of the task families (addition, minmax, sorting,
interval), median of `--repeats`. With `--against REV` the `parse_answer` of that git revision is
timed on the same full-size inputs, each in a subprocess cut off after `--timeout` seconds.

    python benchmarks/parse_answers.py [--repeats 3] [--against 7d2b8cb] [--timeout 60] [--scale 1]

`--scale` multiplies every input's full size (0.01: a quick check that the script runs).
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.frontier import answers

TASKS = ("addition", "minmax", "sorting", "interval")
# name -> (expression of n, n): the response text, built in this process and in the subprocess
INPUTS = {
    '"{" * n': ('"{" * n', 200_000),
    '"[" * n': ('"[" * n', 200_000),
    "digit run, 1 MB": ('"7" * n', 1_000_000),
    '{"answer": + 1 MB digits': ("'{\"answer\": ' + '7' * n", 1_000_000),
    "'\"' * n": ("'\"' * n", 200_000),
    '\'{"answer": "\' * n': ('\'{"answer": "\' * n', 50_000),
    "'\"answer\": [' * n": ("'\"answer\": [' * n", 50_000),
    '"<thought>" * n': ('"<thought>" * n', 50_000),
    '"answer is " * n': ('"answer is " * n', 50_000),
    '"\\\\boxed{" * n': ('"\\\\boxed{" * n', 50_000),
    '"```" * n': ('"```" * n', 50_000),
    '"1, " * n': ('"1, " * n', 200_000),
    '"1" + " " * n + "x"': ('"1" + " " * n + "x"', 200_000),
    '"{" * n + "}" * n': ('"{" * n + "}" * n', 100_000),
}


def slowest(read, text, repeats):
    """Median over repeats of the slowest task family, in seconds."""
    times = []
    for _ in range(repeats):
        worst = 0.0
        for task in TASKS:
            start = time.perf_counter()
            read(text, task)
            worst = max(worst, time.perf_counter() - start)
        times.append(worst)
    return statistics.median(times)


def time_revision(rev, expression, n, timeout):
    """Seconds of `rev`'s parse_answer on one input (slowest task family), or None after timeout."""
    source = subprocess.run(
        ["git", "show", f"{rev}:workbench/frontier/answers.py"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "old_answers.py").write_text(source)
        code = (
            f"import sys, time; sys.path.insert(0, {tmp!r}); from old_answers import parse_answer\n"
            f"n = {n}; text = {expression}; worst = 0.0\n"
            f"for task in {TASKS!r}:\n"
            f"    start = time.perf_counter(); parse_answer(text, task)\n"
            f"    worst = max(worst, time.perf_counter() - start)\n"
            f"print(worst)"
        )
        try:
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    if out.returncode != 0:
        raise SystemExit(f"revision {rev} failed on {expression}: {out.stderr[-300:]}")
    return float(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", help="git revision whose parse_answer to time beside ours")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--scale", type=float, default=1.0, help="factor on every input's full size")
    args = parser.parse_args()
    if not args.scale > 0:
        parser.error(f"--scale must be above 0, got {args.scale}")
    header = f"{'input':28s} {'chars':>9s} {'paper s':>9s} {'growth':>7s} {'careful s':>10s} {'growth':>7s}"
    print(header + (f" {args.against + ' s':>12s}" if args.against else ""))
    for name, (expression, full) in INPUTS.items():
        n = max(10, round(full * args.scale))
        row = f"{name:28s}"
        for i, read in enumerate((answers.paper_answer, answers.parse_answer)):
            big, small = eval(expression, {"n": n}), eval(expression, {"n": n // 10})
            t_big, t_small = slowest(read, big, args.repeats), slowest(read, small, args.repeats)
            row += (f" {len(big):9,d}" if i == 0 else "") + f" {t_big:9.4f} {t_big / t_small:6.1f}x"
        if args.against:
            old = time_revision(args.against, expression, n, args.timeout)
            row += f" {'> %g' % args.timeout if old is None else '%.4f' % old:>12s}"
        print(row)


if __name__ == "__main__":
    main()
