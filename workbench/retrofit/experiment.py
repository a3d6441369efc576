"""The registered SmolLM2-135M retrofit experiments (docs/study/smollm2-retrofit.md).

    python -m workbench.retrofit.experiment                          # the newest registration, every cell
    python -m workbench.retrofit.experiment --registration first     # issue 43's (4,096 tokens a run)
    python -m workbench.retrofit.experiment --only none:lora         # one reading and mode (every seed)
    python -m workbench.retrofit.experiment --table                  # the CSV from the runs done so far
    python -m workbench.retrofit.experiment --table --publish        # every run done: results/, runs kept

Two registrations, each committed before its runs and never changed after: `first` (issue 43:
SmolLM2-135M-Instruct with its own digit tokens, `none`, and with BitTokens, xVal and FoNE
retrofitted, full fine-tuning and LoRA, 4,096 tokens a run, two seeds) and `learns` (issue 68: the
same readings at a budget where the digit baseline measurably learns, LoRA, five seeds, compared by
Study 4's paired rule). Within one, every cell has the same data, budget and recipe
(`workbench.retrofit.finetune`); only the reading of the numbers and the trained weights differ. A
run already complete in its folder is not run again (so an interrupted experiment resumes at the
run it was in). The table has one row per reading, mode and task: the mean test score with its 95 %
interval (bootstrap over the questions within each seed, then over the seeds:
`workbench.study.hierarchical_bootstrap`), the exact-match share, the held-out text perplexity before
and after fine-tuning (mean over the seeds), and for `learns` the paired gap to the digit baseline
on the same questions with Study 4's t interval and verdict (`workbench.study.study4.paired`). It
goes to runs/ (--csv); only `--publish` writes the published table in results/, only whole (`--table`
or `--only` once replaced the first registration's 16 rows with the 2 of the runs then done), and
keeps every run's settings, curves and answers in results/runs/ (`workbench.study.kept`).
`--table` with no complete run writes nothing and says so in one line, with exit status 1 (a script
that goes on to read the table stops there; 2 is a refused command line).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..cli import Parser
from ..runs.atomic import write_atomic
from ..runs.outputs import RESULTS, output_path
from .config import RetrofitConfig
from .report import perplexity_change, test_scores

MODEL = "smollm2-135m"
ENCODINGS = ("none", "bittokens", "xval", "fone")
BASELINE = "none"
BOOTSTRAP_DRAWS = 2000
NOTHING = 1  # exit status of --table with no complete run: not a usage error (2), but not a table either
RUN_RESULTS = ("test_samples.csv", "perplexity.csv", "model")  # a run holding these is complete
ZERO_SHOT = "zero-shot"  # the mode of the untrained baseline's answers (a registration's reference)


@dataclass(frozen=True)
class Registration:
    """One registered experiment: its cells and the settings every run of it shares."""

    name: str
    modes: dict  # mode name -> the settings that make it
    seeds: tuple[int, ...]
    common: dict  # every run's settings
    runs: Path  # where its runs go
    csv: Path  # --table's default output
    published: Path  # written by --publish only, from all its runs
    keep_runs: bool = False  # --publish also keeps every run's settings, curves and answers (study.kept)
    paired: bool = False  # the table adds Study 4's paired comparison of each encoding with the baseline
    reference: bool = False  # the baseline also answers its test questions untrained (mode ZERO_SHOT)
    encodings: tuple[str, ...] = ENCODINGS
    kept: Path = field(default=RESULTS / "runs")

    @property
    def study(self) -> str:
        """The folder of results/runs/ that keeps its runs."""
        return f"retrofit-{self.name}"


FIRST = Registration(
    name="first",
    modes={"full": dict(lora=False, lr=1e-4), "lora": dict(lora=True, lr=1e-3, lora_rank=16, lora_alpha=32.0)},
    seeds=(0, 1),
    common=dict(
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
    ),
    runs=Path("runs/retrofit-smollm2"),
    csv=Path("runs/retrofit-smollm2.csv"),
    published=RESULTS / "retrofit-smollm2.csv",
)
LEARNS = Registration(
    name="learns",
    modes={"lora": FIRST.modes["lora"]},
    seeds=(0, 1, 2, 3, 4),
    # the first registration's data, model and machine; what differs: the budget, the evaluation's
    # sizes, and <|num|> joined as issue 68 left the defaults (logits at the targets, issue 65)
    common={
        **FIRST.common,
        **dict(tokens=30_000, val_samples=32, eval_every=15, test_samples=150, text_samples=8),
        **dict(num_init="digits", digit_mass="merge", frame="equals", loss_logits="targets"),
    },
    runs=Path("runs/retrofit-learns"),
    csv=Path("runs/retrofit-learns.csv"),
    published=RESULTS / "retrofit-learns.csv",
    keep_runs=True,
    paired=True,
    reference=True,
)
REGISTRATIONS = {r.name: r for r in (FIRST, LEARNS)}
NEWEST = LEARNS.name


def cells(reg: Registration = FIRST, only: list[str] | None = None) -> list[tuple[str, str, int]]:
    """(encoding, mode, seed) of every registered run, or of the `only` ones ("encoding:mode"); the
    untrained baseline's answers (a reference, seconds each) first."""
    chosen = [(BASELINE, ZERO_SHOT, s) for s in reg.seeds] if reg.reference else []
    chosen += [(e, m, s) for m in reg.modes for e in reg.encodings for s in reg.seeds]
    if only:
        known = {f"{e}:{m}" for e, m, _ in chosen}
        unknown = [o for o in only if o not in known]
        if unknown:
            raise ValueError(f"--only {unknown}: choose encoding:mode from {sorted(known)}")
        chosen = [c for c in chosen if f"{c[0]}:{c[1]}" in only]
    return chosen


