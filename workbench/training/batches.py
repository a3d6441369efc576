"""The batches a training step consumes, made so that a GPU never waits for the host.

A step's batch is this rank's rows only (`data.pack(..., part=(rank, world))`), split into the
micro-batches of gradient accumulation; the ranks sum their loss denominators on the device
(train_step). Everything the model would otherwise have to read back
from the device is computed here, on the CPU, from the packed NumPy arrays (`number_fields`): the
flat positions of the <|num|> inputs and of the targets, which targets are numbers, the number
head's input features and its loss targets (NumPy bit and digit tables). With them the forward
pass has no boolean-mask indexing, no `.any()`, no `int(...)` and no GPU→CPU→GPU round trip
(model.GPT.forward).

`StepBuilder` makes a step's batch from the pools, the balancer's counts and the curricula;
`Loader` builds the next step's batch with it on a worker thread while the current step runs, into
pinned memory, so the copy to the GPU does not block (`Batch.to`). It only reaches one step
ahead where the next batch cannot depend on what the current step changes: never across an
evaluation (the balancer and the curricula change there) or a checkpoint (which saves the data
generator's state). The batches are the ones built in order without it, so a run's losses do not
depend on it. `--prefetch process` builds them in another process instead (batch_worker.py): the
thread holds the GIL that the training thread needs to launch its kernels (docs/gpu.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from ..config import PREFETCH
from .data import next_batch


def prefetch_mode(setting: str, device_type: str) -> str:
    """Where a run builds its next batch, as --prefetch resolves on a device: "off" (in the step),
    "thread" or "process". auto: a process on CUDA, where the host must keep the GPU busy and a
    thread's GIL slows the launches (docs/gpu.md); off on a CPU, which trains on the cores a worker
    would take."""
    if setting not in PREFETCH:
        raise ValueError(f"--prefetch {setting!r}: one of {', '.join(PREFETCH)}")
    if setting == "auto":
        return "process" if device_type == "cuda" else "off"
    return "thread" if setting == "on" else setting


# the fields a micro-batch keeps whole (the loss denominators of all of a step's rows), not cut by rows
GLOBAL = ("ce_count", "number_count", "token_count")


@dataclass
class Batch:
    """One micro-batch as a training step consumes it: `data.pack`'s rows (inputs [B, T] and their
    next-token targets, which targets are learned, each target's task, the loss denominators) and
    what `number_fields` computes from them on the CPU, ahead of the step: the flat positions of
    the learned targets (`loss_index`), of the <|num|> inputs (`num_index`), which learned targets
    are <|num|> (`number_index`), the number head's input `features` and loss targets
    (`number_targets`). A model without a number head has none of the last four; a head without
    `features` (or `loss_target`) reads the values themselves."""

    ids: Tensor
    values: Tensor
    positions: Tensor
    doc_ids: Tensor
    targets: Tensor
    target_values: Tensor
    loss_mask: Tensor
    task_ids: Tensor
    ce_count: Tensor
    number_count: Tensor
    loss_index: Tensor
    num_index: Tensor | None = None
    number_index: Tensor | None = None
    features: Tensor | None = None
    number_targets: Tensor | None = None
    token_count: Tensor | None = None  # the denominator of a token module's own mean (`token_count`), if it has one

    def tensors(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def pinned(self) -> "Batch":
        """The batch in page-locked memory, from which a copy to the GPU need not block."""
        return replace(self, **{k: v.pin_memory() for k, v in self.tensors().items()})

    def to(self, device: torch.device) -> "Batch":
        """The batch on `device`; from pinned memory without blocking the host."""
        return replace(self, **{k: v.to(device, non_blocking=v.is_pinned()) for k, v in self.tensors().items()})


def micro_batches(batch: dict, micro: int) -> list[dict]:
    """This rank's rows cut into `micro` micro-batches of equal rows (the counts stay those of all)."""
    rows = batch["ids"].shape[0]
    if rows % micro:
        raise ValueError(f"{rows} rows do not split into {micro} micro-batches")
    size = rows // micro
    return [{k: v if k in GLOBAL else v[m * size : (m + 1) * size] for k, v in batch.items()} for m in range(micro)]


