"""Study 4's registered analysis (docs/study/study4.md), from run folders or from the runs kept in
results/runs/: the paired verdict of every cell, the learning-rate check's choice, and Study 3's
verdicts re-decided.

    answers = study4.answers(["runs/study4-multiplication", "results/runs"])
    study4.verdicts(answers)          # one row per cell and pair: the gap, its intervals, the verdict
    study4.rate_choice(folders)       # the learning-rate check: each setting's validation score
    study4.redecided(study4.verdicts(answers))   # Study 3's verdict of each repeated cell: stands / changes / ...
    study4.verdicts(study4.scored_answers(pd.read_csv("OUT/cpu-study-generator.csv")))  # the secondary sets
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd

from .paired import SMALLEST_EFFECT, paired_bootstrap, paired_t, seed_gaps, verdict
from .parts import STUDY4, STUDY4_LR, STUDY4_SEEDS, VARIANT, Run, plan

PAIRS = ((VARIANT, "single_digit"), ("bittokens", "single_digit"))


def _runs(parts=(STUDY4, STUDY4_LR)) -> dict[str, Run]:
    return {r.name: r for r in plan(list(parts))}


def _find(name: str, folders) -> Path | None:
    """The folder of run `name` among `folders` (a study's --out, or a kept tree results/runs/)."""
    for folder in map(Path, folders):
        for candidate in (folder / name, *folder.glob(f"*/{name}")):
            if (candidate / "test_samples.csv").is_file() or (candidate / "test_samples.csv.gz").is_file():
                return candidate
    return None


def _samples(folder: Path) -> pd.DataFrame:
    path = folder / "test_samples.csv"
    return pd.read_csv(path if path.is_file() else folder / "test_samples.csv.gz")


def answers(folders, parts=(STUDY4,)) -> dict[tuple, dict[str, dict[int, np.ndarray]]]:
    """{(study, task, digits): {encoding: {seed: the scores of its test answers, in question order}}}
    of every finished run of `parts` found in `folders`."""
    out: dict[tuple, dict[str, dict[int, np.ndarray]]] = {}
    for name, r in _runs(parts).items():
        folder = _find(name, folders)
        if folder is not None:
            scores = _samples(folder)["score"].to_numpy(dtype=float)
            out.setdefault((r.study, r.task, r.digits), {}).setdefault(r.encoding, {})[r.seed] = scores
    return out


def scored_answers(table: pd.DataFrame) -> dict[tuple, dict[str, dict[int, np.ndarray]]]:
    """`answers`' structure from a table of other questions the runs answered (OUT/cpu-study-official.csv,
    OUT/cpu-study-generator.csv: the registration's secondary sets), each run's scores in the order of
    its questions. Every run of a cell must have answered the same questions in the same order (the
    pairing): checked, and refused otherwise."""
    out: dict[tuple, dict[str, dict[int, np.ndarray]]] = {}
    for (study, task, digits), cell in table.groupby(["study", "task", "digits"], sort=True):
        questions = None
        for (encoding, seed), run in cell.groupby(["encoding", "seed"], sort=True):
            asked = list(run["prompt"].astype(str))
            if questions is None:
                questions = asked
            elif asked != questions:
                raise ValueError(
                    f"{study} {task} d={digits}: {encoding} seed {seed} answered other questions than the "
                    "cell's first run, so the cell cannot be paired"
                )
            out.setdefault((study, task, int(digits)), {}).setdefault(encoding, {})[int(seed)] = run["score"].to_numpy(
                dtype=float
            )
    return out


def stuck_seed(gaps: np.ndarray) -> int | None:
    """The seed (index) whose gap lies farthest from the median of the others, if by more than 3 x
    the others' median absolute deviation (the registration's flag), else None."""
    far, which = 0.0, None
    for i, g in enumerate(gaps):
        others = np.delete(gaps, i)
        centre = np.median(others)
        spread = np.median(np.abs(others - centre))
        distance = abs(g - centre) / spread if spread > 0 else 0.0
        if distance > 3 and distance > far:
            far, which = distance, i
    return which


def paired(left: list, right: list, a: str, b: str, seeds=STUDY4_SEEDS) -> dict:
    """The registered comparison of A's and B's runs, given as the scores of their test answers per
    seed in `seeds`' order: both means, each seed's gap, the mean gap with its t interval (the
    registered one) and the paired bootstrap's, the verdict against one digit (SMALLEST_EFFECT) and
    the stuck-seed flag."""
    gaps = seed_gaps(left, right)
    mean, low, high = paired_t(gaps)
    _, boot_low, boot_high = paired_bootstrap(left, right)
    stuck = stuck_seed(gaps)
    return dict(
        a=a,
        b=b,
        mean_a=float(np.mean([x.mean() for x in left])),
        mean_b=float(np.mean([x.mean() for x in right])),
        gap=mean,
        low=low,
        high=high,
        boot_low=boot_low,
        boot_high=boot_high,
        seed_gaps=" ".join(f"{g:+.3f}" for g in gaps),
        verdict=verdict(mean, low, high, a, b),
        stuck_seed=None if stuck is None else seeds[stuck],
    )


def verdicts(found: dict, pairs=PAIRS, seeds=STUDY4_SEEDS) -> pd.DataFrame:
    """One row per cell and registered pair with every seed of both encodings (`paired`)."""
    rows = []
    for (study, task, digits), by in sorted(found.items()):
        for a, b in pairs:
            if all(s in by.get(a, {}) and s in by.get(b, {}) for s in seeds):
                left, right = [by[a][s] for s in seeds], [by[b][s] for s in seeds]
                rows.append(dict(study=study, task=task, digits=digits, **paired(left, right, a, b, seeds)))
    return pd.DataFrame(rows)


def best_validation(folder: Path) -> float:
    """The validation score of a run's chosen checkpoint: eq. 15's score (evals.jsonl's
    "harmonic_mean") at its best eligible evaluation, as training chose it (adapt.evaluate_and_adapt:
    after the lr warm-up, or the last one)."""
    path = folder / "evals.jsonl"
    text = path.read_text() if path.is_file() else gzip.open(folder / "evals.jsonl.gz", "rt").read()
    rows = pd.DataFrame([json.loads(line) for line in text.splitlines() if line.strip()])
    config = json.loads((folder / "config.json").read_text())
    total = int(rows.step.max())
    warmup = round(config["optim"]["warmup_frac"] * total)
    eligible = rows[(rows.step > warmup) | (rows.step == total)]
    return float(eligible.harmonic_mean.max())


def rate_choice(folders, threshold: float = 0.005) -> pd.DataFrame:
    """The learning-rate check (docs/study/study4.md): per encoding and setting (the recipe's rates, found
    in the main grid's seeds 0-1 of the cell, and each moved rate), the mean over seeds of the
    chosen checkpoint's validation score; `chosen` marks the registered choice (the recipe's unless
    another setting beats it by more than `threshold`)."""
    runs = _runs((STUDY4, STUDY4_LR))
    rows = []
    for name, r in runs.items():
        in_cell = r.task == "multiplication" and r.digits == 4 and r.config.tokens == 3e6 and r.seed in (0, 1)
        if not in_cell or r.study not in (f"{STUDY4}_3M",) and not r.study.startswith(STUDY4_LR):
            continue
        folder = _find(name, folders)
        if folder is None:
            continue
        setting = "recipe" if r.study == f"{STUDY4}_3M" else r.study.removeprefix(f"{STUDY4_LR}_").removesuffix("_3M")
        rows.append(dict(encoding=r.encoding, setting=setting, seed=r.seed, validation=best_validation(folder)))
    table = pd.DataFrame(rows, columns=["encoding", "setting", "seed", "validation"])
    if table.empty:
        return table.assign(chosen=[])
    means = table.groupby(["encoding", "setting"]).agg(validation=("validation", "mean"), seeds=("seed", "count"))
    means = means.reset_index()
    means["chosen"] = False
    for _, part in means.groupby("encoding"):
        recipe = part[part.setting == "recipe"].validation
        best = part.loc[part.validation.idxmax()]
        pick = best.name if recipe.empty or best.validation > recipe.iloc[0] + threshold else recipe.index[0]
        means.loc[pick, "chosen"] = True
    return means


def redecided(table: pd.DataFrame, study3=None) -> pd.DataFrame:
    """Study 3's verdict of every cell Study 4 repeats (same task, d, budget and encodings), read
    against Study 4's: "stands", "changes" or "cannot be decided" (docs/study/study4.md's rule, both ways
    alike)."""
    from .published import read_study
    from .stats import budget_verdicts

    if study3 is None:
        _, study3 = read_study(Path(__file__).resolve().parents[2] / "results")
    rows = []
    for (a, b), part in table.groupby(["a", "b"]):
        old = budget_verdicts(study3, a=a, b=b)
        for r in part.itertuples():
            budget = float(r.study.removeprefix(f"{STUDY4}_").removesuffix("M")) * 1e6
            match = old[(old.task == r.task) & (old.digits == r.digits) & (old.budget == budget)]
            if match.empty:
                continue
            before = match.ahead.iloc[0]  # a / b / overlap / within the cross-CPU spread
            side = r.verdict.removesuffix(" ahead") if r.verdict.endswith(" ahead") else None
            if side is None and r.verdict == "undecided":
                outcome = "cannot be decided"
            elif before in (a, b):
                outcome = "stands" if side == before else "changes"
            else:
                outcome = "stands" if side is None else "changes"
            rows.append(
                dict(
                    task=r.task,
                    digits=r.digits,
                    budget=budget,
                    a=a,
                    b=b,
                    study3=before,
                    study4=r.verdict,
                    outcome=outcome,
                )
            )
    return pd.DataFrame(rows)


__all__ = ["answers", "verdicts", "rate_choice", "redecided", "stuck_seed", "SMALLEST_EFFECT"]
