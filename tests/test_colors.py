"""Every registered encoding has its own colour in every figure (`plots.encoding_color`). What the
tests catch: a new encoding without a colour (a KeyError in a figure), two encodings sharing one,
a colour that changes when another encoding is registered after it, the paper's colours moving."""

from workbench import encoders, plots
from workbench.encoders.single_digit import SingleDigit


def toy(name):
    return type(f"Toy_{name}", (SingleDigit,), {"name": name})


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
