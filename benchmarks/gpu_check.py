"""The GPU path, run for real: one command, one PASS/FAIL line per check (docs/gpu.md).

    python benchmarks/gpu_check.py                         # on a GPU: every check, ~5 minutes on one H100
    python benchmarks/gpu_check.py --device cpu            # the dry run (tests): the same checks at CPU sizes
    python benchmarks/gpu_check.py --checks heads flex --log OUT/gpu_check.log

    flex       FlexAttention's document block mask against the dense [B, 1, T, T] mask: the same loss
               and gradients (float32, TF32 off; on a CPU the loss only: FlexAttention has no
               backward pass there)
    heads      every number head's outputs and decoded values against a float64 copy of the head,
               with TF32 on for every other product, as training sets it; --emulate-tf32 rounds the
               inputs of float32 products to TF32 on a CPU while the flag is on, so the dry run sees
               what a GPU would
    syncs      host syncs in one training step after warm-up (torch.cuda.set_sync_debug_mode on a GPU,
               workbench.runs.syncs' count on a CPU): at most 1, the step's losses read for the log
    recompile  --compile: graphs compiled over a dozen new batches after two warm-up steps: none
    speed      per encoding, the paper tier's step on one device (192 rows x 1024, bf16 on a GPU): the
               host's batch time (here and in the batch worker process), the device's step time, a
               step of the real loop with the batch built on a worker thread (at each
               --switch-intervals) and in a worker process (--prefetch process), the latter's host
               syncs in a loop step and whether its slots were page-locked, MFU (nanoGPT's count:
               6 N + 12 L d T per token) against the datasheet and a measured bf16 matrix product,
               and the GPU's busy share under the profiler; passes when the loop step with the
               worker process is at most 1.05 x the device step with at most 1 host sync
    generate   the paper model answers the validation questions of the paper tier's six tasks (eval
               batches of 64): time a question and, on a GPU, the host syncs of one batch's
               generation (the cache is written in place and the answers stay on the device: about
               one read per 8 tokens, plus the number heads' decoding on the host)
    resume     `python -m workbench.train --config paper` killed (SIGKILL) after its first checkpoint,
               then --resume: it finishes and logs every step once
    retrofit   a tiny Llama saved in bf16, fine-tuned with --bf16 by `python -m workbench.retrofit`,
               reloaded in a fresh process: one answer written through its number head

The last line is the verdict: "gpu_check: N of M checks passed". Sizes follow --device: the paper
tier on a GPU, cpu-tiny rows on a CPU (the dry run proves the script runs, not the speed).
"""

import argparse
import copy
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._gpu_check_commands import check_resume, check_retrofit  # noqa: E402,F401 (main finds them)
from workbench import encoders, tasks  # noqa: E402
from workbench.model.gpt import GPT, preset  # noqa: E402
from workbench.runs.outputs import output_path  # noqa: E402
from workbench.runs.syncs import HostSyncs, optimizer_counters  # noqa: E402
from workbench.training.loss import losses as train_losses  # noqa: E402
from workbench.training.train import TrainConfig, open_loader, setup, step_batches, train_step  # noqa: E402

# the paper tier's mix (workbench.experiments, which also draws figures: plotly is not on every GPU machine)
PAPER_TASKS = tuple(tasks.names("single_step") + tasks.names("comparison") + tasks.names("text"))
CHECKS = ("flex", "heads", "syncs", "recompile", "speed", "generate", "resume", "retrofit")
DATASHEET_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12}  # dense bf16 FLOP/s, SXM parts


@dataclass(frozen=True)
class Size:
    preset: str
    rows: int  # rows per micro-batch
    accum: int  # micro-batches per step (the paper's 192 rows on one GPU: 8 x 24)
    context: int
    pool: int
    vocab: int
    bf16: bool
    compile_backend: str
    steps: int  # timed steps
    text_bpe: str  # GPT-2's on a GPU: --config paper's 119.8M model
    retrofit_tokens: str  # the retrofit check's fine-tuning budget (a CPU proves the path, not the learning)


GPU = Size("paper", 24, 8, 1024, 3000, 2048, True, "inductor", 4, "gpt2", "2e4")
CPU = Size("cpu-tiny", 4, 2, 128, 300, 2048, False, "eager", 2, "corpus", "2e3")


