"""Score model answers like appendix B: log-sMAPE and 15-digit exact match for the six arithmetic
tasks, exact letter for interval, the whole list for sorting, the exact number for min/max.

`performance` follows the released files: log-sMAPE for arithmetic, accuracy (0/1) otherwise.
"""
import json

import pandas as pd

from workbench import metrics
from .answers import parse_answer, parse_letter, parse_list, parse_number

ARITHMETIC = ("addition", "multiplication", "division", "exponentiation", "mean", "std")


def _float(d):
    """float of a Decimal; beyond float64 becomes +-inf (scores 0), never an exception."""
    try:
        return float(d)
    except OverflowError:
        return float("inf")


def _reference(task, answer):
    parsed = {"sorting": parse_list, "interval": parse_letter}.get(task, parse_number)(answer)
    if parsed is None:
        raise ValueError(f"reference answer {answer!r} of task {task!r} is not well formed")
    return parsed


def score(task, predicted_text, answer):
    """dict(parsed, performance, exact) for one model output against the reference answer string."""
    ref = _reference(task, answer)
    pred = parse_answer(predicted_text, task)
    if task in ARITHMETIC:
        if pred is None:
            return {"parsed": None, "performance": 0.0, "exact": False}
        p, t = _float(pred), _float(ref)
        return {"parsed": str(pred), "performance": float(metrics.log_smape(p, t)),
                "exact": bool(metrics.exact_match(p, t)[0])}
    if task == "sorting":
        ok = pred is not None and len(pred) == len(ref) and all(a == b for a, b in zip(pred, ref))
        shown = None if pred is None else ", ".join(str(x) for x in pred)
    elif task == "interval":
        ok = pred is not None and bool(metrics.interval_accuracy([pred], [ref])[0])
        shown = pred
    else:  # minmax: the same number (Decimal equality, so '0.50' == '0.5')
        ok = pred is not None and pred == ref
        shown = None if pred is None else str(pred)
    return {"parsed": shown, "performance": float(ok), "exact": ok}


def read_jsonl(path):
    """Records of a JSONL file; ValueError names the first malformed line."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{i} is not valid JSON: {e}") from None
    return rows


def score_answers(answers, benchmark):
    """Per-sample scores (DataFrame) and a summary per (model, task).

    `answers`: path to a JSONL of {"id", "model", "response", "completion_tokens"} or a DataFrame;
    `benchmark`: path to the benchmark JSONL or a DataFrame with id, task, answer (, difficulty_sd).
    """
    if not isinstance(answers, pd.DataFrame):
        answers = pd.DataFrame(read_jsonl(answers))
    if not isinstance(benchmark, pd.DataFrame):
        benchmark = pd.DataFrame(read_jsonl(benchmark))
    for name, df, cols in [("answers", answers, {"id", "response"}), ("benchmark", benchmark, {"id", "task", "answer"})]:
        if missing := cols - set(df.columns):
            raise ValueError(f"{name} lacks columns {sorted(missing)}")
    unknown = set(answers["id"]) - set(benchmark["id"])
    if unknown:
        raise ValueError(f"{len(unknown)} answer ids are not in the benchmark, e.g. {sorted(unknown)[:3]}")
    df = answers.drop(columns=[c for c in ("task", "answer") if c in answers]).merge(
        benchmark[[c for c in ("id", "task", "answer", "difficulty_sd") if c in benchmark]], on="id", how="left")
    if "model" not in df:
        df["model"] = "model"
    scores = [score(t, r, a) for t, r, a in zip(df["task"], df["response"], df["answer"])]
    df = pd.concat([df.reset_index(drop=True), pd.DataFrame(scores)], axis=1)
    agg = {"n": ("id", "size"), "performance": ("performance", "mean"), "exact": ("exact", "mean"),
           "unparsed": ("parsed", lambda s: int(s.isna().sum()))}
    if "completion_tokens" in df:
        agg["tokens"] = ("completion_tokens", "mean")
    summary = df.groupby(["model", "task"], sort=True).agg(**agg).reset_index()
    return df, summary
