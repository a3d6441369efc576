"""One writer per folder (workbench.locks): a second process is refused with the holder named; the
lock goes when its holder dies, however it dies."""
import os
import signal
import subprocess
import sys
import time

import pytest

from workbench.locks import InUse, hold, hold_file

HOLDER = """
import sys, time
from workbench.locks import hold, hold_file
with ({kind})(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def start_holder(path, kind="hold"):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(kind=kind), str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("kind", ["hold", "hold_file"])
def test_a_second_process_is_refused_naming_the_holder(tmp_path, kind):
    path = tmp_path / ("run" if kind == "hold" else "answers.jsonl")
    proc = start_holder(path, kind)
    try:
        with pytest.raises(InUse, match=rf"{path}.* in use by process {proc.pid} "):
            with (hold if kind == "hold" else hold_file)(path):
                pass
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_goes_with_a_killed_holder(tmp_path):
    proc = start_holder(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)  # no clean-up runs: the kernel drops the lock
    proc.wait()
    with hold(tmp_path):
        pass


def test_nested_holds_in_one_process_share_the_lock(tmp_path):
    with hold(tmp_path):
        with hold(tmp_path / "."):
            pass
        proc = subprocess.run([sys.executable, "-c", HOLDER.format(kind="hold"), str(tmp_path)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode != 0 and "InUse" in proc.stderr  # still held after the inner block
    with hold(tmp_path):  # and released after the outer one
        pass
