"""Folders of raw model answers, rescored under both readings (scoring modes "paper", "careful").

Two formats, read into one row per answer (task, model, reasoning, response, label, tokens, ...):

* the authors' per-answer CSVs, one per task, model and reasoning setting, named
  `{Task}_decimal_uniform_test_500_shuffle_{model}_re_{reasoning}.csv`: the test set's columns
  (`answer` is the label) plus `tokens`, `raw_response` and usage columns. Read as the authors read
  them (`pd.read_csv(dtype=str)`, so an empty or 'N/A' response is no response) and, like them,
  only the first 500 rows of a file.
* our client's JSONL (`client.run_benchmark`): {id, task, model, response, completion_tokens,
  seconds} per answer, {id, task, model, error, seconds} per failed question (skipped here). Of a
  question one model answered twice (in one file or two), the first answer counts, with a warning.
  Labels come from the benchmark JSONL of `prompts.export_benchmark`, passed as `benchmark` or
  found in the folder (the JSONL whose records have "text_prompt" and "answer").
"""

import re
from pathlib import Path

import pandas as pd

from workbench import tasks

from . import client, paper
from .official import MODELS, released_tasks
from .scoring import MODES, read_jsonl, score

FILENAME = re.compile(
    r"^(?P<task>[A-Za-z]+)_decimal_uniform_test_500_shuffle_(?P<model>.+?)"
    r"_re_(?P<reasoning>[A-Za-z]+)\.csv$"
)
FILE_ROWS = 500  # the authors score the first 500 answers of each file
COLUMNS = ["task", "model", "reasoning", "response", "label", "tokens", "difficulty_sd", "source"]
NO_REASONING_SETTING = "-"  # our client's files do not record one
_TASK = {tasks.get(t).released_name: t for t in released_tasks()}


def _numbers(df, column, missing):
    """A numeric column of `df`; an absent column or an unreadable cell is `missing`."""
    values = df[column] if column in df else pd.Series(missing, index=df.index)
    return pd.to_numeric(values, errors="coerce").fillna(missing)


def _authors_csv(path, m):
    task = _TASK.get(m.group("task"))
    if task is None:
        raise ValueError(f"{path.name}: unknown task {m.group('task')!r}; expected one of {list(_TASK)}")
    df = pd.read_csv(path, dtype=str).iloc[:FILE_ROWS]
    if missing := {"answer", "raw_response"} - set(df.columns):
        raise ValueError(f"{path} lacks columns {sorted(missing)}")
    if df["answer"].isna().any():
        raise ValueError(f"{path}: row {int(df['answer'].isna().to_numpy().argmax())} has no label (answer)")
    return pd.DataFrame(
        {
            "task": task,
            "model": m.group("model"),
            "reasoning": m.group("reasoning"),
            "response": df["raw_response"],  # NaN: no response
            "label": df["answer"],
            "tokens": _numbers(df, "tokens", -1).astype(int),
            "difficulty_sd": _numbers(df, "difficulty_sd", float("nan")),
            "source": path.name,
        }
    )


def _client_jsonl(path, records, labels):
    df = pd.DataFrame(records, columns=sorted({"id", "response"}.union(*records)))
    if labels is None:
        raise ValueError(
            f"{path} holds answers of our client but no benchmark gives their labels; "
            "pass benchmark= or put the benchmark JSONL in the folder"
        )
    if unknown := set(df["id"]) - set(labels.index):
        raise ValueError(f"{path}: {len(unknown)} answer ids are not in the benchmark, e.g. {sorted(unknown)[:3]}")
    bench = labels.loc[df["id"]].reset_index(drop=True)
    return pd.DataFrame(
        {
            "task": bench["task"],
            "model": df.get("model", pd.Series(path.stem, index=df.index)),
            "reasoning": NO_REASONING_SETTING,
            "response": df["response"],
            "label": bench["answer"].astype(str),
            "tokens": _numbers(df, "completion_tokens", -1).astype(int),
            "difficulty_sd": _numbers(bench, "difficulty_sd", float("nan")),
            "source": path.name,
        }
    )


def _benchmark_labels(benchmark):
    df = benchmark if isinstance(benchmark, pd.DataFrame) else pd.DataFrame(read_jsonl(benchmark))
    if missing := {"id", "task", "answer"} - set(df.columns):
        raise ValueError(f"benchmark lacks columns {sorted(missing)}")
    return df.set_index("id")


