"""Training batches: task pools (each question tokenized once, when first drawn), drawn by task
ratio and difficulty, packed.

Samples are concatenated into rows of context + 1 tokens. Each token keeps the index of its
sample (doc id) and its position inside it, so attention never crosses a sample boundary and
RoPE positions restart at every sample. A target is only learned inside its own sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from .. import tasks
from ..tasks import Regime, generate
from ..tokenizer import Tokenizer


@dataclass
class Pool:
    """Tokenized samples of one task with their difficulties (base 2 and base 10)."""

    task: str
    frame: object  # the generated DataFrame
    samples: Sequence  # (ids, values, loss_mask) per row: a list, LazySamples or FlatSamples
    difficulty: np.ndarray
    difficulty_sd: np.ndarray
    files: object = None  # the folder the samples are mapped from (distributed.shared_pools), if any

    def take(self, indices) -> list:
        """The samples at `indices`; from a pool mapped from files (`distributed.FlatSamples`)
        without a Python call a sample: a step draws tens of thousands."""
        take = getattr(self.samples, "take", None)
        return take(indices) if take is not None else [self.samples[i] for i in indices]

    @cached_property
    def mean_length(self) -> float:
        """Mean tokens per sample (of the first 1000)."""
        return float(np.mean([len(s[0]) for s in self.samples[:1000]]))


_shared_pools = None  # inside `pools_from(source)`: where training pools come from (distributed.shared_pools)


@contextmanager
def pools_from(source):
    """Within the block, `make_pool` of the train split returns `source(task, n, tokenizer, seed,
    split, regime)`: under torchrun, the pool one rank built, shared by every rank."""
    global _shared_pools
    _shared_pools = source
    try:
        yield
    finally:
        _shared_pools = None


def make_pool(task: str, n: int, tokenizer: Tokenizer, seed: int, split: str, regime: Regime | None = None) -> Pool:
    """n samples of `task` from `split`, generated once, each tokenized when first drawn."""
    if _shared_pools is not None and split == "train":
        return _shared_pools(task, n, tokenizer, seed, split, regime)
    return build_pool(task, n, tokenizer, seed, split, regime)


def build_pool(task: str, n: int, tokenizer: Tokenizer, seed: int, split: str, regime: Regime | None = None) -> Pool:
    """`make_pool`, built here: the questions generated now, each tokenized when first drawn."""
    frame = generate(task, n, seed=seed, split=split, regime=regime)
    if tasks.get(task).answer == "text":  # prose: every token after <|bos|> is learned
        samples = LazySamples(tokenizer.text_sample, list(zip(frame["answer"])))
    else:
        samples = LazySamples(tokenizer.sample, list(zip(frame["prompt"], frame["answer"])))
    return Pool(task, frame, samples, frame["difficulty"].to_numpy(), frame["difficulty_sd"].to_numpy())


class IndexedSamples(Sequence):
    """A pool's samples read as a list's items: samples[i] (from the end when negative, an
    IndexError outside) and slices as lists; a subclass gives sample i, 0 <= i < len, as `_at(i)`."""

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("sample index out of range")
        return self._at(i)

    def _at(self, i: int):
        raise NotImplementedError


class LazySamples(IndexedSamples):
    """A pool's samples, each tokenized the first time it is read and kept: samples[i] is
    `tokenize(*texts[i])`, the very tuple an eagerly built list would hold at i.

    A run at the studies' budgets draws a fraction of a pool of a million questions, and tokenizing
    the whole pool in Python, one question at a time, was most of a short run's start-up. What a
    run reads is what it read before, so it trains to the same bits; a question that cannot be
    tokenized is an error when it is first drawn, not at set-up."""

    def __init__(self, tokenize, texts: list):
        self._tokenize, self._texts = tokenize, texts
        self._done: list = [None] * len(texts)

    def __len__(self) -> int:
        return len(self._texts)

    def _at(self, i: int):
        sample = self._done[i]
        if sample is None:
            sample = self._done[i] = self._tokenize(*self._texts[i])
        return sample

    def take(self, indices) -> list:
        """[self[i] for i in indices] (`Pool.take`)."""
        return [self[i] for i in np.asarray(indices, dtype=np.int64).tolist()]


class NotEnoughSamples(ValueError):
    """The samples given to `pack` are too few (or too short) to fill the rows."""


def pack(
    samples, batch_size: int, context: int, pad_id: int, num_id: int = 4, part: tuple[int, int] = (0, 1)
) -> dict[str, torch.Tensor]:
    """Concatenate samples (ids, values, loss_mask[, task index]) into [B, context] inputs/targets;
    the last one in a row is cut. `task_ids` holds each target's task index (0 without one).

    Also returns the loss denominators (`ce_count`, `number_count`) of the rows it packs. With
    `part` = (rank, world) only that rank's share of the batch's rows is packed (the rank-th of
    `world` equal slices of rows, each row as the whole batch holds it) and the counts
    are that share's: the ranks sum them (train_step), so that data-parallel ranks average to the
    loss of the whole batch. A whole batch's counts are at least 1 (a mean never divides by 0)."""
    rank, world = part
    if batch_size % world:
        raise ValueError(f"{batch_size} rows do not split evenly over {world} processes")
    width, per = context + 1, batch_size // world
    lengths = np.fromiter((len(s[0]) for s in samples), dtype=np.int64, count=len(samples))
    starts = _row_starts(lengths, batch_size, width)[rank * per : (rank + 1) * per + 1]
    mine, lengths = samples[starts[0] : starts[-1]], lengths[starts[0] : starts[-1]]
    offsets = np.cumsum(lengths) - lengths  # where each sample starts in the flat concatenation
    take = offsets[starts[:-1] - starts[0], None] + np.arange(width)  # the rows, flat
    ids, values, mask = (np.concatenate([s[k] for s in mine])[take] for k in range(3))
    task = np.repeat([s[3] if len(s) > 3 else 0 for s in mine], lengths)[take]
    doc = np.repeat(np.arange(starts[0], starts[-1]), lengths)[take]  # the sample's index in the batch
    positions = (np.arange(lengths.sum()) - np.repeat(offsets, lengths))[take]
    loss_mask = mask[:, 1:] & (doc[:, 1:] == doc[:, :-1])
    least = 1 if world == 1 else 0  # a part's count may be 0: the ranks clamp their sum
    ids, values, task = ids.astype(np.int64, copy=False), values.astype(np.float64, copy=False), task.astype(np.int64)
    t = torch.from_numpy
    return {
        "ids": t(ids[:, :-1]),
        "values": t(values[:, :-1]),
        "positions": t(positions[:, :-1]),
        "doc_ids": t(doc[:, :-1]),
        "targets": t(ids[:, 1:]),
        "target_values": t(values[:, 1:]),
        "loss_mask": t(loss_mask.astype(bool, copy=False)),
        "task_ids": t(task[:, 1:]),
        "ce_count": torch.tensor(max(least, int(loss_mask.sum()))),
        "number_count": torch.tensor(max(least, int((loss_mask & (ids[:, 1:] == num_id)).sum()))),
    }


