"""The figures of notebook 01: what the encodings make of one number (the explorer), the scorecard
of D1-D9 beside the paper's verdicts, and the D4, D7 and D8 measurements. Each takes the frames of
`workbench.measures.desiderata` and names every encoding by its display name (`encoders.label`).
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from .. import encoders
from ..encoders import fone
from ..measures import desiderata, scorecard
from ..numbers import render
from . import plots

# -- the explorer ------------------------------------------------------------------------------
# field, first bit, end, colour, where its label sits (the sign's left of the axis, clear of the exponent's)
BIT_FIELDS = [
    ("±", 0, 1, "#d62728", "right"),
    ("exponent", 1, 12, "#1f77b4", "left"),
    ("significand", 12, 64, "#2ca02c", "center"),
]
PIECE_SHADES = ["#deebf7", "#b9d4ec"]  # neighbouring tokens alternate, so their borders show


def digit_pieces(value: float) -> dict[str, list[str]]:
    """The pieces each digit encoding writes for the number: its text render(value, 17) (the
    shortest text that is exactly the value, as the tokenizer writes a decoded number) cut by
    the encoding's `number_tokens`. Empty for a value without a decimal text (inf, NaN)."""
    if not math.isfinite(value):
        return {}
    text = render(value, 17)
    return {
        name: encoders.get(name).number_tokens(text) for name in encoders.names() if not encoders.get(name).single_token
    }


