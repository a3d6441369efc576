"""The encoding leaderboard (docs/study/protocols.md, "The encoding zoo"): every encoding on the study's two
protocols, ranked by what the 95 % intervals can tell apart.

    board = leaderboard(intervals)            # one row per protocol, task, d and encoding
    table(board)                              # the multi-task protocol: encodings x tasks, as docs/leaderboard.md prints it
    figure(board)                             # notebook 04's figures/04_leaderboard

    python -m workbench.leaderboard                        # the published board (results/), printed
    python -m workbench.leaderboard --study runs/study     # with one's own study's cells merged in
    python -m workbench.leaderboard --study runs/study --alone --csv runs/board.csv --figures runs/board

The multi-task protocol is Study 2b's (the paper's five) and `zoo_multitask` (every other
encoding); the precision protocol is Study 1's and `zoo_precision`, per task and d. The score is the
task's own metric (log-sMAPE or accuracy). Rank: 1 + the number of encodings whose interval lies
entirely above the encoding's own and whose mean is more than `study.DELTA` higher (the run-to-run
spread across CPUs: a smaller gap is not a difference), so encodings whose intervals overlap, or
lie apart by less than the spread, share a rank. Ranks count the encodings of the board only, one
cell (protocol, task, d) at a time, and the table and the figure show every encoding of the board.

One's own runs (a new encoding, say, run with `python -m workbench.experiments study --studies
zoo_precision --encodings NAME --out runs/study`) join the board by reading: `study.read_studies`
merges study folders over the published results/ (a cell in a later folder replaces the same cell
before it, and the command names the cells replaced), and nothing is written into results/. Every
row is checked where it enters (`study.rows`: finite scores in range, a mean inside its interval,
integer seeds and digits, no repeated cell); the command refuses a cell that averages fewer seeds
than its protocol's (`PROTOCOL_SEEDS`: its interval is not comparable with the others'), unless
`--allow-fewer-seeds`, which shows it with a warning naming it.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import encoders, study, tasks
from .cli import Parser
from .runs.atomic import write_atomic
from .runs.outputs import output_path
from .runs.printable import printable
from .study import DELTA, MULTITASK_SEEDS, NUMERIC_CHECKPOINT, PRECISION_SEEDS, ZOO_MULTITASK, ZOO_PRECISION
from .study.rows import INTERVAL_COLUMNS, check_rows

PROTOCOLS = {"multitask": (NUMERIC_CHECKPOINT, ZOO_MULTITASK), "precision": ("precision", ZOO_PRECISION)}
PROTOCOL_SEEDS = {"multitask": len(MULTITASK_SEEDS), "precision": len(PRECISION_SEEDS)}  # the seeds each registered


def on_board(intervals: pd.DataFrame) -> pd.DataFrame:
    """The rows of `intervals` the board ranks (the protocols' studies, each task's own metric), with
    their protocol: protocol, task, digits, encoding, mean, low, high (and seeds, where the
    intervals count them). Rows that are no study's (`study.rows`) are a ValueError naming them."""
    intervals = check_rows(intervals, "the intervals", INTERVAL_COLUMNS, merged=True)
    parts = []
    for protocol, studies in PROTOCOLS.items():
        rows = intervals[intervals.study.isin(studies)]
        rows = rows[np.array([tasks.get(t).metric == m for t, m in zip(rows.task, rows.metric)], dtype=bool)]
        parts.append(rows.assign(protocol=protocol))
    columns = ["protocol", "task", "digits", "encoding", "mean", "low", "high"]
    return pd.concat(parts, ignore_index=True)[columns + (["seeds"] if "seeds" in intervals else [])]


