"""Pre-registered comparisons of the five encodings: one protocol, every encoding, several seeds.

    python -m workbench.experiments cpu-tier [--seeds 0 1] [--out runs/cpu-tier]
    python -m workbench.experiments ablations [--tables 8 9 ...] [--smoke]    # Tables 8-15
    python -m workbench.experiments study [--jobs 2]    # docs/study/
    python -m workbench.experiments study --out runs/study3 --score-generator    # score Study 3, no training
    torchrun --nproc_per_node 8 -m workbench.experiments paper-tier    # on 8 GPUs
    python -m workbench.experiments paper-tier --executor slurm --partition gpu    # a job of 8 GPUs per run

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
where it stopped. Results: one CSV in the schema of `workbench.results` plus tokens per
problem (Table 5).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from . import encoders, study, tasks
from .cli import Parser, add_arguments, unknown, values_of
from .config import TrainConfig
from .runs.atomic import write_atomic
from .runs.executors import Executor, RunsFailed, Terminated, run_all
from .runs.locks import InUse, hold
from .runs.outputs import output_path
from .study import generator
from .training import ablations

# The paper's multi-task mix (section 6): the comparison and single-step tasks (plus text at scale).
SIX_TASKS = tuple(tasks.names("single_step") + tasks.names("comparison"))
PROTOCOLS = {
    "cpu-tier": TrainConfig.of(
        tasks=SIX_TASKS,
        preset="cpu-tiny",
        tokens=3e6,
        batch_size=8,
        decades=(0, 1),
        max_digits=2,
        pool_size=50_000,
        val_samples=48,
        test_samples=500,
        eval_every=200,
        checkpoint_every=200,
    ),
    # torchrun --nproc_per_node 8 -m workbench.experiments paper-tier: 8 GPUs x 24 rows = batch 192 (fewer GPUs
    # accumulate micro-batches to the same 192), --config paper's vocabulary and evaluation cadence
    "paper-tier": TrainConfig.of(
        tasks=SIX_TASKS + tuple(tasks.names("text")),
        preset="paper",
        tokens=1e10,
        batch_size=24,
        grad_accum=None,
        global_batch=192,
        decades=None,
        max_digits=None,
        pool_size=1_000_000,
        val_samples=384,
        test_samples=10_000,
        eval_every=64,
        checkpoint_every=1000,
        text_bpe="gpt2",
        bf16=True,
        compile=True,
        threads=0,
    ),
}
# A paper-tier job takes a node's 8 GPUs (torchrun inside it, one process per GPU) for a day at most.
PAPER_TIER_JOBS = Executor(gpus_per_job=8, cpus_per_job=8, time=24 * 60)


def run_protocol(
    name: str,
    seeds=(0, 1),
    out="runs/cpu-tier",
    encodings=None,
    jobs: int = 1,
    overwrite: bool = False,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Train every encoding × seed under protocol `name`; return and save the results table."""
    out = output_path(out, "out")
    runs = protocol_runs(name, seeds, encodings)
    with _writer(out):  # under torchrun every rank trains, rank 0 writes
        trained = run_all(runs, out, jobs, overwrite, desc=name, executor=executor)
        table = pd.concat([trained[n] for n in runs], ignore_index=True)
        if _rank() == 0:
            write_atomic(out / "results.csv", lambda tmp: table.to_csv(tmp, index=False))
    return table


def protocol_runs(name: str, seeds=(0, 1), encodings=None) -> dict[str, TrainConfig]:
    """{run name: configuration} of protocol `name`: every encoding x seed."""
    if name not in PROTOCOLS:
        raise ValueError(unknown("protocol", name, PROTOCOLS))
    return {
        f"{e}-seed{s}": PROTOCOLS[name].updated(encoding=e, seed=s)
        for e in encodings or encoders.names()
        for s in seeds
    }


def _rank() -> int:
    return int(os.environ.get("RANK", 0))


