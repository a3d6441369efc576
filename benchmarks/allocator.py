"""Training steps with glibc's default malloc thresholds beside `allocator.keep_freed_memory()`: page
faults, CPU time and wall time per step of a Study 1 run, one thread, each side in fresh processes,
alternately (default, kept, default, kept ...), medians. Same batches on both sides; the losses are
checked to be the same bits.

    python benchmarks/allocator.py [--run precision-multiplication-d2-bittokens-seed0] [--steps 60] [--repeats 3]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

# the child: the run's set-up, 5 warm-up steps, then `steps` timed steps on batches drawn beforehand
CHILD = """
import json, resource, sys, time
from dataclasses import replace
import torch
from workbench import study
from workbench.training import train
from workbench.runs.allocator import keep_freed_memory
torch.set_num_threads(1)
name, out, steps, keep = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "kept"
took = keep_freed_memory() if keep else False
run = train.setup({r.name: r for r in study.plan(study.PARTS)}[name].config.updated(out=out, overwrite=True))
for step in range(5):
    train.train_step(run, step)
batches = [train.step_batches(run, step) for step in range(5, 5 + steps)]
faults, cpu, wall = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time(), time.perf_counter()
losses = [train.train_step(run, 5 + i, b)["loss"] for i, b in enumerate(batches)]
print(json.dumps({"faults": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / steps,
                  "cpu": (time.process_time() - cpu) / steps, "wall": (time.perf_counter() - wall) / steps,
                  "losses": [float.hex(x) for x in losses], "took": took}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run",
        default="precision-multiplication-d2-bittokens-seed0",
        help="a run of workbench.study.plan whose steps are timed",
    )
    parser.add_argument("--steps", type=int, default=60, help="timed steps per process")
    parser.add_argument("--repeats", type=int, default=3, help="processes per side")
    args = parser.parse_args()
    sides = {"default": [], "kept": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for side, rows in sides.items():
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, args.run, f"{tmp}/{side}{i}", str(args.steps), side],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                rows.append(json.loads(out.strip().splitlines()[-1]))
                print(
                    f"  {side:8s} repeat {i}: {rows[-1]['faults']:7.0f} faults/step, cpu {rows[-1]['cpu'] * 1e3:6.2f} ms/step, "
                    f"wall {rows[-1]['wall'] * 1e3:6.2f} ms/step",
                    flush=True,
                )
    med = {
        side: {k: statistics.median(r[k] for r in rows) for k in ("faults", "cpu", "wall")}
        for side, rows in sides.items()
    }
    print(f"\n{args.run}: {args.steps} steps x {args.repeats} processes per side, one thread, medians")
    for side in sides:
        print(
            f"  {side:8s} {med[side]['faults']:7.0f} faults/step   cpu {med[side]['cpu'] * 1e3:6.2f} ms/step"
            f"   wall {med[side]['wall'] * 1e3:6.2f} ms/step"
        )
    print(
        f"  default / kept: cpu {med['default']['cpu'] / med['kept']['cpu']:.3f}x, "
        f"wall {med['default']['wall'] / med['kept']['wall']:.3f}x"
    )
    losses = {json.dumps(r["losses"]) for rows in sides.values() for r in rows}
    print(
        f"  malloc took the settings: {all(r['took'] for r in sides['kept'])}; "
        f"losses bit for bit the same on both sides: {len(losses) == 1}"
    )


if __name__ == "__main__":
    main()
