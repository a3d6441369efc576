"""Learning curves of the published runs (results/runs/, `kept`): what a study's final scores hide.

    curves = study.curves.validation_curves(study.kept.kept_runs(study.kept.KEPT, "study4_3M"))
    study.curves.curves_figure(curves, "Study 4, 3M tokens")

One row per evaluation of each kept run: its cell (study, task, d), encoding and seed, the tokens
trained so far, the validation score (eq. 15's, the run's single task's log-sMAPE) and the
curriculum's frontier. The figure draws, per cell, each encoding's mean over seeds as a line and
every seed as a thin line of the same colour, so a seed stuck in a bad basin shows.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from .. import encoders
from ..model.gpt_config import preset
from .kept import read_kept
from .parts import PAPER_REGIME, PARTS, STUDY4, STUDY4_PLATEAU, VARIANT, base_encoding, plan


def kept_plan_runs(folders) -> list[tuple]:
    """(plan run, kept run: `read_kept`) of every kept folder in `folders` whose name is a run of
    the plan; other folders are left out."""
    runs = _plan_by_name()
    return [(runs[Path(f).name], read_kept(f)) for f in map(Path, folders) if f.name in runs]


@functools.cache
def _plan_by_name() -> dict:
    """{run name: run} of every part's plan, built once: thousands of configurations, and a
    notebook asks for each figure (the runs are read here, never changed)."""
    return {r.name: r for r in plan(PARTS)}


def traces(folders) -> pd.DataFrame:
    """One row per evaluation of each kept run: its cell, encoding, seed, tokens trained, the
    validation score, the curriculum frontier, the task's loss weight, and the step losses and rates
    of the nearest kept step at or before it (metrics are kept thinned)."""
    rows = []
    for r, run in kept_plan_runs(folders):
        cfg, evals, steps = run["config"], run["evals"].sort_values("step"), run["steps"].sort_values("step")
        losses = steps[[c for c in ("step", "ce", "number", "lr/hidden", "lr/head") if c in steps]]
        merged = pd.merge_asof(evals, losses, on="step", direction="backward")
        block = cfg.get("context") or preset(cfg["preset"]).block_size
        rows.append(
            pd.DataFrame(
                dict(
                    study=r.study,
                    task=r.task,
                    digits=r.digits,
                    encoding=r.encoding,
                    seed=r.seed,
                    step=merged.step,
                    tokens=merged.step * cfg["batch_size"] * block,
                    validation=merged.harmonic_mean,
                    frontier=merged.get(f"frontier/{r.task}", np.nan),
                    loss_weight=merged.get(f"loss_weight/{r.task}", np.nan),
                    ce=merged.get("ce", np.nan),
                    number=merged.get("number", np.nan),
                    lr_hidden=merged.get("lr/hidden", np.nan),
                    lr_head=merged.get("lr/head", np.nan),
                )
            )
        )
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


CURVE_COLUMNS = ["study", "task", "digits", "encoding", "seed", "tokens", "validation", "frontier"]


def validation_curves(folders) -> pd.DataFrame:
    """Every evaluation of the kept runs in `folders` (their names are the plan's run names): the
    validation score and the curriculum's frontier against tokens trained (`traces`' columns)."""
    table = traces(folders)
    return table[CURVE_COLUMNS] if len(table) else pd.DataFrame(columns=CURVE_COLUMNS)


def level_title(level: str) -> str:
    """A kept level's name in a figure's title: "study4_3M" -> "Study 4, 3M tokens",
    "study4_plateau_3M" -> "Study 4's intervention (no curriculum), 3M tokens"."""
    if level.startswith(f"{STUDY4_PLATEAU}_"):
        return f"Study 4's intervention (no curriculum), {level.removeprefix(STUDY4_PLATEAU + '_')} tokens"
    return f"Study 4, {level.removeprefix(STUDY4 + '_')} tokens"


def curves_figure(curves: pd.DataFrame, title: str):
    """Validation score against tokens trained, one panel per (task, d), one colour per encoding:
    the mean over seeds (thick) and each seed (thin)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..figures import plots

    cells = sorted({(t, d) for t, d in zip(curves.task, curves.digits)})
    label = {d: f"the paper's regime (d = {d})" if d == PAPER_REGIME else f"d = {d}" for _, d in cells}
    fig = make_subplots(
        rows=1, cols=max(len(cells), 1), shared_yaxes=True, subplot_titles=[f"{t}, {label[d]}" for t, d in cells]
    )
    for j, (task, d) in enumerate(cells, start=1):
        part = curves[(curves.task == task) & (curves.digits == d)]
        for encoding, runs in part.groupby("encoding"):
            color = plots.encoding_color(base_encoding(encoding))
            name = f"{encoders.label(base_encoding(encoding))}" + (", decimal pool" if encoding == VARIANT else "")
            for seed, run in runs.groupby("seed"):
                fig.add_trace(
                    go.Scatter(
                        x=run.tokens / 1e6,
                        y=run.validation,
                        mode="lines",
                        line=dict(color=color, width=0.8, dash="dot" if encoding == VARIANT else None),
                        opacity=0.45,
                        name=f"{name}, seed {seed}",
                        legendgroup=encoding,
                        showlegend=False,
                    ),
                    row=1,
                    col=j,
                )
            mean = runs.groupby("tokens").validation.mean()
            fig.add_trace(
                go.Scatter(
                    x=mean.index / 1e6,
                    y=mean.to_numpy(),
                    mode="lines",
                    line=dict(color=color, width=3, dash="dot" if encoding == VARIANT else None),
                    name=f"{name} (mean of {runs.seed.nunique()} seeds)",
                    legendgroup=encoding,
                    showlegend=j == 1,
                ),
                row=1,
                col=j,
            )
        fig.update_xaxes(title_text="tokens trained (millions)", row=1, col=j)
    fig.update_yaxes(range=[-0.02, 1.02], title_text="validation log-sMAPE (↑)", row=1, col=1)
    fig.update_layout(
        # room for the panels, the subtitle and the title (~10 px a character at its size)
        width=max(330 * max(len(cells), 1) + 150, 760, 10 * len(title) + 120),
        height=480,
        legend=dict(orientation="h", y=-0.22, x=0),
        title=dict(
            text=title,
            subtitle=dict(
                text="each evaluation's validation score (32 questions): thin lines one seed each, thick their mean"
            ),
        ),
        margin=dict(t=110),
    )
    return fig
