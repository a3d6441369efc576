"""The published study in results/: read and checked, merged with one's own study folders
(nothing written), and appended to cell by cell from a finished study folder (`publish`).
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pandas as pd

from ..runs.atomic import write_atomic
from ..runs.outputs import RESULTS
from . import kept, length
from .parts import PARTS, plan
from .questions import OTHER_QUESTIONS_FILE, SCORINGS, _scored_before, other_question_cells
from .rows import CELL, INTERVAL_COLUMNS, TABLE_COLUMNS, check_rows, check_seeds_held  # noqa: F401 (study.CELL, ...)
from .run import INTERVALS_FILE, RESULTS_FILE

PUBLISHED = RESULTS  # the published study: read, and written by `publish` only (outputs.py refuses every command)
# CELL: one cell of a study (study, encoding, task, digits): its seeds' rows and its intervals


def read_study(folder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The results table and the intervals table that `run_study` wrote into `folder`, every row
    checked (`rows.check_rows`: registered names, finite scores in range, a mean inside its
    interval, no repeated row, no interval claiming seeds the results do not hold); a bad row is
    one line naming the file, the row and the column."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ValueError(
            f"study folder {str(folder)!r} does not exist (a study writes it: python -m "
            f"workbench.experiments study --out {folder})"
        )
    paths = [folder / RESULTS_FILE, folder / INTERVALS_FILE]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ValueError(
            f"study folder {str(folder)!r} holds no {' or '.join(missing)} "
            f"(made by: python -m workbench.experiments study --out {folder})"
        )
    hint = f" ({RESULTS_FILE} and {INTERVALS_FILE} are written by python -m workbench.experiments study)"
    table = check_rows(_read_table(paths[0]), paths[0], TABLE_COLUMNS, hint)
    intervals = check_rows(_read_table(paths[1]), paths[1], INTERVAL_COLUMNS, hint)
    check_seeds_held(table, intervals, *paths)
    return table, intervals


def _read_table(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:  # a study with no finished run writes an empty table
        return pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path} is not a readable CSV table: {str(err).strip().splitlines()[-1][:200]}") from None


def read_studies(folders) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The results and intervals tables of several study folders merged, in the order given: a cell
    (study, encoding, task, d) that a later folder holds replaces the earlier folders' rows of that
    cell in both tables (all its seeds and metrics, so a cell's rows and its interval always come
    from one folder); other cells are added. Nothing is written: `[PUBLISHED, "runs/study"]` puts
    one's own runs beside the published ones without touching results/. One folder: `read_study`."""
    folders = [folders] if isinstance(folders, (str, Path)) else list(folders)
    if not folders:
        raise ValueError("no study folder given")
    tables, intervals = read_study(folders[0])
    for folder in folders[1:]:
        more, more_intervals = read_study(folder)
        cells = [f[CELL] for f in (more, more_intervals) if len(f)]
        if not cells:
            continue
        replaced = pd.MultiIndex.from_frame(pd.concat(cells).drop_duplicates())
        tables, intervals = _merged(tables, more, replaced), _merged(intervals, more_intervals, replaced)
    return tables, intervals


def _merged(frame: pd.DataFrame, more: pd.DataFrame, cells: pd.MultiIndex) -> pd.DataFrame:
    """`frame` less its rows of `cells` (study, encoding, task, digits), then `more`'s rows."""
    kept = frame[~pd.MultiIndex.from_frame(frame[CELL]).isin(cells)] if len(frame) else frame
    parts = [f for f in (kept, more) if len(f)]
    return pd.concat(parts, ignore_index=True) if parts else more


