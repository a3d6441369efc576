"""Study 3's models scored on questions made elsewhere, without training: the authors' released
500 test questions of each task (`official_scores`, OUT/cpu-study-official.csv) and an independent
generator's (`generator_scores`: reasoning-gym through workbench/study/generator.py,
OUT/cpu-study-generator.csv); their cells with intervals (`other_question_cells`) and the models
as points of the paper's frontier figure (`frontier_points`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import encoders
from ..runs.atomic import write_atomic
from ..runs.outputs import output_path
from .parts import BUDGET_PARTS, PAPER_REGIME, VARIANT, Run, base_encoding, plan, select
from .run import finished
from .stats import budget_of, hierarchical_bootstrap

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


def _scored_before(path: Path, empty: list[str]) -> pd.DataFrame:
    """The answers scored into `path` before, their question, answer and prediction kept as the
    text written: a file appended run by run is rewritten whole, and numbers parsed on the way
    would come back in another spelling ("36" as "36.0", a prediction "007" as "7.0")."""
    if not path.exists():
        return pd.DataFrame(columns=empty)
    text = {c: str for c in ("prompt", "answer", "prediction")}
    return pd.read_csv(path, dtype=text, keep_default_na=False, na_values={"prediction": [""]})


def _answer(out: Path, r: Run, questions: pd.DataFrame) -> pd.DataFrame:
    """Run r's best checkpoint answers `questions` of its task, scored; the study's columns added."""
    from ..measures.evaluate import evaluate
    from ..runs.checkpoints import load_run

    model, tok, _ = load_run(out / r.name)
    answers = evaluate(model, tok, {r.task: questions[["prompt", "answer"]]})
    return answers.assign(run=r.name, study=r.study, encoding=r.encoding, digits=r.digits, seed=r.seed)


def official_scores(out, data=None, which=BUDGET_PARTS, **selection) -> pd.DataFrame:
    """Every finished run of `which` in OUT (narrowed by `select`'s `selection`) answers the
    authors' released 500 test questions of the task it was trained on
    (`frontier.official.load_test_set`, from the released-data folder `data`): one row per run and
    question (the study's columns, the question, prediction, score, exact match, tokens), written to
    OUT/cpu-study-official.csv. Runs already scored there are not scored again."""
    from ..frontier.official import load_test_set

    out = output_path(out, "out")
    path = out / OFFICIAL_FILE
    done = _scored_before(path, ["run"])
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
    out = output_path(out, "out")
    path = out / GENERATOR_FILE
    done = _scored_before(path, ["run", "n", "generator_seed"])
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
    label, base encoding (its colour), task, output tokens per answer, score, training tokens. The
    label names BitTokens' decimal pool (the core's) apart from the recipe's binary pools (budget_more's)."""
    part = cells[(cells.scoring == "authors_test_sets") & (cells.digits == digits)]
    base = {e: base_encoding(e) for e in part.encoding.unique()}
    return pd.DataFrame(
        {
            "model": [
                f"cpu-tiny {encoders.label(base[e])}{' decimal pool' if e == VARIANT else ''} ({s.removeprefix('budget_')} tokens)"
                for e, s in zip(part.encoding, part.study)
            ],
            "encoding": part.encoding.map(base),
            "task": part.task,
            "tokens": part.output_tokens,
            "performance": part.score,
            "budget": part.study.map(budget_of),
        }
    )
