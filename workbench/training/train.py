"""Training loop (section 6, appendix C): flat, CPU first, CUDA and DDP when present. The command,
`python -m workbench.train` (workbench/train.py), reads its flags and calls `main` here.

    python -m workbench.train --encoding bittokens --tasks addition --preset cpu-small \
        --tokens 2e6 --decades 1 1 --max-digits 2 --out runs/add-bit
    torchrun --nproc_per_node 8 -m workbench.train --config paper --tasks addition,multiplication,...

Read top to bottom: `setup` (model, data, optimizers, balancer, curricula; resume), `train_step`
(one optimizer step over this rank's micro-batches), `save_checkpoint`, `final_test` (the best
weights answer the held-out test split), and `train`, which runs them, evaluating every
`--eval-every` steps (`adapt.evaluate_and_adapt`: the scores drive the task balancer, eq. 16, and
the curricula, C.3, and pick the best checkpoint, eq. 15). The settings are `config.TrainConfig`;
the run directory, its files and their provenance are workbench/runs/'s; `--resume` continues a
killed run and on a CPU gives the same loss curve.
"""

from __future__ import annotations

import gc
import json
import math
import os
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from .. import encoders, tasks
from ..config import CONFIGS, TrainConfig, command_line, from_args, recorded  # noqa: F401 (CONFIGS: train.CONFIGS too)
from ..measures.evaluate import evaluate, summarize
from ..measures.perplexity import perplexity, text_score
from ..model import numerics
from ..model.gpt import GPT
from ..runs import distributed
from ..runs.allocator import keep_freed_memory
from ..runs.atomic import write_atomic
from ..runs.checkpoints import BestWriter, load_weights
from ..runs.folder import Interrupted, fresh_run_dir, prepare, stop_line
from ..runs.locks import InUse, hold
from ..runs.logs import Logger, truncate_log
from ..runs.memory import check_memory
from ..runs.outputs import output_path
from ..runs.provenance import carried_provenance, device_of, environment
from ..tokenizer import Tokenizer
from .adapt import build_sampler, evaluate_and_adapt
from .balancing import LossNormalizer, TaskBalancer
from .batch_worker import ProcessLoader, WorkerSpec
from .batches import Batch, Loader, StepBuilder, prefetch_mode
from .curriculum import Sampler
from .data import make_pool, samples_per_step
from .loss import losses as step_losses
from .optim import apply_schedule, build_optimizers
from .trainer import Trainer


@dataclass
class Run(Trainer):
    """Everything one training process holds (a Trainer: what adapt.evaluate_and_adapt reads)."""

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
    state: dict  # step, best score (eq. 15), training seconds of earlier processes, warm evaluations
    accum: int = 1  # micro-batches per optimizer step
    prefetch: str = "off"  # where the next batch is built: off (in the step), thread, process (batches.prefetch_mode)
    weights_on_device: tuple = (None, None)  # (the loss weights, them as a device tensor)
    best_writer: BestWriter | None = None
    provenance: list = field(default_factory=list)  # the machines it trained on (provenance.carried_provenance)

    @property
    def warmup_steps(self) -> int:
        return round(self.cfg.optim.warmup_frac * self.total_steps)

    # the Trainer's methods (trainer.py)
    def answer(self, frames: dict) -> pd.DataFrame:
        """evaluate(), its batches shared out over the ranks (distributed.py)."""
        cap = self.cfg.evaluation.max_answer_tokens or None
        if self.world == 1:
            return evaluate(self.model, self.tok, frames, cap)
        return distributed.evaluate_shared(self.model, self.tok, frames, cap, self.rank, self.world)

    def perplexity(self, texts, progress: bool = False) -> dict:
        """perplexity(), its texts shared out over the ranks (distributed.py)."""
        if self.world == 1:
            return perplexity(self.model, self.tok, texts, progress=progress)
        return distributed.perplexity_shared(self.model, self.tok, texts, self.rank, self.world, progress)

    def has_best(self) -> bool:
        return self.best_writer.holds(self.out / "best.pt")

    def keep_best(self) -> None:
        self.best_writer.save(self.out / "best.pt", self.model.state_dict(), write=self.rank == 0)


