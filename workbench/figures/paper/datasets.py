"""Figures 5-7, the data set: the operand exponents of the questions (ours beside the released test
sets') and the distribution of their difficulty levels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import plots
from .sources import TASK_LABELS
from .style import TASK_ORDER


def exponent_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """Decimal exponents of the two operands of an addition or multiplication sample."""
    missing = [c for c in ("num1_exp", "num2_exp") if c not in frame.columns]
    if missing:
        raise ValueError(f"need operand exponent columns {missing}; is this an addition/multiplication set?")
    return frame[["num1_exp", "num2_exp"]].apply(pd.to_numeric).dropna().astype(int)


EXPONENTS = np.arange(-15, 16)  # the decimal exponents of operands in (-1e15, 1e15)


NO_DATA = "#d9d9d9"  # the colour of a cell without questions: outside every colour scale of the figures


def exponent_shares(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(shares, counts) per pair of operand exponents: counts[i, j] questions with operand 2's
    exponent EXPONENTS[i] and operand 1's EXPONENTS[j]; shares in percent of all the frame's
    questions, NaN where a cell holds none (no data, drawn apart from a small share)."""
    pairs = exponent_pairs(frame)
    edges = np.append(EXPONENTS, EXPONENTS[-1] + 1) - 0.5
    counts, _, _ = np.histogram2d(pairs["num2_exp"], pairs["num1_exp"], bins=[edges, edges])
    shares = np.where(counts > 0, counts / max(len(pairs), 1) * 100, np.nan)
    return shares, counts.astype(int)


def exponent_figure(sources: dict[str, pd.DataFrame], title: str) -> go.Figure:
    """Figures 5 and 6: 2-D histogram of operand exponents, one panel per source, coloured by the
    share of that source's questions (one colour scale for all panels); cells without questions
    are grey, a colour the scale does not hold, so "none" is not read as "few"."""
    fig = make_subplots(
        rows=1,
        cols=len(sources),
        horizontal_spacing=0.1,
        subplot_titles=[f"{name} ({len(exponent_pairs(frame)):,} questions)" for name, frame in sources.items()],
    )
    for i, (name, frame) in enumerate(sources.items(), start=1):
        shares, counts = exponent_shares(frame)
        hover = [
            [
                f"exponents {x}, {y}: " + (f"{s:.2f}% of questions ({n:,})" if n else "no questions")
                for x, s, n in zip(EXPONENTS, share_row, count_row)
            ]
            for y, share_row, count_row in zip(EXPONENTS, shares, counts)
        ]
        fig.add_trace(
            go.Heatmap(
                x=EXPONENTS,
                y=EXPONENTS,
                z=shares,
                name=name,
                coloraxis="coloraxis",
                hovertext=hover,
                hoverinfo="text",
                hoverongaps=True,
            ),
            row=1,
            col=i,
        )
        fig.update_xaxes(
            title_text="decimal exponent of operand 1",
            range=[-15.5, 15.5],
            constrain="domain",
            dtick=5,
            showgrid=False,
            zeroline=False,
            row=1,
            col=i,
        )
        fig.update_yaxes(
            title_text="decimal exponent of operand 2",
            range=[-15.5, 15.5],
            constrain="domain",
            dtick=5,
            showgrid=False,
            zeroline=False,
            scaleanchor=f"x{i if i > 1 else ''}",
            row=1,
            col=i,
        )
    fig.update_layout(
        title=dict(
            text=title,
            subtitle=dict(
                text="share of questions per pair of operand exponents (the exponent of 3.5e-4 is -4);<br>"
                f"<span style='color:{NO_DATA}'>■</span> grey: no questions"
            ),
        ),
        width=560 * len(sources) + 120,
        height=630,
        margin=dict(t=150),
        plot_bgcolor=NO_DATA,
        coloraxis=dict(colorscale="Viridis", cmin=0, colorbar=dict(title=dict(text="share of<br>questions (%)"))),
    )
    return fig