def leaderboard(intervals: pd.DataFrame, delta: float = DELTA) -> pd.DataFrame:
    """protocol, task, digits, encoding, mean, low, high, rank (of the task's own metric; the module
    docstring's rule, with `delta` the gap of means a difference needs), ranked among the encodings
    of `intervals` in each cell (one's own runs join by merging first: `study.read_studies`)."""
    board = on_board(intervals)
    board["rank"] = 0
    for _, group in board.groupby(["protocol", "task", "digits"]):
        board.loc[group.index, "rank"] = [
            1 + int(((group.low > high) & (group["mean"] - mean > delta)).sum())
            for mean, high in zip(group["mean"], group.high)
        ]
    order = board.task.map(tasks.names().index)  # the tasks in the registry's (the paper's) order
    return (
        board.assign(order=order)
        .sort_values(
            ["protocol", "order", "digits", "rank", "mean"],
            ascending=[True, True, True, True, False],
            ignore_index=True,
        )
        .drop(columns="order")
    )


def table(board: pd.DataFrame, protocol: str = "multitask") -> pd.DataFrame:
    """Encodings (display names) x tasks (and d, for the precision protocol): "mean [low, high] (rank)",
    and the mean rank over the protocol's cells; best mean rank first. Every encoding on the board
    has a row: one without runs on this protocol (say, a new encoding run on the precision protocol
    only) comes last, its cells "no runs" and its mean rank empty, so the figure drawn in this
    order shows every encoding whose rows entered the ranks."""
    part = board[board.protocol == protocol]
    column = part.task if protocol == "multitask" else part.task + " d=" + part.digits.astype(str)
    cells = part.assign(
        column=column,
        cell=[
            f"{m:.2f} [{lo:.2f}, {hi:.2f}] ({r})"
            for m, lo, hi, r in zip(part["mean"], part.low, part.high, part["rank"])
        ],
    )
    wide = cells.pivot(index="encoding", columns="column", values="cell")[list(dict.fromkeys(cells.column))]
    wide.insert(0, "mean rank", cells.groupby("encoding")["rank"].mean().round(2))
    wide = wide.sort_values("mean rank")
    absent = board[~board.encoding.isin(wide.index)].groupby("encoding")["rank"].mean()
    if len(absent):  # by their mean rank on the other protocol, then by name
        order = sorted(absent.index, key=lambda e: (absent[e], e))
        wide = (
            pd.concat([wide, pd.DataFrame({"mean rank": np.nan}, index=order)])
            if len(wide)
            else pd.DataFrame({"mean rank": np.nan}, index=order)
        )
    cells_ = wide.columns.drop("mean rank")
    wide[cells_] = wide[cells_].fillna("no runs")
    wide.index = [encoders.label(e) for e in wide.index]
    return wide


METRIC_SCALES = {"log_smape": ("log-sMAPE", "Viridis"), "accuracy": ("accuracy", "Blues")}
GROUPS = {  # two lines each: on one, the two headers ran into each other above the columns' seam
    "multitask": "six tasks trained together with text<br>(Study 2b's protocol{seeds})",
    "precision": "trained alone at d significant digits<br>(Study 1's protocol{seeds})",
}


def seed_counts(board: pd.DataFrame, protocol: str) -> str:
    """How many seeds the protocol's cells average, read from the board: "3 seeds", "2–3 seeds"
    (cells differ), or "" where the intervals do not count them."""
    part = board[board.protocol == protocol]
    if "seeds" not in part or part.seeds.isna().all():
        return ""
    low, high = int(part.seeds.min()), int(part.seeds.max())
    return f"{low if low == high else f'{low}–{high}'} seed{'s' if high != 1 else ''}"


