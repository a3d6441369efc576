"""The paper's figures 2-8 rebuilt from its tables, the authors' released files, our task generator
and our own training results. Each figure is a data-preparation function (tested) and a plotting
function (plotly); notebook 04 narrates them. (Over 500 lines: seven figures, each a pair of short
functions.)

Sources: Tables 1-3 (frontier LLMs), Tables 4 and 7 (Figure 4), `combined_samples_long.csv`
(per-sample frontier results, optional), the released 500-sample test sets (optional), and a
results CSV of our runs in the schema below.

The results schema and its reader are `workbench.results`'s.
"""

from __future__ import annotations

import os
import re
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import encoders, tasks
from ...frontier import official, paper
from ...results import ARITHMETIC, PERPLEXITIES, validate_results
from .. import plots

AUTO = "auto"  # official_data="auto": the documented folder of the released files, when present

# The paper's task labels (its tables, the released files) mapped to our task names.
TASK_LABELS = {name: tasks.get(name).label for name in tasks.numeric()}
PAPER_TASKS = {label: paper.task_of(label) for label in list(TASK_LABELS.values()) + list(paper.LABEL_ALIASES)}
RADAR_ORDER = [paper.task_of(c) for c in paper.table(1).columns]  # the column order of Table 1
# Figure 4's methods, by each encoding's `paper_label` (the paper's "Subword" is triple digit).
METHOD_LABELS = {name: encoders.get(name).paper_label for name in encoders.names() if encoders.get(name).paper_label}
SUBWORD = next(name for name, label in METHOD_LABELS.items() if label == "Subword")
PAPER_METHODS = {
    column: name
    for column in paper.METHODS
    for name, label in METHOD_LABELS.items()
    if column.replace(" (Ours)", "") == label
}
PAPER_METRICS = {"exact match acc": "accuracy", "log-smape": "log_smape", "perplexity": "perplexity"}
SAMPLE_COUNTS = (25, 50, 100, 200, 300, 400, 500)


# ---------------------------------------------------------------- sources


def official_folder(path) -> Path:
    """The released folder, checked: a clear ValueError instead of a late FileNotFoundError."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ValueError(
            f"official_data {str(path)!r} is not a directory; pass the folder of the "
            "authors' released files (e.g. ../shared/data/official_bittokens) or None"
        )
    if not (folder / "combined_samples_long.csv").is_file():
        raise ValueError(f"official_data {str(folder)!r} lacks combined_samples_long.csv; is it the released folder?")
    return folder


def released_folder(path) -> Path | None:
    """Where notebook 04 reads the released files from: None -> None (without them); "auto" ->
    $WORKBENCH_OFFICIAL_DATA, else ../shared/data/official_bittokens beside the repository, when
    that folder holds them (None when it does not); any other path -> that folder, checked."""
    if path is None:
        return None
    if path != AUTO:
        return official_folder(path)
    if os.environ.get(official.ENV):  # set on purpose: a wrong folder is an error, not a silent None
        return official_folder(os.environ[official.ENV])
    try:
        folder = official.data_dir()
    except FileNotFoundError:
        return None
    return folder if (folder / "combined_samples_long.csv").is_file() else None


def frontier_from_tables() -> pd.DataFrame:
    """Tables 1-3 as one long frame: model, reasoning, task, performance, exact, tokens (shares in [0, 1])."""

    def long(n, name):
        table = paper.table(n).reset_index()
        tasks = [c for c in table.columns if c in PAPER_TASKS]
        frame = table.melt(id_vars=["Model", "Reasoning"], value_vars=tasks, var_name="task", value_name=name).rename(
            columns={"Model": "model", "Reasoning": "reasoning"}
        )
        frame["task"] = frame["task"].map(PAPER_TASKS)
        return frame

    perf = long(1, "performance")
    perf["performance"] /= 100
    exact = long(2, "exact")
    exact["exact"] /= 100
    keys = ["model", "reasoning", "task"]
    frame = perf.merge(exact, on=keys, how="left").merge(long(3, "tokens"), on=keys, how="left")
    return frame[keys + ["performance", "exact", "tokens"]]


def official_samples(folder) -> pd.DataFrame:
    """combined_samples_long.csv, one row per answer, with the paper's model and reasoning labels."""
    frame = official.load_samples(official_folder(folder))
    return frame.assign(model=frame["paper_model"], reasoning=frame["paper_reasoning"]).drop(
        columns=["paper_model", "paper_reasoning"]
    )


