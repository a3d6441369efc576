"""The laptop-scale study of docs/study.md: where does the BitTokens advantage appear?
(Over 500 lines: every part's plan, its registered analysis and figures, and Study 3's scorings.)

    python -m workbench.experiments study [--jobs 2] [--out runs/study]
    python -m workbench.experiments study --studies decimal_pool     # the exploratory part
    python -m workbench.experiments study --studies multitask_numeric  # Study 2b

Study 1 (precision): multiplication and division, each encoding trained alone, operands of at most
d significant digits, d in DIGITS; Study 2 (multi-task): the six comparison and single-step tasks
plus text, every encoding, three seeds. Every run uses the recipe's defaults (docs/fidelity.md) and
differs from the others only in what its study varies. A third part, "decimal_pool", is exploratory
(added after the pre-registered runs, docs/study.md): BitTokens without A.3's binary pools on both
studies' grids, to test whether the binary-pool phase explains BitTokens' scores. A fourth,
"multitask_numeric" (Study 2b, registered after Study 2's results), repeats Study 2 with the best
checkpoint chosen by the numeric tasks' harmonic mean alone (`--no-select-with-text`). Runs go to
OUT/<run name>; a finished run is not trained again, so an interrupted study resumes; `--jobs` runs
train side by side, one thread each.

Results: OUT/cpu-study.csv, one row per run, task and metric (study, encoding, task, digits, seed,
metric, score, input_tokens, output_tokens, train_seconds; perplexity rows for text), and
OUT/cpu-study-intervals.csv, the mean and its 95 % bootstrap interval per point (resampling the
seeds, then the test questions within each seed); both hold every finished run of every part.
Study 3's models are also scored on questions made elsewhere, without training (`official_scores`:
the authors' released test sets, OUT/cpu-study-official.csv; `generator_scores`: reasoning-gym's,
workbench/generator.py, OUT/cpu-study-generator.csv).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from . import encoders, tasks
from .atomic import write_atomic
from .config import TrainConfig
from .executors import Executor, run_all
from .locks import hold

ENCODINGS = tuple(encoders.in_paper())  # the paper's five
DIGITS = (1, 2, 3, 4)
PRECISION_TASKS = ("multiplication", "division")
PRECISION_SEEDS = (0, 1)
MULTITASK_SEEDS = (0, 1, 2)
PREREGISTERED = ("precision", "multitask")
DECIMAL_POOL = "decimal_pool"  # exploratory: BitTokens sample the decimal pool from the start
NUMERIC_CHECKPOINT = "multitask_numeric"  # Study 2b: Study 2 with the checkpoint chosen by the numeric tasks
ZOO_PRECISION, ZOO_MULTITASK = "zoo_precision", "zoo_multitask"  # the zoo: Study 1's and Study 2b's protocols
WIDTH = "width"  # exploratory: BitTokens and single digit in a 256-wide model (Study 1's protocol at d = 2)
# Study 3 (docs/study.md): budget x precision, in three registered parts run in this order
BUDGET, BUDGET_D8, BUDGET_MORE = "budget", "budget_d8", "budget_more"
BUDGET_PARTS = (BUDGET, BUDGET_D8, BUDGET_MORE)
PARTS = PREREGISTERED + (DECIMAL_POOL, NUMERIC_CHECKPOINT, ZOO_PRECISION, ZOO_MULTITASK, WIDTH) + BUDGET_PARTS
MULTITASK_PARTS = ("multitask", NUMERIC_CHECKPOINT)  # the parts Figure 4's third row can show
PART_LABELS = {"multitask": "Study 2", NUMERIC_CHECKPOINT: "Study 2b, checkpoint chosen without text's score"}
VARIANT = "bittokens_decimal_pool"  # the exploratory runs drawn as a sixth encoding of their study
RESULTS_FILE, INTERVALS_FILE = "cpu-study.csv", "cpu-study-intervals.csv"  # what run_study writes into OUT
# The shared small scale: cpu-tiny, batch 8 x 128, operands of magnitude 1 ... 100.
COMMON = dict(
    preset="cpu-tiny",
    batch_size=8,
    decades=(0, 1),
    pool_size=20_000,
    test_samples=500,
    eval_every=100,
    checkpoint_every=100,
    threads=1,
)
PRECISION = TrainConfig.of(tasks=("multiplication",), tokens=1e6, val_samples=32, **COMMON)
MULTITASK = TrainConfig.of(
    tasks=tuple(tasks.names("single_step") + tasks.names("comparison") + tasks.names("text")),
    tokens=4e6,
    max_digits=1,
    val_samples=64,
    **COMMON,
)


# Study 3: the two axes on which the paper's gap lives, the numbers' length and the training budget.
# d = 17 stands for the paper's own regime (magnitudes 1e-14 ... 1e15, at most 17 significant
# digits, --decades and --max-digits None); the other d at magnitudes 1 ... 100.
PAPER_REGIME = 17
BUDGETS = (1e6, 3e6, 1e7)
BUDGET_SEEDS = (0, 1, 2)
BUDGET_DIGITS, BUDGET_D8_DIGITS = (4, 15, PAPER_REGIME), (8,)
# the leaderboard's strongest multi-token encoding: the highest mean log-sMAPE over Study 1's eight
# (task, d) cells among the multi-token encodings other than single digit (results/, at registration)
STRONGEST_MULTI_TOKEN = "ntl"
# Study 1's recipe and model with the paper's pool of a million questions per task: at 8-9 tokens a
# question, a 10M-token BitTokens run draws 1.2M questions, which a 20,000-question pool would
# repeat 60 times (Study 3 measures learning with the budget, not memorising)
BUDGET_BASE = PRECISION.updated(pool_size=1_000_000)


@dataclass(frozen=True)
class Run:
    study: str
    encoding: str
    task: str  # the solo task, or "multitask"
    digits: int
    seed: int
    config: TrainConfig

    @property
    def name(self) -> str:
        return f"{self.study}-{self.task}-d{self.digits}-{self.encoding}-seed{self.seed}"


def zoo_encodings() -> tuple[str, ...]:
    """Every registered encoding that is not one of the paper's five (a plugin joins by registering)."""
    return tuple(n for n in encoders.names() if n not in ENCODINGS)


