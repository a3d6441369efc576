"""The paper tier's batch on the host: where its time goes, and what building it in a worker
process instead of a thread leaves the training thread (docs/gpu.md, "The batch worker process").

    python benchmarks/batch_worker.py [--encodings bittokens fone xval single_digit] [--steps 5]
                                      [--pool 3000] [--device-step 0.48] [--launch 0.15] [--profile 12]

One GPU's step of the paper tier (192 rows x 1024 tokens, 8 micro-batches of 24; the six tasks and
text at the paper's operand range, equal task shares at the start), built on this CPU, one thread:

  build    `step_batches` in the main process, nothing else running: median ms a step, wall clock
           and CPU time (on a loaded machine the CPU time is the work, the wall clock the wait too)
  where    (--profile N) cProfile's N costliest functions of that build, by their own time
  thread   `--prefetch thread`, and
  process  `--prefetch process`: the main thread plays a GPU step while the loader builds the next
           batch. It "launches" (small torch operations for --launch seconds when alone: what a
           step's eager kernel launches cost the host) and then waits for the device (a sleep up to
           --device-step seconds from the first launch: the H100's eager step, 459-505 ms); the step
           ends when the next batch is in hand. Reported, medians over --steps steps: the launches'
           time beside the builder and the main thread's free share (launches alone / beside), the
           time `get` waited, the loop step and its ratio to the device step, and the builder's
           own time a batch, wall clock and CPU (the worker thread's, or the worker process's). Then the main
           thread's own cost a step with the batch already built: taking it (`get`: for the
           process, its layout received and the views made) and asking for the next (`prefetch`:
           for the process, the counts, curricula and generator sent): "take + ask".

On a CPU whose cores are busy the worker process waits for a core as the thread waits for the GIL;
where a core is free (a GPU machine's 16), only the thread still slows the launches.
"""

import argparse
import cProfile
import math
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402

from workbench.training.batches import Loader  # noqa: E402
from workbench.training.train import open_loader, setup, step_batches  # noqa: E402


def launches(n: int, x: torch.Tensor) -> None:
    for _ in range(n):
        x.add_(1)


def calibrate(seconds: float) -> int:
    """How many small operations the main thread runs in `seconds`, alone (median of 5)."""
    x, n, rates = torch.zeros(16), 20_000, []
    for _ in range(5):
        t = time.perf_counter()
        launches(n, x)
        rates.append(n / (time.perf_counter() - t))
    return math.ceil(seconds * statistics.median(rates))


def loop(loader, first: int, steps: int, n: int, device_step: float) -> dict:
    """The emulated training loop over `steps` steps after one untimed one, and the launches alone
    just before it (the machine's other load changes by the minute)."""
    x, alone = torch.zeros(16), []
    for _ in range(3):
        t = time.perf_counter()
        launches(n, x)
        alone.append(time.perf_counter() - t)
    loader.get(first)
    loader.prefetch(first + 1)
    waited, launched, stepped = [], [], []
    for step in range(first + 1, first + 1 + steps):
        t0 = time.perf_counter()
        loader.get(step)
        t1 = time.perf_counter()
        if step < first + steps:
            loader.prefetch(step + 1)
        launches(n, x)
        t2 = time.perf_counter()
        time.sleep(max(0.0, device_step - (t2 - t1)))  # the device finishes its step; the GIL is free
        waited.append(t1 - t0)
        launched.append(t2 - t1)
        stepped.append(time.perf_counter() - t0)
    pairs = (("alone", alone), ("waited", waited), ("launched", launched), ("step", stepped))
    return {k: statistics.median(v) for k, v in pairs}


def overhead(loader, first: int, steps: int, ready) -> dict:
    """The main thread's own cost a step: taking a batch already built, asking for the next."""
    takes, asks = [], []
    loader.prefetch(first)
    for step in range(first, first + steps):
        while not ready(loader):
            time.sleep(0.002)
        t = time.perf_counter()
        loader.get(step)
        takes.append(time.perf_counter() - t)
        t = time.perf_counter()
        loader.prefetch(step + 1)
        asks.append(time.perf_counter() - t)
    loader.get(first + steps)
    return {"take": statistics.median(takes), "ask": statistics.median(asks)}


