"""The registered analysis of the study's tables: the hierarchical bootstrap, the verdict rule
(two encodings differ only where their 95 % intervals are apart and their means more than DELTA,
the cross-CPU spread, apart) and what each part's registration asks of its intervals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .parts import DECIMAL_POOL, NUMERIC_CHECKPOINT, VARIANT, WIDTH


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


def exploratory_as_encoding(table: pd.DataFrame) -> pd.DataFrame:
    """Results or intervals with the exploratory rows moved into the study they extend, as the
    encoding VARIANT, so the analysis and the figure treat them as a sixth line."""
    extra = table.study.str.endswith(f"_{DECIMAL_POOL}")
    moved = table[extra].assign(study=table.study[extra].str.removesuffix(f"_{DECIMAL_POOL}"), encoding=VARIANT)
    return pd.concat([table[~extra], moved], ignore_index=True)


# -- the pre-registered analysis ---------------------------------------------------------------
# The verdict rule (docs/study/protocols.md, Study 3's registration): a difference is called only when the 95 %
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
    ("differ"; `versus`' rule), else "overlap" or WITHIN."""
    part = intervals[(intervals.study == "precision") & (intervals.metric == metric)]
    return versus(part[part.encoding == a], part[part.encoding == b], ["task", "digits"], a, b, delta)


def versus(
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


def verdict_stability(
    per_seed_a: list[np.ndarray], per_seed_b: list[np.ndarray], seeds=range(20), draws: int = 2000, delta: float = DELTA
) -> dict[str, int]:
    """How often each verdict of `versus` comes out when only the bootstrap's own random numbers
    change: both encodings' intervals (`hierarchical_bootstrap` of their per-seed answer scores)
    drawn with each of `seeds` as the bootstrap seed (the published intervals use seed 0).
    {"a" / "b" (ahead) / "overlap" / WITHIN: how many bootstrap seeds gave it}. A verdict that
    another bootstrap seed can turn rests on the resampling, not on the runs."""
    counts: dict[str, int] = {}
    for seed in seeds:
        sides = [
            pd.DataFrame([dict(cell=0, **dict(zip(["mean", "low", "high"], hierarchical_bootstrap(s, draws, seed))))])
            for s in (per_seed_a, per_seed_b)
        ]
        verdict = versus(*sides, ["cell"], "a", "b", delta).ahead.iloc[0]
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def task_scores(intervals: pd.DataFrame, part: str = "multitask", threshold: float = 0.9) -> pd.DataFrame:
    """A multi-task part's criterion: per encoding, the seed-mean score on each numeric task and how
    many of them reach `threshold` (Study 2 asks for >= 0.9 on four of six), best first."""
    rows = intervals[(intervals.study == part) & (intervals.metric != "exact_match")]
    wide = rows.pivot(index="encoding", columns="task", values="mean")
    return wide.assign(at_threshold=(wide >= threshold).sum(axis=1)).sort_values("at_threshold", ascending=False)


def part_difference(intervals: pd.DataFrame, a: str = "multitask", b: str = NUMERIC_CHECKPOINT) -> pd.DataFrame:
    """Per encoding and numeric task: two multi-task parts' means and intervals (Study 2 against 2b)."""
    rows = intervals[intervals.metric != "exact_match"][["study", "encoding", "task", "mean", "low", "high"]]
    return versus(
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


# -- Study 3: budget x precision (docs/study/protocols.md) ----------------------------------------


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
    (`versus`: who is ahead, "overlap", or within the cross-CPU spread)."""
    part = budget_rows(intervals[intervals.metric == metric])
    return versus(part[part.encoding == a], part[part.encoding == b], ["task", "digits", "budget"], a, b, delta)


def smallest_budget(verdicts: pd.DataFrame) -> dict:
    """Per (task, d): the smallest budget at which the two encodings differ and who is ahead, or None."""
    out = {}
    for (task, digits), part in verdicts.sort_values("budget").groupby(["task", "digits"]):
        differ = part[part.differ]
        out[(task, int(digits))] = None if differ.empty else (float(differ.budget.iloc[0]), differ.ahead.iloc[0])
    return out