def frontier_from_samples(samples: pd.DataFrame, drop_unknown_tokens: bool = True) -> pd.DataFrame:
    """Per (model, reasoning, task) means of the per-sample file, shaped like frontier_from_tables.

    The file marks a missing token count as -1; the authors' Table 3 averaged those in, we drop
    them by default (`drop_unknown_tokens=False` reproduces Table 3, except for Gemini 2.5 Flash
    without reasoning, whose runaway generations at the output cap the printed table leaves out)."""
    tokens = samples["tokens"].where(samples["tokens"] >= 0) if drop_unknown_tokens else samples["tokens"]
    exact = samples["exact15"].where(samples["task"].isin(ARITHMETIC))
    frame = samples.assign(tokens=tokens, exact=exact).groupby(["model", "reasoning", "task"], sort=False)
    return frame.agg(
        performance=("performance", "mean"), exact=("exact", "mean"), tokens=("tokens", "mean")
    ).reset_index()


def paper_tables() -> dict[int, pd.DataFrame]:
    """Tables 1-15 of the paper, transcribed in workbench.frontier.paper."""
    return {n: paper.table(n) for n in range(1, 16)}


# ---------------------------------------------------------------- Figures 2 and 3


def _setting(reasoning: pd.Series) -> pd.Series:
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


def _metric_of(task: str) -> str:
    return "log_smape" if task in ARITHMETIC else "accuracy"


def _facet_titles(fig: go.Figure, with_metric: bool = True) -> None:
    """ "label=Mult" facet titles -> "Mult (log-sMAPE)"."""
    metric = {TASK_LABELS[t]: METRIC_NAMES[_metric_of(t)] for t in TASK_LABELS}
    fig.for_each_annotation(
        lambda a: a.update(
            text=(lambda t: f"{t} ({metric[t]})" if with_metric and t in metric else t)(a.text.split("=")[-1])
        )
    )


def _metric_titles(fig: go.Figure) -> None:
    """Panel titles "Mult" -> "Mult (log-sMAPE)", for the subplot titles of `_frontier_lines`."""
    metric = {TASK_LABELS[t]: METRIC_NAMES[_metric_of(t)] for t in TASK_LABELS}
    fig.for_each_annotation(lambda a: a.update(text=f"{a.text} ({metric[a.text]})") if a.text in metric else None)


def _log_ticks(low: float, high: float) -> dict:
    """Decade ticks written alike: 10, 100, 1k, 10k, 100k."""
    names = {1: "1", 10: "10", 100: "100", 1000: "1k", 10**4: "10k", 10**5: "100k", 10**6: "1M"}
    values = [v for v in names if low <= v <= high]
    return dict(tickvals=values, ticktext=[names[v] for v in values])


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
    data = frontier.assign(setting=_setting(frontier["reasoning"]))
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
    _facet_titles(fig)
    fig.update_traces(marker=dict(size=11, line=dict(width=1.5)))
    if ours is not None and "budget" in ours:  # one model trained longer: a larger star, else they coincide
        rank = {b: k for k, b in enumerate(sorted(ours["budget"].unique()))}
        size = {f"{m}, {OURS_SETTING}": 10 + 6 * rank[b] for m, b in zip(ours["model"], ours["budget"])}
        fig.for_each_trace(lambda t: t.update(marker_size=size[t.name]) if t.name in size else None)
    fig.update_xaxes(**_log_ticks(1, 10**6), showticklabels=True)
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


# ---------------------------------------------------------------- per-difficulty curves, Figure 8


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
    data = data.assign(setting=_setting(data["reasoning"]), label=data["task"].map(TASK_LABELS))
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
    _metric_titles(fig)
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
    _metric_titles(fig)
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


# ---------------------------------------------------------------- Figure 4 and our results