def config(args, encoding, out, prefetch):
    size = gpu_check.GPU
    device = type("Args", (), {"device": "cpu"})()
    return gpu_check.config(
        device,
        size,
        out,
        encoding=encoding,
        prefetch=prefetch,
        bf16=False,
        text_bpe="corpus",
        threads=1,
        pool_size=args.pool,
    )


def measure(args, encoding, folder, n):
    rows = []
    here = setup(config(args, encoding, folder / f"{encoding}-here", "off"))
    step_batches(here, 0)
    builds, cpus = [], []
    for step in range(1, 1 + args.steps):
        t, c = time.perf_counter(), time.process_time()
        step_batches(here, step)
        builds.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    build, cpu = statistics.median(builds), statistics.median(cpus)
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        for step in range(1 + args.steps, 1 + 2 * args.steps):
            step_batches(here, step)
        profile.disable()
        stats = pstats.Stats(profile)
        total = sum(v[2] for v in stats.stats.values())
        top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[: args.profile]
        print(f"{encoding}: where the build's time goes (own time, {args.steps} builds)")
        for (file, line, name), (_, _, own, _, _) in top:
            where = f"{Path(file).name}:{line}({name})" if line else name
            print(f"  {100 * own / total:5.1f} %  {1e3 * own / args.steps:7.1f} ms a build  {where}")
    there = setup(config(args, encoding, folder / f"{encoding}-there", "process"))
    for mode in ("thread", "process"):
        built, used = [], []

        def timed(step, run=here):  # the thread's own time (wall clock and CPU), the launches beside it
            t, c = time.perf_counter(), time.thread_time()
            batches = step_batches(run, step)
            built.append(time.perf_counter() - t)
            used.append(time.thread_time() - c)
            return batches

        loader = Loader(timed, ahead=True) if mode == "thread" else open_loader(there, "process")
        ready = (lambda ld: ld.pending[1].done()) if mode == "thread" else (lambda ld: ld.conn.poll())
        try:
            first = 2 + 2 * args.steps
            result = loop(loader, first, args.steps, n, args.device_step)
            result |= overhead(loader, first + args.steps + 1, args.steps, ready)
            builder = statistics.median((built if mode == "thread" else loader.builds)[2:])
            builder_cpu = statistics.median((used if mode == "thread" else loader.build_cpu)[2:])
        finally:
            loader.close()
        rows.append({"encoding": encoding, "build": build, "cpu": cpu, "loader": mode, **result})
        rows[-1] |= {"builder": builder, "builder_cpu": builder_cpu, "free": result["alone"] / result["launched"]}
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encodings", nargs="+", default=["bittokens", "fone", "xval", "single_digit"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--pool", type=int, default=3000, help="training samples per task")
    parser.add_argument("--device-step", type=float, default=0.48, help="seconds a device step takes (H100, eager)")
    parser.add_argument("--launch", type=float, default=0.15, help="seconds of kernel launches a step, alone")
    parser.add_argument("--profile", type=int, default=0, help="print the N costliest functions of a build")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    n = calibrate(args.launch)
    print(f"{n:,} small operations a step's launches")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for encoding in args.encodings:
            rows += measure(args, encoding, Path(folder), n)
    print(
        "| encoding | build here, ms (CPU ms) | loader | the builder's ms a batch (CPU ms) | take + ask, ms | "
        "launches alone / beside the builder, ms (free share) | get waited, ms | loop step, ms | loop / device step |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['encoding']} | {1e3 * r['build']:.0f} ({1e3 * r['cpu']:.0f}) | {r['loader']} | "
            f"{1e3 * r['builder']:.0f} ({1e3 * r['builder_cpu']:.0f}) | "
            f"{1e3 * r['take']:.1f} + {1e3 * r['ask']:.1f} | {1e3 * r['alone']:.0f} / {1e3 * r['launched']:.0f} ({r['free']:.0%}) | "
            f"{1e3 * r['waited']:.0f} | {1e3 * r['step']:.0f} | {r['step'] / args.device_step:.2f} |"
        )


if __name__ == "__main__":
    main()
