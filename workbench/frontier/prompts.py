"""System prompts of appendix A.1 and export of the 500-per-task frontier benchmark (appendix A.4).

The prompt texts are the paper's; the PDF extraction dropped the braces of the JSON template
('"answer": <numeric_answer>'), which we restore so that the requested format is valid JSON.
"""
import json
from pathlib import Path

import pandas as pd

from workbench import tasks
from workbench.atomic import write_atomic

_HEADER_LIST = "You are an expert in numeracy. For each problem, output only valid JSON in this format:"
_HEADER_ARITHMETIC = "You are an expert in numeracy. Return exactly one valid JSON object in this format:"
_NO_TOOLS = ("Do not explain, show steps, or add any extra text. Do not use code blocks to output the answer.\n"
             "DO NOT CALL ANY external APIs or use ANY external tool to solve the problem. "
             "DO NOT USE a calculator tool. DO NOT USE python. DO NOT USE Wolfram Alpha.")
_DECIMAL = ("If the answer is not an integer, give it as a decimal (not a fraction), "
            "rounded to at most 15 significant digits.")

SYSTEM_PROMPTS = {
    "minmax": "\n".join([_HEADER_LIST, '{"answer": <numeric_answer>}', _NO_TOOLS,
                         "The answer must be a single number, exactly as it appears in the list."]),
    "interval": "\n".join([_HEADER_LIST, '{"answer": <interval_multiple_choice_answer>}', _NO_TOOLS,
                           "The answer must be one of the following: A, B, C, D, E, F."]),
    "sorting": "\n".join([_HEADER_LIST, '{"answer": <sorted_list>}', _NO_TOOLS,
                          "The answer must be a list of numbers."]),
    "single_step": "\n".join([_HEADER_ARITHMETIC, '{"answer": <numeric_answer>}', _NO_TOOLS, _DECIMAL]),
    "multi_step": "\n".join([_HEADER_ARITHMETIC, '{"answer": <numeric_answer>}', _NO_TOOLS, _DECIMAL]),
}

FAMILY = {"minmax": "minmax", "interval": "interval", "sorting": "sorting",
          "addition": "single_step", "multiplication": "single_step", "division": "single_step",
          "exponentiation": "multi_step", "mean": "multi_step", "std": "multi_step"}


def system_prompt(task):
    """The appendix A.1 system prompt of the family `task` belongs to."""
    if task not in FAMILY:
        raise ValueError(f"unknown task {task!r}; expected one of {list(FAMILY)}")
    return SYSTEM_PROMPTS[FAMILY[task]]


def build_benchmark(n_per_task=500, seed=0, task_list=None):
    """n_per_task test-split questions per task, drawn by our generator with the test split's
    difficulty distribution; one row per question with a stable id."""
    frames = []
    for task in task_list or tasks.TASKS:
        df = tasks.generate(task, n_per_task, seed=seed, split="test")
        frames.append(pd.DataFrame({
            "id": [f"{task}-{i:05d}" for i in range(len(df))], "task": task,
            "text_prompt": df["text_prompt"].astype(str), "answer": df["answer"].astype(str),
            "difficulty": df["difficulty"].astype(int), "difficulty_sd": df["difficulty_sd"].astype(int)}))
    return pd.concat(frames, ignore_index=True)


def export_benchmark(path, n_per_task=500, seed=0, task_list=None):
    """Write the benchmark as `path`.jsonl and `path`.csv (atomically); returns the DataFrame."""
    df = build_benchmark(n_per_task, seed, task_list)
    path = Path(path)
    lines = (json.dumps(r, ensure_ascii=False) for r in df.to_dict(orient="records"))
    text = "".join(line + "\n" for line in lines)
    write_atomic(path.with_suffix(".jsonl"), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    write_atomic(path.with_suffix(".csv"), lambda tmp: df.to_csv(tmp, index=False))
    return df


def load_benchmark(path):
    """Read a benchmark JSONL written by export_benchmark (answers stay strings)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"benchmark file not found: {path}")
    with open(path, encoding="utf-8") as f:
        df = pd.DataFrame([json.loads(line) for line in f if line.strip()])
    missing = {"id", "task", "text_prompt", "answer"} - set(df.columns)
    if missing:
        raise ValueError(f"{path} lacks columns {sorted(missing)}")
    return df
