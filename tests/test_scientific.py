"""Scientific-notation tokens: mantissa and exponent against a fractions oracle, round trips,
the exponent range, bad input, and a tiny training run whose answers decode."""

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

CODEC = encoders.get("scientific")


def order_of(q: Fraction) -> int:
    """e with 10^e <= q < 10^(e+1), by exact comparison."""
    e = 0
    while q >= 10:
        q, e = q / 10, e + 1
    while q < 1:
        q, e = q * 10, e - 1
    return e


def oracle_pieces(text):
    sign = ["-"] if text.startswith("-") else []
    q = abs(Fraction(text))
    if q == 0:
        return sign + ["0", "<e+0>"]
    significant = text.lstrip("-").replace(".", "").lstrip("0").rstrip("0")
    return sign + list(significant) + [f"<e{order_of(q):+d}>"]


def oracle_value(pieces):
    """d1.d2... x 10^e of one sign? digits+ <e..> group; None for anything else."""
    sign = -1 if pieces[:1] == ["-"] else 1
    body = pieces[1:] if sign < 0 else pieces
    if len(body) < 2 or not body[-1].startswith("<e") or not all(p in "0123456789" and len(p) == 1 for p in body[:-1]):
        return None
    exponent = int(body[-1][2:-1])
    value = Fraction(int("".join(body[:-1]))) * Fraction(10) ** (exponent - len(body) + 2)
    return float(sign * value) if value or sign > 0 else -0.0


@pytest.mark.parametrize(
    "text,pieces",
    [
        ("314.1", ["3", "1", "4", "1", "<e+2>"]),
        ("-0.0015", ["-", "1", "5", "<e-3>"]),
        ("1200", ["1", "2", "<e+3>"]),
        ("0", ["0", "<e+0>"]),
        ("-0", ["-", "0", "<e+0>"]),
        (".5", ["5", "<e-1>"]),
    ],
)
def test_hand_written_pieces(text, pieces):
    assert CODEC.number_tokens(text) == pieces == oracle_pieces(text)
    assert float(CODEC.number_text(pieces)) == float(text) == oracle_value(pieces)


texts = st.builds(
    lambda sign, integer, fraction: sign + integer + ("." + fraction if fraction is not None else ""),
    st.sampled_from(["", "-"]),
    st.text("0123456789", max_size=15),
    st.none() | st.text("0123456789", min_size=1, max_size=15),
).filter(lambda t: t.strip("-"))


@settings(max_examples=1000, deadline=None)
@given(texts)
def test_pieces_and_values_match_the_oracle(text):
    pieces = CODEC.number_tokens(text)
    assert pieces == oracle_pieces(text)
    assert Fraction(CODEC.number_text(pieces)) == Fraction(text)  # the exact value, zeros aside


def test_values_round_trip_bit_exact_within_the_exponent_range():
    rng = random.Random(2)
    xs = [
        rng.choice([-1, 1]) * float(f"{rng.randint(1, 9)}.{rng.randint(0, 10**16)}e{rng.randint(-30, 30)}")
        for _ in range(500)
    ] + [0.0, -0.0, 1e-30, 9.999999999999999e30, 0.1, 123.456]
    back = CODEC.decode(CODEC.encode(torch.tensor(xs, dtype=torch.float64)))
    assert [struct.pack(">d", v) for v in back.tolist()] == [struct.pack(">d", v) for v in xs]


def test_a_number_beyond_the_exponent_tokens_is_a_clear_error():
    for value in (1e31, -1e-31, 5e-324, 1e300):
        zoo_checks.refuses(CODEC, value, "max_exponent", "10^")
    zoo_checks.refuses(CODEC, math.nan, "cannot encode", "finite")
    assert (
        float(
            encoders.get("scientific", max_exponent=400).number_text(
                encoders.get("scientific", max_exponent=400).number_tokens("1" + "0" * 350)
            )
        )
        == 1e350
    )
    zoo_checks.bad_options("scientific")
    with pytest.raises(ValueError, match="scientific.*max_exponent"):
        encoders.get("scientific", max_exponent=-1)


def test_text_the_model_writes_badly_never_reads_as_another_number(tmp_path):
    assert CODEC.number_text(["1", "2"]) == "12"  # no exponent: the digits as written
    assert CODEC.number_text(["<e+2>"]) == "<e+2>" and CODEC.number_text(["-", "<e+1>"]) == "-<e+1>"
    tok = Tokenizer("scientific", cache_dir=tmp_path)
    text = "between 0.001 and -2500, say 12.50"
    assert tok.decode(tok.encode(text)[0]) == "between 0.001 and -2500, say 12.5"


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("scientific", tmp_path, pieces_of=oracle_pieces, value_of=oracle_value)
    assert read >= 8  # most of the 16 answers are numbers the oracle reads
    zoo_checks.runs_by_name("scientific", tmp_path, monkeypatch)


@pytest.mark.parametrize(
    "text, number, back",
    [("1,000,000", "000", "0"), ("x 007", "007", "7"), ("-00 and 1.50", "-00", "-0"), ("1.2.3", ".3", "0.3")],
)
def test_written_forms_it_cannot_keep_are_an_error_not_other_text(text, number, back):
    """Bug: encode(forms=True) promises the text back exactly, but "1,000,000" came back as "1,0,0"."""
    tok = Tokenizer("scientific")
    with pytest.raises(
        ValueError,
        match=rf"scientific keeps a number's value, not its written form: "
        rf"'{number}' would come back as '{back}'",
    ):
        tok.encode(text, forms=True)
    tok.encode(text)  # without forms: the values, as the module says
    ids, values, forms = tok.encode("plain 12 and 3.25, -4", forms=True)
    assert tok.decode(ids, values, forms) == "plain 12 and 3.25, -4"
