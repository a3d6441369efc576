"""The BitTokens authors' released benchmark files: loaders, a label audit against our exact
solver, and Tables 1-3 recomputed from the per-sample results (combined_samples_long.csv).

Folder: $WORKBENCH_OFFICIAL_DATA, else ../shared/data/official_bittokens next to the repo root.
"""

import os
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np
import pandas as pd

from workbench import tasks

from . import paper

ENV = "WORKBENCH_OFFICIAL_DATA"


def released_tasks() -> list[str]:
    """Our names of the tasks the authors released test sets and results for."""
    return [t for t in tasks.names() if tasks.get(t).released_name]


# (released model id, released reasoning) -> (paper model name, paper reasoning label), appendix B.1
MODELS = {
    ("openai__gpt-oss-120b", "high"): ("GPT OSS 120B", "maximal"),
    ("qwen__qwen3-235b-a22b-thinking-2507", "high"): ("Qwen3 235B 2507", "maximal"),
    ("qwen__qwen3-235b-a22b-2507", "none"): ("Qwen3 235B 2507", "none"),
    ("deepseek__deepseek-chat-v3.1", "high"): ("DeepSeek v3.1", "maximal"),
    ("deepseek__deepseek-chat-v3.1", "none"): ("DeepSeek v3.1", "none"),
    ("moonshotai__kimi-k2-0905", "none"): ("Kimi K2 0905", "none"),
    ("meta-llama__llama-4-maverick", "none"): ("Llama 4 Maverick", "none"),
    ("openai__gpt-5", "high"): ("GPT 5", "maximal"),
    ("openai__gpt-5", "minimal"): ("GPT 5", "minimal"),
    ("google__gemini-2.5-pro", "high"): ("Gemini 2.5 Pro", "maximal"),
    ("google__gemini-2.5-pro", "minimal"): ("Gemini 2.5 Pro", "minimal"),
    ("google__gemini-2.5-flash", "high"): ("Gemini 2.5 Flash", "maximal"),
    ("google__gemini-2.5-flash", "none"): ("Gemini 2.5 Flash", "none"),
}


def data_dir(path=None):
    """The released-data folder: `path`, else $WORKBENCH_OFFICIAL_DATA, else ../shared/... ."""
    folder = Path(
        path
        or os.environ.get(ENV)
        or Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "official_bittokens"
    )
    if not folder.is_dir():
        raise FileNotFoundError(f"released BitTokens data not found at {folder}; pass a path or set {ENV}")
    return folder


def _file(name, path):
    f = data_dir(path) / name
    if not f.is_file():
        raise FileNotFoundError(f"{f} is missing from the released BitTokens data")
    return f


def load_test_set(task, path=None):
    """The 500 questions of `task` given to the frontier models; text columns kept as exact strings."""
    if task not in released_tasks():
        raise ValueError(f"unknown task {task!r}; expected one of {released_tasks()}")
    df = pd.read_csv(
        _file(f"{tasks.get(task).released_name}_decimal_uniform_test_500_shuffle.csv", path),
        dtype=str,
        keep_default_na=False,
    )
    for col in ("difficulty", "difficulty_sd"):
        df[col] = pd.to_numeric(df[col]).astype(int)
    df.insert(0, "task", task)
    return df


def load_samples(path=None):
    """combined_samples_long.csv with our task names and the paper's model / reasoning labels."""
    df = pd.read_csv(_file("combined_samples_long.csv", path))
    to_task = {tasks.get(t).released_name: t for t in released_tasks()}
    unknown = set(df["task"]) - set(to_task)
    if unknown:
        raise ValueError(f"unexpected tasks in combined_samples_long.csv: {sorted(unknown)}")
    df["task"] = df["task"].map(to_task)
    keys = list(zip(df["model"], df["reasoning"]))
    if missing := set(keys) - set(MODELS):
        raise ValueError(f"model/reasoning pairs without a paper name: {sorted(missing)}")
    df["paper_model"] = [MODELS[k][0] for k in keys]
    df["paper_reasoning"] = [MODELS[k][1] for k in keys]
    return df


