"""Pre-registered comparisons of the five encodings: one protocol, every encoding, several seeds.

    python -m workbench.experiments cpu-tier [--seeds 0 1] [--out runs/cpu-tier]
    torchrun --nproc_per_node 8 -m workbench.experiments paper-tier    # on 8 GPUs

The CPU tier is the paper's multi-task experiment (section 6, Fig. 4) at laptop scale: the six
comparison and single-step tasks on a narrowed operand regime (magnitudes 1 … 100, at most 2
significant digits per operand: 7, 3.5, 42, -0.8) with the 2-layer, 128-wide `cpu-tiny` model,
batch 8 x 128 tokens and 3M training tokens (5-6.5 minutes per run on one core). Why this regime:
trained on it alone, 2-digit integer addition reaches log-sMAPE >= 0.95 with BitTokens, single
digits and FoNE in 5M tokens (issue 4's runs), so six tasks sharing 3M tokens leave every task short of
saturation and the encodings separate, instead of all scoring 0 (the paper's full operand range at
this size) or all 1. Interval and sorting stayed near chance for all five: at this budget they do
not separate. Every encoding gets the same model, token budget, seeds and data.

Runs already finished (their test_summary.csv exists) are skipped, so an interrupted sweep resumes
where it stopped. Results: one CSV in the schema of `workbench.paper_figures` plus tokens per
problem (Table 5).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from . import encoders, tasks
from .atomic import write_atomic
from .paper_figures import results_from_summary
from .train import TrainConfig, train

# The paper's multi-task mix (section 6): the comparison and single-step tasks (plus text at scale).
SIX_TASKS = tuple(tasks.names("single_step") + tasks.names("comparison"))
PROTOCOLS = {
    "cpu-tier": TrainConfig(tasks=SIX_TASKS, preset="cpu-tiny", tokens=3e6, batch_size=8,
                            decades=(0, 1), max_digits=2, pool_size=50_000, val_samples=48,
                            test_samples=500, eval_every=200, checkpoint_every=200),
    # torchrun --nproc_per_node 8 -m workbench.experiments paper-tier: 8 GPUs x 24 rows = batch 192
    "paper-tier": TrainConfig(tasks=SIX_TASKS + tuple(tasks.names("text")), preset="paper", tokens=1e10, batch_size=24,
                              pool_size=1_000_000, val_samples=256, test_samples=10_000,
                              eval_every=32, checkpoint_every=1000, bf16=True, compile=True),
}


def run_protocol(name: str, seeds=(0, 1), out="runs/cpu-tier", encodings=None) -> pd.DataFrame:
    """Train every encoding × seed under protocol `name`; return and save the results table."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; choose one of {sorted(PROTOCOLS)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    encodings = list(encodings or encoders.names())
    rows = []
    for encoding in tqdm([(e, s) for e in encodings for s in seeds], desc=name):
        enc, seed = encoding
        run_dir = out / f"{enc}-seed{seed}"
        if not (run_dir / "test_summary.csv").exists():
            resume = (run_dir / "checkpoint.pt").exists()  # a run killed before its first checkpoint starts over
            train(replace(PROTOCOLS[name], encoding=enc, seed=seed, out=str(run_dir), overwrite=not resume),
                  resume=resume)
        summary = pd.read_csv(run_dir / "test_summary.csv")
        results = results_from_summary(summary)
        tokens = summary.set_index("task")[["input_tokens", "output_tokens", "train_seconds"]]
        rows.append(results.join(tokens, on="task"))
    table = pd.concat(rows, ignore_index=True)
    if int(os.environ.get("RANK", 0)) == 0:  # under torchrun every rank trains, one writes
        write_atomic(out / "results.csv", lambda tmp: table.to_csv(tmp, index=False))
    return table


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """One row per task x encoding: mean and std over seeds of the score (log-sMAPE or accuracy)
    and of exact match, tokens per problem (input + output, Table 5), minutes of training;
    within a task the rows run from the best score down."""
    table = table.assign(**{c: table[c] if c in table else np.nan
                            for c in ("input_tokens", "output_tokens", "train_seconds")})
    score = table[table.metric != "exact_match"]
    exact = table[table.metric == "exact_match"]
    keys = ["task", "encoding"]
    out = score.groupby(keys).agg(metric=("metric", "first"), score=("value", "mean"),
                                  score_std=("value", "std"), seeds=("seed", "nunique"),
                                  tokens=("input_tokens", "mean"), output_tokens=("output_tokens", "mean"),
                                  minutes=("train_seconds", "mean"))
    out["tokens"] += out.pop("output_tokens")
    out["minutes"] /= 60
    out = out.join(exact.groupby(keys)["value"].agg(exact="mean", exact_std="std"))
    out = out.reset_index().sort_values(["task", "score"], ascending=[True, False])
    return out[["task", "encoding", "metric", "score", "score_std", "exact", "exact_std", "tokens",
                "minutes", "seeds"]].reset_index(drop=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", choices=sorted(PROTOCOLS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--encodings", nargs="+", default=None, choices=encoders.names())
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    table = run_protocol(args.protocol, args.seeds, args.out or f"runs/{args.protocol}", args.encodings)
    print(summarize(table).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