def _precision(study: str, encodings, base: TrainConfig = PRECISION, digits=DIGITS) -> list[Run]:
    return [
        Run(study, e, t, d, s, base.updated(encoding=e, tasks=(t,), max_digits=d, seed=s))
        for t in PRECISION_TASKS
        for d in digits
        for e in encodings
        for s in PRECISION_SEEDS
    ]


def _multitask(study: str, encodings, select_with_text: bool = True) -> list[Run]:
    return [
        Run(
            study,
            e,
            "multitask",
            MULTITASK.data.max_digits,
            s,
            MULTITASK.updated(encoding=e, seed=s, select_with_text=select_with_text),
        )
        for e in encodings
        for s in MULTITASK_SEEDS
    ]


def budget_label(tokens: float) -> str:
    return f"{tokens / 1e6:g}M"


def _budget_run(encoding: str, task: str, digits: int, seed: int, tokens: float) -> Run:
    """One Study 3 run: `encoding` as the results name it (VARIANT: BitTokens without A.3's binary
    pools), trained alone on `task` for `tokens`."""
    regime = dict(decades=None, max_digits=None) if digits == PAPER_REGIME else dict(max_digits=digits)
    name = "bittokens" if encoding == VARIANT else encoding
    cfg = BUDGET_BASE.updated(
        encoding=name, binary_pool=encoding != VARIANT, tasks=(task,), seed=seed, tokens=tokens, **regime
    )
    return Run(f"budget_{budget_label(tokens)}", encoding, task, digits, seed, cfg)


def _budget_grid(encodings, digits, budgets=BUDGETS) -> list[Run]:
    """Budget first (every 1M run before any 3M run), so that a study cut short by time leaves whole budgets."""
    return [
        _budget_run(e, t, d, s, b)
        for b in budgets
        for t in PRECISION_TASKS
        for d in digits
        for e in encodings
        for s in BUDGET_SEEDS
    ]


def plan(which=PREREGISTERED) -> list[Run]:
    runs = []
    if "precision" in which:
        runs += _precision("precision", ENCODINGS)
    if "multitask" in which:
        runs += _multitask("multitask", ENCODINGS)
    if DECIMAL_POOL in which:
        solo = PRECISION.updated(encoding="bittokens", binary_pool=False)
        runs += [
            Run(f"precision_{DECIMAL_POOL}", "bittokens", t, d, s, solo.updated(tasks=(t,), max_digits=d, seed=s))
            for t in PRECISION_TASKS
            for d in DIGITS
            for s in PRECISION_SEEDS
        ]
        runs += [
            Run(
                f"multitask_{DECIMAL_POOL}",
                "bittokens",
                "multitask",
                MULTITASK.data.max_digits,
                s,
                MULTITASK.updated(encoding="bittokens", binary_pool=False, seed=s),
            )
            for s in MULTITASK_SEEDS
        ]
    if NUMERIC_CHECKPOINT in which:
        runs += [
            replace(r, study=NUMERIC_CHECKPOINT, config=r.config.updated(select_with_text=False))
            for r in plan(["multitask"])
        ]
    if ZOO_PRECISION in which:
        runs += _precision(ZOO_PRECISION, zoo_encodings())
    if ZOO_MULTITASK in which:
        runs += _multitask(ZOO_MULTITASK, zoo_encodings(), select_with_text=False)
    if WIDTH in which:
        runs += _precision(WIDTH, ("bittokens", "single_digit"), PRECISION.updated(preset="cpu-tiny-wide"), digits=(2,))
    if BUDGET in which:  # the core: BitTokens without binary pools and single digit
        runs += _budget_grid((VARIANT, "single_digit"), BUDGET_DIGITS)
    if BUDGET_D8 in which:
        runs += _budget_grid((VARIANT, "single_digit"), BUDGET_D8_DIGITS)
    if BUDGET_MORE in which:  # the recipe's BitTokens and the strongest multi-token encoding, 10M first
        more = ("bittokens", STRONGEST_MULTI_TOKEN)
        runs += _budget_grid(more, BUDGET_DIGITS + BUDGET_D8_DIGITS, budgets=(1e7,))
        runs += _budget_grid(more, BUDGET_DIGITS + BUDGET_D8_DIGITS, budgets=(1e6, 3e6))
    return runs


def select(runs: list[Run], encodings=None, seeds=None, tasks_=None, digits=None, budgets=None) -> list[Run]:
    """The runs whose encoding, seed, task ("multitask" for a multi-task run), digits and token
    budget are among those given (None: any)."""
    chosen = [
        r
        for r in runs
        if (encodings is None or r.encoding in encodings)
        and (seeds is None or r.seed in seeds)
        and (tasks_ is None or r.task in tasks_)
        and (digits is None or r.digits in digits)
        and (budgets is None or r.config.tokens in budgets)
    ]
    if runs and not chosen:
        raise ValueError(
            "no run of the chosen parts matches --encodings/--seeds/--tasks/--digits/--budgets "
            f"{[encodings, seeds, tasks_, digits, budgets]}"
        )
    return chosen


def finished(cfg: TrainConfig) -> bool:
    """rundir.finished (the study needs it before torch is imported: experiments' --help)."""
    from .rundir import finished as done

    return done(cfg)


def stale(runs: list[Run], out: Path) -> dict[str, str]:
    """{run name: the settings in which its finished run in OUT differs from the plan}."""
    from .rundir import recorded_differences  # torch: not at import (the commands' --help)

    found = {}
    for r in runs:
        cfg = r.config.updated(out=str(out / r.name))
        if finished(cfg) and (differ := recorded_differences(cfg)):
            found[r.name] = differ
    return found