def token_count(batch: dict, module, world: int = 1) -> Tensor | None:
    """The count of the learned targets of `data.pack`'s rows that a token module's own mean is
    over (`TokenModule.averaged_over`), for all the step's micro-batches, at least 1 for a whole
    batch (world 1) as pack's counts; None where there is no such module or its mean is over all."""
    over = module.averaged_over(batch["targets"][batch["loss_mask"]]) if module is not None else None
    return None if over is None else torch.tensor(max(1 if world == 1 else 0, int(over.sum())))


def number_fields(batch: dict, head, num_id: int) -> Batch:
    """The Batch of `data.pack`'s CPU tensors: with what the model needs to run without host
    syncs, loss_index, and with a number head num_index, number_index, and the head's `features`
    and `number_targets` where it has them (a head without `features` gets its values from the batch)."""
    loss_index = batch["loss_mask"].flatten().nonzero().squeeze(1)
    if head is None:
        return Batch(**batch, loss_index=loss_index)
    num_index = (batch["ids"].flatten() == num_id).nonzero().squeeze(1)
    targets = batch["targets"].flatten()[loss_index]
    number_index = (targets == num_id).nonzero().squeeze(1)
    features = head.features(batch["values"].flatten()[num_index])
    wanted = head.loss_target(batch["target_values"].flatten()[loss_index][number_index])
    return Batch(
        **batch,
        loss_index=loss_index,
        num_index=num_index,
        number_index=number_index,
        features=features,
        number_targets=wanted,
    )


@dataclass
class StepBuilder:
    """How a step's batch is made: drawn from `pools` by the balancer's `counts` and the curricula
    of `sampler` (`data.next_batch`), this rank's rows (`part`) cut into `accum` micro-batches with
    their number fields, pinned for a GPU with `pin`. Of what it reads only the sampler's curricula,
    the counts and the generator change during a run, and `build` takes the last two: the worker
    process of `--prefetch process` holds a builder of its own and is sent them (batch_worker.py)."""

    pools: dict
    sampler: object  # curriculum.Sampler
    rows: int  # a step's rows over all processes and micro-batches
    context: int
    pad_id: int
    num_id: int
    part: tuple[int, int] = (0, 1)  # (rank, world)
    accum: int = 1
    head: object = None  # the model's number head, for its `features` and `loss_target`
    token_module: object = None
    pin: bool = False

    def build(self, step: int, counts: dict, rng) -> list[Batch]:
        batch = next_batch(
            self.pools,
            counts,
            rng,
            lambda task, n, r: self.sampler.sample(task, n, step, r),
            self.rows,
            self.context,
            self.pad_id,
            self.num_id,
            part=self.part,
        )
        counted = token_count(batch, self.token_module, self.part[1])
        if counted is not None:  # a token module's own mean, over the targets it names in the whole step
            batch["token_count"] = counted
        micro = [number_fields(b, self.head, self.num_id) for b in micro_batches(batch, self.accum)]
        return [b.pinned() for b in micro] if self.pin else micro


class Loader:
    """Step batches from `build(step)`, on a worker thread one step ahead when `ahead`.

    batch = loader.get(step)          # built now, or taken from the worker
    loader.prefetch(step + 1)         # only where step + 1 cannot depend on this step
    """

    def __init__(self, build, ahead: bool):
        self.build = build
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="batches") if ahead else None
        self.pending = None  # (step, future)

    def get(self, step: int):
        pending, self.pending = self.pending, None
        if pending is not None and pending[0] == step:
            return pending[1].result()
        if pending is not None:  # a batch for another step was never taken: it would have moved the generator
            raise RuntimeError(f"the batch of step {pending[0]} was built ahead but step {step} was asked for")
        return self.build(step)

    def prefetch(self, step: int) -> None:
        if self.worker is not None:
            self.pending = (step, self.worker.submit(self.build, step))

    def close(self) -> None:
        if self.worker is not None:
            self.worker.shutdown(wait=True)
