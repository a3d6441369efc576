"""numbers.parse / render: the round trip, the sign rule, splitting what float64 cannot carry."""
import math
import re
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from workbench.numbers import (ABSOLUTE_PATTERN, NUM_TOKEN, SIGNED_PATTERN, number_spans, parse,
                               parse_parts, render, split_number, unparse)

N = NUM_TOKEN


def significant_digits(text):
    return len(text.lstrip("-").replace(".", "").lstrip("0").rstrip("0")) if "." not in text \
        else len(text.lstrip("-").replace(".", "").lstrip("0"))


@pytest.mark.parametrize("text,template,values", [
    ("5-3", f"{N}-{N}", [5, 3]),
    ("x=-3", f"x={N}", [-3]),
    ("a - b", "a - b", []),
    ("[-1.5, -2]", f"[{N}, {N}]", [-1.5, -2]),
    ("(2)-3 x-3 a -3 (-3", f"({N})-{N} x-{N} a {N} ({N}", [2, 3, 3, -3, -3]),
    ("What is 92.248 ^ -2?", f"What is {N} ^ {N}?", [92.248, -2]),
    ("1e-5", f"{N}e-{N}", [1, 5]),
    ("5--3", f"{N}-{N}", [5, -3]),
    ("-0 and -0.25", f"{N} and {N}", [-0.0, -0.25]),
    ("1.2.3", f"{N}.{N}", [1.2, 3]),
])
def test_parse_sign_rule(text, template, values):
    assert parse(text) == (template, values)
    assert [math.copysign(1, v) for v in parse(text)[1]] == [math.copysign(1, v) for v in values]


def test_absolute_parse_leaves_every_minus_as_text():
    assert parse("-3.5 * -2", signed=False) == (f"-{N} * -{N}", [3.5, 2.0])


def test_sign_rule_only_removes_minus_signs_from_the_paper_regex():
    text = "a-1 (-2) 3-4 x=-5.5 [-.5] 00.7 -0.0 1.-2"
    paper = [m.span() for m in re.finditer(SIGNED_PATTERN, text)]
    ours = number_spans(text, signed=True)
    assert len(paper) == len(ours)
    for (ps, pe), (s, e) in zip(paper, ours):
        assert pe == e and s in (ps, ps + 1) and (s == ps or text[ps] == "-")
    assert number_spans(text, signed=False) == [m.span() for m in re.finditer(ABSOLUTE_PATTERN, text)]


@pytest.mark.parametrize("text,parts", [
    ("1.50", [1.5, 0.0]),
    ("007", [0.0, 0.0, 7.0]),           # three matches of the regex already
    ("-.5", ["-.", 5.0]),                # ".5" is not how any float writes itself
    ("-0.0", [-0.0, ".", 0.0]),
    ("0.30000000000000004", [0.30000000000000004]),  # 17 digits that float64 holds: one value
    ("12345678901234567890", [123456789012345.0, 67890.0]),
    ("0.1234567890123450789", [0.12345678901234, 50789.0]),  # no chunk starts with a zero
])
def test_split_examples(text, parts):
    assert parse_parts(text) == parts


@pytest.mark.parametrize("text", ["123456789012345678901234567890.123456789012345678901",
                                  "1" + "0" * 400, "0." + "0" * 400 + "1", "9" * 40, "0.000",
                                  "1" + "0" * 308, "-17976931348623159" + "0" * 292,
                                  "0." + "0" * 322 + "5", "0." + "0" * 330 + "123"])
def test_numbers_float64_cannot_carry_are_split_without_loss(text):
    template, values = parse(text)
    assert unparse(template, values) == text
    parts = split_number(text)
    if len(parts) > 1:  # cut parts keep at most 15 significant digits each
        assert all(significant_digits(render(p, 17)) <= 15 for p in parts if isinstance(p, float))
    for v in values:
        assert math.isfinite(v) and float(render(v, 17)) == v


