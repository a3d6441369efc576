"""Study 3's four tables in docs/study/study3.md, written from results/.

A Study 3 level is published in two steps: `publish` appends its cells to results/, then the
docs' tables get one row per new cell. Those rows are formatted here, not by hand, so that a
session that publishes a level adds exactly what results/ holds:

    text, added = study.insert_table_rows(Path("docs/study/study3.md").read_text())

Rows already in the docs are never rewritten (their verdict cells may carry a remark, such as
"overlap (touching at 0.144)"); only missing cells are added, in (task, d, budget) order. The
first three tables set BitTokens (decimal pool) against single digit on each kind of question; the
fourth ("more") has one row per cell of `budget_more`'s encodings (the recipe's BitTokens, NTL):
its score on all three kinds of question and, on the workbench's own, its verdict against each
core encoding of the same (task, d, budget).
tests/test_study.py checks every row against results/ with its own formatting.
"""

from pathlib import Path

import pandas as pd

from .parts import MORE_ENCODINGS, PAPER_REGIME, VARIANT
from .published import PUBLISHED, read_studies
from .questions import OTHER_QUESTIONS_FILE
from .stats import budget_of, budget_rows, budget_verdicts, versus

OTHER = "single_digit"
# The header's first columns, shared by the three tables; they come in this order in the docs.
HEADER = "| task | d | budget | BitTokens (decimal pool) | single digit |"
TABLES = ("own", "authors_test_sets", "reasoning_gym")
MORE = "more"
CORE_LABELS = {OTHER: "single digit", VARIANT: "decimal pool"}
MORE_HEADER = "| task | d | budget | encoding | own test questions |"


def _interval(mean: float, low: float, high: float) -> str:
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def _d(digits) -> str:
    return f"paper's regime ({PAPER_REGIME})" if int(digits) == PAPER_REGIME else str(int(digits))


def _gap(r, a: str = VARIANT, b: str = OTHER) -> str:
    return f"{getattr(r, f'mean_{a}') - getattr(r, f'mean_{b}'):+.3f}".replace("-", "−")


def _means(r) -> list[str]:
    return [_interval(*(getattr(r, f"{s}_{e}") for s in ("mean", "low", "high"))) for e in (VARIANT, OTHER)]


def _more_rows(published: Path) -> dict[tuple, list[str]]:
    """The "more" table: per published cell of MORE_ENCODINGS, keyed (task, d, budget, encoding)."""
    _, intervals = read_studies([published])
    own = budget_rows(intervals[intervals.metric == "log_smape"])
    path = published / OTHER_QUESTIONS_FILE
    scored = set()
    if path.exists():
        other = pd.read_csv(path).set_index(["scoring", "study", "task", "digits", "encoding"])
        scored = set(other.index)
    keys = ["task", "digits", "budget"]
    rows = {}
    for encoding in MORE_ENCODINGS:
        mine = own[own.encoding == encoding]
        verdicts = [
            versus(mine, own[own.encoding == core], keys, encoding, core).set_index(keys) for core in (OTHER, VARIANT)
        ]
        for r in mine.itertuples():
            row = [f"`{encoding}`", _interval(r.mean, r.low, r.high)]
            for core, table in zip((OTHER, VARIANT), verdicts):
                if (r.task, r.digits, r.budget) not in table.index:
                    row.append("not run")
                    continue
                v = table.loc[(r.task, r.digits, r.budget)]
                word = {encoding: f"**`{encoding}` ahead**", core: f"**{CORE_LABELS[core]} ahead**"}.get(
                    v.ahead, v.ahead
                )
                row.append(f"{_gap(v, encoding, core)}, {word}")
            for scoring in TABLES[1:]:
                key = (scoring, r.study, r.task, r.digits, encoding)
                row.append(_interval(*other.loc[key, ["score", "low", "high"]]) if key in scored else "not scored")
            rows[(r.task, int(r.digits), r.budget, encoding)] = row
    return rows


