"""Every registered encoding has its own colour in every figure (`plots.encoding_color`). What the
tests catch: a new encoding without a colour (a KeyError in a figure), two encodings sharing one,
a colour that changes when another encoding is registered after it, the paper's colours moving."""

from workbench import encoders
from workbench.figures import plots


def toy(name):
    # through the registry, not `from workbench.encoders.single_digit import ...`: imported first in
    # a process, that module's @register loads every encoding, and ntl.py's own import of it fails
    return type(f"Toy_{name}", (encoders.single_digit.SingleDigit,), {"name": name})


def test_the_paper_colours_stay():
    assert plots.encoding_color("bittokens") == "#2ca02c" and plots.encoding_color("single_digit") == "#ff7f0e"
    assert {n: plots.encoding_color(n) for n in plots.ENCODING_COLORS} == plots.ENCODING_COLORS


def test_every_registered_encoding_gets_its_own_stable_colour():
    before = plots.encoding_colors()
    assert set(before) == set(encoders.names())
    with encoders.registered(toy("zoo_toy_a")), encoders.registered(toy("zoo_toy_b")):
        colors = plots.encoding_colors()
        assert len(set(colors.values())) == len(colors) == len(before) + 2
        assert {n: colors[n] for n in before} == before  # registering more moves no earlier colour
        assert all(c.startswith("#") and len(c) == 7 for c in colors.values())
    assert plots.encoding_colors() == before


def test_an_unregistered_name_gets_a_colour_too():
    assert plots.encoding_color("not_registered") == plots.encoding_color("not_registered")
    assert plots.encoding_color("not_registered") not in plots.ENCODING_COLORS.values()


# -- the figures read at a glance (issue 65) ------------------------------------------------------
def _lines(fig) -> dict:
    """{legend group: [its line traces]} of a study figure (the interval bands are "lines" only)."""
    groups = {}
    for trace in fig.data:
        if trace.mode == "lines+markers":
            groups.setdefault(trace.legendgroup, []).append(trace)
    return groups


def test_every_line_of_the_study_figures_has_its_own_colour_and_marker():
    """Bug: in 04_study_budget both BitTokens lines were one green told apart by dash alone, and
    single digit's and NTL's lines, nearly on each other, by colour alone. Drawn from the
    published results, as notebook 04 draws them."""
    from workbench import study
    from workbench.study.parts import base_encoding

    _, intervals = study.read_studies(["results"])
    for fig in (study.budget_figure(intervals), study.precision_figure(intervals)):
        groups = _lines(fig)
        assert study.VARIANT in groups and len(groups) >= 4
        style = {g: (traces[0].line.color, traces[0].marker.symbol) for g, traces in groups.items()}
        assert len({c for c, _ in style.values()}) == len(style), style  # a colour each
        assert len({s for _, s in style.values()}) == len(style), style  # a marker each
        for group, traces in groups.items():  # every panel draws an encoding alike
            assert {(t.line.color, t.marker.symbol, t.marker.color) for t in traces} == {
                (*style[group], style[group][0])
            }
        bands = {t.legendgroup: t.fillcolor for t in fig.data if t.fill == "toself"}
        assert all(bands[g] == style[g][0] for g in bands)  # its band in its colour
    base = plots.encoding_color(base_encoding(study.VARIANT))
    assert style[study.VARIANT][0] == plots.variant_color(base) != base  # one family, apart
    assert plots.contrast(plots.variant_color(base), base) > 1.5


def test_the_leaderboard_writes_every_score_in_a_colour_that_reads_on_its_cell():
    """Bug: plotly's own text colour, navy on the mid tones, read at a contrast near 3. The
    visible text of a cell is the topmost heat map's that colours it; WCAG asks 4.5 of text."""
    import numpy as np
    from plotly.colors import sample_colorscale

    from workbench import leaderboard, study

    _, intervals = study.read_studies(["results"])
    fig = leaderboard.figure(leaderboard.leaderboard(intervals))
    heats = [t for t in fig.data if t.type == "heatmap"]
    scales = {a: [list(p) for p in fig.layout[a].colorscale] for a in {t.coloraxis for t in heats}}
    seen, worst = 0, 21.0
    rows, cols = len(heats[0].y), len(heats[0].x)
    for i in range(rows):
        for j in range(cols):
            top = [t for t in heats if t.z[i][j] is not None and not np.isnan(t.z[i][j])]
            if not top:
                continue
            cell = top[-1]
            fill = sample_colorscale(scales[cell.coloraxis], [min(max(cell.z[i][j], 0), 1)])[0]
            assert cell.text[i][j], (i, j)  # the top trace holds the cell's text
            worst = min(worst, plots.contrast(fill, cell.textfont.color))
            seen += 1
    assert seen > 100 and worst >= 4.5, worst


def test_the_retrofit_figure_error_bars_read_and_its_log_axis_has_few_ticks():
    """Bug: 05_retrofit drew plotly's navy error bars over dark grey bars, and its log axis of
    perplexities put 12 ticks on a range of 20 to 600."""
    import pandas as pd

    from workbench.retrofit import report

    encodings, tasks = ["none", "bittokens", "xval"], ["addition", "multiplication"]
    scores = pd.DataFrame([dict(encoding=e, task=t, score=0.05, low=0.03, high=0.08) for e in encodings for t in tasks])
    ppl = pd.DataFrame(dict(encoding=encodings, before=[22.0, 25.0, 24.0], after=[380.0, 43.0, 600.0]))
    colors = {"none": "#444444", "bittokens": "#2ca02c", "xval": "#7f7f7f"}
    fig = report.figure(scores, ppl, encodings, tasks, {e: e for e in encodings}, colors, "t", "s", baseline="none")
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 3 and len({b.marker.color for b in bars}) == 3
    for bar in bars:
        assert plots.contrast(bar.marker.color, bar.error_y.color) >= 4.5  # over the bar
        assert plots.contrast("#ffffff", bar.error_y.color) >= 4.5  # above it
    assert [b.marker.pattern.shape for b in bars] == ["/", "", ""]  # the baseline apart from the greys
    ticks = fig.layout.yaxis2.tickvals
    assert 3 <= len(ticks) <= 6 and ticks[0] >= 22 / 1.02 and ticks[-1] <= 600 * 1.02
    assert report.perplexity_ticks(296, 550)["tickvals"] == [300, 400, 500]
    assert report.perplexity_ticks(300, 305) == {}  # too short a range for three: plotly's own
