"""Where a plan's runs train: one after another in this process, or side by side in a pool of
local processes (one thread each). The study, the ablations and the encoding comparisons all hand
their runs here, so every plan resumes, reports and fails the same way.

    results = run_all({"fone-seed0": cfg, ...}, out=Path("runs/x"), jobs=2)

Each run goes to OUT/<name> through `experiments.train_once` (finished runs of the same
configuration are read, not retrained). A run that fails does not stop the others: at the end
`RunsFailed` names every failed run with its error, after the finished ones were kept.
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm


class RunsFailed(RuntimeError):
    """Some runs of a plan failed; the others finished and were kept."""


def _one(cfg, run_dir: Path, overwrite: bool) -> pd.DataFrame:
    from .experiments import train_once  # imported in the worker process
    return train_once(cfg, run_dir, overwrite)


def run_all(runs: dict, out: Path, jobs: int = 1, overwrite: bool = False, desc: str = "runs") -> dict[str, pd.DataFrame]:
    """Train (or read) every run {name: TrainConfig} into OUT/<name>, `jobs` at a time; returns
    {name: its results table}. With jobs 1 the runs train in this process."""
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs must be an integer >= 1, got {jobs!r}")
    results, failed = {}, {}
    if jobs == 1:
        for name, cfg in tqdm(runs.items(), desc=desc):
            try:
                results[name] = _one(cfg, Path(out) / name, overwrite)
            except (ValueError, OSError, RuntimeError, MemoryError) as err:
                failed[name] = err
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(_one, cfg, Path(out) / name, overwrite): name for name, cfg in runs.items()}
            for future in tqdm(as_completed(futures), total=len(futures), desc=desc):
                try:
                    results[futures[future]] = future.result()
                except Exception as err:  # noqa: BLE001 - a worker's failure is reported with the others
                    failed[futures[future]] = err
    if failed:
        shown = "\n".join(f"  {name} ({Path(out) / name}): {type(err).__name__}: {err}" for name, err in failed.items())
        raise RunsFailed(f"{len(failed)} of {len(runs)} runs failed (the {len(results)} others are kept; rerun the "
                         f"same command to retry the failed ones):\n{shown}")
    return results