def log(*parts) -> None:
    print(*parts, flush=True)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b|| in float64."""
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def config(args, size: Size, out: Path, **overrides) -> TrainConfig:
    values = dict(
        preset=size.preset,
        tasks=PAPER_TASKS,
        batch_size=size.rows,
        grad_accum=size.accum,
        context=size.context,
        decades=None,
        max_digits=None,
        pool_size=size.pool,
        val_samples=8,
        test_samples=8,
        vocab_size=size.vocab,
        text_bpe=size.text_bpe,
        bf16=size.bf16,
        device=args.device,
        threads=0 if args.device != "cpu" else 1,
        tokens=1e12,
        out=str(out),
        overwrite=True,
    )
    return TrainConfig.of(**{**values, **overrides})


def synchronize(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- TF32 on a CPU ------------------------------------------------------------------------------
def to_tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32's 10 mantissa bits (round to nearest, ties to even)."""
    bits = t.contiguous().view(torch.int32).to(torch.int64)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF
    return ((rounded + 2**31) % 2**32 - 2**31).to(torch.int32).view(torch.float32).view_as(t)


class EmulatedTF32(TorchFunctionMode):
    """While torch.backends.cuda.matmul.allow_tf32 is on, float32 products see TF32 inputs, as
    cuBLAS's would on a GPU (the factors rounded, the sums in float32)."""

    FACTORS = {
        torch.nn.functional.linear: (0, 1),
        torch.matmul: (0, 1),
        torch.Tensor.matmul: (0, 1),
        torch.Tensor.__matmul__: (0, 1),
        torch.mm: (0, 1),
        torch.Tensor.mm: (0, 1),
        torch.bmm: (0, 1),
        torch.addmm: (1, 2),
        torch.baddbmm: (1, 2),
    }

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        factors = self.FACTORS.get(func)
        if factors and torch.backends.cuda.matmul.allow_tf32:
            args = tuple(
                to_tf32(a) if k in factors and isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a
                for k, a in enumerate(args)
            )
        return func(*args, **kwargs)


# -- the checks: each returns (passed, one line of numbers) --------------------------------------
def check_flex(args, size, device, tmp):
    run = setup(config(args, size, tmp / "flex", attention="dense", bf16=False, grad_accum=1))
    batch = step_batches(run, 0)[0].to(device)
    weights = torch.ones(len(run.cfg.tasks), device=device)
    dense = run.model
    flex = GPT(
        replace(dense.cfg, attention="flex"), dense.encoding, run.tok.vocab_size, run.tok.num_id, run.tok.piece_ids
    ).to(device)
    flex.load_state_dict(dense.state_dict())
    backward = device.type == "cuda"
    results = []
    torch.backends.cuda.matmul.allow_tf32 = False
    for model in (dense, flex):
        model.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(backward):
            loss = train_losses(model, batch, weights)["loss"]
        if backward:
            loss.backward()
        results.append(
            (loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})
        )
    torch.backends.cuda.matmul.allow_tf32 = device.type == "cuda"
    loss_error = relative(results[1][0], results[0][0])
    line = f"loss {results[0][0].item():.6f}, relative difference {loss_error:.1e}"
    if not backward:
        return loss_error < 1e-5, line + "; gradients not compared (no FlexAttention backward on a CPU)"
    names = sorted(results[0][1])
    flat = [torch.cat([r[1][n].flatten().double() for n in names]) for r in results]
    grad_error = relative(flat[1], flat[0])
    worst = max(names, key=lambda n: relative(results[1][1][n], results[0][1][n]))
    worst_error = relative(results[1][1][worst], results[0][1][worst])
    return loss_error < 1e-5 and grad_error < 1e-4, (
        f"{line}; gradients {grad_error:.1e} over all parameters, worst {worst} {worst_error:.1e}"
    )


