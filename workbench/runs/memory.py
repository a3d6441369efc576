"""Memory a run needs, checked before anything is trained: a configuration that cannot fit is
refused with what to lower, not killed hours later (the device's memory for the training step,
the host's for the questions)."""

from __future__ import annotations

import tracemalloc

import torch

from ..config import TrainConfig
from ..tokenizer import Tokenizer
from ..training.data import make_pool


def check_memory(
    cfg: TrainConfig, vocab_size: int, tok: Tokenizer | None = None, device: torch.device | None = None
) -> int:
    """Refuse a configuration that cannot fit in the free memory of the device, before anything is
    trained (an estimate: weights, gradients and optimizer state, the activations autograd keeps,
    the attention masks and, given the tokenizer, the questions: `data_bytes`, in host memory).
    Returns the estimate in bytes."""
    m = cfg.model_config()
    rows, T, d = cfg.batch_size, m.block_size, m.d_model
    params = vocab_size * d * 2 + m.n_layer * d * d * (4 + 2 * m.mlp_ratio)
    activations = rows * T * d * m.n_layer * (14 + 3 * m.mlp_ratio) * 4
    masks = rows * T * T * (1 + 4 + 4 * m.n_head)  # bool mask, float bias, one layer's scores
    step = params * 4 * 4 + activations + masks
    data = data_bytes(cfg, tok) if tok is not None else 0  # the questions live in host memory
    on_gpu = device is not None and device.type == "cuda"
    questions = (
        f"{data / 2**30:.1f} GiB for the questions (--pool-size {cfg.data.pool_size}, --val-samples "
        f"{cfg.evaluation.val_samples}, --test-samples {cfg.evaluation.test_samples} per task)"
    )
    training = f"{step / 2**30:.1f} GiB for --batch-size {rows} x --context {T} with preset {cfg.model.preset!r}"
    for need, free, parts in (
        [(step, free_memory(device), training), (data, free_memory(None), questions)]
        if on_gpu
        else [(step + data, free_memory(None), f"{training}, {questions}")]
    ):
        if free is not None and need > free:
            raise MemoryError(
                f"this run needs about {need / 2**30:.1f} GiB but {free / 2**30:.1f} GiB are free"
                f"{' on the GPU' if on_gpu and parts == training else ''}: {parts}; lower them"
            )
    return step + data


PROBE = 64  # questions generated to measure a task's bytes per question


def data_bytes(cfg: TrainConfig, tok: Tokenizer) -> int:
    """Bytes the questions take: per task, what a tokenized question keeps and the peak of
    generating one, measured on PROBE training questions (a split draws candidates in inverse
    proportion to its share of the questions, so the test split's peak is 8x the training one's),
    times the training pool, validation and test sets (A.3's binary pools counted twice). An
    overestimate: the probe's fixed costs count as if per question."""
    kept, peak = 0.0, 0.0
    for task in cfg.tasks:
        make_pool(task, 1, tok, cfg.seed, "train", cfg.regime)  # caches (the corpus) are not the questions'
        tracemalloc.start()
        pool = make_pool(task, PROBE, tok, cfg.seed, "train", cfg.regime)
        per_question, peak_per_question = (b / PROBE for b in tracemalloc.get_traced_memory())
        tracemalloc.stop()
        del pool
        copies = 2 if cfg.difficulty.binary_pool else 1
        kept += per_question * copies * (cfg.data.pool_size + cfg.evaluation.val_samples + cfg.evaluation.test_samples)
        peak = max(
            peak,
            peak_per_question
            * max(cfg.data.pool_size, 8 * cfg.evaluation.val_samples, 8 * cfg.evaluation.test_samples),
        )
    return int(kept + peak)


def free_memory(device: torch.device | None = None) -> int | None:
    """Bytes of memory available to a new allocation on `device`: a GPU's own, the host's on a
    CPU (Linux); None where unknown."""
    if device is not None and device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None