def difficulty_distribution(sources: dict[str, dict[str, pd.DataFrame]]) -> pd.DataFrame:
    """Share of samples per decimal difficulty: {source: {task: frame}} -> source, task, difficulty_sd, share."""
    rows = []
    for source, frames in sources.items():
        for task, frame in frames.items():
            if "difficulty_sd" not in frame.columns:
                raise ValueError(f"{source}/{task} has no difficulty_sd column")
            share = frame["difficulty_sd"].value_counts(normalize=True).sort_index()
            rows.append(
                pd.DataFrame(
                    {
                        "source": source,
                        "task": task,
                        "difficulty_sd": share.index.astype(int),
                        "share": share.to_numpy(),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def distribution_distance(shares: pd.DataFrame, a: str, b: str) -> pd.Series:
    """Per task, the total variation distance between the difficulty distributions of sources a
    and b of `difficulty_distribution`: half the summed |difference of shares| over the
    difficulties (0: the same distribution, 1: no difficulty in common)."""
    both = shares[shares["source"].isin([a, b])]
    wide = both.pivot_table(index=["task", "difficulty_sd"], columns="source", values="share", fill_value=0.0)
    return ((wide[a] - wide[b]).abs().groupby(level="task", sort=False).sum() / 2).rename("distance")


def difficulty_bins(shares: pd.DataFrame, bins: int = 40) -> pd.DataFrame:
    """The shares of `difficulty_distribution` summed into at most `bins` bins per task, the same
    bins for every source: integer bins of equal width, or, where the largest difficulty is over 100
    times the smallest (Exp), bins of equal width on a log scale. Columns: source, task, low, high
    (the bin holds low <= difficulty < high), share, log (whether the task's bins are logarithmic)."""
    out = []
    for task, part in shares.groupby("task", sort=False):
        low, high = int(part["difficulty_sd"].min()), int(part["difficulty_sd"].max())
        log = high > 100 * max(low, 1)
        if log:
            edges = np.unique(np.round(np.geomspace(max(low, 1), high + 1, bins + 1)).astype(int))
            edges[0] = low
        else:
            width = max(1, int(np.ceil((high - low + 1) / bins)))
            edges = np.arange(low, high + width + 1, width)
        index = np.searchsorted(edges, part["difficulty_sd"].to_numpy(), side="right") - 1
        binned = part.assign(low=edges[index], high=edges[np.minimum(index + 1, len(edges) - 1)])
        out.append(binned.groupby(["source", "low", "high"], as_index=False)["share"].sum().assign(task=task, log=log))
    return pd.concat(out, ignore_index=True)[["source", "task", "low", "high", "share", "log"]]


def difficulty_distribution_figure(shares: pd.DataFrame, bins: int = 40) -> go.Figure:
    """Figure 7: the distribution of the decimal difficulty per task, one step outline per source
    (`difficulty_bins`: Exp's wide range on a log axis)."""
    binned = difficulty_bins(shares, bins)
    labels = [label for label in TASK_ORDER if label in set(binned["task"].map(TASK_LABELS))]
    fig = make_subplots(
        rows=(len(labels) + 2) // 3, cols=3, subplot_titles=labels, vertical_spacing=0.1, horizontal_spacing=0.07
    )
    sources = list(dict.fromkeys(shares["source"]))
    for k, label in enumerate(labels):
        row, col = k // 3 + 1, k % 3 + 1
        for i, source in enumerate(sources):
            part = binned[(binned["task"].map(TASK_LABELS) == label) & (binned["source"] == source)].sort_values("low")
            x = np.append(part["low"].to_numpy(), part["high"].iloc[-1]) if len(part) else []
            y = np.append(part["share"].to_numpy(), part["share"].iloc[-1]) * 100 if len(part) else []
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="lines",
                    line_shape="hv",
                    name=source,
                    legendgroup=source,
                    showlegend=k == 0,
                    line=dict(color=plots.PALETTE[i], width=2, dash=plots.DASHES[i]),
                    fill="tozeroy" if i == 0 else None,
                    fillcolor="rgba(31,119,180,0.12)",
                    hovertemplate="difficulty %{x}: %{y:.1f}% of questions<extra>" + source + "</extra>",
                ),
                row=row,
                col=col,
            )
        log = bool(binned.loc[binned["task"].map(TASK_LABELS) == label, "log"].any())
        fig.update_xaxes(
            type="log" if log else "linear",
            row=row,
            col=col,
            title_text=("decimal difficulty (A.3)" + (", log scale" if log else ""))
            if row == (len(labels) + 2) // 3 or log
            else None,
        )
        fig.update_yaxes(title_text="questions (%)" if col == 1 else None, rangemode="tozero", row=row, col=col)
    fig.update_layout(
        title=dict(
            text="Figure 7: distribution of the decimal difficulty per task",
            subtitle=dict(
                text=f"share of each source's questions per difficulty bin "
                f"(up to {bins} bins per task, the same for every source)"
            ),
        ),
        legend=dict(orientation="h", x=0, y=-0.07, yanchor="top", title=""),
        width=1250,
        height=1080,
        margin=dict(t=140, b=120),
    )
    return fig
