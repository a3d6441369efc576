"""Batches built in another process (`--prefetch process`), so that the training thread keeps the GIL.

A worker thread that builds the next step's batch (`batches.Loader`) competes for the GIL with the
thread that launches the step's kernels: on one H100 a step of the loop took 1.2-1.5x the device
step (docs/gpu.md). `ProcessLoader` is that loader with the building done in a worker process:

    loader = ProcessLoader(spec, state, adopt, pin=True)  # the worker builds with spec.open()
    batches = loader.get(step)                            # built now, or taken from the worker
    loader.prefetch(step + 1)                             # only where step + 1 cannot depend on this step
    loader.close()

The same batches, bit for bit. What a step's batch holds depends on state that the main process
changes: the balancer's counts and the curricula (at evaluations and at a resume) and the data
generator (every batch). The worker keeps none of it: every request carries that state as the
main process holds it (`state(step)`: counts, curricula and the generator's state, a few kB), and
every batch comes back with the generator's state after it, which the main process takes over
with the batch (`adopt`). So the batches are the ones the main process would build in the same
order (tests/test_batch_worker.py); a checkpoint saves the main process's state as before, and a
resumed run sends the restored one. What the worker holds is what never changes: the pools, mapped
from the files `distributed.shared_pools(..., keep=True)` wrote (one copy for all processes), and a
number head and token module built from the encoding, whose `features`, `loss_target` and
`averaged_over` read the encoding only (`WorkerSpec`).

No copies. The worker writes a step's tensors into one of two slots, files in /dev/shm that both
processes map (and unlink once mapped, so that nothing is left whatever ends them), and sends
their layout; the main process's batch is views of the slot. On CUDA each slot is page-locked once
(cudaHostRegister), so the copies to the GPU need not block (`Batch.to`); where that fails, the
main process copies the batch into pinned memory as the thread did. A slot is written again only
after the step that read it: its `get` of the next step releases it, and on CUDA the next write
waits for an event recorded then (the step's read of its losses synchronized before, so the wait
costs nothing: no host sync is added to a step).

The worker is a fresh interpreter (`python -c`, not a fork: safe beside CUDA, and alike on every
platform) on one thread, in the main process's numerics, with Ctrl-C left to the main process; it
exits when asked, when its pipe closes, or when its parent dies (Linux's parent-death signal). A
failure in it is one `BatchWorkerError` naming the worker, what it was doing and its traceback;
a worker that dies, or stops answering for `timeout` seconds, is one too.
"""

from __future__ import annotations

import ctypes
import gc
import math
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, Pipe
from pathlib import Path

import numpy as np
import torch

from ..model import numerics
from .batches import Batch, StepBuilder

SLOTS = 2  # the batch a step reads and the one built meanwhile
ALIGN = 64  # every tensor of a slot starts at a multiple of this (any dtype's view, cache lines)
MIB = 1 << 20
START = 600.0  # seconds a worker may take to start: an interpreter, torch, the pools' maps, on a busy machine
BOOT = "import sys; from workbench.training.batch_worker import serve; serve(int(sys.argv[1]), int(sys.argv[2]))"


class BatchWorkerError(RuntimeError):
    """The batch worker process failed, died or stopped answering."""


