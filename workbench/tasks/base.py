"""What the workbench knows about a task, in one record (`Task`), and the pieces tasks share.

A task's family module (arithmetic.py, exponentiation.py, lists.py, text.py) defines how to
sample it, its exact label and difficulty, how its answers are scored, its model prompt markers
and its frontier system prompt, and registers it (`workbench.tasks.register`). A new task is one
new file in this folder (the package imports every module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

FAMILIES = ("comparison", "single_step", "multi_step", "text")  # section 2's groups, and prose
ANSWERS = ("number", "list", "letter", "text")
METRICS = ("log_smape", "accuracy", "perplexity")


@dataclass(frozen=True)
class Task:
    """One task. `draw(rng, m, regime)` gives m candidate questions (dict of arrays with "valid"
    and "key"); `build(candidates, limit)` labels the first `limit` usable ones as a DataFrame with
    prompt, text_prompt, answer, difficulty (base 2), difficulty_sd (base 10); `max_difficulty(base)`
    bounds those; `score(predictions, answers)` gives per-sample `score` and `exact`.
    `difficulty_rule(d, base, regime)` maps those raw heuristics (and their bound) to the levels the
    regime asks for (caps, damping); None keeps them."""

    name: str
    family: str
    label: str  # the column name in the paper's tables ("Add"), or the task's own short name
    answer: str  # what an answer is: a number, a list of numbers, an interval letter, prose
    metric: str  # the score of Tables 1, 4 and 7: log-sMAPE for arithmetic, accuracy otherwise
    draw: Callable
    build: Callable
    max_difficulty: Callable[[int], int]
    score: Callable[[list[str], list[str]], pd.DataFrame] | None = None  # None: prose, perplexity only
    markers: tuple[str, ...] = ()  # special tokens of the model prompt, e.g. ("<|min|>", "<|max|>")
    system_prompt: str = ""  # appendix A.1: what a frontier LLM is told
    curriculum: bool = False  # A.3: trained with the difficulty curriculum of C.3
    released_name: str | None = None  # file stem of the authors' released test set, e.g. "MinMax"
    difficulty_rule: Callable | None = None  # (difficulties, base, regime) -> difficulties

    def __post_init__(self):
        for field, value, allowed in (
            ("family", self.family, FAMILIES),
            ("answer", self.answer, ANSWERS),
            ("metric", self.metric, METRICS),
        ):
            if value not in allowed:
                raise ValueError(f"task {self.name!r}: {field} must be one of {allowed}, got {value!r}")


# -- appendix A.1's system prompts, from their shared pieces --------------------------------
# The PDF extraction dropped the braces of the JSON template ('"answer": <numeric_answer>'); they
# are restored so that the requested format is valid JSON.
HEADER_LIST = "You are an expert in numeracy. For each problem, output only valid JSON in this format:"
HEADER_ARITHMETIC = "You are an expert in numeracy. Return exactly one valid JSON object in this format:"
NO_TOOLS = (
    "Do not explain, show steps, or add any extra text. Do not use code blocks to output the answer.\n"
    "DO NOT CALL ANY external APIs or use ANY external tool to solve the problem. "
    "DO NOT USE a calculator tool. DO NOT USE python. DO NOT USE Wolfram Alpha."
)
DECIMAL = (
    "If the answer is not an integer, give it as a decimal (not a fraction), rounded to at most 15 significant digits."
)
NUMERIC_ANSWER = '{"answer": <numeric_answer>}'
ARITHMETIC_PROMPT = "\n".join([HEADER_ARITHMETIC, NUMERIC_ANSWER, NO_TOOLS, DECIMAL])


def parse_float(text: str) -> float:
    """A model's answer text as a float64; NaN when it is not one number."""
    try:
        return float(str(text).strip())
    except ValueError:
        return float("nan")


def accuracy(correct) -> pd.DataFrame:
    """Per-sample scores of a right-or-wrong task: score is 1.0 or 0.0 and exact the same."""
    correct = np.asarray(correct, dtype=bool)
    return pd.DataFrame({"score": correct.astype(float), "exact": correct})
