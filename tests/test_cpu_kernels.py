"""The C kernels of QK-norm + RoPE: PyTorch's bits exactly, and the PyTorch path whenever they are
missing, broken or different."""

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from einops import rearrange

from workbench import encoders
from workbench.model import cpu_kernels, fused
from workbench.model.gpt import GPT, preset
from workbench.tokenizer import Tokenizer
from workbench.training.batches import number_fields
from workbench.training.loss import losses as train_losses

ROOT = Path(__file__).resolve().parents[1]
HAVE_COMPILER = shutil.which(os.environ.get("CC") or "cc") is not None


@pytest.fixture
def fresh_library(monkeypatch, tmp_path):
    """library() and the bit check from scratch, building into tmp_path; both forgotten after."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("WORKBENCH_CPU_KERNELS", raising=False)
    library, agree = cpu_kernels.library, fused._kernels_agree  # (a test may patch them)
    library.cache_clear()
    agree.cache_clear()
    yield tmp_path
    library.cache_clear()
    agree.cache_clear()


def composite(x, cos, sin):
    return fused.rotate(fused.rms_norm(x), cos, sin)


def forward_backward(function, x, cos, sin, grad):
    leaf = x.detach().requires_grad_()
    y = function(leaf, cos, sin)
    y.backward(grad)
    return y.detach(), leaf.grad


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here: the PyTorch path is the only one")
@pytest.mark.parametrize(
    "head_size, layout", [(64, "qkv view"), (64, "contiguous"), (128, "qkv view"), (10, "angles shared by the batch")]
)
def test_the_kernels_give_pytorchs_bits_forward_and_backward(head_size, layout):
    assert cpu_kernels.library() is not None, "a compiler is here, so the kernels must build"
    g = torch.Generator().manual_seed(head_size)
    B, T, H = 3, 37, 4
    scale = torch.logspace(-20, 20, T)  # past 1e18 the squares overflow float32, in both paths alike
    qkv = torch.randn(B, T, 3 * H * head_size, generator=g) * scale[None, :, None]
    x = rearrange(qkv, "b t (qkv h d) -> b h qkv t d", qkv=3, h=H).unbind(2)[1]
    if layout == "contiguous":
        x = x.contiguous()
    angles = torch.rand(1 if layout == "angles shared by the batch" else B, 1, T, head_size // 2, generator=g) * 1e3
    cos, sin = angles.cos(), angles.sin()
    grad = torch.randn(B, H, T, head_size, generator=g)
    expected = forward_backward(composite, x, cos, sin, grad)
    got = forward_backward(fused._NormRotate.apply, x, cos, sin, grad)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    # a float64 oracle: the rotation of the normalised rows, to float32's precision where x² fits
    fits = (scale > 1e-15) & (scale < 1e15)
    x, cos, sin, got = x[:, :, fits], cos[:, :, fits], sin[:, :, fits], (got[0][:, :, fits],)
    y = x.double() / x.double().square().mean(-1, keepdim=True).add(torch.finfo(torch.float32).eps).sqrt()
    y1, y2 = y.chunk(2, -1)
    oracle = torch.cat([y1 * cos.double() - y2 * sin.double(), y1 * sin.double() + y2 * cos.double()], -1)
    torch.testing.assert_close(got[0].double(), oracle, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here: the PyTorch path is the only one")
def test_training_steps_take_the_kernels_and_lose_no_bit(monkeypatch):
    """Three training steps of cpu-tiny on one thread: the same losses and weights with the kernels
    as with the PyTorch path, and the kernels really ran (8 calls a step: q and k of 2 layers,
    forward and backward count once)."""
    encoding = encoders.get("bittokens")
    tok = Tokenizer(encoding)
    g = torch.Generator().manual_seed(0)
    batch = {
        "ids": torch.randint(12, tok.vocab_size, (4, 32), generator=g),
        "targets": torch.randint(12, tok.vocab_size, (4, 32), generator=g),
        "values": torch.zeros(4, 32, dtype=torch.float64),
        "target_values": torch.zeros(4, 32, dtype=torch.float64),
        "positions": (torch.arange(32) % 16).expand(4, -1),
        "doc_ids": (torch.arange(32) // 16).expand(4, -1),
        "loss_mask": torch.ones(4, 32, dtype=torch.bool),
        "task_ids": torch.zeros(4, 32, dtype=torch.long),
        "ce_count": torch.tensor(4 * 32),
        "number_count": torch.tensor(1),
    }
    assert fused._kernels_agree(64)  # the probe's own call, done before counting
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = {}
        for kernels in (True, False):
            calls = []
            apply = fused._NormRotate.apply
            monkeypatch.setattr(fused._NormRotate, "apply", lambda *a: calls.append(1) or apply(*a))
            if not kernels:
                monkeypatch.setattr(fused, "_kernels_agree", lambda head_size: False)
            torch.manual_seed(0)
            model = GPT(preset("cpu-tiny"), encoding, tok.vocab_size, tok.num_id)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            losses = []
            for _ in range(3):
                loss = train_losses(model, number_fields(batch, model.number_head, model.num_id))["loss"]
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                losses.append(loss.item())
            runs[kernels] = (losses, [p.detach().clone() for p in model.parameters()], len(calls))
            monkeypatch.undo()
    finally:
        torch.set_num_threads(threads)
    assert runs[True][2] == 3 * 2 * 2 and runs[False][2] == 0
    assert runs[True][0] == runs[False][0]
    assert all(torch.equal(a, b) for a, b in zip(runs[True][1], runs[False][1]))


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here")
@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_the_first_call_may_come_without_autograd(fresh_library, mode):
    """Generation (no_grad or inference_mode) may be the first to ask: the probe still runs its backward."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with mode():
            x, cos = torch.randn(2, 3, 5, 64), torch.full((2, 1, 5, 32), 0.6)
            assert torch.equal(fused.norm_rotate(x, cos, cos + 0.2), composite(x, cos, cos + 0.2))
        assert fused._kernels_agree(64)
    finally:
        torch.set_num_threads(threads)


