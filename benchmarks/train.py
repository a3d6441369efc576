"""Training throughput: our GPT (RoPE, QK-norm, packed-sample attention, number head, Muon + Adam)
beside a plain reference GPT of the same size written here (nn.Linear attention + MLP, learned
positions, LayerNorm, GELU, causal attention over the whole row), in one run. The plain GPT trains
twice: with AdamW, as nanoGPT does, and with our optimizer groups (Muon + Adam, workbench.training.optim),
so that the model and the optimizer each show their share.

All runs train on the same batches, drawn as the training loop draws them (task pools of the
tokenizer, packed rows, question tokens masked out of the loss), and on a synthetic batch where
every target is learned and samples are 40 tokens long (the least our model can skip):

    addition       BitTokens training rows of the addition task (must-show 1 of issue 4)
    numeric        the nine numeric tasks, equal sample counts
    numeric+text   the nine tasks and the text task (text samples fill most of the tokens)
    synthetic      random tokens, a <|num|> every 9th, 40-token samples, every target learned

The plain GPT does what nanoGPT does with such rows: it attends across sample boundaries and
computes the logits of every position, then ignores the masked ones in the loss. Ours computes the
lm head only where there is a loss and skips the keys its packed-sample mask hides.

Prints tokens/s (median over timed steps after warm-up, the three runs interleaved step by step,
each step on a new batch), our ratio to each reference run, and how a step splits into forward +
backward and the optimizer step. bf16 autocast is timed on the first data set only, with its own
smaller step count: CPUs without bf16 matrix units run it ~25x slower.

    python benchmarks/train.py [--encoding bittokens] [--data addition numeric numeric+text synthetic]
                               [--preset cpu-small] [--batch 16] [--steps 12] [--bf16-steps 3]
                               [--warmup 1] [--precisions fp32 bf16] [--threads N] [--malloc kept]
"""

import argparse
import math
import os
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from workbench import encoders
from workbench.model.gpt import GPT, preset
from workbench.runs.allocator import keep_freed_memory
from workbench.tasks import numeric
from workbench.tokenizer import Tokenizer
from workbench.training.batches import number_fields
from workbench.training.data import make_pool, next_batch, samples_per_step
from workbench.training.loss import losses as step_losses
from workbench.training.optim import apply_schedule, build_optimizers

MIXES = {"addition": ["addition"], "numeric": numeric(), "numeric+text": numeric() + ["text"]}
OURS = "ours, Muon + Adam"


class ReferenceBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class ReferenceGPT(nn.Module):
    def __init__(self, cfg, vocab):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, cfg.d_model), nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.Sequential(*[ReferenceBlock(cfg.d_model, cfg.n_head) for _ in range(cfg.n_layer)])
        self.ln, self.head = nn.LayerNorm(cfg.d_model), nn.Linear(cfg.d_model, vocab, bias=False)

    def param_groups(self):
        """The groups of workbench.training.optim: Muon for the blocks' matrices, Adam for the rest."""
        groups = {
            "hidden": [],
            "embedding": [self.wte.weight, self.wpe.weight],
            "head": [self.head.weight],
            "scalar": [],
        }
        for p in [*self.blocks.parameters(), *self.ln.parameters()]:
            groups["hidden" if p.ndim == 2 else "scalar"].append(p)
        return groups

    def forward(self, ids, targets):
        """Mean cross-entropy over the targets that are not -1."""
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        logits = self.head(self.ln(self.blocks(x)))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-1)


def training_batches(tasks, tok, rows, context, n, seed=0):
    """n batches drawn as workbench.train draws them (uniform task counts, no curriculum)."""
    pools = {t: make_pool(t, 2000, tok, seed, "train") for t in tasks}
    counts = {t: math.ceil(samples_per_step(pools, rows, context) / len(tasks)) for t in tasks}
    rng = np.random.default_rng(seed)
    return [next_batch(pools, counts, rng, None, rows, context, tok.pad_id, tok.num_id) for _ in range(n)]