def recompute_table(n, path=None):
    """Table 1 (mean performance, %), 2 (exact match, %) or 3 (mean tokens) from the samples,
    rows and columns as printed in the paper, values unrounded."""
    if n not in (1, 2, 3):
        raise ValueError(f"only Tables 1, 2, 3 come from combined_samples_long.csv, got {n!r}")
    value, scale = {1: ("performance", 100.0), 2: ("exact15", 100.0), 3: ("tokens", 1.0)}[n]
    df = load_samples(path)
    columns = paper.table_columns(n)
    df = df[df["task"].isin(columns)]
    means = df.groupby(["paper_model", "paper_reasoning", "task"])[value].mean().mul(scale).unstack("task")
    means = means.rename(columns=columns)[list(columns.values())]
    rows = pd.MultiIndex.from_tuples(list(MODELS.values()), names=["Model", "Reasoning"])
    means.index.names = ["Model", "Reasoning"]
    means.columns.name = None
    return means.reindex(rows)


def _decimal(text):
    try:
        d = Decimal(str(text).strip())
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


def first_differing_digit(a, b):
    """1-based position of the first significant digit where decimals a and b differ (0 if equal).
    A different sign or decimal exponent counts as a difference at digit 1."""
    a, b = Decimal(a).normalize(), Decimal(b).normalize()
    if a == b:
        return 0
    if a.is_zero() or b.is_zero() or a.is_signed() != b.is_signed() or a.adjusted() != b.adjusted():
        return 1
    da, db = a.as_tuple().digits, b.as_tuple().digits
    width = max(len(da), len(db))
    da, db = da + (0,) * (width - len(da)), db + (0,) * (width - len(db))
    return next(i for i, (x, y) in enumerate(zip(da, db), 1) if x != y)


def audit_labels(task, path=None):
    """Each released label next to `tasks.solve` of its text_prompt: agrees, the first differing
    significant digit as written, the relative error and the digits it leaves right
    (-log10 relative error, so 0.00399999999999999 vs 0.004 is 'digit 1' but 14.6 digits right)."""
    df = load_test_set(task, path)
    rows = []
    for prompt, released in zip(df["text_prompt"], df["answer"]):
        ours = tasks.solve(prompt)
        a, b = _decimal(released), _decimal(ours)
        if tasks.get(task).answer == "number" and a is not None and b is not None:
            digit = first_differing_digit(a, b)
            rel = float(abs(a - b) / abs(b)) if b else (0.0 if a == b else float("inf"))
            right = 15.0 if rel == 0 else float(np.clip(-np.log10(rel), 0, 15))
            rows.append((prompt, released, ours, digit == 0, digit or np.nan, rel, right))
        else:
            rows.append((prompt, released, ours, released.strip() == ours.strip(), np.nan, np.nan, np.nan))
    out = pd.DataFrame(
        rows,
        columns=[
            "text_prompt",
            "released",
            "recomputed",
            "agrees",
            "first_differing_digit",
            "relative_error",
            "digits_right",
        ],
    )
    out.insert(0, "task", task)
    return out


def audit_summary(task_list=None, path=None):
    """Per task: released labels that differ from the exact answer; of those, how many only in the
    15th digit, how many are float noise (relative error <= 1e-13), how many are really wrong
    (relative error > 1e-13) and how many wrong from the first digit on (relative error > 0.1)."""
    rows = []
    for task in task_list or released_tasks():
        a = audit_labels(task, path)
        bad, rel = ~a["agrees"], a["relative_error"]
        rows.append(
            {
                "task": task,
                "n": len(a),
                "differ": int(bad.sum()),
                "only_digit_15": int((a["first_differing_digit"] >= 15).sum()),
                "float_noise": int((bad & (rel <= 1e-13)).sum()),
                "wrong": int((bad & (rel > 1e-13)).sum()),
                "wrong_first_digit": int((bad & (rel > 0.1)).sum()),
                "min_digits_right": float(a.loc[bad, "digits_right"].min()) if bad.any() else np.nan,
            }
        )
    return pd.DataFrame(rows)
