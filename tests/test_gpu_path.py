"""The multi-GPU path, checked on CPU stand-ins: this rank's rows, the host syncs of a step, compile
graphs, float32 number heads under bf16 autocast, gradient accumulation, FlexAttention, and a
protocol of several runs under torchrun (gloo)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny import tiny
from torch._dynamo.testing import CompileCounter

from workbench import encoders
from workbench.model import flex
from workbench.model.gpt import GPT, packed_mask, preset
from workbench.runs import distributed
from workbench.runs.syncs import HostSyncs, optimizer_counters
from workbench.tokenizer import Tokenizer
from workbench.training.data import NotEnoughSamples, build_pool, pack
from workbench.training.train import CONFIGS, TrainConfig, setup, step_batches, train, train_step

TINY = tiny(
    8,
    tasks=("addition", "multiplication", "minmax"),
    pool_size=200,
    eval_every=8,
    checkpoint_every=8,
    decades=(0, 2),
    max_digits=3,
)


def losses(run: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def pack_one_by_one(samples, rows, context, pad_id, num_id):
    """The oracle: samples laid into rows one token slice at a time, the last one of a row cut."""
    width = context + 1
    ids, values = np.full((rows, width), pad_id), np.zeros((rows, width))
    mask, doc, pos, task = (np.zeros((rows, width), dtype=bool),) + tuple(
        np.zeros((rows, width), dtype=np.int64) for _ in range(3)
    )
    row = col = 0
    for k, s in enumerate(samples):
        if row == rows:
            break
        n = min(len(s[0]), width - col)
        cols = slice(col, col + n)
        ids[row, cols], values[row, cols], mask[row, cols] = s[0][:n], s[1][:n], s[2][:n]
        doc[row, cols], pos[row, cols], task[row, cols] = k, np.arange(n), s[3] if len(s) > 3 else 0
        col += n
        row, col = (row + 1, 0) if col == width else (row, col)
    if row < rows:
        raise NotEnoughSamples
    target = mask[:, 1:] & (doc[:, 1:] == doc[:, :-1])
    return {
        "ids": ids[:, :-1],
        "values": values[:, :-1],
        "positions": pos[:, :-1],
        "doc_ids": doc[:, :-1],
        "targets": ids[:, 1:],
        "target_values": values[:, 1:],
        "loss_mask": target,
        "task_ids": task[:, 1:],
        "ce_count": target.sum(),
        "number_count": (target & (ids[:, 1:] == num_id)).sum(),
    }


def test_pack_builds_this_ranks_rows_as_the_whole_batch_holds_them():
    """A rank packs only its share: its rows are the whole batch's, and the ranks' counts add up
    to the whole batch's."""
    rng = np.random.default_rng(0)
    for trial in range(40):
        samples = [
            (rng.integers(0, 9, n), rng.normal(size=n), rng.random(n) < 0.6, int(rng.integers(0, 3)))
            for n in rng.integers(1, 30, int(rng.integers(10, 60)))
        ]
        rows, context = 4, int(rng.integers(8, 40))
        try:
            whole = pack_one_by_one(samples, rows, context, 0, 4)
        except NotEnoughSamples:
            with pytest.raises(NotEnoughSamples):
                pack(samples, rows, context, 0, 4)
            continue
        parts = [pack(samples, rows, context, 0, 4, part=(rank, 2)) for rank in range(2)]
        for rank, part in enumerate(parts):
            for key, value in whole.items():
                if np.ndim(value):
                    assert np.array_equal(part[key].numpy(), value[2 * rank : 2 * rank + 2]), (trial, key)
        for key in ("ce_count", "number_count"):
            assert sum(int(p[key]) for p in parts) == whole[key], (trial, key)
        assert all(
            np.array_equal(pack(samples, rows, context, 0, 4)[k].numpy(), v)
            for k, v in whole.items()
            if k not in ("ce_count", "number_count")
        )


def test_a_shared_pool_maps_the_samples_rank_0_built(tmp_path):
    """Under torchrun ranks map the pool files rank 0 wrote: the same samples, field for field."""
    tok = Tokenizer("bittokens")
    built = build_pool("sorting", 50, tok, 0, "train")
    distributed._write_pool(built, tmp_path / "pool")
    mapped = distributed._read_pool("sorting", tmp_path / "pool")
    assert len(mapped.samples) == 50 and mapped.mean_length == built.mean_length
    for a, b in zip(built.samples, mapped.samples):
        assert len(a) == len(b) and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))
    assert np.array_equal(mapped.samples[-1][0], built.samples[-1][0])
    assert np.array_equal(mapped.difficulty, built.difficulty) and np.array_equal(
        mapped.difficulty_sd, built.difficulty_sd
    )
    picks = np.array([49, 0, 7, 7, 23])  # drawn at once (data.Pool.take), as one by one
    for a, b in zip(built.take(picks), mapped.take(picks)):
        assert all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))
    with pytest.raises(IndexError):
        mapped.take([50])
    with pytest.raises(IndexError):
        mapped.samples[-51]


