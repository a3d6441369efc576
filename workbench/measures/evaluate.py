"""Our models answering the tasks: greedy answers to the questions of each task, scored by the
task's own rule (log-sMAPE and exact match for arithmetic, accuracy for the list tasks)."""

from __future__ import annotations

import math

import pandas as pd

from .. import tasks
from ..model.gpt import GPT
from ..tokenizer import Tokenizer

MAX_ANSWER_TOKENS = 48  # longer than any answer of the nine tasks in any encoding


def answer(model: GPT, tok: Tokenizer, prompts: list[str], max_new_tokens: int = MAX_ANSWER_TOKENS):
    """-> (answer texts, input token counts, output token counts) for each prompt; the output count
    includes the closing <|eos|> when the model wrote one."""
    encoded = [tok.encode(f"<|bos|>{p}<|eoq|>") for p in prompts]
    generated = model.generate(encoded, max_new_tokens, tok.eos_id, tok.pad_id)
    texts = []
    for ids, values in generated:
        if ids and ids[-1] == tok.eos_id:
            ids, values = ids[:-1], values[:-1]
        texts.append(_answer_text(tok, ids, values))
    return texts, [len(i) for i, _ in encoded], [len(i) for i, _ in generated]


def _answer_text(tok: Tokenizer, ids: list[int], values: list[float]) -> str:
    """tok.decode, except that a number the head wrote as NaN or ±inf (BitTokens with all exponent
    bits set), which has no decimal text, is written as Python writes it ("nan", "inf"): it scores
    0 instead of ending the run."""
    parts, start = [], 0
    for k, v in enumerate(values):
        if not math.isfinite(v):  # only <|num|> carries a value; every other token has 0
            parts += [tok.decode(ids[start:k], values[start:k]), repr(v)]
            start = k + 1
    return "".join(parts) + tok.decode(ids[start:], values[start:])


def score(task: str, predictions: list[str], answers: list[str]) -> pd.DataFrame:
    """Per sample: `score` (log-sMAPE for arithmetic, accuracy otherwise) and `exact`."""
    rule = tasks.get(task).score
    if rule is None:
        raise ValueError(f"task {task!r} has no per-answer score (it is measured by perplexity)")
    return rule(predictions, answers)


def answer_cap(tok: Tokenizer, answers) -> int:
    """The authors' generation cap: the longest reference answer of the batch, in tokens, plus
    <|eos|>."""
    return max(len(tok.encode(str(a))[0]) for a in answers) + 1


def evaluate(
    model: GPT,
    tok: Tokenizer,
    frames: dict[str, pd.DataFrame],
    max_new_tokens: int | None = None,
    batch_size: int = 64,
    progress: str | None = None,
) -> pd.DataFrame:
    """Greedy answers to every question of every task -> one row per sample. `max_new_tokens`:
    a fixed generation cap, or None for `answer_cap` of each batch. `progress`: the description of
    a bar over the questions (a pretrained model answers a batch in tens of seconds on a CPU)."""
    rows = []
    bar = None
    if progress is not None:
        from tqdm.auto import tqdm

        bar = tqdm(total=sum(len(f) for f in frames.values()), desc=progress, unit="question", leave=False)
    for task, frame in frames.items():
        for start in range(0, len(frame), batch_size):
            chunk = frame.iloc[start : start + batch_size]
            cap = max_new_tokens or answer_cap(tok, chunk["answer"])
            texts, n_in, n_out = answer(model, tok, list(chunk["prompt"]), cap)
            if bar is not None:
                bar.update(len(chunk))
            scored = score(task, texts, list(chunk["answer"]))
            rows.append(
                pd.DataFrame(
                    {
                        "task": task,
                        "prompt": chunk["prompt"].to_numpy(),
                        "answer": chunk["answer"].to_numpy(),
                        "prediction": texts,
                        "score": scored["score"].to_numpy(),
                        "exact": scored["exact"].to_numpy(),
                        "input_tokens": n_in,
                        "output_tokens": n_out,
                    }
                )
            )
    if bar is not None:
        bar.close()
    return pd.concat(rows, ignore_index=True)


def summarize(samples: pd.DataFrame) -> pd.DataFrame:
    """Per task: mean score (log-sMAPE or accuracy), exact match, tokens per problem (Table 5)."""
    summary = (
        samples.groupby("task")
        .agg(
            score=("score", "mean"),
            exact=("exact", "mean"),
            input_tokens=("input_tokens", "mean"),
            output_tokens=("output_tokens", "mean"),
            n=("score", "size"),
        )
        .reset_index()
    )
    return summary.assign(tokens=summary.input_tokens + summary.output_tokens)
