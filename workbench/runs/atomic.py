"""Atomic file writes: the content goes to a temporary file beside the target, which is then
renamed into place, so a reader (or a run resumed after a kill) finds the old file or the new one,
never half of one. A write that fails (a full disk) leaves the old file as it was. A write into a
folder whose lock this process holds first checks that the lock is still intact (locks.check): a
folder moved aside or a lock file removed stops the write before anything is written."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from . import locks

# Below this much free space a failed write is reported as a full disk: torch.save, for one,
# reports ENOSPC as "RuntimeError: basic_ios::clear: iostream error".
_NEARLY_FULL = 64 * 2**20


def write_atomic(path, write) -> Path:
    """Fill a temporary file beside `path` with `write(tmp_path)`, then rename it to `path`."""
    path = Path(path)
    locks.check(path)  # before mkdir, which would make a moved-away folder anew
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the result is an ordinary file
        locks.check(path)
        os.replace(tmp, path)
    except locks.LockLost:
        raise
    except (OSError, RuntimeError) as err:
        if _disk_full(err, path.parent):
            raise OSError(
                errno.ENOSPC,
                f"the disk is full: could not write {path} (the previous "
                f"{path.name}, if any, is kept); free some space and try again",
            ) from err
        raise
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def _disk_full(err: BaseException, folder: Path) -> bool:
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    try:
        return shutil.disk_usage(folder).free < _NEARLY_FULL
    except OSError:
        return False


def clean_temporaries(folder, names) -> list[Path]:
    """Remove the temporaries a killed `write_atomic` of folder/NAME left (".NAME.xxxxxxxx")."""
    removed = []
    for name in names:
        for tmp in Path(folder).glob(f".{name}.*"):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def write_folder(folder: Path, fill) -> Path:
    """A folder written atomically, as `write_atomic` writes a file: `fill(tmp)` writes a folder
    beside `folder`, which then replaces it (the old one is removed only once the new one is in
    place); a failure leaves `folder` as it was."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.writing-{os.getpid()}"
    old = folder.parent / f".{folder.name}.old-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
        if folder.exists():
            folder.rename(old)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return folder