def method_scores(n: int) -> pd.DataFrame:
    """Table 4 (multi-task) or 7 (solo-task) as long rows: row (the paper's label), task, encoding,
    metric, value; the perplexity rows are task "text"."""
    if n not in (4, 7):
        raise ValueError(f"Figure 4 comes from Tables 4 and 7, not {n}")
    table = paper.table(n).reset_index()
    rows = []
    for _, row in table.iterrows():
        task = paper.task_of(row["Task"]) or tasks.with_metric("perplexity")[0]  # Fineweb rows: prose
        metric = PAPER_METRICS[row["Metric"].lower()]
        for method, encoding in PAPER_METHODS.items():
            rows.append((row["Task"], task, encoding, metric, float(row[method])))
    return pd.DataFrame(rows, columns=["row", "task", "encoding", "metric", "value"])


# Figure 4's rows in the order of Tables 4 and 7 (Min/Max ... Div, then Exp, Mean, Std), named as there.
PAPER_ROWS = list(paper.table(7).index)
ROW_OF_TASK = {paper.task_of(row): row for row in PAPER_ROWS if paper.task_of(row)}
PAPER_REGIME = (
    "the paper's rows: 117M-parameter GPT-2, 10B tokens, operands over (-1e15, 1e15) with up to 15 significant digits"
)
REGIME_COLUMNS = ("preset", "tokens", "decades", "max_digits")


def _distinct(results: pd.DataFrame, column: str) -> list:
    values = results[column].astype(object).where(results[column].notna(), None)
    return list(dict.fromkeys(None if str(v).strip().lower() in ("none", "nan", "") else v for v in values))


def _regime_part(column: str, value) -> str:
    if column == "preset":
        return f"{escape(str(value))} model"
    if column == "tokens":
        value = float(value)
        return next(
            f"{value / scale:g}{unit} tokens"
            for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k"), (1, ""))
            if value >= scale or scale == 1
        )
    if column == "decades":
        if value is None:
            return "the paper's full operand range"
        bounds = [int(b) for b in re.findall(r"-?\d+", str(value))]
        return (
            f"operands 10<sup>{bounds[0]}</sup> … 10<sup>{bounds[1] + 1}</sup>"
            if len(bounds) == 2
            else f"decades {escape(str(value))}"
        )
    if value is None:
        return "all significant digits"
    digits = int(float(value))
    return f"≤ {digits} significant digit{'s' if digits != 1 else ''}"


def describe_regime(results: pd.DataFrame) -> str:
    """Our row's training regime, read from the results' columns preset, tokens, decades and
    max_digits (several values are joined with " / "); columns the results lack are named."""
    parts = [" / ".join(_regime_part(c, v) for v in _distinct(results, c)) for c in REGIME_COLUMNS if c in results]
    missing = [c for c in REGIME_COLUMNS if c not in results]
    if missing:
        parts.append(f"regime not recorded ({', '.join(missing)} missing from the results)")
    return ", ".join(parts)


def describe_corpus(results: pd.DataFrame) -> str:
    """The text our perplexities were measured on, from the results' text_source column ("shipped":
    the pydoc topics shipped with the workbench); without the column, the run's own text. Never
    Fineweb's: the paper's perplexities are on Fineweb, so the two are not on one scale."""
    if "text_source" not in results:
        return "the run's own text (unrecorded)"
    names = {"shipped": "shipped pydoc topics"}
    return " / ".join(escape(names.get(str(v), str(v))) for v in _distinct(results, "text_source") if v is not None)


