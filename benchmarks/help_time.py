"""How long each `python -m workbench.X` command takes to answer `--help` and to refuse a typo'd
flag (`--tokenz 1`): the start-up a user waits for before anything runs.

Each command runs as a subprocess `--repeats` times per case; the table prints the median seconds.
The commands are found, not listed: every module of workbench/ with a `main()` that runs under
`python -m` (a `__main__` guard, or a package's __main__.py). `--root` times another checkout (e.g.
an export of an older commit) with this interpreter, for a before/after on the same machine.

    python benchmarks/help_time.py [--repeats 5] [--commands train tokenizer] [--root DIR]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commands(root: Path) -> list[str]:
    """The `python -m` names of the package's commands."""
    found = []
    for path in sorted((root / "workbench").rglob("*.py")):
        text = path.read_text()
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        if path.name == "__main__.py":
            found.append(module.removesuffix(".__main__"))
        elif re.search(r"^if __name__ == .__main__.:", text, re.M) and re.search(r"^def main\(", text, re.M):
            found.append(module)
    return found


def seconds(root: Path, module: str, args: list[str]) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=root, env=env, capture_output=True)
    return time.perf_counter() - start, done.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per command and case (the median is printed)")
    parser.add_argument("--commands", nargs="+", metavar="NAME", help="these only, e.g. train retrofit (default: all)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose commands are timed")
    args = parser.parse_args()
    root = args.root.resolve()
    names = commands(root)
    if args.commands:
        wanted = {f"workbench.{c.removeprefix('workbench.')}" for c in args.commands}
        unknown = sorted(wanted - set(names))
        if unknown:
            parser.error(f"no command(s) {unknown}; the commands are {', '.join(names)}")
        names = [n for n in names if n in wanted]
    cases = {"--help": ["--help"], "--tokenz 1": ["--tokenz", "1"]}
    print(f"{root}: median of {args.repeats} runs, seconds (exit status)")
    print(f"{'command':<36}" + "".join(f"{c:>16}" for c in cases))
    for name in names:
        cells = []
        for case in cases.values():
            runs = [seconds(root, name, case) for _ in range(args.repeats)]
            cells.append(f"{statistics.median(s for s, _ in runs):.2f} ({runs[-1][1]})")
        print(f"{'python -m ' + name:<36}" + "".join(f"{c:>16}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
