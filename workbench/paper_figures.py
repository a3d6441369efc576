"""The paper's figures 2-8 rebuilt from its tables, the authors' released files, our task generator
and our own training results. Each figure is a data-preparation function (tested) and a plotting
function (plotly); notebook 04 narrates them.

Sources: Tables 1-3 (frontier LLMs), Tables 4 and 7 (Figure 4), `combined_samples_long.csv`
(per-sample frontier results, optional), the released 500-sample test sets (optional), and a
results CSV of our runs in the schema below.

Results schema (one row per run, task and metric; `validate_results` enforces it):

    encoding  str    one of workbench.encoders.names()
    task      str    one of workbench.tasks.names() ("text": perplexity on prose)
    metric    str    log_smape | exact_match | accuracy (in [0, 1]) or perplexity (>= 1)
    value     float  finite
    seed      int    >= 0; (encoding, task, metric, seed) is unique
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import encoders, tasks
from .frontier import official, paper

# The paper's task labels (its tables, the released files) mapped to our task names.
TASK_LABELS = {name: tasks.get(name).label for name in tasks.numeric()}
PAPER_TASKS = {label: paper.task_of(label) for label in list(TASK_LABELS.values()) + list(paper.LABEL_ALIASES)}
RADAR_ORDER = [paper.task_of(c) for c in paper.table(1).columns]  # the column order of Table 1
# Figure 4's methods, by each encoding's `paper_label` (the paper's "Subword" is triple digit).
METHOD_LABELS = {name: encoders.get(name).paper_label for name in encoders.names() if encoders.get(name).paper_label}
PAPER_METHODS = {column: name for column in paper.METHODS for name, label in METHOD_LABELS.items()
                 if column.replace(" (Ours)", "") == label}
PAPER_METRICS = {"exact match acc": "accuracy", "log-smape": "log_smape", "perplexity": "perplexity"}
RESULTS_COLUMNS = ["encoding", "task", "metric", "value", "seed"]
SCORE_METRICS = ("log_smape", "exact_match", "accuracy")
METRICS = SCORE_METRICS + ("perplexity", "perplexity_text")  # Table 4's "Fineweb" and "... text only"
ARITHMETIC = tuple(tasks.with_metric("log_smape"))
SAMPLE_COUNTS = (25, 50, 100, 200, 300, 400, 500)


# ---------------------------------------------------------------- sources

def official_folder(path) -> Path:
    """The released folder, checked: a clear ValueError instead of a late FileNotFoundError."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ValueError(f"official_data {str(path)!r} is not a directory; pass the folder of the "
                         "authors' released files (e.g. ../shared/data/official_bittokens) or None")
    if not (folder / "combined_samples_long.csv").is_file():
        raise ValueError(f"official_data {str(folder)!r} lacks combined_samples_long.csv; is it the released folder?")
    return folder


def frontier_from_tables() -> pd.DataFrame:
    """Tables 1-3 as one long frame: model, reasoning, task, performance, exact, tokens (shares in [0, 1])."""
    def long(n, name):
        table = paper.table(n).reset_index()
        tasks = [c for c in table.columns if c in PAPER_TASKS]
        frame = table.melt(id_vars=["Model", "Reasoning"], value_vars=tasks, var_name="task",
                           value_name=name).rename(columns={"Model": "model", "Reasoning": "reasoning"})
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
        columns=["paper_model", "paper_reasoning"])


def frontier_from_samples(samples: pd.DataFrame, drop_unknown_tokens: bool = True) -> pd.DataFrame:
    """Per (model, reasoning, task) means of the per-sample file, shaped like frontier_from_tables.

    The file marks a missing token count as -1; the authors' Table 3 averaged those in, we drop
    them by default (`drop_unknown_tokens=False` reproduces Table 3, except for Gemini 2.5 Flash
    without reasoning, whose runaway generations at the output cap the printed table leaves out)."""
    tokens = samples["tokens"].where(samples["tokens"] >= 0) if drop_unknown_tokens else samples["tokens"]
    exact = samples["exact15"].where(samples["task"].isin(ARITHMETIC))
    frame = samples.assign(tokens=tokens, exact=exact).groupby(["model", "reasoning", "task"], sort=False)
    return frame.agg(performance=("performance", "mean"), exact=("exact", "mean"),
                     tokens=("tokens", "mean")).reset_index()


