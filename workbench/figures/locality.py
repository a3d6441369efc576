"""The figures of notebook 02 (section 4's locality): the exact window entropy of Proposition 4.3 (a)
and the learned probes of 4.3 (b). Built from the frames of `workbench.measures.locality`; every series has
its own colour, dash and marker, as several lie on each other (at H = 0, at the majority baseline).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import encoders
from ..measures import locality
from . import plots

OP_TITLES = {"add": "x + y", "mul": "x · y"}
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down"]


def probe_label(encoding: str) -> str:
    """The display name of a probe encoding of `locality.PROBES`: its encoding's and what it reads."""
    probe = locality.PROBES.get(encoding)
    return encoders.label(encoding) if probe is None else encoders.label(probe.encoding) + probe.reads


def window_entropy_figure(best: pd.DataFrame, digits: int, P: int) -> go.Figure:
    """H(output component | best window of w input components) against w, one panel per operation,
    one line per output period (`locality.window_entropy`'s frame). Many lines end at H = 0 together:
    each period has its own dash and marker, markers shrinking with the period so that the
    earlier ones stay visible around the later ones."""
    ops = [op for op in OP_TITLES if op in set(best["op"])]
    periods = sorted(best["output_period"].unique())
    fig = make_subplots(
        rows=1, cols=len(ops), shared_yaxes=True, horizontal_spacing=0.04, subplot_titles=[OP_TITLES[o] for o in ops]
    )
    for col, op in enumerate(ops, start=1):
        for i, e in enumerate(periods):
            part = best[(best["op"] == op) & (best["output_period"] == e)].sort_values("width")
            if part.empty:
                continue
            fig.add_trace(
                go.Scatter(
                    x=part["width"],
                    y=part["entropy"],
                    mode="lines+markers",
                    name=f"10^{e}",
                    legendgroup=str(e),
                    showlegend=not any(t.legendgroup == str(e) for t in fig.data),
                    line=dict(color=plots.PALETTE[i % len(plots.PALETTE)], dash=plots.DASHES[i % len(plots.DASHES)]),
                    marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=max(16 - 2 * i, 6)),
                    hovertemplate=f"output period 10^{e}, w = %{{x}}: H = %{{y:.3f}} bits<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="window width w (components of x and of y)", dtick=1, row=1, col=col)
    fig.update_yaxes(title_text="H (bits)", row=1, col=1)
    fig.update_layout(
        # at the top of the figure: plotly's default centres a title in the top margin, which must be
        # tall for two lines of title and two of subtitle, and leaves a blank band above it. pad.t
        # makes room for the first line, which plotly does not count when it anchors a title by its top.
        title=dict(
            text="Proposition 4.3: what the best window of w input components<br>"
            "leaves unknown about one output component",
            subtitle=dict(
                text=f"conditional entropy H(output component | best window), every pair of integers below "
                f"10^{digits};<br>P = {P} states per component (phases quantized to P levels); H = 0: the window suffices"
            ),
            yref="container",
            y=1,
            yanchor="top",
            pad=dict(t=40),
        ),
        width=1000,
        height=560,
        margin=dict(t=165),
        legend=dict(title="output period"),
    )
    return fig


def component_count(encoding: str) -> int:
    """How many components a probe encoding has (the widest window `probe_windows` can give it)."""
    return len(locality.features(encoding, np.array([1.0]))[1])


BASELINE_DASHES = {"fone": "dash", "log_fone": "dot", "bittokens": "dashdot"}


def probes_figure(probes: pd.DataFrame, steps: int) -> go.Figure:
    """Held-out accuracy of the window probes against the window width (log axis), one panel per
    operation, with each encoding's majority baseline. The widest window of each encoding is all
    its components (FoNE 49 periods, 64 bits): those points are starred and the legend says so."""
    ops = [op for op in OP_TITLES if op in set(probes["op"])]
    names = list(dict.fromkeys(probes["encoding"]))
    full = {n: component_count(n) for n in names}
    fig = make_subplots(
        rows=1, cols=len(ops), shared_yaxes=True, horizontal_spacing=0.04, subplot_titles=[OP_TITLES[o] for o in ops]
    )
    for col, op in enumerate(ops, start=1):
        for name in names:
            part = probes[(probes["op"] == op) & (probes["encoding"] == name)].sort_values("width")
            color = plots.encoding_color(name)
            fig.add_trace(
                go.Scatter(
                    x=part["width"],
                    y=part["accuracy"],
                    mode="lines+markers",
                    name=probe_label(name),
                    legendgroup=name,
                    showlegend=col == 1,
                    line=dict(color=color, width=2.5),
                    marker=dict(
                        color=color,
                        size=[16 if w == full[name] else 8 for w in part["width"]],
                        symbol=["star" if w == full[name] else "circle" for w in part["width"]],
                    ),
                    hovertemplate=f"{probe_label(name)}, w = %{{x}}: accuracy %{{y:.3f}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        for i, name in enumerate(names):  # a trace per baseline, not an hline: each has its own dash and legend entry
            base = float(probes.loc[(probes["op"] == op) & (probes["encoding"] == name), "majority_baseline"].iloc[0])
            fig.add_trace(
                go.Scatter(
                    x=[1, max(full.values())],
                    y=[base, base],
                    mode="lines",
                    name=f"{probe_label(name)} baseline",
                    legendgroup=f"{name} baseline",
                    showlegend=col == 1,
                    # thinner drawn later: where baselines coincide, both colours show
                    line=dict(
                        color=plots.encoding_color(name),
                        dash=BASELINE_DASHES.get(name, "dot"),
                        width=max(3.5 - 0.75 * i, 1.5),
                    ),
                    hovertemplate=f"{probe_label(name)} majority baseline {base:.3f}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            name="all components:<br>" + "<br>".join(f"{probe_label(n)} {full[n]}" for n in names),
            marker=dict(symbol="star", size=14, color="black"),
        )
    )
    ticks = [2**k for k in range(int(np.log2(max(full.values()))) + 1)]  # 49 beside 64 would collide
    fig.update_xaxes(
        type="log",
        tickvals=ticks,
        ticktext=[str(t) for t in ticks],
        title_text="window width w (log scale)",
    )
    fig.update_yaxes(title_text="held-out accuracy", row=1, col=1)
    fig.update_layout(
        title=dict(
            text="Learned probes: one output component of x + y or x · y from a window of w input components",
            subtitle=dict(
                text=f"MLP, {steps} steps, 3-digit integer operands; w input components of x and of y; "
                "dashed, dotted, dash-dotted: each encoding's majority baseline"
            ),
        ),
        width=1200,
        height=540,
        margin=dict(t=120),
        legend=dict(title="encoding"),
    )
    return fig
