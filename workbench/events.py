"""TensorBoard event files beside a run's JSON logs, in RUN/tb/, to look across runs with

    tensorboard --logdir runs/

Scalars, at the training step they belong to: every number of a metrics.jsonl row as train/NAME
(the loss and its parts, the learning rate of each parameter group), every number of an
evals.jsonl row as eval/NAME (each task's validation score, the harmonic mean of eq. 15, the
balancer's ratios, the loss weights, the curricula's levels frontier/TASK), and each task's test
score as test/TASK at the last step. They are copies of the JSON logs, which stay the record:
TensorBoard's own thread writes them and nothing in training reads them, so a run trains the same
with them or without. A resumed run opens a new event file that purges the steps after its
checkpoint (TensorBoard's purge_step), as `rundir.truncate_log` drops them from the JSON logs.
WORKBENCH_TENSORBOARD=0 turns them off; without the tensorboard package a run says so once and
trains without them. RUN/tb/ is the run's own folder: a tb/ that is a link (into results/, say)
is refused before the run starts (`outputs.check_run_folder`, from `rundir.prepare`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

FOLDER = "tb"  # RUN/tb/
PREFIX = "events.out.tfevents."  # how TensorBoard names its event files
_warned = []


def remove(out: Path) -> None:
    """Drop the event files of a run being replaced (--overwrite): its new curves must not be
    drawn over the old ones."""
    for path in (Path(out) / FOLDER).glob(PREFIX + "*"):
        path.unlink()


class Events:
    """Scalars to RUN/tb/ (rank 0 only); a run resumed after `start` steps purges what an earlier
    process logged beyond them."""

    def __init__(self, out: Path, rank: int, start: int = 0):
        self.writer = None
        if rank != 0 or os.environ.get("WORKBENCH_TENSORBOARD") == "0":
            return
        try:  # imported here: TensorBoard costs seconds to import, and only a training process needs it
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            if not _warned:
                _warned.append(True)
                print(f"no TensorBoard events for this run ({err}): pip install -r requirements.txt", file=sys.stderr)
            return
        # the purge marker is written only when purge_step is given: a fresh run needs none
        self.writer = SummaryWriter(str(Path(out) / FOLDER), purge_step=start + 1 if start else None, flush_secs=10)

    def add(self, group: str, row: dict, step: int) -> None:
        """Every number of `row` (but its step and clock) as GROUP/NAME at `step`."""
        if self.writer is None:
            return
        for name, value in row.items():
            if name not in ("step", "time") and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"{group}/{name}", value, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def read(out) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} as TensorBoard reads RUN/tb/ (steps a resume purged left out);
    values are float32, as event files store them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(Path(out) / FOLDER), size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
