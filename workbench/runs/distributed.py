"""Several processes, one training (torchrun): the process group, and evaluation shared out.

    torchrun --nproc_per_node 8 -m workbench.experiments paper-tier

`start` joins the process group on the first call of a process and keeps it for the life of the
process: a protocol (paper-tier, ablations, study) calls train() once per run, and every run
after the first reuses the group. Destroying and re-creating it between runs is what broke them:
the second group's rendezvous read the first one's stale entries (2 gloo processes over 2 runs
failed 7 times in 10, docs/gpu.md). The group ends when the process does. The backend follows
the device the run trains on: NCCL on CUDA, gloo on CPUs.

Training pools are built once, not once per rank (`shared_pools`): rank 0 builds each and writes
its tokenized samples as flat arrays, and every rank maps those files, so the machine holds one
copy of the paper tier's nine 1M-sample pools instead of one per rank (each rank's own used
~10 GiB). The files are removed once every rank has mapped them (the maps stay valid); with
`--prefetch process` (one process too) once every rank's batch worker has mapped them as well.

Evaluation and the final test are shared out: each rank answers every world-th batch of questions
(the same batches of questions a single process would form, so every answer is
the one a single process gives), and the answers are gathered on every rank in their order; text
perplexity is pooled from each rank's token sums. Every rank ends with the same scores, so the
balancer and curricula, which every rank keeps, stay in step.
"""

from __future__ import annotations

import atexit
import hashlib
import inspect
import math
import os
import shutil
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist

from ..measures.evaluate import evaluate
from ..measures.perplexity import perplexity
from ..training.data import IndexedSamples, Pool, build_pool, pools_from

TIMEOUT = timedelta(minutes=30)  # the longest a rank may wait for the others (a checkpoint, an evaluation)
# questions answered at once: evaluate's own batch, so a shard's batches are those of a single process
BATCH = inspect.signature(evaluate).parameters["batch_size"].default


def start(device: torch.device) -> tuple[int, int, torch.device]:
    """(rank, world size, this process's device): one process, or the torchrun group, joined once
    per process. Under torchrun a CUDA device is the process's own GPU (LOCAL_RANK)."""
    if int(os.environ.get("WORLD_SIZE", 1)) <= 1:
        return 0, 1, device
    if device.type == "cuda":
        local = device.index if device.index is not None else int(os.environ.get("LOCAL_RANK", 0))
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=TIMEOUT, **({"device_id": device} if backend == "nccl" else {}))
        atexit.register(_finish)
    elif dist.get_backend() != backend:
        raise ValueError(
            f"this process already trains over {dist.get_backend()} and cannot switch to {backend} "
            f"for --device {device}: run the protocol on one kind of device"
        )
    return dist.get_rank(), dist.get_world_size(), device


def _finish() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier(world: int) -> None:
    if world > 1:
        dist.barrier()


def evaluate_shared(model, tok, frames: dict, max_new_tokens: int | None, rank: int, world: int) -> pd.DataFrame:
    """`evaluate(model, tok, frames, max_new_tokens)`, its batches shared out over the ranks and
    the answers gathered in order on every rank."""
    if world == 1:
        return evaluate(model, tok, frames, max_new_tokens)
    batches = [(task, start) for task, frame in frames.items() for start in range(0, len(frame), BATCH)]
    mine = [
        (k, evaluate(model, tok, {task: frames[task].iloc[start : start + BATCH]}, max_new_tokens))
        for k, (task, start) in enumerate(batches)
        if k % world == rank
    ]
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)
    answered = sorted((k, part) for parts in gathered for k, part in parts)
    return pd.concat([part for _, part in answered], ignore_index=True)


