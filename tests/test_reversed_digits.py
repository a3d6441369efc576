"""Reversed digits: the pieces against a place-value oracle (fractions), exact round trips (struct),
numbers written next to each other, bad input, and a tiny training run whose answers decode."""

import math
import random
import struct
from fractions import Fraction

import pytest
import torch
import zoo_checks
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import encoders
from workbench.tokenizer import Tokenizer

CODEC = encoders.get("reversed_digits")


def oracle_value(pieces):
    """The value of one number's reversed pieces by place value: in "F.I" reversed order the j-th
    digit after the point is 10^j, the j-th before it 10^-(len(F)-j); None if not one number."""
    sign = -1 if pieces[:1] == ["-"] else 1
    body = pieces[1:] if sign < 0 else pieces
    if body.count(".") > 1 or not body or not all(p in "0123456789." and len(p) == 1 for p in body):
        return None
    if body[0] == ".":  # ".25" is written ". 5 2"
        fraction = body[1:]
        integer = []
    elif "." in body:
        cut = body.index(".")
        fraction, integer = body[:cut][::-1], body[cut + 1 :]
    else:
        fraction, integer = [], body
    if not integer and not fraction or "." in integer + fraction or (body[-1] == "." and body[0] != "."):
        return None
    if body[0] == ".":
        fraction = fraction[::-1]
    value = sum(Fraction(int(d)) * 10**j for j, d in enumerate(integer))
    value += sum(Fraction(int(d), 10 ** (len(fraction) - j)) for j, d in enumerate(fraction[::-1]))
    return float(sign * value) if value or sign > 0 else -0.0


def oracle_pieces(text):
    """The digits sorted by place, lowest first, the point between places 0 and -1; a number
    without integer digits keeps its point in front."""
    sign = ["-"] if text.startswith("-") else []
    integer, point, fraction = text.lstrip("-").partition(".")
    placed = [(len(integer) - 1 - k, d) for k, d in enumerate(integer)] + [(-1 - k, d) for k, d in enumerate(fraction)]
    if point and integer:
        placed.append((-0.5, "."))
    digits = [d for _, d in sorted(placed, key=lambda pd: pd[0])]
    return sign + ([point] if point and not integer else []) + digits


@pytest.mark.parametrize(
    "text,pieces",
    [
        ("1234", ["4", "3", "2", "1"]),
        ("-12.5", ["-", "5", ".", "2", "1"]),
        (".25", [".", "5", "2"]),
        ("0.5", ["5", ".", "0"]),
        ("-0", ["-", "0"]),
        ("100", ["0", "0", "1"]),
        ("007", ["7", "0", "0"]),
    ],
)
def test_hand_written_pieces(text, pieces):
    assert CODEC.number_tokens(text) == pieces == oracle_pieces(text) and CODEC.number_text(pieces) == text
    assert oracle_value(pieces) == float(text)


texts = st.builds(
    lambda sign, integer, fraction: sign + integer + ("." + fraction if fraction is not None else ""),
    st.sampled_from(["", "-"]),
    st.text("0123456789", max_size=25),
    st.none() | st.text("0123456789", min_size=1, max_size=25),
).filter(lambda t: t.strip("-"))


@settings(max_examples=1000, deadline=None)
@given(texts)
def test_every_plain_decimal_round_trips_and_means_its_value(text):
    pieces = CODEC.number_tokens(text)
    assert pieces == oracle_pieces(text) and CODEC.number_text(pieces) == text
    assert Fraction(oracle_value(pieces)) == Fraction(float(text)) or oracle_value(pieces) == float(text)


def test_values_round_trip_bit_exact_including_tiny_and_huge():
    rng = random.Random(0)
    xs = [struct.unpack(">d", struct.pack(">Q", rng.getrandbits(64)))[0] for _ in range(300)]
    xs = [x for x in xs if math.isfinite(x)] + [0.0, -0.0, 5e-324, 1e300, -1.5, 0.1, 123456789012345680.0]
    back = CODEC.decode(CODEC.encode(torch.tensor(xs, dtype=torch.float64)))
    assert [struct.pack(">d", v) for v in back.tolist()] == [struct.pack(">d", v) for v in xs]


def test_numbers_next_to_each_other_stay_apart(tmp_path):
    tok = Tokenizer("reversed_digits", cache_dir=tmp_path)
    text = "version 1.2.3.45, address 127.0.0.1 and -0.5-3 (x=-.25)"
    ids, _ = tok.encode(text)
    assert tok.decode(ids) == text


def test_bad_input():
    zoo_checks.bad_options("reversed_digits")
    for value in (math.nan, math.inf):
        zoo_checks.refuses(CODEC, value, "cannot encode", "finite")


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("reversed_digits", tmp_path, pieces_of=oracle_pieces, value_of=oracle_value)
    assert read >= 8  # most of the 16 answers are numbers the oracle reads
    zoo_checks.runs_by_name("reversed_digits", tmp_path, monkeypatch)
