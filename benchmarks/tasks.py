"""Samples per second of workbench.tasks.generate (n=20000, median of 3, one thread).

Reference: the authors' generator, single process on this machine (figures given in our brief).
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import statistics
import time

from workbench import tasks as T

AUTHORS = {"multiplication": 14_700, "addition": 8_600, "division": 4_800, "sorting": 1_600, "mean": 1_700}
N, REPEATS = 20_000, 3

if __name__ == "__main__":
    print(f"{'task':16s} {'samples/s':>10s} {'authors':>8s} {'ratio':>6s}")
    for task in T.names():
        T.generate(task, 200, seed=0)  # warm-up
        times = []
        for r in range(REPEATS):
            t0 = time.perf_counter()
            T.generate(task, N, seed=r + 1)
            times.append(time.perf_counter() - t0)
        rate = N / statistics.median(times)
        ref = AUTHORS.get(task)
        print(f"{task:16s} {rate:10.0f} {ref or '':>8} {f'{rate / ref:5.1f}x' if ref else '':>6s}")
