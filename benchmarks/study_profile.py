"""Where a Study 1 run's wall time goes: one run of workbench.study's plan, trained in this process
with a timer around each part of the training loop, printed as a table of seconds and shares.

    python benchmarks/study_profile.py [--run precision-multiplication-d2-bittokens-seed0]
                                       [--out /tmp/study-profile] [--tokens 1e6]

The parts (each timer counts its own time, not the time of the timed parts it calls, so the rows
add up to the run's wall time):

    set-up           setup() without the parts below: run directory, config, sampler, optimizers
    tokenizer        the Tokenizer (the BPE, cached on disk after the first run)
    model            building the GPT
    pool generation  tasks.generate: the questions of the train, binary, validation and test pools
    tokenization     make_pool without generation: the pools' samples tokenized
    data             next_batch: drawing the samples (curricula) and packing the rows
    forward          the training forward pass, loss included
    backward         loss.backward()
    Muon / Adam      the optimizer steps (zero_grad apart)
    generation       GPT.generate: the greedy answers of the validation and test questions
    scoring          the tasks' scores of the answers
    evaluation other evaluate() without the two above: prompts tokenized, answers decoded, frames
    adapt            evaluate_and_adapt without evaluation: balancer, curricula, best checkpoint
    files            atomic writes (checkpoints, best.pt, config, test results)
    final test other final_test without the above (loading best.pt, the summary)
    other            the rest: the step's bookkeeping, the logs, the progress bar

Imports (torch, pandas) are paid once per study worker process, not per run: printed apart.

With `--ops STEPS`, no whole run: the run's set-up, STEPS training steps to warm up, then STEPS
more under torch.profiler, printed op by op (self CPU time a step), with the matrix products'
share of a step and the bound that share sets: the most a step can speed up while its matrix
products stay as they are (a speed-up that keeps every bit cannot change them).
"""

import argparse
import functools
import sys
import time
from collections import defaultdict

started_imports = time.perf_counter()
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from workbench import study
from workbench.measures import evaluate
from workbench.model import gpt as model  # noqa: E402
from workbench.runs.allocator import keep_freed_memory  # noqa: E402
from workbench.runs.outputs import output_path  # noqa: E402
from workbench.training import batches, data, train
from workbench.training.optim import Float32Muon  # noqa: E402

IMPORTS = time.perf_counter() - started_imports


class Split:
    """Exclusive wall time per label of the wrapped functions (nested timed calls are subtracted)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds, self.calls, self._nested = defaultdict(float), defaultdict(int), []

    def wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            self._nested.append(0.0)
            start = self.clock()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = self.clock() - start
                self.seconds[label] += elapsed - self._nested.pop()
                self.calls[label] += 1
                if self._nested:
                    self._nested[-1] += elapsed

        setattr(owner, name, timed)


def instrument(split: Split) -> None:
    for owner, name, label in [
        (train, "setup", "set-up"),
        (train, "Tokenizer", "tokenizer"),
        (train, "GPT", "model"),
        (data, "generate", "pool generation"),
        (train, "make_pool", "tokenization"),
        (batches, "next_batch", "data"),
        (model.GPT, "forward", "forward"),
        (torch.Tensor, "backward", "backward"),
        (Float32Muon, "step", "Muon"),
        (torch.optim.Adam, "step", "Adam"),
        (torch.optim.Optimizer, "zero_grad", "zero_grad"),
        (model.GPT, "generate", "generation"),
        (evaluate, "score", "scoring"),
        (train, "evaluate", "evaluation other"),
        (train, "evaluate_and_adapt", "adapt"),
        (train, "write_atomic", "files"),
        (train, "final_test", "final test other"),
    ]:
        split.wrap(owner, name, label)


MATRIX_PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def profile_ops(cfg, steps: int) -> None:
    """STEPS training steps op by op, after as many untimed ones (see the module's docstring)."""
    run = train.setup(cfg)
    keep_freed_memory(run.device)
    batches = [train.step_batches(run, s) for s in range(2 * steps)]
    for s in range(steps):
        train.train_step(run, s, batches[s])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        start = time.perf_counter()
        for s in range(steps, 2 * steps):
            train.train_step(run, s, batches[s])
        step_ms = (time.perf_counter() - start) / steps * 1e3
    table = pd.DataFrame(
        [
            {"op": e.key, "ms a step": e.self_cpu_time_total / 1e3 / steps, "calls a step": e.count / steps}
            for e in profiler.key_averages()
        ]
    ).sort_values("ms a step", ascending=False)
    products = table[table.op.isin(MATRIX_PRODUCTS)]["ms a step"].sum()
    print(
        table.head(25).to_string(
            index=False, formatters={"ms a step": "{:.2f}".format, "calls a step": "{:.0f}".format}
        )
    )
    print(
        f"\n{cfg.model.preset}, threads {torch.get_num_threads()}, {steps} steps after {steps} untimed: a step {step_ms:.1f} ms "
        f"(under the profiler), its matrix products {products:.1f} ms ({products / step_ms:.0%}); with everything else "
        f"at no cost a step would be at most {step_ms / products:.2f}x faster than now"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run",
        default="precision-multiplication-d2-bittokens-seed0",
        help="a run name of workbench.study.plan (Study 1: precision-TASK-dD-ENCODING-seedS)",
    )
    parser.add_argument("--out", default="/tmp/study-profile", help="run directory (replaced)")
    parser.add_argument("--tokens", type=float, default=None, help="override the run's token budget")
    parser.add_argument(
        "--clock",
        default="wall",
        choices=("wall", "cpu"),
        help="wall time, or this process's CPU time (steadier on a shared machine)",
    )
    parser.add_argument(
        "--ops",
        type=int,
        default=0,
        metavar="STEPS",
        help="instead of a whole run: STEPS training steps op by op (torch.profiler) after as many "
        "untimed ones, the matrix products' share and the speed-up bound it sets",
    )
    args = parser.parse_args()
    try:  # the run directory is replaced: never results/ or the checkout
        args.out = str(output_path(args.out, "--out"))
    except ValueError as err:
        sys.exit(str(err))
    runs = {r.name: r for r in study.plan(study.PARTS)}
    if args.run not in runs:
        sys.exit(f"--run {args.run!r} is not in the study's plan; e.g. {next(iter(runs))}")
    cfg = runs[args.run].config.updated(out=args.out, overwrite=True)
    if args.tokens:
        cfg = cfg.updated(tokens=args.tokens)
    if args.ops < 0:
        sys.exit(f"--ops takes a number of steps >= 1, got {args.ops}")
    if args.ops:
        return profile_ops(cfg, args.ops)
    split = Split(time.perf_counter if args.clock == "wall" else time.process_time)
    instrument(split)
    start = split.clock()
    train.train(cfg)
    wall = split.clock() - start
    seconds = dict(split.seconds, other=wall - sum(split.seconds.values()))
    table = pd.DataFrame({"seconds": seconds, "calls": pd.Series(split.calls)}).fillna(0)
    table["share"] = table.seconds / wall
    table = table.sort_values("seconds", ascending=False)
    print(
        f"\n{args.run}: {cfg.tokens:g} tokens, {cfg.model.preset}, threads {torch.get_num_threads()}; {args.clock} time {wall:.1f} s "
        f"(imports {IMPORTS:.1f} s, once per worker process, not counted)"
    )
    print(table.to_string(formatters={"seconds": "{:.2f}".format, "calls": "{:.0f}".format, "share": "{:.1%}".format}))


if __name__ == "__main__":
    main()
