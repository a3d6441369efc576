"""Why a cell's score stalls, read from its kept runs (results/runs/, `kept`): Study 4's diagnosis
of BitTokens at d = 4 (docs/study/study4.md, "The plateau").

    runs = study.kept.kept_runs(study.kept.KEPT, "study4_3M")
    study.curves.traces(runs)         # per evaluation: validation, curriculum frontier, losses, rates
    study.plateau.by_difficulty(runs)  # per run and difficulty level: the test answers' mean score
    study.plateau.figure(runs, "multiplication", 4)

A final score hides which of four things holds a run back: the questions it never gets right (the
test score per difficulty level), the curriculum (the frontier: the hardest level the sampler
admits), the number head against the text head (their losses), and the schedule (the rates). The
difficulty of a test answer is not stored with it: the test split is drawn again from the run's
seed and regime (the same call as training's `final_test`) and matched question by question.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import encoders, tasks
from ..config import from_record
from ..tasks import generate
from .curves import kept_plan_runs, traces  # noqa: F401 (traces: the curves this module reads, study.plateau.traces)
from .parts import STUDY4, STUDY4_PLATEAU, STUDY4_SEEDS, VARIANT, base_encoding
from .study4 import paired


def test_questions(cfg: dict, task: str) -> pd.DataFrame:
    """A run's test questions with their difficulty levels (`difficulty_sd`, base 10), in the order
    it answered them: its test split drawn again from its recorded settings."""
    regime = from_record(cfg).regime
    return generate(task, cfg["test_samples"], seed=cfg["seed"], split="test", regime=regime)


def by_difficulty(folders) -> pd.DataFrame:
    """Per kept run and difficulty level: how many test questions, their mean score and the share
    answered exactly."""
    rows = []
    for r, run in kept_plan_runs(folders):
        answers = run["answers"]
        drawn = test_questions(run["config"], r.task)
        if (
            len(drawn) != len(answers)
            or not (drawn.prompt.astype(str).to_numpy() == answers.prompt.astype(str).to_numpy()).all()
        ):
            raise ValueError(f"{r.name}: its test answers are not the questions its settings draw")
        level = answers.assign(level=drawn.difficulty_sd.to_numpy()).groupby("level")
        part = pd.DataFrame({"n": level.size(), "score": level.score.mean(), "exact": level.exact.mean()}).reset_index()
        rows.append(part.assign(study=r.study, task=r.task, digits=r.digits, encoding=r.encoding, seed=r.seed))
    columns = ["study", "task", "digits", "encoding", "seed", "level", "n", "score", "exact"]
    return pd.concat(rows, ignore_index=True)[columns] if rows else pd.DataFrame(columns=columns)


PANELS = (
    ("validation", "validation log-sMAPE (↑)"),
    ("frontier", "curriculum frontier (BitTokens: base-2 level, digits: base 10)"),
    ("by_difficulty", "test log-sMAPE (↑) by difficulty level"),
    ("number", "number-head loss (log)"),
    ("ce", "LM-head cross-entropy, nats (log)"),
    ("lr_hidden", "learning rate, hidden layers"),
)


def figure(folders, task: str, digits: int, title: str | None = None):
    """Six panels for one cell: validation score, curriculum frontier and number-head loss, text
    cross-entropy and hidden rate against tokens trained (each encoding's mean over seeds, every seed
    thin), and the test score per difficulty level (mean over seeds, every seed a dot)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..figures import plots

    folders = list(folders)
    curves = traces(folders)
    levels = by_difficulty(folders)
    curves = curves[(curves.task == task) & (curves.digits == digits)]
    levels = levels[(levels.task == task) & (levels.digits == digits)]
    if curves.empty:
        raise ValueError(f"no kept run of {task} at d = {digits} among the {len(folders)} folders given")
    fig = make_subplots(
        rows=2, cols=3, subplot_titles=[label for _, label in PANELS], vertical_spacing=0.2, horizontal_spacing=0.07
    )
    for (part_name, encoding), runs in curves.groupby(["study", "encoding"]):
        color = plots.encoding_color(base_encoding(encoding))
        name = encoders.label(base_encoding(encoding)) + (", decimal pool" if encoding == VARIANT else "")
        dash = "dash" if part_name.startswith(STUDY4_PLATEAU) else None
        name += ", without curriculum" if dash else ""
        for k, (column, _) in enumerate(PANELS):
            row, col = divmod(k, 3)
            if column == "by_difficulty":
                part = levels[(levels.encoding == encoding) & (levels.study == part_name)]
                fig.add_trace(
                    go.Scatter(x=part.level, y=part.score, mode="markers", marker=dict(color=color, size=5, opacity=0.45),
                               name=f"{name}, one seed", legendgroup=encoding, showlegend=False),
                    row=row + 1, col=col + 1,
                )  # fmt: skip
                mean = part.groupby("level").score.mean()
                fig.add_trace(
                    go.Scatter(x=mean.index, y=mean.to_numpy(), mode="lines+markers", line=dict(color=color, width=3, dash=dash),
                               name=name, legendgroup=encoding, showlegend=False),
                    row=row + 1, col=col + 1,
                )  # fmt: skip
                continue
            if runs[column].isna().all():
                continue
            for _, run in runs.groupby("seed"):
                fig.add_trace(
                    go.Scatter(x=run.tokens / 1e6, y=run[column], mode="lines", line=dict(color=color, width=0.8, dash=dash),
                               opacity=0.4, legendgroup=encoding, showlegend=False, hoverinfo="skip"),
                    row=row + 1, col=col + 1,
                )  # fmt: skip
            mean = runs.groupby("tokens")[column].mean()
            fig.add_trace(
                go.Scatter(x=mean.index / 1e6, y=mean.to_numpy(), mode="lines", line=dict(color=color, width=3, dash=dash),
                           name=f"{name} (mean of {runs.seed.nunique()} seeds)", legendgroup=encoding, showlegend=k == 0),
                row=row + 1, col=col + 1,
            )  # fmt: skip
    for k, (column, _) in enumerate(PANELS):
        row, col = divmod(k, 3)
        x_title = (
            "difficulty level (A.3: non-zero digits, base 10)"
            if column == "by_difficulty"
            else "tokens trained (millions)"
        )
        fig.update_xaxes(title_text=x_title, row=row + 1, col=col + 1)  # each panel's title names its y
    for column in ("validation", "by_difficulty"):
        k = [c for c, _ in PANELS].index(column)
        fig.update_yaxes(range=[-0.02, 1.02], row=k // 3 + 1, col=k % 3 + 1)
    fig.update_yaxes(type="log", row=2, col=1)
    fig.update_yaxes(type="log", row=2, col=2)
    fig.update_layout(
        width=1250,
        height=760,
        legend=dict(orientation="h", y=-0.14, x=0),
        title=dict(
            text=title or f"Why the score stalls: {task}, d = {digits}",
            subtitle=dict(text="thin lines and dots: one seed each; thick: their mean"),
        ),
        margin=dict(t=130),
    )
    return fig


def curriculum_draws(record: dict, task: str, frontiers, pool: int = 50_000) -> pd.DataFrame:
    """What the curriculum of a run (its config.json `record`) feeds the model at each frontier in
    `frontiers`: the share of training draws whose question has an operand with a fractional part,
    beside the test split's share, and the total variation distance between the drawn questions'
    decimal difficulty levels and the test's. Computed from the sampler alone, without training: a
    curriculum on base-2 difficulty (BitTokens) orders a decimal pool by bits, not by what the
    test asks."""
    from ..training.curriculum import Curriculum

    cfg = from_record(record)
    regime = cfg.regime
    train = generate(task, pool, seed=cfg.seed, split="train", regime=regime)
    test = test_questions(record, task)
    base = encoders.get(cfg.encoding).difficulty_base
    column = "difficulty" if base == 2 else "difficulty_sd"
    levels = train[column].to_numpy()
    top = int(max(levels.max(), tasks.max_difficulty(task, base, regime)))
    held = np.unique(levels)
    fractional = train.prompt.str.contains(r"\.", regex=True).to_numpy()
    test_levels = test.difficulty_sd.value_counts(normalize=True)
    rows = []
    for frontier in frontiers:
        probs = Curriculum(top, 1000, 1.0, frontier=int(frontier), levels=held).level_probabilities()
        per_level = probs * (np.bincount(levels, minlength=top + 1) > 0)
        weight = (per_level / per_level.sum())[levels] / np.bincount(levels, minlength=top + 1)[levels]
        drawn_levels = pd.Series(weight).groupby(train.difficulty_sd.to_numpy()).sum()
        both = pd.concat([drawn_levels, test_levels], axis=1).fillna(0.0)
        rows.append(
            dict(
                frontier=int(frontier),
                fractional_drawn=float(weight[fractional].sum()),
                fractional_test=float(test.prompt.str.contains(r"\.", regex=True).mean()),
                distance=float(0.5 * (both.iloc[:, 0] - both.iloc[:, 1]).abs().sum()),
            )
        )
    return pd.DataFrame(rows)


def intervention(found: dict) -> pd.DataFrame:
    """The registered comparisons of the intervention (docs/study/study4.md, "The plateau"), each paired by
    seed on the same test questions, as Study 4's cells are (`study4.paired`): `found` is
    `study4.answers(folders, parts=(STUDY4, STUDY4_PLATEAU))`."""
    grid = found.get((f"{STUDY4}_3M", "multiplication", 4), {})
    without = found.get((f"{STUDY4_PLATEAU}_3M", "multiplication", 4), {})
    comparisons = (
        ("BitTokens without curriculum", without.get(VARIANT), "BitTokens with it", grid.get(VARIANT)),
        ("single digit without curriculum", without.get("single_digit"), "single digit with it", grid.get("single_digit")),
        ("BitTokens without curriculum", without.get(VARIANT), "single digit with it", grid.get("single_digit")),
        ("BitTokens without curriculum", without.get(VARIANT), "single digit without it", without.get("single_digit")),
    )  # fmt: skip
    rows = []
    for a, left, b, right in comparisons:
        if left and right and all(s in left and s in right for s in STUDY4_SEEDS):
            rows.append(paired([left[s] for s in STUDY4_SEEDS], [right[s] for s in STUDY4_SEEDS], a, b))
    return pd.DataFrame(rows)
