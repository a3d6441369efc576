"""Score model answers like appendix B, in two modes.

mode="paper" (default) gives the per-answer scores of the paper authors' scorer, so Tables 1-3 and
scores of new models' outputs are comparable with the paper. mode="careful" is our own reading of
the same responses (what a careful reader takes the answer to be) scored on exact values. How the
answer is read is in `answers` (rules P0-P3 and C1-C4); how it is scored:

Per task, paper | careful:

* arithmetic, performance: log-sMAPE (eq. 2) of float64(answer string) against float64(label),
  0 when the string is no float | log-sMAPE of the value read against the label.
* arithmetic, exact (Table 2): the first number token of the answer string and of the label have
  the same sign, decimal exponent and first 15 significant digits, truncated (not rounded), missing
  digits read as 0 | the value, rounded once half-even to 15 significant digits, equals the label
  rounded so.
* MinMax: the answer string (quotes and spaces stripped) equals the label string, so '1.02e-9' for
  0.00000000102 is wrong | the same value as the label (Decimal equality).
* Sorting: both read as lists of float64 (`answers.paper_list`), same length, equal elementwise |
  both read as lists of exact decimals, same length, equal elementwise.
* Interval: the answer string, stripped and upper-cased, equals the label's letter | the letter
  read equals the label's.

An answer that cannot be read scores 0. In the paper mode, a JSON answer passes through float64
before the 15-digit comparison ({"answer": 9954149258099.974379660893464} is '9954149258099.975',
whose first 15 digits match the label 9954149258099.97), so the truncation acts on the shortest
float64 repr, except for JSON integers and strings, which keep their digits. `performance` follows
the released files: log-sMAPE for arithmetic, accuracy (0/1) otherwise; `exact` is the 15-digit
match for arithmetic and equals `performance` for the other tasks.
"""

import json
import math
import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_EVEN, Context, Decimal, InvalidOperation

import pandas as pd

from workbench import metrics

from . import client
from .answers import FIRST_NUMBER, answer_kind, paper_answer, paper_letter, paper_list, parse_answer, parse_reference

