"""The frontier models per difficulty level (the released per-sample answers): score curves binned by
difficulty, and Figure 8, how stable a score is over the number of samples drawn."""

from __future__ import annotations

from html import escape

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .sources import TASK_LABELS
from .style import MODEL_COLORS, MODELS, SETTING_DASH, SETTING_SYMBOL, TASK_ORDER, metric_titles, reasoning_setting

SAMPLE_COUNTS = (25, 50, 100, 200, 300, 400, 500)  # Figure 8: the n whose n-sample mean score is drawn


def difficulty_curves(samples: pd.DataFrame) -> pd.DataFrame:
    """Mean performance per (task, model, reasoning, difficulty_sd) with the sample count."""
    return (
        samples.groupby(["task", "model", "reasoning", "difficulty_sd"])["performance"]
        .agg(performance="mean", n="size")
        .reset_index()
    )


def bin_difficulty(curves: pd.DataFrame, bins: int = 10) -> pd.DataFrame:
    """difficulty_curves merged into at most `bins` equal-width difficulty bins per task (the
    same bins for every model): performance is the mean over the answers of the bin, n their count,
    difficulty_sd the bin's middle."""
    out = []
    for task, part in curves.groupby("task"):
        low, high = part["difficulty_sd"].min(), part["difficulty_sd"].max()
        width = max(1, int(np.ceil((high - low + 1) / bins)))
        part = part.assign(
            bin=low + (part["difficulty_sd"] - low) // width * width, total=part["performance"] * part["n"]
        )
        grouped = part.groupby(["model", "reasoning", "bin"]).agg(total=("total", "sum"), n=("n", "sum")).reset_index()
        out.append(
            grouped.assign(
                task=task,
                performance=grouped["total"] / grouped["n"],
                width=width,
                difficulty_sd=grouped["bin"] + (width - 1) / 2,
            )
        )
    return pd.concat(out, ignore_index=True)[
        ["task", "model", "reasoning", "difficulty_sd", "width", "performance", "n"]
    ]


SETTINGS = list(SETTING_DASH)  # maximal reasoning, minimal / no reasoning: one panel row each


def _frontier_lines(data: pd.DataFrame, x: str, y: str, labels: dict, hover: dict | None = None) -> go.Figure:
    """One panel per task and reasoning setting: the tasks three to a row, each over two panels,
    maximal reasoning above minimal / no reasoning (sharing x), so a panel holds at most the
    eight models of one setting rather than all 13 series. One line per model (colour; the
    setting keeps its dash and marker), one legend entry per model toggling both settings; hover
    names model, setting and the `hover` columns ({column: label})."""
    data = data.assign(setting=reasoning_setting(data["reasoning"]), label=data["task"].map(TASK_LABELS))
    shown = [label for label in TASK_ORDER if label in set(data["label"])]
    groups = (len(shown) + 2) // 3
    # Panel rows in pairs, a short empty row between pairs for the tick labels and the next titles.
    kinds = [k for g in range(groups) for k in (["gap"] if g else []) + SETTINGS]
    fig = make_subplots(
        rows=len(kinds),
        cols=3,
        specs=[[None] * 3 if k == "gap" else [{}] * 3 for k in kinds],
        row_heights=[0.3 if k == "gap" else 1 for k in kinds],
        vertical_spacing=0.012,
        horizontal_spacing=0.06,
        subplot_titles=[
            (shown[3 * g + c] if 3 * g + c < len(shown) and k == SETTINGS[0] else "")
            for g in range(groups)
            for k in SETTINGS
            for c in range(3)
        ],
    )
    hover = hover or {}
    legend = set()
    for k, label in enumerate(shown):
        group, col = divmod(k, 3)
        task = data[data["label"] == label]
        for setting in SETTINGS:
            row = kinds.index(setting, group * 3) + 1
            part = task[task["setting"] == setting]
            for model in [m for m in MODELS + sorted(set(part["model"]) - set(MODELS)) if m in set(part["model"])]:
                line = part[part["model"] == model].sort_values(x)
                extra = "".join(f"<br>{name}: %{{customdata[{i}]}}" for i, name in enumerate(hover.values()))
                fig.add_trace(
                    go.Scatter(
                        x=line[x],
                        y=line[y],
                        mode="lines+markers",
                        name=model,
                        legendgroup=model,
                        legendrank=MODELS.index(model) if model in MODELS else len(MODELS),  # Table 1's order
                        showlegend=model not in legend,
                        line=dict(color=MODEL_COLORS.get(model), width=2, dash=SETTING_DASH[setting]),
                        marker=dict(size=6, symbol=SETTING_SYMBOL[setting]),
                        customdata=line[list(hover)].to_numpy() if hover else None,
                        hovertemplate=f"{labels[x]}: %{{x}}<br>{labels[y]}: %{{y:.2f}}{extra}"
                        f"<extra>{escape(str(model))}, {setting}</extra>",
                    ),
                    row=row,
                    col=col + 1,
                )
                legend.add(model)
            top = kinds.index(SETTINGS[0], group * 3) + 1
            if setting != SETTINGS[0]:  # the lower panel of the pair carries the x axis for both
                anchor = fig.get_subplot(row, col + 1).xaxis.plotly_name.replace("axis", "")
                fig.update_xaxes(matches=anchor, showticklabels=False, row=top, col=col + 1)
                fig.update_xaxes(showticklabels=True, row=row, col=col + 1)
        if group == groups - 1 or k + 3 >= len(shown):
            fig.update_xaxes(title_text=labels[x], row=kinds.index(SETTINGS[1], group * 3) + 1, col=col + 1)
    for row, kind in enumerate(kinds, start=1):
        if kind != "gap":
            fig.update_yaxes(title_text=labels[y], title_font=dict(size=14), row=row, col=1)
            domain = fig.get_subplot(row, 3).yaxis.domain
            fig.add_annotation(
                text=kind,
                textangle=90,
                x=1.005,
                xref="paper",
                xanchor="left",
                y=sum(domain) / 2,
                yref="paper",
                yanchor="middle",
                showarrow=False,
                font=dict(size=13, color="#555555"),
            )
    fig.update_layout(
        legend=dict(title="model (dash and marker:<br>the setting)", font=dict(size=12), x=1.04),
        width=1250,
        height=1350,
    )
    return fig


