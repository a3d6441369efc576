"""Notebook 01's figures show the measurements they are built from: checked against the frames of
`workbench.measures.desiderata`, IEEE-754 bits from struct, and the numbers' own text."""

import struct

import numpy as np
import pandas as pd

from workbench import encoders
from workbench.figures import desiderata as DF
from workbench.measures import desiderata as D
from workbench.numbers import render


def test_explorer_bits_are_the_float64_bits():
    for value in (7.0, -1.2345678901234567e-14, 6.02e23):
        fig = DF.explorer_figure(value)
        bars = [t for t in fig.data if t.type == "bar" and t.orientation != "h"]
        drawn = [int(b) for t in bars for b in t.y]
        assert drawn == [int(b) for b in f"{struct.unpack('>Q', struct.pack('>d', value))[0]:064b}"]


def test_explorer_shows_every_digit_encoding_s_tokens_of_the_number_s_text():
    value = -1.2345678901234567e-14
    pieces = DF.digit_pieces(value)
    assert set(pieces) == {n for n in encoders.names() if not encoders.get(n).single_token}
    for name, tokens in pieces.items():  # the pieces spell the number's text, as the tokenizer writes it
        assert encoders.get(name).number_text(tokens) == render(value, 17)
    rows = {t.y[0]: t for t in DF.explorer_figure(value).data if t.orientation == "h"}
    single = rows[f"{encoders.label('single_digit')} ({len(pieces['single_digit'])})"]
    assert list(single.text) == pieces["single_digit"] and list(single.x) == [len(p) for p in pieces["single_digit"]]
    assert DF.digit_pieces(float("inf")) == {}


def _d4():
    rows = [dict(encoding="bittokens", decade=k, exact=1.0, median_rel_error=0.0, max_rel_error=0.0) for k in range(3)]
    rows += [
        dict(encoding="xval", decade=k, exact=e, median_rel_error=r, max_rel_error=r)
        for k, e, r in ((0, 0.0, 2e-15), (1, 0.995, 0.0), (2, 0.5, 4e-15))
    ]
    return pd.DataFrame(rows)


def test_d4_figure_cells_are_the_exact_shares_and_counts_follow_the_scorecard_rule():
    fig = DF.d4_figure(_d4())
    heat = fig.data[0]
    # rows listed bottom up, so the registry's first encoding is drawn on top
    assert list(heat.y) == ["xVal (1/3)", "BitTokens (3/3)"]  # 0.995 counts (>= 99 %), 0.5 and 0 do not
    assert np.array_equal(np.array(heat.z, dtype=float), [[0, 99.5, 50], [100, 100, 100]])
    assert [list(r) for r in heat.text] == [["0", "", "50"], ["", "", ""]]
    line = [t for t in fig.data if t.type == "scatter"]
    assert (
        len(line) == 1 and line[0].name == "xVal" and list(line[0].x) == [0, 2]
    )  # exact decades left off the log axis
    assert fig.layout.yaxis2.type == "log"


def test_loss_axis_leaves_a_spike_above_and_keeps_the_minimum():
    losses = pd.Series([7.0] + [1e-4 * (i - 200) ** 2 / 200 for i in range(1, 401)])  # a spike at p = 0, V at 200
    bottom, top, clipped = DF.loss_axis(losses)
    assert clipped and bottom <= 0 < top < 1 and top > losses[1:].quantile(0.95)
    bottom, top, clipped = DF.loss_axis(pd.Series(np.linspace(1, 2, 50)))
    assert not clipped and top >= 2 and bottom <= 0


def test_d7_figure_shows_each_example_point_inside_its_axis():
    curves, example = D.d7_curves(targets=(7.0,)), D.d7_example()
    fig = DF.d7_figure(curves, example)
    names = list(dict.fromkeys(curves["encoding"]))
    for row, name in enumerate(names, start=1):
        axis = fig.layout[f"yaxis{row if row > 1 else ''}"]
        for loss in example.loc[example["encoding"] == name, "loss"]:
            assert axis.range[0] <= loss <= axis.range[1]
    assert [a.text for a in fig.layout.annotations if "above the axis" in a.text]  # xVal's spike at p = 0 is said
    assert {t.name for t in fig.data if t.showlegend} == {"p = 7 (the label)", "p = 8, 1 off", "p = 3, 4 off"}


