"""Fine-tuning a Hugging Face causal LM with a number encoding on the workbench's tasks.
(Over 500 lines: the retrofit's settings, loop, low-precision master weights and command line.)

    python -m workbench.retrofit --model PATH --encoding bittokens --tasks multiplication --tokens 2e5 --out DIR
    python -m workbench.retrofit --model PATH --encoding none ...     # baseline: the model's own digit tokens
    python -m workbench.retrofit --model PATH --encoding fone --lora  # adapters + the number path only

The recipe is the workbench's (`workbench.train`) on the model's own architecture: the tasks'
pools and splits, the difficulty curriculum of C.3 (BitTokens on binary pools first, A.3), the
task balancer of eq. 16 and C.4's loss normalisation, C.1's per-token loss, the best checkpoint by
eq. 15's harmonic mean of the validation scores, the held-out test split scored by each task's
rule. What differs: one sample per row, right-padded (any model's attention takes a padding mask,
few take a block-diagonal one, so samples are not packed); AdamW with `lr` for the model (or its
adapters) and `head_lr` for the number head; the budget counts the samples' tokens, not padding.
The same data and budget for every encoding, `none` included: only the tokenizer's reading of the
numbers differs. How <|num|> is joined to the model (issue 68) is chosen by `--num-init` (its rows
start at the digits' mean), `--digit-mass` (the digits' probability is <|num|>'s) and `--frame` (a
question ends in " = "); joining.py, model.py and tokens.py say why, retrofit.json records them.

Language is kept by mixing text into every step: `--text-share` (0.25) of each step's tokens are
chunks of the text source's training documents (the shipped corpus by default), the number tasks
share the rest by the balancer; the text is the loss normaliser's reference task, as in the
authors' multi-task runs. `perplexity.csv` measures held-out documents before and after.

`--dtype` is the dtype of the model's body while it trains and in the saved folder: float32 (the
default), bfloat16, float16 or auto (as the folder stores it). A low-precision body trains on
float32 master weights (AdamW steps a float32 copy, which is rounded into the body after every
step, so updates smaller than the body's precision accumulate instead of vanishing); float16 also
uses a dynamic loss scale. The number head and its loss are float32 whatever the body is.

One run at a time per --out (`locks.hold`: a second run into the same folder is refused).
`--overwrite` writes the new run into OUT/.new-PID beside the old one and moves it into place
only once it is complete; a failed run leaves the old one as it was. A --model inside --out is refused (the overwrite would delete it).

OUT holds model/ (the fine-tuned model: `NumberLM.from_pretrained("OUT/model")`), retrofit.json
(the configuration), metrics.jsonl (one row per step), evals.jsonl (one per evaluation),
test_samples.csv, test_summary.csv (score and exact match per task) and perplexity.csv (held-out
text before and after fine-tuning: does the retrofit hurt language?).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .. import tasks
from ..cli import encoding_options
from ..config import from_flags, recorded
from ..measures.evaluate import evaluate, summarize
from ..measures.perplexity import windows
from ..runs.allocator import keep_freed_memory
from ..runs.atomic import write_atomic
from ..runs.locks import InUse, hold
from ..runs.outputs import check_run_folder, output_path
from ..runs.provenance import device_of, environment
from ..training.adapt import build_sampler, evaluate_and_adapt
from ..training.balancing import LossNormalizer, TaskBalancer
from ..training.data import draw, make_pool
from ..training.optim import lr_multiplier
from ..training.trainer import Trainer
from . import plan
from .config import SKIPPED, RetrofitConfig, command_line, encoding_choices  # noqa: F401 (finetune's names before)
from .hub import resolve_model
from .model import BASELINE, NumberLM

RUN_FILES = (
    "retrofit.json",
    "environment.json",
    "metrics.jsonl",
    "evals.jsonl",
    "test_samples.csv",
    "test_summary.csv",
    "perplexity.csv",
    "model",
)


TEXT = "text"  # the text task the --text-share draws from
# Positions one forward pass holds at most. The step's gradient is the sum over its groups either
# way, while the backward pass keeps every position's activations of every layer: for a pretrained
# model a step of thousands of positions in one pass holds gigabytes to gain no speed on a CPU,
# whose matrix products are as fast on a thousand rows (docs/retrofit.md, issue 65).
GROUP_TOKENS = 1024


@dataclass
class Job(Trainer):
    """Everything one fine-tuning run holds (a Trainer: what adapt.evaluate_and_adapt reads)."""

    cfg: RetrofitConfig
    out: Path  # where this run writes (beside --out while it replaces an earlier run)
    lm: NumberLM
    optimizer: torch.optim.Optimizer
    pools: dict  # the tasks' training pools, then the text pool (with --text-share)
    val: dict
    sampler: object
    balancer: TaskBalancer
    normalizer: LossNormalizer
    rng: np.random.Generator
    total_steps: int
    context: int
    best: dict  # the step and the trainable weights of the best evaluation so far
    master: MasterWeights | None = None
    state: dict = field(default_factory=lambda: {"best": -math.inf, "warm_evaluations": 0})  # adapt's
    step: int = 0  # of the latest evaluation

    # the Trainer's members that are not fields (training/trainer.py)
    @property
    def tokens_per_step(self) -> int:
        return self.cfg.batch_tokens

    @property
    def warmup_steps(self) -> int:
        return round(self.cfg.warmup_frac * self.total_steps)

    def answer(self, frames: dict, progress: str | None = "validation") -> pd.DataFrame:
        return evaluate(self.lm, self.lm.tok, frames, self.cfg.evaluation.max_answer_tokens or None, progress=progress)

    def perplexity(self, texts) -> dict:
        return perplexity(self.lm, texts, self.context)

    def has_best(self) -> bool:
        return self.best["weights"] is not None

    def keep_best(self) -> None:
        self.best = {"step": self.step + 1, "weights": trainable_state(self.lm)}


class MasterWeights:
    """float32 master copies of a low-precision body's trainable weights: the optimizer steps the
    copies, which are rounded into the body after every step (bf16 keeps 8 significant bits, so
    lr x update would mostly round away in the body itself). float16 bodies also get a dynamic
    loss scale: a step whose gradients overflow is skipped and the scale halved; after 200 good
    steps it doubles."""

    def __init__(self, params: list[torch.nn.Parameter], dtype: torch.dtype):
        self.pairs = [(p, p.detach().float().clone().requires_grad_(True)) for p in params]
        self.scale = 2.0**14 if dtype == torch.float16 else 1.0
        self.good = 0

    @property
    def copies(self) -> list[torch.Tensor]:
        return [m for _, m in self.pairs]

    def backward(self, loss: torch.Tensor) -> None:
        (loss * self.scale).backward()

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        """Unscaled float32 gradients onto the copies, one optimizer step, the copies rounded into
        the body; False (no step) when a gradient overflowed."""
        finite = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p, _ in self.pairs)
        if finite:
            for p, m in self.pairs:
                m.grad = None if p.grad is None else p.grad.float() / self.scale
            optimizer.step()
            with torch.no_grad():
                for p, m in self.pairs:
                    p.copy_(m)
        for p, m in self.pairs:
            p.grad, m.grad = None, None
        if self.scale != 1.0:
            self.good = self.good + 1 if finite else 0
            if not finite:
                self.scale /= 2
            elif self.good % 200 == 0:
                self.scale *= 2
        return finite


def load_lm(cfg: RetrofitConfig) -> NumberLM:
    """The model of --model retrofitted with --encoding (and LoRA), on --device; writes nothing."""
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    torch.manual_seed(cfg.seed)  # the new token rows and the number head
    encoding = None if cfg.encoding == BASELINE else cfg.encoding
    lm = NumberLM.from_pretrained(
        cfg.model,
        encoding,
        cfg.encoding_options if encoding else None,
        dtype=cfg.dtype,
        num_init=cfg.num_init,
        digit_mass=cfg.digit_mass,
        frame=cfg.frame,
    )
    if cfg.lora:
        lm.add_lora(cfg.lora_rank, cfg.lora_alpha)
    lm.loss_logits = cfg.loss_logits
    return lm.to(device_of(cfg.run.device))


def setup(cfg: RetrofitConfig, out: Path | None = None, lm: NumberLM | None = None) -> Job:
    """Build the pools, curricula, balancer and optimizer for `lm` (default: load_lm(cfg)); the
    run writes into `out` (default --out)."""
    out = Path(out or cfg.run.out)
    lm = lm if lm is not None else load_lm(cfg)
    out.mkdir(parents=True, exist_ok=True)
    write_settings(cfg, out)
    pool_size, val_samples = cfg.data.pool_size, cfg.evaluation.val_samples
    plan.announce("pools", f"{plan.pool_samples(cfg):,} samples generated and tokenized", plan.pool_seconds(cfg))
    pools = {t: make_pool(t, pool_size, lm.tok, cfg.seed, "train", cfg.regime) for t in cfg.tasks}
    val = {t: make_pool(t, val_samples, lm.tok, cfg.seed, "val", cfg.regime).frame for t in cfg.tasks}
    total_steps = max(1, math.ceil(cfg.tokens / cfg.batch_tokens))
    sampler = build_sampler(cfg, lm.tok.encoding or OwnDigits(), lm.tok, pools, total_steps)
    if cfg.text_share:
        pools[TEXT] = make_pool(TEXT, cfg.text_pool_size, lm.tok, cfg.seed, "train", cfg.regime)
    b = cfg.balance
    prose = [t for t in pools if tasks.get(t).answer == "text"]
    reference = (
        (prose[0] if prose else None) if b.loss_reference == "text" else (list(pools)[-1] if len(pools) > 1 else None)
    )
    normalizer = LossNormalizer(
        list(pools), b.adapt_warmup * cfg.tokens, reference, enabled=b.normalize_losses, momentum=b.loss_weight_momentum
    )
    balancer = TaskBalancer(
        cfg.tasks, lam=b.balance_lambda, max_ratio=b.max_task_ratio, floor=b.balance_floor, cap=b.ratio_cap
    )
    head = list(lm.head.parameters()) if lm.head is not None else []
    body = [p for p in lm.hf.parameters() if p.requires_grad]
    low = [p for p in body if p.dtype != torch.float32]
    master = MasterWeights(low, low[0].dtype) if low else None
    if master is not None:
        body = [p for p in body if p.dtype == torch.float32] + master.copies
    optimizer = torch.optim.AdamW(
        [
            {"params": body, "lr": cfg.lr, "initial_lr": cfg.lr},
            {"params": head, "lr": cfg.head_lr, "initial_lr": cfg.head_lr},
        ],
        betas=(0.9, 0.95),
        weight_decay=0.0,
    )
    context = min(cfg.context, lm.max_positions or cfg.context)
    return Job(
        cfg=cfg,
        out=out,
        lm=lm,
        optimizer=optimizer,
        pools=pools,
        val=val,
        sampler=sampler,
        balancer=balancer,
        normalizer=normalizer,
        rng=np.random.default_rng(cfg.seed),
        total_steps=total_steps,
        context=context,
        best={"step": None, "weights": None},
        master=master,
    )


def provenance(cfg: RetrofitConfig) -> dict:
    """What made the run beside its settings: the workbench's commit, the machine and its kernels,
    the libraries (runs.provenance.environment's), and the Hugging Face libraries that load the model."""
    from importlib.metadata import version

    return {**environment(cfg), **{name: version(name) for name in ("transformers", "peft", "safetensors")}}


class OwnDigits:
    """What the curriculum asks of the baseline's encoding: numbers in decimal digits (A.3)."""

    difficulty_base = 10


def rows(samples, pad_id: int, context: int) -> dict[str, torch.Tensor]:
    """Samples (ids, values, loss_mask, task index), each cut to context + 1 tokens, one per row,
    right-padded: inputs, their next-token targets and which targets are learned."""
    samples = [(i[: context + 1], v[: context + 1], m[: context + 1], t) for i, v, m, t in samples]
    width = max(len(s[0]) for s in samples)
    shape = (len(samples), width)
    ids, values = np.full(shape, pad_id, dtype=np.int64), np.zeros(shape)
    mask, real, task = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool), np.zeros(shape, dtype=np.int64)
    for r, (i, v, m, t) in enumerate(samples):
        ids[r, : len(i)], values[r, : len(i)], mask[r, : len(i)], real[r, : len(i)], task[r] = i, v, m, True, t
    t = torch.from_numpy
    return {
        "ids": t(ids[:, :-1]),
        "values": t(values[:, :-1]),
        "attention_mask": t(real[:, :-1]).long(),
        "targets": t(ids[:, 1:]),
        "target_values": t(values[:, 1:]),
        "loss_mask": t(mask[:, 1:] & real[:, 1:]),
        "task_ids": t(task[:, 1:]),
    }