def setup(cfg: TrainConfig, resume: bool = False) -> Run:
    """Build the run; with `resume`, restore it from OUT/checkpoint.pt."""
    numerics.ensure(cfg.run.numerics)  # before anything computes: a portable run is computed portably
    rank, world, device = distributed.start(device_of(cfg.run.device))
    accum = cfg.accumulation(world)
    if cfg.model.attention == "flex" and device.type != "cuda":
        raise ValueError(
            f"--attention flex trains on CUDA only (FlexAttention has no backward pass on {device.type} "
            "in this torch); use --attention auto or dense"
        )
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    if device.type == "cuda":  # float32 matmuls (the fused loss's, outside autocast) on the tensor cores, or
        # not: set either way, since a study's worker trains one run after another in one process
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = cfg.run.tf32
    out, ckpt = prepare(cfg, resume, rank)
    gpt_cfg = cfg.model.gpt()
    encoding = encoders.get(cfg.encoding, **cfg.encoding_options)
    tok = Tokenizer(encoding, vocab_size=cfg.model.vocab_size, bpe=cfg.model.text_bpe)
    check_memory(cfg, tok.vocab_size, tok, device)
    torch.manual_seed(cfg.seed)
    model = GPT(gpt_cfg, encoding, tok.vocab_size, tok.num_id, tok.piece_ids).to(device)
    if cfg.run.compile:
        model.compile_layers()
    # every parameter gets a gradient every step (the number head runs even on no rows), so DDP
    # needs no search for unused ones
    runner = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    tokens_per_step = cfg.batch_size * gpt_cfg.block_size * world * accum
    total_steps = max(1, math.ceil(cfg.tokens / tokens_per_step))
    data = cfg.data
    prefetch = prefetch_mode(cfg.run.prefetch, device.type)
    # built once, mapped by every rank, and with --prefetch process by its batch worker too
    with distributed.shared_pools(out / "pools", rank, world, keep=prefetch == "process"):
        pools = {t: make_pool(t, data.pool_size, tok, cfg.seed, "train", cfg.regime) for t in cfg.tasks}
        val = {t: make_pool(t, cfg.evaluation.val_samples, tok, cfg.seed, "val", cfg.regime).frame for t in cfg.tasks}
        sampler = build_sampler(cfg, encoding, tok, pools, total_steps)
    optimizers = build_optimizers(model, cfg.optim)
    balancer, normalizer = _balancing(cfg)
    run = Run(
        cfg=cfg,
        out=out,
        device=device,
        rank=rank,
        world=world,
        tok=tok,
        model=model,
        runner=runner,
        optimizers=optimizers,
        pools=pools,
        val=val,
        balancer=balancer,
        normalizer=normalizer,
        sampler=sampler,
        rng=np.random.default_rng(cfg.seed),
        total_steps=total_steps,
        tokens_per_step=tokens_per_step,
        per_step=samples_per_step(pools, cfg.batch_size * world * accum, gpt_cfg.block_size),
        state={"step": 0, "best": -1.0, "seconds": 0.0, "warm_evaluations": 0},
        accum=accum,
        prefetch=prefetch,
    )
    if resume:
        try:
            _restore(run, ckpt)
        except ValueError:
            if prefetch == "process" and rank == 0:  # no batch worker will map the kept pool files
                shutil.rmtree(out / "pools", ignore_errors=True)
            raise
    if rank == 0:
        write_atomic(out / "config.json", lambda tmp: Path(tmp).write_text(json.dumps(recorded(cfg), indent=1)))
        record = environment(cfg, device, run)
        write_atomic(out / "environment.json", lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1)))
        run.provenance = carried_provenance(ckpt, record, run.state["step"])  # kept in each checkpoint
        _describe(run)
    return run


def _balancing(cfg: TrainConfig) -> tuple[TaskBalancer, LossNormalizer]:
    """The task balancer of eq. 16 and the loss weights of C.4, as the balance settings ask."""
    b = cfg.balance
    prose = [t for t in cfg.tasks if tasks.get(t).answer == "text"]
    reference = (
        (prose[0] if prose else None) if b.loss_reference == "text" else (cfg.tasks[-1] if len(cfg.tasks) > 1 else None)
    )
    normalizer = LossNormalizer(
        cfg.tasks, b.adapt_warmup * cfg.tokens, reference, enabled=b.normalize_losses, momentum=b.loss_weight_momentum
    )
    balancer = TaskBalancer(
        cfg.tasks, lam=b.balance_lambda, max_ratio=b.max_task_ratio, floor=b.balance_floor, cap=b.ratio_cap
    )
    return balancer, normalizer


