"""The length axis of the zoo's second wave (docs/study/zoo2.md, "Length-generalisation axis"):
models trained on addition with operands of at most d = 4 digits (`parts.length_plan`) answer
additions whose operands are integers of exactly L digits, L = 4 (the training length) ... 8.

Abacus, position coupling and reversed digits claim that a model trained on short numbers adds
longer ones; the leaderboard's protocols never test beyond the training length, so this is the one
place that claim is measured. Questions of length L are the task's own generator at the decade
L - 1 with at most L significant digits (`Regime((L - 1, L - 1), L)`), which draws integers of
exactly L digits there; the test split of a run's seed, so every encoding of a seed answers the same
questions (paired), and at L > 4 none was ever trained on.

    python -m workbench.experiments study --studies zoo2_length --out runs/zoo2            # train
    python -m workbench.experiments study --studies zoo2_length --out runs/zoo2 --score-length

`length_scores` writes OUT/cpu-study-length.csv (one row per run, length and question), resumable
run by run; `length_cells` gives each encoding's mean per length with its 95 % interval (the
study's hierarchical bootstrap) and `against_control`, per length, the leaderboard's verdict against
single digit (`stats.versus`: intervals apart and means more than δ apart). `study.publish` of a
folder holding the answers appends the cells to results/cpu-study-length-cells.csv and keeps the
answers (`keep_answers`); `figure` draws the cells over L (notebook 04).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..runs.atomic import write_atomic
from ..runs.outputs import output_path
from ..tasks import Regime, generate
from .kept import _gzip
from .parts import LENGTH_DIGITS, ZOO2_LENGTH
from .questions import _answer, _scored_before, _unscored
from .rows import CELL
from .stats import hierarchical_bootstrap, versus

LENGTH_FILE = "cpu-study-length.csv"  # OUT's answers, one row per run, length and question
LENGTH_CELLS_FILE = "cpu-study-length-cells.csv"  # results/: the cells (`length_cells`), published
LENGTHS = tuple(range(LENGTH_DIGITS, 2 * LENGTH_DIGITS + 1))  # d ... 2d
QUESTIONS = 500
CONTROL = "single_digit"


def length_questions(length: int, seed: int, n: int = QUESTIONS) -> pd.DataFrame:
    """`n` addition questions of the test split of `seed` whose operands are integers of exactly
    `length` digits (a sign apart)."""
    if not 1 <= length <= 15:
        raise ValueError(f"a length of {length} digits: the generator writes 1 ... 15")
    return generate("addition", n, seed=seed, split="test", regime=Regime((length - 1, length - 1), length))


def length_scores(out, lengths=LENGTHS, n: int = QUESTIONS, which=(ZOO2_LENGTH,), **selection) -> pd.DataFrame:
    """Every finished run of `which` in OUT (narrowed by `select`'s `selection`) answers `n`
    questions of each length: one row per run, length and question (the study's columns, `length`,
    the question, prediction, score, exact match, tokens), written to OUT/cpu-study-length.csv after
    every run. Runs already scored there are not scored again; a file scored at other lengths or
    another n is refused."""
    out = output_path(out, "out")
    path = out / LENGTH_FILE
    done = _scored_before(path, ["run", "length", "n"])
    if len(done) and (set(done["length"]) != set(lengths) or set(done["n"]) != {n}):
        raise ValueError(
            f"{path} holds lengths {sorted(set(done['length']))} of n = {sorted(set(done['n']))}, not "
            f"{list(lengths)} of n = {n}: score into another folder, or move the file aside"
        )
    parts = [done] if len(done) else []
    for r in _unscored(out, which, done, **selection):
        if r.task != "addition":
            raise ValueError(f"{r.name} trains {r.task}: the length axis asks additions only")
        for length in lengths:
            parts.append(_answer(out, r, length_questions(length, r.seed, n)).assign(length=length, n=n))
        table = pd.concat(parts, ignore_index=True)
        write_atomic(path, lambda tmp: table.to_csv(tmp, index=False))  # after every run: resumable
    return pd.concat(parts, ignore_index=True) if parts else done


def length_cells(table: pd.DataFrame, draws: int = 2000) -> pd.DataFrame:
    """Per cell (study, encoding, task, digits), length and metric (log-sMAPE, exact match): the
    seed mean with its 95 % interval (runs, then questions, resampled), and how many runs and
    answers: the table published as LENGTH_CELLS_FILE."""
    rows = []
    for key, cell in table.groupby([*CELL, "length"]):
        for metric, column in (("log_smape", "score"), ("exact_match", "exact")):
            per_run = [g[column].to_numpy(dtype=float) for _, g in cell.groupby("run")]
            mean, low, high = hierarchical_bootstrap(per_run, draws)
            rows.append(
                dict(zip([*CELL, "length"], key), metric=metric, mean=mean, low=low, high=high)
                | dict(runs=len(per_run), answers=len(cell))
            )
    return pd.DataFrame(rows)


def keep_answers(table: pd.DataFrame, into) -> Path:
    """The answers behind the published cells, gzip-compressed with its clock zeroed (the same
    answers give the same bytes): INTO/<study>/length-answers.csv.gz, one file per study. A file
    kept before is never replaced with other bytes."""
    (study_name,) = set(table.study)
    path = Path(into) / study_name / "length-answers.csv.gz"
    data = _gzip(table.to_csv(index=False).encode())
    if path.exists():
        if path.read_bytes() != data:
            raise ValueError(f"{path} already keeps other answers: a kept file is never replaced")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: Path(tmp).write_bytes(data))
    return path


def figure(cells: pd.DataFrame):
    """Two panels over the operand length L (digits): log-sMAPE and exact match, each encoding's
    mean over seeds with its 95 % interval; the training length marked."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from .. import encoders
    from ..figures import plots

    metrics = (("log_smape", "log-sMAPE (0-1)"), ("exact_match", "exact match (share of answers)"))
    fig = make_subplots(rows=1, cols=2, subplot_titles=["log-sMAPE", "exact match"], horizontal_spacing=0.1)
    count = cells.encoding.nunique()
    symbols = ("circle", "square", "diamond", "triangle-up", "x", "star")
    for j, (encoding, rows) in enumerate(cells.groupby("encoding", sort=False)):
        color, name = plots.encoding_color(encoding), encoders.label(encoding)
        shift = 0.05 * (j - (count - 1) / 2)  # side by side at each L: lines that coincide stay visible
        for k, (metric, _) in enumerate(metrics):
            part = rows[rows.metric == metric].sort_values("length")
            fig.add_trace(
                go.Scatter(x=part.length + shift, y=part["mean"], mode="lines+markers", line=dict(color=color, width=2.5),
                           marker=dict(symbol=symbols[j % len(symbols)], size=8),
                           error_y=dict(type="data", symmetric=False, array=part["high"] - part["mean"],
                                        arrayminus=part["mean"] - part["low"], thickness=1.2),
                           name=f"{name} ({int(part.runs.max())} seeds)", legendgroup=encoding, showlegend=k == 0),
                row=1, col=k + 1,
            )  # fmt: skip
    trained = int(cells.digits.max())
    for k in range(len(metrics)):
        fig.add_vline(x=trained + 0.5, line=dict(color="grey", dash="dot"), row=1, col=k + 1,
                      annotation_text="longer than trained →", annotation_position="top right")  # fmt: skip
        fig.update_xaxes(title_text="operand length L (digits; trained at most 4)", dtick=1, row=1, col=k + 1)
        fig.update_yaxes(title_text=metrics[k][1], range=[0, 1.02], row=1, col=k + 1)
    fig.update_layout(
        title=f"The zoo's length axis: addition trained at up to {trained} digits, tested at L = "
        f"{int(cells.length.min())} ... {int(cells.length.max())} (mean over seeds, 95 % intervals)",
        width=1100, height=480, legend=dict(orientation="h", y=-0.22),
    )  # fmt: skip
    return fig


def against_control(cells: pd.DataFrame, control: str = CONTROL) -> pd.DataFrame:
    """Every other encoding against `control`, per length and metric, under the leaderboard's rule
    (`stats.versus`): "ahead" names the one whose interval lies above and whose mean is more than δ
    higher, else "overlap" or within the spread."""
    keys, base = ["study", "task", "digits", "length", "metric"], cells[cells.encoding == control]
    parts = []
    for e in sorted(set(cells.encoding) - {control}):
        both = versus(cells[cells.encoding == e], base, keys, e, control)
        names = {f"{k}_{e}": k for k in ("mean", "low", "high")} | {
            f"{k}_{control}": f"control_{k}" for k in ("mean", "low", "high")
        }
        parts.append(both.rename(columns=names).assign(encoding=e, control=control))
    if not parts:
        raise ValueError(f"no encoding beside {control} to compare")
    columns = [
        "encoding",
        *keys,
        "mean",
        "low",
        "high",
        "control",
        "control_mean",
        "control_low",
        "control_high",
        "ahead",
    ]
    return pd.concat(parts, ignore_index=True)[columns]
