"""TensorBoard event files beside a run's JSON logs, in RUN/tb/, to look across runs with

    tensorboard --logdir runs/

Scalars, at the training step they belong to: every number of a metrics.jsonl row as train/NAME
(the loss and its parts, the learning rate of each parameter group), every number of an
evals.jsonl row as eval/NAME (each task's validation score, the harmonic mean of eq. 15, the
balancer's ratios, the loss weights, the curricula's levels frontier/TASK), and each task's test
score as test/TASK at the last step. They are copies of the JSON logs, which stay the record:
TensorBoard's own thread writes them and nothing in training reads them, so a run trains the same
with them or without. A resumed run opens a new event file that purges the steps after its
checkpoint (TensorBoard's purge_step), as `logs.truncate_log` drops them from the JSON logs.
WORKBENCH_TENSORBOARD=0 turns them off; without the tensorboard package a run says so once and
trains without them. RUN/tb/ is the run's own folder: a tb/ that is a link (into results/, say)
is refused before the run starts (`outputs.check_run_folder`, from `folder.prepare`), and again
where it is opened (O_NOFOLLOW).

TensorBoard's writer opens its file by name for every write, from its own thread. So the folder is
held open from the start and the writer is given its name through that handle (/proc/self/fd/N,
where the system has one): a tb/ swapped for a link during the run cannot carry a write elsewhere.
Events are a copy, never the record: a tb/ deleted or replaced under a live run, a full disk, any
failed write stops them with one line on stderr, and training goes on (the thread's own traceback
is not printed; its error reaches the next call here, which reports it).
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from pathlib import Path

FOLDER = "tb"  # RUN/tb/
PREFIX = "events.out.tfevents."  # how TensorBoard names its event files
HANDLES = Path("/proc/self/fd")  # a folder by its open handle: Linux's; elsewhere the plain path
_warned = []
_hook = []


def remove(out: Path) -> None:
    """Drop the event files of a run being replaced (--overwrite): its new curves must not be
    drawn over the old ones."""
    for path in (Path(out) / FOLDER).glob(PREFIX + "*"):
        path.unlink()


class Events:
    """Scalars to RUN/tb/ (rank 0 only); a run resumed after `start` steps purges what an earlier
    process logged beyond them. A failed write stops the events with one line, never the run."""

    def __init__(self, out: Path, rank: int, start: int = 0):
        self.writer, self.handle, self.stopped = None, None, False
        if rank != 0 or os.environ.get("WORKBENCH_TENSORBOARD") == "0":
            return
        try:  # imported here: TensorBoard costs seconds to import, and only a training process needs it
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            if not _warned:
                _warned.append(True)
                print(f"no TensorBoard events for this run ({err}): pip install -r requirements.txt", file=sys.stderr)
            return
        self.folder = Path(out) / FOLDER
        try:
            self.folder.mkdir(exist_ok=True)
            self.handle = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as err:
            if err.errno == errno.ELOOP or self.folder.is_symlink():  # made a link since the run's checks
                raise ValueError(
                    f"{self.folder} is a link: a run writes its events inside its own folder, never through a "
                    "link; remove the link or choose another --out"
                ) from None
            self._stop(f"{self.folder} cannot be opened: {err.strerror or err}")
            return
        self.identity = os.fstat(self.handle)
        where = HANDLES / str(self.handle) if HANDLES.is_dir() else self.folder
        _quiet_writer_threads()
        try:  # the purge marker is written only when purge_step is given: a fresh run needs none
            self.writer = SummaryWriter(str(where), purge_step=start + 1 if start else None, flush_secs=10)
        except Exception as err:  # noqa: BLE001 - a full disk, a folder gone: events are a copy only
            self._stop(err)

    def add(self, group: str, row: dict, step: int) -> None:
        """Every number of `row` (but its step and clock) as GROUP/NAME at `step`."""
        if self.writer is None:
            return
        try:
            now = os.lstat(self.folder)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (self.identity.st_dev, self.identity.st_ino):
            self._stop(f"{self.folder} was removed or replaced during the run")
            return
        try:
            for name, value in row.items():
                if name not in ("step", "time") and isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.writer.add_scalar(f"{group}/{name}", value, step)
        except Exception as err:  # noqa: BLE001 - the writer thread's error comes back here
            self._stop(err)

    def close(self) -> None:
        if self.writer is not None:
            try:
                self.writer.close()
            except Exception as err:  # noqa: BLE001 - the last flush can fail as any write
                self._stop(err)
            self.writer = None
        if self.handle is not None:
            os.close(self.handle)
            self.handle = None

    def _stop(self, why) -> None:
        """Say once, in one line, why the events stop; close the writer without a second word."""
        if not self.stopped:
            self.stopped = True
            if isinstance(why, OSError):
                why = f"{why.strerror or why}" + (f" ({os.fsdecode(why.filename)})" if why.filename else "")
            text = " ".join(str(why).split())
            if self.handle is not None:  # the folder's name, not the handle's
                text = text.replace(str(HANDLES / str(self.handle)), str(self.folder))
            text = text[:300]
            print(
                f"TensorBoard events stopped: {text}; training goes on, metrics.jsonl and evals.jsonl keep "
                "every number",
                file=sys.stderr,
            )
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001, S110 - already said why
                pass


def _quiet_writer_threads() -> None:
    """Leave out the traceback TensorBoard's writer thread prints when a write fails: the thread
    keeps the error and the next call in the training thread raises it, where `Events` reports it
    in one line. Every other thread's exception is printed as before."""
    if _hook:
        return
    previous = threading.excepthook

    def hook(args):
        if type(args.thread).__name__ == "_AsyncWriterThread" and isinstance(args.exc_value, Exception):
            return
        previous(args)

    threading.excepthook = hook
    _hook.append(hook)


def read(out) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} as TensorBoard reads RUN/tb/ (steps a resume purged left out);
    values are float32, as event files store them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(Path(out) / FOLDER), size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