def figure(board: pd.DataFrame):
    """A heat map: encodings (rows, best mean multi-task rank first) x the multi-task protocol's six
    tasks and the precision protocol's two tasks at each d, each protocol under its own header;
    colour the score, on one colour scale per metric (log-sMAPE and accuracy are different
    quantities), text the score and the rank, hover the 95 % interval. A cell whose runs have not
    finished says so. Seed counts are read from the board. Plotly reads label text as HTML, so
    every label taken from the intervals is escaped: a "<a href=...>" in a CSV cell shows as text,
    never as a link."""
    import plotly.graph_objects as go

    from .figures import plots  # noqa: F401 (its template, the look every figure shares, before go.Figure)

    label = board.task.map(lambda t: tasks.get(t).label)
    board = board.assign(
        column=np.where(board.protocol == "multitask", label, label + ", d=" + board.digits.astype(str))
    )
    order = table(board).index.tolist()
    columns = list(dict.fromkeys(board.column))
    metric_of = dict(zip(board.column, board.task.map(lambda t: tasks.get(t).metric)))
    fig = go.Figure()
    _metric_layers(fig, _cells_grid(board, order, columns), order, columns, metric_of)
    _protocol_headers(fig, board, columns)
    fig.update_layout(
        width=1300,
        height=255 + 42 * len(order),
        margin=dict(t=225, l=190, r=40),
        title=dict(
            text="Encoding leaderboard: score and rank per task at laptop scale",
            subtitle=dict(
                text="Score: log-sMAPE or exact-match accuracy (higher is better), each on its own colour scale; "
                "#rank = 1 + the encodings<br>whose 95 % interval lies entirely above (by more than the "
                f"cross-CPU spread, {DELTA}); mean over seeds"
            ),
        ),
        xaxis=dict(title="task", side="bottom", tickangle=-30),
        yaxis=dict(title="encoding", autorange="reversed"),
    )
    return fig


def _cells_grid(board: pd.DataFrame, order: list, columns: list) -> pd.DataFrame:
    """The board as rows (encodings' labels, in `order`) x columns, for each of mean, low, high, rank."""
    labels = {e: encoders.label(e) for e in board.encoding.unique()}
    grid = board.assign(row=board.encoding.map(labels)).pivot(
        index="row", columns="column", values=["mean", "low", "high", "rank"]
    )
    return grid.reindex(index=order, columns=pd.MultiIndex.from_product([["mean", "low", "high", "rank"], columns]))


def _metric_layers(fig, grid: pd.DataFrame, order: list, columns: list, metric_of: dict) -> None:
    """One heat map per metric on `fig`, each with its own colour axis and bar: a cell shows its
    score and rank, its hover the interval."""
    from plotly.colors import get_colorscale, sample_colorscale

    from .figures import plots

    text = [
        [
            ("no runs" if np.isnan(m) else f"{m:.2f}<br>#{int(r)}")
            for m, r in zip(grid["mean"].loc[e], grid["rank"].loc[e])
        ]
        for e in order
    ]
    hover = [
        [
            f"{_text(e)}, {_text(c)}: "
            + ("no finished runs" if np.isnan(m) else f"{m:.3f} [{lo:.3f}, {hi:.3f}], rank {r:.0f}")
            for c, m, lo, hi, r in zip(
                columns, grid["mean"].loc[e], grid["low"].loc[e], grid["high"].loc[e], grid["rank"].loc[e]
            )
        ]
        for e in order
    ]
    z = grid["mean"].to_numpy()
    metrics = [m for m in METRIC_SCALES if m in set(metric_of.values())]
    for k, metric in enumerate(metrics):  # one trace per metric: each its own colour axis and bar
        mine = np.array([metric_of[c] == metric for c in columns])
        name, scale = METRIC_SCALES[metric]
        axis = "coloraxis" if k == 0 else f"coloraxis{k + 1}"
        cells = np.where(mine, z, np.nan)
        # a heat map has one text colour: the cells that read better in white are drawn once more
        # on top, with white text (plotly's own pick, its navy, was faint on the mid tones)
        fills = sample_colorscale(get_colorscale(scale), np.clip(np.nan_to_num(cells), 0, 1).ravel())
        white = np.reshape([plots.text_color_on(f) == "#ffffff" for f in fills], cells.shape) & ~np.isnan(cells)
        for top, shown in ((False, np.ones_like(white)), (True, white)):
            if top and not white.any():
                continue
            fig.add_heatmap(
                z=np.where(shown, cells, np.nan),
                x=[_text(c) for c in columns],
                y=[_text(e) for e in order],
                text=[[t if m and s else "" for t, m, s in zip(row, mine, on)] for row, on in zip(text, shown)],
                texttemplate="%{text}",
                textfont=dict(color="#ffffff" if top else plots.DARK_TEXT),
                hovertext=[[h if m and s else "" for h, m, s in zip(row, mine, on)] for row, on in zip(hover, shown)],
                hoverinfo="text",
                hoverongaps=not top,  # the cells under the gaps keep their hover
                name=name,
                coloraxis=axis,
            )
        colorbar = dict(title=dict(text=name, side="right"), x=1.01 + 0.1 * k, len=0.9, thickness=18)
        fig.update_layout({axis: dict(cmin=0, cmax=1, colorscale=scale, colorbar=colorbar)})