def test_scorecard_figure_shows_the_verdicts_and_says_how_d9_was_measured():
    rows = [
        dict(encoding=n, desideratum=d, verdict="pass", measured="x", paper=encoders.get(n).paper_verdicts.get(d, "—"))
        for n in encoders.names()
        for d in D.DESIDERATA
    ]
    card = pd.DataFrame(rows)
    fig = DF.scorecard_figure(card, d9_steps=400)
    heat = fig.data[0]
    assert heat.y[-1].startswith("D9 Arithmetic") and "400-step probe" in heat.y[-1]
    assert "400 steps" in fig.layout.title.subtitle.text
    column = list(heat.x).index(f"{encoders.label('bittokens')}<br>paper")
    assert [row[column] for row in heat.text][6] == "trade-off"  # the paper's D7 for BitTokens
    column = list(heat.x).index(f"<b>{encoders.label('bittokens')}</b><br>measured")
    assert [row[column] for row in heat.text][6] == "pass *"  # measured pass, the paper says trade-off


def _all_encodings_d4():
    # every registered encoding, one of them degrading across the decades like xVal, log-scaled
    return pd.DataFrame(
        dict(
            encoding=n,
            decade=k,
            exact=1.0 if n != "xval" else 0.5 - k / 30,
            median_rel_error=0.0 if n != "xval" else 1e-15,
            max_rel_error=0.0,
        )
        for n in encoders.names()
        for k in range(-14, 15)
    )


def test_d4_figure_names_every_row_with_room_for_its_label():
    fig = DF.d4_figure(_all_encodings_d4())
    heat = fig.data[0]
    axis = fig.layout.yaxis
    # every row's label is a tick: left to itself plotly drops every other label of close rows
    assert axis.tickmode == "array" and list(axis.tickvals) == list(heat.y) == list(axis.ticktext)
    assert any(label.startswith(encoders.label("xval")) for label in axis.ticktext)
    plot_px = fig.layout.height - fig.layout.margin.t - (fig.layout.margin.b or 80)  # plotly's default bottom
    row_px = plot_px * (axis.domain[1] - axis.domain[0]) / len(heat.y)
    assert row_px >= 1.5 * axis.tickfont.size  # a label no taller than its row does not collide with the next


def test_scorecard_headers_are_horizontal_and_fit_their_columns():
    rows = [
        dict(encoding=n, desideratum=d, verdict="pass", measured="x", paper=encoders.get(n).paper_verdicts.get(d, "—"))
        for n in encoders.names()
        for d in D.DESIDERATA
    ]
    fig = DF.scorecard_figure(pd.DataFrame(rows), d9_steps=400)
    headers = list(fig.data[0].x)
    assert fig.layout.xaxis.tickangle == 0  # rotated headers of neighbouring columns overlap
    margin = fig.layout.margin
    column_px = (fig.layout.width - margin.l - margin.r) / len(headers)
    font = fig.layout.xaxis.tickfont.size
    for header in headers:
        lines = header.replace("<b>", "").replace("</b>", "").split("<br>")
        # a bold sans-serif character is ~0.6 em wide on average
        assert max(len(line) for line in lines) * 0.65 * font <= column_px, header
    # the headers still name every encoding (wrapped, not cut)
    for name in encoders.names():
        label = encoders.label(name)
        assert any(h.replace("<b>", "").replace("</b>", "").replace("<br>", " ").startswith(label) for h in headers)


def _d8(low: float):
    sigmas = [0.0, 0.1, 0.5]
    rows = [dict(encoding="bittokens", sigma=s, exact=e) for s, e in zip(sigmas, (1.0, 1.0, 0.2))]
    rows += [dict(encoding=n, sigma=s, exact=low if s == 0 else 0.0) for n in ("xval", "log_xval") for s in sigmas]
    return pd.DataFrame(rows)


def test_d8_figure_keeps_coinciding_lines_apart_and_says_why_they_lie_at_zero():
    fig = DF.d8_figure(_d8(0.003))
    styles = [(t.line.dash, t.marker.symbol) for t in fig.data]
    assert len(set(styles)) == len(styles) == 3  # xVal and xVal, log-scaled are both at 0 everywhere
    sizes = [t.marker.size for t in fig.data]  # where lines coincide, the one drawn first shows around the next
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    note = fig.layout.title.subtitle.text
    assert encoders.label("xval") in note and encoders.label("log_xval") in note and "0.3%" in note
    assert encoders.label("bittokens") not in note and "float32" in note
    assert not DF.d8_figure(_d8(0.5)).layout.title.subtitle.text  # lines that leave 0 need no note