def run_study(
    which=PREREGISTERED,
    out="runs/study",
    jobs: int = 2,
    overwrite: bool = False,
    executor: Executor | None = None,
    **selection,
) -> pd.DataFrame:
    """Train every run of `which` (narrowed by `select`'s `selection`) not finished yet, `jobs` at a
    time (or as jobs of `executor`), then write and return the results of every finished run of
    every part. A run counts as finished only if its recorded configuration is the plan's: a
    finished run of another configuration stops the study with its settings named, or is
    retrained with `overwrite`."""
    out = Path(out)
    with hold(out):  # one study per folder
        runs = select(plan(which), **selection)
        differ = stale(runs, out)
        if differ and not overwrite:
            shown = "; ".join(f"{name}: {d}" for name, d in list(differ.items())[:3])
            raise ValueError(
                f"{len(differ)} run(s) in {out} were trained with another configuration than the plan "
                f"({shown}{' ...' if len(differ) > 3 else ''}); --overwrite retrains them"
            )
        todo = {
            r.name: r.config for r in runs if r.name in differ or not finished(r.config.updated(out=str(out / r.name)))
        }
        try:
            run_all(todo, out, jobs, overwrite, desc="study", executor=executor)
        finally:  # the finished runs are tabled even when others failed
            results = write_results(out)
        return results


def write_results(out: Path) -> pd.DataFrame:
    """Results and intervals of every finished run in OUT that is the plan's (runs of another
    configuration are left out, with a warning naming them)."""
    everything = plan(PARTS)
    differ = stale(everything, out)
    if differ:
        warnings.warn(
            f"left out of the results, trained with another configuration than the plan: {sorted(differ)}", stacklevel=2
        )
    done = [r for r in everything if r.name not in differ and finished(r.config.updated(out=str(out / r.name)))]
    results = collect(done, out)
    write_atomic(out / RESULTS_FILE, lambda tmp: results.to_csv(tmp, index=False))
    intervals = bootstrap_intervals(done, out)
    write_atomic(out / INTERVALS_FILE, lambda tmp: intervals.to_csv(tmp, index=False))
    return results


OFFICIAL_FILE = "cpu-study-official.csv"  # Study 3's models on the authors' released test questions
GENERATOR_FILE = "cpu-study-generator.csv"  # ... and on questions of an independent generator (generator.py)


def _unscored(out: Path, which, table: pd.DataFrame, **selection) -> list[Run]:
    """The finished runs of `which` in OUT (narrowed by `select`'s `selection`) with no row in `table`."""
    scored = set(table["run"]) if "run" in table else set()
    return [
        r
        for r in select(plan(which), **selection)
        if finished(r.config.updated(out=str(out / r.name))) and r.name not in scored
    ]


def _answer(out: Path, r: Run, questions: pd.DataFrame) -> pd.DataFrame:
    """Run r's best checkpoint answers `questions` of its task, scored; the study's columns added."""
    from .evaluate import evaluate
    from .rundir import load_run

    model, tok, _ = load_run(out / r.name)
    answers = evaluate(model, tok, {r.task: questions[["prompt", "answer"]]})
    return answers.assign(run=r.name, study=r.study, encoding=r.encoding, digits=r.digits, seed=r.seed)


def official_scores(out, data=None, which=BUDGET_PARTS, **selection) -> pd.DataFrame:
    """Every finished run of `which` in OUT (narrowed by `select`'s `selection`) answers the
    authors' released 500 test questions of the task it was trained on
    (`frontier.official.load_test_set`, from the released-data folder `data`): one row per run and
    question (the study's columns, the question, prediction, score, exact match, tokens), written to
    OUT/cpu-study-official.csv. Runs already scored there are not scored again."""
    from .frontier.official import load_test_set

    out = Path(out)
    path = out / OFFICIAL_FILE
    done = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["run"])
    parts = [done] if len(done) else []
    for r in _unscored(out, which, done, **selection):
        parts.append(_answer(out, r, load_test_set(r.task, data)))
        table = pd.concat(parts, ignore_index=True)
        write_atomic(path, lambda tmp: table.to_csv(tmp, index=False))  # after every run: resumable
    return pd.concat(parts, ignore_index=True) if parts else done


def generator_scores(out, n: int = 500, seed: int = 0, which=BUDGET_PARTS, **selection) -> pd.DataFrame:
    """Every finished run of `which` in OUT (narrowed by `select`'s `selection`) answers `n`
    questions of the task it was trained on drawn by an independent generator (reasoning-gym,
    `generator.questions(task, n, seed)`: the same questions for every run of a task): one row per
    run and question (the study's columns, the question, prediction, score, exact match, tokens,
    and the question's reasoning-gym source and index), written to OUT/cpu-study-generator.csv.
    Runs already scored there are not scored again; a file scored with another n or seed is
    refused. `.attrs["dropped"]`: {task: the items dropped per source and reason} of the draws made."""
    from . import generator

    generator.check_draw(n, seed)
    out = Path(out)
    path = out / GENERATOR_FILE
    done = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["run", "n", "generator_seed"])
    recorded = set(zip(done["n"], done["generator_seed"]))
    if recorded - {(n, seed)}:
        raise ValueError(
            f"{path} holds questions drawn with (n, seed) {sorted(recorded)}, not ({n}, {seed}): "
            "score into another folder, or move the file aside"
        )
    runs = _unscored(out, which, done, **selection)
    if other := sorted({r.task for r in runs} - set(generator.OPERATIONS)):
        raise ValueError(
            f"the generator asks {sorted(generator.OPERATIONS)} only; the chosen runs also train on "
            f"{other} (narrow them with --studies or --tasks)"
        )
    drawn, parts = {}, ([done] if len(done) else [])
    for r in runs:
        if r.task not in drawn:
            drawn[r.task] = generator.questions(r.task, n, seed)
        questions = drawn[r.task]
        answers = _answer(out, r, questions)
        parts.append(
            answers.assign(
                source=questions["source"].to_numpy(),
                source_index=questions["source_index"].to_numpy(),
                n=n,
                generator_seed=seed,
            )
        )
        table = pd.concat(parts, ignore_index=True)
        write_atomic(path, lambda tmp: table.to_csv(tmp, index=False))  # after every run: resumable
    table = pd.concat(parts, ignore_index=True) if parts else done
    table.attrs["dropped"] = {task: q.attrs["dropped"] for task, q in drawn.items()}
    return table