def _bits_panel(fig: go.Figure, x: torch.Tensor) -> None:
    bits = (encoders.get("bittokens").encode(x)[0, :64] > 0).int().numpy()
    for field, start, stop, color, anchor in BIT_FIELDS:
        fig.add_vrect(x0=start - 0.5, x1=stop - 0.5, fillcolor=color, opacity=0.12, line_width=0, row=1, col=1)
        fig.add_trace(
            go.Bar(
                x=np.arange(start, stop),
                y=bits[start:stop],
                marker_color=color,
                showlegend=False,
                hovertemplate=f"{field} bit %{{x}}: %{{y}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_annotation(
            x=(start + stop - 1) / 2 if anchor == "center" else start - 0.5,
            xanchor=anchor,
            y=1.12,
            showarrow=False,
            font=dict(color=color, size=15),
            xref="x",
            yref="y",
            text=field if stop - start == 1 else f"{field} ({stop - start} bits)",
        )
    fig.update_xaxes(title_text="bit position (0 = sign)", range=[-0.5, 63.5], row=1, col=1)
    fig.update_yaxes(title_text="bit", tickvals=[0, 1], range=[0, 1.25], row=1, col=1)


def _pieces_panel(fig: go.Figure, value: float) -> None:
    """One row per digit encoding, one box per token, as wide as the token's text."""
    pieces = digit_pieces(value)
    for name in list(pieces)[::-1]:  # the first encoding on top
        widths = [len(p) for p in pieces[name]]
        fig.add_trace(
            go.Bar(
                x=widths,
                base=np.cumsum([0] + widths[:-1]),
                y=[f"{encoders.label(name)} ({len(widths)})"] * len(widths),
                orientation="h",
                width=0.7,
                text=pieces[name],
                textposition="inside",
                insidetextanchor="middle",
                textangle=0,
                textfont=dict(size=13, color="#1f1f1f"),
                constraintext="none",
                marker=dict(
                    color=[PIECE_SHADES[i % 2] for i in range(len(widths))], line=dict(color="white", width=1.5)
                ),
                showlegend=False,
                hovertemplate="%{text}<extra></extra>",
            ),
            row=3,
            col=1,
        )
    chars = max((sum(map(len, p)) for p in pieces.values()), default=0)
    fig.update_xaxes(
        title_text="characters of the number's text (one box per token)",
        showgrid=False,
        dtick=5,
        range=[0, max(chars, 24) + 0.5],
        row=3,
        col=1,
    )
    fig.update_yaxes(showgrid=False, row=3, col=1)


def explorer_figure(value: float) -> go.Figure:
    """What the encodings make of `value`: the 64 bits BitTokens feed the model, the FoNE phase at
    every period, the xVal scale (in the title) and the tokens of every digit encoding."""
    x = torch.tensor([value], dtype=torch.float64)
    fig = make_subplots(
        rows=3,
        cols=1,
        vertical_spacing=0.12,
        row_heights=[0.3, 0.3, 0.4],
        subplot_titles=[
            f"{encoders.label('bittokens')}: the 64 bits of the float64 (IEEE 754: sign, exponent, significand)",
            f"{encoders.label('fone')}: phase of the number at each period 10^φ (frac(|x| / 10^φ))",
            "digit encodings: the tokens of the number's text (in brackets: how many)",
        ],
    )
    _bits_panel(fig, x)
    if math.isfinite(value):
        fig.add_trace(
            go.Scatter(
                x=fone.EXPONENTS,
                y=fone.phases(x)[0],
                mode="lines+markers",
                showlegend=False,
                line=dict(color=plots.encoding_color("fone")),
                hovertemplate="10^%{x}: %{y:.4f}<extra></extra>",
            ),
            row=2,
            col=1,
        )
    fig.update_xaxes(title_text="period exponent φ", dtick=4, row=2, col=1)
    fig.update_yaxes(title_text="phase (turns)", range=[0, 1], row=2, col=1)
    _pieces_panel(fig, value)
    scale = encoders.get("xval").encode(x).item()
    fig.update_layout(
        title=dict(
            text=f"What the encodings make of {value!r}",
            subtitle=dict(
                text=f"{encoders.label('xval')} scale s = {scale:.6g}; text written "
                f"by the digit encodings: {render(value, 17) if math.isfinite(value) else 'none (not finite)'}"
            ),
        ),
        height=880,
        width=900,
        margin=dict(t=110, l=170),
        bargap=0.15,
        barmode="overlay",
    )
    return fig


# -- the scorecard -----------------------------------------------------------------------------
# Column headers are horizontal, wrapped at HEADER_CHARS characters a line, and every column is
# wide enough for such a line in bold at HEADER_FONT px: rotated headers of neighbouring columns
# overlap, and plotly rotates them by itself when they do not fit their column.
HEADER_CHARS = 12
HEADER_FONT = 12
COLUMN_PX = 100


def scorecard_figure(card: pd.DataFrame, d9_steps: int) -> go.Figure:
    """One row per desideratum; per encoding a column of measured verdicts and, where the paper
    judges that encoding, its verdicts beside. * marks a measured verdict the paper does not share.
    D9 rests on a small MLP trained `d9_steps` steps: the figure says so."""
    verdicts = list(plots.VERDICT_COLORS)
    columns = []
    for name in encoders.names():
        rows = card[card["encoding"] == name].set_index("desideratum")
        label = "<br>".join(textwrap.wrap(encoders.label(name), HEADER_CHARS, break_on_hyphens=False))
        columns.append((f"<b>{label}</b><br>measured", rows["verdict"], rows["measured"], rows["paper"]))
        if (rows["paper"] != "—").any():
            columns.append((f"{label}<br>paper", rows["paper"], None, None))
    keys = list(desiderata.DESIDERATA)
    names = [
        f"{d} {desiderata.DESIDERATA[d]}" + (f"<br><sup>{d9_steps}-step probe</sup>" if d == "D9" else "") for d in keys
    ]
    z = [[verdicts.index(col[1][d]) for col in columns] for d in keys]
    text = [
        [col[1][d] + (" *" if col[3] is not None and col[3][d] not in ("—", col[1][d]) else "") for col in columns]
        for d in keys
    ]
    hover = [[col[2][d] if col[2] is not None else "the paper's verdict" for col in columns] for d in keys]
    scale = [
        [i / len(verdicts) + edge / len(verdicts), plots.VERDICT_COLORS[v]]
        for i, v in enumerate(verdicts)
        for edge in (0, 1)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[c[0] for c in columns],
            y=names,
            text=text,
            texttemplate="%{text}",
            customdata=hover,
            hovertemplate="%{y}, %{x}: %{text}<br>%{customdata}<extra></extra>",
            colorscale=scale,
            zmin=-0.5,
            zmax=len(verdicts) - 0.5,
            showscale=False,
            xgap=3,
            ygap=3,
            textfont=dict(size=15),
        )
    )
    for v in verdicts:  # legend swatches for the four verdicts
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=v,
                marker=dict(symbol="square", size=14, color=plots.VERDICT_COLORS[v]),
            )
        )
    fig.update_yaxes(autorange="reversed", title_text="")
    fig.update_xaxes(side="top", title_text="", tickangle=0, tickfont=dict(size=HEADER_FONT))
    fig.update_layout(
        title=dict(
            text="The nine desiderata: measured verdicts beside the paper's",
            y=0.98,
            subtitle=dict(
                text=f"* measured verdict differs from the paper's; n/a: does not apply to text tokens.<br>D9 is a quick probe: "
                f"a small MLP trained {d9_steps} steps per operation (the paper's verdict rests on trained models)"
            ),
        ),
        legend=dict(orientation="h", x=0, y=-0.03, yanchor="top"),
        # a column wide enough for its header line and for "trade-off *", however many encodings are registered
        width=max(1050, 220 + COLUMN_PX * len(columns)),
        height=680,
        margin=dict(t=180, l=200, r=20),
        plot_bgcolor="white",
    )
    return fig


# -- D4 ----------------------------------------------------------------------------------------
ROW_PX = 26


