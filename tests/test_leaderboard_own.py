"""Issue 45: a researcher's own encoding joins the leaderboard without touching results/.

An encoding defined here (registered for the test only, as tests/test_plugins.py does) has its
study rows fabricated in a temporary study folder, in the schema `run_study` writes
(cpu-study.csv, cpu-study-intervals.csv). Merged over the published results, it must be drawn in
the figure and printed in the table, and every rank -- its own and everyone else's -- must be what
a count by hand over the CSV rows says: 1 + the encodings of the same protocol cell (task, d) whose
interval lies entirely above and whose mean is more than 0.071 higher. results/ stays byte for byte
as it was. The oracle reads the CSV files with the csv module and merges them with a dict."""

import csv
import hashlib
import re
from pathlib import Path

import pytest

from workbench import encoders, leaderboard, notebook_parameters, notebooks, study, tasks
from workbench.encoders.digits import DigitEncoding

RESULTS = Path(__file__).resolve().parent.parent / "results"
DELTA = 0.071  # docs/leaderboard.md's δ, written out: the oracle does not read it from the code
STUDIES = {
    "multitask_numeric": "multitask",
    "zoo_multitask": "multitask",
    "precision": "precision",
    "zoo_precision": "precision",
}  # the board's protocols (docs/leaderboard.md)
OWN_METRIC = {
    "addition": "log_smape",
    "multiplication": "log_smape",
    "division": "log_smape",
    "minmax": "accuracy",
    "sorting": "accuracy",
    "interval": "accuracy",
}


class Mine(DigitEncoding):
    """A researcher's own encoding, as short as a new file in workbench/encoders/ would be."""

    name = "mine_test"
    label = "Mine (test)"
    group = 2


@pytest.fixture
def mine():
    with encoders.registered(Mine):
        yield


# Mine on the precision protocol (zoo_precision), every cell: (mean, low, high). At multiplication
# d = 2 it lies above everyone (by hand: the best published interval there ends at 0.745, the best
# mean is 0.717 < 0.95 - 0.071); at division d = 2 ten encodings lie above it (their low > 0.32 and
# mean > 0.371: down to FoNE, 0.405 [0.346, 0.466]) and it lies above three (BitTokens 0.196
# [0.160, 0.232], xVal log-scaled 0.085 [0.069, 0.102], xVal 0.028 [0.024, 0.032]).
MINE = {
    ("multiplication", 1): (0.50, 0.45, 0.55),
    ("multiplication", 2): (0.95, 0.94, 0.96),
    ("multiplication", 3): (0.30, 0.25, 0.35),
    ("multiplication", 4): (0.20, 0.18, 0.22),
    ("division", 1): (0.90, 0.85, 0.95),
    ("division", 2): (0.30, 0.28, 0.32),
    ("division", 3): (0.10, 0.05, 0.15),
    ("division", 4): (0.05, 0.04, 0.06),
}
# ... and the same folder reruns one published cell: Abacus at multiplication d = 1 (published 0.92)
RERUN = ("zoo_precision", "abacus", "multiplication", 1, (0.10, 0.09, 0.11))


