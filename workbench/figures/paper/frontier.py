"""Figures 2 and 3: the frontier models per task on a radar (Table 1), and their scores against the
tokens they spent answering (Tables 1 and 3), our models beside them."""

from __future__ import annotations

from html import escape

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import plots
from .sources import RADAR_ORDER, TASK_LABELS
from .style import MODEL_COLORS, MODELS, SETTING_SYMBOL, TASK_ORDER, facet_titles, log_ticks, reasoning_setting


def radar_data(frontier: pd.DataFrame) -> pd.DataFrame:
    """One row per model and reasoning setting, one column per task (Table 1 order), in percent."""
    wide = frontier.pivot_table(index=["model", "reasoning"], columns="task", values="performance", sort=False)
    return (wide[[t for t in RADAR_ORDER if t in wide.columns]] * 100).reset_index()


def radar_figure(frontier: pd.DataFrame) -> go.Figure:
    """Figure 2: score per task, one polygon per model, maximal reasoning beside minimal/none."""
    data = radar_data(frontier)
    tasks = [t for t in RADAR_ORDER if t in data.columns]
    theta = [TASK_LABELS[t] for t in tasks] + [TASK_LABELS[tasks[0]]]
    fig = make_subplots(
        rows=1,
        cols=2,
        specs=[[{"type": "polar"}] * 2],
        horizontal_spacing=0.14,
        subplot_titles=["maximal reasoning", "minimal or no reasoning"],
    )
    shown = set()
    for row in data.itertuples(index=False):
        r = [getattr(row, t) for t in tasks]
        fig.add_trace(
            go.Scatterpolar(
                r=r + r[:1],
                theta=theta,
                mode="lines+markers",
                name=row.model,
                legendgroup=row.model,
                showlegend=row.model not in shown,
                line=dict(color=MODEL_COLORS.get(row.model), width=2),
                hovertemplate="%{theta}: %{r:.1f}%<extra>" + f"{row.model} ({row.reasoning})</extra>",
            ),
            row=1,
            col=1 if row.reasoning == "maximal" else 2,
        )
        shown.add(row.model)
    # Add on top, clockwise; the ring labels sit on the radius halfway between Add and Mult, where
    # no spoke runs (on a spoke they would sit on the task's own line).
    spokes = 360 / len(tasks)
    fig.update_polars(
        angularaxis=dict(rotation=90, direction="clockwise", tickfont=dict(size=16)),
        radialaxis=dict(
            range=[0, 108],
            tickvals=[0, 25, 50, 75, 100],
            ticktext=["0", "25", "50", "75", "100 %"],
            showticklabels=True,
            angle=90 - spokes / 2,
            tickangle=90 - spokes / 2,
            tickfont=dict(size=12, color="#555555"),
            ticks="",
            showline=False,
        ),
    )
    # A model without a row in a panel's setting is named under that panel, so its absence is not
    # read as a polygon hidden under the others.
    domains = ([0.02, 0.4], [0.52, 0.9])
    for title, domain in zip(fig.layout.annotations, domains):  # the panel titles, over their polars
        title.update(x=sum(domain) / 2, yshift=50, font=dict(size=18))
    for setting, maximal, domain in zip(("maximal", "minimal or no"), (True, False), domains):
        drawn = set(data.loc[(data["reasoning"] == "maximal") == maximal, "model"])
        absent = [m for m in dict.fromkeys(data["model"]) if m not in drawn]
        if absent:
            fig.add_annotation(
                text=f"not drawn, no {setting} reasoning row in the data:<br>{escape(', '.join(absent))}",
                x=sum(domain) / 2,
                xanchor="center",
                y=-0.02,
                xref="paper",
                yref="paper",
                yanchor="top",
                showarrow=False,
                font=dict(size=13, color="#555555"),
            )
    fig.update_layout(
        title=dict(
            text="Figure 2: frontier LLMs' score per task (Table 1)",
            y=0.97,
            subtitle=dict(
                text="log-sMAPE (%) for Add, Mult, Div, Mean, Std, Exp; exact-match "
                "accuracy (%) for MinMax, Interval, Sort;<br>rings at 0 (the centre), 25, 50, 75 "
                "and 100 %, labelled between Add and Mult"
            ),
        ),
        polar=dict(domain=dict(x=domains[0])),
        polar2=dict(domain=dict(x=domains[1])),
        legend=dict(title="model", font=dict(size=14), x=0.95),
        margin=dict(t=175, b=80, l=40),
        width=1150,
        height=650,
    )
    return fig


OURS_SETTING = "workbench model, trained"  # Study 3's models beside the frontier LLMs: their own marker


def tokens_figure(frontier: pd.DataFrame, ours: pd.DataFrame | None = None) -> go.Figure:
    """Figure 3: mean tokens per problem against score, one panel per task. `ours`: rows of the
    workbench's own models on the same questions (model, task, tokens, performance in 0..1, and
    optionally budget: training tokens), drawn with a star in the panels of their tasks, larger
    for a larger budget."""
    data = frontier.assign(setting=reasoning_setting(frontier["reasoning"]))
    colors, symbols, order = dict(MODEL_COLORS), dict(SETTING_SYMBOL), list(MODELS)
    if ours is not None and len(ours):
        data = pd.concat([data, ours.assign(setting=OURS_SETTING, reasoning="none")], ignore_index=True)
        extra = list(dict.fromkeys(ours["model"]))
        colors.update({m: plots.encoding_color(e) for m, e in zip(ours["model"], ours["encoding"])})
        symbols[OURS_SETTING] = "star"
        order += extra
    data = data.assign(score=data["performance"] * 100, label=data["task"].map(TASK_LABELS))
    fig = px.scatter(
        data,
        x="tokens",
        y="score",
        color="model",
        symbol="setting",
        facet_col="label",
        facet_col_wrap=3,
        log_x=True,
        hover_data=["reasoning"],
        facet_row_spacing=0.08,
        category_orders={"label": TASK_ORDER, "model": order},
        color_discrete_map=colors,
        symbol_map=symbols,
        labels={"tokens": "tokens per problem", "score": "score (%)", "model": "model", "setting": "setting"},
    )
    facet_titles(fig)
    fig.update_traces(marker=dict(size=11, line=dict(width=1.5)))
    if ours is not None and "budget" in ours:  # one model trained longer: a larger star, else they coincide
        rank = {b: k for k, b in enumerate(sorted(ours["budget"].unique()))}
        size = {f"{m}, {OURS_SETTING}": 10 + 6 * rank[b] for m, b in zip(ours["model"], ours["budget"])}
        fig.for_each_trace(lambda t: t.update(marker_size=size[t.name]) if t.name in size else None)
    fig.update_xaxes(**log_ticks(1, 10**6), showticklabels=True)
    fig.update_yaxes(range=[0, 105])
    fig.update_layout(
        title=dict(
            text="Figure 3: tokens generated per problem against score (Tables 1 and 3)",
            subtitle=dict(
                text="score: log-sMAPE for arithmetic, exact-match accuracy for "
                "MinMax, Interval, Sort; mean over 500 questions per task"
                + (
                    "<br>stars: the workbench's models on the same questions, larger when trained on more tokens"
                    if ours is not None and len(ours)
                    else ""
                )
            ),
        ),
        margin=dict(t=160 if ours is not None and len(ours) else 110),
        width=1200,
        height=900,
    )
    return fig
