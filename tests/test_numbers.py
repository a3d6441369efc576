"""numbers.parse / render: the round trip, the sign rule, splitting what float64 cannot carry."""
import math
from decimal import Decimal

import pytest
from hypothesis import given, settings, strategies as st

from workbench.numbers import NUM_TOKEN, parse, render, unparse


def test_parse_finds_numbers_and_keeps_operator_minus_as_text():
    template, values = parse("What is 92.248 ^ -2? 5-3, a - b, x=-0.5 [-1.5, -2]")
    assert template == f"What is {NUM_TOKEN} ^ {NUM_TOKEN}? {NUM_TOKEN}-{NUM_TOKEN}, a - b, x={NUM_TOKEN} [{NUM_TOKEN}, {NUM_TOKEN}]"
    assert values == [92.248, -2.0, 5.0, 3.0, -0.5, -1.5, -2.0]


def test_absolute_parse_leaves_every_minus_as_text():
    template, values = parse("-3.5 * -2", signed=False)
    assert template == f"-{NUM_TOKEN} * -{NUM_TOKEN}" and values == [3.5, 2.0]


@pytest.mark.parametrize("text", ["1.50", "007", "3.10", "1.0", "-0.0", "-.5", "0.000",
                                  "123456789012345678901234567890.123456789012345678901",
                                  "1" + "0" * 400, "0." + "0" * 400 + "1", "9" * 40])
def test_numbers_float64_cannot_carry_are_split_without_loss(text):
    template, values = parse(text)
    assert unparse(template, values) == text
    assert all(math.isfinite(v) for v in values)
    # every value renders back to its own text: no value was rounded on the way
    for v in values:
        assert float(render(v, 17)) == v


def test_render_plain_decimal_against_decimal_oracle():
    cases = {0.1: "0.1", 1e15: "1000000000000000", 1.5e-14: "0.000000000000015",
             -2.5: "-2.5", 0.30000000000000004: "0.3", -0.0: "-0"}
    for x, text in cases.items():
        assert render(x) == text
    x = 0.30000000000000004
    assert render(x, 17) == "0.30000000000000004"
    # 15-digit rounding is half-even on the shortest decimal
    for x in [123456789012345.67, 2.0000000000000004, 9.999999999999999e22]:
        expected = format(+Decimal(repr(x)).quantize(Decimal(1).scaleb(Decimal(repr(x)).adjusted() - 14)).normalize(), "f")
        assert Decimal(render(x)) == Decimal(expected)
        assert "e" not in render(x).lower()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_render_rejects_non_finite(bad):
    with pytest.raises(ValueError, match="finite"):
        render(bad)


def test_unparse_checks_counts():
    with pytest.raises(ValueError, match="placeholders"):
        unparse(f"{NUM_TOKEN} + {NUM_TOKEN}", [1.0])


finite = st.floats(allow_nan=False, allow_infinity=False)


@given(finite)
def test_render_round_trips_with_17_digits(x):
    assert float(render(x, 17)) == x
    assert "e" not in render(x, 17)


@given(finite)
def test_render_15_digits_is_within_half_an_ulp_of_the_15th_digit(x):
    text = render(x)
    digits = Decimal(text).normalize().as_tuple().digits
    assert len(digits) <= 15
    if x:
        exact = Decimal(repr(x))
        assert abs(Decimal(text) - exact) <= abs(exact).scaleb(-14) / 2 * Decimal("1.000001")


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list("0123456789.-+ ,e[]ax\n")) | st.characters(), max_size=80),
       st.booleans())
def test_parse_never_loses_text(text, signed):
    template, values = parse(text, signed=signed)
    if NUM_TOKEN in text:
        return  # the placeholder itself in the input is ambiguous by design
    assert unparse(template, values) == text
