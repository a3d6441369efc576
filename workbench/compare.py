"""Run folders side by side: the settings in which they differ and what each reached.

    python -m workbench.compare runs/fone runs/bittokens [RUN ...] [--csv compare.csv] [--all]
    python -m workbench.compare runs/study/precision-*-d2-*     # a study's runs, by the shell's pattern

One row per run, read from the files every run writes (nothing is recomputed): the settings of
config.json that differ between the runs (every setting with --all; where a run lives and whether
it replaced another aside), whether it finished or at which step it stopped, its last training
loss (metrics.jsonl), its best validation mean (eq. 15, evals.jsonl) and the step of it, its
training minutes and each task's test score (test_summary.csv). The curves themselves:
`tensorboard --logdir runs/` (every run writes RUN/tb/).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .atomic import write_atomic
from .cli import Parser
from .outputs import output_path

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
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} is not readable as a run's configuration: {err}") from None
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
    from .rundir import load_metrics

    steps, evals = load_metrics(folder)
    last = int(steps["step"].iloc[-1]) if len(steps) and "step" in steps else 0
    finished = (folder / "test_summary.csv").exists()
    row = {
        "status": "finished" if finished else f"stopped at step {last}" if last else "not started",
        "steps": last,
        "last_loss": steps["loss"].iloc[-1] if "loss" in steps and len(steps) else float("nan"),
    }
    if "harmonic_mean" in evals and len(evals):
        best = evals.loc[evals["harmonic_mean"].idxmax()]
        row.update(best_val=float(best["harmonic_mean"]), best_step=int(best["step"]))
    else:
        row.update(best_val=float("nan"), best_step=float("nan"))
    if finished:
        summary = pd.read_csv(folder / "test_summary.csv")
        if "train_seconds" in summary and len(summary):
            row["minutes"] = float(summary["train_seconds"].iloc[0]) / 60
        row.update({f"test/{t}": float(s) for t, s in zip(summary["task"], summary["score"])})
    return row


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
    parser = Parser(prog="python -m workbench.compare", description=__doc__.split("\n\n")[0])
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
        print(table.round(3).to_string(index=False))
    if csv:
        print(f"written: {csv}")


if __name__ == "__main__":
    main()
