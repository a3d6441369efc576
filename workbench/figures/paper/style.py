"""The look the frontier figures share (Figures 2, 3 and 8 and the per-difficulty curves): one colour per
frontier model in the order of Table 1, the reasoning setting told apart by dash and marker, the
panels titled by task and metric."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ...frontier import paper
from ...results import ARITHMETIC
from .. import plots
from .sources import RADAR_ORDER, TASK_LABELS


def reasoning_setting(reasoning: pd.Series) -> pd.Series:
    return np.where(reasoning == "maximal", "maximal reasoning", "minimal / no reasoning")


# The frontier models in the order of Table 1, one colour each in every frontier figure; the
# reasoning setting is told apart by dash and marker.
MODELS = list(dict.fromkeys(model for model, _ in paper.FRONTIER_ROWS))


MODEL_COLORS = dict(zip(MODELS, plots.PALETTE))


SETTING_DASH = {"maximal reasoning": "solid", "minimal / no reasoning": "dot"}


SETTING_SYMBOL = {"maximal reasoning": "circle", "minimal / no reasoning": "diamond-open"}


TASK_ORDER = [TASK_LABELS[t] for t in RADAR_ORDER]


METRIC_NAMES = {
    "log_smape": "log-sMAPE",
    "accuracy": "exact-match acc.",
    "exact_match": "exact match",
    "perplexity": "perplexity",
}


def metric_of(task: str) -> str:
    return "log_smape" if task in ARITHMETIC else "accuracy"


def facet_titles(fig: go.Figure, with_metric: bool = True) -> None:
    """ "label=Mult" facet titles -> "Mult (log-sMAPE)"."""
    metric = {TASK_LABELS[t]: METRIC_NAMES[metric_of(t)] for t in TASK_LABELS}
    fig.for_each_annotation(
        lambda a: a.update(
            text=(lambda t: f"{t} ({metric[t]})" if with_metric and t in metric else t)(a.text.split("=")[-1])
        )
    )


def metric_titles(fig: go.Figure) -> None:
    """Panel titles "Mult" -> "Mult (log-sMAPE)", for the subplot titles of `_frontier_lines`."""
    metric = {TASK_LABELS[t]: METRIC_NAMES[metric_of(t)] for t in TASK_LABELS}
    fig.for_each_annotation(lambda a: a.update(text=f"{a.text} ({metric[a.text]})") if a.text in metric else None)


def log_ticks(low: float, high: float) -> dict:
    """Decade ticks written alike: 10, 100, 1k, 10k, 100k."""
    names = {1: "1", 10: "10", 100: "100", 1000: "1k", 10**4: "10k", 10**5: "100k", 10**6: "1M"}
    values = [v for v in names if low <= v <= high]
    return dict(tickvals=values, ticktext=[names[v] for v in values])
