"""numbers.parse / render: values a reader means, the round trip through written forms, the sign
rule, splitting what float64 cannot carry (in linear time)."""

import math
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import numbers
from workbench.numbers import (
    ABSOLUTE_PATTERN,
    NUM_TOKEN,
    SIGNED_PATTERN,
    Number,
    number_spans,
    parse,
    parse_parts,
    render,
    split_number,
    unparse,
    write,
)

N = NUM_TOKEN


def significant_digits(text):
    return (
        len(text.lstrip("-").replace(".", "").lstrip("0").rstrip("0"))
        if "." not in text
        else len(text.lstrip("-").replace(".", "").lstrip("0"))
    )


@pytest.mark.parametrize(
    "text,template,values",
    [
        ("5-3", f"{N}-{N}", [5, 3]),
        ("x=-3", f"x={N}", [-3]),
        ("a - b", "a - b", []),
        ("[-1.5, -2]", f"[{N}, {N}]", [-1.5, -2]),
        ("(2)-3 x-3 a -3 (-3", f"({N})-{N} x-{N} a {N} ({N}", [2, 3, 3, -3, -3]),
        ("What is 92.248 ^ -2?", f"What is {N} ^ {N}?", [92.248, -2]),
        ("1e-5", f"{N}e-{N}", [1, 5]),
        ("5--3", f"{N}-{N}", [5, -3]),
        ("-0 and -0.25", f"{N} and {N}", [-0.0, -0.25]),
        ("1.2.3", f"{N}{N}", [1.2, 0.3]),  # as the paper's regex reads it: "1.2", ".3"
    ],
)
def test_parse_sign_rule(text, template, values):
    assert parse(text) == (template, values)
    assert [math.copysign(1, v) for v in parse(text)[1]] == [math.copysign(1, v) for v in values]


def test_absolute_parse_leaves_every_minus_as_text():
    assert parse("-3.5 * -2", signed=False) == (f"-{N} * -{N}", [3.5, 2.0])


def test_we_differ_from_the_paper_regex_only_in_the_sign_rule_and_leading_zeros():
    text = "a-1 (-2) 3-4 x=-5.5 [-.5] 1.2.3 -0.0 1.-2 .5.5"
    paper = [m.span() for m in re.finditer(SIGNED_PATTERN, text)]
    ours = number_spans(text, signed=True)
    assert len(paper) == len(ours)
    for (ps, pe), (s, e) in zip(paper, ours):
        assert pe == e and s in (ps, ps + 1) and (s == ps or text[ps] == "-")
    assert number_spans(text, signed=False) == [m.span() for m in re.finditer(ABSOLUTE_PATTERN, text)]
    # the paper's regex reads "007" as 0, 0, 7 and "00.7" as 0, 0.7; a reader sees 7 and 0.7
    assert [m.group() for m in re.finditer(ABSOLUTE_PATTERN, "007 00.7")] == ["0", "0", "7", "0", "0.7"]
    assert parse("007 00.7") == (f"{N} {N}", [7.0, 0.7])


@pytest.mark.parametrize(
    "text,value",
    [
        (".5", 0.5),
        ("1.50", 1.5),
        ("007", 7.0),
        ("-.5", -0.5),
        ("00.70", 0.7),
        ("-0.0", -0.0),
        ("0.000", 0.0),
        ("-00", -0.0),
        ("1." + "0" * 30, 1.0),
        ("000000000000000000000000123.4", 123.4),
        ("0.30000000000000004", 0.30000000000000004),  # 17 digits that float64 holds: one value
    ],
)
def test_numbers_keep_the_value_a_reader_means(text, value):
    assert parse(text) == (N, [value])
    assert math.copysign(1, parse(text)[1][0]) == math.copysign(1, value)
    assert parse(text, forms=True) == (N, [value], [text])
    assert unparse(N, [value], [text]) == text  # the written form gives the text back
    assert unparse(N, [value]) == render(value, 17)  # without it: canonical, like a generated number


@pytest.mark.parametrize(
    "text,parts",
    [
        ("12345678901234567890", [123456789012345.0, 67890.0]),
        ("0.1234567890123450789", [0.12345678901234, 50789.0]),  # no chunk starts with a zero
        ("9007199254740993", [900719925474099.0, 3.0]),  # 2**53 + 1: float64 would round it
        ("-00" + "1" * 20, [-0.0, 0.0, 111111111111111.0, 11111.0]),
    ],
)
def test_numbers_float64_cannot_carry_are_still_split(text, parts):
    assert [p if isinstance(p, str) else p.value for p in parse_parts(text)] == parts
    assert all(p.text == render(p.value, 17) for p in parse_parts(text) if isinstance(p, Number))


digits = st.text(alphabet="0123456789", max_size=7)  # <= 14 digits: float64 holds any


