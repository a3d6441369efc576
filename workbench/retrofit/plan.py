"""What a retrofit does, phase by phase, and how long each phase takes: the line a run prints as it
starts a phase without a bar of its own, and the plan `python -m workbench.retrofit --dry-run`
prints. Without torch or transformers, so that the dry run answers in about a second.

A pretrained model on a CPU spends minutes outside the training loop (loading, the pools, the
perplexity before and after, the test's generation), so every phase says what it does and how
long it should take before it starts. The estimates are recorded rates of SmolLM2-135M on one
shared core of a 2-core machine (docs/retrofit.md, "Where the time goes"), scaled by the model's
parameter count for another model: a guide to minutes against hours, not a prediction to the
second (the machine's load moved the measured rates by 2x).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import tasks
from .config import command_line, configuration
from .hub import KNOWN, cache_dir, weight_elements

REFERENCE_PARAMS = 134.5e6  # SmolLM2-135M, the model the rates below were measured on
# Fine-tuning tokens/s (the samples' tokens, padding not counted) of SmolLM2-135M, float32, one
# thread, a load of 3-4 on 2 cores: docs/retrofit.md, "Fine-tuning speed on a CPU".
TRAIN_RATE = {"lora": 20.1, "full": 16.6}
# The other phases of a --tokens 500 run of SmolLM2-135M on the same machine, a load of 5-7:
# docs/retrofit.md, "Where the time goes".
FORWARD_RATE = 35.0  # tokens/s of the perplexity's forward passes (one window of a text chunk each)
ANSWER_RATE = 4.0  # questions/s answered greedily in batches of 64, answers of a few tokens
POOL_RATE = 4_000.0  # samples/s made into a pool (generated, tokenized, their lengths)
LOAD_SECONDS = 20.0  # loading, checking and resizing SmolLM2-135M, LoRA added
CONVERSION_SECONDS = 35.0  # the packaged GGUF de-quantized into the cache, once (docs/retrofit.md)
TEXT_CHUNK_TOKENS = 224  # a held-out text chunk's tokens, on average
# an evaluation answers the validation questions and, while a curriculum is on, its active set
ANSWERS_PER_EVALUATION = 2


@dataclass
class Phase:
    name: str
    what: str
    seconds: float


def duration(seconds: float) -> str:
    """A duration as a person reads it: 40 s, 12 min, 3.5 h."""
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{max(1, round(seconds))} s"


def announce(phase: str, what: str, seconds: float | None = None) -> None:
    """One line on stderr, beside the bars, before a phase that has no bar of its own."""
    estimate = f" (estimated {duration(seconds)})" if seconds is not None else ""
    print(f"{phase}: {what}{estimate}", file=sys.stderr, flush=True)


def model_params(model: str) -> float:
    """The parameters of --model, read without loading it (a packaged model: its recorded size;
    a folder: its safetensors headers); the reference size where they cannot be read."""
    if model in KNOWN:
        return REFERENCE_PARAMS
    try:
        return float(weight_elements(Path(model)))
    except ValueError:
        return REFERENCE_PARAMS


def scale(params: float) -> float:
    """How much slower than SmolLM2-135M a model of `params` runs (time grows with the weights)."""
    return max(params, 1.0) / REFERENCE_PARAMS


def loading_seconds(params: float) -> float:
    return LOAD_SECONDS * scale(params)


def pool_seconds(cfg) -> float:
    return pool_samples(cfg) / POOL_RATE


def pool_samples(cfg) -> int:
    return len(cfg.tasks) * (cfg.data.pool_size + cfg.evaluation.val_samples) + (
        cfg.text_pool_size if cfg.text_share else 0
    )


def perplexity_seconds(cfg, params: float) -> float:
    return cfg.text_samples * TEXT_CHUNK_TOKENS / FORWARD_RATE * scale(params)


def answer_seconds(questions: int, params: float) -> float:
    return questions / ANSWER_RATE * scale(params)


def steps(cfg) -> int:
    return max(1, math.ceil(cfg.tokens / cfg.batch_tokens))


def train_seconds(cfg, params: float) -> float:
    return steps(cfg) * cfg.batch_tokens / TRAIN_RATE["lora" if cfg.lora else "full"] * scale(params)


def evaluations(cfg) -> int:
    """Validations during training: every --eval-every steps and after the last one."""
    n = steps(cfg)
    return n // cfg.evaluation.eval_every + (n % cfg.evaluation.eval_every != 0)


def scored_tasks(cfg) -> list[str]:
    return [t for t in cfg.tasks if tasks.get(t).score is not None]


def phases(cfg, params: float, converted: bool = True) -> list[Phase]:
    """The run's phases in order, what each does and its estimated seconds."""
    n = steps(cfg)
    mode = f"LoRA rank {cfg.lora_rank}" if cfg.lora else "full fine-tuning"
    out = []
    if cfg.model in KNOWN and not converted:
        out.append(
            Phase(
                "conversion", f"{cfg.model}'s packaged GGUF de-quantized into {cache_dir()} (once)", CONVERSION_SECONDS
            )
        )
    out += [
        Phase(
            "loading",
            f"{cfg.model} ({params / 1e6:,.1f}M parameters), {cfg.encoding} joined, {mode}",
            loading_seconds(params),
        ),
        Phase(
            "pools",
            f"{pool_samples(cfg):,} samples: {', '.join(cfg.tasks)}" + (", text" if cfg.text_share else ""),
            pool_seconds(cfg),
        ),
    ]
    if cfg.text_samples:
        out.append(
            Phase("perplexity before", f"{cfg.text_samples} held-out text chunks", perplexity_seconds(cfg, params))
        )
    out.append(
        Phase(
            "training",
            f"{n:,} step{'s' * (n != 1)} of {cfg.batch_tokens:,} tokens ({n * cfg.batch_tokens:,} tokens for --tokens {cfg.tokens:,.0f}, "
            f"{cfg.text_share:.0%} text), {mode}",
            train_seconds(cfg, params),
        )
    )
    questions = len(cfg.tasks) * cfg.evaluation.val_samples
    out.append(
        Phase(
            "validation",
            f"{evaluations(cfg)} x {questions} questions (every {cfg.evaluation.eval_every} steps and at the end)",
            evaluations(cfg) * ANSWERS_PER_EVALUATION * answer_seconds(questions, params),
        )
    )
    if scored := scored_tasks(cfg):
        questions = len(scored) * cfg.evaluation.test_samples
        out.append(
            Phase("test", f"{questions:,} held-out questions ({', '.join(scored)})", answer_seconds(questions, params))
        )
    if cfg.text_samples:
        out.append(
            Phase("perplexity after", f"{cfg.text_samples} held-out text chunks", perplexity_seconds(cfg, params))
        )
    return out