def _writer(out: Path):
    """The output folder's lock, held by the one process that writes (rank 0 under torchrun)."""
    return hold(out) if _rank() == 0 else nullcontext()


def run_ablations(
    tables=tuple(ablations.TABLES),
    seeds=(0,),
    out="runs/ablations",
    base: TrainConfig | None = None,
    smoke: bool = False,
    jobs: int = 1,
    overwrite: bool = False,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Every variant of the ablation `tables` (Tables 8-15) on `base` (default: the cpu-tier
    protocol; `smoke`: a few steps each, to check that every ablation runs). One CSV, results.csv,
    with the delta of each value to its table's baseline; each table printed as the paper does."""
    out = output_path(out, "out")
    runs = ablations.plan(tables, _ablation_base(base, smoke), seeds)
    with _writer(out):
        configs = dict(zip(runs.run, runs.config))  # a configuration shared by several tables trains once
        trained = run_all(configs, out, jobs, overwrite, desc="ablations", executor=executor)
        results = pd.concat(
            [
                trained[r.run].assign(table=r.table, variant=r.variant, baseline=r.baseline, run=r.run)
                for r in runs.itertuples(index=False)
            ],
            ignore_index=True,
        )
        results = ablations.with_deltas(results)
        if _rank() == 0:
            write_atomic(out / "results.csv", lambda tmp: results.to_csv(tmp, index=False))
    return results


def _ablation_base(base: TrainConfig | None, smoke: bool) -> TrainConfig:
    base = base or PROTOCOLS["cpu-tier"]
    if smoke:
        base = base.updated(
            batch_size=2,
            tokens=2 * base.model_config().block_size * 8,
            pool_size=200,
            val_samples=4,
            test_samples=8,
            eval_every=4,
            checkpoint_every=4,
        )
    return base


def _planned(args) -> tuple[str, dict[str, TrainConfig]]:
    """(what the plan is, {run name: configuration}) of the command's runs, for --dry-run."""
    if args.protocol == "study":
        which = args.studies or list(study.PREREGISTERED)
        runs = study.select(
            study.plan(which),
            encodings=args.encodings,
            seeds=args.seeds,
            tasks_=args.tasks,
            digits=args.digits,
            budgets=args.budgets,
        )
        return f"study ({', '.join(which)})", {r.name: r.config for r in runs}
    if args.protocol == "ablations":
        runs = ablations.plan(args.tables, _ablation_base(None, args.smoke), args.seeds)
        return f"ablations (tables {' '.join(map(str, args.tables))})", dict(zip(runs.run, runs.config))
    return args.protocol, protocol_runs(args.protocol, args.seeds, args.encodings)


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """One row per task x encoding: mean and std over seeds of the score (log-sMAPE or accuracy)
    and of exact match, tokens per problem (input + output, Table 5), minutes of training;
    within a task the rows run from the best score down."""
    table = table.assign(
        **{c: table[c] if c in table else np.nan for c in ("input_tokens", "output_tokens", "train_seconds")}
    )
    score = table[table.metric != "exact_match"]
    exact = table[table.metric == "exact_match"]
    keys = ["task", "encoding"]
    out = score.groupby(keys).agg(
        metric=("metric", "first"),
        score=("value", "mean"),
        score_std=("value", "std"),
        seeds=("seed", "nunique"),
        tokens=("input_tokens", "mean"),
        output_tokens=("output_tokens", "mean"),
        minutes=("train_seconds", "mean"),
    )
    out["tokens"] += out.pop("output_tokens")
    out["minutes"] /= 60
    out = out.join(exact.groupby(keys)["value"].agg(exact="mean", exact_std="std"))
    out = out.reset_index().sort_values(["task", "score"], ascending=[True, False])
    return out[
        ["task", "encoding", "metric", "score", "score_std", "exact", "exact_std", "tokens", "minutes", "seeds"]
    ].reset_index(drop=True)


def _parser() -> Parser:
    parser = Parser(prog="python -m workbench.experiments", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="protocol", required=True, metavar="{study,ablations,cpu-tier,paper-tier}")
    _add_study(commands)
    _add_ablations(commands)
    _add_tiers(commands)
    for sub in commands.choices.values():
        _add_common(sub)
    return parser


def _add_study(commands) -> None:
    """The `study` command: which runs of the study's parts, and scoring finished runs on other questions."""
    study_ = commands.add_parser(
        "study",
        help="the study of docs/study/ (resumable)",
        description="Train the runs of the study's parts not finished yet (docs/study/), "
        "then write OUT/cpu-study.csv and OUT/cpu-study-intervals.csv.",
    )
    study_.add_argument(
        "--studies",
        nargs="+",
        choices=study.PARTS,
        metavar="PART",
        help=f"which parts, of {', '.join(study.PARTS)} (decimal_pool: the exploratory BitTokens runs "
        "without binary pools; multitask_numeric: Study 2b, the checkpoint chosen without text's "
        f"score; default: {' '.join(study.PREREGISTERED)}, or with --score-*: "
        f"{' '.join(study.BUDGET_PARTS)})",
    )
    study_.add_argument(
        "--encodings",
        nargs="+",
        # a study names a run's encoding as its results do: BitTokens without binary pools is a
        # run label of its own, so that it can be chosen apart from the recipe's BitTokens
        choices=encoders.known() + [study.VARIANT],
        metavar="ENCODING",
        help=f"only these encodings' runs, named as in the results ({study.VARIANT}: BitTokens "
        "without binary pools; default: all)",
    )
    study_.add_argument("--seeds", nargs="+", type=int, metavar="SEED", help="only these seeds' runs (default: all)")
    study_.add_argument(
        "--tasks",
        nargs="+",
        choices=tasks.names() + ["multitask"],
        metavar="TASK",
        help="only runs of these solo tasks, or 'multitask' for the multi-task runs (default: all)",
    )
    study_.add_argument(
        "--digits", nargs="+", type=int, metavar="D", help="only runs at these operand digits (default: all)"
    )
    study_.add_argument(
        "--budgets",
        nargs="+",
        type=_budget,
        metavar="TOKENS",
        help="only runs of these training budgets, in tokens: 1M, 3M, 10M or 1e6 ... (default: all)",
    )
    scoring = study_.add_argument_group(
        "scoring without training",
        "answer other questions with the best checkpoint of every finished run of "
        "--studies in --out (narrowed by the flags above); nothing is trained, runs already scored are skipped",
    )
    scoring.add_argument(
        "--score-official",
        metavar="DATA",
        help="the authors' released 500-question test set of each run's task, from the released-data "
        f"folder DATA: OUT/{study.OFFICIAL_FILE}",
    )
    scoring.add_argument(
        "--score-generator",
        action="store_true",
        help="questions of an independent generator, reasoning-gym (workbench/study/generator.py; needs "
        f"{generator.INSTALL}): OUT/{study.GENERATOR_FILE}",
    )
    scoring.add_argument(
        "--score-length",
        action="store_true",
        help="the length axis (--studies zoo2_length): 500 additions at each operand length of "
        f"{study.length.LENGTHS[0]} ... {study.length.LENGTHS[-1]} digits: OUT/{study.length.LENGTH_FILE}",
    )
    scoring.add_argument(
        "--generator-questions",
        type=int,
        default=500,
        metavar="N",
        help="questions per task drawn by the generator (default: 500)",
    )
    scoring.add_argument(
        "--generator-seed", type=int, default=0, metavar="SEED", help="the generator's seed (default: 0)"
    )


def _add_ablations(commands) -> None:
    """The `ablations` command: Tables 8-15."""
    ablations_ = commands.add_parser(
        "ablations",
        help="Tables 8-15, each a switch of the recipe (resumable)",
        description="Train every variant of the ablation tables on the cpu-tier "
        "protocol; print each table as the paper does (values, and deltas "
        "where the paper prints them: Tables 9-12).",
    )
    ablations_.add_argument(
        "--tables",
        type=int,
        nargs="+",
        default=sorted(ablations.TABLES),
        metavar="N",
        choices=sorted(ablations.TABLES),
        help="ablation tables to run (default: 8 ... 15)",
    )
    ablations_.add_argument(
        "--seeds", type=int, nargs="+", default=[0], metavar="SEED", help="seeds of every variant (default: 0)"
    )
    ablations_.add_argument(
        "--smoke",
        action="store_true",
        help="a few steps per run, to check every ablation runs (scores near 0 are expected)",
    )


def _add_tiers(commands) -> None:
    """The `cpu-tier` and `paper-tier` commands: every encoding on one protocol."""
    for name, about in (
        ("cpu-tier", "the multi-task comparison of every encoding at laptop scale"),
        (
            "paper-tier",
            "the same protocol at the paper's scale (8 GPUs: torchrun --nproc_per_node 8, "
            "or one 8-GPU job per run with --executor slurm)",
        ),
    ):
        tier = commands.add_parser(name, help=about, description=f"Train {about}; one results table.")
        tier.add_argument(
            "--encodings", nargs="+", choices=encoders.known(), metavar="ENCODING", help="encodings (default: all)"
        )
        tier.add_argument(
            "--seeds",
            type=int,
            nargs="+",
            default=[0, 1],
            metavar="SEED",
            help="seeds of every encoding (default: 0 1)",
        )


def _add_common(sub) -> None:
    """What every command takes: where its runs go, a dry run, and where they train (the executor)."""
    sub.add_argument("--out", default=None, help="folder of the runs and the tables (default: runs/PROTOCOL)")
    sub.add_argument(
        "--overwrite",
        action="store_true",
        help="retrain finished runs whose recorded configuration differs from the plan",
    )
    sub.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (runs, how many are finished or resumable in --out, tokens, an "
        "estimated time) and stop: nothing is trained or written",
    )
    if sub.prog.split()[-1] != "paper-tier":  # paper-tier runs under torchrun, one run at a time
        jobs = 2 if sub.prog.endswith("study") else 1
        sub.add_argument(
            "--jobs", type=int, default=jobs, help=f"runs trained side by side, one thread each (default: {jobs})"
        )
    jobs_ = PAPER_TIER_JOBS if sub.prog.endswith("paper-tier") else Executor()
    where = sub.add_argument_group(
        "executor",
        "where the runs train: this machine, or one job per run (submitit: "
        "local processes or a Slurm cluster); defaults: --executor local --time "
        f"{jobs_.time} --cpus-per-job {jobs_.cpus_per_job} --gpus-per-job {jobs_.gpus_per_job}",
    )
    add_arguments(where, Executor, jobs_)


def _budget(text: str) -> float:
    """A training budget in tokens: "3M" or a number ("3e6")."""
    try:
        tokens = float(text[:-1]) * 1e6 if text.upper().endswith("M") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a token budget: {text!r} (give 1M, 3M, 10M or a number)") from None
    if not tokens >= 1:
        raise argparse.ArgumentTypeError(f"a token budget must be at least 1, got {text!r}")
    return tokens


def _score(args, out: str) -> None:
    """--score-official / --score-generator: score the finished runs, print the mean per cell."""
    which = args.studies or ([study.ZOO2_LENGTH] if args.score_length else list(study.BUDGET_PARTS))
    selection = dict(
        encodings=args.encodings, seeds=args.seeds, tasks_=args.tasks, digits=args.digits, budgets=args.budgets
    )
    if args.overwrite:
        raise ValueError("--overwrite retrains runs; --score-official and --score-generator train nothing")
    if not Path(out).is_dir():
        raise ValueError(f"--out {out!r} is not a folder of study runs")
    tables = {}
    if args.score_official:
        from .frontier.official import data_dir

        data_dir(args.score_official)  # a missing folder stops here, before any run is loaded
        tables["the authors' released test sets"] = study.official_scores(out, args.score_official, which, **selection)
    if args.score_generator:
        generator.check_draw(args.generator_questions, args.generator_seed)
        table = study.generator_scores(out, args.generator_questions, args.generator_seed, which, **selection)
        for task, dropped in table.attrs.get("dropped", {}).items():
            print(f"reasoning-gym, {task}: items dropped per source and reason {dropped}")
        tables["reasoning-gym's questions"] = table
    if args.score_length:
        if other := sorted(set(which) - {study.ZOO2_LENGTH}):
            raise ValueError(f"--score-length scores the length axis (--studies {study.ZOO2_LENGTH}), not {other}")
        table = study.length.length_scores(out, **selection)
        if len(table):
            cells = study.length.length_cells(table)
            print("\nlonger numbers than trained on: mean per encoding and length (95 % interval)")
            print(cells.round(3).to_string(index=False))
            print(f"\nagainst {study.length.CONTROL} (the leaderboard's rule)")
            print(study.length.against_control(cells).round(3).to_string(index=False))
        else:
            print("\nlonger numbers than trained on: no finished run to score")
    for name, table in tables.items():
        print(f"\n{name}: mean per cell" + ("" if len(table) else ": no finished run to score"))
        if len(table):
            print(study.scored_cells(table).round(3).to_string(index=False))


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    out = args.out or f"runs/{args.protocol}"
    try:
        # first of all: a study's clean-up once rewrote results/cpu-study.csv to 0 rows after a Ctrl-C
        out = str(output_path(out, "--out"))
        executor = Executor(**values_of(vars(args), Executor))
        scoring = args.protocol == "study" and (args.score_official or args.score_generator or args.score_length)
        if args.dry_run and scoring:
            raise ValueError("--dry-run shows a plan of training; --score-official/-generator/-length train nothing")
        if args.dry_run:
            from .runs.dryrun import report

            desc, runs = _planned(args)
            print(report(desc, runs, out, getattr(args, "jobs", 1), args.overwrite, executor))
        elif scoring:
            _score(args, out)
        elif args.protocol == "study":
            results = study.run_study(
                args.studies or list(study.PREREGISTERED),
                out,
                args.jobs,
                args.overwrite,
                executor,
                encodings=args.encodings,
                seeds=args.seeds,
                tasks_=args.tasks,
                digits=args.digits,
                budgets=args.budgets,
            )
            print(
                results.groupby(["study", "task", "digits", "encoding", "metric"])["score"].mean().round(3).to_string()
            )
        elif args.protocol == "ablations":
            results = run_ablations(
                args.tables,
                args.seeds,
                out,
                smoke=args.smoke,
                jobs=args.jobs,
                overwrite=args.overwrite,
                executor=executor,
            )
            for table in args.tables:
                print(f"\nTable {table}\n" + ablations.paper_layout(results, table).to_string())
        else:
            table = run_protocol(
                args.protocol, args.seeds, out, args.encodings, getattr(args, "jobs", 1), args.overwrite, executor
            )
            print(summarize(table).round(3).to_string(index=False))
    except (ValueError, OSError, ImportError, InUse, RunsFailed, MemoryError) as err:
        parser.fail(err)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: one line, no traceback; the shell's code
        if _rank() == 0:
            print(
                f"\n{'terminated' if isinstance(stop, Terminated) else 'interrupted'}: the finished runs in {out} are kept and a stopped run resumes from its last "
                "checkpoint: run the same command again to go on",
                file=sys.stderr,
            )
        sys.exit(getattr(stop, "code", 128 + signal.SIGINT))


if __name__ == "__main__":
    main()
