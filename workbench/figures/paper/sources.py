"""What the paper's figures 2-8 are rebuilt from: Tables 1-3 (frontier LLMs), Tables 4 and 7
(Figure 4), the authors' released files (`combined_samples_long.csv`, per-sample frontier results,
and the 500-sample test sets; both optional), and the paper's names of tasks and methods mapped to
ours. Each figure is a data-preparation function (tested) and a plotting function (plotly), one
module per figure family beside this one (frontier, difficulty, methods, datasets); notebook 04
narrates them. Our own results come in the results schema, `workbench.results`'s.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ... import encoders, tasks
from ...frontier import official, paper
from ...results import ARITHMETIC

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


def official_test_sets(folder, task_names=None) -> dict[str, pd.DataFrame]:
    """The released 500-sample test set of each task."""
    folder = official_folder(folder)
    return {t: official.load_test_set(t, folder) for t in task_names or official.released_tasks()}
