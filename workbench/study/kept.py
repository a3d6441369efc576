"""What explains a published result, kept in the repository beside its scores: every published run's
settings, learning curves and answers, compressed (results/runs/<study>/<run name>/).

    config.json, environment.json     the run's settings and where its numbers came from
    evals.jsonl.gz                    every evaluation: validation scores, curriculum levels, loss weights, rates
    metrics.jsonl.gz                  the per-step losses, thinned to at most METRIC_ROWS rows (first and last kept)
    test_samples.csv.gz               every test answer with its score
    (a retrofit run: retrofit.json, environment.json, perplexity.csv, test_summary.csv as they are)

A run folder on a training machine is lost with the machine (Study 3's were); these files are what
a diagnosis needs, and small: gzip with its clock zeroed, so the same run gives the same bytes.
`keep` copies finished runs in (never replacing a kept run with other bytes), `kept_runs` lists
them, `read_kept` reads one back as DataFrames.

Runs finished before their cell is published are held (`held`), so that a lost machine loses none.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..runs.atomic import write_atomic
from ..runs.outputs import RESULTS

KEPT = RESULTS / "runs"
METRIC_ROWS = 300
PLAIN = ("config.json", "environment.json")
# a retrofit run's settings (retrofit.json), provenance and the tables it ends with
RETROFIT_PLAIN = ("retrofit.json", "environment.json", "perplexity.csv", "test_summary.csv")
ZERO_SHOT_PLAIN = ("retrofit.json", "environment.json", "test_summary.csv")  # answers without training
MAX_BYTES = 5 * 2**20  # no kept file over 5 MiB


def _gzip(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=9) as f:
        f.write(data)
    return out.getvalue()


def thinned(lines: list[str], rows: int = METRIC_ROWS) -> list[str]:
    """At most `rows` of `lines`, evenly spread, the first and the last always among them."""
    if len(lines) <= rows:
        return lines
    keep = np.unique(np.round(np.linspace(0, len(lines) - 1, rows)).astype(int))
    return [lines[i] for i in keep]


def missing(run_dir: Path, plain: tuple[str, ...] = PLAIN, trained: bool = True) -> list[str]:
    """The files a finished run folder has that RUN_DIR lacks (none: it is finished)."""
    needed = (*plain, *(("evals.jsonl", "metrics.jsonl") if trained else ()), "test_samples.csv")
    return [n for n in needed if not (Path(run_dir) / n).is_file()]


def contents(run_dir: Path, plain: tuple[str, ...] = PLAIN, trained: bool = True) -> dict[str, bytes]:
    """{kept file name: its bytes} of a finished run folder; `plain`: the files kept as they are;
    not `trained`: answers without training (a retrofit's zero-shot reference), no curves."""
    run_dir = Path(run_dir)
    if lacking := missing(run_dir, plain, trained):
        raise ValueError(f"{run_dir} is not a finished run: it has no {', '.join(lacking)}")
    files = {name: (run_dir / name).read_bytes() for name in plain}
    if trained:
        files["evals.jsonl.gz"] = _gzip((run_dir / "evals.jsonl").read_bytes())
        steps = [line for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
        files["metrics.jsonl.gz"] = _gzip("".join(f"{line}\n" for line in thinned(steps)).encode())
    files["test_samples.csv.gz"] = _gzip((run_dir / "test_samples.csv").read_bytes())
    for name, data in files.items():
        if len(data) > MAX_BYTES:
            raise ValueError(f"{run_dir}: {name} would be kept at {len(data):,} bytes, over {MAX_BYTES:,}")
    return files


def keep(
    run_dirs: dict[str, Path],
    study_of: dict[str, str],
    into: Path = KEPT,
    plain: tuple[str, ...] = PLAIN,
    trained: bool = True,
) -> int:
    """Copy each finished run {name: folder} into INTO/<its study>/<name>/; returns how many were new.
    A run kept before with the same bytes is left; with other bytes it is refused (a kept run is
    never replaced), before anything is written."""
    planned = {}
    for name, folder in run_dirs.items():
        target = Path(into) / study_of[name] / name
        files = contents(folder, plain, trained)
        old = {n: (target / n).read_bytes() for n in files if (target / n).is_file()}
        if old and old != files:
            raise ValueError(f"{target} already keeps run {name} with other files: a kept run is never replaced")
        if not old:
            planned[target] = files
    for target, files in planned.items():
        target.mkdir(parents=True, exist_ok=True)
        for n, data in files.items():
            write_atomic(target / n, lambda tmp, data=data: Path(tmp).write_bytes(data))
    return len(planned)


def kept_runs(into: Path = KEPT, study: str | None = None) -> list[Path]:
    """The kept run folders (of one study, or all), sorted."""
    base = Path(into)
    pattern = f"{study}/*" if study else "*/*"
    return sorted(p for p in base.glob(pattern) if (p / "config.json").is_file())


def read_kept(folder: Path) -> dict:
    """A kept run: {"config": dict, "environment": dict, "steps", "evals", "answers": DataFrames}."""
    folder = Path(folder)

    def jsonl(name: str) -> pd.DataFrame:
        with gzip.open(folder / name, "rt") as f:
            return pd.DataFrame([json.loads(line) for line in f if line.strip()])

    return {
        "config": json.loads((folder / "config.json").read_text()),
        "environment": json.loads((folder / "environment.json").read_text()),
        "steps": jsonl("metrics.jsonl.gz"),
        "evals": jsonl("evals.jsonl.gz"),
        "answers": pd.read_csv(folder / "test_samples.csv.gz"),
    }
