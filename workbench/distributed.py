"""Several processes, one training (torchrun): the process group, and evaluation shared out.

    torchrun --nproc_per_node 8 -m workbench.experiments paper-tier

`start` joins the process group on the first call of a process and keeps it for the life of the
process: a protocol (paper-tier, ablations, study) calls train() once per run, and every run
after the first reuses the group. Destroying and re-creating it between runs is what broke them:
the second group's rendezvous read the first one's stale entries (2 gloo processes over 2 runs
failed 7 times in 10, docs/gpu.md). The group ends when the process does. The backend follows
the device the run trains on: NCCL on CUDA, gloo on CPUs.

Evaluation and the final test are shared out: each rank answers every world-th batch of questions
(the same batches of questions a single process would form, so every answer is
the one a single process gives), and the answers are gathered on every rank in their order; text
perplexity is pooled from each rank's token sums. Every rank ends with the same scores, so the
balancer and curricula, which every rank keeps, stay in step.
"""
from __future__ import annotations

import atexit
import inspect
import math
import os
from datetime import timedelta

import pandas as pd
import torch
import torch.distributed as dist

from .evaluate import evaluate
from .perplexity import perplexity

TIMEOUT = timedelta(minutes=30)  # the longest a rank may wait for the others (a checkpoint, an evaluation)
# questions answered at once: evaluate's own batch, so a shard's batches are those of a single process
BATCH = inspect.signature(evaluate).parameters["batch_size"].default


def start(device: torch.device) -> tuple[int, int, torch.device]:
    """(rank, world size, this process's device): one process, or the torchrun group, joined once
    per process. Under torchrun a CUDA device is the process's own GPU (LOCAL_RANK)."""
    if int(os.environ.get("WORLD_SIZE", 1)) <= 1:
        return 0, 1, device
    if device.type == "cuda":
        device = torch.device("cuda", device.index if device.index is not None else int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=TIMEOUT, **({"device_id": device} if backend == "nccl" else {}))
        atexit.register(_finish)
    elif dist.get_backend() != backend:
        raise ValueError(f"this process already trains over {dist.get_backend()} and cannot switch to {backend} "
                         f"for --device {device}: run the protocol on one kind of device")
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
    mine = [(k, evaluate(model, tok, {task: frames[task].iloc[start:start + BATCH]}, max_new_tokens))
            for k, (task, start) in enumerate(batches) if k % world == rank]
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
    mine = texts[rank * share:(rank + 1) * share]
    part = perplexity(model, tok, mine, progress=progress and rank == 0) if mine else None
    sums = torch.tensor([part["ce_all"] * part["tokens"], part["tokens"],
                         part["ce_text"] * part["text_tokens"] if part["text_tokens"] else 0.0, part["text_tokens"]]
                        if part else [0.0] * 4, dtype=torch.float64, device=model.lm_head.weight.device)
    dist.all_reduce(sums)
    ce_all, ce_text = (sums[0] / sums[1]).item(), (sums[2] / sums[3]).item() if sums[3] else math.nan
    return {"ppl_all": math.exp(ce_all), "ppl_text": math.exp(ce_text), "ce_all": ce_all, "ce_text": ce_text,
            "tokens": int(sums[1]), "text_tokens": int(sums[3]), "samples": len(texts)}