def config(encoding: str, mode: str, seed: int, runs: Path | None = None, reg: Registration = FIRST, **overrides):
    made = dict(lora=False) if mode == ZERO_SHOT else reg.modes[mode]
    settings = {**reg.common, **made, **overrides}
    out = Path(runs or reg.runs) / f"{encoding}-{mode}-seed{seed}"
    return RetrofitConfig.of(encoding=encoding, seed=seed, out=str(out), **settings)


def done(run: Path) -> bool:
    if run.name.split("-seed")[0].endswith(ZERO_SHOT):
        return (run / "test_samples.csv").exists()
    return all((run / n).exists() for n in RUN_RESULTS)


def commits(dirs) -> str:
    """The workbench commits the runs were made from (environment.json; runs before it: unknown)."""
    import json

    found = set()
    for d in dirs:
        env = Path(d) / "environment.json"
        found.add(json.loads(env.read_text()).get("workbench_commit") if env.exists() else None)
    return " ".join(sorted(c or "unknown" for c in found))


def question_scores(run: Path) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """Per task, the run's test scores in question order, and the questions."""
    samples = pd.read_csv(run / "test_samples.csv", keep_default_na=False, dtype={"prompt": str})
    by = {t: g for t, g in samples.groupby("task", sort=False)}
    return {t: g["score"].astype(float).to_numpy() for t, g in by.items()}, {
        t: list(g["prompt"]) for t, g in by.items()
    }


