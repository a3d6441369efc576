"""Decoding-based regression against the source's tokenizer: the tokens RegressLM's own
`IEEEFloatTokenizer.to_tokens` gives, recorded here, for numbers it represents exactly; exact round
trips where the source rounds; numbers next to each other; bad input; a tiny training run.

The recorded tokens: google-deepmind/regress-lm at f85730d, `regress_lm/tokenizers.py` run alone
(numpy 2, ordered-set) in a scratch venv: IEEEFloatTokenizer(base=10, num_exponent_digits=E,
num_mantissa_digits=M).to_tokens(x), joined, for (E, M) = (1, 4), the source's default, and (2, 6)."""

import random
from decimal import Decimal

import pytest
import zoo_checks

from workbench import encoders
from workbench.numbers import render
from workbench.tokenizer import Tokenizer

SOURCE = {  # x: (tokens with E=1, M=4; tokens with E=2, M=6)
    123.4: ("<+><+><2><1><2><3><4>", "<+><+><0><2><1><2><3><4><0><0>"),
    12340.0: ("<+><+><4><1><2><3><4>", "<+><+><0><4><1><2><3><4><0><0>"),
    0.1234: ("<+><-><1><1><2><3><4>", "<+><-><0><1><1><2><3><4><0><0>"),
    -123.4: ("<-><+><2><1><2><3><4>", "<-><+><0><2><1><2><3><4><0><0>"),
    -0.1234: ("<-><-><1><1><2><3><4>", "<-><-><0><1><1><2><3><4><0><0>"),
    1.234e-9: ("<+><-><9><1><2><3><4>", "<+><-><0><9><1><2><3><4><0><0>"),
    1.2e9: ("<+><+><9><1><2><0><0>", "<+><+><0><9><1><2><0><0><0><0>"),
    0.0: ("<+><+><0><0><0><0><0>", "<+><+><0><0><0><0><0><0><0><0>"),
    1.0: ("<+><+><0><1><0><0><0>", "<+><+><0><0><1><0><0><0><0><0>"),
    10.0: ("<+><+><1><1><0><0><0>", "<+><+><0><1><1><0><0><0><0><0>"),
    100.0: ("<+><+><2><1><0><0><0>", "<+><+><0><2><1><0><0><0><0><0>"),
    0.1: ("<+><-><1><1><0><0><0>", "<+><-><0><1><1><0><0><0><0><0>"),
    0.01: ("<+><-><2><1><0><0><0>", "<+><-><0><2><1><0><0><0><0><0>"),
    -1000.0: ("<-><+><3><1><0><0><0>", "<-><+><0><3><1><0><0><0><0><0>"),
    5.0: ("<+><+><0><5><0><0><0>", "<+><+><0><0><5><0><0><0><0><0>"),
    7.25: ("<+><+><0><7><2><5><0>", "<+><+><0><0><7><2><5><0><0><0>"),
    -0.05: ("<-><-><2><5><0><0><0>", "<-><-><0><2><5><0><0><0><0><0>"),
    99.99: ("<+><+><1><9><9><9><9>", "<+><+><0><1><9><9><9><9><0><0>"),
    3e-05: ("<+><-><5><3><0><0><0>", "<+><-><0><5><3><0><0><0><0><0>"),
    4096.0: ("<+><+><3><4><0><9><6>", "<+><+><0><3><4><0><9><6><0><0>"),
    0.5: ("<+><-><1><5><0><0><0>", "<+><-><0><1><5><0><0><0><0><0>"),
    2.5e7: ("<+><+><7><2><5><0><0>", "<+><+><0><7><2><5><0><0><0><0>"),
}


def tokens(codec, x):
    return "".join(codec.number_tokens(render(x, 17)))


