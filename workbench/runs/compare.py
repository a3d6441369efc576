"""Run folders side by side: the settings in which they differ and what each reached.

    python -m workbench.runs.compare runs/fone runs/bittokens [RUN ...] [--csv compare.csv] [--all]
    python -m workbench.runs.compare runs/study/precision-*-d2-*     # a study's runs, by the shell's pattern

One row per run, read from the files every run writes (nothing is recomputed): the settings of
config.json that differ between the runs (every setting with --all; where a run lives and whether
it replaced another aside), whether it finished or at which step it stopped, its last training
loss (metrics.jsonl), its best validation mean (eq. 15, evals.jsonl) and the step of it, its
training minutes and each task's test score (test_summary.csv). The curves themselves:
`tensorboard --logdir runs/` (every run writes RUN/tb/).

A run folder may hold anything: only regular files of bounded size are read (`reading`), a value
that is not what a run writes (a step that is no count, a score that is no number, a column
missing) is one line naming the file, the row and the column, and every name and setting printed
to the terminal has its control characters escaped (`printable`): a setting read from a file
cannot retitle or clear the terminal.
"""

from __future__ import annotations

import io
import json
import math
from numbers import Real
from pathlib import Path

import pandas as pd

from ..cli import Parser
from .atomic import write_atomic
from .outputs import output_path
from .printable import printable
from .reading import read_json, read_json_lines, read_text

PLACE = ("out", "overwrite")  # differ between any two runs, and say nothing about them


def settings(folder: Path) -> dict:
    """config.json flat: an optimizer's settings as optim.NAME, lists and options as their JSON."""
    path = folder / "config.json"
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder")
    if not path.exists():
        inside = sorted(p.parent.name for p in folder.glob("*/config.json"))
        hint = (
            (
                f"; it holds {len(inside)} run folders ({', '.join(inside[:3])}{', ...' if len(inside) > 3 else ''}): "
                f"pass them, e.g. {folder}/*"
            )
            if inside
            else ""
        )
        raise ValueError(f"{folder} is not a run folder (it has no config.json){hint}")
    try:
        record = read_json(path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{err}; not readable as a run's configuration") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path} is not a run's configuration (it holds a {type(record).__name__})")
    flat = {}
    for key, value in record.items():
        if key == "optim" and isinstance(value, dict):
            flat.update({f"optim.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return {k: json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v for k, v in flat.items()}


def outcome(folder: Path) -> dict:
    """What a run reached, from its logs and its test summary (NaN for what it has not written)."""
    steps, evals = _log(folder / "metrics.jsonl", "loss"), _log(folder / "evals.jsonl", "harmonic_mean")
    last = steps[-1][0] if steps else 0
    summary = _summary(folder / "test_summary.csv")
    row = {
        "status": "finished" if summary is not None else f"stopped at step {last}" if last else "not started",
        "steps": last,
        "last_loss": next((v for _, v in reversed(steps) if v is not None), math.nan),
    }
    scored = [(value, step) for step, value in evals if value is not None and not math.isnan(value)]
    best = max(scored, key=lambda e: e[0], default=None)  # the first of equal bests, as idxmax took it
    row.update(best_val=best[0] if best else math.nan, best_step=best[1] if best else math.nan)
    if summary is not None:
        if "train_seconds" in summary and len(summary):
            row["minutes"] = float(summary["train_seconds"].iloc[0]) / 60
        row.update({f"test/{t}": float(s) for t, s in zip(summary["task"], summary["score"])})
    return row


def _log(path: Path, value: str) -> list[tuple[int, float | None]]:
    """(step, `value` or None where the row has none) of each row of a run's log; [] if absent.
    A step that is not a count, or a value that is not a number, is a ValueError naming the line."""
    try:
        rows = read_json_lines(path)
    except FileNotFoundError:
        return []
    found = []
    for number, row in enumerate(rows, 1):
        step, got = row.get("step"), row.get(value)
        if type(step) is not int or step < 0:
            raise ValueError(f"{path}, row {number}, 'step': {step!r} is not a count of steps")
        if got is not None and (isinstance(got, bool) or not isinstance(got, Real)):
            raise ValueError(f"{path}, row {number}, {value!r}: {got!r} is not a number")
        found.append((step, None if got is None else float(got)))
    return found


def _summary(path: Path) -> pd.DataFrame | None:
    """A run's test_summary.csv, its task, score (and train_seconds) checked; None if absent."""
    try:
        text = read_text(path)
    except FileNotFoundError:
        return None
    try:
        summary = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        raise ValueError(f"{path} is not a readable CSV table: {str(err).strip().splitlines()[-1][:200]}") from None
    if lacking := [c for c in ("task", "score") if c not in summary]:
        raise ValueError(f"{path} lacks column(s) {lacking}: not a run's test summary")
    for column in ("score", "train_seconds"):
        if column in summary:
            number = pd.to_numeric(summary[column], errors="coerce")
            if bad := [k for k, v in enumerate(number) if not math.isfinite(v)]:
                raise ValueError(
                    f"{path}, row {bad[0] + 1}, column {column!r}: {summary[column].iloc[bad[0]]!r} is not a finite number"
                )
            summary[column] = number
    summary["task"] = summary["task"].astype(str)
    return summary


def compare(folders, everything: bool = False) -> pd.DataFrame:
    """One row per run folder: `run`, the settings that differ (all with `everything`), then
    what each reached (`outcome`)."""
    folders = [Path(f) for f in folders]
    records = [settings(f) for f in folders]
    keys = list(dict.fromkeys(k for r in records for k in r if k not in PLACE))
    missing = object()
    differ = [k for k in keys if everything or len({json.dumps(r.get(k, missing), default=str) for r in records}) > 1]
    rows = [{"run": str(f), **{k: r.get(k) for k in differ}, **outcome(f)} for f, r in zip(folders, records)]
    table = pd.DataFrame(rows)
    tests = sorted(c for c in table if c.startswith("test/"))
    return table[[c for c in table if not c.startswith("test/")] + tests]


def main(argv=None):
    parser = Parser(prog="python -m workbench.runs.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders (what python -m workbench.train wrote)")
    parser.add_argument("--csv", metavar="FILE", help="also write the table to FILE (CSV)")
    parser.add_argument("--all", action="store_true", help="every setting, not only those that differ")
    args = parser.parse_args(argv)
    try:
        csv = output_path(args.csv, "--csv") if args.csv else None  # never results/ or the checkout
        table = compare(args.runs, args.all)
        if csv:
            write_atomic(csv, lambda tmp: table.to_csv(tmp, index=False))
    except (ValueError, OSError) as err:
        parser.fail(err)
    with pd.option_context("display.max_columns", None, "display.width", 250):
        print(shown(table).to_string(index=False))
    if csv:
        print(f"written: {printable(csv)}")


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """The table as the terminal gets it: rounded, every text (run names, settings, column names
    read from the files) with its control characters escaped."""
    table = table.round(3)
    table.columns = [printable(c) for c in table.columns]
    return table.apply(lambda column: column.map(lambda v: printable(v) if isinstance(v, str) else v))


if __name__ == "__main__":
    main()
