"""Perplexity of held-out text, as Table 4 reports it ("Fineweb" and "Fineweb text only"), and the
text task's score for the task balancer.

    from workbench.measures.perplexity import perplexity, text_score
    texts = tasks.generate("text", 500, seed=0, split="test")["answer"]
    result = perplexity(model, tok, texts)   # {"ppl_all": ..., "ppl_text": ..., ...}
    text_score(result["ppl_all"])            # min(1, exp((40 - ppl) / 100))

Our definitions, both pooled over every target token of every sample (no dependence on batching):
  ppl_all  = exp(mean cross-entropy of next-token prediction over all target tokens)
  ppl_text = the same over the non-numeric target tokens (`numeric_targets`)
The number head's loss is not part of either. Each sample is "<|bos|>text<|eos|>"
(`Tokenizer.text_sample`): every token after <|bos|> is a target. A sample longer than the context
is cut into windows (`windows`), so every target counts once; samples never attend to each other.

The authors (eval.py of KreitnerL/BitTokens) pool "text only" the same way, but their "Fineweb"
row is the mean over test batches of exp(batch mean CE) (48 windows of 1024 tokens each, 208
batches). That is `ppl_all_batch_mean` here, over our batches of `rows` rows; it depends on the
batching (with batches of equal token counts it is >= ppl_all, by Jensen), which is why ours pools.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..model.gpt import GPT
from ..tokenizer import Tokenizer


def numeric_targets(tok: Tokenizer, ids) -> np.ndarray:
    """True at the numeric tokens of a token sequence: <|num|> (single-token encodings), the number
    pieces of a digit encoding (ids in [len(special tokens), offset)), and a text token "-" right
    before one of those. As in the authors' rule, only the token "-" itself counts, not a BPE token
    that merged it with a space (" -")."""
    ids = np.asarray(ids, dtype=np.int64)
    numeric = (ids == tok.num_id) | ((ids >= len(tok.special_tokens)) & (ids < tok.offset))
    minus = tok.bpe.token_to_id("-")
    if minus is not None and len(ids) > 1:
        sign = (ids[:-1] == minus + tok.offset) & numeric[1:]
        numeric[:-1] |= sign
    return numeric


def windows(samples, context: int):
    """Each sample (ids, values, loss_mask, numeric) cut into windows of at most context + 1
    tokens that overlap by one token: every target is predicted exactly once, from the tokens
    before it in its window (positions restart at 0, as for every packed sample)."""
    for sample in samples:
        for start in range(0, max(len(sample[0]) - 1, 1), context):
            yield tuple(part[start : start + context + 1] for part in sample)


def pack_rows(pieces, width: int) -> list[list]:
    """Windows in order, as rows of at most `width` tokens: a window that does not fit starts the
    next row (nothing is cut; the rest of a row will be padding)."""
    packed, used = [], width
    for piece in pieces:
        if used + len(piece[0]) > width:
            packed.append([])
            used = 0
        packed[-1].append(piece)
        used += len(piece[0])
    return packed


def tensors(group, width: int, pad_id: int) -> dict[str, torch.Tensor]:
    """Rows of windows as model inputs, like `data.pack`'s: each window has its own doc id, so
    attention never crosses between windows. `target` marks the predicted tokens, `numeric` those
    of them that are numeric."""
    shape = (len(group), width)
    ids, values = np.full(shape, pad_id, dtype=np.int64), np.zeros(shape)
    mask, numeric = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    doc, pos = np.full(shape, -1, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    for r, row in enumerate(group):
        col = 0
        for k, (i, v, m, n) in enumerate(row):
            sl = slice(col, col + len(i))
            ids[r, sl], values[r, sl], mask[r, sl], numeric[r, sl] = i, v, m, n
            doc[r, sl], pos[r, sl] = k, np.arange(len(i))
            col += len(i)
    target = mask[:, 1:] & (doc[:, 1:] == doc[:, :-1])
    t = torch.from_numpy
    return {
        "ids": t(ids[:, :-1]),
        "values": t(values[:, :-1]),
        "positions": t(pos[:, :-1]),
        "doc_ids": t(doc[:, :-1]),
        "targets": t(ids[:, 1:]),
        "target": t(target),
        "numeric": t(numeric[:, 1:] & target),
    }


@torch.no_grad()
def perplexity(
    model: GPT, tok: Tokenizer, texts, rows: int = 8, context: int | None = None, progress: bool = True
) -> dict:
    """Perplexity of `model` on the held-out `texts` (strings): ppl_all and ppl_text (pooled, see
    the module docstring), the authors' ppl_all_batch_mean, the mean cross-entropies (nats) and
    the token counts. `context` (default: the model's block size) bounds a window; `rows` rows of
    context tokens go through the model at once (logits: rows x context x vocabulary floats)."""
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("perplexity needs a non-empty list of text strings")
    context = context or model.cfg.block_size
    if rows < 1 or context < 1:
        raise ValueError(f"rows and context must be >= 1, got {rows} and {context}")
    samples = [(*s, numeric_targets(tok, s[0])) for s in map(tok.text_sample, texts)]
    packed = pack_rows(windows(samples, context), context + 1)
    device, was_training = model.lm_head.weight.device, model.training
    model.eval()
    sums, batch_ppl = np.zeros(2), []
    counts = np.zeros(2, dtype=np.int64)
    try:
        for start in tqdm(range(0, len(packed), rows), desc="perplexity", disable=not progress, leave=False):
            batch = tensors(packed[start : start + rows], context + 1, tok.pad_id)
            logits = model.logits(*(batch[k].to(device) for k in ("ids", "values", "positions", "doc_ids")))
            target = batch["target"].to(device)
            ce = F.cross_entropy(logits[target].double(), batch["targets"].to(device)[target], reduction="none")
            text = ~batch["numeric"].to(device)[target]
            sums += [ce.sum().item(), ce[text].sum().item()]
            counts += [len(ce), int(text.sum())]
            batch_ppl.append(math.exp(ce.mean().item()))
    finally:
        model.train(was_training)
    ce_all, ce_text = float(sums[0] / counts[0]), float(sums[1] / counts[1]) if counts[1] else math.nan
    return {
        "ppl_all": math.exp(ce_all),
        "ppl_text": math.exp(ce_text),
        "ppl_all_batch_mean": float(np.mean(batch_ppl)),
        "ce_all": ce_all,
        "ce_text": ce_text,
        "tokens": int(counts[0]),
        "text_tokens": int(counts[1]),
        "numeric_tokens": int(counts[0] - counts[1]),
        "samples": len(texts),
    }


def text_score(ppl: float, best: float = 40.0, scale: float = 100.0) -> float:
    """The text task's score in [0, 1] for the task balancer (eq. 16) and the checkpoint mean:
    min(1, exp((best - ppl) / scale)), 1 at perplexity <= best. The authors' `scaled_ppl` uses
    best 40 and scale 100 in their multi-task runs and best 20 for text alone
    (`scaled_ppl_hard`); they score each validation batch's perplexity and average the scores."""
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    if math.isnan(ppl):
        return math.nan
    return min(1.0, math.exp((best - ppl) / scale))