def train_step(job: Job, step: int) -> dict[str, float]:
    """Draw samples by the balancer's token shares (and the curricula), one AdamW step with the
    tasks' loss weights; its losses."""
    cfg, lm = job.cfg, job.lm
    ratios = job.balancer.ratios if cfg.balance.balancing else {t: 1 / len(cfg.tasks) for t in cfg.tasks}
    numbers = cfg.batch_tokens * (1 - cfg.text_share)
    counts = {t: math.ceil(ratios[t] * numbers / job.pools[t].mean_length) for t in cfg.tasks}
    if cfg.text_share:  # a text chunk is long: rounded at random, so the share holds on average
        expected = cfg.text_share * cfg.batch_tokens / job.pools[TEXT].mean_length
        counts[TEXT] = int(expected) + int(job.rng.random() < expected - int(expected))

    def pick(task, n, rng):
        if task == TEXT and cfg.text_share:
            return [job.pools[TEXT].samples[i] for i in rng.integers(0, len(job.pools[TEXT].samples), n)]
        return job.sampler.sample(task, n, step, rng)

    samples = [s for s in draw(job.pools, counts, job.rng, pick) if s[2][1:].any()]  # cut text may learn nothing
    mult = lr_multiplier(step, job.total_steps, cfg.warmup_frac)
    for group in job.optimizer.param_groups:
        group["lr"] = group["initial_lr"] * mult
    weights = torch.tensor(job.normalizer.weights, dtype=torch.float32, device=lm.device)
    lm.train()
    groups = length_groups(samples, job.context, min(cfg.batch_tokens, GROUP_TOKENS))
    targets = sum(int(s[2][1 : job.context + 1].sum()) for s in samples)
    logged = {"loss": 0.0, "ce": 0.0}
    task_loss = task_tokens = number_sum = numbers = 0
    for group in groups:  # gradients accumulate: the sum over groups is the mean over the whole step
        batch = {k: v.to(lm.device) for k, v in rows(group, lm.tok.pad_id, job.context).items()}
        share = int(batch["loss_mask"].sum()) / targets
        with torch.autocast(lm.device.type, dtype=torch.bfloat16, enabled=cfg.run.bf16):
            losses = lm(**batch, task_weights=weights)
        (job.master.backward if job.master is not None else torch.Tensor.backward)(losses["loss"] * share)
        for key in logged:
            logged[key] += share * float(losses[key].detach())
        # the number loss is a mean over the group's numbers, not its targets: weighted by them,
        # so that the step's figure does not depend on how the step is cut into groups
        number_sum += float(losses["number"]) * losses.get("numbers", 0)
        numbers += losses.get("numbers", 0)
        task_loss = task_loss + losses["task_loss"].double().cpu().numpy()
        task_tokens = task_tokens + losses["task_tokens"].double().cpu().numpy()
    if job.master is None:
        job.optimizer.step()
    else:
        job.master.step(job.optimizer)
    job.optimizer.zero_grad(set_to_none=True)
    job.normalizer.observe(task_loss, task_tokens)
    return {
        **logged,
        "number": number_sum / max(1, numbers),
        "lr": cfg.lr * mult,
        "tokens": int(sum(len(s[0]) for s in samples)),
        "rows": len(samples),
        "groups": len(groups),
    }