@given(st.sampled_from(["", "-"]), digits, digits, st.booleans())
def test_value_of_any_short_written_number_against_decimal_oracle(sign, integer, fraction, dot):
    text = sign + integer + ("." + fraction if dot and fraction else "")
    if not integer and not (dot and fraction):
        return
    template, values, forms = parse(text, forms=True)
    assert template == N and forms == [text]
    assert values[0] == float(Decimal(text))  # the nearest float64 of the text
    assert math.copysign(1, values[0]) == (-1 if sign else 1)
    assert unparse(template, values, forms) == text


def test_write_refuses_a_form_that_means_another_value():
    assert write(1.5, "1.50") == "1.50" and write(1.5) == "1.5"
    for form, value in [
        ("1.50", 2.0),
        ("-0", 0.0),
        ("1e5", 1e5),
        (" 5", 5.0),
        ("5x", 5.0),
        ("1." + "0" * 40 + "1", 1.0),
        (7, 7.0),
    ]:
        with pytest.raises(ValueError, match="does not mean the value"):
            write(value, form)
    with pytest.raises(ValueError, match="forms"):
        unparse(f"{N} {N}", [1.0, 2.0], ["1"])


@pytest.mark.parametrize(
    "text",
    [
        "123456789012345678901234567890.123456789012345678901",
        "1" + "0" * 400,
        "0." + "0" * 400 + "1",
        "9" * 40,
        "0.000",
        "1" + "0" * 308,
        "-17976931348623159" + "0" * 292,
        "0." + "0" * 322 + "5",
        "0." + "0" * 330 + "123",
    ],
)
def test_numbers_float64_cannot_carry_are_split_without_loss(text):
    template, values, forms = parse(text, forms=True)
    assert unparse(template, values, forms) == text
    parts = split_number(text)
    if len(parts) > 1:  # cut parts keep at most 15 significant digits each, written exactly
        assert all(
            significant_digits(p.text) <= 15 and p.text == render(p.value, 17) for p in parts if isinstance(p, Number)
        )
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
    cases = [
        (0.1, "0.1"),
        (1e15, "1000000000000000"),
        (1.5e-14, "0.000000000000015"),
        (-2.5, "-2.5"),
        (0.30000000000000004, "0.3"),
        (-0.0, "-0"),
        (0.0, "0"),
        (1e22, "10000000000000000000000"),
        (123456789012345.67, "123456789012346"),
        (5e-324, "0." + "0" * 323 + "5"),
    ]
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
    text = render(x, 17)
    assert parse_parts(text) == [Number(x, text)]
    negative = text.startswith("-")
    assert parse_parts(text, signed=False) == (["-", Number(-x, text[1:])] if negative else [Number(x, text)])


@settings(max_examples=300)
@given(
    st.text(alphabet=st.sampled_from(list("0123456789.-+ ,e[]()ax\n")) | st.characters(), max_size=80), st.booleans()
)
def test_parse_never_loses_text(text, signed):
    if NUM_TOKEN in text:
        with pytest.raises(ValueError):
            parse(text, signed=signed)
        return
    template, values, forms = parse(text, signed=signed, forms=True)
    assert unparse(template, values, forms) == text
    for value, form in zip(values, forms):  # every value is what its text says, or an exact part
        assert value == float(Decimal(form)) and (value != 0 or form.startswith("-") == (math.copysign(1, value) < 0))
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
        assert "".join(p if isinstance(p, str) else p.text for p in parts) == number
        if len(parts) > 1:
            assert all(
                significant_digits(p.text) <= 15 and p.text == render(p.value, 17)
                for p in parts
                if isinstance(p, Number)
            )
        assert all(p in ("-", ".") for p in parts if isinstance(p, str))


class CountingPattern:
    """Wraps a compiled regex and counts the characters its matches cover: the regex work."""

    def __init__(self, pattern):
        self.pattern, self.chars = pattern, 0

    def match(self, *args):
        found = self.pattern.match(*args)
        self.chars += found.end() - found.start() if found else 0
        return found


def test_parse_work_grows_linearly_with_a_digit_run(monkeypatch):
    """10x the digits may cost ~10x the work. The old split matched the rest of the run again at
    every position: ~100x the characters (and 10.7 s at 100k digits; benchmarks/parse_numbers.py)."""

    def chars_matched(text):
        counter = CountingPattern(numbers._RUN)
        monkeypatch.setattr(numbers, "_RUN", counter)
        assert unparse(*parse(text, forms=True)) == text
        return counter.chars

    def run(n):
        return "".join(str(i * 7919 % 10) for i in range(n))

    for family in (run, lambda n: "0." + run(n), lambda n: "1" + "0" * n, lambda n: "9." + "0" * n + "1"):
        small, large = chars_matched(family(5_000)), chars_matched(family(50_000))
        assert 0 < large / small < 15, f"50,000 digits cost {large / small:.0f}x the work of 5,000"
