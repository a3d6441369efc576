"""What a paper-tier training step costs where, before and after the GPU path (docs/gpu.md), measured
in one run on this CPU: the parts a GPU leaves to the host, which are the same work on any machine.

    batch      one rank's batch at 8 ranks (24 of 192 rows of 1024 tokens, the paper-tier mix of the
               six tasks and text at the paper's operand range): before, every rank packed the
               whole batch sample by sample (the loop below, the old `data.pack`) and kept its
               share, and the number head's features and loss targets were computed inside
               forward (a GPU->CPU->GPU round trip); after, `pack(..., part=(rank, 8))` builds its
               24 rows and `number_fields` computes the rest there, on the loader's worker thread
    syncs      host syncs of one step (HostSyncs; Adam's host-side step counters not counted), the
               batch's number fields computed where it was packed
    loss       the fused loss at V = 50,257, d = 768 on one rank's targets: chunks, profiler ops,
               and the fp32 weight-gradient traffic (read + write once per chunk), before (2^21
               logits a chunk) and after (2^28 on a GPU)
    attention  of one rank's packed rows: allowed query-key pairs, and 128 x 128 tiles that hold any
    pools      memory a rank holds for a training pool it built, and for one it maps (shared)
    compile    (slow, --sections compile) --compile on this CPU: ms per step, eager and compiled

    python benchmarks/gpu.py [--encodings bittokens fone] [--repeats 5] [--pool 5000]
                             [--sections batch syncs loss attention pools compile]
"""

import argparse
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile
from tqdm.auto import tqdm

from workbench import encoders, experiments
from workbench.model.fused import chunk_elements, linear_cross_entropy
from workbench.model.gpt import packed_mask
from workbench.runs import distributed
from workbench.runs.syncs import HostSyncs, optimizer_counters
from workbench.tokenizer import Tokenizer
from workbench.training.batches import number_fields
from workbench.training.data import build_pool, draw, pack, samples_per_step
from workbench.training.train import TrainConfig, setup, step_batches, train_step

PAPER = experiments.PROTOCOLS["paper-tier"]
RANKS, ROWS, CONTEXT, V, D = 8, 192, 1024, 50_257, 768


def pack_one_by_one(samples, rows, context, pad_id, num_id):
    """The old data.pack: every sample laid into the rows in a Python loop (the baseline)."""
    width = context + 1
    ids, values = np.full((rows, width), pad_id, dtype=np.int64), np.zeros((rows, width))
    mask, doc = np.zeros((rows, width), dtype=bool), np.full((rows, width), -1, dtype=np.int64)
    pos, task = np.zeros((rows, width), dtype=np.int64), np.zeros((rows, width), dtype=np.int64)
    row = col = 0
    for k, (s_ids, s_values, s_mask, *s_task) in enumerate(samples):
        if row == rows:
            break
        n = min(len(s_ids), width - col)
        cols = slice(col, col + n)
        ids[row, cols], values[row, cols], mask[row, cols] = s_ids[:n], s_values[:n], s_mask[:n]
        doc[row, cols], pos[row, cols], task[row, cols] = k, np.arange(n), s_task[0] if s_task else 0
        col += n
        row, col = (row + 1, 0) if col == width else (row, col)
    loss_mask = mask[:, 1:] & (doc[:, 1:] == doc[:, :-1])
    t = torch.from_numpy
    return {
        "ids": t(ids[:, :-1]),
        "values": t(values[:, :-1]),
        "positions": t(pos[:, :-1]),
        "doc_ids": t(doc[:, :-1]),
        "targets": t(ids[:, 1:]),
        "target_values": t(values[:, 1:]),
        "loss_mask": t(loss_mask),
        "task_ids": t(task[:, 1:]),
        "ce_count": torch.tensor(int(loss_mask.sum())),
        "number_count": torch.tensor(int((loss_mask & (ids[:, 1:] == num_id)).sum())),
    }


