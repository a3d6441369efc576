"""Where a command may write: one check for every output path, made before anything is written.

    out = output_path(args.out, "--out")     # the absolute place; the command then writes there

A command (and the library calls behind it: `train.train`, a study, the retrofit) writes outside
the repository, or inside its runs/ folder, which git ignores; never into results/ (the published
results: only the publishing code writes them, `study.publish` and `retrofit.experiment
--publish`), figures/ (only make figures' own run), the tracked folders (notebooks/, workbench/,
docs/, tests/, ...) or the repository's root. A study run with `--out results` once rewrote the
published cpu-study.csv (1,667 rows) to 0 rows in its clean-up after a Ctrl-C.

The path is read as the write reads it: relative to the current directory (a notebook
parameter: to the repository root, where the notebooks run), through every link in it and its
existing parents (a run's `--out runs/x` whose runs/x links to results/ is results/). The
absolute place it resolves to is returned, and the command writes there, so the check and the
write cannot disagree. A refusal is one line naming the flag, the path and what to use instead.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout, whatever the current directory
RUNS = ROOT / "runs"
RESULTS = ROOT / "results"
FIGURES = ROOT / "figures"
# What each protected folder is, for the refusal; any other place in the checkout holds tracked files.
WHY = {
    "results": "the published results, written only by publishing (study.publish, retrofit.experiment --publish)",
    "figures": "figures/ is written only by the default run, make figures",
}
# The folders inside a run folder that training writes into (events: TensorBoard's tb/; the pools
# that ranks share): a link there would carry the writes out of the run folder.
RUN_SUBFOLDERS = ("tb", "pools")


def output_path(path, what: str, base=None, figures: bool = False) -> Path:
    """The absolute place `path` names, resolved through links (relative: to `base`, by default
    the current directory, as the write itself goes), if a command may write there: outside the
    repository or inside its runs/ folder; figures/ itself with `figures` (make figures' own run).
    Anything else is a ValueError of one line naming `what` (the flag or parameter), `path` and a
    place under runs/ to use instead."""
    given = Path(path).expanduser()
    base = Path.cwd() if base is None else Path(base)
    written = given if given.is_absolute() else base / given
    place = written.resolve()  # as the system walks it: each link followed before a ".." after it
    lexical = Path(os.path.normpath(written))  # the same without links, to say when one was followed
    if not place.is_relative_to(ROOT) or place.is_relative_to(RUNS) or (figures and place == FIGURES):
        return place
    inside = place.relative_to(ROOT).as_posix()
    where = "the repository's root" if place == ROOT else f"the repository's {inside}{'/' if place.is_dir() else ''}"
    how = []
    if not given.is_absolute() and base.resolve() != ROOT:
        how.append(f"relative to the current folder, {base}")
    if place != lexical:
        how.append(f"through a link: {lexical}")
    if how:
        where += " (" + "; ".join(how) + ")"
    why = WHY.get(place.parts[len(ROOT.parts)], "") if place != ROOT else ""
    raise ValueError(
        f"{what} is {str(path)!r}, {where}: {why + '; ' if why else ''}the workbench writes only outside "
        f"the repository or inside its runs/ folder; use e.g. {_instead(place, base)}"
    )


def _instead(place: Path, base: Path) -> str:
    """runs/NAME as the user would type it from `base`: relative inside the checkout, else absolute."""
    target = RUNS if place.name == "runs" else RUNS / (place.name if place != ROOT else "mine")
    base = base.resolve()
    return os.path.relpath(target, base) if base.is_relative_to(ROOT) else str(target)


def check_run_folder(out, files=()) -> None:
    """Refuse a run folder whose tb/, pools/ or one of `files` is a link: training writes into
    them as into the folder itself (TensorBoard's events, the shared pools, a resume's appended
    logs), and a link would carry those writes wherever it points, results/ included. A
    ValueError before anything of the run is touched."""
    for name in (*RUN_SUBFOLDERS, *files):
        inside = Path(out) / name
        if inside.is_symlink():
            raise ValueError(
                f"{inside} is a link (to {os.readlink(inside)}): a run writes its {name} inside its own "
                "folder, never through a link; remove the link or choose another --out"
            )
