"""Training loop (section 6, appendix C): one file, flat, CPU first, CUDA and DDP when present.

    python -m workbench.train --encoding bittokens --tasks addition --preset cpu-small \
        --tokens 2e6 --decades 1 1 --max-digits 2 --out runs/add-bit
    torchrun --nproc_per_node 8 -m workbench.train --config paper --tasks addition,multiplication,...

Every `eval_every` steps the model answers a small validation set; the per-task scores drive the
task balancer (eq. 16) and the curricula (C.3), and their harmonic mean (eq. 15) picks the best
checkpoint. Checkpoints are written atomically; `--resume` continues a killed run and on CPU gives
the same loss curve. At the end the best weights answer the held-out test split.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from . import encoders, metrics
from .atomic import write_atomic
from .balancing import TaskBalancer
from .curriculum import Curriculum, difficulty_column
from .data import make_pool, next_batch, samples_per_step, shard
from .evaluate import evaluate, summarize
from .model import GPT, preset
from .optim import apply_schedule, build_optimizers
from .tasks import ALL_TASKS, max_difficulty
from .tokenizer import Tokenizer

CURRICULUM_TASKS = {"multiplication", "division", "exponentiation", "mean", "std"}  # A.3


@dataclass
class TrainConfig:
    encoding: str = "bittokens"
    tasks: tuple[str, ...] = ("addition",)
    preset: str = "cpu-small"
    tokens: float = 2e6  # training budget (all processes together); the paper: 1e10
    batch_size: int = 16  # rows per process; the paper: 192 in all
    context: int | None = None  # default: the preset's block size
    seed: int = 0
    out: str = "runs/default"
    decades: tuple[int, int] | None = None  # operand regime; None = the paper's
    max_digits: int | None = None
    pool_size: int = 20_000  # training questions per task
    val_samples: int = 64
    test_samples: int = 500
    eval_every: int = 100
    checkpoint_every: int = 100
    curriculum: bool = True
    balancing: bool = True
    vocab_size: int = 2048
    device: str = "auto"
    bf16: bool = False
    compile: bool = False
    threads: int = 0  # torch CPU threads; 0 = torch's default
    encoding_options: dict = field(default_factory=dict)

    def __post_init__(self):
        self.tasks = tuple(self.tasks)
        unknown = [t for t in self.tasks if t not in ALL_TASKS]
        if not self.tasks or unknown:
            raise ValueError(f"tasks must be a non-empty subset of {ALL_TASKS}, got {self.tasks}")
        if self.encoding not in encoders.names():
            raise ValueError(f"unknown encoding {self.encoding!r}; choose one of {encoders.names()}")
        if not self.tokens > 0 or self.batch_size < 1 or self.eval_every < 1:
            raise ValueError("tokens, batch_size and eval_every must be positive")
        preset(self.preset)  # raises for an unknown preset
        if self.decades is not None:
            self.decades = tuple(self.decades)


# Appendix C.1 as a training configuration: 117M model, 10B tokens, context 1024, batch 192
# (24 rows on each of 8 GPUs: torchrun --nproc_per_node 8 ... --config paper), eval every 32 steps.
CONFIGS = {
    "cpu": TrainConfig(),
    "paper": TrainConfig(preset="paper", tokens=1e10, batch_size=24, context=1024, pool_size=1_000_000,
                         val_samples=256, test_samples=10_000, eval_every=32, checkpoint_every=1000,
                         bf16=True, vocab_size=50_000),
}


def load_checkpoint(path: Path) -> dict:
    """torch.load(weights_only=True) with a clear error for a missing or corrupt file."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001 - any unpickling failure means a bad file
        raise ValueError(f"checkpoint {path} is corrupt or not a workbench checkpoint: {err}") from err


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def train(cfg: TrainConfig, resume: bool = False, on_eval=None) -> Path:
    """Train, evaluate on the test split, return the run directory. `on_eval(row)` is called
    with every validation row (live plots in notebooks)."""
    distributed = int(os.environ.get("WORLD_SIZE", 1)) > 1
    rank, world = 0, 1
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    device = _device(cfg.device)
    if distributed and device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    gpt_cfg = preset(cfg.preset, **({"block_size": cfg.context} if cfg.context else {}))
    encoding = encoders.get(cfg.encoding, d_model=gpt_cfg.d_model, **cfg.encoding_options)
    tok = Tokenizer(encoding, vocab_size=cfg.vocab_size)
    model = GPT(gpt_cfg, encoding, tok.vocab_size, tok.num_id).to(device)
    optimizers = build_optimizers(model)
    runner = torch.compile(model) if cfg.compile else model
    if distributed:  # some encoding parameters see no gradient in a batch without numbers
        runner = torch.nn.parallel.DistributedDataParallel(runner, find_unused_parameters=True)

    regime = {"decades": cfg.decades, "max_digits": cfg.max_digits}
    pools = {t: make_pool(t, cfg.pool_size, tok, cfg.seed, "train", **regime) for t in cfg.tasks}
    numeric = [t for t in cfg.tasks if t != "text"]
    val = {t: make_pool(t, cfg.val_samples, tok, cfg.seed, "val", **regime).frame for t in numeric}
    context = gpt_cfg.block_size
    tokens_per_step = cfg.batch_size * context * world
    total_steps = max(1, math.ceil(cfg.tokens / tokens_per_step))
    per_step = samples_per_step(pools, cfg.batch_size * world, context)
    balancer = TaskBalancer(cfg.tasks)
    curricula = {t: Curriculum(max_difficulty(t, 2 if cfg.encoding == "bittokens" else 10), total_steps, 1.0)
                 for t in numeric if cfg.curriculum and t in CURRICULUM_TASKS}
    rng = np.random.default_rng(cfg.seed)
    state = {"step": 0, "best": -1.0, "seconds": 0.0}  # seconds: training time of earlier processes
    ckpt_path, metrics_path = out / "checkpoint.pt", out / "metrics.jsonl"
    if resume and ckpt_path.exists():
        ckpt = load_checkpoint(ckpt_path)
        if ckpt.get("config") != _comparable(cfg):
            raise ValueError(f"{ckpt_path} was written with another configuration: {ckpt.get('config')}")
        model.load_state_dict(ckpt["model"])
        for opt, s in zip(optimizers, ckpt["optimizers"]):
            opt.load_state_dict(s)
        balancer.load_state_dict(ckpt["balancer"])
        for t, s in ckpt["curricula"].items():
            curricula[t].load_state_dict(s)
        rng.bit_generator.state = json.loads(ckpt["rng"])
        torch.set_rng_state(ckpt["torch_rng"])
        state = ckpt["state"]
        if rank == 0 and metrics_path.exists():  # drop rows logged after the checkpoint
            rows = [r for r in metrics_path.read_text().splitlines() if _logged_by(r, state["step"])]
            metrics_path.write_text("".join(r + "\n" for r in rows))
    elif rank == 0 and metrics_path.exists():
        metrics_path.unlink()
    (out / "config.json").write_text(json.dumps(asdict(cfg), indent=1))

    def pick(task, pool, n, rng):
        if task not in curricula:
            return rng.integers(0, len(pool.samples), n)
        column = difficulty_column(cfg.encoding, state["step"], total_steps)
        if cfg.encoding == "bittokens" and column == "difficulty_sd":  # A.3: the decimal distribution
            return rng.integers(0, len(pool.samples), n)
        return curricula[task].sample(getattr(pool, column), n, rng)

    def log(row):
        if rank == 0:
            with metrics_path.open("a") as f:
                f.write(json.dumps(row) + "\n")

    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16)
    bar = tqdm(range(state["step"], total_steps), desc=f"{cfg.encoding}", disable=rank != 0)
    started = time.time() - state.get("seconds", 0.0)  # a resumed run's clock goes on
    for step in bar:
        counts = balancer.task_counts(per_step) if cfg.balancing else \
            {t: math.ceil(per_step / len(cfg.tasks)) for t in cfg.tasks}
        batch = next_batch(pools, counts, rng, pick, cfg.batch_size * world, context, tok.pad_id, tok.num_id)
        batch = shard(batch, rank, world, device)
        lr = apply_schedule(optimizers, step, total_steps)
        model.train()
        with autocast:
            _, losses = runner(**batch)
        (losses["loss"] * world).backward()  # DDP averages gradients over ranks; the counts are global
        for opt in optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
        parts = torch.stack([v.detach().float() for v in losses.values()])
        if distributed:
            dist.all_reduce(parts)
        parts = dict(zip(losses, parts.tolist()))
        state["step"], state["seconds"] = step + 1, time.time() - started
        bar.set_postfix(loss=f"{parts['loss']:.3f}")
        log({"step": step + 1, **parts, "lr": lr, "time": state["seconds"]})
        if (step + 1) % cfg.eval_every == 0 or step + 1 == total_steps:
            answers = evaluate(model, tok, val) if numeric else None
            scores = summarize(answers).set_index("task")["score"].to_dict() if numeric else {}
            if cfg.balancing and scores:
                balancer.update(scores)
            column = difficulty_column(cfg.encoding, step, total_steps)
            for t, cur in curricula.items():
                levels = val[t][column].to_numpy()
                per_level = pd.Series(answers.loc[answers.task == t, "score"].to_numpy()).groupby(levels).mean()
                cur.update(per_level.to_dict(), step + 1, lr)
            mean = metrics.generalized_mean(scores.values(), -1) if scores else -parts["loss"]
            row = {"step": step + 1, "eval": True, "harmonic_mean": mean,
                   **{f"score/{t}": s for t, s in scores.items()},
                   **{f"ratio/{t}": r for t, r in balancer.ratios.items()},
                   **{f"frontier/{t}": c.frontier for t, c in curricula.items()}}
            log(row)
            if on_eval:
                on_eval(row)
            if mean > state["best"]:
                state["best"] = mean
                if rank == 0:
                    write_atomic(out / "best.pt", lambda tmp: torch.save(model.state_dict(), tmp))
        if rank == 0 and ((step + 1) % cfg.checkpoint_every == 0 or step + 1 == total_steps):
            ckpt = {"model": model.state_dict(), "optimizers": [o.state_dict() for o in optimizers],
                    "balancer": balancer.state_dict(),
                    "curricula": {t: c.state_dict() for t, c in curricula.items()},
                    "rng": json.dumps(rng.bit_generator.state), "torch_rng": torch.get_rng_state(),
                    "state": dict(state), "config": _comparable(cfg)}
            write_atomic(ckpt_path, lambda tmp: torch.save(ckpt, tmp))
    if rank == 0 and numeric:
        model.load_state_dict(load_checkpoint(out / "best.pt"))
        test = {t: make_pool(t, cfg.test_samples, tok, cfg.seed, "test", **regime).frame for t in numeric}
        samples = evaluate(model, tok, test)
        write_atomic(out / "test_samples.csv", lambda tmp: samples.to_csv(tmp, index=False))
        summary = summarize(samples).assign(encoding=cfg.encoding, seed=cfg.seed,
                                            train_seconds=time.time() - started)
        write_atomic(out / "test_summary.csv", lambda tmp: summary.to_csv(tmp, index=False))
    if distributed:
        dist.barrier()  # every rank returns after rank 0 wrote the test results
        dist.destroy_process_group()
    return out


