"""The kernel client every notebook run uses: one that cannot miss a message and wait forever.

nbclient waits for a cell's reply with `shell_channel.get_msg(timeout=None)` and for its outputs
with `iopub_channel.get_msg(timeout=None)`: one await on pyzmq's asyncio poller, which wakes on the
socket's file descriptor. That descriptor is edge-triggered; when its edge is consumed while the
message sits in the queue (on a loaded machine, around a widget's comm messages: nbclient issue
312), the await never returns. The kernel has answered and is idle, the client sleeps, and the
run (`make figures`, a notebook test) hangs with no error.

Polled in slices instead, an await that missed its edge ends at the slice's end, and the poller's
final non-blocking `zmq_poll` finds the message that was there all along. A wait with a timeout
(nbclient's `execution_timeout`, its iopub timeout) is passed through untouched, so every timeout
and error keeps its meaning; only the endless wait changes into a loop of one-second waits.
"""

from __future__ import annotations

from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import DottedObjectName, Type

SLICE = 1.0  # seconds a single poll may wait before the socket is asked again


class PolledChannel(AsyncZMQSocketChannel):
    """A channel whose endless wait is a loop of `SLICE`-second polls."""

    async def get_msg(self, timeout: float | None = None) -> dict:
        if timeout is not None:
            return await super().get_msg(timeout)
        while True:
            try:
                return await super().get_msg(SLICE)
            except Empty:
                continue


class PolledKernelClient(AsyncKernelClient):
    shell_channel_class = Type(PolledChannel)
    iopub_channel_class = Type(PolledChannel)
    stdin_channel_class = Type(PolledChannel)
    control_channel_class = Type(PolledChannel)


class PolledKernelManager(AsyncKernelManager):
    """nbclient's kernel manager, handing out `PolledKernelClient`s (`kernel_manager_class=`)."""

    client_class = DottedObjectName("workbench.notebook_kernel.PolledKernelClient")
    client_factory = Type(PolledKernelClient, klass=AsyncKernelClient)  # the class default is read, not client_class
