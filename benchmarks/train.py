"""Training throughput: our GPT (RoPE, QK-norm, packed-sample mask, Muon + Adam) beside a plain
reference GPT of the same size written here (nn.Linear attention + MLP, learned positions,
LayerNorm, GELU, AdamW, plain causal attention), same batch and context, in one run.

Prints tokens/s (median over timed steps after warm-up, the two models interleaved step by step)
in fp32 and bf16 autocast and the ratio, and how a step splits into forward + backward (the models
alone) and the optimizer step (AdamW against the paper's Muon + Adam).

    python benchmarks/train.py [--preset cpu-small] [--batch 16] [--steps 12] [--bf16-steps 3]
                               [--warmup 1] [--precisions fp32 bf16] [--threads N]

bf16 gets its own, smaller step count: CPUs without bf16 matrix units run it ~25x slower.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from workbench import encoders
from workbench.model import GPT, preset
from workbench.optim import apply_schedule, build_optimizers

VOCAB = 2060  # the tokenizer's size for single-token encodings


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
    def __init__(self, cfg):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, cfg.d_model), nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.Sequential(*[ReferenceBlock(cfg.d_model, cfg.n_head) for _ in range(cfg.n_layer)])
        self.ln, self.head = nn.LayerNorm(cfg.d_model), nn.Linear(cfg.d_model, VOCAB, bias=False)

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        logits = self.head(self.ln(self.blocks(x)))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def batch(cfg, B, gen):
    T = cfg.block_size
    ids = torch.randint(12, VOCAB, (B, T + 1), generator=gen)
    ids[:, ::9] = 4  # <|num|> every 9th token: the number head and encoding do real work
    doc = torch.arange(T + 1).div(40, rounding_mode="floor").expand(B, -1)  # samples of 40 tokens
    return {"ids": ids[:, :-1], "values": torch.rand(B, T, dtype=torch.float64, generator=gen) * 1e3,
            "positions": (torch.arange(T) % 40).expand(B, -1), "doc_ids": doc[:, :-1].contiguous(),
            "targets": ids[:, 1:], "target_values": torch.rand(B, T, dtype=torch.float64, generator=gen),
            "loss_mask": torch.ones(B, T, dtype=torch.bool)}  # every target learned, as in the reference


def timed(model_part, optimizer_part):
    """A training step as (seconds in forward + backward, seconds in the optimizer step)."""
    def step():
        start = time.perf_counter()
        model_part()
        middle = time.perf_counter()
        optimizer_part()
        return middle - start, time.perf_counter() - middle
    return step


def measure(steps: dict, n: int, warmup: int) -> dict:
    """Median (model, optimizer) seconds per step of each named step, run interleaved so that
    machine noise hits all of them alike."""
    times = {name: [] for name in steps}
    for i in range(warmup + n):
        for name, step in steps.items():
            t = step()
            if i >= warmup:
                times[name].append(t)
    return {name: tuple(statistics.median(column) for column in zip(*ts)) for name, ts in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu-small")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=12, help="timed fp32 steps per model")
    parser.add_argument("--bf16-steps", type=int, default=3, help="timed bf16 steps per model")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per model first")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = preset(args.preset)
    gen = torch.Generator().manual_seed(0)
    data = batch(cfg, args.batch, gen)
    tokens = args.batch * cfg.block_size
    ours = GPT(cfg, encoders.get("bittokens", d_model=cfg.d_model), VOCAB)
    ours_opt = build_optimizers(ours)
    ref = ReferenceGPT(cfg)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    print(f"preset {args.preset}: ours {sum(p.numel() for p in ours.parameters()) / 1e6:.2f}M params, "
          f"reference {sum(p.numel() for p in ref.parameters()) / 1e6:.2f}M; batch {args.batch} x "
          f"{cfg.block_size}; threads {torch.get_num_threads()}")
    for precision in args.precisions:
        steps = args.steps if precision == "fp32" else args.bf16_steps
        autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")

        def ours_model():
            apply_schedule(ours_opt, 10, 100)
            with autocast:
                _, losses = ours(**data)
            losses["loss"].backward()

        def ours_optimizer():
            for o in ours_opt:
                o.step()
                o.zero_grad(set_to_none=True)

        def ref_model():
            with autocast:
                loss = ref(data["ids"], data["targets"])
            loss.backward()

        def ref_optimizer():
            ref_opt.step()
            ref_opt.zero_grad(set_to_none=True)

        t = measure({"reference": timed(ref_model, ref_optimizer), "ours": timed(ours_model, ours_optimizer)},
                    steps, args.warmup)
        rate = {name: tokens / sum(parts) for name, parts in t.items()}
        print(f"{precision}, median of {steps} steps: reference {rate['reference']:7,.0f} tokens/s   "
              f"ours {rate['ours']:7,.0f} tokens/s   ratio {rate['ours'] / rate['reference']:5.2f}x")
        print(f"      forward+backward: reference {t['reference'][0] * 1e3:6.0f} ms   ours {t['ours'][0] * 1e3:6.0f} ms"
              f"   ratio {t['reference'][0] / t['ours'][0]:5.2f}x")
        print(f"      optimizer step:   reference {t['reference'][1] * 1e3:6.0f} ms   ours {t['ours'][1] * 1e3:6.0f} ms"
              f"   (AdamW vs Muon + Adam)")


if __name__ == "__main__":
    main()