@pytest.mark.parametrize("encoding", ["bittokens", "fone", "xval"])
def test_a_training_step_reads_the_device_once(encoding, tmp_path):
    """With the batch's number fields, computed where it was packed, a step (forward, backward,
    optimizers) reads the device once, for the log."""
    run = setup(TrainConfig.of(**TINY, encoding=encoding, attention="dense", out=str(tmp_path)))
    train_step(run, 0)
    batches = step_batches(run, 1)
    with HostSyncs(optimizer_counters(run.optimizers)) as syncs:
        train_step(run, 1, batches)
    assert syncs.total == 1 and syncs.counts["tolist"] == 1, dict(syncs.counts)


@pytest.mark.parametrize("encoding", ["bittokens", "fone", "xval"])
def test_the_number_fields_packed_ahead_give_the_plain_losses(encoding, tmp_path):
    """The training batches bring the number positions, the head's features and its loss targets
    computed where they were packed (batches.number_fields), and the lm head runs at the loss
    positions only; the loss and the gradients must be those of the plain computation: every
    position's logits, cross-entropy where the loss mask says, the head on the hidden states that
    predict <|num|> against the targets' float64 values (C.1: CE + 10 x number loss, per token)."""
    from workbench.training.loss import losses as train_losses

    run = setup(TrainConfig.of(**TINY, encoding=encoding, attention="dense", out=str(tmp_path)))
    batch, model = step_batches(run, 0)[0], run.model
    assert int(batch.number_count) > 0
    fast = train_losses(model, batch)
    fast["loss"].backward()
    fast_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    hidden = model.trunk(batch.ids, batch.values, batch.positions, packed_mask(batch.doc_ids))
    learned = batch.loss_mask
    ce = torch.nn.functional.cross_entropy(model.lm_head(hidden)[learned], batch.targets[learned], reduction="sum")
    numbers = learned & (batch.targets == model.num_id)
    number = model.number_losses(hidden[numbers], values=batch.target_values[numbers]).sum()
    plain = (ce + 10 * number) / learned.sum()
    plain.backward()
    assert torch.allclose(fast["loss"], plain, rtol=1e-5), (fast["loss"], plain)
    for a, (name, p) in zip(fast_grads, model.named_parameters()):  # float32 sums in another order
        assert (a - p.grad).norm() <= 1e-5 * p.grad.norm() + 1e-8, (name, float((a - p.grad).norm() / p.grad.norm()))


def test_compile_makes_one_graph_and_no_recompiles(tmp_path):
    """--compile compiles the blocks alone: new batches every step, the same graph."""
    run = setup(TrainConfig.of(**TINY, encoding="bittokens", out=str(tmp_path)))
    counter = CompileCounter()
    run.model.compile_layers(backend=counter)
    for step in range(3):
        train_step(run, step)
    assert counter.frame_count == 1 and counter.op_count > 20


def test_number_heads_run_in_float32_under_bf16_autocast():
    """xVal's regressed scale keeps float32 precision under bf16 autocast (a bf16 head would
    round it to 8 significant bits); the number loss too."""
    torch.manual_seed(0)
    tok = Tokenizer("xval")
    model = GPT(preset("cpu-tiny"), encoders.get("xval"), tok.vocab_size, tok.num_id)
    hidden = torch.randn(64, 128)
    exact = model.number_head(hidden)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rounded = model.number_head(hidden)
        out = model.number_outputs(hidden)
        loss = model.number_losses(hidden, values=torch.full((64,), 123.456, dtype=torch.float64))
    assert rounded.dtype == torch.bfloat16 and not torch.equal(rounded.float(), exact)  # what autocast alone does
    assert out.dtype == torch.float32 and torch.equal(out, exact)
    assert loss.dtype == torch.float32 and torch.equal(
        loss, model.number_head.loss(exact, torch.full((64,), 123.456, dtype=torch.float64))
    )


