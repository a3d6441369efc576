"""Greedy decoding with a KV cache, and the per-task scores of the paper.

When the model writes <|num|>, the number head's value, read from the hidden state that predicted
<|num|>, is the number; it is fed back with the token, as in training. Prompts of one batch are
left-padded; padding is its own "sample" that real tokens never attend to.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from . import metrics
from .model import GPT
from .tokenizer import Tokenizer

ARITHMETIC = {"addition", "multiplication", "division", "exponentiation", "mean", "std"}


@torch.no_grad()
def generate(model: GPT, tok: Tokenizer, prompts: list[str], max_new_tokens: int = 48):
    """-> (answer texts, input token counts, output token counts) for each prompt."""
    model.eval()
    device = next(model.parameters()).device
    encoded = [tok.encode(f"<|bos|>{p}<|eoq|>") for p in prompts]
    B, L = len(prompts), max(len(ids) for ids, _ in encoded)
    ids = torch.full((B, L), tok.pad_id, dtype=torch.long)
    values = torch.zeros(B, L, dtype=torch.float64)
    doc = torch.full((B, L), -1, dtype=torch.long)
    pos = torch.zeros(B, L, dtype=torch.long)
    for b, (i, v) in enumerate(encoded):
        n = len(i)
        ids[b, L - n:], values[b, L - n:] = torch.from_numpy(i), torch.from_numpy(v)
        doc[b, L - n:], pos[b, L - n:] = 0, torch.arange(n)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    mask = ((doc[:, :, None] == doc[:, None, :]) & causal)[:, None]
    cache = [[] for _ in model.blocks]
    hidden = model.trunk(ids.to(device), values.to(device), pos.to(device), mask.to(device), cache)[:, -1]
    keys = doc == 0  # which cached keys a new token may attend to
    out_ids = [[] for _ in range(B)]
    out_values = [[] for _ in range(B)]
    done = torch.zeros(B, dtype=torch.bool)
    next_pos = pos[:, -1] + 1
    for _ in range(max_new_tokens):
        token = model.lm_head(hidden).argmax(-1).cpu()
        value = torch.zeros(B, dtype=torch.float64)
        if model.number.single_token:
            is_num = token == tok.num_id
            if is_num.any():
                head = model.number.head(hidden[is_num.to(device)])
                value[is_num] = model.number.predict(head).cpu()
        for b in range(B):
            if not done[b]:
                out_ids[b].append(int(token[b]))
                out_values[b].append(float(value[b]))
        done |= token == tok.eos_id
        if done.all():
            break
        keys = torch.cat([keys, torch.ones(B, 1, dtype=torch.bool)], 1)
        hidden = model.trunk(token[:, None].to(device), value[:, None].to(device), next_pos[:, None].to(device),
                             keys[:, None, None].to(device), cache)[:, -1]
        next_pos += 1
    texts = []
    for i, v in zip(out_ids, out_values):
        if i and i[-1] == tok.eos_id:
            i, v = i[:-1], v[:-1]
        texts.append(_answer_text(tok, i, v))
    return texts, [len(i) for i, _ in encoded], [len(i) for i in out_ids]


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


def _number(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        return math.nan


def score(task: str, predictions: list[str], answers: list[str]) -> pd.DataFrame:
    """Per sample: `score` (log-sMAPE for arithmetic, accuracy otherwise) and `exact`."""
    if task in ARITHMETIC:
        pred = np.array([_number(p) for p in predictions])
        target = np.array([float(a) for a in answers])
        return pd.DataFrame({"score": metrics.log_smape(pred, target),
                             "exact": metrics.exact_match(pred, target)})
    if task == "interval":
        exact = metrics.interval_accuracy(predictions, answers)
    elif task == "sorting":
        def as_list(text):
            items = [_number(x) for x in text.split(",")]
            return None if any(math.isnan(x) for x in items) else items
        exact = metrics.sorting_accuracy([as_list(p) for p in predictions],
                                         [as_list(a) for a in answers])
    elif task == "minmax":
        exact = np.array([_number(p) == float(a) for p, a in zip(predictions, answers)])
    else:
        raise ValueError(f"no score for task {task!r}")
    return pd.DataFrame({"score": exact.astype(float), "exact": exact})


def evaluate(model: GPT, tok: Tokenizer, frames: dict[str, pd.DataFrame], batch_size: int = 64) -> pd.DataFrame:
    """Greedy answers to every question of every task -> one row per sample."""
    rows = []
    for task, frame in frames.items():
        for start in range(0, len(frame), batch_size):
            chunk = frame.iloc[start:start + batch_size]
            texts, n_in, n_out = generate(model, tok, list(chunk["prompt"]))
            scored = score(task, texts, list(chunk["answer"]))
            rows.append(pd.DataFrame({"task": task, "prompt": chunk["prompt"].to_numpy(),
                                      "answer": chunk["answer"].to_numpy(), "prediction": texts,
                                      "score": scored["score"], "exact": scored["exact"],
                                      "input_tokens": n_in, "output_tokens": n_out}))
    return pd.concat(rows, ignore_index=True)


def summarize(samples: pd.DataFrame) -> pd.DataFrame:
    """Per task: mean score (log-sMAPE or accuracy), exact match, tokens per problem (Table 5)."""
    summary = samples.groupby("task").agg(score=("score", "mean"), exact=("exact", "mean"),
                                          input_tokens=("input_tokens", "mean"),
                                          output_tokens=("output_tokens", "mean"),
                                          n=("score", "size")).reset_index()
    return summary.assign(tokens=summary.input_tokens + summary.output_tokens)
