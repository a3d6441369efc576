"""The questions the harnesses ask: the nine tasks' test questions from the workbench's seeded
generator (the frontier benchmark's draw: `tasks.generate(task, n, seed, split="test")`), or the
authors' released 500-question sets when their folder is given.

    questions("multiplication", 100, seed=0)                    # generated; same arguments, same questions
    questions("sorting", 50, official="../shared/data/official_bittokens")   # the released set's first 50

Each question is one record: id, task, prompt (the model prompt with the task's markers, what the
workbench's own models and a retrofitted NumberLM are trained on), text_prompt (the frontier
question), system_prompt (appendix A.1's, what a chat model is told), answer (the exact label, a
string) and difficulty, difficulty_sd. `decades` and `max_digits` narrow the generated numbers as
`tasks.generate` does (for a model trained on small numbers); the released sets have the paper's.
"""

from __future__ import annotations

from pathlib import Path

from workbench import tasks
from workbench.frontier import official
from workbench.frontier.prompts import system_prompt

COLUMNS = ("id", "task", "prompt", "text_prompt", "system_prompt", "answer", "difficulty", "difficulty_sd")
RELEASED = 500  # questions per task in the authors' sets


def names() -> list[str]:
    """The nine tasks, in the paper's order (the workbench's registry: every task with an answer)."""
    return tasks.numeric()


def check_task(task) -> str:
    if task not in names():
        from workbench.cli import unknown

        raise ValueError(unknown("task", task, names()))
    return task


def check_source(n, seed, official_dir=None, decades=None, max_digits=None) -> None:
    """ValueError in one line for arguments no question set has."""
    for name, value, low in (("n", n, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if official_dir is not None:
        if decades is not None or max_digits is not None:
            raise ValueError(
                "the released sets have the paper's numbers: give decades/max_digits or official, not both"
            )
        if n > RELEASED:
            raise ValueError(f"the released sets hold {RELEASED} questions per task, not {n}")
        if not Path(official_dir).is_dir():
            raise ValueError(f"official: {official_dir} is not a folder (the authors' *_test_500_shuffle.csv files)")
    if decades is not None:
        if len(decades) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) for d in decades):
            raise ValueError(f"decades must be two integers (lo, hi), got {decades!r}")
        if decades[0] > decades[1]:
            raise ValueError(f"decades must be (lo, hi) with lo <= hi, got {tuple(decades)}")


def questions(task, n=RELEASED, seed=0, official_dir=None, decades=None, max_digits=None) -> list[dict]:
    """The first `n` test questions of `task` as records (see the module docstring)."""
    check_task(task)
    check_source(n, seed, official_dir, decades, max_digits)
    if official_dir is not None:
        frame = official.load_test_set(task, official_dir).iloc[:n]
        source = "official"
    else:
        frame = tasks.generate(
            task, n, seed=seed, split="test", decades=None if decades is None else tuple(decades), max_digits=max_digits
        )
        source = "generated"
    prompt = system_prompt(task)
    return [
        {
            "id": f"{task}-{i:05d}" if source == "generated" else f"official-{task}-{i:05d}",
            "task": task,
            "prompt": str(row.prompt),
            "text_prompt": str(row.text_prompt),
            "system_prompt": prompt,
            "answer": str(row.answer),
            "difficulty": int(row.difficulty),
            "difficulty_sd": int(row.difficulty_sd),
        }
        for i, row in enumerate(frame.itertuples(index=False))
    ]


def answer_tokens(records) -> int:
    """A generation cap that always leaves room for the answer: each token writes at least one
    character, so the longest label in characters, plus 64 for the JSON around it and a few words."""
    return 64 + max((len(r["answer"]) for r in records), default=0)