def _protocol_headers(fig, board: pd.DataFrame, columns: list) -> None:
    """Each protocol's header (with its seed counts) over its columns, and a line between them."""
    multitask = board[board.protocol == "multitask"].column.nunique()
    spans = {"multitask": (0, multitask), "precision": (multitask, len(columns))}
    for protocol, (first, stop) in spans.items():
        if first == stop:
            continue
        seeds = seed_counts(board, protocol)
        fig.add_annotation(
            text=GROUPS[protocol].format(seeds=f", {seeds}" if seeds else ""),
            x=(first + stop - 1) / 2,
            xref="x",
            y=1,
            yref="paper",
            yanchor="bottom",
            yshift=10,
            showarrow=False,
            font=dict(size=15),
        )
        fig.add_shape(type="line", x0=first - 0.45, x1=stop - 0.55, y0=1.01, y1=1.01, yref="paper", line_width=2)
    if board.protocol.nunique() == 2:  # between the protocols
        fig.add_vline(x=multitask - 0.5, line_color="white", line_width=4)


def _text(label) -> str:
    """`label` as plotly's label text shows it literally (&, < and > escaped; plotly decodes
    these three and takes quotes as they are)."""
    return html.escape(str(label), quote=False)


# -- the command ----------------------------------------------------------------------------------
TITLES = {
    "multitask": "The six tasks trained together with text (Study 2b's protocol, d = 1)",
    "precision": "Multiplication and division trained alone (Study 1's protocol, per d)",
}


def _cells(intervals: pd.DataFrame) -> set:
    board = on_board(intervals)
    return set(zip(board.protocol, board.task, board.digits, board.encoding))


def _shown(folder) -> str:
    return "results/ (published)" if Path(folder).resolve() == study.PUBLISHED else printable(folder)


def _named(cells, most: int = 4) -> str:
    """Board cells (protocol, task, d, encoding[, anything said of it]) in words, the first `most`:
    "Abacus, precision multiplication d=1; ..."."""
    named = [
        f"{encoders.label(e)}, {p} {t}" + (f" d={d}" if p == "precision" else "") + "".join(f": {x}" for x in more)
        for p, t, d, e, *more in cells
    ]
    return "; ".join(named[:most]) + (f"; and {len(named) - most} more" if len(named) > most else "")


def short_of_seeds(board: pd.DataFrame) -> list[tuple]:
    """The board's cells (protocol, task, d, encoding, seeds) that average fewer seeds than their
    protocol registered (`PROTOCOL_SEEDS`); none where the intervals do not count seeds."""
    if "seeds" not in board:
        return []
    short = board[board.seeds < board.protocol.map(PROTOCOL_SEEDS)]
    return list(zip(short.protocol, short.task, short.digits, short.encoding, short.seeds.astype(int)))


def seeds_line(short: list[tuple]) -> str:
    """What `short_of_seeds` found, in one line."""
    shown = _named([(p, t, d, e, f"{n} of {PROTOCOL_SEEDS[p]} seeds") for p, t, d, e, n in short])
    return (
        f"{len(short)} cell(s) average fewer seeds than their protocol's ({shown}): their intervals are not "
        "comparable with the others'"
    )


