"""The results schema: one row per run, task and metric, as `results/*.csv`, the study and the
notebooks read and write them (`validate_results` enforces it).

    encoding  str    one of workbench.encoders.names()
    task      str    one of workbench.tasks.names() ("text": perplexity on prose)
    metric    str    log_smape | exact_match | accuracy (in [0, 1]) or perplexity (>= 1)
    value     float  finite
    seed      int    >= 0; (encoding, task, metric, seed) is unique
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import encoders, tasks

RESULTS_COLUMNS = ["encoding", "task", "metric", "value", "seed"]
SCORE_METRICS = ("log_smape", "exact_match", "accuracy")
PERPLEXITIES = ("perplexity", "perplexity_text")  # Table 4's "Fineweb" and "Fineweb text only"
METRICS = SCORE_METRICS + PERPLEXITIES
ARITHMETIC = tuple(tasks.with_metric("log_smape"))
ROOT = Path(__file__).resolve().parent.parent


def validate_results(frame: pd.DataFrame) -> pd.DataFrame:
    """A typed copy of `frame` if it follows the results schema (module docstring), else ValueError."""
    missing = [c for c in RESULTS_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"results lack column(s) {missing}; the schema is {RESULTS_COLUMNS}")
    out = frame[RESULTS_COLUMNS].copy()
    for column, allowed in (("encoding", encoders.names()), ("task", tasks.names()), ("metric", METRICS)):
        bad = sorted(set(out[column].astype(str)) - set(allowed))
        if bad:
            raise ValueError(f"results column {column!r} has unknown values {bad}; allowed: {list(allowed)}")
    value = pd.to_numeric(out["value"], errors="coerce")
    if not np.isfinite(value).all():
        raise ValueError(f"results 'value' must be finite numbers; bad rows: {list(out.index[~np.isfinite(value)])}")
    score = out["metric"].isin(SCORE_METRICS)
    if ((value < 0) | (value > 1))[score].any() or (value < 1)[~score].any():
        raise ValueError("results 'value' out of range: scores lie in [0, 1], perplexities are >= 1")
    seed = pd.to_numeric(out["seed"], errors="coerce")
    if seed.isna().any() or (seed < 0).any() or (seed != np.floor(seed)).any():
        raise ValueError("results 'seed' must be non-negative integers")
    out["value"], out["seed"] = value.astype(float), seed.astype(int)
    duplicated = out.duplicated(["encoding", "task", "metric", "seed"])
    if duplicated.any():
        raise ValueError(f"results repeat (encoding, task, metric, seed) in rows {list(out.index[duplicated])}")
    return out


def read_results(path) -> pd.DataFrame:
    """Read and validate a results CSV; extra columns (tokens per problem, seconds) are kept.
    A relative path not found from the working directory is looked up from the repository root,
    so "results/my-run.csv" works from notebooks/ too."""
    path = Path(path).expanduser()
    if not path.is_absolute() and not path.exists():
        path = ROOT / path
    if not path.is_file():
        raise ValueError(f"results_csv {str(path)!r} does not exist")
    raw = pd.read_csv(path)
    return validate_results(raw).join(raw.drop(columns=RESULTS_COLUMNS))


def results_from_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """A run's test_summary.csv (workbench.train) in the results schema: `score` is log-sMAPE for
    arithmetic and accuracy for list tasks; `exact` is exact match of arithmetic answers; prose
    gives its perplexity over all tokens and over the text tokens only."""
    prose = summary["task"].isin(tasks.with_metric("perplexity"))
    numeric, text = summary[~prose], summary[prose]
    arithmetic = numeric["task"].isin(ARITHMETIC)
    parts = [
        numeric.assign(metric=np.where(arithmetic, "log_smape", "accuracy"), value=numeric["score"]),
        numeric[arithmetic].assign(metric="exact_match", value=numeric["exact"]),
    ]
    if len(text):
        parts += [
            text.assign(metric="perplexity", value=text["ppl_all"]),
            text.assign(metric="perplexity_text", value=text["ppl_text"]),
        ]
    return validate_results(pd.concat(parts, ignore_index=True))