def _describe(run: Run) -> None:
    """The model as built, in honest numbers: a small text corpus stops the BPE short of --vocab-size."""
    n, bpe, m = sum(p.numel() for p in run.model.parameters()), run.tok.bpe.get_vocab_size(), run.cfg.model
    short = (
        "; GPT-2's BPE"
        if m.text_bpe == "gpt2"
        else f"; the BPE stopped at {bpe:,} of --vocab-size {m.vocab_size:,} (its corpus has no more merges)"
        if bpe < m.vocab_size
        else ""
    )
    print(
        f"model: {n / 1e6:.1f}M parameters, vocabulary {run.tok.vocab_size:,}{short}. A step: {run.world} "
        f"process(es) x {run.accum} micro-batch(es) x {run.cfg.batch_size} rows; {run.total_steps:,} steps"
    )


def train_step(run: Run, step: int, batches: list | None = None) -> dict[str, float]:
    """One optimizer step on this rank's micro-batches of `step` (drawn by the balancer's ratios
    and the curricula, `step_batches`, unless given), with the tasks' loss weights; its losses (and
    each task's loss, for the normalisation of C.4). They are read back once, at the end: the
    step's only host sync (docs/gpu.md)."""
    batches = batches if batches is not None else step_batches(run, step)
    if run.world > 1:
        batches = _global_counts(batches, run.device)
    weights = _loss_weights(run)
    lr = apply_schedule(run.optimizers, step, run.total_steps, run.cfg.optim)
    run.model.train()
    total = None
    for k, batch in enumerate(batches):  # gradient accumulation: DDP reduces after the last micro-batch
        with run.runner.no_sync() if run.world > 1 and k < len(batches) - 1 else nullcontext():
            with torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=run.cfg.run.bf16):
                batch = batch.to(run.device)
                losses = step_losses(run.model, batch, weights, hidden=run.runner(batch))
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
    run.normalizer.observe(*np.asarray(host[len(names) :]).reshape(2, -1))
    group_lrs = {f"lr/{g['name']}": g["lr"] for opt in run.optimizers for g in opt.param_groups}
    return {**dict(zip(names, host[: len(names)])), "lr": lr, **group_lrs}


def step_batches(run: Run, step: int) -> list[Batch]:
    """This rank's micro-batches of `step` with their number fields (batches.py), pinned for a GPU,
    built here: drawing moves the run's generator."""
    return step_builder(run).build(step, _task_counts(run), run.rng)


def step_builder(run: Run) -> StepBuilder:
    """How the run makes a step's batch (the same in its batch worker: `open_loader`)."""
    return StepBuilder(
        run.pools,
        run.sampler,
        run.cfg.batch_size * run.world * run.accum,
        run.model.cfg.block_size,
        run.tok.pad_id,
        run.tok.num_id,
        (run.rank, run.world),
        run.accum,
        run.model.number_head,
        run.model.token_module,
        pin=run.device.type == "cuda",
    )


def open_loader(run: Run, mode: str | None = None) -> Loader | ProcessLoader:
    """The run's loader for its --prefetch (or `mode`): batches built in the step ("off"), on a
    worker thread ("thread") or in a worker process ("process", which maps the pool files that
    `setup` kept for it). The process is sent the balancer's counts, the curricula and the data
    generator with every request and hands back the generator, so its batches are those built
    here, in the same order (batch_worker.py)."""
    mode = mode or run.prefetch
    if mode != "process":
        return Loader(lambda s: step_batches(run, s), ahead=mode == "thread")
    spec = WorkerSpec.of(step_builder(run), run.model.encoding, run.model.cfg.d_model, run.tok.piece_ids)
    pin = run.device.type == "cuda"
    return ProcessLoader(spec, lambda step: _data_state(run), lambda after: _adopt(run, after), pin=pin)


def _data_state(run: Run) -> dict:
    """What the batch worker needs of the run to build the next batch as `step_batches` would."""
    return {"counts": _task_counts(run), "curricula": run.sampler.curricula, "rng": run.rng.bit_generator.state}


def _adopt(run: Run, rng_state: dict) -> None:
    run.rng.bit_generator.state = rng_state  # the generator as the worker left it after the batch taken


def _global_counts(batches: list[Batch], device: torch.device) -> list[Batch]:
    """Each rank packed its own rows: the loss denominators are the sums of every rank's counts
    (an all-reduce on the device, which the host need not wait for)."""
    token = batches[0].token_count
    counts = torch.stack([batches[0].ce_count, batches[0].number_count] + ([token] if token is not None else []))
    counts = counts.to(device)
    dist.all_reduce(counts)
    counts.clamp_(min=1)
    extra = {"token_count": counts[2]} if token is not None else {}
    return [replace(b, ce_count=counts[0], number_count=counts[1], **extra) for b in batches]


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
    tasks_, balance = run.cfg.tasks, run.cfg.balance
    ratios = run.balancer.ratios if balance.balancing else None
    if ratios is None:
        return {t: math.ceil(run.per_step / len(tasks_)) for t in tasks_}
    if balance.balance_unit == "samples":
        return run.balancer.task_counts(run.per_step)
    return {t: math.ceil(ratios[t] * run.tokens_per_step / run.pools[t].mean_length) for t in tasks_}


