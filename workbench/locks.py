"""One writer per folder: an exclusive lock that a second process is refused, with the holder named.

    with hold(run_dir):              # RUN_DIR/.lock, held while this process writes into it
        ...
    with hold_file(answers_file):    # a file's lock is ".<name>.lock" beside it

The lock is `fcntl.flock` on a small lock file that also records the holder's PID and command
line. The kernel drops it when the holding process ends, however it ends (a kill included), so a
lock can never be left stale; the lock file itself stays and is harmless. A second process gets
`InUse` at once, naming the folder and the holder, instead of waiting or writing beside it.
Locks are per process: nested `hold`s of the same path in one process share the lock.
"""
from __future__ import annotations

import fcntl
import os
import sys
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".lock"
_held: set[Path] = set()  # the lock files this process holds


class InUse(RuntimeError):
    """Another process holds the lock of a folder or file."""


def hold(folder):
    """Hold the exclusive lock of `folder` (created if missing) for a `with` block."""
    return _hold(Path(folder) / LOCK_NAME, f"the folder {folder}")


def hold_file(path):
    """Hold the exclusive lock of the file `path` (a ".NAME.lock" beside it) for a `with` block."""
    path = Path(path)
    return _hold(path.parent / f".{path.name}.lock", f"the file {path}")


@contextmanager
def _hold(target: Path, shown: str):
    target.parent.mkdir(parents=True, exist_ok=True)
    key = target.parent.resolve() / target.name
    if key in _held:  # already ours (a nested hold in the same process)
        yield target
        return
    fd = os.open(key, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise InUse(f"{shown} is in use by process {holder}; wait for it to finish, stop it, or "
                    "choose another output") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {' '.join(sys.argv)[:500]}\n".encode("utf-8", "replace"))
    _held.add(key)
    try:
        yield target
    finally:
        _held.discard(key)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _holder(fd: int) -> str:
    """'PID (command)' as the holder wrote it, or 'unknown' if it has not yet."""
    try:
        text = os.pread(fd, 600, 0).decode("utf-8", "replace").strip()
    except OSError:
        return "unknown"
    pid, _, command = text.partition(" ")
    return f"{pid} ({command})" if pid.isdigit() else "unknown"