MODES = ("paper", "careful")
_TOKEN = re.compile(r"(?:^|\s)(" + FIRST_NUMBER.pattern + ")")
_ROUND15 = Context(prec=15, rounding=ROUND_HALF_EVEN, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _float(text):
    """float64 of a string as Python reads it; None when it is none (then the answer scores 0)."""
    try:
        return float(text)
    except (ValueError, OverflowError):
        return None


def _log_smape(pred, label):
    return 0.0 if pred is None or not math.isfinite(pred) else float(metrics.log_smape(pred, label))


def first15(text):
    """(sign, first 15 significant digits as written, padded with 0, decimal exponent) of the first
    number token in `text` that starts the text or follows whitespace; None when there is none."""
    m = _TOKEN.search(text)
    if m is None:
        return None
    try:
        d = Decimal(m.group(1))
    except (InvalidOperation, ValueError):
        return None
    if not d.is_finite():
        return None
    if d.is_zero():
        return (int(d.is_signed()), "0" * 15, 0)
    digits = "".join(map(str, d.as_tuple().digits))[:15].ljust(15, "0")
    return (int(d.is_signed()), digits, d.adjusted())


def _bad_label(label, task):
    return ValueError(f"reference answer {label!r} of task {task!r} is not well formed")


def _paper(task, response, label):
    parsed = paper_answer(response, task)
    kind = answer_kind(task)
    if kind == "number":
        target = _float(label)
        if target is None or not math.isfinite(target):
            raise _bad_label(label, task)
        ref = first15(label)
        return parsed, _log_smape(_float(parsed), target), ref is not None and first15(parsed) == ref
    if kind == "list":
        pred, ref = paper_list(parsed) or [], paper_list(label)
        if not ref:
            raise _bad_label(label, task)
        ok = len(pred) == len(ref) and all(a == b for a, b in zip(pred, ref))
    elif kind == "letter":
        ref = paper_letter(label)
        if not ref:
            raise _bad_label(label, task)
        ok = parsed.strip().upper() == ref
    else:  # a list element (min/max): the number exactly as written in the list
        if not isinstance(label, str) or not FIRST_NUMBER.search(label):
            raise _bad_label(label, task)
        ok = parsed.strip().strip('"').strip("'") == label.strip().strip('"').strip("'")
    return parsed, float(ok), ok


def _careful(task, response, label):
    ref = parse_reference(label, task)
    pred = parse_answer(response, task)
    kind = answer_kind(task)
    shown = None if pred is None else (", ".join(map(str, pred)) if kind == "list" else str(pred))
    if kind == "number":
        if pred is None:
            return shown, 0.0, False
        exact = _ROUND15.plus(pred) == _ROUND15.plus(ref)
        return shown, _log_smape(float(pred), float(ref)), exact
    ok = pred is not None and (
        pred == ref if kind != "list" else len(pred) == len(ref) and all(a == b for a, b in zip(pred, ref))
    )
    return shown, float(ok), ok


def score(task, response, label, mode="paper"):
    """dict(parsed, performance, exact) of one model response against its label (a string).
    `parsed` is the answer as read (None if none); see the module docstring for the rules."""
    if mode not in MODES:
        raise ValueError(f"unknown scoring mode {mode!r}; expected one of {MODES}")
    answer_kind(task)  # raises for a task without a frontier answer
    parsed, performance, exact = (_paper if mode == "paper" else _careful)(task, response, label)
    return {"parsed": parsed or None, "performance": float(performance), "exact": bool(exact)}


def read_jsonl(path):
    """Records of a JSONL file; ValueError names the first malformed line."""
    rows = []
    with open(path, "rb") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line.decode("utf-8")))
                except (ValueError, RecursionError) as e:  # bad JSON or UTF-8, nesting too deep
                    raise ValueError(f"{path}:{i} is not valid JSON: {e or type(e).__name__}") from None
    return rows


def score_answers(answers, benchmark, mode="paper"):
    """Per-sample scores (DataFrame) and a summary per (model, task).

    `answers`: path to a JSONL of {"id", "model", "response", "completion_tokens"} or a DataFrame;
    `benchmark`: path to the benchmark JSONL or a DataFrame with id, task, answer (, difficulty_sd).
    """
    if not isinstance(answers, pd.DataFrame):  # failure records skipped, repeated answers dropped
        answers = pd.DataFrame(client.answered(read_jsonl(answers), answers))
    if not isinstance(benchmark, pd.DataFrame):
        benchmark = pd.DataFrame(read_jsonl(benchmark))
    for name, df, cols in [
        ("answers", answers, {"id", "response"}),
        ("benchmark", benchmark, {"id", "task", "answer"}),
    ]:
        if missing := cols - set(df.columns):
            raise ValueError(f"{name} lacks columns {sorted(missing)}")
    unknown = set(answers["id"]) - set(benchmark["id"])
    if unknown:
        raise ValueError(f"{len(unknown)} answer ids are not in the benchmark, e.g. {sorted(unknown)[:3]}")
    df = answers.drop(columns=[c for c in ("task", "answer") if c in answers]).merge(
        benchmark[[c for c in ("id", "task", "answer", "difficulty_sd") if c in benchmark]], on="id", how="left"
    )
    if "model" not in df:
        df["model"] = "model"
    scores = [score(t, r, a, mode) for t, r, a in zip(df["task"], df["response"], df["answer"])]
    df = pd.concat([df.reset_index(drop=True), pd.DataFrame(scores)], axis=1)
    agg = {
        "n": ("id", "size"),
        "performance": ("performance", "mean"),
        "exact": ("exact", "mean"),
        "unparsed": ("parsed", lambda s: int(s.isna().sum())),
    }
    if "completion_tokens" in df:
        agg["tokens"] = ("completion_tokens", "mean")
    summary = df.groupby(["model", "task"], sort=True).agg(**agg).reset_index()
    return df, summary
