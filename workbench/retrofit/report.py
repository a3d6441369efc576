"""The comparison of retrofit runs (notebook 05): one row per encoding.

    scores = test_scores(run_dirs)        # encoding, task: mean score, 95 % interval, exact match
    ppl = perplexity_change(run_dirs)     # encoding: text perplexity before and after fine-tuning
    table(scores, ppl)                    # the two side by side, one row per encoding
    figure(scores, ppl, encodings, tasks, labels, colors, title, subtitle)  # notebook 05's figure

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


ERROR_BAR = "#222222"  # on the bars' light fill and on the white above them alike (navy vanished into dark grey)


def perplexity_ticks(low: float, high: float, most: int = 6) -> dict:
    """tickvals and ticktext for a log axis of perplexities from `low` to `high`: the sparsest of
    1 per decade, 1-3, 1-2-5 or 1-1.5-2-3-4-5-6-8 that puts at least three ticks in the range
    (plotly's own put 12 on a range of 20 to 600), written as plain numbers; {} (plotly's own) when
    none fits, on a range too short for three."""
    for mantissas in ((1,), (1, 3), (1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 8)):
        ticks = [
            m * 10.0**e
            for e in range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
            for m in mantissas
            if low / 1.02 <= m * 10.0**e <= high * 1.02  # the axis reaches a little past the values
        ]
        if 3 <= len(ticks) <= most:
            return dict(tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    return {}


def figure(scores, ppl, encodings, tasks, labels: dict, colors: dict, title: str, subtitle: str, baseline=None):
    """Notebook 05's figure: the test score per task with its 95 % interval, one bar per encoding
    (left), and the held-out text perplexity before (open) and after (filled) fine-tuning (right,
    log axis). `labels`, `colors`: each encoding's name in the legend and its colour; the bars of
    `baseline` (the model's own digit tokens) are hatched, apart from the greys of the others."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..figures import plots

    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.6, 0.4],
        horizontal_spacing=0.12,
        subplot_titles=[
            "test score per task (95 % bootstrap interval)",
            "held-out text perplexity<br>(open: before fine-tuning, filled: after)",
        ],
    )
    tasks = list(tasks)
    for encoding in encodings:
        part = scores[scores.encoding == encoding].set_index("task").loc[tasks]
        fig.add_trace(
            go.Bar(
                x=tasks,
                y=part.score,
                name=labels[encoding],
                marker=dict(
                    color=plots.blend(colors[encoding], "#ffffff", 0.5),
                    line=dict(color=colors[encoding], width=2),
                    pattern=dict(shape="/" if encoding == baseline else "", fgcolor=colors[encoding], solidity=0.2),
                ),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=part.high - part.score,
                    arrayminus=part.score - part.low,
                    color=ERROR_BAR,
                    thickness=2,
                    width=6,
                ),
            ),
            1,
            1,
        )
        row = ppl.set_index("encoding").loc[encoding]
        fig.add_trace(
            go.Scatter(
                x=[labels[encoding]] * 2,
                y=[row.before, row.after],
                mode="lines+markers",
                marker=dict(symbol=["circle-open", "circle"], size=12, color=colors[encoding]),
                line=dict(color=colors[encoding]),
                showlegend=False,
                hovertemplate="%{y:.1f}<extra></extra>",
            ),
            1,
            2,
        )
    shown = ppl.set_index("encoding").loc[list(encodings), ["before", "after"]].to_numpy()
    fig.update_yaxes(title_text="mean log-sMAPE score (0 to 1)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(
        title_text="text-token perplexity (log scale)",
        type="log",
        **perplexity_ticks(float(shown.min()), float(shown.max())),
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text="task", row=1, col=1)
    fig.update_xaxes(title_text="numbers read as", row=1, col=2)
    fig.update_layout(
        barmode="group",
        width=1100,
        height=580,
        legend=dict(title="numbers read as"),
        margin=dict(t=165),  # the right panel's two-line title clears the subtitle
        title=dict(text=title, subtitle=dict(text=subtitle)),
    )
    return fig
