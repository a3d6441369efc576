"""The batches a training step consumes, made so that a GPU never waits for the host.

A step's batch is this rank's rows only (`data.pack(..., part=(rank, world))`), split into the
micro-batches of gradient accumulation; the ranks sum their loss denominators on the device
(train_step). Everything the model would otherwise have to read back
from the device is computed here, on the CPU, from the packed NumPy arrays (`number_fields`): the
flat positions of the <|num|> inputs and of the targets, which targets are numbers, the number
head's input features and its loss targets (NumPy bit and digit tables). With them the forward
pass has no boolean-mask indexing, no `.any()`, no `int(...)` and no GPU→CPU→GPU round trip
(model.GPT.forward).

`Loader` builds the next step's batch on a worker thread while the current step runs, into
pinned memory, so the copy to the GPU does not block (`to_device`). It only reaches one step
ahead where the next batch cannot depend on what the current step changes: never across an
evaluation (the balancer and the curricula change there) or a checkpoint (which saves the data
generator's state). The batches are the ones built in order without it, so a run's losses do not
depend on it.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

# the fields a micro-batch keeps whole (the loss denominators of all of a step's rows), not cut by rows
GLOBAL = ("ce_count", "number_count")
# what `number_fields` adds (a head without `features` or `loss_target` gets no such field)
NUMBER_FIELDS = ("loss_index", "num_index", "number_index", "features", "number_targets")


def micro_batches(batch: dict, micro: int) -> list[dict]:
    """This rank's rows cut into `micro` micro-batches of equal rows (the counts stay those of all)."""
    rows = batch["ids"].shape[0]
    if rows % micro:
        raise ValueError(f"{rows} rows do not split into {micro} micro-batches")
    size = rows // micro
    return [{k: v if k in GLOBAL else v[m * size:(m + 1) * size] for k, v in batch.items()} for m in range(micro)]


def number_fields(batch: dict, head, num_id: int) -> dict:
    """`batch` (CPU tensors from `data.pack`) with what the model needs to run without host syncs:
    loss_index, and with a number head num_index, number_index, and the head's `features` and
    `number_targets` where it has them (a head without `features` gets its values from the batch)."""
    loss_index = batch["loss_mask"].flatten().nonzero().squeeze(1)
    out = {**batch, "loss_index": loss_index}
    if head is None:
        return out
    num_index = (batch["ids"].flatten() == num_id).nonzero().squeeze(1)
    targets = batch["targets"].flatten()[loss_index]
    number_index = (targets == num_id).nonzero().squeeze(1)
    out.update(num_index=num_index, number_index=number_index)
    features = head.features(batch["values"].flatten()[num_index])
    wanted = head.loss_target(batch["target_values"].flatten()[loss_index][number_index])
    out.update({k: v for k, v in (("features", features), ("number_targets", wanted)) if v is not None})
    return out


def pinned(batch: dict) -> dict:
    """The batch in page-locked memory, from which a copy to the GPU need not block."""
    return {k: v.pin_memory() for k, v in batch.items()}


def to_device(batch: dict, device: torch.device) -> dict:
    """The batch on `device`; from pinned memory without blocking the host."""
    return {k: v.to(device, non_blocking=v.is_pinned()) for k, v in batch.items()}


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