def scored_cells(table: pd.DataFrame, draws: int = 2000) -> pd.DataFrame:
    """Per (study, task, digits, encoding) of a table of `official_scores` or `generator_scores`: the
    mean score with its 95 % interval (the study's hierarchical bootstrap: runs, then questions),
    exact match, and how many runs and answers."""
    rows = []
    for key, cell in table.groupby(["study", "task", "digits", "encoding"]):
        per_run = [g.score.to_numpy(dtype=float) for _, g in cell.groupby("run")]
        mean, low, high = hierarchical_bootstrap(per_run, draws)
        rows.append(
            dict(
                zip(["study", "task", "digits", "encoding"], key),
                score=mean,
                low=low,
                high=high,
                exact=cell.exact.astype(float).mean(),
                runs=len(per_run),
                answers=len(cell),
                output_tokens=cell.output_tokens.mean() if "output_tokens" in cell else np.nan,
            )
        )
    return pd.DataFrame(rows)


OTHER_QUESTIONS_FILE = "cpu-study3-other-questions.csv"  # Study 3's cells on the questions of (2) and (3)
SCORINGS = {OFFICIAL_FILE: "authors_test_sets", GENERATOR_FILE: "reasoning_gym"}


def other_question_cells(out) -> pd.DataFrame:
    """Study 3's scorings (2) and (3) of the runs in OUT, one row per cell and scoring
    (`scored_cells`, with a `scoring` column): the table published as OTHER_QUESTIONS_FILE."""
    out = Path(out)
    parts = [
        scored_cells(pd.read_csv(out / name)).assign(scoring=scoring)
        for name, scoring in SCORINGS.items()
        if (out / name).exists()
    ]
    if not parts:
        raise ValueError(
            f"{out} holds neither {' nor '.join(SCORINGS)}: score the runs first "
            "(python -m workbench.experiments study --out OUT --score-official DATA / --score-generator)"
        )
    return pd.concat(parts, ignore_index=True)


def frontier_points(cells: pd.DataFrame, digits: int = PAPER_REGIME) -> pd.DataFrame:
    """Study 3's models trained in the paper's regime, scored on the authors' test questions (rows
    of `scored_cells` with scoring "authors_test_sets"), as points of the frontier figure: model
    label, base encoding (its colour), task, output tokens per answer, score, training tokens."""
    part = cells[(cells.scoring == "authors_test_sets") & (cells.digits == digits)]
    base = {e: "bittokens" if e == VARIANT else e for e in part.encoding.unique()}
    return pd.DataFrame(
        {
            "model": [
                f"cpu-tiny {encoders.label(base[e])} ({s.removeprefix('budget_')} tokens)"
                for e, s in zip(part.encoding, part.study)
            ],
            "encoding": part.encoding.map(base),
            "task": part.task,
            "tokens": part.output_tokens,
            "performance": part.score,
            "budget": part.study.map(budget_of),
        }
    )


PUBLISHED = Path(__file__).resolve().parent.parent / "results"  # the published study: read, never written by a study
CELL = ["study", "encoding", "task", "digits"]  # one cell of a study: its seeds' rows and its intervals
TABLE_COLUMNS = CELL + ["seed", "metric", "score"]
INTERVAL_COLUMNS = CELL + ["metric", "mean", "low", "high"]


def read_study(folder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The results table and the intervals table that `run_study` wrote into `folder`, checked:
    their columns, registered encodings (or VARIANT) and tasks, finite intervals with low <= high."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ValueError(
            f"study folder {str(folder)!r} does not exist (a study writes it: python -m "
            f"workbench.experiments study --out {folder})"
        )
    paths = [folder / RESULTS_FILE, folder / INTERVALS_FILE]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ValueError(
            f"study folder {str(folder)!r} holds no {' or '.join(missing)} "
            f"(made by: python -m workbench.experiments study --out {folder})"
        )
    table, intervals = (_read_table(p) for p in paths)
    for path, frame, columns in ((paths[0], table, TABLE_COLUMNS), (paths[1], intervals, INTERVAL_COLUMNS)):
        _check_study_file(path, frame, columns)
    return table, intervals


