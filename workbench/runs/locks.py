"""One writer per folder: an exclusive lock that a second holder is refused, with the holder named.

    with hold(run_dir):              # RUN_DIR/.lock, held while this process writes into it
        ...
    with hold_file(answers_file):    # a file's lock is ".<name>.lock" beside it

The lock is `fcntl.flock` on a small lock file that also records the holder's PID and command
line; a folder's lock also locks the folder itself. The kernel drops both when the holding
process ends, however it ends (a kill included), so a lock can never be left stale. A holder that
lets go removes its lock file first, while it still holds both locks, so a finished folder keeps
no ".lock"; a killed holder's file stays, harmless. Removing it is safe because whoever locks a
lock file checks afterwards that the path still names the file it locked (and opens it afresh if
not): one that opened the file just before its removal cannot hold a file nobody else can find.
A second holder gets `InUse` at once, naming the folder and
the holder, instead of waiting or writing beside it: another process, and another thread of this
process too. Nested `hold`s of the same path in one thread share the lock.

What a lock never does: follow or truncate a link. A lock file that is a symbolic link (dangling
or not), a hard link, or no plain file is refused (`UnsafeLock`) and left as it is, so a planted
".lock" cannot make a command overwrite or create the file it points to.

What a lock notices: the lock file removed or replaced, or the folder moved aside, while it is
held (compared by device and inode with what it locked). A second writer could then start beside
this one, so `check(path)` raises `LockLost` before anything more is written there (every
`atomic.write_atomic` into a held folder asks), and leaving the `with` block raises it too. Removing
".lock" alone lets nobody in: the folder's own lock still refuses a second holder.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LOCK_NAME = ".lock"
_RECORD_MAX = 4096  # the holder record is one short line; a bigger file is not a lock file of ours
_ATTEMPTS = 5  # opens of a lock file that its releasing holder removed at that moment, before giving up


class InUse(RuntimeError):
    """Another process, or another thread of this one, holds the lock of a folder or file."""


class UnsafeLock(InUse):
    """The lock file is a link or not a plain file: refused, and left untouched."""


class LockLost(InUse):
    """The lock file was removed or replaced, or the folder moved, while the lock was held."""


@dataclass
class _Held:
    key: Path  # the lock file, its folder resolved
    shown: str  # "the folder X" / "the file X", for messages
    covers: Path  # the folder (hold) or the file (hold_file) the lock guards
    fd: int
    file_id: tuple[int, int]
    folder_fd: int | None  # hold() also locks the folder itself
    folder_id: tuple[int, int] | None
    pid: int
    thread: int
    thread_name: str
    depth: int = 1


_guard = threading.Lock()
_held: dict[Path, _Held] = {}  # the lock files this process holds


def hold(folder):
    """Hold the exclusive lock of `folder` (created if missing) for a `with` block."""
    folder = Path(folder)
    return _hold(folder / LOCK_NAME, f"the folder {folder}", lock_folder=True)


def hold_file(path):
    """Hold the exclusive lock of the file `path` (a ".NAME.lock" beside it) for a `with` block."""
    path = Path(path)
    return _hold(path.parent / f".{path.name}.lock", f"the file {path}", lock_folder=False)


def check(path) -> None:
    """Raise LockLost if `path` lies in a folder (or is a file) whose lock this process holds and
    that lock is no longer intact; nothing to do for paths no lock of this process covers."""
    if not _held:
        return
    try:
        where = Path(path).parent.resolve() / Path(path).name
    except (OSError, RuntimeError):
        return
    with _guard:
        entries = [e for e in _held.values() if e.pid == os.getpid()]
    for entry in entries:
        if where == entry.covers or entry.covers in where.parents:
            why = _broken(entry)
            if why:
                raise LockLost(_lost_message(entry, why))


@contextmanager
def _hold(target: Path, shown: str, lock_folder: bool):
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = target.parent.resolve()
    key = folder / target.name
    covers = folder if lock_folder else folder / target.name[1 : -len(".lock")]
    with _guard:
        entry = _held.get(key)
        if entry is not None and entry.pid == os.getpid():
            if entry.thread != threading.get_ident():
                raise InUse(
                    f"{shown} is in use by another thread of this process ({entry.thread_name}); wait for "
                    "it to finish, or choose another output"
                )
            why = _broken(entry)
            if why:
                raise LockLost(_lost_message(entry, why))
            entry.depth += 1  # a nested hold in the same thread
            nested = True
        else:
            entry = _acquire(key, shown, covers, folder if lock_folder else None)
            _held[key] = entry
            nested = False
    if nested:
        try:
            yield entry.key
        finally:
            with _guard:
                entry.depth -= 1
        return
    try:
        yield entry.key
    except BaseException:
        _release(entry, remove=not _broken(entry))
        raise
    why = _broken(entry)
    _release(entry, remove=not why)  # a lost lock's path may name another holder's file: left alone
    if why:
        raise LockLost(_lost_message(entry, why))


def _acquire(key: Path, shown: str, covers: Path, folder: Path | None) -> _Held:
    """Lock the folder (if given), then the lock file; write the holder record. InUse if held."""
    folder_fd = folder_id = None
    if folder is not None:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(folder_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(folder_fd)
            raise InUse(
                f"{shown} is in use by process {_holder_at(key)}; wait for it to finish, stop it, or "
                "choose another output"
            ) from None
        except OSError:  # a file system without folder locks: the lock file alone guards it
            os.close(folder_fd)
            folder_fd = None
        else:
            st = os.fstat(folder_fd)
            folder_id = (st.st_dev, st.st_ino)
    try:
        for _ in range(_ATTEMPTS):
            fd, file_id = _open_lock_file(key, shown)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise InUse(
                    f"{shown} is in use by process {holder}; wait for it to finish, stop it, or choose another output"
                ) from None
            try:
                now = os.lstat(key)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == file_id:
                break
            # removed (its holder let go between our open and our lock) or replaced: the file we
            # locked is one nobody else will open again, so the lock on it guards nothing
            os.close(fd)
        else:
            raise InUse(
                f"{shown}: its lock file {key} was replaced while it was being locked; another process is "
                "starting there, try again"
            )
        record = f"{os.getpid()} {' '.join(sys.argv)[:500]}\n".encode("utf-8", "replace")
        os.pwrite(fd, record, 0)
        os.ftruncate(fd, len(record))  # a plain file of ours (checked above), never a link's target
    except BaseException:
        if folder_fd is not None:
            os.close(folder_fd)
        raise
    thread = threading.current_thread()
    return _Held(key, shown, covers, fd, file_id, folder_fd, folder_id, os.getpid(), thread.ident, thread.name)


def _open_lock_file(key: Path, shown: str) -> tuple[int, tuple[int, int]]:
    """The lock file opened without following a link or truncating: (fd, (device, inode))."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(key, flags, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP or os.path.islink(key):
            try:
                to = f" to {os.readlink(key)!r}"
            except OSError:
                to = ""
            raise UnsafeLock(
                f"{shown}: its lock file {key} is a symbolic link{to}; a lock never follows a link "
                "(it would write into the file linked to): remove the link"
            ) from None
        raise UnsafeLock(
            f"{shown}: its lock file {key} cannot be opened ({err.strerror}); remove it if it is not a lock file"
        ) from None
    st = os.fstat(fd)
    why = (
        "is not a plain file"
        if not stat.S_ISREG(st.st_mode)
        else f"has {st.st_nlink} names (a hard link: writing it would change another file)"
        if st.st_nlink != 1
        else f"holds {st.st_size} bytes, more than a lock file's record"
        if st.st_size > _RECORD_MAX
        else ""
    )
    if why:
        os.close(fd)
        raise UnsafeLock(
            f"{shown}: its lock file {key} {why}; it was left as it is: remove it, or choose another output"
        )
    return fd, (st.st_dev, st.st_ino)