def _our_scores(results: pd.DataFrame, intervals: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """Mean ± std over seeds per task, encoding and metric (exact match left out: the score of an
    arithmetic task is its log-sMAPE), and what the bars show. With `intervals` (columns encoding,
    task, metric, low, high: `workbench.study`'s 95 % bootstrap intervals) the scores' error bars
    are those intervals; perplexities keep ± std over seeds."""
    ours = validate_results(results)
    ours = ours[ours["metric"] != "exact_match"]
    agg = ours.groupby(["task", "encoding", "metric"])["value"].agg(value="mean", std="std", seeds="size").reset_index()
    agg["row"] = agg["task"].map(ROW_OF_TASK).fillna(agg["task"].map(lambda t: TASK_LABELS.get(t, "text")))
    agg.loc[agg["metric"] == "perplexity_text", "row"] = "text only"
    low, high = agg["seeds"].min(), agg["seeds"].max()
    seeds = f"{low}" if low == high else f"{low}–{high}"
    bars = "one seed, no error bars" if high == 1 else f"bars: mean, error bars: ± std over {seeds} seeds"
    if intervals is not None:
        agg = agg.merge(
            intervals[["encoding", "task", "metric", "low", "high"]], on=["encoding", "task", "metric"], how="left"
        )
        bars = f"bars: mean over {seeds} seeds, error bars: 95 % bootstrap interval (perplexity: ± std)"
    return agg, bars


SMALL_BAR = 0.05  # score bars lower than this carry their value, so a 0.00 is not taken for a missing bar


def bar_labels(values) -> list[str]:
    """The text over each score bar: "n/a" where the cell has no value (not measured, not in the
    table), the value where the bar is too low to see (< SMALL_BAR), else nothing."""
    return ["n/a" if pd.isna(v) else f"{v:.2f}" if v < SMALL_BAR else "" for v in values]


def _bars(fig: go.Figure, data: pd.DataFrame, row: int, show_legend: bool, other_corpus: bool = False) -> None:
    """One bar group per paper row (x) and encoding: scores left, perplexities right. A score cell
    an encoding of the panel lacks is a bar of height 0 labelled "n/a"; a score bar too low to
    see is labelled with its value (`bar_labels`). `other_corpus`: the perplexities are not on
    Fineweb (ours), drawn hatched so they are not read on the paper's scale."""
    score_rows = list(dict.fromkeys(data.loc[~data["metric"].isin(PERPLEXITIES), "row"]))
    for encoding in [e for e in PAPER_METHODS.values() if e in set(data["encoding"])]:
        part = data[data["encoding"] == encoding]
        prose = part["metric"].isin(PERPLEXITIES)
        scores = part[~prose].set_index("row").reindex(pd.Index(score_rows, name="row")).reset_index()
        for col, rows in ((1, scores), (2, part[prose])):
            if rows.empty:
                continue
            error = dict(type="data", array=rows["std"].fillna(0), thickness=1.5) if "std" in rows else None
            if "low" in rows and rows["low"].notna().any():
                error = dict(
                    type="data",
                    symmetric=False,
                    array=(rows["high"] - rows["value"]).fillna(0),
                    arrayminus=(rows["value"] - rows["low"]).fillna(0),
                    thickness=1.5,
                )
            labels = (
                dict(
                    text=bar_labels(rows["value"]),
                    textposition="outside",
                    textangle=-90,
                    textfont=dict(size=13, color="#444444"),
                    constraintext="none",
                    cliponaxis=False,
                )
                if col == 1
                else {}
            )
            hatch = dict(pattern=dict(shape="/", fgcolor="white", solidity=0.3)) if other_corpus and col == 2 else {}
            fig.add_trace(
                go.Bar(
                    x=rows["row"],
                    y=rows["value"].fillna(0),
                    error_y=error,
                    name=encoders.label(encoding),
                    marker=dict(color=plots.encoding_color(encoding), **hatch),
                    legendgroup=encoding,
                    showlegend=show_legend and col == 1,
                    **labels,
                ),
                row=row,
                col=col,
            )
    scores = data[~data["metric"].isin(PERPLEXITIES)]
    order = [r for r in PAPER_ROWS if r in set(scores["row"])] + sorted(set(scores["row"]) - set(PAPER_ROWS))
    metric = scores.drop_duplicates("row").set_index("row")["metric"].map(METRIC_NAMES | {"accuracy": "accuracy"})
    fig.update_xaxes(
        categoryorder="array",
        categoryarray=order,
        tickvals=order,
        tickangle=0,
        ticktext=[f"{r}<br><span style='font-size:14px'>{metric[r]}</span>" for r in order],
        row=row,
        col=1,
    )
    fig.update_yaxes(range=[0, 1.05], title_text="score (↑)", row=row, col=1)
    fig.update_yaxes(title_text="perplexity (↓)", rangemode="tozero", row=row, col=2)
    texts = sorted(set(data.loc[data["metric"].isin(PERPLEXITIES), "row"]))
    names = {"text": "all tokens", "Fineweb": "all tokens", "Fineweb text only": "text only"}
    fig.update_xaxes(tickangle=0, tickvals=texts, ticktext=[names.get(t, t) for t in texts], row=row, col=2)


def methods_figure(
    results: pd.DataFrame | None = None, source: str | None = None, intervals: pd.DataFrame | None = None
) -> go.Figure:
    """Figure 4: score per task and encoding in the multi-task (Table 4) and solo-task (Table 7)
    runs of the paper, and our runs (mean ± std over seeds) when `results` are given; `source`
    (e.g. the CSV's name) is named in our row's title. Our regime comes from the results' columns
    (`describe_regime`); our perplexity panel says "not measured" when the results hold none."""
    fineweb = "perplexity on Fineweb"
    panels = [
        ("Paper, multi-task (Table 4)", method_scores(4), fineweb),
        ("Paper, solo-task (Table 7)", method_scores(7), fineweb),
    ]
    if results is not None:
        ours, bars = _our_scores(results, intervals)
        title = (
            f"This workbench{f' ({escape(source)})' if source else ''}<br>"
            f"<span style='font-size:15px'>{describe_regime(results)}<br>{bars}</span>"
        )
        corpus = (
            "perplexity on another corpus:<br><span style='font-size:13px'>"
            f"{describe_corpus(results)}, not Fineweb:<br>not on the scale of the rows above</span>"
        )
        panels.append((title, ours, corpus))
    # Laid out in pixels, so that titles, legend and panels keep their room whatever the number of
    # rows: the top block (title, three subtitle lines, legend), then panels with gaps that hold
    # the two-line task labels above and a three-line row title below.
    top, panel, gap, bottom = 250, 300, 155, 70
    plot = len(panels) * panel + (len(panels) - 1) * gap
    height = top + plot + bottom
    fig = make_subplots(
        rows=len(panels),
        cols=2,
        column_widths=[0.8, 0.2],
        vertical_spacing=gap / plot,
        horizontal_spacing=0.07,
        subplot_titles=[t for title, _, corpus in panels for t in (title, corpus)],
    )
    for i, (_, data, _) in enumerate(panels, start=1):
        _bars(fig, data, i, show_legend=i == 1, other_corpus=i > 2)
        if not data["metric"].isin(PERPLEXITIES).any():
            axes = fig.get_subplot(i, 2)
            fig.add_annotation(
                text="perplexity<br>not measured",
                showarrow=False,
                xref="paper",
                yref="paper",
                x=sum(axes.xaxis.domain) / 2,
                y=sum(axes.yaxis.domain) / 2,
                font=dict(color="#7f7f7f"),
            )
            blank = dict(showticklabels=False, showgrid=False, zeroline=False, showline=False, title_text="")
            fig.update_xaxes(**blank, row=i, col=2)
            fig.update_yaxes(**blank, row=i, col=2)
    titles = [title for title, _, _ in panels]
    corpora = {corpus for _, _, corpus in panels}
    fig.for_each_annotation(
        lambda a: (
            a.update(x=0, xanchor="left", align="left", font=dict(size=18))
            if a.text in titles
            else a.update(font=dict(size=14))
            if a.text in corpora
            else None
        )
    )
    fig.update_layout(
        barmode="group",
        width=1050,
        height=height,
        margin=dict(t=top, l=70, r=45, b=bottom),
        title=dict(
            text="Figure 4: score per task and number encoding",
            yref="container",
            y=1 - 18 / height,
            yanchor="top",
            subtitle=dict(
                text=f"Score: exact-match accuracy (Min/Max, Interval, Sorting) or log-sMAPE "
                f"(arithmetic), higher is better;<br>perplexity on text, lower is better, "
                f"each row on its own corpus and scale. Bars under {SMALL_BAR} carry their value; "
                f'n/a: not measured.<br>{PAPER_REGIME[0].upper()}{PAPER_REGIME[1:]};<br>their "Subword" '
                f"is {encoders.label(SUBWORD)}."
            ),
        ),
        legend=dict(orientation="h", x=0, y=1 - 165 / height, yref="container", yanchor="top", title="encoding:"),
    )
    return fig


# ---------------------------------------------------------------- Figures 5-7 (data set)


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


def official_test_sets(folder, task_names=None) -> dict[str, pd.DataFrame]:
    """The released 500-sample test set of each task."""
    folder = official_folder(folder)
    return {t: official.load_test_set(t, folder) for t in task_names or official.released_tasks()}
