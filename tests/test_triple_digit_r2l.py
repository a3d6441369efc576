"""Right-to-left digit groups: the cut against Python's thousands separators and an independent
slicing oracle, round trips, bad input, and a tiny training run whose answers decode."""

import math
import random
import re
import struct

import pytest
import torch
import zoo_checks
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import encoders

CODEC = encoders.get("triple_digit_r2l")


def groups_from_right(digits, size):
    return [digits[max(0, end - size) : end] for end in range(len(digits), 0, -size)][::-1]


def oracle_pieces(text, size=3):
    sign, body = ("-", text[1:]) if text.startswith("-") else ("", text)
    integer, point, fraction = body.partition(".")
    fraction_groups = [fraction[i : i + size] for i in range(0, len(fraction), size)]
    return [sign] * bool(sign) + groups_from_right(integer, size) + ([point] + fraction_groups if point else [])


def oracle_value(pieces):
    text = "".join(pieces)
    return float(text) if re.fullmatch(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)", text) else None


@pytest.mark.parametrize("n", [0, 7, 12, 999, 1000, 1234567, 10**15, 2**53 + 1, 10**20 + 7])
def test_integers_are_cut_where_thousands_separators_go(n):
    assert CODEC.number_tokens(str(n)) == f"{n:,}".split(",")


def test_options_and_vocabulary():
    assert encoders.options("triple_digit_r2l") == {"group": 3}
    assert {"000", "007", "5", "-", "."} <= set(CODEC.vocabulary()) and len(CODEC.vocabulary()) == 1112
    assert encoders.get("triple_digit_r2l", group=2).number_tokens("-12345.678") == [
        "-",
        "1",
        "23",
        "45",
        ".",
        "67",
        "8",
    ]
    zoo_checks.bad_options("triple_digit_r2l")
    with pytest.raises(ValueError, match="triple_digit_r2l.*group"):
        encoders.get("triple_digit_r2l", group=4)


texts = st.builds(
    lambda sign, integer, fraction: sign + integer + ("." + fraction if fraction is not None else ""),
    st.sampled_from(["", "-"]),
    st.text("0123456789", max_size=30),
    st.none() | st.text("0123456789", min_size=1, max_size=30),
).filter(lambda t: t.strip("-"))


@settings(max_examples=1000, deadline=None)
@given(texts, st.sampled_from([2, 3]))
def test_every_plain_decimal_is_cut_as_the_oracle_cuts_and_round_trips(text, size):
    codec = encoders.get("triple_digit_r2l", group=size)
    pieces = codec.number_tokens(text)
    assert pieces == oracle_pieces(text, size) and codec.number_text(pieces) == text


def test_values_round_trip_bit_exact_including_tiny_and_huge():
    rng = random.Random(1)
    xs = [struct.unpack(">d", struct.pack(">Q", rng.getrandbits(64)))[0] for _ in range(300)]
    xs = [x for x in xs if math.isfinite(x)] + [0.0, -0.0, 5e-324, 1e300, -1.5, 0.1]
    back = CODEC.decode(CODEC.encode(torch.tensor(xs, dtype=torch.float64)))
    assert [struct.pack(">d", v) for v in back.tolist()] == [struct.pack(">d", v) for v in xs]
    zoo_checks.refuses(CODEC, math.nan, "cannot encode", "finite")


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("triple_digit_r2l", tmp_path, pieces_of=oracle_pieces, value_of=oracle_value)
    assert read >= 8  # most of the 16 answers are numbers the oracle reads
    zoo_checks.runs_by_name("triple_digit_r2l", tmp_path, monkeypatch)