def synthetic_batches(vocab, num_id, rows, context, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    doc = torch.arange(context).div(40, rounding_mode="floor").expand(rows, -1).contiguous()
    positions = (torch.arange(context) % 40).expand(rows, -1)
    out = []
    for _ in range(n):
        ids = torch.randint(12, vocab, (rows, context + 1), generator=gen)
        ids[:, ::9] = num_id  # the number encoding and head do real work
        targets = ids[:, 1:]
        out.append(
            {
                "ids": ids[:, :-1],
                "values": torch.rand(rows, context, dtype=torch.float64, generator=gen) * 1e3,
                "positions": positions,
                "doc_ids": doc,
                "targets": targets,
                "target_values": torch.rand(rows, context, dtype=torch.float64, generator=gen),
                "loss_mask": torch.ones(rows, context, dtype=torch.bool),
                "task_ids": torch.zeros(rows, context, dtype=torch.long),
                "ce_count": torch.tensor(rows * context),
                "number_count": torch.tensor(int((targets == num_id).sum())),
            }
        )
    return out


def measure(steps: dict, batches: list, warmup: int) -> dict:
    """Median (forward + backward, optimizer) seconds of each named step(batch), the steps run
    interleaved on the same batch so that machine noise hits them alike."""
    times = {name: [] for name in steps}
    for i, batch in enumerate(batches):
        for name, (model_part, optimizer_part) in steps.items():
            start = time.perf_counter()
            model_part(batch)
            middle = time.perf_counter()
            optimizer_part()
            if i >= warmup:
                times[name].append((middle - start, time.perf_counter() - middle))
    return {name: tuple(statistics.median(column) for column in zip(*ts)) for name, ts in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", default="bittokens", choices=encoders.names())
    parser.add_argument("--data", nargs="+", default=[*MIXES, "synthetic"], choices=[*MIXES, "synthetic"])
    parser.add_argument("--preset", default="cpu-small")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=12, help="timed fp32 steps per model and data set")
    parser.add_argument("--bf16-steps", type=int, default=3, help="timed bf16 steps per model")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per model first")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument(
        "--malloc",
        default="kept",
        choices=["kept", "default"],
        help="kept: freed memory stays for the next step, as workbench.train sets it on a CPU "
        "(workbench/runs/allocator.py); default: glibc's own thresholds",
    )
    args = parser.parse_args()
    if args.malloc == "kept":
        keep_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = preset(args.preset)
    encoding = encoders.get(args.encoding)
    tok = Tokenizer(encoding)
    ours = GPT(cfg, encoding, tok.vocab_size, tok.num_id)
    ref_adamw, ref_muon = ReferenceGPT(cfg, tok.vocab_size), ReferenceGPT(cfg, tok.vocab_size)
    adamw = torch.optim.AdamW([dict(params=ref_adamw.parameters(), initial_lr=1e-3)])
    references = {  # name: (model, optimizers, loss of a batch)
        "reference, AdamW": (ref_adamw, [adamw], reference_loss),
        "reference, Muon + Adam": (ref_muon, build_optimizers(ref_muon), reference_loss),
    }
    runs = {**references, OURS: (ours, build_optimizers(ours), our_loss)}
    tokens = args.batch * cfg.block_size
    print(
        f"{args.encoding}, preset {args.preset}, malloc {args.malloc}: ours {sum(p.numel() for p in ours.parameters()) / 1e6:.2f}M "
        f"params, reference {sum(p.numel() for p in ref_adamw.parameters()) / 1e6:.2f}M; batch {args.batch} x "
        f"{cfg.block_size}; threads {torch.get_num_threads()}; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs (a shared machine slows "
        "all three alike, but more threads than free cores stall)"
    )
    for i, name in enumerate(args.data):
        for precision in args.precisions if i == 0 else ["fp32"]:
            n = args.warmup + (args.steps if precision == "fp32" else args.bf16_steps)
            batches = (
                synthetic_batches(tok.vocab_size, tok.num_id, args.batch, cfg.block_size, n)
                if name == "synthetic"
                else training_batches(MIXES[name], tok, args.batch, cfg.block_size, n)
            )
            autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
            t = measure({run: training_step(*parts, autocast) for run, parts in runs.items()}, batches, args.warmup)
            rate = {run: tokens / sum(parts) for run, parts in t.items()}
            learned = float(np.mean([b["loss_mask"].float().mean() for b in batches]))
            print(f"{name} ({learned:.0%} of targets learned), {precision}, median of {n - args.warmup} steps:")
            print(f"      {'':24s} tokens/s   forward+backward   optimizer   ours / this")
            for run, (forward_backward, optimizer) in t.items():
                ratio = f"{rate[OURS] / rate[run]:10.3f}x" if run in references else ""
                print(
                    f"      {run:24s} {rate[run]:8,.0f} {forward_backward * 1e3:15.0f} ms {optimizer * 1e3:8.0f} ms{ratio}"
                )


_TYPED = {}


def our_loss(model, batch):
    # workbench.train builds a step's typed batch ahead on the host, so it is built once, untimed
    typed = _TYPED.setdefault(id(batch), number_fields(batch, model.number_head, model.num_id))
    return step_losses(model, typed)["loss"]


def reference_loss(model, batch):
    return model(batch["ids"], batch["targets"].masked_fill(~batch["loss_mask"], -1))


def training_step(model, optimizers, loss_of, autocast):
    """(forward + backward of a batch, optimizer step) of one run, for `measure`."""

    def forward_backward(batch):
        apply_schedule(optimizers, 10, 100)
        with autocast:
            loss = loss_of(model, batch)
        loss.backward()

    def optimizer_step():
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return forward_backward, optimizer_step


if __name__ == "__main__":
    main()