@pytest.mark.parametrize("x", list(SOURCE))
def test_the_tokens_are_the_sources(x):
    fixed14 = encoders.get("decoding_regression", exponent_digits=1, mantissa_digits=4)
    fixed26 = encoders.get("decoding_regression", exponent_digits=2, mantissa_digits=6)
    assert (tokens(fixed14, x), tokens(fixed26, x)) == SOURCE[x]
    # ours by default: 2 exponent digits, the number's own significant digits (the source's with M = that count)
    mantissa = SOURCE[x][1][12:]  # after <sign><exponent sign><e1><e2>
    significant = len("".join(mantissa[i + 1] for i in range(0, len(mantissa), 3)).rstrip("0")) or 1
    assert tokens(encoders.get("decoding_regression"), x) == SOURCE[x][1][: 12 + 3 * significant]
    for codec in (fixed14, fixed26, encoders.get("decoding_regression")):
        pieces = codec.number_tokens(render(x, 17))
        assert codec.number_text(pieces) == render(x, 17)  # exactly (the source reads 0.1234 as 0.12340000000000001)


def test_exact_round_trips_where_the_source_rounds():
    codec = encoders.get("decoding_regression")
    rng = random.Random(0)
    for _ in range(3000):
        x = rng.choice([-1, 1]) * rng.randint(0, 10 ** rng.randint(1, 17)) * 10.0 ** rng.randint(-30, 15)
        text = render(x, 17)
        pieces = codec.number_tokens(text)
        assert Decimal(codec.number_text(pieces)) == Decimal(text), text
        digits = Decimal(text).normalize().as_tuple().digits if x else (0,)
        assert len(pieces) == 2 + 2 + len(digits), text
    with pytest.raises(ValueError, match="significant digits, more than mantissa_digits=4"):
        encoders.get("decoding_regression", mantissa_digits=4).number_tokens("12345")  # the source writes 1234e1
    with pytest.raises(ValueError, match="beyond 1 exponent digit"):
        encoders.get("decoding_regression", exponent_digits=1).number_tokens("0.0000000001")
    assert (
        codec.number_tokens("-0") == ["<->", "<+>", "<0>", "<0>", "<0>"]
        and codec.number_text(codec.number_tokens("-0")) == "-0"
    )
    assert codec.number_text(codec.number_tokens("1.50")) == "1.5"  # the value, not the written form


def test_numbers_next_to_each_other_and_malformed_pieces():
    codec = encoders.get("decoding_regression")
    tok = Tokenizer(codec)
    for text in ("1.2.3", "3-4", "x=-12.5, y=0.001 and 79228162514264337593543950336"):
        ids, values = tok.encode(text)
        assert tok.decode(ids, values) == text.replace("1.2.3", "1.20.3")  # "1.2" and ".3" are 1.2 and 0.3
    assert codec.number_text(["<+>", "<+>", "<0>"]) == "<+><+><0>"  # no mantissa: written as it is
    assert (
        codec.number_text(["<+>", "<+>", "<0>", "<1>", "<5>", "<->", "<+>", "<0>", "<0>", "<2>"]) == "50-2"
    )  # 5 x 10^1, then -2


def test_bad_input():
    zoo_checks.bad_options("decoding_regression")
    for bad in ({"exponent_digits": 0}, {"exponent_digits": 4}, {"mantissa_digits": -1}, {"mantissa_digits": 1.5}):
        with pytest.raises(ValueError, match="decoding_regression"):
            encoders.get("decoding_regression", **bad)
    zoo_checks.refuses(encoders.get("decoding_regression"), float("nan"), "cannot encode", "finite")


def value_of(pieces):
    text = encoders.get("decoding_regression").number_text(pieces)
    try:
        return float(text) if "<" not in text else None
    except ValueError:
        return None


def test_tiny_training(tmp_path, monkeypatch):
    codec = encoders.get("decoding_regression")
    zoo_checks.tiny_training(
        "decoding_regression", tmp_path, pieces_of=lambda text: codec.number_tokens(text), value_of=value_of
    )
    zoo_checks.runs_by_name("decoding_regression", tmp_path, monkeypatch)
