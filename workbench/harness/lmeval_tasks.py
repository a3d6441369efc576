"""The nine tasks as an lm-evaluation-harness task pack: one YAML per task and the group `numeracy`.

    python -m workbench.harness lm-eval --out DIR          # writes DIR/numeracy.yaml, DIR/numeracy_<task>.yaml
    lm_eval --model hf --model_args pretrained=PATH --tasks numeracy --include_path DIR --limit 20

Each task is `generate_until` with the frontier benchmark's prompt (appendix A.1's system prompt as
the task's `description`, the question's text as the user turn: a system message under
`--apply_chat_template`, plain text before the question otherwise). Greedy, it stops at a blank
line (and at the model's end token, which lm-eval adds), after at most `max_gen_toks` tokens: the
longest label of the task's questions in characters plus 64 (each token writes at least one
character), so a JSON answer always fits; `--gen_kwargs max_gen_toks=N` allows longer reasoning.

The questions are not copied into DIR: `dataset` draws them when lm-eval loads the task, from the
workbench's seeded generator (the same draw as the frontier benchmark's export, so the same `n`
and `seed` give the same questions) or from the authors' released sets when the pack was written
with their folder. `process_results` scores each response with the workbench's scorer
(`workbench.harness.scoring`: what it takes from a response, and what each metric means); the
group's numbers are the unweighted means of the tasks'.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.runs.atomic import write_folder

from . import questions as q
from .scoring import HIGHER_IS_BETTER, METRICS, metrics

GROUP = "numeracy"
VERSION = 1.0
STOP = ["\n\n"]
HEADER = "# written by `python -m workbench.harness lm-eval`; rewrite it with that command, not by hand\n"


def task_name(task: str) -> str:
    return f"{GROUP}_{task}"


# -- what the YAML's !function entries call, while lm-eval runs --------------------------------


def dataset(numeracy: dict, **_metadata):
    """lm-eval's `custom_dataset`: the task's questions as a DatasetDict with one split, "test".
    (lm-eval passes the task's metadata and --model_args too; only `numeracy` is read.)"""
    import datasets

    records = q.questions(
        numeracy["task"],
        numeracy["n"],
        numeracy["seed"],
        numeracy.get("official"),
        numeracy.get("decades"),
        numeracy.get("max_digits"),
    )
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(records)})


def process_results(doc: dict, results: list) -> dict[str, float]:
    """lm-eval's `process_results` of a generate_until task: the response scored against the label."""
    return metrics(doc["task"], results[0] if results else "", doc["answer"])


# -- the writer ----------------------------------------------------------------------------------


def _yaml_string(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(text, ensure_ascii=False)


def _check_template(text: str, task: str) -> str:
    """lm-eval renders `description` with Jinja: a prompt with Jinja's delimiters would change."""
    if any(mark in text for mark in ("{{", "{%", "{#")):
        raise ValueError(f"the system prompt of {task!r} holds a Jinja delimiter and cannot be an lm-eval description")
    return text


def task_yaml(task, n, seed, official_dir=None, decades=None, max_digits=None) -> str:
    """The YAML of one task (its questions drawn once here, to size `max_gen_toks` and check them)."""
    records = q.questions(task, n, seed, official_dir, decades, max_digits)
    source = {
        "task": task,
        "n": n,
        "seed": seed,
        "official": None if official_dir is None else str(Path(official_dir).resolve()),
        "decades": None if decades is None else list(decades),
        "max_digits": max_digits,
    }
    lines = [
        HEADER.rstrip("\n"),
        f"task: {task_name(task)}",
        "custom_dataset: !function workbench.harness.lmeval_tasks.dataset",
        "dataset_kwargs:",
        f"  numeracy: {json.dumps(source)}",
        "test_split: test",
        "output_type: generate_until",
        f"description: {_yaml_string(_check_template(records[0]['system_prompt'], task) + chr(10) + chr(10))}",
        'doc_to_text: "{{text_prompt}}"',
        'doc_to_target: "{{answer}}"',
        "generation_kwargs:",
        f"  until: {json.dumps(STOP)}",
        "  do_sample: false",
        "  temperature: 0.0",
        f"  max_gen_toks: {q.answer_tokens(records)}",
        "num_fewshot: 0",
        "process_results: !function workbench.harness.lmeval_tasks.process_results",
        "metric_list:",
    ]
    for metric in METRICS:
        lines += [
            f"  - metric: {metric}",
            "    aggregation: mean",
            f"    higher_is_better: {str(HIGHER_IS_BETTER[metric]).lower()}",
        ]
    lines += ["metadata:", f"  version: {VERSION}"]
    return "\n".join(lines) + "\n"


def group_yaml(task_list) -> str:
    lines = [HEADER.rstrip("\n"), f"group: {GROUP}", "task:"]
    lines += [f"  - {task_name(t)}" for t in task_list]
    lines += ["aggregate_metric_list:"]
    for metric in METRICS:
        lines += [f"  - metric: {metric}", "    aggregation: mean", "    weight_by_size: false"]
    lines += ["metadata:", f"  version: {VERSION}"]
    return "\n".join(lines) + "\n"


def is_pack(folder: Path) -> bool:
    """A folder this writer made (so that rewriting it replaces nothing else)."""
    group = folder / f"{GROUP}.yaml"
    return group.is_file() and group.read_text(errors="replace").startswith(HEADER)


def write(out, task_list=None, n=q.RELEASED, seed=0, official_dir=None, decades=None, max_digits=None) -> Path:
    """Write the pack into `out` (a new folder, or one this writer made: replaced whole, atomically)."""
    out = Path(out)
    task_list = list(task_list or q.names())
    for task in task_list:
        q.check_task(task)
    if len(set(task_list)) != len(task_list):
        raise ValueError(f"a task is named twice: {task_list}")
    if out.exists() and not (out.is_dir() and (is_pack(out) or not any(out.iterdir()))):
        raise ValueError(f"{out} exists and is not a numeracy task pack: give a new or empty folder")
    texts = {f"{task_name(t)}.yaml": task_yaml(t, n, seed, official_dir, decades, max_digits) for t in task_list}
    texts[f"{GROUP}.yaml"] = group_yaml(task_list)

    def fill(tmp: Path) -> None:
        for name, text in texts.items():
            (tmp / name).write_text(text, encoding="utf-8")

    return write_folder(out, fill)
