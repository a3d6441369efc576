"""Counting, on the CPU, the host syncs a piece of GPU work would make.

A GPU runs ahead of the Python process that feeds it until the process reads a result: a tensor's
value (`.item()`, `bool()`, `int()`, `float()`, `.tolist()`), a copy to the host (`.cpu()`,
`.numpy()`) or a shape that depends on values (boolean-mask indexing and `nonzero`,
whose output size the host must know). Each of these waits for the GPU to drain. On a CPU they cost
nothing, but they are the same calls, so they can be counted here without a GPU:

    with HostSyncs(host_resident=optimizer_counters(optimizers)) as syncs:
        train_step(...)
    syncs.total, syncs.counts   # e.g. 3, {"tolist": 1, "nonzero": 2}

Host reads are counted by a TorchFunctionMode (every Tensor method call passes through it),
value-dependent shapes by the profiler's `aten::nonzero` events (boolean indexing runs it).
Reads of `host_resident` tensors, which stay on the host on a GPU too (Adam's step counters,
`optimizer_counters`), are not counted; nor is `.to(device)`: on a CPU it cannot tell a copy to
the host from one to the GPU.
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile

READS = {"item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__"}
VALUE_SHAPED = ("aten::nonzero", "aten::masked_select", "aten::unique_dim", "aten::_unique2")


class _HostReads(TorchFunctionMode):
    def __init__(self, host_resident=()):
        super().__init__()
        self.counts, self.host_resident = Counter(), {id(t) for t in host_resident}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in READS and not (args and id(args[0]) in self.host_resident):
            self.counts[name] += 1
        return func(*args, **kwargs)


def optimizer_counters(optimizers) -> list:
    """The step counters of torch's Adam: kept on the host unless `capturable` or `fused`
    (torch/optim/adam.py), so reading them never waits for a GPU."""
    return [
        state["step"]
        for opt in optimizers
        for state in opt.state.values()
        if isinstance(state.get("step"), torch.Tensor) and state["step"].device.type == "cpu"
    ]


class HostSyncs:
    """Context manager: `counts` (a Counter by call or op) and `total` of the host syncs inside."""

    def __init__(self, host_resident=()):
        self.host_resident = list(host_resident)

    def __enter__(self):
        self._reads = _HostReads(self.host_resident)
        self._profile = profile(activities=[ProfilerActivity.CPU])
        self._profile.__enter__()
        self._reads.__enter__()
        return self

    def __exit__(self, *exc):
        self._reads.__exit__(*exc)
        self._profile.__exit__(*exc)
        ops = Counter(e.name for e in self._profile.events() if e.name in VALUE_SHAPED)
        self.counts = self._reads.counts + Counter({k.removeprefix("aten::"): v for k, v in ops.items()})
        return False

    @property
    def total(self) -> int:
        return sum(self.counts.values())