def paper_tables() -> dict[int, pd.DataFrame]:
    """Tables 1-15 of the paper, transcribed in workbench.frontier.paper."""
    return {n: paper.table(n) for n in range(1, 16)}


# ---------------------------------------------------------------- Figures 2 and 3

def _setting(reasoning: pd.Series) -> pd.Series:
    return np.where(reasoning == "maximal", "maximal reasoning", "minimal / no reasoning")


def radar_data(frontier: pd.DataFrame) -> pd.DataFrame:
    """One row per model and reasoning setting, one column per task (Table 1 order), in percent."""
    wide = frontier.pivot_table(index=["model", "reasoning"], columns="task", values="performance", sort=False)
    return (wide[[t for t in RADAR_ORDER if t in wide.columns]] * 100).reset_index()


def radar_figure(frontier: pd.DataFrame) -> go.Figure:
    """Figure 2: score per task, one polygon per model, maximal reasoning beside minimal/none."""
    data = radar_data(frontier)
    tasks = [t for t in RADAR_ORDER if t in data.columns]
    theta = [TASK_LABELS[t] for t in tasks] + [TASK_LABELS[tasks[0]]]
    fig = make_subplots(rows=1, cols=2, specs=[[{"type": "polar"}] * 2],
                        subplot_titles=["maximal reasoning", "minimal / no reasoning"])
    colors = dict(zip(sorted(data["model"].unique()), px.colors.qualitative.Plotly))
    for row in data.itertuples(index=False):
        col = 1 if row.reasoning == "maximal" else 2
        r = [getattr(row, t) for t in tasks]
        fig.add_trace(go.Scatterpolar(r=r + r[:1], theta=theta, mode="lines+markers",
                                      name=f"{row.model} ({row.reasoning})", legendgroup=row.model,
                                      line=dict(color=colors[row.model])), row=1, col=col)
    fig.update_polars(radialaxis=dict(range=[0, 100], ticksuffix="%", angle=90, tickangle=90))
    fig.update_annotations(yshift=30)
    fig.update_layout(title="Frontier LLMs per task (log-sMAPE for arithmetic, accuracy for lists)",
                      width=1200, height=560, legend=dict(font=dict(size=10)))
    return fig


def tokens_figure(frontier: pd.DataFrame) -> go.Figure:
    """Figure 3: mean tokens per problem against score, one panel per task."""
    data = frontier.assign(setting=_setting(frontier["reasoning"]), score=frontier["performance"] * 100,
                           label=frontier["task"].map(TASK_LABELS))
    fig = px.scatter(data, x="tokens", y="score", color="model", symbol="setting", facet_col="label",
                     facet_col_wrap=3, log_x=True, hover_data=["reasoning"],
                     category_orders={"label": [TASK_LABELS[t] for t in RADAR_ORDER]},
                     labels={"tokens": "tokens per problem", "score": "score (%)"})
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_traces(marker=dict(size=10))
    fig.update_layout(title="Tokens per problem against performance", width=1100, height=850)
    return fig


# ---------------------------------------------------------------- per-difficulty curves, Figure 8

def difficulty_curves(samples: pd.DataFrame) -> pd.DataFrame:
    """Mean performance per (task, model, reasoning, difficulty_sd) with the sample count."""
    return (samples.groupby(["task", "model", "reasoning", "difficulty_sd"])["performance"]
            .agg(performance="mean", n="size").reset_index())


def difficulty_figure(curves: pd.DataFrame, min_samples: int = 5) -> go.Figure:
    """Performance against decimal difficulty, difficulties with fewer than `min_samples` dropped."""
    data = curves[curves["n"] >= min_samples].assign(
        series=lambda d: d["model"] + " (" + d["reasoning"] + ")", label=lambda d: d["task"].map(TASK_LABELS))
    fig = px.line(data, x="difficulty_sd", y="performance", color="series", facet_col="label",
                  facet_col_wrap=3, markers=True,
                  category_orders={"label": [TASK_LABELS[t] for t in RADAR_ORDER]})
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_xaxes(matches=None, showticklabels=True)
    fig.update_layout(title="Frontier LLM performance per decimal difficulty", width=1200, height=900)
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
    data = spread.assign(series=spread["model"] + " (" + spread["reasoning"] + ")",
                         label=spread["task"].map(TASK_LABELS), std_pct=spread["std"] * 100)
    fig = px.line(data, x="n", y="std_pct", color="series", facet_col="label", facet_col_wrap=3, markers=True,
                  category_orders={"label": [TASK_LABELS[t] for t in RADAR_ORDER]},
                  labels={"n": "samples per task", "std_pct": "std of mean score (pp)"})
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_layout(title="Stability of the benchmark score against the number of samples",
                      width=1200, height=900)
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