def save_checkpoint(run: Run) -> None:
    """Weights, optimizers, balancer, curricula, random states and the step: all a resume needs;
    and the machines the run trained on, which a resume checks environment.json against."""
    run.best_writer.wait()  # the checkpoint's best score must be the one best.pt holds
    ckpt = {
        "model": run.model.state_dict(),
        "optimizers": [o.state_dict() for o in run.optimizers],
        "balancer": run.balancer.state_dict(),
        "normalizer": run.normalizer.state_dict(),
        "curricula": {t: c.state_dict() for t, c in run.sampler.curricula.items()},
        "rng": json.dumps(run.rng.bit_generator.state),
        "torch_rng": torch.get_rng_state(),
        "state": dict(run.state),
        "config": recorded(run.cfg),
        # where it was made, beside the state it describes: environment.json alone can be deleted or edited
        "provenance": run.provenance,
    }
    write_atomic(run.out / "checkpoint.pt", lambda tmp: torch.save(ckpt, tmp))


def _restore(run: Run, ckpt: dict) -> None:
    """Continue from the checkpoint: weights, optimizers, balancer, curricula, random states;
    the logs lose the rows written after the checkpoint. A checkpoint that does not fit this run
    (checkpoints.checkpoint_problem passed its shape) is a ValueError naming it, before training."""
    path = run.out / "checkpoint.pt"
    why = (
        f"{len(ckpt['optimizers'])} optimizer states for {len(run.optimizers)} optimizers"
        if len(ckpt["optimizers"]) != len(run.optimizers)
        else f"curricula of {sorted(ckpt['curricula'])} for {sorted(run.sampler.curricula)}"
        if set(ckpt["curricula"]) != set(run.sampler.curricula)
        else f"step {ckpt['state']['step']} of a run of {run.total_steps} steps"
        if ckpt["state"]["step"] > run.total_steps
        else ""
    )
    try:
        if why:
            raise ValueError(why)
        run.model.load_state_dict(ckpt["model"])
        for opt, state in zip(run.optimizers, ckpt["optimizers"]):
            opt.load_state_dict(state)
        run.balancer.load_state_dict(ckpt["balancer"])
        run.normalizer.load_state_dict(ckpt["normalizer"])
        for task, state in ckpt["curricula"].items():
            run.sampler.curricula[task].load_state_dict(state)
        run.rng.bit_generator.state = json.loads(ckpt["rng"])
        torch.set_rng_state(ckpt["torch_rng"])
    except (ValueError, RuntimeError, KeyError, TypeError, AttributeError, IndexError) as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
        raise ValueError(
            f"--resume: {path} does not fit this run ({lines[-1][:300]}); it is damaged or from "
            "another version of the workbench: start the run again with --overwrite"
        ) from None
    run.state = ckpt["state"]
    if run.rank == 0:
        for name in ("metrics.jsonl", "evals.jsonl"):
            truncate_log(run.out / name, run.state["step"])


def final_test(run: Run, started: float) -> pd.DataFrame:
    """The best weights answer the held-out test split (test_samples.csv, test_summary.csv); prose
    gets its perplexity over all tokens and over the text tokens only (Table 4's two rows). Every
    rank answers its share of the questions; rank 0 writes."""
    cfg = run.cfg
    run.best_writer.wait()
    distributed.barrier(run.world)  # rank 0 has written best.pt
    load_weights(run.model, run.out / "best.pt")
    test = {
        t: make_pool(t, cfg.evaluation.test_samples, run.tok, cfg.seed, "test", cfg.regime).frame for t in cfg.tasks
    }
    questions = {t: frame for t, frame in test.items() if tasks.get(t).score is not None}
    parts = []
    if questions:
        samples = run.answer(questions)
        if run.rank == 0:
            write_atomic(run.out / "test_samples.csv", lambda tmp: samples.to_csv(tmp, index=False))
        parts.append(summarize(samples))
    for task in [t for t in test if t not in questions]:
        ppl = run.perplexity(test[task]["answer"], progress=run.rank == 0)
        parts.append(
            pd.DataFrame(
                [
                    {
                        "task": task,
                        "score": text_score(ppl["ppl_all"]),
                        "n": len(test[task]),
                        "ppl_all": ppl["ppl_all"],
                        "ppl_text": ppl["ppl_text"],
                    }
                ]
            )
        )
    summary = pd.concat(parts, ignore_index=True).assign(
        encoding=cfg.encoding, seed=cfg.seed, train_seconds=time.time() - started
    )
    if run.rank == 0:
        write_atomic(run.out / "test_summary.csv", lambda tmp: summary.to_csv(tmp, index=False))
    return summary


