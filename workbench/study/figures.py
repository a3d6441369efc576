"""What notebook 04 draws from the study: Figure 4's multi-task rows, Study 1's score against
precision and Study 3's score against the training budget, each line with its 95 % interval band.
Plotly is imported when a figure is drawn (the study's commands start without it).
"""

from __future__ import annotations

import pandas as pd

from .. import encoders
from .parts import (
    BUDGET_SEEDS,
    DIGITS,
    ENCODINGS,
    MULTITASK,
    PAPER_REGIME,
    PRECISION,
    PRECISION_SEEDS,
    PRECISION_TASKS,
    VARIANT,
    base_encoding,
)
from .stats import budget_rows, exploratory_as_encoding

METRIC_LABELS = {"log_smape": "log-sMAPE", "exact_match": "exact match", "accuracy": "accuracy"}


# -- what notebook 04 draws --------------------------------------------------------------------
def fig4_results(table: pd.DataFrame, part: str = "multitask") -> pd.DataFrame:
    """A multi-task part's rows (Study 2 or 2b) in the results schema (`workbench.results`; Figure
    4's third row), with the regime columns that `figures.paper.methods.describe_regime` reads and
    the text source its perplexity was measured on (`figures.paper.methods.describe_corpus`)."""
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


def _line_style(encoding: str, k: int) -> dict:
    """Colour, line and marker of the k-th encoding's line (Scatter keyword arguments): its own
    colour (VARIANT a darker shade of its encoding's, and dashed), its own marker, markers
    shrinking with k so that a line drawn earlier shows around one drawn on top of it (single
    digit and NTL nearly coincide in Study 3)."""
    from ..figures import plots

    color = plots.encoding_color(base_encoding(encoding))
    color = plots.variant_color(color) if encoding == VARIANT else color
    return dict(
        line=dict(color=color, width=2.5, dash="dash" if encoding == VARIANT else None),
        marker=dict(color=color, symbol=plots.SYMBOLS[k % len(plots.SYMBOLS)], size=max(12 - 2 * k, 8)),
    )


def precision_figure(intervals: pd.DataFrame):
    """Study 1: score against the operands' significant digits, one line per encoding with its
    95 % interval band; log-sMAPE (top) and exact match (bottom), multiplication and division."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    data = exploratory_as_encoding(intervals)
    data = data[data["study"] == "precision"]
    names = {
        **{e: encoders.label(e) for e in ENCODINGS},
        VARIANT: f"{encoders.label(base_encoding(VARIANT))}, decimal pool (exploratory, not pre-registered)",
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
            for k, encoding in enumerate(ENCODINGS + (VARIANT,)):
                part = data[(data.task == task) & (data.metric == metric) & (data.encoding == encoding)].sort_values(
                    "digits"
                )
                if part.empty:
                    continue
                style = _line_style(encoding, k)
                fig.add_trace(_interval_band(list(part.digits), part, style["line"]["color"], encoding), row=i, col=j)
                fig.add_trace(
                    go.Scatter(
                        x=part.digits,
                        y=part["mean"],
                        mode="lines+markers",
                        name=names[encoding],
                        **style,
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
            ),
        ),
        legend=dict(orientation="h", y=-0.12, x=0),
        margin=dict(t=150),
    )
    return fig


def budget_figure(intervals: pd.DataFrame, metric: str = "log_smape"):
    """Study 3: score against the training budget, one panel per task (rows) and precision
    (columns), one line per encoding with its 95 % interval band."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    data = budget_rows(intervals[intervals.metric == metric])
    digits = sorted(data.digits.unique())
    label = {d: "the paper's regime" if d == PAPER_REGIME else f"d = {d}" for d in digits}
    # the core's BitTokens and budget_more's differ only in A.3's pools, which the recipe gives every
    # encoding whose curriculum counts binary digits (`difficulty_base` 2) and VARIANT takes away
    binary = {e for e, base in encoders.described("difficulty_base").items() if base == 2}
    names = {VARIANT: f"{encoders.label(base_encoding(VARIANT))}, decimal pool"} | {
        e: encoders.label(e) + (", binary pools (the recipe)" if e in binary else "")
        for e in data.encoding.unique()
        if e != VARIANT
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
                style = _line_style(encoding, k)
                color = style["line"]["color"]
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
                        **style,
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