def validate_results(frame: pd.DataFrame) -> pd.DataFrame:
    """A typed copy of `frame` if it follows the results schema (module docstring), else ValueError."""
    missing = [c for c in RESULTS_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"results lack column(s) {missing}; the schema is {RESULTS_COLUMNS}")
    out = frame[RESULTS_COLUMNS].copy()
    for column, allowed in (("encoding", encoders.names()), ("task", tasks.names()), ("metric", METRICS)):
        bad = sorted(set(out[column].astype(str)) - set(allowed))
        if bad:
            raise ValueError(f"results column {column!r} has unknown values {bad}; allowed: {list(allowed)}")
    value = pd.to_numeric(out["value"], errors="coerce")
    if not np.isfinite(value).all():
        raise ValueError(f"results 'value' must be finite numbers; bad rows: {list(out.index[~np.isfinite(value)])}")
    score = out["metric"].isin(SCORE_METRICS)
    if ((value < 0) | (value > 1))[score].any() or (value < 1)[~score].any():
        raise ValueError("results 'value' out of range: scores lie in [0, 1], perplexities are >= 1")
    seed = pd.to_numeric(out["seed"], errors="coerce")
    if seed.isna().any() or (seed < 0).any() or (seed != np.floor(seed)).any():
        raise ValueError("results 'seed' must be non-negative integers")
    out["value"], out["seed"] = value.astype(float), seed.astype(int)
    duplicated = out.duplicated(["encoding", "task", "metric", "seed"])
    if duplicated.any():
        raise ValueError(f"results repeat (encoding, task, metric, seed) in rows {list(out.index[duplicated])}")
    return out


ROOT = Path(__file__).resolve().parent.parent


def read_results(path) -> pd.DataFrame:
    """Read and validate a results CSV; extra columns (tokens per problem, seconds) are kept.
    A relative path not found from the working directory is looked up from the repository root,
    so "results/cpu-tier.csv" works from notebooks/ too."""
    path = Path(path).expanduser()
    if not path.is_absolute() and not path.exists():
        path = ROOT / path
    if not path.is_file():
        raise ValueError(f"results_csv {str(path)!r} does not exist")
    raw = pd.read_csv(path)
    return validate_results(raw).join(raw.drop(columns=RESULTS_COLUMNS))


def results_from_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """A run's test_summary.csv (workbench.train) in the results schema: `score` is log-sMAPE for
    arithmetic and accuracy for list tasks; `exact` is exact match of arithmetic answers; prose
    gives its perplexity over all tokens and over the text tokens only."""
    prose = summary["task"].isin(tasks.with_metric("perplexity"))
    numeric, text = summary[~prose], summary[prose]
    arithmetic = numeric["task"].isin(ARITHMETIC)
    parts = [numeric.assign(metric=np.where(arithmetic, "log_smape", "accuracy"), value=numeric["score"]),
             numeric[arithmetic].assign(metric="exact_match", value=numeric["exact"])]
    if len(text):
        parts += [text.assign(metric="perplexity", value=text["ppl_all"]),
                  text.assign(metric="perplexity_text", value=text["ppl_text"])]
    return validate_results(pd.concat(parts, ignore_index=True))


