"""The leaderboard ranks by what the intervals tell apart, and draws what its table says."""

import pandas as pd
import pytest

from workbench import encoders, leaderboard
from workbench.encoders.digits import DigitEncoding


def intervals():
    rows = []
    for study, encoding, (mean, low, high) in [
        ("multitask_numeric", "bittokens", (0.90, 0.85, 0.95)),
        ("multitask_numeric", "single_digit", (0.80, 0.70, 0.86)),
        ("multitask_numeric", "xval", (0.10, 0.05, 0.15)),
        ("zoo_multitask", "abacus", (0.60, 0.50, 0.69)),
        ("multitask", "fone", (0.99, 0.98, 1.00)),
    ]:  # Study 2 is not on the board: 2b is the protocol
        rows.append(
            dict(
                study=study,
                encoding=encoding,
                task="addition",
                digits=1,
                metric="log_smape",
                mean=mean,
                low=low,
                high=high,
            )
        )
        rows.append(dict(rows[-1], metric="exact_match", mean=0.0, low=0.0, high=0.0))  # not the task's own metric
    rows.append(
        dict(
            study="zoo_precision",
            encoding="abacus",
            task="division",
            digits=2,
            metric="log_smape",
            mean=0.5,
            low=0.4,
            high=0.6,
        )
    )
    return pd.DataFrame(rows)


def test_rank_is_one_plus_the_encodings_clearly_ahead():
    board = leaderboard.leaderboard(intervals()).set_index(["protocol", "task", "encoding"])
    ranks = board.loc[("multitask", "addition"), "rank"].to_dict()
    # bittokens' interval overlaps single digit's (0.85 < 0.86): both first; abacus below both; xval last
    assert ranks == {"bittokens": 1, "single_digit": 1, "abacus": 3, "xval": 4}
    assert board.loc[("precision", "division", "abacus"), "rank"] == 1
    assert "fone" not in board.index.get_level_values("encoding")


def test_the_table_and_the_figure_show_the_board():
    board = leaderboard.leaderboard(intervals())
    wide = leaderboard.table(board)
    assert wide.index.tolist() == ["BitTokens", "Single digit", "Abacus", "xVal"]
    assert wide.loc["Abacus", "addition"] == "0.60 [0.50, 0.69] (3)"
    fig = leaderboard.figure(board)
    heat = fig.data[0]
    assert list(heat.y) == wide.index.tolist() and list(heat.x) == ["Add", "Div, d=2"]
    assert heat.z[2][0] == 0.60 and heat.text[2][0] == "0.60<br>#3"
    assert heat.text[0][1] == "no runs" and heat.hovertext[0][1] == "BitTokens, Div, d=2: no finished runs"
    assert heat.hovertext[2][1] == "Abacus, Div, d=2: 0.500 [0.400, 0.600], rank 1"


def test_tasks_keep_the_registry_order_not_the_alphabet():
    rows = intervals()
    rows = pd.concat([rows.assign(task=task) for task in ("division", "addition", "multiplication")], ignore_index=True)
    board = leaderboard.leaderboard(rows)
    assert leaderboard.table(board).columns.tolist() == ["mean rank", "addition", "multiplication", "division"]
    assert list(leaderboard.figure(board).data[0].x) == ["Add", "Mult", "Div", "Add, d=2", "Mult, d=2", "Div, d=2"]


def test_labels_from_the_intervals_are_text_not_html():
    """Bug: the x labels were built from the intervals CSV unescaped, and plotly renders label text
    as HTML: a digits cell "<a href=...>" became a live link in the figure. Such a cell is no longer
    a study row (digits is a positive integer); a label that does hold HTML, an encoding's own,
    still shows as text."""
    rows = intervals()
    rows["digits"] = rows["digits"].astype(object)
    rows.loc[rows.study == "zoo_precision", "digits"] = "<a href='https://evil.example'>2</a> & <b>x</b>"
    with pytest.raises(ValueError, match=r"the intervals, row 11, column 'digits': .*is not a positive integer"):
        leaderboard.leaderboard(rows)

    class Linked(DigitEncoding):
        name, label, group = "linked_test", "<a href='https://evil.example'>L</a> & <b>x</b>", 1

    with encoders.registered(Linked):
        rows = intervals().assign(encoding=lambda f: f.encoding.replace({"xval": "linked_test"}))
        heat = leaderboard.figure(leaderboard.leaderboard(rows)).data[0]
    shown = list(heat.x) + list(heat.y) + [h for row in heat.hovertext for h in row]
    assert not any("<a" in s or "<b>" in s for s in shown), shown
    assert "&lt;a href='https://evil.example'&gt;L&lt;/a&gt; &amp; &lt;b&gt;x&lt;/b&gt;" in heat.y


def test_figure_gives_each_metric_its_own_colour_scale_and_each_protocol_a_header_with_its_seeds():
    """Review of issue 45: one colour scale mixed accuracy and log-sMAPE, the two protocols had no
    headers, and the subtitle's seed counts were typed in rather than read from the data."""
    rows = intervals()
    minmax = rows[rows.metric == "exact_match"].assign(task="minmax", metric="accuracy", mean=0.3, low=0.2, high=0.4)
    rows = pd.concat([rows, minmax], ignore_index=True)
    rows["seeds"] = rows.study.map({"zoo_precision": 4}).fillna(5).astype(int)
    fig = leaderboard.figure(leaderboard.leaderboard(rows))
    by_axis = {t.coloraxis: t for t in fig.data if t.type == "heatmap"}
    assert set(by_axis) == {"coloraxis", "coloraxis2"}
    axes = [fig.layout.coloraxis, fig.layout.coloraxis2]
    assert {a.colorbar.title.text for a in axes} == {"log-sMAPE", "accuracy"}
    assert axes[0].colorscale != axes[1].colorscale
    columns = list(by_axis["coloraxis"].x)
    for trace in by_axis.values():  # each cell coloured by one trace only: its task's metric
        coloured = [[v is not None and v == v for v in row] for row in trace.z]
        accuracy = trace.name == "accuracy"
        assert all(
            any(row[j] for row in coloured) <= ((columns[j] == "MinMax") == accuracy) for j in range(len(columns))
        )
    headers = " ".join(a.text for a in fig.layout.annotations)
    assert "Study 2b's protocol, 5 seeds" in headers and "Study 1's protocol, 4 seeds" in headers
    assert "3 seeds" not in fig.layout.title.subtitle.text + headers