def _read_table(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:  # a study with no finished run writes an empty table
        return pd.DataFrame()


def _check_study_file(path: Path, frame: pd.DataFrame, columns: list[str]) -> None:
    if frame.empty:
        return
    if lacking := [c for c in columns if c not in frame.columns]:
        raise ValueError(
            f"{path} lacks column(s) {lacking}: not a study table ({RESULTS_FILE} and {INTERVALS_FILE} "
            "are written by python -m workbench.experiments study)"
        )
    for column, known, hint in (
        ("encoding", encoders.names() + [VARIANT], "is its file in workbench/encoders/?"),
        ("task", tasks.names(), "is its task registered?"),
    ):
        if unknown := sorted(set(frame[column].astype(str)) - set(known)):
            raise ValueError(
                f"{path} holds rows of {column} {unknown}, which is not registered ({hint}); "
                f"registered: {', '.join(known)}"
            )
    if "mean" in columns:
        values = frame[["mean", "low", "high"]].apply(pd.to_numeric, errors="coerce")
        bad = ~np.isfinite(values).all(axis=1) | (values.low > values.high)
        if bad.any():
            raise ValueError(
                f"{path}: rows {list(frame.index[bad][:5])} have a mean, low or high that is not a "
                "finite number, or low > high"
            )


def read_studies(folders) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The results and intervals tables of several study folders merged, in the order given: a cell
    (study, encoding, task, d) that a later folder holds replaces the earlier folders' rows of that
    cell in both tables (all its seeds and metrics, so a cell's rows and its interval always come
    from one folder); other cells are added. Nothing is written: `[PUBLISHED, "runs/study"]` puts
    one's own runs beside the published ones without touching results/. One folder: `read_study`."""
    folders = [folders] if isinstance(folders, (str, Path)) else list(folders)
    if not folders:
        raise ValueError("no study folder given")
    tables, intervals = read_study(folders[0])
    for folder in folders[1:]:
        more, more_intervals = read_study(folder)
        cells = [f[CELL] for f in (more, more_intervals) if len(f)]
        if not cells:
            continue
        replaced = pd.MultiIndex.from_frame(pd.concat(cells).drop_duplicates())
        tables, intervals = _merged(tables, more, replaced), _merged(intervals, more_intervals, replaced)
    return tables, intervals


def _merged(frame: pd.DataFrame, more: pd.DataFrame, cells: pd.MultiIndex) -> pd.DataFrame:
    """`frame` less its rows of `cells` (study, encoding, task, digits), then `more`'s rows."""
    kept = frame[~pd.MultiIndex.from_frame(frame[CELL]).isin(cells)] if len(frame) else frame
    parts = [f for f in (kept, more) if len(f)]
    return pd.concat(parts, ignore_index=True) if parts else more


def publish(folder, studies, seeds: int, into=PUBLISHED) -> dict[str, int]:
    """Append the cells of `studies` (study names: "budget_3M") that study folder `folder` holds
    with all `seeds` seeds to the published tables in `into`: results, intervals and, where `folder`
    holds Study 3's scorings on other questions, their cells (`other_question_cells`). Every byte
    already published stays as it is: the new rows go at the end of each file, in its column
    order, so a study that takes several sessions is published cell by cell, and publishing the
    same folder again adds only what is new. A published cell is never replaced: one that the
    folder holds with other rows is refused, and nothing is written unless every file can take
    its rows. Cells with fewer seeds are left out, named in a warning. Returns {file: rows added}."""
    folder, into, studies = Path(folder).expanduser(), Path(into), list(studies)
    table, intervals = read_study(folder)
    if absent := [s for s in studies if not len(table) or s not in set(table.study)]:
        raise ValueError(f"{folder} holds no results of {absent}; it holds {sorted(set(table.get('study', [])))}")
    chosen = intervals[intervals.study.isin(studies)]
    if short := sorted(set(map(tuple, chosen.loc[chosen.seeds < seeds, CELL].to_numpy()))):
        warnings.warn(f"left out, fewer than {seeds} seeds: {short}", stacklevel=2)
    complete = pd.MultiIndex.from_frame(chosen.loc[chosen.seeds >= seeds, CELL])
    frames = {RESULTS_FILE: (table, CELL), INTERVALS_FILE: (intervals, CELL)}
    if any((folder / name).exists() for name in SCORINGS):
        frames[OTHER_QUESTIONS_FILE] = (other_question_cells(folder), CELL + ["scoring"])
    texts = {}
    for name, (frame, key) in frames.items():
        rows = frame[pd.MultiIndex.from_frame(frame[CELL]).isin(complete)]
        path = into / name
        if not path.exists():
            texts[path] = rows.to_csv(index=False), len(rows)
            continue
        old = path.read_text()
        header = old.splitlines()[0].split(",")
        if sorted(header) != sorted(rows.columns):
            raise ValueError(f"{path} has columns {header}; {folder / name} has {list(rows.columns)}")
        lines = rows[header].to_csv(index=False, header=False).splitlines()
        cells = [tuple(c) for c in rows[key].astype(str).to_numpy()]
        published = _lines_by_cell(old, key)
        again = {c for c in cells if c in published}
        if changed := sorted(c for c in again if published[c] != sorted(ln for ln, k in zip(lines, cells) if k == c)):
            raise ValueError(
                f"{path} already holds {len(changed)} of these cells with other rows, e.g. {changed[0]}: "
                "a published cell is never replaced"
            )
        new = [ln for ln, c in zip(lines, cells) if c not in again]
        texts[path] = old + ("" if old.endswith("\n") or not new else "\n") + "".join(f"{ln}\n" for ln in new), len(new)
    for path, (text, _) in texts.items():
        write_atomic(path, lambda tmp, text=text: Path(tmp).write_text(text))
    return {path.name: added for path, (_, added) in texts.items()}


def _lines_by_cell(text: str, key: list[str]) -> dict[tuple, list[str]]:
    """A published table's lines (its text as written) grouped by cell, each cell's lines sorted."""
    lines = text.splitlines()[1:]
    cells = [tuple(c) for c in pd.read_csv(io.StringIO(text))[key].astype(str).to_numpy()] if lines else []
    grouped: dict[tuple, list[str]] = {}
    for line, cell in zip(lines, cells):
        grouped.setdefault(cell, []).append(line)
    return {cell: sorted(group) for cell, group in grouped.items()}


def collect(runs: list[Run], out: Path) -> pd.DataFrame:
    """One row per run, task and metric, from each run's test_summary.csv."""
    rows = []
    for r in runs:
        summary = pd.read_csv(out / r.name / "test_summary.csv")
        for s in summary.itertuples(index=False):
            common = dict(
                study=r.study,
                encoding=r.encoding,
                task=s.task,
                digits=r.digits,
                seed=r.seed,
                input_tokens=getattr(s, "input_tokens", np.nan),
                output_tokens=getattr(s, "output_tokens", np.nan),
                train_seconds=s.train_seconds,
            )
            if tasks.get(s.task).metric == "perplexity":
                rows += [
                    dict(common, metric="perplexity", score=s.ppl_all),
                    dict(common, metric="perplexity_text", score=s.ppl_text),
                ]
                continue
            rows.append(dict(common, metric=tasks.get(s.task).metric, score=s.score))
            if tasks.get(s.task).metric == "log_smape":
                rows.append(dict(common, metric="exact_match", score=s.exact))
    return pd.DataFrame(rows)


def hierarchical_bootstrap(per_seed: list[np.ndarray], draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean over seeds of the mean over questions, and its 95 % interval: each draw resamples the
    seeds, then the questions within each drawn seed."""
    rng = np.random.default_rng(seed)
    means = np.empty(draws)
    for k in range(draws):
        chosen = rng.integers(0, len(per_seed), len(per_seed))
        means[k] = np.mean([per_seed[i][rng.integers(0, len(per_seed[i]), len(per_seed[i]))].mean() for i in chosen])
    low, high = np.quantile(means, [0.025, 0.975])
    return float(np.mean([s.mean() for s in per_seed])), float(low), float(high)


def bootstrap_intervals(runs: list[Run], out: Path, draws: int = 2000) -> pd.DataFrame:
    """Per study, encoding, task, digits and metric (score and exact match): the mean over seeds
    and its 95 % interval, from every test question of every seed."""
    samples = []
    for r in runs:
        path = out / r.name / "test_samples.csv"
        if path.exists():
            samples.append(pd.read_csv(path).assign(study=r.study, encoding=r.encoding, digits=r.digits, seed=r.seed))
    rows = []
    if not samples:
        return pd.DataFrame(
            columns=["study", "encoding", "task", "digits", "metric", "mean", "low", "high", "seeds", "questions"]
        )
    keys = ["study", "encoding", "task", "digits"]
    for key, part in pd.concat(samples).groupby(keys):
        for metric, column in ((tasks.get(key[2]).metric, "score"), ("exact_match", "exact")):
            if metric == "exact_match" and tasks.get(key[2]).metric != "log_smape":
                continue
            per_seed = [g[column].astype(float).to_numpy() for _, g in part.groupby("seed")]
            mean, low, high = hierarchical_bootstrap(per_seed, draws)
            rows.append(
                dict(
                    zip(keys, key),
                    metric=metric,
                    mean=mean,
                    low=low,
                    high=high,
                    seeds=len(per_seed),
                    questions=int(np.mean([len(s) for s in per_seed])),
                )
            )
    return pd.DataFrame(rows)


def exploratory_as_encoding(table: pd.DataFrame) -> pd.DataFrame:
    """Results or intervals with the exploratory rows moved into the study they extend, as the
    encoding VARIANT, so the analysis and the figure treat them as a sixth line."""
    extra = table.study.str.endswith(f"_{DECIMAL_POOL}")
    moved = table[extra].assign(study=table.study[extra].str.removesuffix(f"_{DECIMAL_POOL}"), encoding=VARIANT)
    return pd.concat([table[~extra], moved], ignore_index=True)


# -- what notebook 04 draws --------------------------------------------------------------------
def fig4_results(table: pd.DataFrame, part: str = "multitask") -> pd.DataFrame:
    """A multi-task part's rows (Study 2 or 2b) in the results schema of `paper_figures` (Figure
    4's third row), with the regime columns that `paper_figures.describe_regime` reads and the
    text source its perplexity was measured on (`paper_figures.describe_corpus`)."""
    rows = table[table["study"] == part].rename(columns={"score": "value"})
    return rows.assign(
        preset=MULTITASK.model.preset,
        tokens=MULTITASK.tokens,
        decades=" ".join(map(str, MULTITASK.data.decades)),
        max_digits=MULTITASK.data.max_digits,
        text_source=MULTITASK.data.text_source,
    )[
        [
            "encoding",
            "task",
            "metric",
            "value",
            "seed",
            "preset",
            "tokens",
            "decades",
            "max_digits",
            "text_source",
            "input_tokens",
            "output_tokens",
        ]
    ]


def _interval_band(x: list, part: pd.DataFrame, color: str, encoding: str):
    """The shaded 95 % interval of one encoding's line (a plotly Scatter): part.high along x, then
    part.low back."""
    import plotly.graph_objects as go

    return go.Scatter(
        x=x + x[::-1],
        y=list(part.high) + list(part.low[::-1]),
        mode="lines",
        fill="toself",
        fillcolor=color,
        opacity=0.18,
        line=dict(width=0),
        hoverinfo="skip",
        showlegend=False,
        legendgroup=encoding,
    )


def precision_figure(intervals: pd.DataFrame):
    """Study 1: score against the operands' significant digits, one line per encoding with its
    95 % interval band; log-sMAPE (top) and exact match (bottom), multiplication and division."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from . import plots

    data = exploratory_as_encoding(intervals)
    data = data[data["study"] == "precision"]
    names = {
        **{e: encoders.label(e) for e in ENCODINGS},
        VARIANT: f"{encoders.label('bittokens')}, decimal pool (exploratory)",
    }
    metrics = [("log_smape", "log-sMAPE"), ("exact_match", "exact match")]
    fig = make_subplots(
        rows=2,
        cols=2,
        shared_xaxes=True,
        vertical_spacing=0.1,
        horizontal_spacing=0.08,
        subplot_titles=[f"{task}, {label}" for _, label in metrics for task in PRECISION_TASKS],
    )
    for i, (metric, label) in enumerate(metrics, start=1):
        for j, task in enumerate(PRECISION_TASKS, start=1):
            for encoding in ENCODINGS + (VARIANT,):
                part = data[(data.task == task) & (data.metric == metric) & (data.encoding == encoding)].sort_values(
                    "digits"
                )
                if part.empty:
                    continue
                color = plots.encoding_color("bittokens" if encoding == VARIANT else encoding)
                fig.add_trace(_interval_band(list(part.digits), part, color, encoding), row=i, col=j)
                fig.add_trace(
                    go.Scatter(
                        x=part.digits,
                        y=part["mean"],
                        mode="lines+markers",
                        name=names[encoding],
                        line=dict(color=color, width=2.5, dash="dash" if encoding == VARIANT else None),
                        legendgroup=encoding,
                        showlegend=i == 1 and j == 1,
                    ),
                    row=i,
                    col=j,
                )
            fig.update_yaxes(range=[-0.02, 1.02], title_text=f"{label} (↑)" if j == 1 else None, row=i, col=j)
    fig.update_xaxes(tickvals=list(DIGITS), title_text="significant digits per operand (d)", row=2)
    fig.update_layout(
        width=1050,
        height=760,
        title=dict(
            text="Study 1: score against operand precision, each encoding trained alone",
            subtitle=dict(
                text=f"cpu-tiny model, {PRECISION.tokens / 1e6:g}M tokens per run, "
                "operands 1…100 with at most d significant digits;<br>line: mean over "
                f"{len(PRECISION_SEEDS)} seeds, band: 95 % bootstrap interval (seeds, then "
                f"{PRECISION.evaluation.test_samples} test questions each)"
                + ("; dashed: exploratory, not pre-registered" if (data.encoding == VARIANT).any() else "")
            ),
        ),
        legend=dict(orientation="h", y=-0.12, x=0),
        margin=dict(t=150),
    )
    return fig


# -- the pre-registered analysis ---------------------------------------------------------------
# The verdict rule (docs/study.md, Study 3's registration): a difference is called only when the 95 %
# intervals do not overlap and the gap of the means exceeds the run-to-run spread across CPUs, the
# largest change of a published run's score between AVX-512 and AVX2 kernels measured on 12 reruns.
DELTA = 0.071
WITHIN = "within the cross-CPU spread"


def separation(
    intervals: pd.DataFrame,
    a: str = "bittokens",
    b: str = "single_digit",
    metric: str = "log_smape",
    delta: float = DELTA,
) -> pd.DataFrame:
    """Study 1, per task and d: the two encodings' means and 95 % intervals, and which is ahead
    ("differ"; `_versus`' rule), else "overlap" or WITHIN."""
    part = intervals[(intervals.study == "precision") & (intervals.metric == metric)]
    return _versus(part[part.encoding == a], part[part.encoding == b], ["task", "digits"], a, b, delta)


def _versus(
    left: pd.DataFrame, right: pd.DataFrame, keys: list[str], a: str, b: str, delta: float = DELTA
) -> pd.DataFrame:
    """Rows of `left` (named a) and `right` (named b) matched on `keys`: both means and intervals, and
    which is ahead where the 95 % intervals do not overlap and the means lie more than `delta` apart
    ("differ"); "overlap" where the intervals overlap; WITHIN where they do not but the gap is at most
    `delta` (the run-to-run spread across CPUs: not called a difference)."""
    both = left.merge(right, on=keys, suffixes=(f"_{a}", f"_{b}"))
    apart = np.where(
        both[f"low_{a}"] > both[f"high_{b}"], a, np.where(both[f"low_{b}"] > both[f"high_{a}"], b, "overlap")
    )
    small = (both[f"mean_{a}"] - both[f"mean_{b}"]).abs() <= delta
    ahead = np.where((apart != "overlap") & small, WITHIN, apart)
    return (
        both.assign(differ=(ahead != "overlap") & (ahead != WITHIN), ahead=ahead)[
            keys + [f"mean_{a}", f"low_{a}", f"high_{a}", f"mean_{b}", f"low_{b}", f"high_{b}", "differ", "ahead"]
        ]
        .sort_values(keys)
        .reset_index(drop=True)
    )


def task_scores(intervals: pd.DataFrame, part: str = "multitask", threshold: float = 0.9) -> pd.DataFrame:
    """A multi-task part's criterion: per encoding, the seed-mean score on each numeric task and how
    many of them reach `threshold` (Study 2 asks for >= 0.9 on four of six), best first."""
    rows = intervals[(intervals.study == part) & (intervals.metric != "exact_match")]
    wide = rows.pivot(index="encoding", columns="task", values="mean")
    return wide.assign(at_threshold=(wide >= threshold).sum(axis=1)).sort_values("at_threshold", ascending=False)


def part_difference(intervals: pd.DataFrame, a: str = "multitask", b: str = NUMERIC_CHECKPOINT) -> pd.DataFrame:
    """Per encoding and numeric task: two multi-task parts' means and intervals (Study 2 against 2b)."""
    rows = intervals[intervals.metric != "exact_match"][["study", "encoding", "task", "mean", "low", "high"]]
    return _versus(
        rows[rows.study == a].drop(columns="study"),
        rows[rows.study == b].drop(columns="study"),
        ["encoding", "task"],
        a,
        b,
    )


def first_difference(sep: pd.DataFrame) -> dict:
    """Per task: the smallest d at which the two encodings differ and which is ahead, or None."""
    out = {}
    for task, part in sep.groupby("task"):
        differ = part[part.differ]
        out[task] = None if differ.empty else (int(differ.digits.iloc[0]), differ.ahead.iloc[0])
    return out


def ordering(intervals: pd.DataFrame, study: str = "precision", metric: str = "log_smape") -> pd.DataFrame:
    """Per task (and d): the encodings from best to worst as "name mean [low, high]"."""
    part = intervals[(intervals.study == study) & (intervals.metric == metric)]
    rows = []
    for (task, digits), group in part.groupby(["task", "digits"]):
        ranked = group.sort_values("mean", ascending=False)
        rows.append(
            dict(
                task=task,
                digits=digits,
                ordering=" > ".join(
                    f"{r.encoding} {r.mean:.2f} [{r.low:.2f}, {r.high:.2f}]" for r in ranked.itertuples()
                ),
            )
        )
    return pd.DataFrame(rows)


def width_comparison(intervals: pd.DataFrame, metric: str = "log_smape") -> pd.DataFrame:
    """The width probe: BitTokens against single digit per task at d = 2, in cpu-tiny (Study 1)
    and in cpu-tiny-wide (the probe), each with both means, intervals and the verdict."""
    parts = []
    for study, width in (("precision", 128), (WIDTH, 256)):
        rows = intervals[(intervals.study == study) & (intervals.digits == 2)].assign(study="precision")
        parts.append(separation(rows, metric=metric).assign(d_model=width))
    return pd.concat(parts, ignore_index=True).sort_values(["task", "d_model"], ignore_index=True)


# -- Study 3: budget x precision (docs/study.md) --------------------------------------------------
METRIC_LABELS = {"log_smape": "log-sMAPE", "exact_match": "exact match", "accuracy": "accuracy"}


def budget_of(study_name: str) -> float:
    """The token budget a Study 3 part's study name carries ("budget_3M" -> 3e6)."""
    return float(study_name.removeprefix("budget_").removesuffix("M")) * 1e6


def budget_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Study 3's rows of a results or intervals table, with their budget in tokens."""
    rows = table[table.study.str.match(r"budget_[0-9.]+M$")]
    return rows.assign(budget=rows.study.map(budget_of))


def budget_verdicts(
    intervals: pd.DataFrame, a: str = VARIANT, b: str = "single_digit", metric: str = "log_smape", delta: float = DELTA
) -> pd.DataFrame:
    """Per task, d and budget: both encodings' means and 95 % intervals and the registered verdict
    (`_versus`: who is ahead, "overlap", or within the cross-CPU spread)."""
    part = budget_rows(intervals[intervals.metric == metric])
    return _versus(part[part.encoding == a], part[part.encoding == b], ["task", "digits", "budget"], a, b, delta)


def smallest_budget(verdicts: pd.DataFrame) -> dict:
    """Per (task, d): the smallest budget at which the two encodings differ and who is ahead, or None."""
    out = {}
    for (task, digits), part in verdicts.sort_values("budget").groupby(["task", "digits"]):
        differ = part[part.differ]
        out[(task, int(digits))] = None if differ.empty else (float(differ.budget.iloc[0]), differ.ahead.iloc[0])
    return out


def budget_figure(intervals: pd.DataFrame, metric: str = "log_smape"):
    """Study 3: score against the training budget, one panel per task (rows) and precision
    (columns), one line per encoding with its 95 % interval band."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from . import plots

    data = budget_rows(intervals[intervals.metric == metric])
    digits = sorted(data.digits.unique())
    label = {d: "the paper's regime" if d == PAPER_REGIME else f"d = {d}" for d in digits}
    names = {
        VARIANT: f"{encoders.label('bittokens')}, decimal pool",
        **{e: encoders.label(e) for e in data.encoding.unique() if e != VARIANT},
    }
    fig = make_subplots(
        rows=len(PRECISION_TASKS),
        cols=len(digits),
        shared_yaxes=True,
        horizontal_spacing=0.04,
        vertical_spacing=0.12,
        subplot_titles=[f"{t}, {label[d]}" for t in PRECISION_TASKS for d in digits],
    )
    for i, task in enumerate(PRECISION_TASKS, start=1):
        for j, d in enumerate(digits, start=1):
            for k, encoding in enumerate(names):
                part = data[(data.task == task) & (data.digits == d) & (data.encoding == encoding)].sort_values(
                    "budget"
                )
                if part.empty:
                    continue
                color = plots.encoding_color("bittokens" if encoding == VARIANT else encoding)
                dodge = 10 ** (0.04 * (k - (len(names) - 1) / 2))  # side by side on the log axis, not on top
                x = list(part.budget / 1e6 * dodge)
                fig.add_trace(_interval_band(x, part, color, encoding), row=i, col=j)
                fig.add_trace(
                    go.Scatter(
                        x=x,
                        y=part["mean"],
                        mode="lines+markers",
                        name=names[encoding],
                        error_y=dict(
                            type="data",
                            symmetric=False,
                            array=part.high - part["mean"],
                            arrayminus=part["mean"] - part.low,
                            color=color,
                            width=4,
                        ),
                        line=dict(color=color, width=2.5, dash="dash" if encoding == VARIANT else None),
                        legendgroup=encoding,
                        showlegend=i == 1 and j == 1,
                    ),
                    row=i,
                    col=j,
                )
            fig.update_xaxes(
                type="log",
                tickvals=[1, 3, 10],
                range=[-0.15, 1.15],  # 0.7M ... 14M, every panel alike
                title_text="training tokens (millions)" if i == 2 else None,
                row=i,
                col=j,
            )
        fig.update_yaxes(
            range=[-0.02, 1.02], title_text=f"{task}, {METRIC_LABELS.get(metric, metric)} (↑)", row=i, col=1
        )
    seeds = (
        int(intervals[intervals.study.str.startswith("budget_")].seeds.max())
        if "seeds" in intervals
        else len(BUDGET_SEEDS)
    )
    fig.update_layout(
        width=300 * len(digits) + 150,
        height=720,
        legend=dict(orientation="h", y=-0.14, x=0),
        title=dict(
            text="Study 3: score against the training budget, each encoding trained alone",
            subtitle=dict(
                text=f"cpu-tiny; operands 1…100 with at most d significant digits, or the paper's regime "
                f"(1e-14…1e15); mean of {seeds} seeds with its 95 % interval"
            ),
        ),
        margin=dict(t=130),
    )
    return fig
