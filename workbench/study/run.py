"""Training a study's plan and tabling its finished runs.

Runs go to OUT/<run name>; a finished run is not trained again, so an interrupted study resumes,
and a finished run whose recorded configuration is not the plan's is named, never counted.
Results: OUT/cpu-study.csv, one row per run, task and metric (study, encoding, task, digits, seed,
metric, score, input_tokens, output_tokens, train_seconds; perplexity rows for text), and
OUT/cpu-study-intervals.csv, the mean and its 95 % hierarchical-bootstrap interval per cell
(resampling the seeds, then the test questions within each seed); both hold every finished run of
every part.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import tasks
from ..config import TrainConfig
from ..runs.atomic import write_atomic
from ..runs.executors import Executor, run_all
from ..runs.locks import hold
from ..runs.outputs import output_path
from .parts import BUDGET_PARTS, BUDGET_SEEDS, PARTS, PREREGISTERED, VARIANT, Run, plan, select
from .stats import WITHIN, hierarchical_bootstrap, verdict_stability

RESULTS_FILE, INTERVALS_FILE = "cpu-study.csv", "cpu-study-intervals.csv"  # what run_study writes into OUT


def finished(cfg: TrainConfig) -> bool:
    """runs.folder.finished (the study needs it before torch is imported: experiments' --help)."""
    from ..runs.folder import finished as done

    return done(cfg)


def stale(runs: list[Run], out: Path) -> dict[str, str]:
    """{run name: the settings in which its finished run in OUT differs from the plan}."""
    from ..runs.folder import recorded_differences  # torch: not at import (the commands' --help)

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
    out = output_path(out, "out")  # before the lock: never results/, which only `publish` writes
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
    out = output_path(out, "out")
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


def budget_stability(
    out, study_name: str, seeds=range(20), draws: int = 2000, a: str = VARIANT, b: str = "single_digit"
) -> pd.DataFrame:
    """Per (task, d) of a Study 3 level in OUT (study_name "budget_10M") with encodings a's and b's
    three seeds finished: how many of `seeds` bootstrap seeds give each verdict (`verdict_stability`,
    on the runs' test answers), the published verdict being bootstrap seed 0's."""
    out = Path(out)
    answers: dict[tuple, dict[str, list]] = {}
    for r in plan(BUDGET_PARTS):
        path = out / r.name / "test_samples.csv"
        if r.study == study_name and path.exists():
            answers.setdefault((r.task, r.digits), {}).setdefault(r.encoding, []).append(
                pd.read_csv(path)["score"].to_numpy(dtype=float)
            )
    rows = []
    for (task, digits), by in sorted(answers.items()):
        if not {a, b} <= set(by) or min(len(by[a]), len(by[b])) < len(BUDGET_SEEDS):
            continue
        counts = verdict_stability(by[a], by[b], seeds, draws)
        rows.append(
            dict(task=task, digits=digits, **{a: counts.get("a", 0), b: counts.get("b", 0)})
            | {verdict: counts.get(verdict, 0) for verdict in ("overlap", WITHIN)}
        )
    return pd.DataFrame(rows)
