"""One writer per folder (workbench.runs.locks): a second process is refused with the holder named; the
lock goes when its holder dies, however it dies."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.runs.locks import InUse, hold, hold_file

HOLDER = """
import sys, time
from workbench.runs.locks import hold, hold_file
with ({kind})(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def start_holder(path, kind="hold"):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(kind=kind), str(path)], stdout=subprocess.PIPE, text=True
    )
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
        proc = subprocess.run(
            [sys.executable, "-c", HOLDER.format(kind="hold"), str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0 and "InUse" in proc.stderr  # still held after the inner block
    with hold(tmp_path):  # and released after the outer one
        pass


# -- links, removed lock files, moved folders, threads (issue 39) ---------------------------------
def lock_file(kind, path):
    return path / ".lock" if kind == "hold" else path.parent / f".{path.name}.lock"


@pytest.mark.parametrize("kind", ["hold", "hold_file"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path, kind):
    """Bug: the lock was opened with O_CREAT through the link and truncated, destroying the file it
    points to (even when the command was then refused); a dangling link created its target."""
    victim, missing = tmp_path / "victim.txt", tmp_path / "created-by-the-lock"
    victim.write_text("precious\n")
    path = tmp_path / ("run" if kind == "hold" else "answers.jsonl")
    (tmp_path / "run").mkdir()
    lock = lock_file(kind, path)
    for target in (victim, missing):
        lock.unlink(missing_ok=True)
        lock.symlink_to(target)
        with pytest.raises(InUse, match=rf"^the (folder|file) {path}: its lock file {lock} is a symbolic link"):
            with (hold if kind == "hold" else hold_file)(path):
                pytest.fail("held through a link")
        assert lock.is_symlink() and victim.read_text() == "precious\n" and not missing.exists()


def test_a_lock_file_that_is_a_hard_link_or_no_plain_file_is_refused(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.link(victim, tmp_path / ".victim-copy.lock")
    with pytest.raises(InUse, match="2 names"):
        with hold_file(tmp_path / "victim-copy"):
            pass
    assert victim.read_text() == "precious\n"
    os.mkfifo(tmp_path / ".fifo.lock")
    with pytest.raises(InUse, match="not a plain file"):
        with hold_file(tmp_path / "fifo"):
            pass


def test_removing_the_lock_file_under_a_live_holder_lets_nobody_in(tmp_path):
    """Bug: deleting .lock let a second writer lock a new .lock beside the live holder."""
    proc = start_holder(tmp_path)
    try:
        (tmp_path / ".lock").unlink()
        with pytest.raises(InUse, match="in use by process"):
            with hold(tmp_path):
                pass
    finally:
        proc.kill()
        proc.wait()


def test_a_holder_whose_folder_was_moved_aside_writes_nothing_more(tmp_path):
    """Bug: with the folder moved aside, a second writer locked a new folder at the same path and
    both wrote there. The holder notices before its next write, and when it lets go."""
    from workbench.runs.atomic import write_atomic

    run = tmp_path / "run"
    with pytest.raises(InUse, match=rf"the folder {run}: the folder was moved"):
        with hold(run):
            write_atomic(run / "a.txt", lambda tmp: Path(tmp).write_text("first"))
            run.rename(tmp_path / "aside")
            second = start_holder(run)  # the second writer: a new folder, a new lock
            try:
                with pytest.raises(InUse, match="moved"):
                    write_atomic(run / "b.txt", lambda tmp: Path(tmp).write_text("mixed in"))
                with pytest.raises(InUse, match="moved"):  # nor does a nested hold take it
                    with hold(run):
                        pass
            finally:
                second.kill()
                second.wait()
            assert list(run.iterdir()) == [run / ".lock"]  # nothing of the first writer's
    assert (tmp_path / "aside" / "a.txt").read_text() == "first"


@pytest.mark.parametrize("change", ["removed", "replaced"])
def test_a_removed_or_replaced_lock_file_is_noticed(tmp_path, change):
    from workbench.runs import locks

    with pytest.raises(InUse, match=f"its lock file .lock was {change}"):
        with hold(tmp_path):
            (tmp_path / ".lock").unlink()
            if change == "replaced":
                (tmp_path / ".lock").write_text("")
            with pytest.raises(locks.LockLost):
                locks.check(tmp_path / "results.csv")
    with hold(tmp_path):  # a fresh hold takes the folder again
        pass


@pytest.mark.parametrize("kind", ["hold", "hold_file"])
def test_a_second_thread_of_the_same_process_is_refused(tmp_path, kind):
    """Bug: two threads of one process shared the lock (two frontier runners in one process asked
    every question twice)."""
    import threading

    path = tmp_path / ("run" if kind == "hold" else "answers.jsonl")
    take = hold if kind == "hold" else hold_file
    outcome = []

    def second():
        try:
            with take(path):
                outcome.append("held")
        except InUse as err:
            outcome.append(str(err))

    with take(path):
        thread = threading.Thread(target=second, name="runner-2")
        thread.start()
        thread.join(timeout=30)
    assert len(outcome) == 1 and "in use by another thread of this process" in outcome[0], outcome
    thread = threading.Thread(target=second)  # and free once the first let go
    thread.start()
    thread.join(timeout=30)
    assert outcome[1] == "held"


# -- the lock file goes with its holder (issue 65) -------------------------------------------------
@pytest.mark.parametrize("kind", ["hold", "hold_file"])
def test_a_holder_that_lets_go_removes_its_lock_file(tmp_path, kind):
    """Bug: every finished run folder kept a stale .lock. Released normally or by an exception,
    the holder removes it; a nested hold does not remove it from under the outer one."""
    path = tmp_path / ("run" if kind == "hold" else "answers.jsonl")
    take = hold if kind == "hold" else hold_file
    with take(path):
        with take(path):
            pass
        assert lock_file(kind, path).exists()  # still the outer hold's
    assert not lock_file(kind, path).exists()
    with pytest.raises(KeyError):
        with take(path):
            raise KeyError("the block failed")
    assert not lock_file(kind, path).exists()
    with take(path):  # and the next holder makes it anew
        assert lock_file(kind, path).exists()


def test_a_lost_lock_leaves_the_file_in_its_place_alone(tmp_path):
    """A lock file replaced under the holder may be another holder's: the first lets go of its own
    lock without removing what the path names now."""
    with pytest.raises(InUse, match="replaced"):
        with hold(tmp_path):
            (tmp_path / ".lock").unlink()
            (tmp_path / ".lock").write_text("someone else's\n")
    assert (tmp_path / ".lock").read_text() == "someone else's\n"


def test_a_lock_file_removed_between_open_and_lock_is_opened_afresh(tmp_path, monkeypatch):
    """The race that removal at release opens: a newcomer opens the lock file, its holder removes
    it and lets go, the newcomer locks the removed file. That lock guards nothing (a third process
    would create and lock a new file), so the newcomer opens the path again and locks what it names."""
    from workbench.runs import locks

    path = tmp_path / "answers.jsonl"
    lock = lock_file("hold_file", path)
    opened = locks._open_lock_file

    def the_holder_lets_go_meanwhile(key, shown):
        fd_and_id = opened(key, shown)
        if not calls:
            key.unlink()  # as the releasing holder does, before the newcomer's flock
        calls.append(key)
        return fd_and_id

    calls = []
    monkeypatch.setattr(locks, "_open_lock_file", the_holder_lets_go_meanwhile)
    with hold_file(path):
        assert len(calls) == 2 and lock.exists()
        locks.check(path)  # intact: the held file is the one the path names
        proc = subprocess.run(
            [sys.executable, "-c", HOLDER.format(kind="hold_file"), str(path)], capture_output=True, text=True
        )
        assert proc.returncode != 0 and "InUse" in proc.stderr
    assert not lock.exists()