def test_accumulated_micro_batches_equal_the_whole_batch(tmp_path):
    """--grad-accum 4 x 2 rows and 8 rows at once: the same batches, the same loss curve (up to
    summation order); --global-batch picks the accumulation for the number of processes."""
    whole = train(TrainConfig.of(**{**TINY, "batch_size": 8}, encoding="bittokens", out=str(tmp_path / "whole")))
    micro = train(TrainConfig.of(**TINY, encoding="bittokens", out=str(tmp_path / "micro"), grad_accum=4))
    assert len(losses(whole)) == 2 and losses(micro) == pytest.approx(losses(whole), rel=1e-5)
    paper = CONFIGS["paper"]
    assert [paper.accumulation(world) for world in (8, 4, 2, 1)] == [1, 2, 4, 8]
    with pytest.raises(ValueError, match="global-batch"):
        paper.accumulation(5)


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")  # the CPU reference: right, slow
def test_flex_attention_equals_the_dense_mask():
    """The document block mask lets each token see exactly what packed_mask allows."""
    gen = torch.Generator().manual_seed(0)
    doc = torch.cumsum(torch.rand(2, 96, generator=gen) < 0.15, 1)
    q, k, v = (torch.randn(2, 2, 96, 16, generator=gen) for _ in range(3))
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=packed_mask(doc))
    mask = flex.document_mask(doc)
    assert flex.is_block_mask(mask) and torch.allclose(flex.attend(q, k, v, mask), dense, atol=1e-5)
    with pytest.raises(ValueError, match="CUDA only"):  # no backward pass on CPUs: refused, not a crash mid-step
        setup(TrainConfig.of(**TINY, attention="flex", out="/nonexistent/never-made"))


@pytest.mark.slow
def test_a_protocol_of_runs_under_torchrun_finishes_every_time(tmp_path):
    """Three runs in one torchrun process (2 gloo processes), twice: each run reuses the process
    group (re-creating it failed 5 times in 10, docs/gpu.md), and the evaluation shared out over
    the ranks gives one process's answers."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    script = Path(__file__).with_name("torchrun_protocol.py")
    for attempt in range(2):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc_per_node",
                "2",
                str(script),
                str(tmp_path / str(attempt)),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0 and done.stdout.count("PROTOCOL DONE") == 2, done.stderr[-2000:]


# -- benchmarks/gpu_check.py: the check a GPU runs, dry-run on the CPU ------------------------------
def gpu_check_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gpu_check", Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tf32_emulation_rounds_to_ten_mantissa_bits():
    """The CPU stand-in for TF32: every float32 rounded to the nearest value with 10 mantissa bits
    (ties to even), checked against rounding the exact binary fraction with Python's Fraction."""
    from fractions import Fraction

    check = gpu_check_module()
    x = torch.randn(2000, dtype=torch.float32) * torch.logspace(-20, 20, 2000)
    got = check.to_tf32(x)
    for value, rounded in zip(x.tolist()[::37], got.tolist()[::37]):
        exponent = math.frexp(value)[1] - 1  # value = 1.f x 2^exponent
        step = Fraction(2) ** (exponent - 10)
        q = Fraction(value) / step
        nearest = math.floor(q) + (
            1
            if q - math.floor(q) > Fraction(1, 2) or (q - math.floor(q) == Fraction(1, 2) and math.floor(q) % 2)
            else 0
        )
        assert Fraction(rounded) == nearest * step, value


def test_heads_check_sees_tf32_error_without_the_fix(monkeypatch):
    """Under emulated TF32 the number heads are float32-exact with `true_float32`, and the check
    fails (errors of ~3e-4, xVal's values off by ~1e-3) when the heads run without it."""
    import contextlib

    from workbench.model import gpt as model_module

    check = gpu_check_module()
    args = type("Args", (), {"emulate_tf32": True})()
    passed, line = check.check_heads(args, check.CPU, torch.device("cpu"), None)
    assert passed, line
    monkeypatch.setattr(model_module, "true_float32", contextlib.nullcontext)
    passed, line = check.check_heads(args, check.CPU, torch.device("cpu"), None)
    assert not passed and "xval" in line, line
    torch.backends.cuda.matmul.allow_tf32 = False


@pytest.mark.slow
def test_gpu_check_dry_run_on_the_cpu(tmp_path):
    """The GPU check's every check runs on a CPU and prints its line; all pass there except the
    loop-speed criterion, which a CPU run (the prefetch thread beside one training thread) does not
    test."""
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/gpu_check.py",
            "--device",
            "cpu",
            "--emulate-tf32",
            "--log",
            str(tmp_path / "log"),
            # the speed check's loop once (both encodings and GIL intervals run on the GPU)
            "--encodings",
            "bittokens",
            "--switch-intervals",
            "0.005",
        ],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    lines = (tmp_path / "log").read_text().splitlines()
    verdicts = {line.split()[1]: line.split()[0] for line in lines}
    assert set(verdicts) == {"flex", "heads", "syncs", "recompile", "speed", "generate", "resume", "retrofit"}, (
        done.stdout[-2000:]
    )
    assert all(v == "PASS" for k, v in verdicts.items() if k != "speed"), "\n".join(lines)
    assert "checks passed" in done.stdout.splitlines()[-1]
