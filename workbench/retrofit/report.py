"""The comparison of retrofit runs (notebook 05): one row per encoding.

    scores = test_scores(run_dirs)        # encoding, task: mean score, 95 % interval, exact match
    ppl = perplexity_change(run_dirs)     # encoding: text perplexity before and after fine-tuning
    table(scores, ppl)                    # the two side by side, one row per encoding

Intervals: `study.hierarchical_bootstrap` over the test questions (and over the seeds, when a
encoding has runs of several seeds). The perplexity is `finetune.perplexity`'s ppl_text, over the
held-out text's tokens that write no number, so encodings that read numbers differently compare;
"before" is the model as loaded (with the encoding joined but untrained), "after" the saved one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def _read(run_dirs, name: str) -> pd.DataFrame:
    frames = [
        pd.read_csv(Path(d) / name, keep_default_na=False, dtype={"prediction": str, "answer": str})
        for d in run_dirs
        if (Path(d) / name).exists()
    ]
    if not frames:
        raise ValueError(f"none of the runs {[str(d) for d in run_dirs]} holds {name}")
    return pd.concat(frames, ignore_index=True)


def test_scores(run_dirs, draws: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per encoding and task: the mean test score, its 95 % interval, the exact-match share, the
    questions per seed and the seeds."""
    from ..study import hierarchical_bootstrap  # here: the study module loads the trainer

    samples = _read(run_dirs, "test_samples.csv")
    rows = []
    for (encoding, task), part in samples.groupby(["encoding", "task"], sort=False):
        per_seed = [g["score"].astype(float).to_numpy() for _, g in part.groupby("seed")]
        mean, low, high = hierarchical_bootstrap(per_seed, draws, seed)
        rows.append(
            dict(
                encoding=encoding,
                task=task,
                score=mean,
                low=low,
                high=high,
                exact=float(part["exact"].astype(str).eq("True").mean()),
                questions=int(np.mean([len(s) for s in per_seed])),
                seeds=len(per_seed),
            )
        )
    return pd.DataFrame(rows)


def perplexity_change(run_dirs) -> pd.DataFrame:
    """Per encoding: ppl_text before and after fine-tuning (means over seeds) and the change in %."""
    ppl = _read(run_dirs, "perplexity.csv")
    wide = ppl.pivot_table(index=["encoding", "seed"], columns="when", values="ppl_text").reset_index()
    out = wide.groupby("encoding", sort=False)[["before", "after"]].mean().reset_index()
    return out.assign(change_percent=100 * (out["after"] / out["before"] - 1))


def table(scores: pd.DataFrame, ppl: pd.DataFrame, order=None) -> pd.DataFrame:
    """One row per encoding: each task's "score [low, high]" and exact match, then the perplexity
    before, after and its change."""
    cells = scores.assign(
        cell=[f"{s:.3f} [{lo:.3f}, {hi:.3f}]" for s, lo, hi in zip(scores.score, scores.low, scores.high)]
    )
    wide = cells.pivot(index="encoding", columns="task", values="cell").add_suffix(" score [95 % CI]")
    exact = scores.pivot(index="encoding", columns="task", values="exact").add_suffix(" exact")
    ppl = ppl.set_index("encoding").rename(
        columns={"before": "ppl before", "after": "ppl after", "change_percent": "ppl change %"}
    )
    out = wide.join(exact).join(ppl.round(2)).reset_index()
    if order is not None:
        out = out.set_index("encoding").loc[[e for e in order if e in set(out.encoding)]].reset_index()
    return out