def check_heads(args, size, device, tmp):
    """Each head's outputs and decoded values under TF32-on against its float64 copy on the CPU."""
    d, rows, worst, parts = preset(size.preset).d_model, 4096, 0.0, []
    torch.backends.cuda.matmul.allow_tf32 = True  # as train.setup sets it on CUDA
    for name in encoders.names():
        encoding = encoders.get(name)
        if encoding.number_head(d) is None:
            continue
        torch.manual_seed(0)
        model = GPT(preset(size.preset, n_layer=1), encoding, 512).to(device)
        hidden = torch.randn(rows, d, device=device)
        with EmulatedTF32() if args.emulate_tf32 else _nothing():
            out = model.number_outputs(hidden)
            values = model.number_head.predict(out).double().cpu()
        flag_kept = torch.backends.cuda.matmul.allow_tf32
        head = copy.deepcopy(model.number_head).cpu().double()
        with torch.no_grad():
            ref = head(hidden.cpu().double())
            ref_values = head.predict(ref).double()
        error = relative(out.detach(), ref)
        finite = torch.isfinite(ref_values) & torch.isfinite(values)
        value_error = ((values - ref_values).abs() / ref_values.abs().clamp_min(1e-300))[finite & (ref_values != 0)]
        median, p99 = (float(value_error.quantile(q)) if value_error.numel() else 0.0 for q in (0.5, 0.99))
        worst = max(worst, error)
        parts.append(f"{name} {error:.1e} (values: median {median:.1e}, p99 {p99:.1e})")
        if not flag_kept:
            return False, f"{name}: the head left TF32 switched off for the rest of the run"
    torch.backends.cuda.matmul.allow_tf32 = device.type == "cuda"
    return worst < 1e-5, "outputs vs float64, TF32 on elsewhere: " + "; ".join(parts)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def check_syncs(args, size, device, tmp):
    counts = []
    for encoding in ("bittokens", "fone", "xval", "single_digit"):
        run = setup(
            config(
                args,
                size,
                tmp / f"syncs-{encoding}",
                encoding=encoding,
                grad_accum=1,
                attention="auto" if device.type == "cuda" else "dense",
            )
        )
        for step in range(2):
            train_step(run, step)
        batches = step_batches(run, 2)
        synchronize(device)
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                train_step(run, 2, batches)
            torch.cuda.set_sync_debug_mode(0)
            found = [str(w.message).splitlines()[0] for w in caught if "synchroniz" in str(w.message).lower()]
        else:
            with HostSyncs(host_resident=optimizer_counters(run.optimizers)) as syncs:
                train_step(run, 2, batches)
            found = [f"{k} x{v}" for k, v in syncs.counts.items()]
        counts.append((encoding, len(found) if device.type == "cuda" else syncs.total, found))
    line = "; ".join(f"{e} {n}" + (f" ({', '.join(sorted(set(f)))[:200]})" if n > 1 else "") for e, n, f in counts)
    return all(n <= 1 for _, n, _ in counts), "syncs in one step: " + line


def check_recompile(args, size, device, tmp):
    from torch._dynamo.utils import counters

    run = setup(config(args, size, tmp / "compile", compile=True, grad_accum=1))
    if size.compile_backend != "inductor":
        run.model.compile_layers(backend=size.compile_backend)
    started = time.time()
    for step in range(2):
        train_step(run, step)
    synchronize(device)
    warm = time.time() - started
    before = {k: dict(v) for k, v in counters.items()}
    times = []
    for step in range(2, 14):
        batches = step_batches(run, step)
        synchronize(device)
        t = time.perf_counter()
        train_step(run, step, batches)
        synchronize(device)
        times.append(time.perf_counter() - t)
    new = {
        f"{k}.{n}": v - before.get(k, {}).get(n, 0)
        for k, group in counters.items()
        for n, v in group.items()
        if v != before.get(k, {}).get(n, 0) and k in ("stats", "frames", "recompiles")
    }
    graphs = new.get("stats.unique_graphs", 0)
    model, micro = run.model, statistics.median(times)
    matmul_params = sum(p.numel() for n, p in model.named_parameters() if n != "wte.weight")
    flops = size.rows * size.context * (6 * matmul_params + 12 * model.cfg.n_layer * model.cfg.d_model * size.context)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    datasheet = next((v for k, v in DATASHEET_BF16.items() if k in name), None)
    mfu = (
        ""
        if datasheet is None
        else f" (MFU {flops / micro / datasheet:.1%} of the datasheet's bf16, optimizer included)"
    )
    return graphs == 0, (
        f"{graphs} new graphs over 12 new batches after warm-up ({warm:.0f} s: compile + 2 steps); "
        f"a compiled step of one micro-batch {1e3 * micro:.0f} ms{mfu}; counter changes {new or 'none'}"
    )