def table_rows(table: str = "own", published: Path = PUBLISHED) -> dict[tuple, str]:
    """One markdown row per published Study 3 cell of `table` ("own": the workbench's test
    questions with gap, verdict and exact match; "authors_test_sets" or "reasoning_gym": the
    other questions; MORE: budget_more's encodings), keyed by (task, d, budget in tokens), and
    for MORE also the encoding."""
    if table not in TABLES + (MORE,):
        raise ValueError(f"table {table!r}: one of {TABLES + (MORE,)}")
    rows = {}
    if table == MORE:
        rows = _more_rows(published)
    elif table == "own":
        _, intervals = read_studies([published])
        exact = budget_rows(intervals[intervals.metric == "exact_match"]).set_index(
            ["task", "digits", "budget", "encoding"]
        )
        for r in budget_verdicts(intervals).itertuples():
            verdict = {VARIANT: "**BitTokens ahead**", OTHER: "**single digit ahead**"}.get(r.ahead, r.ahead)
            ex = " / ".join(
                _interval(*exact.loc[(r.task, r.digits, r.budget, e), ["mean", "low", "high"]])
                for e in (VARIANT, OTHER)
            )
            rows[(r.task, int(r.digits), r.budget)] = [*_means(r), _gap(r), verdict, ex]
    else:
        cells = pd.read_csv(published / OTHER_QUESTIONS_FILE).rename(columns={"score": "mean"})
        cells = cells[cells.scoring == table].assign(budget=lambda c: c.study.map(budget_of))
        by = cells.set_index(["task", "digits", "budget", "encoding"])
        pairs = versus(
            cells[cells.encoding == VARIANT],
            cells[cells.encoding == OTHER],
            ["task", "digits", "budget"],
            VARIANT,
            OTHER,
        )
        for r in pairs.itertuples():
            verdict = {VARIANT: f"**BitTokens ahead** ({_gap(r)})", OTHER: "single digit ahead"}.get(r.ahead, r.ahead)
            row = [*_means(r), verdict]
            if table == "authors_test_sets":
                row.append(
                    " / ".join(f"{by.loc[(r.task, r.digits, r.budget, e), 'exact']:.3f}" for e in (VARIANT, OTHER))
                )
            rows[(r.task, int(r.digits), r.budget)] = row
    return {k: "| " + " | ".join([k[0], _d(k[1]), f"{k[2] / 1e6:g}M", *row]) + " |" for k, row in rows.items()}


def row_key(row: str, table: str = "own") -> tuple:
    """(task, d, budget in tokens) of a table row as written in the docs; for MORE also the encoding."""
    task, digits, budget, encoding = (c.strip() for c in row.strip().strip("|").split("|")[:4])
    d = PAPER_REGIME if digits.startswith("paper's regime") else int(digits)
    key = task, d, float(budget.removesuffix("M")) * 1e6
    return key + (encoding.strip("`"),) if table == MORE else key


def insert_table_rows(text: str, published: Path = PUBLISHED) -> tuple[str, list[str]]:
    """`text` (docs/study/study3.md) with a row added to each of its four Study 3 tables for every
    published cell the table lacks, and the rows added. Existing rows stay as written."""
    lines = text.split("\n")
    starts = [
        (i, t) for header, names in ((HEADER, TABLES), (MORE_HEADER, (MORE,))) for i, t in _starts(lines, header, names)
    ]
    added = []
    for start, table in sorted(starts, reverse=True):
        end = start + 2
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        have = {row_key(row, table): row for row in lines[start + 2 : end]}
        new = {k: row for k, row in table_rows(table, published).items() if k not in have}
        added = list(new.values()) + added
        merged = have | new
        lines[start + 2 : end] = [merged[k] for k in sorted(merged)]
    return "\n".join(lines), added


def _starts(lines: list[str], header: str, names: tuple) -> list[tuple[int, str]]:
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    if len(starts) != len(names):
        raise ValueError(f"expected {len(names)} tables whose header starts {header!r}, found {len(starts)}")
    return list(zip(starts, names))
