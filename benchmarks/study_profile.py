"""Where a Study 1 run's wall time goes: one run of workbench/study.py's plan, trained in this process
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
"""
import argparse
import functools
import sys
import time
from collections import defaultdict
from dataclasses import replace

started_imports = time.perf_counter()
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from workbench import data, evaluate, model, study, train  # noqa: E402
from workbench.optim import Float32Muon  # noqa: E402

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
        (train, "setup", "set-up"), (train, "Tokenizer", "tokenizer"), (train, "GPT", "model"),
        (data, "generate", "pool generation"), (train, "make_pool", "tokenization"),
        (train, "next_batch", "data"), (train, "shard", "data"),
        (model.GPT, "forward", "forward"), (torch.Tensor, "backward", "backward"),
        (Float32Muon, "step", "Muon"), (torch.optim.Adam, "step", "Adam"),
        (torch.optim.Optimizer, "zero_grad", "zero_grad"),
        (model.GPT, "generate", "generation"), (evaluate, "score", "scoring"),
        (train, "evaluate", "evaluation other"), (train, "evaluate_and_adapt", "adapt"),
        (train, "write_atomic", "files"), (train, "final_test", "final test other"),
    ]:
        split.wrap(owner, name, label)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="precision-multiplication-d2-bittokens-seed0",
                        help="a run name of workbench.study.plan (Study 1: precision-TASK-dD-ENCODING-seedS)")
    parser.add_argument("--out", default="/tmp/study-profile", help="run directory (replaced)")
    parser.add_argument("--tokens", type=float, default=None, help="override the run's token budget")
    parser.add_argument("--clock", default="wall", choices=("wall", "cpu"),
                        help="wall time, or this process's CPU time (steadier on a shared machine)")
    args = parser.parse_args()
    runs = {r.name: r for r in study.plan(study.PARTS)}
    if args.run not in runs:
        sys.exit(f"--run {args.run!r} is not in the study's plan; e.g. {next(iter(runs))}")
    cfg = replace(runs[args.run].config, out=args.out, overwrite=True)
    if args.tokens:
        cfg = replace(cfg, tokens=args.tokens)
    split = Split(time.perf_counter if args.clock == "wall" else time.process_time)
    instrument(split)
    start = split.clock()
    train.train(cfg)
    wall = split.clock() - start
    seconds = dict(split.seconds, other=wall - sum(split.seconds.values()))
    table = pd.DataFrame({"seconds": seconds, "calls": pd.Series(split.calls)}).fillna(0)
    table["share"] = table.seconds / wall
    table = table.sort_values("seconds", ascending=False)
    print(f"\n{args.run}: {cfg.tokens:g} tokens, {cfg.preset}, threads {torch.get_num_threads()}; {args.clock} time {wall:.1f} s "
          f"(imports {IMPORTS:.1f} s, once per worker process, not counted)")
    print(table.to_string(formatters={"seconds": "{:.2f}".format, "calls": "{:.0f}".format,
                                      "share": "{:.1%}".format}))


if __name__ == "__main__":
    main()