def test_more_than_one_thread_takes_the_pytorch_path(monkeypatch):
    """The kernels are single-threaded: with more threads PyTorch's parallel ops are faster."""
    monkeypatch.setattr(fused._NormRotate, "apply", lambda *a: pytest.fail("the kernels ran on two threads"))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x, cos = torch.randn(1, 2, 5, 8), torch.ones(1, 1, 5, 4)
        assert torch.equal(fused.norm_rotate(x, cos, cos * 0), composite(x, cos, cos * 0))
    finally:
        torch.set_num_threads(threads)


def test_switched_off_by_the_environment(fresh_library, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CPU_KERNELS", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cpu_kernels.library() is None
    assert list(fresh_library.iterdir()) == []


@pytest.mark.parametrize("compiler, says", [("/no/such/cc", "no C compiler '/no/such/cc'"), ("false", "failed")])
def test_without_a_working_compiler_the_pytorch_path_runs(fresh_library, monkeypatch, compiler, says):
    monkeypatch.setenv("CC", compiler)
    with pytest.warns(RuntimeWarning, match=says):
        assert cpu_kernels.library() is None
    assert not fused._kernels_agree(64)
    assert [p for p in fresh_library.rglob("*") if not p.is_dir()] == []  # no half-built library left behind
    x, cos = torch.randn(1, 2, 5, 8), torch.full((1, 1, 5, 4), 0.6)
    assert torch.equal(fused.norm_rotate(x, cos, cos + 0.2), composite(x, cos, cos + 0.2))


LOAD = "from workbench.model import cpu_kernels; assert cpu_kernels.library() is not None"


def load_in_a_new_process(cache: Path) -> subprocess.Popen:
    """A process that loads the kernels from `cache` (a fresh one: a loaded library is never rewritten)."""
    env = {**os.environ, "WORKBENCH_CACHE": str(cache)}
    env.pop("WORKBENCH_CPU_KERNELS", None)
    return subprocess.Popen([sys.executable, "-W", "error::RuntimeWarning", "-c", LOAD], env=env, cwd=ROOT)


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here")
def test_a_damaged_library_is_built_again(tmp_path):
    assert load_in_a_new_process(tmp_path).wait(timeout=120) == 0
    (built,) = (tmp_path / "cpu_kernels").glob("cpu_kernels-*.so")
    built.write_bytes(b"not a shared object")
    assert load_in_a_new_process(tmp_path).wait(timeout=120) == 0
    assert built.read_bytes()[:4] == b"\x7fELF"


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here")
def test_runs_building_at_once_all_load_one_whole_library(tmp_path):
    """Four processes build into one empty cache at the same time: each loads a whole library, and
    one file is left, no temporaries."""
    processes = [load_in_a_new_process(tmp_path) for _ in range(4)]
    assert [p.wait(timeout=120) for p in processes] == [0, 0, 0, 0]
    names = sorted(p.name for p in (tmp_path / "cpu_kernels").iterdir())
    assert len(names) == 2 and names[0].startswith("cpu_kernels-") and names[1] == names[0] + ".sha256", names


def test_kernels_that_differ_from_pytorch_are_not_used(fresh_library, monkeypatch):
    """A library whose results are off in the last bits fails the probe: the PyTorch path runs."""

    class OffByABit:
        def __getattr__(self, name):
            real = getattr(real_library, name)

            def call(*arguments):
                real(*arguments)
                out = arguments[-1]  # the output's address: nudge its first value by one ulp
                value = torch.frombuffer((ctypes.c_float * 1).from_address(out), dtype=torch.float32)
                value.copy_(torch.nextafter(value, torch.tensor(float("inf"))))

            return call

    import ctypes

    real_library = cpu_kernels.library() if HAVE_COMPILER else None
    if real_library is None:
        pytest.skip("no C compiler here")
    monkeypatch.setattr(cpu_kernels, "library", lambda: OffByABit())
    with pytest.warns(RuntimeWarning, match="differ from PyTorch's"):
        assert not fused._kernels_agree(64)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x, cos = torch.randn(1, 2, 5, 64), torch.full((1, 1, 5, 32), 0.6)
        assert torch.equal(fused.norm_rotate(x, cos, cos + 0.2), composite(x, cos, cos + 0.2))
    finally:
        torch.set_num_threads(threads)


# -- what the cache loads (issue 39) --------------------------------------------------------------
PLANTED = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(getenv("PLANTED_MARK"), "w");
    if (f) { fputs("ran", f); fclose(f); }
}
"""


def cache_name() -> str:
    """The library's file name for this machine and compiler (cpu_kernels.library's key)."""
    import hashlib
    import platform

    compiler = os.environ.get("CC") or "cc"
    key = hashlib.sha256(
        "\0".join(
            [cpu_kernels.SOURCE.read_text(), compiler, *cpu_kernels.flags(), platform.machine(), platform.node()]
        ).encode()
    ).hexdigest()[:16]
    return f"cpu_kernels-{key}.so"


def plant(folder: Path, tmp_path: Path, source=PLANTED, record=False) -> None:
    """A shared library at the cache's name in `folder` (and at the old flat name beside it), whose
    constructor writes tmp_path/ran; `record`: with a SHA-256 record that matches it."""
    import hashlib

    (tmp_path / "planted.c").write_text(source)
    built = tmp_path / "planted.so"
    subprocess.run(
        [os.environ.get("CC") or "cc", "-shared", "-fPIC", "-o", str(built), str(tmp_path / "planted.c")], check=True
    )
    folder.mkdir(parents=True, exist_ok=True)
    for where in (folder, folder.parent):
        shutil.copy(built, where / cache_name())
        if record:
            (where / f"{cache_name()}.sha256").write_text(hashlib.sha256(built.read_bytes()).hexdigest() + "\n")


def load_and_report(cache: Path, mark: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKBENCH_CACHE": str(cache), "PLANTED_MARK": str(mark)}
    env.pop("WORKBENCH_CPU_KERNELS", None)
    code = "from workbench.model import cpu_kernels; print(cpu_kernels.library() is not None)"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here")
@pytest.mark.parametrize("record", [False, True])
def test_a_planted_library_in_a_folder_open_to_others_never_runs(tmp_path, record):
    """Bug: any file at the predictable cache name was loaded (a planted library's constructor ran
    inside workbench.train before the bit check rejected it), from a folder anyone could write."""
    cache, mark = tmp_path / "cache", tmp_path / "ran"
    plant(cache / "cpu_kernels", tmp_path, record=record)
    (cache / "cpu_kernels").chmod(0o777)
    done = load_and_report(cache, mark)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr
    assert "is open to other users (mode 777)" in done.stderr and "chmod 700" in done.stderr
    assert not mark.exists(), "the planted library's code ran"


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here")
def test_a_library_the_build_did_not_write_is_built_again_unloaded(tmp_path):
    """In the private folder, a file whose SHA-256 is not the one its build recorded is replaced by
    a fresh build before anything loads it."""
    cache, mark = tmp_path / "cache", tmp_path / "ran"
    plant(cache / "cpu_kernels", tmp_path)
    (cache / "cpu_kernels").chmod(0o700)
    done = load_and_report(cache, mark)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    assert not mark.exists(), "the planted library's code ran"
    assert (cache / "cpu_kernels" / cache_name()).read_bytes() != (tmp_path / "planted.so").read_bytes()


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here")
def test_a_cached_library_without_the_kernels_is_rebuilt_not_fatal(tmp_path):
    """Bug: a cached library without the kernels' symbols (AttributeError) made every training exit
    1 until someone deleted it."""
    cache = tmp_path / "cache"
    plant(cache / "cpu_kernels", tmp_path, source="int nothing_here(void) { return 0; }\n", record=True)
    (cache / "cpu_kernels").chmod(0o700)
    done = load_and_report(cache, tmp_path / "ran")
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    assert "RuntimeWarning" not in done.stderr


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C compiler here")
def test_a_kernel_folder_that_is_a_link_is_refused(tmp_path):
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    plant(elsewhere, tmp_path, record=True)
    elsewhere.chmod(0o700)
    cache.mkdir()
    (cache / "cpu_kernels").symlink_to(elsewhere)
    done = load_and_report(cache, tmp_path / "ran")
    assert done.stdout.strip() == "False" and "is not a folder (a link or a file)" in done.stderr, done.stderr
    assert not (tmp_path / "ran").exists()