def load_answer_folder(folder, benchmark=None):
    """All answers in `folder` (authors' CSVs and our client's JSONL) as one DataFrame with
    COLUMNS, one row per answer; a file of neither kind is skipped, a broken one is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"answer folder {folder} is not a directory")
    jsonl = {p: read_jsonl(p) for p in sorted(folder.glob("*.jsonl"))}
    first = {p: rows[0] if rows and isinstance(rows[0], dict) else {} for p, rows in jsonl.items()}
    if benchmark is None:
        found = [p for p in jsonl if {"text_prompt", "answer"} <= set(first[p])]
        if len(found) > 1:
            raise ValueError(f"several benchmark files in {folder}: {[p.name for p in found]}; pass benchmark=")
        benchmark = found[0] if found else None
    labels = _benchmark_labels(benchmark) if benchmark is not None else None
    frames = [_authors_csv(p, m) for p in sorted(folder.glob("*.csv")) if (m := FILENAME.match(p.name))]
    seen = set()  # (model, id) of the answers taken so far, across files
    ours = [p for p in jsonl if {"response", "error"} & set(first[p])]
    frames += [_client_jsonl(p, client.answered(jsonl[p], p, seen), labels) for p in ours]
    if not frames:
        raise ValueError(
            f"no answer files in {folder}: expected {{Task}}_decimal_uniform_test_500_shuffle_"
            "{model}_re_{reasoning}.csv or our client's JSONL"
        )
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def rescore(answers):
    """`answers` with parsed_/performance_/exact_ columns for each scoring mode."""
    out = answers.copy()
    for mode in MODES:
        scores = pd.DataFrame(
            [score(t, r, a, mode) for t, r, a in zip(out["task"], out["response"], out["label"])], index=out.index
        )
        out[[f"{c}_{mode}" for c in scores.columns]] = scores
    return out


def _row_names(scored):
    """(Model, Reasoning) as the paper prints them when the pair is one of its models."""
    pairs = list(zip(scored["model"], scored["reasoning"]))
    return [MODELS.get(p, (p[0].replace("__", "/"), p[1])) for p in pairs]


def table(scored, n, mode="paper"):
    """Table 1 (mean performance, %) or 2 (15-digit exact match of arithmetic, %) of rescored
    answers, in the paper's layout: the paper's rows first, in its order; tasks present only."""
    if n not in (1, 2):
        raise ValueError(f"only Tables 1 and 2 come from scored answers, got {n!r}")
    if mode not in MODES:
        raise ValueError(f"unknown scoring mode {mode!r}; expected one of {MODES}")
    value = f"performance_{mode}" if n == 1 else f"exact_{mode}"
    df = scored[scored["task"].isin(paper.table_columns(n))]
    rows = pd.DataFrame(_row_names(df), columns=["Model", "Reasoning"], index=df.index)
    groups = [rows["Model"], rows["Reasoning"], df["task"]]
    means = df[value].astype(float).groupby(groups).mean().mul(100).unstack("task")
    columns = [t for t in paper.table_columns(n) if t in means.columns]
    means = means[columns].rename(columns=paper.table_columns(n))
    known = [r for r in MODELS.values() if r in means.index]
    means.columns.name = None
    return means.reindex(known + sorted(set(means.index) - set(known)))


def side_by_side(scored, n):
    """Table n under both readings: one column pair (paper, careful) per task."""
    both = pd.concat({mode: table(scored, n, mode) for mode in MODES}, axis=1).swaplevel(axis=1)
    return both[[(task, mode) for task in table(scored, n).columns for mode in MODES]]


def differences(scored):
    """One sentence: how many answers the careful reading scores differently, and the table cell
    that moves most."""
    changed = ((scored["performance_paper"] - scored["performance_careful"]).abs() > 1e-12) | (
        scored["exact_paper"] != scored["exact_careful"]
    )
    text = f"The careful reading scores {int(changed.sum()):,} of {len(scored):,} answers differently"
    moves = []
    for n in (1, 2):
        paper, careful = table(scored, n, "paper"), table(scored, n, "careful")
        gap = (careful - paper).stack()
        if len(gap) and gap.abs().max() > 0:
            (model, reasoning, task), delta = gap.abs().idxmax(), gap[gap.abs().idxmax()]
            moves.append(
                (
                    abs(delta),
                    f"Table {n}, {model} ({reasoning}), {task}: "
                    f"{paper.loc[(model, reasoning), task]:.1f} (paper) vs "
                    f"{careful.loc[(model, reasoning), task]:.1f} (careful)",
                )
            )
    if not moves:
        return text + "; no table cell moves."
    return text + "; the largest change of a table cell is " + max(moves)[1] + "."