def difficulty_figure(curves: pd.DataFrame, min_samples: int = 5, bins: int = 10) -> go.Figure:
    """Performance against decimal difficulty in at most `bins` bins per task; a bin with fewer
    than `min_samples` answers of a model is not drawn."""
    data = bin_difficulty(curves, bins)
    data = data[data["n"] >= min_samples].assign(score=lambda d: d["performance"] * 100)
    fig = _frontier_lines(
        data,
        "difficulty_sd",
        "score",
        {"difficulty_sd": "decimal difficulty (A.3)", "score": "score (%)"},
        hover={"n": "answers", "width": "bin width"},
    )
    metric_titles(fig)
    fig.update_yaxes(range=[0, 105])
    fig.update_layout(
        title=dict(
            text="Frontier LLMs' score against the decimal difficulty of the question",
            subtitle=dict(
                text=f"released per-sample results, difficulties merged into {bins} "
                f"bins per task; bins with < {min_samples} answers left out;<br>per task, maximal "
                "reasoning (upper panel) above minimal or no reasoning (lower panel)"
            ),
        ),
        margin=dict(t=155),
    )
    return fig


def stability(samples: pd.DataFrame, sizes=SAMPLE_COUNTS, draws: int = 200, seed: int = 0) -> pd.DataFrame:
    """Figure 8: spread of the mean score when only n samples are drawn (bootstrap, with
    replacement) from each (task, model, reasoning) group; std and 5-95 % range per n."""
    if draws < 2 or any(int(n) < 1 for n in sizes):
        raise ValueError(f"need draws >= 2 and positive sample counts, got draws={draws}, sizes={sizes}")
    rng = np.random.default_rng(seed)
    rows = []
    groups = samples.groupby(["task", "model", "reasoning"], sort=True)["performance"]
    for (task, model, reasoning), perf in groups:
        values = perf.to_numpy(dtype=float)
        for n in sizes:
            means = values[rng.integers(0, len(values), (draws, int(n)))].mean(axis=1)
            q05, q95 = np.quantile(means, [0.05, 0.95])
            rows.append((task, model, reasoning, int(n), values.mean(), means.std(ddof=1), q05, q95))
    return pd.DataFrame(rows, columns=["task", "model", "reasoning", "n", "full_mean", "std", "q05", "q95"])


def stability_figure(spread: pd.DataFrame) -> go.Figure:
    """Standard deviation of the n-sample mean score, per task, one line per model and setting."""
    fig = _frontier_lines(
        spread.assign(std_pct=spread["std"] * 100),
        "n",
        "std_pct",
        {"n": "questions per task (n)", "std_pct": "std of the mean (pp)"},
    )
    metric_titles(fig)
    fig.update_yaxes(matches="y")  # one scale for every panel: the spreads are compared across tasks
    fig.update_layout(
        title=dict(
            text="Figure 8: how much the benchmark score moves with the number of questions",
            subtitle=dict(
                text="standard deviation of the mean score over bootstrap draws of n of "
                "the 500 released answers per task, in percentage points;<br>per task, maximal "
                "reasoning (upper panel) above minimal or no reasoning (lower panel)"
            ),
        ),
        margin=dict(t=155),
    )
    return fig
