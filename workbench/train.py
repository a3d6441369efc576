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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from . import encoders, metrics, tasks
from .atomic import clean_temporaries, write_atomic
from .balancing import LossNormalizer, TaskBalancer
from .cli import add_arguments, flag, setting, values_of
from .curriculum import ENDGAMES, Curriculum, Sampler
from .data import make_pool, next_batch, samples_per_step, shard
from .evaluate import evaluate, summarize
from .model import ACTIVATIONS, GPT, INITS, LOSSES, NORMS, PRESETS, preset
from .optim import OptimConfig, apply_schedule, build_optimizers
from .perplexity import perplexity, text_score
from .tasks import Regime, text_sources
from .tokenizer import Tokenizer

RUN_FILES = ("config.json", "metrics.jsonl", "evals.jsonl", "checkpoint.pt", "best.pt", "test_samples.csv",
             "test_summary.csv")


@dataclass
class TrainConfig:
    encoding: str = setting("bittokens", "number encoding", choices=encoders.names)
    encoding_options: dict = setting({}, "options of the encoding, e.g. combine=sum (see --help's list)")
    tasks: tuple[str, ...] = setting(("addition",), "tasks to train on, e.g. addition,division,text",
                                     choices=tasks.names)
    preset: str = setting("cpu-tiny", "model size", choices=tuple(PRESETS))
    tokens: float = setting(6e5, "training budget in tokens, all processes together (the paper: 1e10)")
    batch_size: int = setting(8, "rows per process per step (the paper: 192 over all GPUs)")
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
    balancing: bool = setting(True, "task balancing of C.4 (eq. 16); else equal shares")
    balance_lambda: float = setting(-1.0, "lambda of eq. 15/16: -1 harmonic (C.4), 0 geometric, 1 arithmetic "
                                    "(Table 14)")
    balance_floor: float = setting(0.01, "lower bound of (1 - p) in eq. 16 (the authors'; the paper is silent)")
    max_task_ratio: float | None = setting(None, "cap r_max on any task's share (Table 15); None: no cap")
    balance_unit: str = setting("tokens", "what a task's share counts: tokens (the authors' code, where a "
                                "'sample' is a 1024-token window of one task) or samples", choices=("samples", "tokens"))
    normalize_losses: bool = setting(True, "C.4's loss normalisation: each task's loss scaled to 10 until "
                                     "--adapt-warmup, then matched to the text task's (the authors' rule)")
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
    vocab_size: int = setting(2048, "size of the text BPE")
    device: str = setting("auto", "cpu, cuda, cuda:N or auto")
    bf16: bool = setting(False, "bf16 autocast (fast on GPUs and CPUs with AMX, ~25x slower on other CPUs)")
    compile: bool = setting(False, "torch.compile the model")
    threads: int = setting(0, "torch CPU threads (0: torch's default)")
    optim: OptimConfig = field(default_factory=OptimConfig)

    def __post_init__(self):
        self.tasks = tuple(self.tasks)
        if isinstance(self.optim, dict):
            self.optim = OptimConfig(**self.optim)
        unknown = [t for t in self.tasks if t not in tasks.names()]
        if not self.tasks or unknown or len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"--tasks must be distinct names from {tasks.names()}, got {list(self.tasks)}")
        encoding = encoders.get(self.encoding, **self.encoding_options)  # raises for a bad name or option
        preset(self.preset)
        self.regime = Regime.of(self.decades, self.max_digits, text_source=self.text_source,  # raises if bad
                                list_sampling=self.list_sampling, list_lengths=tuple(self.list_lengths),
                                swap_operands=self.swap_operands, difficulty_caps=self.difficulty_caps,
                                exp_difficulty=self.exp_difficulty)
        if not (isinstance(self.tokens, (int, float)) and math.isfinite(self.tokens) and self.tokens >= 1):
            raise ValueError(f"--tokens must be a finite number >= 1, got {self.tokens}")
        for name, low in (("batch_size", 1), ("pool_size", 1), ("val_samples", 1), ("test_samples", 1),
                          ("eval_every", 1), ("checkpoint_every", 1), ("vocab_size", 300), ("threads", 0),
                          ("seed", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{flag(name)} must be an integer >= {low}, got {value!r}")
        if self.context is not None and not (isinstance(self.context, int) and 8 <= self.context <= 65_536):
            raise ValueError(f"--context must be an integer in 8..65536 (or None), got {self.context!r}")
        for name, low, high in (("adapt_warmup", 0, 1), ("balance_floor", 0, 0.999), ("balance_lambda", -100, 1)):
            if not low <= getattr(self, name) <= high:
                raise ValueError(f"{flag(name)} must be in [{low}, {high}], got {getattr(self, name)}")
        if self.max_task_ratio is not None and not (1 / len(self.tasks) <= self.max_task_ratio <= 1):
            raise ValueError(f"--max-task-ratio must be in [1/{len(self.tasks)}, 1] for {len(self.tasks)} tasks, "
                             f"got {self.max_task_ratio}")
        if self.max_answer_tokens < 0:
            raise ValueError(f"--max-answer-tokens must be >= 0, got {self.max_answer_tokens}")
        encoding.number_head(self.model_config().d_model)  # raises for a bad architecture or a head that cannot fit
        if not str(self.out).strip():
            raise ValueError("--out must name a run directory, got an empty string")

    def model_config(self):
        return preset(self.preset, activation=self.activation, bias=self.bias, norm=self.norm,
                      norm_weight=self.norm_weight, init=self.init, loss=self.loss,
                      **({"block_size": self.context} if self.context else {}))


# The defaults are the paper's recipe at a first-run scale (about a minute on a laptop: addition of
# one-digit operands 1 ... 100, cpu-tiny, 600k tokens). Appendix C.1 as a training configuration:
# 117M model, 10B tokens over the paper's operand range, context 1024, batch 192 (24 rows on each
# of 8 GPUs: torchrun --nproc_per_node 8 ... --config paper), eval every 32 steps.
CONFIGS = {
    "cpu": TrainConfig(),
    "paper": TrainConfig(preset="paper", tokens=1e10, batch_size=24, context=1024, pool_size=1_000_000,
                         decades=None, max_digits=None, val_samples=256, test_samples=10_000, eval_every=32,
                         checkpoint_every=1000, bf16=True, vocab_size=50_000),
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

    @property
    def warmup_steps(self) -> int:
        return round(self.cfg.optim.warmup_frac * self.total_steps)


def setup(cfg: TrainConfig, resume: bool = False) -> Run:
    """Build the run; with `resume`, restore it from OUT/checkpoint.pt."""
    rank, world = _start_processes()
    device = _device(cfg.device)
    if world > 1 and device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = _prepare_run_dir(cfg, resume, rank)
    gpt_cfg = cfg.model_config()
    encoding = encoders.get(cfg.encoding, **cfg.encoding_options)
    tok = Tokenizer(encoding, vocab_size=cfg.vocab_size)
    check_memory(cfg, tok.vocab_size)
    torch.manual_seed(cfg.seed)
    model = GPT(gpt_cfg, encoding, tok.vocab_size, tok.num_id).to(device)
    runner = torch.compile(model) if cfg.compile else model
    if world > 1:  # some number-head parameters see no gradient in a batch without numbers
        runner = torch.nn.parallel.DistributedDataParallel(runner, find_unused_parameters=True)
    pools = {t: make_pool(t, cfg.pool_size, tok, cfg.seed, "train", cfg.regime) for t in cfg.tasks}
    val = {t: make_pool(t, cfg.val_samples, tok, cfg.seed, "val", cfg.regime).frame for t in cfg.tasks}
    tokens_per_step = cfg.batch_size * gpt_cfg.block_size * world
    total_steps = max(1, math.ceil(cfg.tokens / tokens_per_step))
    sampler = _sampler(cfg, encoding, tok, pools, total_steps)
    prose = [t for t in cfg.tasks if tasks.get(t).answer == "text"]
    normalizer = LossNormalizer(cfg.tasks, cfg.adapt_warmup * cfg.tokens, prose[0] if prose else None,
                                enabled=cfg.normalize_losses)
    balancer = TaskBalancer(cfg.tasks, lam=cfg.balance_lambda, max_ratio=cfg.max_task_ratio, floor=cfg.balance_floor)
    run = Run(cfg, out, device, rank, world, tok, model, runner, build_optimizers(model, cfg.optim), pools, val,
              balancer, normalizer, sampler, np.random.default_rng(cfg.seed), total_steps, tokens_per_step,
              samples_per_step(pools, cfg.batch_size * world, gpt_cfg.block_size),
              {"step": 0, "best": -1.0, "seconds": 0.0})
    if resume:
        _restore(run)
    if rank == 0:
        write_atomic(out / "config.json", lambda tmp: Path(tmp).write_text(json.dumps(asdict(cfg), indent=1)))
    return run


def train_step(run: Run, step: int) -> dict[str, float]:
    """Draw a batch by the balancer's ratios (and the curricula), one optimizer step with the
    tasks' loss weights; its losses (and each task's loss, for the normalisation of C.4)."""
    cfg = run.cfg
    batch = next_batch(run.pools, _task_counts(run), run.rng, lambda *a: _pick(run, step, *a),
                       cfg.batch_size * run.world, run.model.cfg.block_size, run.tok.pad_id, run.tok.num_id)
    batch = shard(batch, run.rank, run.world, run.device)
    weights = torch.tensor(run.normalizer.weights, dtype=torch.float32, device=run.device)
    lr = apply_schedule(run.optimizers, step, run.total_steps, cfg.optim)
    run.model.train()
    with torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
        _, losses = run.runner(**batch, task_weights=weights)
    (losses["loss"] * run.world).backward()  # DDP averages gradients over ranks; the counts are global
    for opt in run.optimizers:
        opt.step()
        opt.zero_grad(set_to_none=True)
    per_task = torch.stack([losses.pop("task_loss"), losses.pop("task_tokens")]).detach().float()
    parts = torch.stack([v.detach().float() for v in losses.values()])
    if run.world > 1:
        dist.all_reduce(parts)
        dist.all_reduce(per_task)
    run.normalizer.observe(*per_task.cpu().double().numpy())
    return {**dict(zip(losses, parts.tolist())), "lr": lr}


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


def _sampler(cfg: TrainConfig, encoding, tok: Tokenizer, pools: dict, total_steps: int) -> Sampler:
    """The curricula of C.3 and, for an encoding with base-2 difficulty, A.3's binary pools of the
    single-step curriculum tasks (with their own validation sets)."""
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
    curricula = {t: Curriculum(int(held[t].max()), total_steps, 1.0, levels=held[t]) for t in curriculum_tasks}
    return Sampler(pools, curricula, encoding.difficulty_base, total_steps, binary, cfg.endgame, cfg.endgame_share)


def evaluate_and_adapt(run: Run, step: int, lr: float, loss: float) -> dict:
    """Answer the validation questions; feed the scores to the balancer and the curricula; keep
    the best weights by the harmonic mean of the scores (eq. 15; text's left out with
    --no-select-with-text). Returns the evaluation row."""
    questions = {t: frame for t, frame in run.val.items() if tasks.get(t).score is not None}
    answers = evaluate(run.model, run.tok, questions, run.cfg.max_answer_tokens or None) if questions else None
    scores = summarize(answers).set_index("task")["score"].to_dict() if questions else {}
    for task in set(run.val) - set(questions):  # prose: the authors' score of its perplexity
        scores[task] = text_score(perplexity(run.model, run.tok, run.val[task]["answer"], progress=False)["ppl_all"])
    tokens_seen = (step + 1) * run.tokens_per_step
    weights = run.normalizer.update(tokens_seen)
    if run.cfg.balancing and scores and tokens_seen >= run.cfg.adapt_warmup * run.cfg.tokens:
        run.balancer.update(scores)
    for task, (frame, column) in run.sampler.to_evaluate(run.val, step).items():
        scored = answers[answers.task == task] if frame is run.val[task] else \
            evaluate(run.model, run.tok, {task: frame}, run.cfg.max_answer_tokens or None)
        per_level = pd.Series(scored["score"].to_numpy()).groupby(frame[column].to_numpy()).mean()
        curriculum = run.sampler.curricula[task]
        curriculum.update(per_level[per_level.index <= curriculum.max_difficulty].to_dict(), step + 1, lr)
    chosen = scores if run.cfg.select_with_text else {t: s for t, s in scores.items() if t in questions}
    mean = metrics.generalized_mean(chosen.values(), run.cfg.balance_lambda) if chosen else -loss
    eligible = not run.cfg.select_after_warmup or step + 1 > run.warmup_steps or step + 1 == run.total_steps
    if eligible and (mean > run.state["best"] or not (run.out / "best.pt").exists()):
        run.state["best"] = mean
        if run.rank == 0:
            write_atomic(run.out / "best.pt", lambda tmp: torch.save(run.model.state_dict(), tmp))
    return {"step": step + 1, "harmonic_mean": mean, **{f"score/{t}": s for t, s in scores.items()},
            **{f"ratio/{t}": r for t, r in run.balancer.ratios.items()},
            **{f"loss_weight/{t}": float(w) for t, w in zip(run.cfg.tasks, weights)},
            **{f"frontier/{t}": c.frontier for t, c in run.sampler.curricula.items()},
            **{f"endgame/{t}": int(run.sampler.in_endgame(t, step)) for t in run.sampler.binary}}


def save_checkpoint(run: Run) -> None:
    """Weights, optimizers, balancer, curricula, random states and the step: all a resume needs."""
    ckpt = {"model": run.model.state_dict(), "optimizers": [o.state_dict() for o in run.optimizers],
            "balancer": run.balancer.state_dict(), "normalizer": run.normalizer.state_dict(),
            "curricula": {t: c.state_dict() for t, c in run.sampler.curricula.items()},
            "rng": json.dumps(run.rng.bit_generator.state), "torch_rng": torch.get_rng_state(),
            "state": dict(run.state), "config": _comparable(run.cfg)}
    write_atomic(run.out / "checkpoint.pt", lambda tmp: torch.save(ckpt, tmp))


def final_test(run: Run, started: float) -> None:
    """The best weights answer the held-out test split (test_samples.csv, test_summary.csv); prose
    gets its perplexity over all tokens and over the text tokens only (Table 4's two rows)."""
    cfg = run.cfg
    run.model.load_state_dict(load_checkpoint(run.out / "best.pt"))
    test = {t: make_pool(t, cfg.test_samples, run.tok, cfg.seed, "test", cfg.regime).frame for t in cfg.tasks}
    questions = {t: frame for t, frame in test.items() if tasks.get(t).score is not None}
    parts = []
    if questions:
        samples = evaluate(run.model, run.tok, questions, cfg.max_answer_tokens or None)
        write_atomic(run.out / "test_samples.csv", lambda tmp: samples.to_csv(tmp, index=False))
        parts.append(summarize(samples))
    for task in set(test) - set(questions):
        ppl = perplexity(run.model, run.tok, test[task]["answer"])
        parts.append(pd.DataFrame([{"task": task, "score": text_score(ppl["ppl_all"]), "n": len(test[task]),
                                    "ppl_all": ppl["ppl_all"], "ppl_text": ppl["ppl_text"]}]))
    summary = pd.concat(parts, ignore_index=True).assign(encoding=cfg.encoding, seed=cfg.seed,
                                                         train_seconds=time.time() - started)
    write_atomic(run.out / "test_summary.csv", lambda tmp: summary.to_csv(tmp, index=False))


def train(cfg: TrainConfig, resume: bool = False, on_eval=None) -> Path:
    """Train, evaluate on the test split, return the run directory. `on_eval(row)` is called
    with every evaluation row (live plots in notebooks)."""
    run = setup(cfg, resume)
    gc.freeze()  # the pools' objects live all run: the cyclic collector need not walk them again and again
    log = _Logger(run.out, run.rank)
    if run.rank == 0:
        print(f"run directory: {run.out}")
    bar = tqdm(range(run.state["step"], run.total_steps), desc=cfg.encoding, disable=run.rank != 0)
    started = time.time() - run.state["seconds"]  # a resumed run's clock goes on
    for step in bar:
        parts = train_step(run, step)
        run.state["step"], run.state["seconds"] = step + 1, time.time() - started
        bar.set_postfix(loss=f"{parts['loss']:.3f}")
        log.step({"step": step + 1, **parts, "time": run.state["seconds"]})
        last = step + 1 == run.total_steps
        if (step + 1) % cfg.eval_every == 0 or last:
            row = evaluate_and_adapt(run, step, parts["lr"], parts["loss"])
            log.evaluation(row)
            if on_eval:
                on_eval(row)
        if run.rank == 0 and ((step + 1) % cfg.checkpoint_every == 0 or last):
            save_checkpoint(run)
    if run.rank == 0:
        final_test(run, started)
    if run.world > 1:
        dist.barrier()  # every rank returns after rank 0 wrote the test results
        dist.destroy_process_group()
    gc.unfreeze()  # a process that trains again (a study worker, a notebook) collects this run's garbage
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


def _prepare_run_dir(cfg: TrainConfig, resume: bool, rank: int) -> Path:
    """The run directory, checked: resume needs a checkpoint; a new run never silently replaces
    an old one. Temporaries left by a killed atomic write are removed."""
    out = Path(cfg.out)
    existing = [name for name in RUN_FILES if (out / name).exists()]
    if resume and not (out / "checkpoint.pt").exists():
        raise FileNotFoundError(f"--resume: there is no {out / 'checkpoint.pt'} to continue from; start the run "
                                f"without --resume (add --overwrite to replace {existing})" if existing else
                                f"--resume: there is no {out / 'checkpoint.pt'} to continue from; start the run "
                                "without --resume")
    if not resume and existing and not cfg.overwrite:
        raise FileExistsError(f"{out} already holds a run ({', '.join(existing)}): pass --resume to continue "
                              "it, --overwrite to replace it, or choose a new --out")
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        clean_temporaries(out, RUN_FILES)
        if not resume:
            for name in existing:
                (out / name).unlink()
    return out


def _restore(run: Run) -> None:
    """Continue from OUT/checkpoint.pt: weights, optimizers, balancer, curricula, random states;
    the logs lose the rows written after the checkpoint."""
    ckpt = load_checkpoint(run.out / "checkpoint.pt")
    if ckpt.get("config") != _comparable(run.cfg):
        raise ValueError(f"{run.out / 'checkpoint.pt'} was written with another configuration: {ckpt.get('config')}")
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


def _comparable(cfg: TrainConfig) -> dict:
    """The configuration that must match to resume a run (not where it lives or its speed knobs)."""
    skip = {"out", "overwrite", "device", "compile", "threads"}
    return json.loads(json.dumps({k: v for k, v in asdict(cfg).items() if k not in skip}))


# -- processes, devices, memory ---------------------------------------------------------------
def _start_processes() -> tuple[int, int]:
    """(rank, world size): one process, or the torchrun group (NCCL on CUDA, gloo on CPUs)."""
    if int(os.environ.get("WORLD_SIZE", 1)) <= 1:
        return 0, 1
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), dist.get_world_size()


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device {name!r} is not a device (cpu, cuda, cuda:N or auto): {err}") from None


def check_memory(cfg: TrainConfig, vocab_size: int) -> int:
    """Refuse a configuration whose training step cannot fit in the free memory (an estimate:
    weights, gradients and optimizer state, the activations autograd keeps, the attention masks).
    Returns the estimate in bytes."""
    m = cfg.model_config()
    rows, T, d = cfg.batch_size, m.block_size, m.d_model
    params = vocab_size * d * 2 + m.n_layer * d * d * (4 + 2 * m.mlp_ratio)
    activations = rows * T * d * m.n_layer * (14 + 3 * m.mlp_ratio) * 4
    masks = rows * T * T * (1 + 4 + 4 * m.n_head)  # bool mask, float bias, one layer's scores
    need = params * 4 * 4 + activations + masks
    free = _free_memory()
    if free is not None and need > free:
        raise MemoryError(f"--batch-size {rows} x --context {T} with preset {cfg.preset!r} needs about "
                          f"{need / 2**30:.1f} GiB but {free / 2**30:.1f} GiB are free; lower --context or "
                          "--batch-size")
    return need


def _free_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


# -- command line -----------------------------------------------------------------------------
def _parser(defaults: TrainConfig) -> argparse.ArgumentParser:
    encodings = "; ".join(f"{n}: {encoders.options(n) or 'none'}" for n in encoders.names())
    parser = argparse.ArgumentParser(
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
    out = train(cfg, resume=args["resume"])
    if (out / "test_summary.csv").exists():
        print(pd.read_csv(out / "test_summary.csv").to_string(index=False))


if __name__ == "__main__":
    main()