def methods_figure(results: pd.DataFrame | None = None) -> go.Figure:
    """Figure 4: score per task and encoding, multi-task (Table 4) and solo-task (Table 7) runs of
    the paper, and our runs (mean and std over seeds) when `results` are given."""
    panels = [("paper, multi-task (Table 4)", method_scores(4)), ("paper, solo-task (Table 7)", method_scores(7))]
    if results is not None:
        ours = validate_results(results)
        ours = ours[ours["metric"] != "exact_match"]
        agg = ours.groupby(["task", "encoding", "metric"])["value"].agg(value="mean", std="std").reset_index()
        agg["row"] = agg["task"].map(TASK_LABELS).fillna("Text")
        panels.append(("this workbench (results_csv)", agg))
    fig = make_subplots(rows=len(panels), cols=2, column_widths=[0.82, 0.18], vertical_spacing=0.09,
                        subplot_titles=[t for title, _ in panels for t in (title, "perplexity")])
    colors = dict(zip(PAPER_METHODS.values(), px.colors.qualitative.Set2))
    for i, (_, data) in enumerate(panels, start=1):
        for encoding in PAPER_METHODS.values():
            part = data[data["encoding"] == encoding]
            for col, mask in ((1, part["metric"] != "perplexity"), (2, part["metric"] == "perplexity")):
                rows = part[mask]
                if rows.empty:
                    continue
                error = dict(type="data", array=rows["std"].fillna(0)) if "std" in rows else None
                fig.add_trace(go.Bar(x=rows["row"], y=rows["value"], error_y=error, name=METHOD_LABELS[encoding],
                                     marker_color=colors[encoding], legendgroup=encoding,
                                     showlegend=(i == 1 and col == 1)), row=i, col=col)
        fig.update_yaxes(range=[0, 1.05], title_text="score", row=i, col=1)
    fig.update_layout(barmode="group", title="Number encodings per task (higher is better; perplexity lower)",
                      width=1200, height=380 * len(panels))
    return fig


# ---------------------------------------------------------------- Figures 5-7 (data set)

def exponent_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """Decimal exponents of the two operands of an addition or multiplication sample."""
    missing = [c for c in ("num1_exp", "num2_exp") if c not in frame.columns]
    if missing:
        raise ValueError(f"need operand exponent columns {missing}; is this an addition/multiplication set?")
    return frame[["num1_exp", "num2_exp"]].apply(pd.to_numeric).dropna().astype(int)


def exponent_figure(sources: dict[str, pd.DataFrame], title: str) -> go.Figure:
    """Figures 5 and 6: 2-D histogram of operand exponents, one panel per source (share of samples)."""
    fig = make_subplots(rows=1, cols=len(sources), subplot_titles=list(sources), horizontal_spacing=0.08)
    for i, (name, frame) in enumerate(sources.items(), start=1):
        pairs = exponent_pairs(frame)
        fig.add_trace(go.Histogram2d(x=pairs["num1_exp"], y=pairs["num2_exp"], histnorm="probability",
                                     xbins=dict(start=-15.5, end=15.5, size=1), ybins=dict(start=-15.5, end=15.5, size=1),
                                     colorscale="Viridis", coloraxis="coloraxis"), row=1, col=i)
        fig.update_xaxes(title_text="exponent of operand 1", row=1, col=i)
        fig.update_yaxes(title_text="exponent of operand 2", scaleanchor=f"x{i if i > 1 else ''}", row=1, col=i)
    fig.update_layout(title=title, width=520 * len(sources), height=520, coloraxis=dict(colorscale="Viridis"))
    return fig


def difficulty_distribution(sources: dict[str, dict[str, pd.DataFrame]]) -> pd.DataFrame:
    """Share of samples per decimal difficulty: {source: {task: frame}} -> source, task, difficulty_sd, share."""
    rows = []
    for source, frames in sources.items():
        for task, frame in frames.items():
            if "difficulty_sd" not in frame.columns:
                raise ValueError(f"{source}/{task} has no difficulty_sd column")
            share = frame["difficulty_sd"].value_counts(normalize=True).sort_index()
            rows.append(pd.DataFrame({"source": source, "task": task, "difficulty_sd": share.index.astype(int),
                                      "share": share.to_numpy()}))
    return pd.concat(rows, ignore_index=True)


def difficulty_distribution_figure(shares: pd.DataFrame) -> go.Figure:
    """Figure 7: distribution of the decimal difficulty per task, sources side by side."""
    data = shares.assign(label=shares["task"].map(TASK_LABELS))
    fig = px.line(data, x="difficulty_sd", y="share", color="source", facet_col="label", facet_col_wrap=3,
                  markers=True, line_shape="hvh",
                  category_orders={"label": [TASK_LABELS[t] for t in RADAR_ORDER]})
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_xaxes(matches=None, showticklabels=True)
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.update_layout(title="Difficulty distribution per task (decimal difficulty, A.3)", width=1200, height=900)
    return fig


def official_test_sets(folder, task_names=None) -> dict[str, pd.DataFrame]:
    """The released 500-sample test set of each task."""
    folder = official_folder(folder)
    return {t: official.load_test_set(t, folder) for t in task_names or official.released_tasks()}

