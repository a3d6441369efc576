"""A run's logs: metrics.jsonl (one row per step) and evals.jsonl (one row per evaluation), their
numbers also as TensorBoard's events (events.py); read back as DataFrames (`load_metrics`), and cut
back to a checkpoint's step when a run resumes (`truncate_log`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from . import events
from .atomic import write_atomic
from .reading import read_json_lines


class Logger:
    """Appends training rows to metrics.jsonl and evaluation rows to evals.jsonl, and their numbers
    to TensorBoard's event files (rank 0 only); a run resumed after `start` steps, to a new event
    file that hides what the killed process logged beyond them."""

    def __init__(self, out: Path, rank: int, start: int = 0):
        self.paths = {"step": out / "metrics.jsonl", "eval": out / "evals.jsonl"}
        self.active = rank == 0
        self.events = events.Events(out, rank, start)

    def _append(self, kind: str, row: dict) -> None:
        if self.active:
            with self.paths[kind].open("a") as f:
                f.write(json.dumps(row) + "\n")

    def step(self, row: dict) -> None:
        self._append("step", row)
        self.events.add("train", row, row["step"])

    def evaluation(self, row: dict) -> None:
        self._append("eval", row)
        self.events.add("eval", row, row["step"])

    def test(self, summary: pd.DataFrame, step: int) -> None:
        """Each task's test score, at the last step (events only: test_summary.csv is the record)."""
        self.events.add("test", dict(zip(summary["task"], summary["score"].astype(float))), step)

    def close(self) -> None:
        self.events.close()


def load_metrics(run_dir) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per training step, one row per evaluation) of a run directory; a line cut short by
    a kill (or still being written) is left out, any other bad line is a ValueError naming it."""

    def read(name):
        try:
            return pd.DataFrame(read_json_lines(Path(run_dir) / name))
        except FileNotFoundError:
            return pd.DataFrame()

    return read("metrics.jsonl"), read("evals.jsonl")


def truncate_log(path: Path, step: int) -> None:
    """Keep the rows logged up to `step` (a line cut short by a kill is dropped); atomic."""
    if path.exists():
        rows = [r for r in path.read_text().splitlines() if _logged_by(r, step)]
        write_atomic(path, lambda tmp: Path(tmp).write_text("".join(r + "\n" for r in rows)))


def _logged_by(line: str, step: int) -> bool:
    try:
        return json.loads(line)["step"] <= step
    except (json.JSONDecodeError, KeyError, TypeError):
        return False
