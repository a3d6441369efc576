"""Reading a file that a run wrote, when the file may be anything: a regular file only, of bounded
size, every failure one line naming the file.

    text = read_text(path, limit)          # FileNotFoundError if absent; ValueError for the rest
    with open_regular(path) as f: ...      # the same checks, unbounded, for a library that reads it
    record = read_json(path)               # one JSON value
    rows = read_json_lines(path)           # metrics.jsonl, evals.jsonl: one JSON object a line

What a folder handed to a command (`compare`, a run's figures) holds is not the workbench's to
choose: a FIFO in place of config.json made a plain `open` wait forever, a 100,000-deep JSON array
raised RecursionError, and a line torn by a killed write an error that named no file. Here a FIFO,
a device or a folder is refused without waiting for it (opened non-blocking, then checked), a file
larger than `limit` is refused before it is read, and a line torn at the end of a log (a kill
between a row's bytes) is dropped, as `logs.truncate_log` drops it on a resume.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

JSON_LIMIT = 16 * 2**20  # a run's config.json or environment.json is a few KiB
LOG_LIMIT = 2**30  # a log row is ~300 bytes: a million steps


def read_text(path, limit: int = LOG_LIMIT) -> str:
    """The UTF-8 text of regular file `path`, at most `limit` bytes. FileNotFoundError if it does
    not exist; a ValueError of one line naming it if it is not a regular file, is larger, cannot be
    read or is not UTF-8."""
    path = Path(path)
    with open_regular(path) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise ValueError(f"{path} holds {size:,} bytes, more than such a file holds ({limit:,}): not read")
            data = f.read(limit + 1)
        except OSError as err:
            raise ValueError(f"{path} cannot be read: {err.strerror or err}") from None
    if len(data) > limit:  # it grew while being read
        raise ValueError(f"{path} holds more than {limit:,} bytes, more than such a file holds: not read")
    try:
        return data.decode()
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text (byte {err.start}): not a file a run wrote") from None


def open_regular(path):
    """`path` opened for binary reading if it is a regular file (a FIFO is opened without waiting
    for a writer, then refused): FileNotFoundError if absent, a ValueError of one line naming it
    for anything else. For files read whole by a library (torch.load of a checkpoint), unbounded."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise ValueError(f"{path} cannot be read: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is {_kind(st.st_mode)}, not a file a run wrote: only regular files are read")
        os.set_blocking(fd, True)
    except OSError as err:
        os.close(fd)
        raise ValueError(f"{path} cannot be read: {err.strerror or err}") from None
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_json(path, limit: int = JSON_LIMIT):
    """The JSON value in `path` (`read_text`'s errors, and a ValueError naming it for text that is
    not JSON or nests deeper than Python reads)."""
    return _parse(read_text(path, limit), path)


def read_json_lines(path, limit: int = LOG_LIMIT) -> list[dict]:
    """One dict per non-empty line of `path`; a line that is not a JSON object is a ValueError
    naming the file and the line, except a last line without its newline, torn by a kill, which
    is dropped."""
    text = read_text(path, limit)
    lines = text.split("\n")
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = _parse(line, path, number)
        except ValueError:
            if number == len(lines):  # no newline after it: a row cut short by a kill
                break
            raise
        if not isinstance(row, dict):
            raise ValueError(f"{path}, line {number}: a JSON {type(row).__name__}, not a row of named values")
        rows.append(row)
    return rows


def _parse(text: str, path, line: int | None = None):
    where = f"{path}, line {line}" if line else str(path)
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{where}: JSON nested deeper than Python reads, not what a run writes") from None
    except ValueError as err:
        raise ValueError(f"{where} is not JSON ({err})") from None


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"
