"""Notebook 02's figures: every series of the window entropy and the probes stays visible where
several lie on each other, the probes' axis ticks stay apart and name the full windows."""

import pandas as pd

from workbench.figures import locality as LF
from workbench.measures import locality as L


def test_window_entropy_figure_draws_every_period_with_its_own_dash_and_marker():
    best = L.window_entropy(digits=2, P=10)
    fig = LF.window_entropy_figure(best, digits=2, P=10)
    for op in ("add", "mul"):
        expected = best[best["op"] == op]
        panel = [t for t in fig.data if t.xaxis == ("x" if op == "add" else "x2")]
        assert len(panel) == expected["output_period"].nunique()
        for trace in panel:  # the numbers drawn are the frame's
            e = int(trace.name.split("^")[1])
            part = expected[expected["output_period"] == e].sort_values("width")
            assert list(trace.x) == list(part["width"]) and list(trace.y) == list(part["entropy"])
        styles = [(t.line.dash, t.marker.symbol) for t in panel]
        assert len(set(styles)) == len(styles)
        # series drawn later (on top) have smaller markers, so the ones below show around them
        sizes = [t.marker.size for t in panel]
        assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    title = fig.layout.title
    # anchored at the top of the figure, not centred in the tall top margin: no blank band above it
    assert title.yref == "container" and title.yanchor == "top" and title.y >= 0.95


def _probes():
    rows = []
    for name, widths, accuracy in (
        ("fone", (1, 2, 49), 0.9),
        ("log_fone", (1, 2, 49), 0.1),
        ("bittokens", (1, 64), 0.6),
    ):
        for op in ("add", "mul"):
            for w in widths:
                rows.append(
                    dict(encoding=name, op=op, output_component=0, width=w, accuracy=accuracy, majority_baseline=0.114)
                )
    return pd.DataFrame(rows)


def test_probes_figure_shows_every_baseline_and_separate_ticks_and_names_the_full_window():
    probes = _probes()
    fig = LF.probes_figure(probes, steps=300)
    for axis in ("x", "x2"):
        baselines = [t for t in fig.data if t.xaxis == axis and "baseline" in (t.name or "")]
        assert len(baselines) == 3 and {t.y[0] for t in baselines} == {0.114}
        # equal baselines lie on each other: a dash of its own keeps each visible
        assert len({t.line.dash for t in baselines}) == 3
    ticks = list(fig.layout.xaxis.tickvals)
    assert all(b / a >= 1.5 for a, b in zip(ticks, ticks[1:]))  # 49 and 64 side by side collide on a log axis
    assert min(ticks) <= probes["width"].min() and max(ticks) >= probes["width"].max()
    assert fig.layout.xaxis.type == "log"
    legend = " ".join(t.name for t in fig.data if t.name)
    assert "all components" in legend and "49" in legend and "64" in legend
    assert LF.component_count("fone") == 49 and LF.component_count("bittokens") == 64
    for trace in fig.data:  # the widest window of each encoding is starred
        if trace.name and "baseline" not in trace.name and trace.x[0] is not None:
            full = max(trace.x)
            assert [s == "star" for s in trace.marker.symbol] == [w == full for w in trace.x]
