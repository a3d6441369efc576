"""Atomic file writes: the content goes to a temporary file beside the target, which is then
renamed into place, so a reader (or a run resumed after a kill) finds the old file or the new one,
never half of one."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path, write) -> Path:
    """Fill a temporary file beside `path` with `write(tmp_path)`, then rename it to `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the result is an ordinary file
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path