def sources(folders) -> list[str]:
    """One line per study folder: how many cells of the board it brings, for which encodings, and
    which of them replace a cell of the folders before it. ValueError for a folder that brings
    none (its studies are not the board's protocols)."""
    lines, before = [], set()
    for folder in folders:
        intervals = study.read_study(folder)[1]
        cells = _cells(intervals) if len(intervals) else set()
        if not cells:
            held = sorted(set(intervals.study)) if len(intervals) else []
            wanted = sorted(s for studies in PROTOCOLS.values() for s in studies)
            raise ValueError(
                f"study folder {str(folder)!r} holds no cell of the leaderboard (its studies: {held}; the "
                f"board reads {wanted}): run e.g. python -m workbench.experiments study --studies "
                f"zoo_precision --encodings NAME --out {folder}"
            )
        names = sorted({c[3] for c in cells})
        labels = "; ".join(encoders.label(e) for e in names)
        replaced = cells & before
        lines.append(
            f"{_shown(folder)}: {len(cells)} cells of {len(names)} encoding(s) ({labels})"
            + (f", {len(replaced)} of them replacing the same cells above" if before else "")
            + (f": {_named(sorted(replaced))}" if replaced else "")
        )
        before |= cells
    return lines


def main(argv=None) -> None:
    parser = Parser(
        prog="python -m workbench.leaderboard",
        description="Print the encoding leaderboard: the published results (results/), with the cells of "
        "your own study folders merged over them (read only: nothing is written into "
        "results/). Cell: mean [95 % interval] (rank), rank among the encodings listed.",
    )
    parser.add_argument(
        "--study",
        nargs="+",
        action="extend",
        default=[],
        metavar="DIR",
        help="study folders (python -m workbench.experiments study --out DIR), merged in this order "
        "over results/: a cell a later folder holds replaces the same cell before it",
    )
    parser.add_argument("--alone", action="store_true", help="the --study folders only, without results/")
    parser.add_argument(
        "--csv",
        metavar="OUT",
        help="also write the board (one row per protocol, task, d and encoding: mean, low, high, seeds, rank) to this CSV",
    )
    parser.add_argument("--figures", metavar="DIR", help="also draw the leaderboard figure into DIR (HTML and PNG)")
    parser.add_argument(
        "--allow-fewer-seeds",
        action="store_true",
        help="show cells that average fewer seeds than their protocol registered (2 for the precision "
        "protocol, 3 for the multi-task one), with a warning naming them; without it they are refused",
    )
    args = parser.parse_args(argv)
    try:
        if args.alone and not args.study:
            raise ValueError("--alone shows the --study folders without results/: give at least one --study DIR")
        folders = ([] if args.alone else [study.PUBLISHED]) + args.study
        # where the board goes, checked before anything is read or written (results/, figures/
        # and the checkout are never written)
        csv = output_path(args.csv, "--csv") if args.csv else None
        drawn = output_path(args.figures, "--figures") if args.figures else None
        lines = sources(folders)
        board = leaderboard(study.read_studies(folders)[1])
        if short := short_of_seeds(board):
            if not args.allow_fewer_seeds:
                raise ValueError(
                    f"{seeds_line(short)}; run their missing seeds, or pass --allow-fewer-seeds to show them"
                )
            print(f"warning: {seeds_line(short)}", file=sys.stderr)
        print("\n".join(["encoding leaderboard from:"] + [f"  {line}" for line in lines]))
        print(
            f"cell: mean [95 % interval] (rank); rank = 1 + the encodings listed whose interval lies entirely "
            f"above and whose mean is more than {DELTA} higher, per task and d"
        )
        for protocol in PROTOCOLS:
            if (board.protocol == protocol).any():
                shown = table(board, protocol).rename_axis(columns=None).to_string(na_rep="")
                print(f"\n{TITLES[protocol]}\n" + printable(shown, keep="\n"))  # a plugin's label is text too
        if csv:
            write_atomic(csv, lambda tmp: board.to_csv(tmp, index=False))
            print(f"\nboard written to {csv}")
        if drawn:
            from .figures import plots

            written = plots.save(figure(board), "leaderboard", drawn)
            print(f"figure written to {', '.join(map(str, written))}")
    except (ValueError, OSError) as err:
        parser.fail(err)


if __name__ == "__main__":
    main()