def _row_starts(lengths: np.ndarray, rows: int, width: int) -> np.ndarray:
    """[rows + 1]: the first sample of each row, then the end of the last row's samples. A row
    takes samples until it holds `width` tokens; the sample that overflows it is cut there."""
    ends = np.cumsum(lengths)
    starts, filled = np.zeros(rows + 1, dtype=np.int64), 0
    for r in range(rows):
        j = int(np.searchsorted(ends, filled + width))  # the sample that fills row r
        if j == len(ends):
            raise NotEnoughSamples(f"not enough samples to fill {rows} rows of {width - 1} tokens")
        starts[r + 1], filled = j + 1, ends[j]
    return starts


def draw(pools: dict[str, Pool], counts: dict[str, int], rng: np.random.Generator, pick=None) -> list:
    """counts[task] samples of each task, shuffled together, as (ids, values, loss_mask, task
    index), the index being the task's position in `pools`. `pick(task, n, rng)` gives the samples
    (the curriculum, or another pool of the task); uniform from pools[task] without it."""
    index = {task: i for i, task in enumerate(pools)}
    chosen = []
    for task, n in counts.items():
        if pick is not None:
            samples = pick(task, n, rng)
        else:
            samples = pools[task].take(rng.integers(0, len(pools[task].samples), n))
        chosen += [(*sample, index[task]) for sample in samples]
    order = rng.permutation(len(chosen))
    return [chosen[i] for i in order]


def next_batch(
    pools: dict[str, Pool],
    counts: dict[str, int],
    rng: np.random.Generator,
    pick,
    rows: int,
    context: int,
    pad_id: int,
    num_id: int,
    part: tuple[int, int] = (0, 1),
) -> dict[str, torch.Tensor]:
    """pack(draw(...)): `rows` rows over all processes, of which `part` (rank, world) builds its
    own. When the draw falls short (the balancer favoured tasks with long samples), draw the same
    counts again and append, until the rows are full."""
    samples = draw(pools, counts, rng, pick)
    while True:
        try:
            return pack(samples, rows, context, pad_id, num_id, part)
        except NotEnoughSamples:
            samples += draw(pools, counts, rng, pick)


def samples_per_step(pools: dict[str, Pool], rows: int, context: int) -> int:
    """How many samples to draw for `rows` packed rows of context + 1 tokens: 30 % more than the
    pools' mean sample length asks for (next_batch draws again if they still fall short)."""
    mean_length = float(np.mean([p.mean_length for p in pools.values()]))
    return math.ceil(rows * (context + 1) / mean_length * 1.3) + 8
