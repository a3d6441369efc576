"""The shared figure helpers: log axes written one way, zeros kept off the log axis."""

import re

import pandas as pd
import pytest

from workbench.figures import plots

POWER = re.compile(r"^(1|[25]|[25]·10[⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+|10[⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)$")


def value_of(text: str) -> float:
    """ "2·10⁻¹⁵" -> 2e-15, "10³" -> 1000, "1" -> 1: how a reader reads a tick label."""
    plain = text.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789"))
    mantissa, _, power = plain.partition("10")
    return float(mantissa.rstrip("·") or 1) * 10.0 ** int(power or 0) if "10" in plain else float(plain)


def test_log_ticks_are_distinct_in_range_and_written_alike():
    for low, high in ((7e-16, 5.2e-15), (1e-27, 1.4), (3.0, 3.0), (0.02, 900.0), (1.0, 3e12)):
        ticks = plots.log_ticks(low, high)
        values, texts = ticks["tickvals"], ticks["ticktext"]
        assert len(set(texts)) == len(texts) and all(POWER.match(t) for t in texts), texts  # no "5e-15" twice
        assert all(low / 1.001 <= v <= high * 1.001 for v in values) or len(values) == 1
        assert values == pytest.approx([value_of(t) for t in texts])  # each label reads as its value
    assert "1" in plots.log_ticks(1e-27, 1.4)["ticktext"]  # decades at multiples of the step: 10⁰ among them
    with pytest.raises(ValueError, match="0 < low"):
        plots.log_ticks(0.0, 1.0)


def test_log_with_zeros_draws_every_value_once_and_no_zero_on_the_log_axis():
    data = pd.DataFrame(
        {"facet": ["a"] * 4 + ["b"] * 3, "x": [1, 2, 3, 4, 1, 2, 3], "y": [0.0, 1e-16, 0.0, 0.5, 1e-3, 0.0, 2.0]}
    )
    fig = plots.log_with_zeros(data, "x", "y", "facet", ["a", "b"], "x", "y")
    top = [t for t in fig.data if t.yaxis in ("y", "y2")]
    strip = [t for t in fig.data if t.yaxis in ("y3", "y4")]
    assert sorted(v for t in top for v in t.y) == sorted(data.y[data.y > 0])
    assert sum(len(t.x) for t in strip) == 3 and all(v == 0 for t in strip for v in t.y)
    assert [list(t.x) for t in strip] == [[1, 3], [2]]  # each zero under its own facet and x
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis3.ticktext == ("exactly 0",)
    with pytest.raises(ValueError, match="negative"):
        plots.log_with_zeros(data.assign(y=-data.y), "x", "y", "facet", ["a", "b"], "x", "y")


def test_padded_range_fits_the_data_and_stays_under_the_cap():
    assert plots.padded_range([0.03, 0.31, float("nan")], 0, 1.02) == pytest.approx([0, 0.31 * 1.08])
    assert plots.padded_range([0.5, 1.0], 0, 1.02) == [0, 1.02]  # a score of 1 keeps the 0-1 axis
    assert plots.padded_range([], 0, 1.02) == [0, 1.02]
    with pytest.raises(ValueError, match="below"):
        plots.padded_range([-1.0], 0)


def test_series_style_gives_each_series_its_own_dash_and_symbol_and_shrinking_markers():
    styles = [plots.series_style(i) for i in range(5)]
    assert len({(s["line"]["dash"], s["marker"]["symbol"]) for s in styles}) == 5
    sizes = [s["marker"]["size"] for s in styles]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 5