@dataclass
class WorkerSpec:
    """What the worker process builds its `StepBuilder` from (picklable; none of it changes during a
    run): the folders of the pools' files, the sampler's settings, the encoding and the shape of a
    step. `open()`, in the worker, maps the pools and returns what serves the requests."""

    pools: dict  # task -> the folder of its training pool's files
    binary: dict  # task -> the folder of its binary pool's files (A.3)
    difficulty_base: int
    total_steps: int
    endgame: str
    endgame_share: float
    encoding: object
    d_model: int
    piece_ids: dict | None
    rows: int
    context: int
    pad_id: int
    num_id: int
    part: tuple
    accum: int

    @classmethod
    def of(cls, builder: StepBuilder, encoding, d_model: int, piece_ids) -> WorkerSpec:
        """The spec of `builder` (train.step_builder's), whose pools must be mapped from files."""
        sampler = builder.sampler
        pools = {t: p.files for t, p in builder.pools.items()}
        binary = {t: pair[0].files for t, pair in sampler.binary.items()}
        missing = sorted({t for t, f in {**pools, **binary}.items() if f is None})
        if missing:
            raise ValueError(
                f"--prefetch process maps the training pools from files, and those of {', '.join(missing)} "
                "have none: set the run up with prefetch='process' (distributed.shared_pools keeps them)"
            )
        return cls(
            {t: str(f) for t, f in pools.items()},
            {t: str(f) for t, f in binary.items()},
            sampler.difficulty_base,
            sampler.total_steps,
            sampler.endgame,
            sampler.endgame_share,
            encoding,
            d_model,
            piece_ids,
            builder.rows,
            builder.context,
            builder.pad_id,
            builder.num_id,
            tuple(builder.part),
            builder.accum,
        )

    def open(self) -> WorkerBuilder:
        from ..runs.distributed import _read_pool
        from .curriculum import Sampler

        pools = {t: listed(_read_pool(t, Path(f))) for t, f in self.pools.items()}
        binary = {t: (listed(_read_pool(t, Path(f))), None) for t, f in self.binary.items()}  # no validation frames
        gc.freeze()  # the samples live all run: the collector need not walk them again and again
        sampler = Sampler(pools, {}, self.difficulty_base, self.total_steps, binary, self.endgame, self.endgame_share)
        builder = StepBuilder(
            pools,
            sampler,
            self.rows,
            self.context,
            self.pad_id,
            self.num_id,
            self.part,
            self.accum,
            self.encoding.number_head(self.d_model),
            self.encoding.token_module(self.d_model, self.piece_ids),
        )
        return WorkerBuilder(builder)


class WorkerBuilder:
    """The worker's builder: a request's state in, the step's batch and the generator's state out."""

    def __init__(self, builder: StepBuilder):
        self.builder = builder

    def serve(self, step: int, state: dict) -> tuple[list[Batch], dict]:
        self.builder.sampler.curricula = state["curricula"]
        rng = generator(state["rng"])
        batches = self.builder.build(step, state["counts"], rng)
        return batches, rng.bit_generator.state


def listed(pool):
    """The mapped pool with its samples as a list of views: drawn one by one, a list's are taken
    3x faster than the map's (a step draws ~30,000), at ~400 bytes a sample (docs/gpu.md)."""
    return replace(pool, samples=pool.samples.take(np.arange(len(pool.samples))))


def generator(state: dict) -> np.random.Generator:
    """A NumPy generator in `state` (a bit generator's `.state`, which names its kind)."""
    bits = getattr(np.random, state["bit_generator"])()
    bits.state = state
    return np.random.Generator(bits)


def shared_folder() -> str | None:
    """Where the slots live: /dev/shm (memory) where it has room, else the system's temporary folder."""
    try:
        if shutil.disk_usage("/dev/shm").free > 512 * MIB and os.access("/dev/shm", os.W_OK):
            return "/dev/shm"
    except OSError:
        pass
    return None


