"""numbers.parse on one long digit run: the quadratic split of commit 56144dc vs ours.

The old split matched the rest of the digit run again at every position (quadratic in its
length); ours stops where a part must end. Both read the same random run of digits (no leading
zero, so both give the same values, which is checked); prints the best of `--repeats` seconds per
size and the ratio, measured in one run. The old code is read from git history, so run this from
the repository.

    python benchmarks/parse_numbers.py [--sizes 1000 10000 100000 1000000] [--old-limit 100000]
"""

import argparse
import random
import subprocess
import time
import types
from pathlib import Path

from workbench import numbers

OLD_COMMIT = "56144dc"  # last commit with the quadratic split
ROOT = Path(__file__).resolve().parent.parent


def old_numbers() -> types.ModuleType:
    source = subprocess.run(
        ["git", "show", f"{OLD_COMMIT}:workbench/numbers.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    module = types.ModuleType("old_numbers")
    exec(compile(source, f"{OLD_COMMIT}:workbench/numbers.py", "exec"), module.__dict__)
    return module


def best_seconds(parse, text, repeats, clear=None):
    best, result = float("inf"), None
    for _ in range(repeats):
        if clear:
            clear()  # the old split_number is cached: time the work, not the cache
        start = time.perf_counter()
        result = parse(text)
        best = min(best, time.perf_counter() - start)
    return best, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument(
        "--old-limit",
        type=int,
        default=100_000,
        help="largest run given to the old code (1M digits would take ~20 minutes)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    old = old_numbers()
    rng = random.Random(0)
    print(f"{'digits':>10} {'old s':>10} {'new s':>10} {'old/new':>9}")
    for n in args.sizes:
        text = rng.choice("123456789") + "".join(rng.choice("0123456789") for _ in range(n - 1))
        new_s, (_, new_values) = best_seconds(numbers.parse, text, args.repeats)
        if n > args.old_limit:
            print(f"{n:>10,} {'not run':>10} {new_s:>10.4f} {'':>9}")
            continue
        old_s, (_, old_values) = best_seconds(old.parse, text, args.repeats, old.split_number.cache_clear)
        if old_values != new_values:
            raise SystemExit(f"old and new values differ on {n} digits")
        print(f"{n:>10,} {old_s:>10.4f} {new_s:>10.4f} {old_s / new_s:>8.1f}x")


if __name__ == "__main__":
    main()