def comparisons(reg: Registration) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The registered paired comparisons, (encoding, mode) A against B: each retrofitted encoding
    against the baseline in the same mode, and the trained baseline against its untrained self."""
    pairs = [((e, m), (BASELINE, m)) for m in reg.modes for e in reg.encodings if e != BASELINE]
    return pairs + ([((BASELINE, m), (BASELINE, ZERO_SHOT)) for m in reg.modes] if reg.reference else [])


def paired_rows(reg: Registration, runs: Path) -> dict[tuple[str, str, str], dict]:
    """{(encoding, mode, task): Study 4's paired comparison of that cell with its `comparisons`
    partner} where both have every seed. Two runs of a seed answer the same questions (drawn from
    the seed and the regime, never from the reading): checked here, question by question."""
    from ..study.study4 import paired

    out = {}
    answers = functools.cache(question_scores)  # each folder read once: the baseline's serve every reading
    for (ea, ma), (eb, mb) in comparisons(reg):
        a = [runs / f"{ea}-{ma}-seed{s}" for s in reg.seeds]
        b = [runs / f"{eb}-{mb}-seed{s}" for s in reg.seeds]
        if not all(done(d) for d in a + b):
            continue
        left, right = [answers(d) for d in a], [answers(d) for d in b]
        for task in right[0][0]:
            for seed, one, other, folder in zip(reg.seeds, left, right, a):
                if one[1][task] != other[1][task]:
                    raise ValueError(
                        f"{folder} and {eb} ({mb})'s seed {seed} answered other {task} questions: the "
                        "comparison is paired on the same questions"
                    )
            found = paired([x[0][task] for x in left], [x[0][task] for x in right], ea, eb, seeds=reg.seeds)
            out[(ea, ma, task)] = {"versus": f"{eb} ({mb})", **found}
    return out


def table(runs: Path | None = None, reg: Registration = FIRST, draws: int = BOOTSTRAP_DRAWS) -> pd.DataFrame:
    """One row per encoding, mode and task from the complete runs under `runs`."""
    runs = Path(runs or reg.runs)
    versus = paired_rows(reg, runs) if reg.paired else {}
    rows = []
    for mode in ([ZERO_SHOT] if reg.reference else []) + list(reg.modes):
        readings = [BASELINE] if mode == ZERO_SHOT else reg.encodings
        dirs = [d for d in (runs / f"{e}-{mode}-seed{s}" for e in readings for s in reg.seeds) if done(d)]
        if not dirs:
            continue
        scores = test_scores(dirs, draws)
        trained = mode != ZERO_SHOT
        ppl = perplexity_change(dirs).set_index("encoding") if trained else None
        seconds = (
            pd.concat([pd.read_csv(d / "test_summary.csv") for d in dirs]).groupby("encoding")["train_seconds"].mean()
        )
        for row in scores.itertuples(index=False):
            cell = dict(
                encoding=row.encoding,
                mode=mode,
                task=row.task,
                score=row.score,
                low=row.low,
                high=row.high,
                exact=row.exact,
                questions=row.questions,
                seeds=row.seeds,
                ppl_before=ppl.loc[row.encoding, "before"] if trained else None,
                ppl_after=ppl.loc[row.encoding, "after"] if trained else None,
                ppl_ratio=ppl.loc[row.encoding, "after"] / ppl.loc[row.encoding, "before"] if trained else None,
                train_seconds=seconds.get(row.encoding),
                tokens=reg.common["tokens"] if trained else 0,
            )
            if reg.paired:
                gap = versus.get((row.encoding, mode, row.task), {})
                cell.update({k: gap.get(k) for k in ("versus", "gap", "seed_gaps", "verdict", "stuck_seed")})
                cell.update({f"gap_{k}": gap.get(k) for k in ("low", "high", "boot_low", "boot_high")})
                cell["commits"] = commits(d for d in dirs if d.name.startswith(f"{row.encoding}-"))
            rows.append(cell)
    return pd.DataFrame(rows)


def keep(reg: Registration, runs: Path) -> int:
    """Every run's settings, curves and answers into results/runs/<reg.study>/ (study.kept)."""
    from ..study import kept

    new = 0
    for reference in (True, False):
        names = [f"{e}-{m}-seed{s}" for e, m, s in cells(reg) if (m == ZERO_SHOT) == reference]
        folders = {name: runs / name for name in names}
        plain = kept.ZERO_SHOT_PLAIN if reference else kept.RETROFIT_PLAIN
        new += kept.keep(folders, dict.fromkeys(folders, reg.study), reg.kept, plain, trained=not reference)
    return new