def test_placeholder_in_text_and_non_strings_are_errors():
    with pytest.raises(ValueError, match="placeholder"):
        parse(f"a {NUM_TOKEN} b")
    with pytest.raises(ValueError, match="string"):
        parse(3.5)
    with pytest.raises(ValueError, match="placeholders"):
        unparse(f"{NUM_TOKEN} + {NUM_TOKEN}", [1.0])


def oracle_round(x, digits):
    """x's shortest decimal rounded half-to-even to `digits` significant digits, as a Fraction."""
    f = Fraction(repr(x))
    if f == 0:
        return f
    e = 0
    while abs(f) >= Fraction(10) ** (e + 1):
        e += 1
    while abs(f) < Fraction(10) ** e:
        e -= 1
    unit = Fraction(10) ** (e - digits + 1)
    return round(f / unit) * unit


def test_render_examples():
    cases = [(0.1, "0.1"), (1e15, "1000000000000000"), (1.5e-14, "0.000000000000015"),
             (-2.5, "-2.5"), (0.30000000000000004, "0.3"), (-0.0, "-0"), (0.0, "0"),
             (1e22, "10000000000000000000000"), (123456789012345.67, "123456789012346"),
             (5e-324, "0." + "0" * 323 + "5")]
    for x, text in cases:
        assert render(x) == text
    assert render(0.30000000000000004, 17) == "0.30000000000000004"
    assert render(2.5, 1) == "2" and render(3.5, 1) == "4"  # half-to-even


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_render_rejects_non_finite(bad):
    with pytest.raises(ValueError, match="finite"):
        render(bad)


def test_render_rejects_bad_digits():
    with pytest.raises(ValueError, match="digits"):
        render(1.0, 18)


finite = st.floats(allow_nan=False, allow_infinity=False)


@given(finite)
def test_render_17_digits_is_the_shortest_round_trip(x):
    text = render(x, 17)
    assert "e" not in text and float(text) == x
    assert Fraction(text) == Fraction(repr(x))
    assert math.copysign(1, float(text)) == math.copysign(1, x)


@given(finite, st.integers(min_value=1, max_value=17))
def test_render_rounds_half_even_against_fraction_oracle(x, digits):
    text = render(x, digits)
    assert "e" not in text and not (("." in text) and text.endswith("0"))
    assert Fraction(text) == oracle_round(x, digits)


@given(finite)
def test_rendered_floats_parse_back_to_one_value(x):
    assert parse_parts(render(x, 17)) == [x]
    negative = render(x, 17).startswith("-")
    assert parse_parts(render(x, 17), signed=False) == (["-", -x] if negative else [x])


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list("0123456789.-+ ,e[]()ax\n")) | st.characters(),
               max_size=80), st.booleans())
def test_parse_never_loses_text(text, signed):
    if NUM_TOKEN in text:
        with pytest.raises(ValueError):
            parse(text, signed=signed)
        return
    template, values = parse(text, signed=signed)
    assert unparse(template, values) == text
    parts = parse_parts(text, signed=signed)
    assert not any(isinstance(a, str) and isinstance(b, str) for a, b in zip(parts, parts[1:]))
    assert not any(ch in "0123456789" for p in parts if isinstance(p, str) for ch in p)
    if not signed:
        assert all(math.copysign(1, v) > 0 for v in values)


@settings(max_examples=200)
@given(st.text(alphabet="0123456789.", min_size=1, max_size=60), st.sampled_from(["", "-"]))
def test_digit_runs_split_into_exact_short_parts(digits, sign):
    text = sign + digits
    for start, end in number_spans(text):
        number = text[start:end]
        parts = split_number(number)
        assert "".join(p if isinstance(p, str) else render(p, 17) for p in parts) == number
        if len(parts) > 1:
            assert all(significant_digits(render(p, 17)) <= 15 for p in parts if isinstance(p, float))
        assert all(p in ("-", ".") for p in parts if isinstance(p, str))
