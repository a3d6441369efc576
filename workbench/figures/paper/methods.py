"""Figure 4: the encodings compared on Tables 4 and 7 (the paper's methods), with our own results
beside them as a third row, and the regime and text corpus they were measured on."""

from __future__ import annotations

import re
from html import escape

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import encoders, tasks
from ...frontier import paper
from ...results import PERPLEXITIES, validate_results
from .. import plots
from .sources import PAPER_METHODS, PAPER_METRICS, SUBWORD, TASK_LABELS
from .style import METRIC_NAMES


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
