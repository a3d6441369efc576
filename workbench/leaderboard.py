"""The encoding leaderboard (docs/study.md, "The encoding zoo"): every encoding on the study's two
protocols, ranked by what the 95 % intervals can tell apart.

    board = leaderboard(intervals)            # one row per protocol, task, d and encoding
    table(board)                              # the multi-task protocol: encodings x tasks, as docs/leaderboard.md prints it
    figure(board)                             # notebook 04's figures/04_leaderboard

The multi-task protocol is Study 2b's (the paper's five) and `zoo_multitask` (every other
encoding); the precision protocol is Study 1's and `zoo_precision`, per task and d. The score is the
task's own metric (log-sMAPE or accuracy). Rank: 1 + the number of encodings whose interval lies
entirely above the encoding's own and whose mean is more than `study.DELTA` higher (the run-to-run
spread across CPUs: a smaller gap is not a difference), so encodings whose intervals overlap, or
lie apart by less than the spread, share a rank.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from . import encoders, tasks
from .study import DELTA, NUMERIC_CHECKPOINT, ZOO_MULTITASK, ZOO_PRECISION

PROTOCOLS = {"multitask": (NUMERIC_CHECKPOINT, ZOO_MULTITASK), "precision": ("precision", ZOO_PRECISION)}


def leaderboard(intervals: pd.DataFrame, delta: float = DELTA) -> pd.DataFrame:
    """protocol, task, digits, encoding, mean, low, high, rank (of the task's own metric; the module
    docstring's rule, with `delta` the gap of means a difference needs)."""
    parts = []
    for protocol, studies in PROTOCOLS.items():
        rows = intervals[intervals.study.isin(studies)]
        rows = rows[[tasks.get(t).metric == m for t, m in zip(rows.task, rows.metric)]]
        parts.append(rows.assign(protocol=protocol))
    board = pd.concat(parts, ignore_index=True)[["protocol", "task", "digits", "encoding", "mean", "low", "high"]]
    board["rank"] = 0
    for _, group in board.groupby(["protocol", "task", "digits"]):
        board.loc[group.index, "rank"] = [1 + int(((group.low > high) & (group["mean"] - mean > delta)).sum())
                                          for mean, high in zip(group["mean"], group.high)]
    order = board.task.map(tasks.names().index)  # the tasks in the registry's (the paper's) order
    return board.assign(order=order).sort_values(["protocol", "order", "digits", "rank", "mean"],
                                                 ascending=[True, True, True, True, False],
                                                 ignore_index=True).drop(columns="order")


def table(board: pd.DataFrame, protocol: str = "multitask") -> pd.DataFrame:
    """Encodings (display names) x tasks (and d, for the precision protocol): "mean [low, high] (rank)",
    and, for the multi-task protocol, the mean rank over its tasks; best mean rank first."""
    part = board[board.protocol == protocol]
    column = part.task if protocol == "multitask" else part.task + " d=" + part.digits.astype(str)
    cells = part.assign(column=column, cell=[f"{m:.2f} [{lo:.2f}, {hi:.2f}] ({r})" for m, lo, hi, r in
                                             zip(part["mean"], part.low, part.high, part["rank"])])
    wide = cells.pivot(index="encoding", columns="column", values="cell")[list(dict.fromkeys(cells.column))]
    wide.insert(0, "mean rank", cells.groupby("encoding")["rank"].mean().round(2))
    wide = wide.sort_values("mean rank")
    wide.index = [encoders.label(e) for e in wide.index]
    return wide


def figure(board: pd.DataFrame):
    """A heat map: encodings (rows, best mean multi-task rank first) x the multi-task protocol's six
    tasks and the precision protocol's two tasks at each d; colour the score, text the score and the
    rank, hover the 95 % interval. A cell whose runs have not finished says so. Plotly reads label
    text as HTML, so every label taken from the intervals is escaped: a "<a href=...>" in a CSV
    cell shows as text, never as a link."""
    import plotly.graph_objects as go
    label = board.task.map(lambda t: tasks.get(t).label)
    board = board.assign(column=np.where(board.protocol == "multitask", label, label + ", d=" + board.digits.astype(str)))
    order = table(board).index.tolist()
    labels = {e: encoders.label(e) for e in board.encoding.unique()}
    columns = list(dict.fromkeys(board.column))
    grid = board.assign(row=board.encoding.map(labels)).pivot(index="row", columns="column", values=["mean", "low", "high", "rank"])
    grid = grid.reindex(index=order, columns=pd.MultiIndex.from_product([["mean", "low", "high", "rank"], columns]))
    text = [[("no runs" if np.isnan(m) else f"{m:.2f}<br>#{int(r)}") for m, r in zip(grid["mean"].loc[e], grid["rank"].loc[e])]
            for e in order]
    hover = [[f"{_text(e)}, {_text(c)}: " + ("no finished runs" if np.isnan(m) else
                                                         f"{m:.3f} [{lo:.3f}, {hi:.3f}], rank {r:.0f}")
              for c, m, lo, hi, r in zip(columns, grid["mean"].loc[e], grid["low"].loc[e], grid["high"].loc[e],
                                         grid["rank"].loc[e])]
             for e in order]
    fig = go.Figure(go.Heatmap(z=grid["mean"].to_numpy(), x=[_text(c) for c in columns], y=[_text(e) for e in order],
                               text=text, texttemplate="%{text}",
                               hovertext=hover, hoverinfo="text", zmin=0, zmax=1, colorscale="Viridis",
                               colorbar=dict(title="score")))
    fig.add_vline(x=board[board.protocol == "multitask"].column.nunique() - 0.5, line_color="white",
                  line_width=4)
    fig.update_layout(
        width=1200, height=170 + 42 * len(order), margin=dict(t=140, l=190),
        title=dict(text="Encoding leaderboard: score and rank per task at laptop scale", subtitle=dict(
            text="left: the six tasks trained together with text (Study 2b's protocol, 3 seeds); right: multiplication "
                 "and division each<br>trained alone at d significant digits (Study 1's protocol, 2 seeds). Score: "
                 "log-sMAPE or accuracy (higher is better); #rank = 1 + encodings whose 95 % interval lies above")),
        xaxis=dict(title="task (protocol)", side="bottom", tickangle=-30), yaxis=dict(title="encoding", autorange="reversed"))
    return fig


def _text(label) -> str:
    """`label` as plotly's label text shows it literally (&, < and > escaped; plotly decodes
    these three and takes quotes as they are)."""
    return html.escape(str(label), quote=False)