def peak_bf16(device) -> float | None:
    """A large bf16 matrix product's FLOP/s on this device (median of 10 after 3 warm-ups)."""
    if device.type != "cuda":
        return None
    n = 8192
    a, b = (
        torch.randn(n, n, device=device, dtype=torch.bfloat16),
        torch.randn(n, n, device=device, dtype=torch.bfloat16),
    )
    times = []
    for k in range(13):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        if k >= 3:
            times.append(start.elapsed_time(end) / 1e3)
    return 2 * n**3 / statistics.median(times)


def check_speed(args, size, device, tmp):
    measured = peak_bf16(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    datasheet = next((v for k, v in DATASHEET_BF16.items() if k in name), None)
    parts, keeps_up = [], True
    for encoding in args.encodings:
        # prefetch="process": the pools kept as files, which the batch worker maps
        run = setup(config(args, size, tmp / f"speed-{encoding}", encoding=encoding, prefetch="process"))
        model = run.model
        matmul_params = sum(p.numel() for n, p in model.named_parameters() if n != "wte.weight")
        tokens = size.rows * size.accum * size.context
        flops = tokens * (6 * matmul_params + 12 * model.cfg.n_layer * model.cfg.d_model * size.context)
        train_step(run, 0)  # warm-up: kernels compiled, allocator filled
        host, device_times = [], []
        for step in range(1, 1 + size.steps):
            t = time.perf_counter()
            batches = step_batches(run, step)
            host.append(time.perf_counter() - t)
            synchronize(device)
            t = time.perf_counter()
            train_step(run, step, batches)
            synchronize(device)
            device_times.append(time.perf_counter() - t)
        first, loops, busy = 1 + size.steps, {}, None
        # the worker thread at each GIL switch interval (how often it must hand the GIL back), then
        # the worker process (--prefetch process, the default on CUDA) at Python's default
        for mode, interval in [("thread", k) for k in args.switch_intervals] + [("process", None)]:
            default = sys.getswitchinterval()
            sys.setswitchinterval(interval or default)
            loader = open_loader(run, mode)
            try:
                batches = loader.get(first)  # its first batch is built in the step: not timed
                loader.prefetch(first + 1)
                train_step(run, first, batches)
                first, loop = first + 1, []
                profiler = _profiler(device) if mode == "process" else _nothing()
                with profiler:
                    for step in range(first, first + size.steps):
                        t = time.perf_counter()
                        batches = loader.get(step)
                        loader.prefetch(step + 1)
                        train_step(run, step, batches)
                        synchronize(device)
                        loop.append(time.perf_counter() - t)
                first += size.steps
                if mode == "process":
                    syncs = _loop_syncs(run, loader, first, device)
                    first += 1
                    worker = statistics.median(loader.builds[1:])
                    waited = statistics.median(loader.waits[2:])
                    pinned = all(s.pinned for s in loader.slots if s is not None)
                    if device.type == "cuda":
                        busy = sum(e.self_device_time_total for e in profiler.key_averages()) / 1e6 / sum(loop)
                loader.get(first)  # the last prefetched batch
                first += 1
            finally:
                loader.close()
                sys.setswitchinterval(default)
            loops[(mode, interval)] = statistics.median(loop)
        h, g = statistics.median(host), statistics.median(device_times)
        w = loops[("process", None)]
        keeps_up &= w <= 1.05 * g and (device.type != "cuda" or syncs <= 1)
        mfu = "" if datasheet is None else f", MFU {flops / g / datasheet:.1%} of the datasheet's bf16"
        mfu += (
            ""
            if measured is None
            else f", {flops / g / measured:.1%} of a measured matmul ({measured / 1e12:.0f} TFLOP/s)"
        )
        thread = ", ".join(
            f"{1e3 * v:.0f} ms ({v / g:.2f} x) at a {1e3 * k:g} ms GIL switch interval"
            for (m, k), v in loops.items()
            if m == "thread"
        )
        parts.append(
            f"{encoding}: host batch {1e3 * h:.0f} ms here, {1e3 * worker:.0f} ms in the worker process; device "
            f"step {1e3 * g:.0f} ms; loop step with the worker process {1e3 * w:.0f} ms = {w / g:.2f} x the device "
            f"step ({tokens / w:,.0f} tokens/s; get waited {1e3 * waited:.1f} ms; slots page-locked: "
            f"{'yes' if pinned else 'no'}; host syncs in a loop step {syncs}), with the worker thread {thread}"
            f"{mfu}" + ("" if busy is None else f", GPU busy {busy:.0%} with the worker process")
        )
    return keeps_up, (
        f"{size.rows * size.accum} rows x {size.context} a step, eager; the loop keeps up when its step with the "
        "batch worker process takes at most 1.05 x the device step, with at most 1 host sync; " + "; ".join(parts)
    )


def _loop_syncs(run, loader, step, device) -> int:
    """Host syncs of one step of the loop (take the batch, ask for the next, train): on a GPU the
    synchronizations torch reports, on a CPU workbench.runs.syncs' count (the CPU path's own block-plan
    reads included)."""
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batches = loader.get(step)
            loader.prefetch(step + 1)
            train_step(run, step, batches)
        torch.cuda.set_sync_debug_mode(0)
        return sum("synchroniz" in str(w.message).lower() for w in caught)
    with HostSyncs(host_resident=optimizer_counters(run.optimizers)) as syncs:
        batches = loader.get(step)
        loader.prefetch(step + 1)
        train_step(run, step, batches)
    return syncs.total


def _profiler(device):
    if device.type != "cuda":
        return _nothing()
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CUDA])