def d4_figure(d4: pd.DataFrame) -> go.Figure:
    """D4 per decade: the share of values that round-trip exactly, every encoding (the scorecard
    counts a decade at >= D4_DECADE_EXACT), and below, on a log axis, the median relative error
    of the encodings that are not exact everywhere."""
    names = list(dict.fromkeys(d4["encoding"]))
    exact = d4.pivot(index="encoding", columns="decade", values="exact").loc[names[::-1]] * 100
    counted = (exact >= scorecard.D4_DECADE_EXACT * 100).sum(axis=1)
    inexact = [n for n in names if (d4.loc[d4["encoding"] == n, "median_rel_error"] > 0).any()]
    threshold = f"{scorecard.D4_DECADE_EXACT:.0%}"
    # a row of cells ROW_PX high for every encoding, so that every row's label fits beside it
    heat_px, error_px = ROW_PX * len(names), 260 if inexact else 0
    fig = make_subplots(
        rows=2 if inexact else 1,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        row_heights=[heat_px, error_px] if inexact else None,
        subplot_titles=[
            f"values that round-trip exactly (%); a decade counts for D4 at ≥ {threshold}",
            "median relative error |decode(encode(x)) − x| / |x| where not exact",
        ][: 2 if inexact else 1],
    )
    rows = [f"{encoders.label(n)} ({counted[n]}/{exact.shape[1]})" for n in exact.index]
    fig.add_trace(
        go.Heatmap(
            z=exact.to_numpy(),
            x=list(exact.columns),
            zmin=0,
            zmax=100,
            xgap=1,
            ygap=2,
            y=rows,
            colorscale=[
                [0, plots.VERDICT_COLORS["fail"]],
                [0.5, plots.VERDICT_COLORS["trade-off"]],
                [1, plots.VERDICT_COLORS["pass"]],
            ],
            text=np.where(
                exact.to_numpy() < scorecard.D4_DECADE_EXACT * 100,
                np.round(exact.to_numpy()).astype(int).astype(str),
                "",
            ),
            texttemplate="%{text}",
            textfont=dict(size=12),
            colorbar=dict(title=dict(text="exact (%)"), len=0.5, y=1, yanchor="top"),
            hovertemplate="%{y}, decade 10^%{x}: %{z:.1f}% exact<extra></extra>",
        ),
        row=1,
        col=1,
    )
    for name in inexact:
        part = d4[(d4["encoding"] == name) & (d4["median_rel_error"] > 0)]
        fig.add_trace(
            go.Scatter(
                x=part["decade"],
                y=part["median_rel_error"],
                mode="lines+markers",
                name=encoders.label(name),
                line=dict(color=plots.encoding_color(name)),
            ),
            row=2,
            col=1,
        )
    if inexact:
        errors = d4.loc[d4["encoding"].isin(inexact) & (d4["median_rel_error"] > 0), "median_rel_error"]
        fig.update_yaxes(
            type="log", title_text="median relative error", **plots.log_ticks(errors.min(), errors.max()), row=2, col=1
        )
    # every row named: left to itself plotly labels only every other row once they are close
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=rows, tickfont=dict(size=13), row=1, col=1)
    fig.update_xaxes(title_text="decade d of |x| (10^d ≤ |x| < 10^(d+1))", row=2 if inexact else 1, col=1)
    fig.update_xaxes(dtick=5)
    fig.update_layout(
        title=dict(
            text="D4: round trip per decade of magnitude",
            subtitle=dict(
                text=f"in brackets: decades at ≥ {threshold} exact; D4 passes when all are (15-digit values, both signs); "
                "numbers in cells: % exact where below"
            ),
        ),
        width=1000,
        height=260 + heat_px + error_px,
        margin=dict(t=120, l=200),
        legend=dict(title="encoding", y=0.42, yanchor="top"),
    )
    return fig


# -- D7 ----------------------------------------------------------------------------------------
EXAMPLE_SYMBOLS = {7.0: "star", 8.0: "x", 3.0: "circle-open"}  # section 5: the label 7, predictions 8 and 3


def loss_axis(losses: pd.Series) -> tuple[float, float, bool]:
    """(bottom, top, clipped) of a loss axis that shows the curve around its minimum: a spike of
    a few points far above the rest (max > 3 × the 95th percentile) is left above the axis."""
    low, high, q95 = float(losses.min()), float(losses.max()), float(losses.quantile(0.95))
    clipped = high > 3 * q95
    top = 1.3 * q95 if clipped else high
    pad = 0.05 * (top - min(low, 0.0))
    return min(low, 0.0) - pad, top + pad, clipped