def is_converted(model: str) -> bool:
    """Whether a packaged model's conversion is in the cache (its folder exists; each run checks it)."""
    if model not in KNOWN:
        return True
    spec = KNOWN[model]
    return (cache_dir() / f"{model}-{spec.package}-{spec.version}").is_dir()


def describe(cfg) -> str:
    """The plan of a retrofit as `--dry-run` prints it: nothing is loaded, trained or written."""
    params = model_params(cfg.model)
    plan = phases(cfg, params, is_converted(cfg.model))
    out = Path(cfg.run.out)
    total = sum(p.seconds for p in plan)
    rate = TRAIN_RATE["lora" if cfg.lora else "full"] / scale(params)
    lines = [
        f"retrofit plan: {cfg.model} + {cfg.encoding} on {', '.join(cfg.tasks)} into {out}"
        + ("" if out.is_dir() else " (a folder not made yet)"),
        f"  tokens: {cfg.tokens:,.0f} -> {steps(cfg):,} step{'s' * (steps(cfg) != 1)} of {cfg.batch_tokens:,} "
        "(a step draws whole samples)",
        "  phase              estimated   what",
    ]
    lines += [f"  {p.name:<18} {duration(p.seconds):>9}   {p.what}" for p in plan]
    lines += [
        f"estimated time: {duration(total)} in all, {duration(train_seconds(cfg, params))} of it training",
        f"  at {rate:,.1f} tokens/s of training (SmolLM2-135M's {TRAIN_RATE['lora' if cfg.lora else 'full']} "
        "on one shared CPU core, docs/retrofit.md, scaled by the parameters); a GPU takes a small fraction of it",
        "nothing was loaded, trained or written (--dry-run)",
    ]
    return "\n".join(lines)


def dry_run(argv=None) -> bool:
    """Print the plan of `--dry-run` (True), or do nothing (False); nothing is imported that
    loads a model, and nothing is written."""
    flags, args = command_line(argv)
    if not args.get("dry_run"):
        return False
    print(describe(configuration(flags, args)))
    return True