def train(cfg: TrainConfig, resume: bool = False, on_eval=None) -> Path:
    """Train, evaluate on the test split, return the run directory. `on_eval(row)` is called
    with every evaluation row (live plots in notebooks)."""
    output_path(cfg.run.out, "out")  # the library's own check too: notebook 03's options={"out": "results"}
    with hold(cfg.run.out) if int(os.environ.get("RANK", 0)) == 0 else nullcontext():  # one writer per run directory
        return _train(cfg, resume, on_eval)


def _train(cfg: TrainConfig, resume: bool, on_eval) -> Path:
    run = setup(cfg, resume)
    keep_freed_memory(run.device)  # the steps reuse their memory instead of faulting in fresh pages
    gc.freeze()  # the pools' objects live all run: the cyclic collector need not walk them again and again
    start = run.state["step"]
    log = Logger(run.out, run.rank, start if resume else 0)
    if run.rank == 0:
        print(f"run directory: {run.out}")
        if resume:
            print(f"resuming {run.out} from step {start} of {run.total_steps}")
    bar = tqdm(
        range(start, run.total_steps), initial=start, total=run.total_steps, desc=cfg.encoding, disable=run.rank != 0
    )
    checkpoint = start if resume else None  # the step of the checkpoint a resume would continue from
    started = time.time() - run.state["seconds"]  # a resumed run's clock goes on
    run.best_writer = BestWriter()
    eval_every, checkpoint_every = cfg.evaluation.eval_every, cfg.run.checkpoint_every
    loader = None
    try:
        try:
            loader = open_loader(run)
        finally:
            if run.prefetch == "process":  # the pool files, once every batch worker has mapped them
                distributed.drop_shared_pools(run.out / "pools", run.rank, run.world)
        for step in bar:
            batches = loader.get(step)
            last = step + 1 == run.total_steps
            evaluates, saves = (step + 1) % eval_every == 0 or last, (step + 1) % checkpoint_every == 0 or last
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
            if saves:
                checkpoint = step + 1
        summary = final_test(run, started)
        log.test(summary, run.total_steps)
    except KeyboardInterrupt:  # checkpoint.pt is the last one written whole (write_atomic): a resume starts there
        raise Interrupted(run.out, run.state["step"], run.total_steps, checkpoint) from None
    finally:
        bar.close()
        if loader is not None:
            loader.close()
        run.best_writer.close()
        log.close()
        gc.unfreeze()  # a process that trains again (a study worker, a notebook) collects this run's garbage
    distributed.barrier(run.world)  # every rank returns after rank 0 wrote the test results
    if run.rank == 0:  # the start's "run directory:" line has scrolled away behind the bar by now
        print(f"finished: {run.out}")
    return run.out


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    flags, args, defaults = command_line(argv)
    try:
        cfg = from_args(args, defaults)
    except ValueError as err:
        flags.error(str(err))
    try:
        if "out" in args:  # checked once, written where the check resolved it (outputs.py)
            cfg = cfg.updated(out=str(output_path(cfg.run.out, "--out")))
        else:  # no --out: a fresh folder, so that a second quick run is not refused
            cfg = cfg.updated(out=str(fresh_run_dir(output_path("runs", "--out (not given: runs/train-DATE-TIME)"))))
        out = train(cfg, resume=args["resume"])
    except (ValueError, OSError, InUse, MemoryError) as err:  # refused before training, or a full disk
        flags.fail(err)
    except KeyboardInterrupt as stop:  # Ctrl-C: one line, no traceback; 130, the shell's code for SIGINT
        if int(os.environ.get("RANK", 0)) == 0:
            print(f"\n{stop_line(stop, argv, cfg.run.out)}", file=sys.stderr)
        sys.exit(130)
    if (out / "test_summary.csv").exists():
        print(pd.read_csv(out / "test_summary.csv").to_string(index=False))
