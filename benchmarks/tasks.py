"""Samples per second of workbench.tasks.generate (n=20000, median of 3, one thread).

    python benchmarks/tasks.py [--n 20000] [--repeats 3]

Reference: the authors' generator, single process on this machine (figures given in our brief).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import argparse
import statistics
import time

from workbench import tasks as T

AUTHORS = {"multiplication": 14_700, "addition": 8_600, "division": 4_800, "sorting": 1_600, "mean": 1_700}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="samples generated per task and repeat")
    parser.add_argument("--repeats", type=int, default=3, help="timed generations per task (the median is printed)")
    args = parser.parse_args()
    if args.n < 1 or args.repeats < 1:
        parser.error("--n and --repeats must be at least 1")
    print(f"{'task':16s} {'samples/s':>10s} {'authors':>8s} {'ratio':>6s}")
    for task in T.names():
        T.generate(task, 200, seed=0)  # warm-up
        times = []
        for r in range(args.repeats):
            t0 = time.perf_counter()
            T.generate(task, args.n, seed=r + 1)
            times.append(time.perf_counter() - t0)
        rate = args.n / statistics.median(times)
        ref = AUTHORS.get(task)
        print(f"{task:16s} {rate:10.0f} {ref or '':>8} {f'{rate / ref:5.1f}x' if ref else '':>6s}")


if __name__ == "__main__":
    main()