def main(argv=None) -> None:
    parser = Parser(prog="python -m workbench.retrofit.experiment", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--registration",
        choices=sorted(REGISTRATIONS),
        default=NEWEST,
        help="which registered experiment (docs/study/smollm2-retrofit.md)",
    )
    parser.add_argument("--only", action="append", metavar="ENCODING:MODE", help="run these cells only (repeatable)")
    parser.add_argument("--runs", default=None, help="folder of the runs (default: the registration's)")
    parser.add_argument("--csv", default=None, help="the results table (default: the registration's, under runs/)")
    parser.add_argument(
        "--table",
        action="store_true",
        help="write the table from the runs done, run nothing (none done: says so, exit status 1)",
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help="write the table into results/, the published one, and keep the runs' settings, curves and "
        "answers in results/runs/; refused unless every registered run is complete",
    )
    args = parser.parse_args(argv)
    reg = REGISTRATIONS[args.registration]
    count = len(cells(reg))
    try:
        if args.publish and args.csv:
            raise ValueError(f"--publish writes {reg.published}; leave out --csv {args.csv!r}, or leave out --publish")
        # checked before any run starts; --publish is the one way into results/
        csv = reg.published if args.publish else output_path(args.csv or reg.csv, "--csv")
        todo = [] if args.table else cells(reg, args.only)
        runs = output_path(args.runs or reg.runs, "--runs") if todo else Path(args.runs or reg.runs)
    except ValueError as error:
        parser.fail(error)
    for encoding, mode, seed in todo:
        cfg = config(encoding, mode, seed, runs, reg)
        if done(Path(cfg.run.out)):
            print(f"{cfg.run.out}: complete, not run again", flush=True)
            continue
        started = time.time()
        from .finetune import finetune, zero_shot  # torch and transformers: only once a cell runs

        (zero_shot if mode == ZERO_SHOT else finetune)(_fresh(cfg))
        print(f"{cfg.run.out}: {time.time() - started:.0f} s", flush=True)
    if args.publish and (
        missing := [r for r in (Path(config(*c, runs, reg).run.out) for c in cells(reg)) if not done(r)]
    ):
        parser.fail(
            ValueError(
                f"--publish writes the registered table whole, from all {count} runs; {len(missing)} "
                f"are not complete in {runs} (e.g. {missing[0].name}); {reg.published} is left as it is"
            )
        )
    result = table(runs, reg)
    if result.empty:  # only --table gets here without runs: every other path ran or refused them
        only = f"{reg.encodings[0]}:{next(iter(reg.modes))}"
        flag = "" if reg.name == NEWEST else f" --registration {reg.name}"
        parser.exit(
            NOTHING,
            f"{parser.prog}: no complete run in {runs} to tabulate, nothing written; make them with "
            f"`{parser.prog}{flag}` (all {count}) or `{parser.prog}{flag} --only {only}` "
            f"({len(reg.seeds)})\n",
        )
    if args.publish and reg.keep_runs:  # first: a run that cannot be kept stops the publishing
        try:
            print(f"kept: {keep(reg, runs)} new runs in {reg.kept / reg.study}")
        except ValueError as error:
            parser.fail(error)
    write_atomic(csv, lambda tmp: result.to_csv(tmp, index=False))
    print(result.to_string(index=False))
    print(f"written: {csv}")


def _fresh(cfg: RetrofitConfig) -> RetrofitConfig:
    """An interrupted run's partial folder is replaced (complete ones are skipped above)."""
    return cfg.updated(overwrite=Path(cfg.run.out).exists())


def figure(published: pd.DataFrame, mode: str = "lora"):
    """Notebook 05's figure of a registered experiment's published table (`table`'s rows): the test
    score per task with its 95 % interval for every reading fine-tuned in `mode`, and the held-out
    text perplexity before and after (`report.figure`); the untrained baseline's scores, where the
    registration has them, in the subtitle."""
    from .. import encoders
    from ..figures import plots
    from .report import figure as scores_figure

    rows = published[published["mode"] == mode]
    if rows.empty:
        raise ValueError(f"the table has no rows of mode {mode!r}; it has {sorted(set(published['mode']))}")
    readings = [e for e in ENCODINGS if e in set(rows.encoding)]
    tasks = list(dict.fromkeys(rows.task))
    ppl = rows.groupby("encoding", sort=False)[["ppl_before", "ppl_after"]].first()
    ppl = ppl.rename(columns={"ppl_before": "before", "ppl_after": "after"}).reset_index()
    labels = {e: encoders.label(e) for e in readings if e != BASELINE} | {BASELINE: "own digit tokens"}
    colors = {e: plots.ENCODING_COLORS.get(e, "#444444") for e in readings}
    reference = published[published["mode"] == ZERO_SHOT]
    untrained = ", ".join(f"{r.task} {r.score:.2g}" for r in reference.itertuples())
    first = rows.iloc[0]
    subtitle = (
        f"{int(first.tokens):,} fine-tuning tokens a run, {'LoRA' if mode == 'lora' else mode}, {int(first.seeds)} seeds, "
        f"{int(first.questions)} test questions per task and seed"
        + (f"; own digit tokens untrained: {untrained}" if untrained else "")
    )
    return scores_figure(
        rows[["encoding", "task", "score", "low", "high"]],
        ppl,
        readings,
        tasks,
        labels,
        colors,
        title="Number encodings retrofitted into SmolLM2-135M-Instruct (the registered experiment)",
        subtitle=subtitle,
        baseline=BASELINE,
    )


if __name__ == "__main__":
    main()
