"""The figures of notebook 03 (one training run): its learning curves, drawn live while it trains
and once more when it has finished, and its test score per decimal difficulty. Built from the run
directory (`runs.logs.load_metrics`, test_samples.csv) and the run's `TrainConfig`; the title names
the CPU kernels the run was made on, as another capability rounds otherwise and draws other curves.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import encoders
from .. import tasks as task_registry
from ..runs.logs import load_metrics
from ..runs.provenance import recorded_kernels
from ..training.balancing import weight_changes
from ..training.curriculum import difficulty_column
from . import plots

# the loss panel's three curves: apart by colour, width and dash (two greys, dotted and dashed, read
# as one), in colours that are not the tasks' (PALETTE) of the other panels
LOSS_LINES = (
    ("loss", "total loss (weighted)", dict(color="#222222", dash="solid", width=2.5)),
    ("ce", "cross-entropy", dict(color="#7570b3", dash="dot", width=2)),
    ("number", "number-head loss", dict(color="#e7298a", dash="dash", width=2)),
)
PANELS = {
    (1, 1): "loss per learned token (log scale)",
    (1, 2): "score (0 to 1)",
    (2, 1): "share of the batch",
    (2, 2): "difficulty level",
}


def end_phase(total_steps: int, evals: pd.DataFrame) -> int | None:
    """First step of the decimal end phase (A.3), for a run with binary pools (an encoding trained
    on base-2 difficulty and a curriculum task; their evaluations log `endgame/<task>`)."""
    if not any(c.startswith("endgame/") for c in evals):
        return None
    return next(s for s in range(total_steps + 1) if difficulty_column(2, s, total_steps) == "difficulty_sd")


def _mark_end_phase(fig: go.Figure, steps: pd.DataFrame, evals: pd.DataFrame) -> None:
    """Shade the decimal end phase in every panel (the loss steps up there: the batches suddenly
    hold questions of every difficulty)."""
    last = int(steps["step"].max())
    start = end_phase(last, evals)
    if start is None:
        return
    for row, col in PANELS:
        fig.add_vrect(x0=start, x1=last, fillcolor="#bbbbbb", opacity=0.25, line_width=0, row=row, col=col)
    # written up the shaded band of the loss panel, where the loss steps up; at the panel's top
    # corner it ran into the panel's title
    fig.add_annotation(
        x=(start + last) / 2,
        y=0.5,
        xref="x",
        yref="y domain",
        text="decimal end phase (A.3)",
        textangle=-90,
        showarrow=False,
        font=dict(size=13, color="#555555"),
        bgcolor="rgba(255, 255, 255, 0.7)",
    )


def _mark_weight_changes(fig: go.Figure, evals: pd.DataFrame) -> None:
    """Dashed lines where C.4 set the loss weights: the total loss changes scale there without the
    model changing. A run that moves them at every evaluation gets the first line only."""
    changes = weight_changes(evals) if not evals.empty else []
    for step in changes if len(changes) <= 3 else changes[:1]:
        fig.add_vline(x=step, line_dash="dash", line_color="#888888", line_width=1.5, row=1, col=1)
    if changes:
        fig.add_annotation(
            x=changes[0],
            y=0.02,
            xref="x",
            yref="y domain",
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            text="loss weights set (C.4)" + (", then moved at every evaluation" if len(changes) > 3 else ""),
        )


def _explain_frontier(fig: go.Figure, cfg) -> None:
    """Say in the frontier panel why it is empty, or which task has no line in it."""
    task_list = cfg.tasks
    curricular = [t for t in task_registry.names() if task_registry.get(t).curriculum]
    panel = fig.get_subplot(2, 2)
    if not cfg.difficulty.curriculum or not set(curricular) & set(task_list):
        why = "curriculum=False" if not cfg.difficulty.curriculum else f"none of {', '.join(task_list)} has one"
        note = f"no curriculum in this run ({why}); the curricula of C.3 are those of {', '.join(curricular)}"
        fig.add_annotation(
            text="<br>".join(textwrap.wrap(note, 42)),
            x=sum(panel.xaxis.domain) / 2,
            y=sum(panel.yaxis.domain) / 2,
            xref="paper",
            yref="paper",
            xanchor="center",
            showarrow=False,
            font=dict(color="#7f7f7f"),
        )
    elif set(task_list) - set(curricular):
        fig.add_annotation(
            text=f"no curriculum, no line: {', '.join(t for t in task_list if t not in curricular)}",
            x=panel.xaxis.domain[1],
            y=panel.yaxis.domain[0] + 0.01,
            xref="paper",
            yref="paper",
            xanchor="right",
            yanchor="bottom",
            showarrow=False,
            font=dict(color="#7f7f7f"),
        )


def curves(run_dir: Path, cfg, finished: bool = False) -> go.Figure:
    """Four panels from the run directory: the training loss (total, cross-entropy, number head),
    the validation score per task, the balancer's task sampling ratios (eq. 16) and each
    curriculum's frontier (C.3). `finished`: the run is over, so its decimal end phase is known."""
    task_list = cfg.tasks
    steps, evals = load_metrics(run_dir)
    fig = make_subplots(
        rows=2,
        cols=2,
        vertical_spacing=0.18,
        horizontal_spacing=0.1,
        subplot_titles=[
            "training loss",
            "validation score per task",
            "task sampling ratio (balancer, eq. 16)",
            "curriculum frontier (C.3)",
        ],
    )
    for column, label, line in LOSS_LINES:
        if column in steps:
            fig.add_trace(
                go.Scatter(
                    x=steps["step"],
                    y=steps[column],
                    name=label,
                    legendgroup="loss",
                    legendgrouptitle_text="loss",
                    line=line,
                ),
                1,
                1,
            )
    colors = dict(zip(task_list, plots.PALETTE))
    for panel, prefix in (((1, 2), "score/"), ((2, 1), "ratio/"), ((2, 2), "frontier/")):
        for i, task in enumerate(task_list):
            if prefix + task in evals:
                style = plots.series_style(i)  # curricula often reach the same level: each task its own dash and marker
                fig.add_trace(
                    go.Scatter(
                        x=evals["step"],
                        y=evals[prefix + task],
                        mode="lines+markers",
                        name=task,
                        legendgroup=task,
                        legendgrouptitle_text="task" if task == task_list[0] else None,
                        showlegend=prefix == "score/",
                        line=dict(color=colors[task], **style["line"]),
                        marker=style["marker"],
                    ),
                    *panel,
                )
    if finished and not steps.empty:
        _mark_end_phase(fig, steps, evals)
    _mark_weight_changes(fig, evals)
    _explain_frontier(fig, cfg)
    # a log axis: the first steps' drop (from ~10) would otherwise flatten the rest of the run
    fig.update_yaxes(type="log", exponentformat="power", row=1, col=1)
    for (row, col), label in PANELS.items():
        fig.update_yaxes(title_text=label, row=row, col=col)
    levels = evals[[c for c in evals if c.startswith("frontier/")]].stack() if not evals.empty else pd.Series()
    if len(levels):  # whole levels only
        fig.update_yaxes(tick0=0, dtick=max(1, int(levels.max() - levels.min()) // 6 + 1), row=2, col=2)
    # one step range in every panel (the loss is logged from step 1, the evaluations from the first
    # evaluation on: each panel's own range put the same step at other places)
    last = max([int(frame["step"].max()) for frame in (steps, evals) if not frame.empty] or [1])
    fig.update_xaxes(title_text="training step", range=[0, last * 1.03], matches="x")
    made_on = recorded_kernels(run_dir)
    fig.update_layout(
        height=740,
        width=1100,
        margin=dict(r=20),
        title=f"Training {encoders.label(cfg.encoding)} on {', '.join(task_list)} ({cfg.model.preset}, "
        f"{cfg.tokens:,.0f} tokens, seed {cfg.seed}{f', {made_on} kernels' if made_on else ''})",
    )
    return fig


def score_by_difficulty(run_dir: Path, cfg) -> pd.DataFrame:
    """Mean test score and number of questions per (task, decimal difficulty of A.3). The test
    questions are regenerated (same seed, split and regime give the same frame) to attach their
    difficulty to each answer of test_samples.csv; every answer must find its question."""
    samples = pd.read_csv(run_dir / "test_samples.csv")
    difficulty = pd.concat(
        task_registry.generate(
            task,
            cfg.evaluation.test_samples,
            cfg.seed,
            "test",
            decades=cfg.data.decades,
            max_digits=cfg.data.max_digits,
        )[["prompt", "difficulty_sd"]].assign(task=task)
        for task in cfg.tasks
        if task != "text"
    )
    by_level = (
        samples.merge(difficulty.drop_duplicates(["task", "prompt"]), on=["task", "prompt"], how="left")
        .groupby(["task", "difficulty_sd"])["score"]
        .agg(score="mean", n="size")
        .reset_index()
    )
    if by_level["n"].sum() != len(samples):
        raise ValueError(
            f"{run_dir}: {len(samples) - by_level['n'].sum()} test answers found no question "
            "(was the run trained with other --decades, --max-digits or --test-samples?)"
        )
    return by_level


def difficulty_figure(by_level: pd.DataFrame, cfg, run_dir: Path) -> go.Figure:
    """Mean test score per decimal difficulty (top) over the number of questions it averages
    (bottom), one colour per task."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.68, 0.32], vertical_spacing=0.06)
    colors = dict(zip(cfg.tasks, plots.PALETTE))
    for i, (task, part) in enumerate(by_level.groupby("task", sort=False)):
        metric = "log-sMAPE" if task in task_registry.with_metric("log_smape") else "accuracy"
        style = plots.series_style(i)
        fig.add_trace(
            go.Scatter(
                x=part["difficulty_sd"],
                y=part["score"],
                mode="lines+markers",
                name=f"{task} ({metric})",
                legendgroup=task,
                line=dict(color=colors[task], **style["line"]),
                marker=style["marker"],
                customdata=part["n"],
                hovertemplate="difficulty %{x}: %{y:.3f} over %{customdata} questions<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=part["difficulty_sd"],
                y=part["n"],
                name=task,
                legendgroup=task,
                showlegend=False,
                marker_color=colors[task],
                opacity=0.75,
            ),
            row=2,
            col=1,
        )
    # the axis fits the scores (a short run scores far below 1) and stops at 1, the best score
    fig.update_yaxes(title_text="mean test score", range=plots.padded_range(by_level["score"], 0, 1.02), row=1, col=1)
    fig.update_yaxes(title_text="questions", row=2, col=1)
    fig.update_xaxes(
        title_text="decimal difficulty (from the non-zero digits of the operands, the paper's appendix A.3)",
        row=2,
        col=1,
    )
    fig.update_layout(
        barmode="group",
        width=1000,
        height=620,
        legend=dict(title="task (score)"),
        title=dict(
            text=f"Test score per decimal difficulty: {encoders.label(cfg.encoding)} on {', '.join(cfg.tasks)}",
            subtitle=dict(
                text=f"{int(by_level['n'].sum())} held-out questions of the best checkpoint "
                f"(trained on {recorded_kernels(run_dir)} kernels); bottom: how many "
                "questions each point averages"
            ),
        ),
    )
    return fig