def perplexity_shared(model, tok, texts, rank: int, world: int, progress: bool = True) -> dict:
    """`perplexity(model, tok, texts)`'s ppl_all and ppl_text, each rank scoring a contiguous share
    of the texts; the cross-entropy sums and token counts are pooled over the ranks."""
    texts = list(texts)
    if world == 1:
        return perplexity(model, tok, texts, progress=progress)
    share = math.ceil(len(texts) / world)
    mine = texts[rank * share : (rank + 1) * share]
    part = perplexity(model, tok, mine, progress=progress and rank == 0) if mine else None
    sums = torch.tensor(
        [
            part["ce_all"] * part["tokens"],
            part["tokens"],
            part["ce_text"] * part["text_tokens"] if part["text_tokens"] else 0.0,
            part["text_tokens"],
        ]
        if part
        else [0.0] * 4,
        dtype=torch.float64,
        device=model.lm_head.weight.device,
    )
    dist.all_reduce(sums)
    ce_all, ce_text = (sums[0] / sums[1]).item(), (sums[2] / sums[3]).item() if sums[3] else math.nan
    return {
        "ppl_all": math.exp(ce_all),
        "ppl_text": math.exp(ce_text),
        "ce_all": ce_all,
        "ce_text": ce_text,
        "tokens": int(sums[1]),
        "text_tokens": int(sums[3]),
        "samples": len(texts),
    }


@contextmanager
def shared_pools(folder: Path, rank: int, world: int, keep: bool = False):
    """Within the block, training pools are built by rank 0 and mapped by every rank from files in
    `folder` (every rank must ask for the same pools in the same order, as `train.setup` does);
    one process builds its own. The folder is removed at the end of the block; with `keep` (for
    the batch workers of --prefetch process, which map the same files) it stays until
    `drop_shared_pools`, and one process writes and maps its pools too."""
    if world == 1 and not keep:
        yield
        return

    def share(task, n, tokenizer, seed, split, regime):
        path = folder / hashlib.sha256(repr((task, n, seed, split, regime)).encode()).hexdigest()[:16]
        if rank == 0:
            _write_pool(build_pool(task, n, tokenizer, seed, split, regime), path)
        barrier(world)  # the files are complete
        return _read_pool(task, path)

    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)  # what a run killed in its set-up left
    kept = False
    try:
        with pools_from(share):
            yield
        barrier(world)  # every rank has mapped every pool
        kept = keep
    finally:
        if rank == 0 and not kept:
            shutil.rmtree(folder, ignore_errors=True)


def drop_shared_pools(folder: Path, rank: int, world: int) -> None:
    """Remove the files `shared_pools(..., keep=True)` kept, once every rank (and its batch
    worker) has mapped them."""
    barrier(world)
    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)


def _write_pool(pool: Pool, path: Path) -> None:
    """The pool's samples as one flat array per field (every field of a sample is per token) and
    their offsets, with the difficulties: .npy files in `path`, written to a temporary folder first."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    lengths = np.fromiter((len(s[0]) for s in pool.samples), dtype=np.int64, count=len(pool.samples))
    np.save(tmp / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]))
    for k in range(len(pool.samples[0])):
        np.save(tmp / f"field{k}.npy", np.concatenate([s[k] for s in pool.samples]))
    np.save(tmp / "difficulty.npy", pool.difficulty)
    np.save(tmp / "difficulty_sd.npy", pool.difficulty_sd)
    tmp.rename(path)


def _read_pool(task: str, path: Path) -> Pool:
    """A pool mapped from `_write_pool`'s files (its frame, which training never reads, is not kept)."""

    def load(name):
        return np.asarray(np.load(path / name, mmap_mode="r"))  # a plain array over the map

    fields = [load(f"field{k}.npy") for k in range(len(list(path.glob("field*.npy"))))]
    samples = FlatSamples(fields, load("offsets.npy"))
    return Pool(task, None, samples, load("difficulty.npy"), load("difficulty_sd.npy"), files=path)


class FlatSamples(IndexedSamples):
    """A pool's samples as views into flat arrays: samples[i] is the tuple of sample i's fields."""

    def __init__(self, fields: list, offsets: np.ndarray):
        self.fields, self.offsets = fields, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def take(self, indices) -> list:
        """[self[i] for i in indices], the offsets looked up at once (`data.Pool.take`)."""
        at = np.asarray(indices, dtype=np.int64)
        if at.size and (at.min() < 0 or at.max() >= len(self)):
            raise IndexError("sample index out of range")
        starts, ends, fields = self.offsets[at].tolist(), self.offsets[at + 1].tolist(), self.fields
        return [tuple([field[a:b] for field in fields]) for a, b in zip(starts, ends)]

    def _at(self, i: int):
        start, end = self.offsets[i], self.offsets[i + 1]
        return tuple([field[start:end] for field in self.fields])