class ProcessLoader:
    """`batches.Loader`'s get / prefetch / close, the batches built by a worker process.

    spec: a picklable object whose `open()`, in the worker, gives what has `serve(step, state) ->
    (batches, state after)` (`WorkerSpec`); state(step): what the worker needs to build that step,
    as the main process holds it when the request is sent; adopt(state after): called with the
    worker's answer as `get` returns that step's batch. pin: page-lock the slots for copies to a
    GPU. A batch is views of shared memory that the worker writes again two requests later: it is
    the current step's to read, not to keep (clone what must outlive the next `get`)."""

    def __init__(self, spec, state, adopt, pin: bool = False, timeout: float = 600.0, threads: int = 1):
        self.state, self.adopt, self.pin, self.timeout = state, adopt, pin, timeout
        self.slots: list[_Slot | None] = [None] * SLOTS
        self.pending = None  # (step, slot) asked for and not yet taken
        self.handed = None  # the slot of the batch `get` returned last
        self.busy = False  # a request is unanswered
        # seconds the worker built each batch (wall clock, its CPU time) and the main process waited for it
        self.builds, self.build_cpu, self.waits = [], [], []
        self.pid = None
        self.folder = Path(tempfile.mkdtemp(prefix="workbench-batches-", dir=shared_folder()))
        ours, theirs = Pipe()
        # the child imports this very workbench (not another copy on its own path) in the parent's numerics
        paths = os.pathsep.join(dict.fromkeys(p for p in sys.path if p))
        mode = numerics.state()["numerics"]
        env = {**os.environ, "PYTHONPATH": paths, numerics.ENV: mode}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", BOOT, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self.conn, self.pid = ours, self.proc.pid
        try:
            self.busy = True
            self.conn.send((spec, str(self.folder), threads, mode))
            self._answer("starting", max(timeout, START))
        except BaseException:
            self.close()
            raise

    def get(self, step: int) -> list[Batch]:
        self._running()
        self._release()  # the batch handed out last: its step is over
        if self.pending is None:
            self._request(step)
        elif self.pending[0] != step:  # the worker built a batch for another step: it would have moved the generator
            raise RuntimeError(f"the batch of step {self.pending[0]} was built ahead but step {step} was asked for")
        slot = self.pending[1]
        started = time.perf_counter()
        _, built, grown, layout, after, seconds = self._answer(f"building the batch of step {step}")
        self.pending = None
        self.waits.append(time.perf_counter() - started)
        self.builds.append(seconds[0])
        self.build_cpu.append(seconds[1])
        if built != step:
            raise BatchWorkerError(f"the batch worker process (pid {self.pid}) sent step {built} for step {step}")
        if grown is not None:  # the worker needed a larger slot: map the new file instead
            if self.slots[slot] is not None:
                self.slots[slot].close()
            self.slots[slot] = _Slot(*grown, pin=self.pin)
        self.adopt(after)
        self.handed = slot
        batches = self.slots[slot].batches(layout)
        if self.pin and not self.slots[slot].pinned:  # page-locking failed: copy, as the worker thread did
            batches = [b.pinned() for b in batches]
        return batches

    def prefetch(self, step: int) -> None:
        self._request(step)

    def close(self) -> None:
        proc, self.proc = getattr(self, "proc", None), None
        if proc is not None:
            try:
                if self.busy or proc.poll() is not None:
                    proc.terminate()  # a batch under way is not worth waiting for
                else:
                    self.conn.send(("stop",))
            except OSError:
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self.conn.close()
        self.pending = self.handed = None
        self.busy = False
        slots, self.slots = self.slots, [None] * SLOTS
        for slot in slots:
            if slot is not None:
                slot.close(everything=True)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _release(self) -> None:
        if self.handed is not None:
            self.slots[self.handed].release()
            self.handed = None

    def _running(self) -> None:
        if self.proc is None:
            raise BatchWorkerError(f"the batch worker process (pid {self.pid}) has stopped")

    def _request(self, step: int) -> None:
        self._running()
        if self.pending is not None:
            raise RuntimeError(f"the batch of step {self.pending[0]} is still being built")
        slot = next(k for k in range(SLOTS) if k != self.handed)
        if self.slots[slot] is not None:
            self.slots[slot].wait()
        try:
            self.conn.send(("build", step, slot, self.state(step)))
        except OSError:
            self._fail(f"could not be asked for the batch of step {step}")
        self.pending, self.busy = (step, slot), True

    def _answer(self, doing: str, timeout: float | None = None) -> tuple:
        """The worker's next message, or one BatchWorkerError saying what went wrong."""
        timeout = timeout or self.timeout
        deadline = time.monotonic() + timeout
        while not self.conn.poll(min(1.0, timeout)):  # a dead worker's closed pipe wakes this at once
            if self.proc.poll() is not None and not self.conn.poll(0):
                break
            if time.monotonic() > deadline:
                self._fail(f"gave no answer in {timeout:.0f} s {doing}")
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            self._fail(f"died ({_exit(self.proc)}) {doing}")
        self.busy = False
        if message[0] == "error":
            self._fail(f"failed {doing}: {message[1]}", message[2])
        return message

    def _fail(self, what: str, worker_traceback: str | None = None):
        pid = self.pid
        self.close()
        text = f"the batch worker process (pid {pid}) {what}"
        if worker_traceback:
            text += "\n\nthe worker's traceback:\n" + worker_traceback.rstrip()
        raise BatchWorkerError(text) from None