def _broken(entry: _Held) -> str:
    """Why the held lock is no longer intact, or "" when it is."""
    if entry.folder_id is not None:
        try:
            st = os.stat(entry.covers)
        except OSError:
            return "the folder was moved or removed"
        if (st.st_dev, st.st_ino) != entry.folder_id:
            return "the folder was moved aside and another put in its place"
    try:
        st = os.lstat(entry.key)
    except OSError:
        return f"its lock file {entry.key.name} was removed"
    if (st.st_dev, st.st_ino) != entry.file_id:
        return f"its lock file {entry.key.name} was replaced"
    return ""


def _lost_message(entry: _Held, why: str) -> str:
    return (
        f"{entry.shown}: {why} while this process held its lock, so another writer may have started "
        "there; nothing more was written (check the folder, then run again)"
    )


def _release(entry: _Held, remove: bool) -> None:
    """Let go of the lock; with `remove`, unlink its file first, while both locks are still held
    (after them, a newcomer could lock the file and then lose it to the unlink)."""
    with _guard:
        if _held.get(entry.key) is entry:
            del _held[entry.key]
    if remove:
        try:
            st = os.lstat(entry.key)
            if (st.st_dev, st.st_ino) == entry.file_id:  # ours still, not a file put in its place
                os.unlink(entry.key)
        except OSError:  # a read-only or vanished folder: the file stays, harmless as a killed holder's
            pass
    fcntl.flock(entry.fd, fcntl.LOCK_UN)
    os.close(entry.fd)
    if entry.folder_fd is not None:
        fcntl.flock(entry.folder_fd, fcntl.LOCK_UN)
        os.close(entry.folder_fd)


def _holder_at(key: Path) -> str:
    """The holder recorded in the lock file at `key` (read without following a link), or 'unknown'."""
    try:
        fd = os.open(key, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "unknown"
    try:
        return _holder(fd) if stat.S_ISREG(os.fstat(fd).st_mode) else "unknown"
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    """'PID (command)' as the holder wrote it, or 'unknown' if it has not yet."""
    try:
        text = os.pread(fd, 600, 0).decode("utf-8", "replace").strip()
    except OSError:
        return "unknown"
    pid, _, command = text.partition(" ")
    return f"{pid} ({command})" if pid.isdigit() else "unknown"
