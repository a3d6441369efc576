"""The registered SmolLM2-135M retrofit experiment (docs/study/smollm2-retrofit.md).

    python -m workbench.retrofit.experiment                      # every cell, one after another
    python -m workbench.retrofit.experiment --only none:full     # one reading and mode (both seeds)
    python -m workbench.retrofit.experiment --table              # the CSV from the runs done so far
    python -m workbench.retrofit.experiment --table --publish    # all 16 runs done: results/retrofit-smollm2.csv

Cells: SmolLM2-135M-Instruct with its own digit tokens (`none`) and with BitTokens, xVal and FoNE
retrofitted, each by full fine-tuning and by LoRA, on addition and multiplication, two seeds;
every cell the same data, budget and recipe (`workbench.retrofit.finetune`), only the reading of
the numbers and the trained weights differ. A run already complete in its folder is not run again
(so an interrupted experiment resumes). The table has one row per
reading, mode and task: the mean test score with its 95 % interval (bootstrap over the questions
within each seed, then over the seeds: `workbench.study.hierarchical_bootstrap`), the exact-match
share, and the held-out text perplexity before and after fine-tuning (mean over the seeds). It goes
to runs/retrofit-smollm2.csv (--csv); only `--publish` writes the published table in results/, and
only whole: `--table` or `--only` once replaced its 16 rows with the 2 of the runs then done.
`--table` with no complete run in --runs writes nothing and says so in one line, with exit status 1
(a script that goes on to read the table stops there; 2 is a refused command line).

The settings below are the registered ones; they are not to be changed after results exist.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from ..cli import Parser
from ..runs.atomic import write_atomic
from ..runs.outputs import RESULTS, output_path
from .config import RetrofitConfig
from .report import perplexity_change, test_scores

MODEL = "smollm2-135m"
ENCODINGS = ("none", "bittokens", "xval", "fone")
MODES = {"full": dict(lora=False, lr=1e-4), "lora": dict(lora=True, lr=1e-3, lora_rank=16, lora_alpha=32.0)}
SEEDS = (0, 1)
COMMON = dict(
    model=MODEL,
    tasks=("addition", "multiplication"),
    tokens=4096,
    batch_tokens=512,
    head_lr=3e-3,
    decades=(0, 1),
    max_digits=2,
    text_share=0.25,
    pool_size=4000,
    val_samples=8,
    eval_every=4,
    test_samples=50,
    text_samples=4,
    context=512,
    dtype="float32",
    device="cpu",
    threads=1,
    # registered before issue 68 changed the defaults: <|num|> as it was joined then
    num_init="mean",
    digit_mass="drop",
    frame="markers",
    loss_logits="full",  # and before issue 65 changed where the loss computes logits
)
RUNS = Path("runs/retrofit-smollm2")
CSV = Path("runs/retrofit-smollm2.csv")
PUBLISHED = RESULTS / "retrofit-smollm2.csv"  # written by --publish only, from all the registered runs
BOOTSTRAP_DRAWS = 2000
NOTHING = 1  # exit status of --table with no complete run: not a usage error (2), but not a table either


def cells(only: list[str] | None = None) -> list[tuple[str, str, int]]:
    """(encoding, mode, seed) of every registered run, or of the `only` ones ("encoding:mode")."""
    chosen = [(e, m, s) for m in MODES for e in ENCODINGS for s in SEEDS]
    if only:
        unknown = [o for o in only if o not in {f"{e}:{m}" for e in ENCODINGS for m in MODES}]
        if unknown:
            raise ValueError(f"--only {unknown}: choose encoding:mode from {ENCODINGS} x {tuple(MODES)}")
        chosen = [c for c in chosen if f"{c[0]}:{c[1]}" in only]
    return chosen


def config(encoding: str, mode: str, seed: int, runs: Path = RUNS, **overrides) -> RetrofitConfig:
    settings = {**COMMON, **MODES[mode], **overrides}
    return RetrofitConfig.of(encoding=encoding, seed=seed, out=str(runs / f"{encoding}-{mode}-seed{seed}"), **settings)


def done(run: Path) -> bool:
    return all((run / n).exists() for n in ("test_samples.csv", "perplexity.csv", "model"))


def table(runs: Path = RUNS, draws: int = BOOTSTRAP_DRAWS) -> pd.DataFrame:
    """One row per encoding, mode and task from the complete runs under `runs`."""
    rows = []
    for mode in MODES:
        dirs = [runs / f"{e}-{mode}-seed{s}" for e in ENCODINGS for s in SEEDS]
        dirs = [d for d in dirs if done(d)]
        if not dirs:
            continue
        scores = test_scores(dirs, draws)
        ppl = perplexity_change(dirs).set_index("encoding")
        seconds = (
            pd.concat([pd.read_csv(d / "test_summary.csv") for d in dirs]).groupby("encoding")["train_seconds"].mean()
        )
        for row in scores.itertuples(index=False):
            rows.append(
                dict(
                    encoding=row.encoding,
                    mode=mode,
                    task=row.task,
                    score=row.score,
                    low=row.low,
                    high=row.high,
                    exact=row.exact,
                    questions=row.questions,
                    seeds=row.seeds,
                    ppl_before=ppl.loc[row.encoding, "before"],
                    ppl_after=ppl.loc[row.encoding, "after"],
                    ppl_ratio=ppl.loc[row.encoding, "after"] / ppl.loc[row.encoding, "before"],
                    train_seconds=seconds.get(row.encoding),
                    tokens=COMMON["tokens"],
                )
            )
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    parser = Parser(prog="python -m workbench.retrofit.experiment", description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", metavar="ENCODING:MODE", help="run these cells only (repeatable)")
    parser.add_argument("--runs", default=str(RUNS), help="folder of the runs")
    parser.add_argument("--csv", default=None, help=f"the results table (default: {CSV})")
    parser.add_argument(
        "--table",
        action="store_true",
        help="write the table from the runs done, run nothing (none done: says so, exit status 1)",
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help=f"write the table into results/{PUBLISHED.name}, the published one; refused "
        f"unless every registered run ({len(cells())}) is complete",
    )
    args = parser.parse_args(argv)
    try:
        if args.publish and args.csv:
            raise ValueError(f"--publish writes {PUBLISHED}; leave out --csv {args.csv!r}, or leave out --publish")
        # checked before any run starts; --publish is the one way into results/
        csv = PUBLISHED if args.publish else output_path(args.csv or CSV, "--csv")
        todo = [] if args.table else cells(args.only)
        runs = output_path(args.runs, "--runs") if todo else Path(args.runs)
    except ValueError as error:
        parser.fail(error)
    for encoding, mode, seed in todo:
        cfg = config(encoding, mode, seed, runs)
        if done(Path(cfg.run.out)):
            print(f"{cfg.run.out}: complete, not run again", flush=True)
            continue
        started = time.time()
        from .finetune import finetune  # torch and transformers: only once a cell runs

        finetune(_fresh(cfg))
        print(f"{cfg.run.out}: {time.time() - started:.0f} s", flush=True)
    if args.publish and (missing := [r for r in (Path(config(*c, runs).run.out) for c in cells()) if not done(r)]):
        parser.fail(
            ValueError(
                f"--publish writes the registered table whole, from all {len(cells())} runs; {len(missing)} "
                f"are not complete in {runs} (e.g. {missing[0].name}); {PUBLISHED} is left as it is"
            )
        )
    result = table(runs)
    if result.empty:  # only --table gets here without runs: every other path ran or refused them
        parser.exit(
            NOTHING,
            f"{parser.prog}: no complete run in {runs} to tabulate, nothing written; make them with "
            f"`{parser.prog}` (all {len(cells())}) or `{parser.prog} --only none:full` (two)\n",
        )
    write_atomic(csv, lambda tmp: result.to_csv(tmp, index=False))
    print(result.to_string(index=False))
    print(f"written: {csv}")


def _fresh(cfg: RetrofitConfig) -> RetrofitConfig:
    """An interrupted run's partial folder is replaced (complete ones are skipped above)."""
    return cfg.updated(overwrite=Path(cfg.run.out).exists())


if __name__ == "__main__":
    main()