def median_seconds(work, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paper_samples(encoding, pool, rng):
    """(tokenizer, the samples one step draws) for the paper-tier mix, equal task shares."""
    tok = Tokenizer(encoding, vocab_size=PAPER.model.vocab_size)
    pools = {t: build_pool(t, pool, tok, 0, "train", PAPER.regime) for t in tqdm(PAPER.tasks, desc=f"{encoding} pools")}
    per_task = math.ceil(samples_per_step(pools, ROWS, CONTEXT) / len(pools))
    return tok, pools, draw(pools, {t: per_task for t in pools}, rng)


def batch_costs(encoding, tok, samples, repeats):
    head = encoders.get(encoding).number_head(D)
    whole = pack_one_by_one(samples, ROWS, CONTEXT, tok.pad_id, tok.num_id)
    rank_rows = {k: v if v.ndim == 0 else v[: ROWS // RANKS] for k, v in whole.items()}
    at = rank_rows["ids"].flatten() == tok.num_id
    targets = rank_rows["target_values"].flatten()[rank_rows["loss_mask"].flatten()]
    is_number = rank_rows["targets"].flatten()[rank_rows["loss_mask"].flatten()] == tok.num_id

    def in_forward():
        return head.features(rank_rows["values"].flatten()[at]), head.loss_target(targets[is_number])

    return pd.DataFrame(
        [
            {
                "encoding": encoding,
                "part": "pack the batch",
                "when": "before",
                "where": "every rank, in the step",
                "ms": 1e3
                * median_seconds(lambda: pack_one_by_one(samples, ROWS, CONTEXT, tok.pad_id, tok.num_id), repeats),
            },
            {
                "encoding": encoding,
                "part": "number features + loss targets",
                "when": "before",
                "where": "in forward (GPU->CPU->GPU)",
                "ms": 1e3 * median_seconds(in_forward, repeats) if head is not None else "— (no number head)",
            },
            {
                "encoding": encoding,
                "part": "pack this rank's rows + number fields",
                "when": "after",
                "where": "loader thread, a step ahead",
                "ms": 1e3
                * median_seconds(
                    lambda: number_fields(
                        pack(samples, ROWS, CONTEXT, tok.pad_id, tok.num_id, part=(0, RANKS)), head, tok.num_id
                    ),
                    repeats,
                ),
            },
            {
                "encoding": encoding,
                "part": "pack all 192 rows + number fields",
                "when": "after",
                "where": "one GPU: the loader thread, a step ahead",
                "ms": 1e3
                * median_seconds(
                    lambda: number_fields(pack(samples, ROWS, CONTEXT, tok.pad_id, tok.num_id), head, tok.num_id),
                    repeats,
                ),
            },
            {
                "encoding": encoding,
                "part": "rows / numbers / targets of one rank",
                "when": "",
                "where": "",
                "ms": f"{ROWS // RANKS} / {int(at.sum())} / {int(rank_rows['loss_mask'].sum())}",
            },
        ]
    )


def sync_counts(encoding, folder):
    cfg = TrainConfig.of(
        encoding=encoding,
        tasks=("addition", "multiplication", "minmax", "text"),
        preset="cpu-tiny",
        batch_size=8,
        tokens=1e5,
        pool_size=300,
        val_samples=8,
        test_samples=8,
        threads=1,
        decades=(0, 2),
        max_digits=3,
        attention="dense",
        out=str(folder),
        overwrite=True,
    )
    run = setup(cfg)
    train_step(run, 0)
    counts = {}
    batches = step_batches(run, 1)
    with HostSyncs(optimizer_counters(run.optimizers)) as syncs:
        train_step(run, 1, batches)
    counts["with the batch's number fields"] = f"{syncs.total} {dict(syncs.counts)}"
    return {"encoding": encoding, **counts}


def loss_costs(targets):
    hidden, weight = torch.randn(64, 16), torch.randn(1000, 16, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:  # ops per chunk: 8 chunks of 8 rows
        linear_cross_entropy(hidden, weight, torch.randint(0, 1000, (64,)), chunk_elements=8 * 1000)
    ops_per_chunk = sum(1 for e in prof.events() if e.name.startswith("aten::")) / 8
    rows = []
    for when, elements in (
        ("CPU (2^21)", 1 << 21),
        ("GPU before (2^28)", 1 << 28),
        ("GPU now (2^26)", chunk_elements(torch.device("cuda"))),
    ):
        chunks = math.ceil(targets / (elements // V))
        rows.append(
            {
                "when": when,
                "rows a chunk": elements // V,
                "chunks": chunks,
                "ops (est.)": round(chunks * ops_per_chunk),
                "weight-gradient traffic GB": chunks * 2 * V * D * 4 / 1e9,
            }
        )
    return pd.DataFrame(rows)


PEAK_PROBE = """
import sys, torch
from workbench.model.fused import chunk_elements, linear_cross_entropy
rows, vocab, chunk = (int(a) for a in sys.argv[1:4])
def peak():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
hidden, weight = torch.randn(rows, 64), torch.randn(vocab, 64, requires_grad=True)
targets = torch.randint(0, vocab, (rows,))
open("/proc/self/clear_refs", "w").write("5")  # the high-water mark restarts here
before = peak()
loss, _ = linear_cross_entropy(hidden, weight, targets, chunk_elements=chunk)
loss.backward()
print(peak() - before)
"""


def loss_peak_memory(rows=8192, vocab=V):
    """Peak memory of the fused loss above what its inputs hold (the process's high-water mark, in a
    fresh process each), at the paper's vocabulary: the logits of one chunk dominate it."""
    out = []
    for when, elements in (
        ("CPU chunk (2^21)", 1 << 21),
        ("GPU chunk, before (2^28)", 1 << 28),
        ("GPU chunk, now (2^26)", chunk_elements(torch.device("cuda"))),
        ("no chunking", rows * vocab),
    ):
        done = subprocess.run(
            [sys.executable, "-c", PEAK_PROBE, str(rows), str(vocab), str(elements)],
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(
            {
                "chunk": when,
                "logits a chunk": min(elements // vocab, rows) * vocab,
                "peak MiB": int(done.stdout.split()[-1]) / 2**20,
                "one chunk's fp32 logits MiB": min(elements // vocab, rows) * vocab * 4 / 2**20,
            }
        )
    return pd.DataFrame(out)


def attention_costs(doc_ids, tile=128):
    mask = packed_mask(doc_ids)[:, 0]
    B, T, _ = mask.shape
    tiles = mask.view(B, T // tile, tile, T // tile, tile).any(-1).any(2)
    causal = torch.ones(T, T, dtype=torch.bool).tril().view(T // tile, tile, T // tile, tile).any(-1).any(1)
    return {
        "allowed pairs %": 100 * mask.float().mean().item(),
        "non-empty tiles %": 100 * tiles.float().mean().item(),
        "causal tiles %": 100 * causal.float().mean().item(),
    }


def anonymous_bytes():
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) * 1024
    return 0


def pool_memory(tok, n):
    before = anonymous_bytes()
    built = build_pool("multiplication", n, tok, 0, "train", PAPER.regime)
    built_bytes = anonymous_bytes() - before
    with TemporaryDirectory() as folder:
        distributed._write_pool(built, Path(folder) / "pool")
        del built
        before = anonymous_bytes()
        mapped = distributed._read_pool("multiplication", Path(folder) / "pool")
        sum(len(s[0]) for s in mapped.samples)  # touch every page
        mapped_bytes = anonymous_bytes() - before
        disk = sum(f.stat().st_size for f in (Path(folder) / "pool").iterdir())
    return pd.DataFrame(
        [
            {
                "pool": f"multiplication, {n:,} samples",
                "built by the rank MB": built_bytes / 2**20,
                "mapped (private) MB": mapped_bytes / 2**20,
                "one shared copy MB": disk / 2**20,
            }
        ]
    )


def compile_costs(presets, steps):
    rows = []
    for name in presets:
        for compiled in (False, True):
            cfg = TrainConfig.of(
                encoding="bittokens",
                tasks=("addition", "multiplication", "minmax", "text"),
                preset=name,
                batch_size=16 if name == "cpu-small" else 8,
                tokens=1e7,
                pool_size=2000,
                threads=1,
                decades=(0, 2),
                max_digits=3,
                out=f"/tmp/benchmark-gpu-{name}-{compiled}",
                overwrite=True,
                compile=compiled,
            )
            run = setup(cfg)
            start = time.perf_counter()
            for step in range(3):
                train_step(run, step)
            warmup = time.perf_counter() - start
            times = []
            for step in tqdm(range(3, 3 + steps), desc=f"{name} compile={compiled}"):
                batches = step_batches(run, step)
                start = time.perf_counter()
                train_step(run, step, batches)
                times.append(time.perf_counter() - start)
            rows.append(
                {
                    "preset": name,
                    "compile": compiled,
                    "ms a step": 1e3 * statistics.median(times),
                    "first 3 steps s": warmup,
                }
            )
    return pd.DataFrame(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encodings", nargs="+", default=["bittokens", "fone"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pool", type=int, default=5000, help="samples per task pool (the paper: 1M)")
    parser.add_argument(
        "--sections",
        nargs="+",
        default=["batch", "syncs", "loss", "attention", "pools"],
        choices=["batch", "syncs", "loss", "attention", "pools", "compile"],
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--loss-rows", type=int, default=8192, help="targets of the fused loss's peak-memory probe (tests: fewer)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pd.set_option("display.width", 200)
    rng = np.random.default_rng(0)
    drawn = (
        {e: paper_samples(e, args.pool, rng) for e in args.encodings}
        if {"batch", "loss", "attention"} & set(args.sections)
        else {}
    )
    if "batch" in args.sections:
        print("\n== one rank's batch at 8 ranks (median ms) ==")
        print(
            pd.concat([batch_costs(e, tok, samples, args.repeats) for e, (tok, _, samples) in drawn.items()]).to_string(
                index=False
            )
        )
    if "syncs" in args.sections:
        print("\n== host syncs of one training step ==")
        with TemporaryDirectory() as folder:
            print(
                pd.DataFrame([sync_counts(e, Path(folder) / e) for e in ("bittokens", "fone", "xval")]).to_string(
                    index=False
                )
            )
    shard = None
    if {"loss", "attention"} & set(args.sections):
        tok, _, samples = next(iter(drawn.values()))
        shard = pack(samples, ROWS, CONTEXT, tok.pad_id, tok.num_id, part=(0, RANKS))
    if "loss" in args.sections:
        print(f"\n== the fused loss on one rank's {int(shard['loss_mask'].sum()):,} targets at V = {V:,} ==")
        print(loss_costs(int(shard["loss_mask"].sum())).round(1).to_string(index=False))
        print(
            f"\n== peak memory of the fused loss: {args.loss_rows:,} targets at V = {V:,} (d = 64: the logits, not the products)"
        )
        print(loss_peak_memory(args.loss_rows).round(0).to_string(index=False))
    if "attention" in args.sections:
        print("\n== attention over one rank's packed rows ==")
        print(pd.DataFrame([attention_costs(shard["doc_ids"])]).round(1).to_string(index=False))
    if "pools" in args.sections:
        print("\n== memory of a training pool in a rank ==")
        print(
            pool_memory(Tokenizer("bittokens", vocab_size=PAPER.model.vocab_size), 20 * args.pool)
            .round(1)
            .to_string(index=False)
        )
    if "compile" in args.sections:
        print("\n== --compile on this CPU ==")
        print(compile_costs(["cpu-tiny", "cpu-small"], 10).round(1).to_string(index=False))


if __name__ == "__main__":
    main()
