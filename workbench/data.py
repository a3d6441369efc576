"""Training batches: task pools, tokenized once, drawn by task ratio and difficulty, packed.

Samples are concatenated into rows of context + 1 tokens. Each token keeps the index of its
sample (doc id) and its position inside it, so attention never crosses a sample boundary and
RoPE positions restart at every sample. A target is only learned inside its own sample.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from . import tasks
from .tasks import Regime, generate
from .tokenizer import Tokenizer


@dataclass
class Pool:
    """Tokenized samples of one task with their difficulties (base 2 and base 10)."""
    task: str
    frame: object  # the generated DataFrame
    samples: list  # (ids, values, loss_mask) per row
    difficulty: np.ndarray
    difficulty_sd: np.ndarray

    @cached_property
    def mean_length(self) -> float:
        """Mean tokens per sample (of the first 1000)."""
        return float(np.mean([len(s[0]) for s in self.samples[:1000]]))


def make_pool(task: str, n: int, tokenizer: Tokenizer, seed: int, split: str, regime: Regime | None = None) -> Pool:
    """n samples of `task` from `split`, generated and tokenized once."""
    frame = generate(task, n, seed=seed, split=split, regime=regime)
    if tasks.get(task).answer == "text":  # prose: every token after <|bos|> is learned
        samples = [tokenizer.text_sample(t) for t in frame["answer"]]
    else:
        samples = [tokenizer.sample(p, a) for p, a in zip(frame["prompt"], frame["answer"])]
    return Pool(task, frame, samples, frame["difficulty"].to_numpy(), frame["difficulty_sd"].to_numpy())


class NotEnoughSamples(ValueError):
    """The samples given to `pack` are too few (or too short) to fill the rows."""


def pack(samples, batch_size: int, context: int, pad_id: int, num_id: int = 4) -> dict[str, torch.Tensor]:
    """Concatenate samples (ids, values, loss_mask[, task index]) into [B, context] inputs/targets;
    the last one in a row is cut. `task_ids` holds each target's task index (0 without one).

    Also returns the loss denominators of the whole batch (`ce_count`, `number_count`), so that
    data-parallel ranks, each with a slice of the rows, average to the loss of the whole batch."""
    width = context + 1
    used, kept, filled = [], [], 0  # the samples that go in, and the tokens each puts into the rows
    for sample in samples:
        if filled == batch_size * width:
            break
        n = min(len(sample[0]), width - filled % width)
        used.append(sample)
        kept.append(n)
        filled += n
    if filled < batch_size * width:
        raise NotEnoughSamples(f"not enough samples to fill {batch_size} rows of {context} tokens")
    kept = np.asarray(kept)
    starts = np.cumsum(kept) - kept
    # every sample's first n tokens, back to back, fill the rows exactly
    ids, values, mask = (np.concatenate([s[field][:n] for s, n in zip(used, kept)]).reshape(batch_size, width)
                         for field in range(3))
    doc = np.repeat(np.arange(len(kept)), kept).reshape(batch_size, width)
    pos = (np.arange(batch_size * width) - np.repeat(starts, kept)).reshape(batch_size, width)
    task = np.repeat([s[3] if len(s) > 3 else 0 for s in used], kept).reshape(batch_size, width)
    ids, values, mask = ids.astype(np.int64, copy=False), values.astype(np.float64, copy=False), mask.astype(bool, copy=False)
    loss_mask = mask[:, 1:] & (doc[:, 1:] == doc[:, :-1])
    t = torch.from_numpy
    return {"ids": t(ids[:, :-1]), "values": t(values[:, :-1]), "positions": t(pos[:, :-1]),
            "doc_ids": t(doc[:, :-1]), "targets": t(ids[:, 1:]), "target_values": t(values[:, 1:]),
            "loss_mask": t(loss_mask), "task_ids": t(task[:, 1:]), "ce_count": torch.tensor(max(1, int(loss_mask.sum()))),
            "number_count": torch.tensor(max(1, int((loss_mask & (ids[:, 1:] == num_id)).sum())))}


def shard(batch: dict[str, torch.Tensor], rank: int, world: int, device) -> dict[str, torch.Tensor]:
    """Rows of this rank (the batch's counts stay global), moved to `device`."""
    rows = batch["ids"].shape[0]
    if rows % world:
        raise ValueError(f"{rows} rows do not split evenly over {world} processes")
    per = rows // world
    return {k: (v if v.ndim == 0 else v[rank * per:(rank + 1) * per]).to(device) for k, v in batch.items()}


def draw(pools: dict[str, Pool], counts: dict[str, int], rng: np.random.Generator,
         pick=None) -> list:
    """counts[task] samples of each task, shuffled together, as (ids, values, loss_mask, task
    index), the index being the task's position in `pools`. `pick(task, n, rng)` gives the samples
    (the curriculum, or another pool of the task); uniform from pools[task] without it."""
    index = {task: i for i, task in enumerate(pools)}
    chosen = []
    for task, n in counts.items():
        if pick is not None:
            samples = pick(task, n, rng)
        else:
            samples = [pools[task].samples[i] for i in rng.integers(0, len(pools[task].samples), n)]
        chosen += [(*sample, index[task]) for sample in samples]
    order = rng.permutation(len(chosen))
    return [chosen[i] for i in order]


def next_batch(pools: dict[str, Pool], counts: dict[str, int], rng: np.random.Generator, pick,
               rows: int, context: int, pad_id: int, num_id: int) -> dict[str, torch.Tensor]:
    """pack(draw(...)). When the draw falls short (the balancer favoured tasks with long samples),
    draw the same counts again and append, until the rows are full."""
    samples = draw(pools, counts, rng, pick)
    while True:
        try:
            return pack(samples, rows, context, pad_id, num_id)
        except NotEnoughSamples:
            samples += draw(pools, counts, rng, pick)


def samples_per_step(pools: dict[str, Pool], rows: int, context: int) -> int:
    """How many samples to draw for `rows` packed rows of context + 1 tokens: 30 % more than the
    pools' mean sample length asks for (next_batch draws again if they still fall short)."""
    mean_length = float(np.mean([p.mean_length for p in pools.values()]))
    return math.ceil(rows * (context + 1) / mean_length * 1.3) + 8
