"""The frontier benchmark (appendix A.4): the 500-per-task questions with each task's system prompt
(appendix A.1, defined with the task in `workbench.tasks`), exported for any chat model.
"""

import json
from pathlib import Path

import pandas as pd

from workbench import tasks
from workbench.runs.atomic import write_atomic


def system_prompt(task):
    """The appendix A.1 system prompt of `task`."""
    prompt = tasks.get(task).system_prompt
    if not prompt:
        raise ValueError(f"task {task!r} has no frontier system prompt")
    return prompt


def build_benchmark(n_per_task=500, seed=0, task_list=None):
    """n_per_task test-split questions per task, drawn by our generator with the test split's
    difficulty distribution; one row per question with a stable id."""
    frames = []
    for task in task_list or tasks.numeric():
        df = tasks.generate(task, n_per_task, seed=seed, split="test")
        frames.append(
            pd.DataFrame(
                {
                    "id": [f"{task}-{i:05d}" for i in range(len(df))],
                    "task": task,
                    "text_prompt": df["text_prompt"].astype(str),
                    "answer": df["answer"].astype(str),
                    "difficulty": df["difficulty"].astype(int),
                    "difficulty_sd": df["difficulty_sd"].astype(int),
                }
            )
        )
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
