"""Place-value tokens: each digit's place against a fractions oracle, round trips, the place range,
bad input, and a tiny training run whose answers decode."""

import math
import random
import re
import struct
from fractions import Fraction

import pytest
import torch
import zoo_checks
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import encoders

CODEC = encoders.get("place_value")


def oracle_pieces(text):
    sign = ["-"] if text.startswith("-") else []
    integer, point, fraction = text.lstrip("-").partition(".")
    places = [len(integer) - 1 - k for k in range(len(integer))] + [-1 - k for k in range(len(fraction))]
    tokens = [f"_{d}_{p}_" for d, p in zip(integer + fraction, places)]
    return sign + tokens[: len(integer)] + ([point] if point else []) + tokens[len(integer) :]


def oracle_value(pieces):
    """sum of d x 10^p over the _d_p_ tokens, when the places run down by one with the point between
    10^0 and 10^-1; None otherwise."""
    sign = -1 if pieces[:1] == ["-"] else 1
    body = pieces[1:] if sign < 0 else pieces
    labels = [re.fullmatch(r"_([0-9])_(-?[0-9]+)_", p) for p in body if p != "."]
    if not labels or None in labels or body.count(".") > 1:
        return None
    places = [int(m.group(2)) for m in labels]
    point = body.index(".") if "." in body else len(body)
    before = sum(1 for p in body[:point] if p != ".")
    want = [before - 1 - k for k in range(len(places))]
    if places != want or (point < len(body) and point == len(body) - 1):
        return None
    value = sum(Fraction(int(m.group(1))) * Fraction(10) ** p for m, p in zip(labels, places))
    return float(sign * value) if value or sign > 0 else -0.0


@pytest.mark.parametrize("text", ["12.5", "-0.07", "007", ".5", "0", "-0", "123456789012345678901234567890"])
def test_hand_written_pieces(text):
    assert CODEC.number_tokens(text) == oracle_pieces(text)
    assert CODEC.number_text(CODEC.number_tokens(text)) == text and oracle_value(CODEC.number_tokens(text)) == float(
        text
    )


texts = st.builds(
    lambda sign, integer, fraction: sign + integer + ("." + fraction if fraction is not None else ""),
    st.sampled_from(["", "-"]),
    st.text("0123456789", max_size=31),
    st.none() | st.text("0123456789", min_size=1, max_size=32),
).filter(lambda t: t.strip("-"))


@settings(max_examples=1000, deadline=None)
@given(texts)
def test_every_plain_decimal_in_range_has_the_oracles_pieces_and_value(text):
    pieces = CODEC.number_tokens(text)
    assert pieces == oracle_pieces(text) and CODEC.number_text(pieces) == text
    assert Fraction(oracle_value(pieces)) == Fraction(float(text)) or oracle_value(pieces) == float(text)


def test_values_round_trip_bit_exact_within_the_places():
    rng = random.Random(3)
    xs = [
        rng.choice([-1, 1]) * float(f"{rng.randint(1, 9)}.{rng.randint(0, 10**14)}e{rng.randint(-14, 15)}")
        for _ in range(500)
    ] + [0.0, -0.0, 0.1, 123.456, 1.2345678901234567e-15]
    back = CODEC.decode(CODEC.encode(torch.tensor(xs, dtype=torch.float64)))
    assert [struct.pack(">d", v) for v in back.tolist()] == [struct.pack(">d", v) for v in xs]


def test_a_digit_beyond_the_places_is_a_clear_error():
    for value in (1e31, 1e-33, 5e-324, -1e300):
        zoo_checks.refuses(CODEC, value, "max_place", "10^")
    zoo_checks.refuses(CODEC, math.nan, "cannot encode", "finite")
    zoo_checks.bad_options("place_value")
    with pytest.raises(ValueError, match="place_value.*min_place"):
        encoders.get("place_value", min_place=1)
    assert CODEC.number_text(["_1_5_", "_2_0_"]) == "12"  # a wrong place never changes the digits read


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("place_value", tmp_path, pieces_of=oracle_pieces, value_of=oracle_value)
    assert read >= 8  # most of the 16 answers are numbers the oracle reads
    zoo_checks.runs_by_name("place_value", tmp_path, monkeypatch)