def write_study(folder: Path, cells) -> Path:
    """cpu-study.csv and cpu-study-intervals.csv of `cells` [(study, encoding, task, d, (mean, low,
    high))], two seeds each, log-sMAPE and exact match, as run_study writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    table, intervals = [], []
    for studied, encoding, task, digits, (mean, low, high) in cells:
        for seed, score in ((0, mean - 0.01), (1, mean + 0.01)):
            for metric in (OWN_METRIC[task], "exact_match"):
                table.append(
                    dict(
                        study=studied,
                        encoding=encoding,
                        task=task,
                        digits=digits,
                        seed=seed,
                        input_tokens=6.0,
                        output_tokens=3.0,
                        train_seconds=60.0,
                        metric=metric,
                        score=score / 2 if metric == "exact_match" else score,
                    )
                )
        intervals += [
            dict(
                study=studied,
                encoding=encoding,
                task=task,
                digits=digits,
                metric=OWN_METRIC[task],
                mean=mean,
                low=low,
                high=high,
                seeds=2,
                questions=500,
            ),
            dict(
                study=studied,
                encoding=encoding,
                task=task,
                digits=digits,
                metric="exact_match",
                mean=mean / 2,
                low=low / 2,
                high=high / 2,
                seeds=2,
                questions=500,
            ),
        ]
    for name, rows in (("cpu-study.csv", table), ("cpu-study-intervals.csv", intervals)):
        with open(folder / name, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return folder


@pytest.fixture
def own(tmp_path, mine):
    cells = [("zoo_precision", "mine_test", task, d, v) for (task, d), v in MINE.items()] + [RERUN]
    return write_study(tmp_path / "runs" / "study", cells)


def oracle(*folders) -> dict:
    """{(protocol, task, d, encoding): (mean, rank)} by hand: the intervals CSVs read in order, a
    later folder's (study, encoding, task, d) replacing the earlier one's, then every pair of rows
    of one protocol cell compared."""
    cells = {}
    for folder in folders:
        with open(Path(folder) / "cpu-study-intervals.csv") as f:
            for r in csv.DictReader(f):
                if r["study"] in STUDIES and r["metric"] == OWN_METRIC[r["task"]]:
                    cells[(r["study"], r["encoding"], r["task"], int(r["digits"]))] = (
                        float(r["mean"]),
                        float(r["low"]),
                        float(r["high"]),
                    )
    rows = [(STUDIES[s], t, d, e, m, lo, hi) for (s, e, t, d), (m, lo, hi) in cells.items()]
    return {
        (p, t, d, e): (
            m,
            1
            + sum(1 for p2, t2, d2, _, m2, lo2, _ in rows if (p2, t2, d2) == (p, t, d) and lo2 > hi and m2 - m > DELTA),
        )
        for p, t, d, e, m, lo, hi in rows
    }


def digest(folder: Path) -> dict:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def ranks_of(board) -> dict:
    return {
        (p, t, int(d), e): (m, int(r))
        for p, t, d, e, m, r in zip(
            board.protocol, board.task, board.digits, board.encoding, board["mean"], board["rank"]
        )
    }


def same(got: dict, expected: dict) -> bool:
    """The same cells, the same ranks, the same means (to float precision)."""
    return got.keys() == expected.keys() and all(
        got[k][1] == expected[k][1] and got[k][0] == pytest.approx(expected[k][0], abs=1e-12) for k in expected
    )


def figure_cells(fig) -> dict:
    """{(row label, column label): cell text} of the leaderboard heat map (one trace per metric: a
    cell's text is in the trace of its task's metric, empty in the others)."""
    return merged_cells([dict(x=t.x, y=t.y, text=t.text) for t in fig.data if t.type == "heatmap"])


def merged_cells(traces) -> dict:
    shown = {}
    for heat in traces:
        for i, y in enumerate(heat["y"]):
            for j, x in enumerate(heat["x"]):
                if heat["text"][i][j] or (y, x) not in shown:
                    shown[(y, x)] = heat["text"][i][j]
    return shown


def column_of(protocol, task, digits) -> str:
    return tasks.get(task).label + ("" if protocol == "multitask" else f", d={digits}")


def test_own_encoding_merged_over_the_published_results_is_drawn_and_ranked_by_hand(own):
    before = digest(RESULTS)
    expected = oracle(RESULTS, own)
    board = leaderboard.leaderboard(study.read_studies([study.PUBLISHED, own])[1])
    assert same(ranks_of(board), expected)  # every rank of every encoding, the rerun cell included
    # the cells worked out by hand above
    cell = {e: r for (p, t, d, e), (_, r) in expected.items() if (p, t, d) == ("precision", "multiplication", 2)}
    assert cell == {
        "mine_test": 1,
        "ntl": 2,
        "single_digit": 2,
        "numerologic": 2,
        "scientific": 2,
        "triple_digit": 2,
        "reversed_digits": 2,
        "abacus": 2,
        "place_value": 3,
        "triple_digit_r2l": 3,
        "bittokens": 5,
        "fone": 12,
        "log_xval": 13,
        "xval": 13,
    }
    cell = {e: r for (p, t, d, e), (_, r) in expected.items() if (p, t, d) == ("precision", "division", 2)}
    assert cell == {
        "mine_test": 11,
        "numerologic": 1,
        "ntl": 1,
        "scientific": 1,
        "reversed_digits": 1,
        "single_digit": 1,
        "place_value": 1,
        "abacus": 1,
        "triple_digit": 3,
        "triple_digit_r2l": 8,
        "fone": 10,
        "bittokens": 12,
        "log_xval": 13,
        "xval": 13,
    }
    assert expected[("precision", "multiplication", 1, "abacus")] == (0.10, 12)  # the rerun replaced 0.92

    # the figure draws every encoding whose rows were ranked, each cell with the oracle's rank
    fig = leaderboard.figure(board)
    shown = figure_cells(fig)
    assert set(fig.data[0].y) == {encoders.label(e) for (*_, e) in expected} and "Mine (test)" in fig.data[0].y
    for (p, t, d, e), (m, r) in expected.items():
        assert shown[(encoders.label(e), column_of(p, t, d))] == f"{m:.2f}<br>#{r}"
    assert {shown[("Mine (test)", tasks.get(t).label)] for t in ("addition", "sorting")} == {"no runs"}
    assert fig.data[0].y[-1] == "Mine (test)"  # no multi-task runs: after every encoding that has them
    assert digest(RESULTS) == before


def test_the_command_prints_the_merged_board_and_writes_nothing_into_results(own, tmp_path, capsys):
    before = digest(RESULTS)
    expected = oracle(RESULTS, own)
    out = tmp_path / "board.csv"
    leaderboard.main(["--study", str(own), "--csv", str(out)])
    printed = capsys.readouterr().out
    lines = {line.split("  ")[0]: line for line in printed.splitlines()}
    precision = printed[printed.index("trained alone") :]
    mine_line = next(line for line in precision.splitlines() if line.startswith("Mine (test)"))
    assert "0.95 [0.94, 0.96] (1)" in mine_line and "0.30 [0.28, 0.32] (11)" in mine_line
    fone = next(line for line in precision.splitlines() if line.startswith("FoNE"))
    assert "0.42 [0.39, 0.45] (12)" in fone
    assert f"{own}: 9 cells of 2 encoding(s) (Abacus; Mine (test)), 1 of them replacing the same cells above" in printed
    assert "Mine (test)" in lines  # in the multi-task table too, its cells "no runs"
    with open(out) as f:
        written = {
            (r["protocol"], r["task"], int(r["digits"]), r["encoding"]): (float(r["mean"]), int(r["rank"]))
            for r in csv.DictReader(f)
        }
    assert same(written, expected)
    assert digest(RESULTS) == before


def test_alone_ranks_among_the_study_folders_encodings_only(own, capsys):
    expected = oracle(own)
    board = leaderboard.leaderboard(study.read_studies([own])[1])
    assert same(ranks_of(board), expected)
    # abacus 0.10 [0.09, 0.11] below mine at d = 1 (0.50 [0.45, 0.55]): ranked among these two only
    assert expected[("precision", "multiplication", 1, "abacus")] == (0.10, 2)
    leaderboard.main(["--study", str(own), "--alone"])
    printed = capsys.readouterr().out
    assert "results/" not in printed and "Single digit" not in printed and "Mine (test)" in printed


def test_the_published_board_is_unchanged_without_a_study_folder(capsys):
    """No study folder: the rows in the published order (docs/leaderboard.md's tables), every cell
    with the oracle's rank, no empty cell."""
    expected = oracle(RESULTS)
    board = leaderboard.leaderboard(study.read_study(RESULTS)[1])
    assert same(ranks_of(board), expected)
    fig = leaderboard.figure(board)
    assert list(fig.data[0].y) == [
        "Reversed digits",
        "Triple digit, right to left",
        "Triple digit",
        "Abacus",
        "Number Token Loss",
        "Place-value tokens",
        "Scientific notation",
        "Single digit",
        "NumeroLogic",
        "FoNE",
        "BitTokens",
        "xVal, log-scaled",
        "xVal",
    ]
    shown = figure_cells(fig)
    assert "no runs" not in shown.values()
    for (p, t, d, e), (m, r) in expected.items():
        assert shown[(encoders.label(e), column_of(p, t, d))] == f"{m:.2f}<br>#{r}"
    assert list(leaderboard.table(board, "precision").index[:3]) == [
        "NumeroLogic",
        "Number Token Loss",
        "Scientific notation",
    ]
    leaderboard.main([])
    assert "results/ (published): 182 cells of 13 encoding(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "make, argv, message",
    [
        (None, ["--study", "{tmp}/missing"], "study folder '.*missing' does not exist"),
        ("empty", ["--study", "{tmp}/empty"], "holds no cpu-study.csv or cpu-study-intervals.csv"),
        ("budget", ["--study", "{tmp}/budget"], r"holds no cell of the leaderboard \(its studies: \['budget_1M'\]"),
        ("stranger", ["--study", "{tmp}/stranger"], r"encoding \['stranger'\], which is not registered"),
        (None, ["--alone"], "--alone shows the --study folders without results/"),
        (None, ["--csv", "results/board.csv"], "writes only outside the repository or inside its runs/ folder"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, capsys, make, argv, message):
    if make == "empty":
        (tmp_path / "empty").mkdir()
    elif make == "budget":
        write_study(tmp_path / "budget", [("budget_1M", "single_digit", "division", 4, (0.3, 0.2, 0.4))])
    elif make == "stranger":  # rows of an encoding whose file is gone
        write_study(tmp_path / "stranger", [("zoo_precision", "stranger", "division", 4, (0.3, 0.2, 0.4))])
    before = digest(RESULTS)
    with pytest.raises(SystemExit) as stop:
        leaderboard.main([a.format(tmp=tmp_path) for a in argv])
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert digest(RESULTS) == before


def test_notebook_04_takes_study_folders_and_no_study_row(own):
    """Checked before a kernel starts: study_dir a folder or a list of existing folders, fig4_part
    None (Figure 4 without a study row); a missing folder named."""
    nb = notebooks.jupytext.read(notebooks.NOTEBOOK_DIR / "04_paper_figures.py")
    for given in (
        {"study_dir": ["results", str(own)], "fig4_part": None},
        {"study_dir": str(own)},
        {"study_dir": None},
        {"fig4_part": "multitask_numeric"},
    ):
        notebook_parameters.check_parameters("04_paper_figures", nb, given)
        notebook_parameters.check_limits("04_paper_figures", given)
    with pytest.raises(
        ValueError, match=r"study_dir=\['results', '/nowhere'\]: item '/nowhere': expected an existing folder"
    ):
        notebook_parameters.check_limits("04_paper_figures", {"study_dir": ["results", "/nowhere"]})
    with pytest.raises(ValueError, match="takes 1 to 20 items"):
        notebook_parameters.check_limits("04_paper_figures", {"study_dir": []})


@pytest.mark.slow
def test_notebook_04_draws_a_study_folder_merged_over_the_published_one(tmp_path):
    """`-p study_dir=runs/study` failed ("one of []") and fig4_part=None was refused. A kernel knows
    only the encodings of workbench/encoders/, so the folder reruns a published cell (Abacus,
    multiplication d = 1, 0.92 -> 0.10): merged over results/ the leaderboard draws it with the
    oracle's rank; alone, with fig4_part=None, the notebook runs too."""
    import json

    from workbench.notebooks import execute

    own = write_study(tmp_path / "own", [RERUN])
    before = digest(RESULTS)
    small = dict(
        figure_formats=["json"],
        exponent_samples=1000,
        generator_samples=50,
        bootstrap_draws=5,
        official_data=None,
        study4=False,  # drawn by the notebook's own test (test_notebooks); this one is about the leaderboard
    )
    for where, given in (
        ("merged", dict(study_dir=["results", str(own)])),
        ("alone", dict(study_dir=str(own), fig4_part=None)),
    ):
        execute(
            "04_paper_figures", dict(small, figures_dir=str(tmp_path / where), **given), output_dir=tmp_path / where
        )
    figure = json.loads((tmp_path / "merged" / "04_leaderboard.json").read_text())["data"][0]
    traces = json.loads((tmp_path / "merged" / "04_leaderboard.json").read_text())["data"]
    shown = merged_cells([t for t in traces if t["type"] == "heatmap"])
    expected = oracle(RESULTS, own)
    assert len(figure["y"]) == 13 and expected[("precision", "multiplication", 1, "abacus")] == (0.10, 11)
    for (p, t, d, e), (m, r) in expected.items():
        assert shown[(encoders.label(e), column_of(p, t, d))] == f"{m:.2f}<br>#{r}"
    alone = json.loads((tmp_path / "alone" / "04_leaderboard.json").read_text())["data"][0]
    assert alone["y"] == ["Abacus"] and alone["text"] == [["0.10<br>#1"]]
    assert digest(RESULTS) == before


def _one_seed(folder: Path) -> Path:
    """`folder`'s cells cut to their first seed, as a study stopped early leaves them."""
    import pandas as pd

    table = pd.read_csv(folder / "cpu-study.csv")
    table[table.seed == 0].to_csv(folder / "cpu-study.csv", index=False)
    pd.read_csv(folder / "cpu-study-intervals.csv").assign(seeds=1).to_csv(
        folder / "cpu-study-intervals.csv", index=False
    )
    return folder


def test_an_own_cell_of_fewer_seeds_than_its_protocol_is_refused_or_shown_with_a_warning(tmp_path, capsys):
    """Bug: an own cell of one seed replaced the published cell of two silently, and was ranked as
    if it were one. Now it is refused by default, naming it; --allow-fewer-seeds shows it with a
    warning, and the source line names the published cell it replaced."""
    own = _one_seed(write_study(tmp_path / "study", [RERUN]))
    before = digest(RESULTS)
    with pytest.raises(SystemExit) as stop:
        leaderboard.main(["--study", str(own)])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert (
        "1 cell(s) average fewer seeds than their protocol's (Abacus, precision multiplication d=1: 1 of 2 seeds)"
        in err[0]
    )
    assert "--allow-fewer-seeds" in err[0]
    leaderboard.main(["--study", str(own), "--allow-fewer-seeds"])
    out, err = capsys.readouterr()
    assert err.startswith(
        "warning: 1 cell(s) average fewer seeds than their protocol's (Abacus, precision multiplication"
    )
    assert (
        f"{own}: 1 cells of 1 encoding(s) (Abacus), 1 of them replacing the same cells above: "
        "Abacus, precision multiplication d=1" in out
    )
    assert digest(RESULTS) == before


def test_names_read_from_files_are_printed_escaped(tmp_path, capsys):
    """Bug: the leaderboard printed a study folder's name raw, so an escape sequence in it retitled or
    cleared the terminal. It shows as \\x1b now, in the board and in an error alike."""
    own = write_study(tmp_path / "\x1b]0;owned\x07study\x1b[2J", [RERUN])
    leaderboard.main(["--study", str(own)])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;owned\\x07study\\x1b[2J: 1 cells" in out
    (own / "cpu-study.csv").unlink()
    with pytest.raises(SystemExit):
        leaderboard.main(["--study", str(own)])
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]0;owned" in err