def length_groups(samples, context: int, batch_tokens: int) -> list[list]:
    """The samples in groups of similar length, each padded to at most ~batch_tokens positions:
    one long text chunk among short questions would otherwise pad every row to its length."""
    ordered = sorted(samples, key=lambda s: len(s[0]))
    groups, current = [], []
    for sample in ordered:
        width = min(len(sample[0]), context + 1)
        if current and (len(current) + 1) * width > batch_tokens:
            groups.append(current)
            current = []
        current.append(sample)
    return groups + [current] if current else groups


def trainable_state(lm: NumberLM) -> dict[str, torch.Tensor]:
    """A copy of every trained weight (all of them; with LoRA the adapters, rows and head)."""
    return {n: p.detach().cpu().clone() for n, p in lm.named_parameters() if p.requires_grad}


@torch.no_grad()
def perplexity(
    lm: NumberLM, texts, context: int, rows_per_batch: int | None = None, progress: str | None = None
) -> dict:
    """Perplexity of held-out text, each chunk as it is (no markers: the model before fine-tuning
    never saw them), cut into windows of `context` targets: ppl_all over every target token,
    ppl_text over those that do not write a number (`RetrofitTokenizer.numeric`). `progress`: the
    description of a bar over the windows."""
    samples = []
    for text in texts:
        ids, values = lm.tok.encode(text)
        samples.append((ids, values, lm.tok.numeric(ids)))
    pieces = [w for w in windows(samples, context) if len(w[0]) > 1]
    sums, counts = np.zeros(2), np.zeros(2, dtype=np.int64)
    # rows whose logits stay near 2**24 values (64 MB in float32): a 49k vocabulary, one row of 512
    rows_per_batch = rows_per_batch or max(1, min(16, 2**24 // (context * lm.tok.vocab_size)))
    lm.eval()
    starts = range(0, len(pieces), rows_per_batch)
    for start in starts if progress is None else tqdm(starts, desc=progress, unit="batch"):
        group = pieces[start : start + rows_per_batch]
        batch = rows([(i, v, np.ones(len(i), bool), 0) for i, v, _ in group], lm.tok.pad_id, context)
        numeric = torch.zeros_like(batch["targets"], dtype=torch.bool)
        for r, (_, _, n) in enumerate(group):
            numeric[r, : len(n) - 1] = torch.from_numpy(n[1:])
        out = lm.run(*(batch[k].to(lm.device) for k in ("ids", "values", "attention_mask")))
        m = batch["loss_mask"].to(lm.device)
        ce = lm.token_losses(out.logits[m].double(), batch["targets"].to(lm.device)[m], batch["ids"].to(lm.device)[m])
        text = ~numeric.to(lm.device)[m]
        sums += [ce.sum().item(), ce[text].sum().item()]
        counts += [len(ce), int(text.sum())]
    return {
        "ppl_all": math.exp(sums[0] / counts[0]),
        "ppl_text": math.exp(sums[1] / counts[1]),
        "tokens": int(counts[0]),
        "text_tokens": int(counts[1]),
    }


def write_settings(cfg: RetrofitConfig, out: Path) -> None:
    """retrofit.json (the settings) and environment.json (what made the run) into `out`."""
    write_atomic(out / "retrofit.json", lambda tmp: Path(tmp).write_text(json.dumps(recorded(cfg), indent=1)))
    write_atomic(out / "environment.json", lambda tmp: Path(tmp).write_text(json.dumps(provenance(cfg), indent=1)))


def answer_test(lm: NumberLM, cfg: RetrofitConfig, out: Path, common: dict, seconds: float) -> None:
    """`lm` answers the run's held-out test questions of every scored task: test_samples.csv and
    test_summary.csv in `out`, each row with the `common` columns (and `seconds` of training)."""
    scored = [t for t in cfg.tasks if tasks.get(t).score is not None]
    if not scored:
        return
    test = {t: make_pool(t, cfg.evaluation.test_samples, lm.tok, cfg.seed, "test", cfg.regime).frame for t in scored}
    questions = sum(len(f) for f in test.values())
    params = sum(p.numel() for p in lm.hf.parameters())
    plan.announce("test", f"{questions:,} held-out questions answered", plan.answer_seconds(questions, params))
    samples = evaluate(lm, lm.tok, test, cfg.evaluation.max_answer_tokens or None, progress="test").assign(**common)
    write_atomic(out / "test_samples.csv", lambda tmp: samples.to_csv(tmp, index=False))
    summary = summarize(samples).assign(**common, train_seconds=seconds)
    write_atomic(out / "test_summary.csv", lambda tmp: summary.to_csv(tmp, index=False))


def final_test(job: Job, texts: list[str], before: dict | None, seconds: float) -> None:
    """The best weights are saved (OUT/model) and answer the held-out test split; the text's
    perplexity after fine-tuning beside the one before."""
    cfg, lm = job.cfg, job.lm
    if job.best["weights"] is not None:
        lm.load_state_dict(job.best["weights"], strict=False)
    plan.announce("saving", f"the best weights (step {job.best.get('step')}) into {job.out / 'model'}")
    lm.save_pretrained(job.out / "model", overwrite=True)
    common = dict(encoding=cfg.encoding, lora=cfg.lora, seed=cfg.seed, best_step=job.best.get("step"))
    answer_test(lm, cfg, job.out, common, seconds)
    if before is not None:
        params = sum(p.numel() for p in lm.hf.parameters())
        plan.announce("perplexity after", f"{len(texts)} held-out text chunks", plan.perplexity_seconds(cfg, params))
        after = perplexity(lm, texts, job.context, progress="perplexity after")
        table = pd.DataFrame([dict(when="before", **before), dict(when="after", **after)]).assign(**common)
        write_atomic(job.out / "perplexity.csv", lambda tmp: table.to_csv(tmp, index=False))


def zero_shot(cfg: RetrofitConfig) -> Path:
    """The model as it loads, untrained, answers the run's held-out test questions (the same ones a
    fine-tuned run of this seed answers): a reference for what fine-tuning adds. Writes
    retrofit.json, environment.json, test_samples.csv and test_summary.csv into --out."""
    out = output_path(cfg.run.out, "--out")
    params = plan.model_params(str(resolve_model(cfg.model)))  # a packaged model is converted here, once
    plan.announce("loading", f"{cfg.model} with {cfg.encoding}", plan.loading_seconds(params))
    lm = load_lm(cfg)
    out.mkdir(parents=True, exist_ok=True)
    with hold(out):
        write_settings(cfg, out)
        answer_test(lm, cfg, out, dict(encoding=cfg.encoding, lora=False, seed=cfg.seed, best_step=0), 0.0)
    return out


def _append(path: Path, row: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def finetune(cfg: RetrofitConfig, on_eval=None) -> Path:
    """Fine-tune, save the best weights, test; return the run directory (--out). `on_eval(row)`
    is called with every evaluation row. The run holds --out's lock throughout; with --overwrite
    it is written inside --out beside the old run and replaces it only once it is complete."""
    out = output_path(cfg.run.out, "--out")  # never results/ or the checkout (outputs.py)
    check_run_folder(out, RUN_FILES)
    model = resolve_model(cfg.model)  # a packaged model is converted here, once
    if out.resolve() == model.resolve() or out.resolve() in model.resolve().parents:
        raise ValueError(
            f"--model {cfg.model} lies inside --out {out}: the run would replace the model it starts "
            "from; copy the model elsewhere or choose another --out"
        )
    _refuse_existing(out, cfg.run.overwrite)
    params = plan.model_params(str(model))
    plan.announce("loading", f"{cfg.model} with {cfg.encoding}", plan.loading_seconds(params))
    lm = load_lm(cfg)  # a model that cannot be loaded writes nothing, not even the lock
    try:
        with hold(out):
            existing = _refuse_existing(out, cfg.run.overwrite)  # again, now that no other run can start
            if not existing:
                return _run(cfg, out, on_eval, lm)
            # the new run is written inside the locked folder, beside the old one, and takes its
            # place only once it is complete (the folder itself, holding the lock, never moves)
            staging, old = out / f".new-{os.getpid()}", out / f".old-{os.getpid()}"
            shutil.rmtree(staging, ignore_errors=True)
            try:
                _run(cfg, staging, on_eval, lm)
                old.mkdir(exist_ok=True)
                for name in existing:
                    (out / name).rename(old / name)
                for name in RUN_FILES:
                    if (staging / name).exists():
                        (staging / name).rename(out / name)
                shutil.rmtree(old, ignore_errors=True)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            return out
    except InUse as error:
        raise ValueError(f"--out {out}: another run is writing into it ({error})") from None


def _refuse_existing(out: Path, overwrite: bool) -> list[str]:
    existing = [n for n in RUN_FILES if (out / n).exists()]
    if existing and not overwrite:
        raise FileExistsError(
            f"{out} already holds a run ({', '.join(existing)}): pass --overwrite or choose a new --out"
        )
    return existing


def _run(cfg: RetrofitConfig, out: Path, on_eval, lm: NumberLM) -> Path:
    job = setup(cfg, out, lm)
    keep_freed_memory(job.lm.device)  # the steps reuse their memory instead of faulting in fresh pages
    texts = (
        list(tasks.generate("text", cfg.text_samples, cfg.seed, "test", regime=cfg.regime)["answer"])
        if cfg.text_samples
        else []
    )
    params = sum(p.numel() for p in job.lm.hf.parameters())
    if texts:
        plan.announce("perplexity before", f"{len(texts)} held-out text chunks", plan.perplexity_seconds(cfg, params))
    before = perplexity(job.lm, texts, job.context, progress="perplexity before") if texts else None
    started, seen = time.time(), 0
    plan.announce(
        "training",
        f"{job.total_steps:,} step{'s' * (job.total_steps != 1)} of {cfg.batch_tokens:,} tokens, "
        f"validation every {cfg.evaluation.eval_every}",
        plan.train_seconds(cfg, params),
    )
    bar = tqdm(range(job.total_steps), desc=f"retrofit {cfg.encoding}")
    for step in bar:
        parts = train_step(job, step)
        seen += parts["tokens"]
        bar.set_postfix(loss=f"{parts['loss']:.3f}")
        _append(job.out / "metrics.jsonl", {"step": step + 1, **parts, "time": time.time() - started})
        if (step + 1) % cfg.evaluation.eval_every == 0 or step + 1 == job.total_steps:
            job.step = step
            lr = lr_multiplier(step, job.total_steps, cfg.warmup_frac)
            row = {**evaluate_and_adapt(job, step, lr, parts["loss"]), "tokens": seen}
            _append(job.out / "evals.jsonl", row)
            if on_eval:
                on_eval(row)
    final_test(job, texts, before, time.time() - started)
    return job.out


def main(argv=None) -> None:
    if plan.dry_run(argv):
        return
    parser, args = command_line(argv)
    try:
        cfg = from_flags(
            args, RetrofitConfig(model="-"), skip=SKIPPED, encoding_options=encoding_options(args["encoding_option"])
        )
        out = finetune(cfg.updated(out=str(output_path(cfg.run.out, "--out"))))  # where the check resolved it
    except (ValueError, FileExistsError) as err:
        parser.fail(err)
    except KeyboardInterrupt:
        parser.exit(130, "interrupted: --out keeps the run it held before\n")
    for name in ("test_summary.csv", "perplexity.csv"):
        if (out / name).exists():
            print(pd.read_csv(out / name).to_string(index=False))
    print(f"fine-tuned model: {out / 'model'}")