def publish(folder, studies, seeds: int, into=PUBLISHED, keep_runs: bool = True) -> dict[str, int]:
    """Append the cells of `studies` (study names: "budget_3M") that study folder `folder` holds
    with all `seeds` seeds to the published tables in `into`: results, intervals and, where `folder`
    holds Study 3's scorings on other questions, their cells (`other_question_cells`). Every byte
    already published stays as it is: the new rows go at the end of each file, in its column
    order, so a study that takes several sessions is published cell by cell, and publishing the
    same folder again adds only what is new. A published cell is never replaced: one that the
    folder holds with other rows is refused, and nothing is written unless every file can take
    its rows. Cells with fewer seeds are left out, named in a warning. With `keep_runs`, the runs of
    the published cells are kept beside them (`kept.keep`: settings, curves, answers in INTO/runs/).
    Returns {file: rows added} (and "runs": runs newly kept)."""
    folder, into, studies = Path(folder).expanduser(), Path(into), list(studies)
    table, intervals = read_study(folder)
    if absent := [s for s in studies if not len(table) or s not in set(table.study)]:
        raise ValueError(f"{folder} holds no results of {absent}; it holds {sorted(set(table.get('study', [])))}")
    if "seeds" not in intervals:
        raise ValueError(f"{folder / INTERVALS_FILE} counts no seeds (no column 'seeds'): not a table run_study wrote")
    chosen = intervals[intervals.study.isin(studies)]
    if short := sorted(set(map(tuple, chosen.loc[chosen.seeds < seeds, CELL].to_numpy()))):
        warnings.warn(f"left out, fewer than {seeds} seeds: {short}", stacklevel=2)
    complete = pd.MultiIndex.from_frame(chosen.loc[chosen.seeds >= seeds, CELL])
    frames = {RESULTS_FILE: (table, CELL), INTERVALS_FILE: (intervals, CELL)}
    if any((folder / name).exists() for name in SCORINGS):
        frames[OTHER_QUESTIONS_FILE] = (other_question_cells(folder), CELL + ["scoring"])
    lengths = None
    if (folder / length.LENGTH_FILE).exists():  # the zoo's length axis: its cells, and its answers kept
        lengths = _scored_before(folder / length.LENGTH_FILE, [])
        frames[length.LENGTH_CELLS_FILE] = (length.length_cells(lengths), CELL + ["length", "metric"])
    texts = {}
    for name, (frame, key) in frames.items():
        rows = frame[pd.MultiIndex.from_frame(frame[CELL]).isin(complete)]
        path = into / name
        if not path.exists():
            texts[path] = rows.to_csv(index=False), len(rows)
            continue
        try:  # as bytes: reading text would turn a CRLF file's line endings into LF, and rewrite them all
            old = path.read_bytes().decode()
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path} is not UTF-8 text ({err.reason} at byte {err.start}): not a published table"
            ) from None
        if not old.strip():
            raise ValueError(f"{path} is empty: a published table starts with its header")
        first = old.splitlines(keepends=True)[0]
        ending = "\r\n" if first.endswith("\r\n") else "\n"  # new lines end as the file's own do
        header = first.rstrip("\r\n").split(",")
        if sorted(header) != sorted(rows.columns):
            raise ValueError(f"{path} has columns {header}; {folder / name} has {list(rows.columns)}")
        lines = rows[header].to_csv(index=False, header=False).splitlines()
        cells = [tuple(c) for c in rows[key].astype(str).to_numpy()]
        published = _lines_by_cell(old, key)
        again = {c for c in cells if c in published}
        if changed := sorted(c for c in again if published[c] != sorted(ln for ln, k in zip(lines, cells) if k == c)):
            raise ValueError(
                f"{path} already holds {len(changed)} of these cells with other rows, e.g. {changed[0]}: "
                "a published cell is never replaced"
            )
        new = [ln for ln, c in zip(lines, cells) if c not in again]
        texts[path] = (
            old + ("" if old.endswith("\n") or not new else ending) + "".join(ln + ending for ln in new),
            len(new),
        )
    kept_now = 0
    if keep_runs:  # checked whole before the tables are written: a run that cannot be kept stops both
        cells = set(map(tuple, complete.to_frame().astype(str).to_numpy()))
        runs = [
            r
            for r in plan(PARTS)
            if (r.study, r.encoding, r.task, str(r.digits)) in cells
            and (folder / r.name / "test_summary.csv").is_file()
        ]
        kept_now = kept.keep({r.name: folder / r.name for r in runs}, {r.name: r.study for r in runs}, into / "runs")
        if lengths is not None:
            answered = lengths[pd.MultiIndex.from_frame(lengths[CELL]).isin(complete)]
            for _, part in answered.groupby("study"):
                length.keep_answers(part, into / "runs")
    for path, (text, _) in texts.items():
        write_atomic(path, lambda tmp, text=text: Path(tmp).write_bytes(text.encode()))
    return {path.name: added for path, (_, added) in texts.items()} | ({"runs": kept_now} if keep_runs else {})


def _lines_by_cell(text: str, key: list[str]) -> dict[tuple, list[str]]:
    """A published table's lines (its text as written) grouped by cell, each cell's lines sorted."""
    lines = text.splitlines()[1:]
    cells = [tuple(c) for c in pd.read_csv(io.StringIO(text))[key].astype(str).to_numpy()] if lines else []
    grouped: dict[tuple, list[str]] = {}
    for line, cell in zip(lines, cells):
        grouped.setdefault(cell, []).append(line)
    return {cell: sorted(group) for cell, group in grouped.items()}