def d7_figure(curves: pd.DataFrame, example: pd.DataFrame, target: float = 7.0) -> go.Figure:
    """Each encoding's own loss of an ideal head predicting p for `target` (one panel each), with
    section 5's example predictions marked by symbol."""
    curves = curves[curves["target"] == target]
    names = list(dict.fromkeys(curves["encoding"]))
    fig = make_subplots(
        rows=len(names),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        subplot_titles=[encoders.label(n) for n in names],
    )
    for row, name in enumerate(names, start=1):
        part = curves[curves["encoding"] == name]
        fig.add_trace(
            go.Scatter(
                x=part["prediction"],
                y=part["loss"],
                mode="lines",
                showlegend=False,
                line=dict(color=plots.encoding_color(name), width=2),
                hovertemplate="p = %{x}: loss %{y:.4g}<extra></extra>",
            ),
            row=row,
            col=1,
        )
        for p, symbol in EXAMPLE_SYMBOLS.items():
            point = example[(example["encoding"] == name) & (example["prediction"] == p)]
            fig.add_trace(
                go.Scatter(
                    x=point["prediction"],
                    y=point["loss"],
                    mode="markers",
                    legendgroup=str(p),
                    name=f"p = {p:g}" + (" (the label)" if p == target else f", {abs(p - target):g} off"),
                    showlegend=row == 1,
                    marker=dict(color="black", size=12, symbol=symbol, line=dict(width=2)),
                ),
                row=row,
                col=1,
            )
        bottom, top, clipped = loss_axis(part["loss"])
        fig.update_yaxes(range=[bottom, top], title_text="loss", row=row, col=1)
        if clipped:
            peak = part.loc[part["loss"].idxmax()]
            fig.add_annotation(
                text=f"↑ up to {peak['loss']:.3g} at p = {peak['prediction']:g}, above the axis",
                x=peak["prediction"],
                y=1,
                xref=f"x{row if row > 1 else ''}",
                xanchor="left",
                yref=f"y{row if row > 1 else ''} domain",
                yanchor="top",
                showarrow=False,
                font=dict(size=13, color="#555555"),
            )
        fig.add_vline(x=target, line_dash="dot", line_color="black", row=row, col=1)
    fig.update_xaxes(title_text="predicted number p", row=len(names), col=1)
    fig.update_layout(
        title=dict(
            text=f"D7: each encoding's own training loss against the prediction p, for the label {target:g}",
            subtitle=dict(text="loss of an ideal head predicting p (dotted: the label); marked: section 5's example"),
        ),
        legend=dict(title="section 5's example"),
        height=760,
        width=1000,
        margin=dict(t=120),
    )
    return fig


# -- D8 ----------------------------------------------------------------------------------------
D8_NEAR_ZERO = 0.01  # encodings never above 1 % exact are named in a note: their lines lie on each other at 0
D8_SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down"]


def d8_figure(d8: pd.DataFrame) -> go.Figure:
    """Values decoded exactly from an ideal head output plus Gaussian noise, against the noise.
    Each encoding has its own dash and marker, so that lines lying on each other stay apart, and
    the subtitle names the encodings that stay near 0 % and says why."""
    fig = go.Figure()
    for i, (name, part) in enumerate(d8.groupby("encoding", sort=False)):
        fig.add_trace(
            go.Scatter(
                x=part["sigma"],
                y=part["exact"] * 100,
                mode="lines+markers",
                name=encoders.label(name),
                line=dict(color=plots.encoding_color(name), dash=plots.DASHES[i % len(plots.DASHES)], width=2.5),
                # smaller markers drawn later: where lines coincide, the earlier marker shows around the later
                marker=dict(symbol=D8_SYMBOLS[i % len(D8_SYMBOLS)], size=max(14 - 2 * i, 6)),
            )
        )
    best = d8.groupby("encoding", sort=False)["exact"].max()
    low = best[best <= D8_NEAR_ZERO]
    note = None
    if len(low):
        at_zero = d8[d8["sigma"] == d8["sigma"].min()].set_index("encoding")["exact"]
        named = " and ".join(
            f"{encoders.label(n)} ({at_zero[n]:.1%}" + (f" exact at σ = {d8['sigma'].min():g})" if k == 0 else ")")
            for k, n in enumerate(low.index)
        )
        # why: a regression head's output is one float32 (about 7 significant digits), whatever the noise
        note = (
            f"{named} never decode more than {low.max():.1%} exactly: their lines lie on each other at 0.<br>"
            "Their head's output is one float32 number, too coarse for values of up to 15 digits even without noise."
        )
    fig.update_layout(
        title=dict(text="D8: exact decoding of an ideal head output under Gaussian noise", subtitle=dict(text=note)),
        width=1000,
        height=560,
        margin=dict(t=130 if note else 80),
        xaxis_title="noise σ (multiples of the RMS of the head output vector)",
        yaxis_title="values decoded exactly (%)",
        legend_title="encoding",
    )
    return fig
