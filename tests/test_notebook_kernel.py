"""Notebook runs use a kernel client whose endless waits are polled in slices, so a missed wake-up of
pyzmq's asyncio poller (the kernel answered and is idle) cannot hang `make figures` or a test."""

import asyncio
from pathlib import Path
from queue import Empty

import nbformat
import pytest
from jupyter_client.channels import AsyncZMQSocketChannel
from nbclient import NotebookClient

from workbench import notebook_kernel, notebooks
from workbench.notebook_kernel import PolledChannel, PolledKernelClient, PolledKernelManager


def fake_socket_wait(monkeypatch, empty_polls: int):
    """The channel's own get_msg: `empty_polls` waits that end empty, then the message."""
    asked = []

    async def get_msg(self, timeout=None):
        asked.append(timeout)
        if timeout is None:
            raise AssertionError("an endless wait reached the socket")
        if len(asked) <= empty_polls:
            raise Empty
        return {"msg": "the reply"}

    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", get_msg)
    return asked


def test_an_endless_wait_is_polled_in_slices_until_the_message_is_there(monkeypatch):
    asked = fake_socket_wait(monkeypatch, empty_polls=3)
    channel = object.__new__(PolledChannel)
    assert asyncio.run(channel.get_msg()) == {"msg": "the reply"}
    assert asked == [notebook_kernel.SLICE] * 4


def test_a_wait_with_a_timeout_keeps_it_and_still_ends_empty(monkeypatch):
    asked = fake_socket_wait(monkeypatch, empty_polls=1)
    channel = object.__new__(PolledChannel)
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=7.5))
    assert asked == [7.5]


def test_every_notebook_run_starts_its_kernel_through_the_polled_manager(monkeypatch, tmp_path):
    import papermill

    seen = {}

    def execute_notebook(nb, path, **kwargs):
        seen.update(kwargs)
        Path(path).write_text("{}")

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    notebooks.execute("02_fone_locality", {"n_pairs": 10}, output_dir=tmp_path)
    assert seen["kernel_manager_class"] is PolledKernelManager


def test_a_kernel_started_by_the_manager_answers_through_polled_channels():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    client = NotebookClient(nb, kernel_name="python3", kernel_manager_class=PolledKernelManager)
    with client.setup_kernel():
        assert isinstance(client.km, PolledKernelManager) and isinstance(client.kc, PolledKernelClient)
        assert isinstance(client.kc.shell_channel, PolledChannel) and isinstance(client.kc.iopub_channel, PolledChannel)
        client.execute_cell(nb.cells[0], 0)
    assert nb.cells[0].outputs[0]["text"] == "42\n"
