"""Finished runs held in the repository before their cell is published, and any kept or held run
written back into a plan's folder on a new machine.

A plan runs for days and a machine can be lost any hour, taking its run folders with it (Study 4's
unpublished runs and the retrofit's were, once). `hold` keeps a plan's finished runs as `kept.keep`
keeps published ones (settings, curves, answers, compressed) plus their test_summary.csv, in
results/held/<plan folder>/<run>/, so that they are committed as they finish; nothing reads them but
`restore`. `restore` writes kept or held runs back as finished run folders, so that the plan skips
them and resumes where it was; a restored folder says so in RESTORED.txt (its metrics.jsonl is the
thinned one; weights and checkpoints were never kept). A published study run keeps no
test_summary.csv: `published_summary` rebuilds it from its kept answers and refuses unless the
scores equal the published table's to the last bit.

    python -m workbench.study.held hold runs/study4                 # into results/held/study4/
    python -m workbench.study.held hold runs/study4 runs/retrofit-learns --every 300   # until Ctrl-C
    python -m workbench.study.held restore results/runs/study4_3M runs/study4
    python -m workbench.study.held restore results/held/study4 runs/study4
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import pandas as pd

from ..runs.outputs import RESULTS
from .kept import KEPT, PLAIN, RETROFIT_PLAIN, ZERO_SHOT_PLAIN, keep, kept_runs, missing

HELD = RESULTS / "held"
SUMMARY = "test_summary.csv"
RESTORED = "RESTORED.txt"


def _kind(run_dir: Path) -> tuple[tuple[str, ...], bool]:
    """(the files kept as they are, trained?) of a run folder: a retrofit run (retrofit.json) keeps
    its own tables, a zero-shot reference has no curves; a held run keeps its test_summary.csv."""
    if (run_dir / "retrofit.json").is_file():
        trained = (run_dir / "evals.jsonl").is_file()
        return (RETROFIT_PLAIN if trained else ZERO_SHOT_PLAIN), trained
    return (*PLAIN, SUMMARY), True


def hold(runs_dir: Path, into: Path = HELD, published: Path = KEPT) -> int:
    """Keep every finished run under RUNS_DIR (a plan's folder) into INTO/<RUNS_DIR's name>/<run>/;
    runs still in flight (a file of a finished run missing) are left for a later call. Returns how
    many were new; a held run is never replaced with other bytes."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise ValueError(f"{runs_dir} is not a folder of runs")
    new = 0
    kept_names = {p.name for p in kept_runs(published)}
    for folder in sorted(p for p in runs_dir.iterdir() if p.is_dir() and (p / SUMMARY).is_file()):
        if (folder / RESTORED).is_file() or folder.name in kept_names:
            continue  # restored from a held or kept copy, or published: that copy is the record
        plain, trained = _kind(folder)
        if missing(folder, plain, trained):
            continue  # not finished yet
        new += keep({folder.name: folder}, {folder.name: runs_dir.name}, into, plain, trained)
    return new


def _gunzip(path: Path) -> bytes:
    with gzip.open(path, "rb") as f:
        return f.read()


def restore(kept_dir: Path, to: Path, summaries: dict[str, pd.DataFrame] | None = None) -> list[str]:
    """Write each run kept or held under KEPT_DIR back as a finished run folder TO/<run>/, so that the
    plan that made it skips it; the names restored. A published study run keeps no test_summary.csv:
    `summaries` {run: its summary} gives it (`published_summary`). A folder already in TO is left."""
    kept_dir, to = Path(kept_dir), Path(to)
    restored = []
    for folder in sorted(p for p in kept_dir.iterdir() if p.is_dir()):
        target = to / folder.name
        if target.exists():
            continue
        files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.endswith(".gz")}
        for gz in folder.glob("*.gz"):
            files[gz.name[: -len(".gz")]] = _gunzip(gz)
        if SUMMARY not in files:
            if summaries is None or folder.name not in summaries:
                raise ValueError(f"{folder} keeps no {SUMMARY} and none was given: it cannot be restored")
            files[SUMMARY] = summaries[folder.name].to_csv(index=False).encode()
        files[RESTORED] = (
            f"Restored from {folder} by workbench.study.held.restore: metrics.jsonl holds the kept, thinned\n"
            "steps, and no weights or checkpoints were kept.\n"
        ).encode()
        partial = to / f".{folder.name}.restoring"
        partial.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (partial / name).write_bytes(data)
        if "retrofit.json" in files and "perplexity.csv" in files:
            (partial / "model").mkdir(exist_ok=True)  # a retrofit run is complete with its model: not kept
            (partial / "model" / RESTORED).write_bytes(files[RESTORED])
        partial.rename(target)  # the run appears whole or not at all
        restored.append(folder.name)
    return restored