def _logged_by(line: str, step: int) -> bool:
    """A metrics row written up to `step` (a line cut short by a kill is dropped)."""
    try:
        return json.loads(line)["step"] <= step
    except (json.JSONDecodeError, KeyError, TypeError):
        return False


def _comparable(cfg: TrainConfig) -> dict:
    """The configuration that must match to resume a run (not where it lives or its speed knobs)."""
    skip = {"out", "device", "compile", "threads"}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items() if k not in skip}


def main(argv=None):
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--config", default="cpu", choices=sorted(CONFIGS))
    defaults = CONFIGS[first.parse_known_args(argv)[0].config]
    parser = argparse.ArgumentParser(description="Train a GPT with a number encoding on the numeracy tasks.",
                                     parents=[first])
    for f in fields(TrainConfig):
        if f.name in ("tasks", "decades", "encoding_options"):
            continue
        flag, default = "--" + f.name.replace("_", "-"), getattr(defaults, f.name)
        if isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            kind = float if f.name == "tokens" else (int if f.name in ("context", "max_digits") else type(f.default))
            parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--tasks", default=",".join(defaults.tasks), help="comma-separated, e.g. addition,division")
    parser.add_argument("--decades", type=int, nargs=2, default=defaults.decades, metavar=("LOW", "HIGH"),
                        help="operand magnitudes 10**LOW ... 10**(HIGH+1) (default: the paper's -14 14)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    args = vars(parser.parse_args(argv))
    resume = args.pop("resume")
    args.pop("config")
    args["tasks"] = tuple(t for t in args["tasks"].split(",") if t)
    args["decades"] = tuple(args["decades"]) if args["decades"] else None
    out = train(TrainConfig(**args), resume=resume)
    if (out / "test_summary.csv").exists():
        print(pd.read_csv(out / "test_summary.csv").to_string(index=False))


if __name__ == "__main__":
    main()