def check_generate(args, size, device, tmp):
    from workbench.measures.evaluate import evaluate

    run = setup(config(args, size, tmp / "generate", val_samples=64, grad_accum=1))
    questions = {t: f for t, f in run.val.items() if tasks.get(t).score is not None}  # text has no answers
    batch = {t: f.iloc[:64] for t, f in list(questions.items())[:1]}
    evaluate(run.model, run.tok, batch)  # warm-up: kernels loaded
    synchronize(device)
    syncs = None
    if device.type == "cuda":
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answers = evaluate(run.model, run.tok, batch)
        torch.cuda.set_sync_debug_mode(0)
        syncs = sum("synchroniz" in str(w.message).lower() for w in caught)
    started = time.perf_counter()
    answers = run.answer(questions)
    synchronize(device)
    seconds = time.perf_counter() - started
    tokens = float(answers["output_tokens"].mean())
    line = (
        f"{len(answers)} questions of {len(questions)} tasks in {seconds:.1f} s ({1e3 * seconds / len(answers):.1f} "
        f"ms a question, {tokens:.1f} tokens an answer)"
    )
    if syncs is not None:
        line += f"; host syncs generating one batch of 64: {syncs}"
    return len(answers) == sum(len(f) for f in questions.values()), line


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda or cpu")
    parser.add_argument("--checks", nargs="+", default=list(CHECKS), choices=CHECKS, help="which checks")
    parser.add_argument("--encodings", nargs="+", default=["bittokens", "fone"], help="encodings the speed check times")
    parser.add_argument(
        "--switch-intervals",
        nargs="+",
        type=float,
        default=[0.005, 0.0005],
        help="GIL switch intervals (s) the speed check's loop runs under (Python's default: 0.005)",
    )
    parser.add_argument(
        "--emulate-tf32",
        action="store_true",
        help="on a CPU, round float32 products' inputs to TF32 while the TF32 flag is on",
    )
    parser.add_argument("--log", help="also append the lines to this file")
    args = parser.parse_args(argv)
    if args.log:
        try:
            args.log = output_path(args.log, "--log")
        except ValueError as err:
            parser.error(str(err))
    device = torch.device(args.device)
    size = GPU if device.type == "cuda" else CPU
    environment = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    log(f"gpu_check on {environment}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.checks:
            started = time.time()
            try:
                passed, line = globals()[f"check_{name}"](args, size, device, Path(tmp))
            except Exception as err:  # noqa: BLE001 - a check that crashes is a failed check, and the next one runs
                passed, line = False, f"{type(err).__name__}: {str(err).strip()[:400]}"
                traceback.print_exc()
            results.append(passed)
            text = f"{'PASS' if passed else 'FAIL'} {name} ({time.time() - started:.0f} s): {line}"
            log(text)
            if args.log:
                with open(args.log, "a") as f:
                    f.write(text + "\n")
    log(f"gpu_check: {sum(results)} of {len(results)} checks passed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