def _exit(proc: subprocess.Popen) -> str:
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return "its pipe closed"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class _Slot:
    """The main process's map of one slot file (unlinked once mapped), page-locked with `pin`."""

    def __init__(self, path: str, size: int, pin: bool = False):
        fd = os.open(path, os.O_RDWR)
        try:
            mapped = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        os.unlink(path)  # both processes map it now: no file outlives them, however they end
        self.arena = torch.frombuffer(mapped, dtype=torch.uint8)
        self.pinned = pin and _register(self.arena)
        self.released = None  # CUDA: an event after the last step that read this slot

    def batches(self, layout: list) -> list[Batch]:
        micro: dict[int, dict] = {}
        for m, name, dtype, shape, start in layout:
            kind = getattr(torch, dtype)
            size = math.prod(shape) * kind.itemsize
            micro.setdefault(m, {})[name] = self.arena[start : start + size].view(kind).view(shape)
        return [Batch(**micro[m]) for m in sorted(micro)]

    def release(self) -> None:
        if self.pinned:
            self.released = torch.cuda.Event()
            self.released.record()

    def wait(self) -> None:
        """Until the copies out of this slot are done (at once in the loop: the step synchronized)."""
        if self.released is not None and not self.released.query():
            self.released.synchronize()

    def close(self, everything: bool = False) -> None:
        """Unlock the slot once no copy reads it: after its release (a slot replaced by a larger
        one), or, with `everything`, after all the device's work (a step may have been cut short)."""
        if self.pinned:
            if everything:
                torch.cuda.synchronize()
            else:
                self.wait()
            torch.cuda.cudart().cudaHostUnregister(self.arena.data_ptr())
            self.pinned = False


def _register(arena: torch.Tensor) -> bool:
    """Page-lock the slot for asynchronous copies to the GPU; False where CUDA refuses."""
    try:
        code = torch.cuda.cudart().cudaHostRegister(arena.data_ptr(), arena.numel(), 0)
        return int(code) == 0
    except (RuntimeError, AttributeError, TypeError):
        return False


# -- the worker process ----------------------------------------------------------------------------
class _Arena:
    """The worker's maps of the slots: each step's tensors laid out in one file, ALIGN apart."""

    def __init__(self, folder: Path):
        self.folder, self.maps, self.made = folder, {}, 0

    def write(self, slot: int, batches: list[Batch]) -> tuple[list, tuple | None]:
        items = [(m, name, t.contiguous()) for m, b in enumerate(batches) for name, t in b.tensors().items()]
        layout, end = [], 0
        for m, name, t in items:
            layout.append((m, name, str(t.dtype).removeprefix("torch."), tuple(t.shape), end))
            end += -(-t.numel() * t.element_size() // ALIGN) * ALIGN
        grown = None
        if slot not in self.maps or self.maps[slot].numel() < end:
            size = (end + end // 4) // MIB * MIB + MIB  # room for the larger batches of later steps
            path = self.folder / f"slot{slot}-{self.made}"
            self.made += 1
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
                mapped = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            self.maps[slot] = torch.frombuffer(mapped, dtype=torch.uint8)
            grown = (str(path), size)
        arena = self.maps[slot]
        for (_, _, _, _, start), (_, _, t) in zip(layout, items):
            n = t.numel() * t.element_size()
            if n:
                arena[start : start + n].copy_(t.reshape(-1).view(torch.uint8))
        return layout, grown


def _exit_with_parent(parent: int) -> None:
    """SIGTERM when the parent dies (Linux), and exit now if it died already."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        sys.exit(0)


def _stop(signum, frame):
    sys.exit(0)  # through the finally blocks: the slot folder is removed


def serve(fd: int, parent: int) -> None:
    """The worker process: start, then build what is asked until told to stop or left alone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle: it stops us
    signal.signal(signal.SIGTERM, _stop)
    _exit_with_parent(parent)
    conn, folder = Connection(fd), None
    try:
        try:
            from .. import encoders

            encoders.names()  # every encoding's module in their order: unpickling one first would import it alone
            spec, folder, threads, mode = conn.recv()
            numerics.ensure(mode)  # the features' last bits (FoNE's cosines) are the kernels'
            torch.set_num_threads(threads)
            builder, arena = spec.open(), _Arena(Path(folder))
        except Exception as err:  # noqa: BLE001 - whatever stops the start is the main process's error
            conn.send(("error", _summary(err), traceback.format_exc()))
            return
        conn.send(("started", os.getpid()))
        while True:
            message = conn.recv()
            if message[0] == "stop":
                return
            _, step, slot, state = message
            try:
                started, cpu = time.perf_counter(), time.process_time()
                batches, after = builder.serve(step, state)
                seconds = (time.perf_counter() - started, time.process_time() - cpu)
                layout, grown = arena.write(slot, batches)
            except Exception as err:  # noqa: BLE001 - one error, sent whole, ends the worker
                conn.send(("error", _summary(err), traceback.format_exc()))
                return
            conn.send(("built", step, grown, layout, after, seconds))
    except (EOFError, OSError):  # the main process is gone
        return
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def _summary(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300]}" if text else type(err).__name__