def published_summary(folder: Path, table: pd.DataFrame) -> pd.DataFrame:
    """A published study run's test_summary.csv, rebuilt from its kept answers (as the run summarized
    them) and its rows of the published table (its seconds of training); refused unless the rebuilt
    scores equal the published ones to the last bit."""
    from ..measures.evaluate import summarize
    from .parts import STUDY4_PARTS, STUDY4_PLATEAU, plan

    folder = Path(folder)
    runs = {r.name: r for r in plan((*STUDY4_PARTS, STUDY4_PLATEAU))}
    if folder.name not in runs:
        raise ValueError(f"{folder}: {folder.name} is no run of Study 4's plan")
    run = runs[folder.name]
    summary = summarize(pd.read_csv(folder / "test_samples.csv.gz"))
    rows = table[
        (table.study == run.study)
        & (table.encoding == run.encoding)
        & (table.task == run.task)
        & (table.digits.astype(str) == str(run.digits))
        & (table.seed == run.seed)
    ]
    for metric, column in (("log_smape", "score"), ("exact_match", "exact")):
        got = summary.set_index("task")[column]
        want = rows[rows.metric == metric].set_index("task")["score"]
        if sorted(want.index) != sorted(got.index) or any(float(got[t]) != float(want[t]) for t in want.index):
            raise ValueError(f"{folder}: its answers do not give its published {metric} scores; not restored")
    return summary.assign(encoding=run.encoding, seed=run.seed, train_seconds=float(rows.train_seconds.iloc[0]))


def main(argv: list[str] | None = None) -> None:
    from ..cli import Parser
    from ..runs.outputs import output_path

    parser = Parser(prog="python -m workbench.study.held", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    h = sub.add_parser("hold", help="keep a plan's finished runs in results/held/<its folder's name>/")
    h.add_argument("runs", type=Path, nargs="+", help="the plans' folders of runs")
    h.add_argument("--into", type=Path, default=HELD, help="results/held/ (default) or a folder outside the repository")
    h.add_argument(
        "--every", type=float, default=None, metavar="SECONDS", help="hold again every SECONDS until stopped (Ctrl-C)"
    )
    h.add_argument("--passes", type=int, default=None, help="with --every: stop after this many passes")
    r = sub.add_parser("restore", help="write kept or held runs back into a plan's folder")
    r.add_argument("kept", type=Path, help="results/held/<plan> or results/runs/<study>")
    r.add_argument("to", type=Path, metavar="TO", help="the plan's folder of runs (outside the repository or in runs/)")
    r.add_argument("--table", type=Path, default=RESULTS / "cpu-study.csv", help="published scores (kept study runs)")
    args = parser.parse_args(argv)
    try:
        if args.command == "hold":
            into = args.into.expanduser().resolve()
            if into != HELD and not into.is_relative_to(HELD):  # results/held/ is this command's own place
                into = output_path(args.into, "--into")
            if args.every is not None and not args.every >= 0 or args.passes is not None and args.passes < 1:
                raise ValueError(
                    f"--every takes seconds >= 0 and --passes a count >= 1, got {args.every}, {args.passes}"
                )
            done = 0
            while True:
                for runs in args.runs:  # a plan's folder that does not exist yet is held when it does
                    if runs.is_dir() or args.every is None:
                        print(
                            f"{hold(runs, into)} finished run(s) newly held in {into / runs.resolve().name}", flush=True
                        )
                done += 1
                if args.every is None or args.passes is not None and done >= args.passes:
                    return
                time.sleep(args.every)
        to = output_path(args.to, "TO")  # checked before anything is read or written
        folders = [p for p in args.kept.iterdir() if p.is_dir()] if args.kept.is_dir() else []
        if not folders:
            raise ValueError(f"{args.kept} holds no kept runs")
        need = [p for p in folders if not (p / SUMMARY).is_file() and not (to / p.name).exists()]
        summaries = {}
        if need:
            table = pd.read_csv(args.table)
            summaries = {p.name: published_summary(p, table) for p in need}
        print(f"{len(restore(args.kept, to, summaries))} run(s) restored into {to}")
    except (ValueError, OSError) as err:
        parser.fail(err)


if __name__ == "__main__":
    main()
