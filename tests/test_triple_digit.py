"""Triple-digit pieces: the authors' tokenizer (pieces "0"-"999", leftmost-longest matching) by
default, the earlier zero-padded groups of three as an option. The oracle for the default is HF
`tokenizers` itself, matching added tokens on an empty BPE as the authors' tokenizer does."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models

from workbench import encoders
from workbench.tokenizer import Tokenizer as WorkbenchTokenizer

AUTHORS = encoders.get("triple_digit")
ZERO_PIECES = encoders.get("triple_digit", zero_pieces=True)


@pytest.fixture(scope="module")
def hf_oracle():
    tok = Tokenizer(models.BPE())
    tok.add_tokens(["-", "."] + [str(n) for n in range(1000)])
    return lambda text: tok.encode(text).tokens


def test_options_and_vocabulary():
    assert encoders.options("triple_digit") == {"zero_pieces": False}
    assert AUTHORS.vocabulary() == ["-", "."] + [str(n) for n in range(1000)]
    assert not any(p.startswith("0") and len(p) > 1 for p in AUTHORS.vocabulary())
    assert {"007", "00", "000"} <= set(ZERO_PIECES.vocabulary()) and len(ZERO_PIECES.vocabulary()) == 1112
    with pytest.raises(ValueError, match="zero_pieces"):
        encoders.get("triple_digit", zero_pieces="yes")


@pytest.mark.parametrize(
    "text,authors,zero_pieces",
    [
        ("1007", ["100", "7"], ["100", "7"]),
        ("007", ["0", "0", "7"], ["007"]),
        ("1000000", ["100", "0", "0", "0", "0"], ["100", "000", "0"]),
        ("0.007", ["0", ".", "0", "0", "7"], ["0", ".", "007"]),
        ("0.0070", ["0", ".", "0", "0", "70"], ["0", ".", "007", "0"]),
        ("-12345.5", ["-", "123", "45", ".", "5"], ["-", "123", "45", ".", "5"]),
        ("10050", ["100", "50"], ["100", "50"]),
        ("-.5", ["-", ".", "5"], ["-", ".", "5"]),
        ("0", ["0"], ["0"]),
    ],
)
def test_hand_written_cuts(text, authors, zero_pieces, hf_oracle):
    assert AUTHORS.number_tokens(text) == authors == hf_oracle(text)
    assert ZERO_PIECES.number_tokens(text) == zero_pieces
    for codec in (AUTHORS, ZERO_PIECES):
        assert codec.number_text(codec.number_tokens(text)) == text


plain_decimals = st.builds(
    lambda sign, integer, fraction: sign + integer + ("." + fraction if fraction is not None else ""),
    st.sampled_from(["", "-"]),
    st.text("0123456789", min_size=1, max_size=40),
    st.none() | st.text("0123456789", min_size=1, max_size=40),
)
zero_heavy = st.text("0001", min_size=1, max_size=30)  # many zeros, leading ones included


@settings(max_examples=2000, deadline=None)
@given(st.one_of(plain_decimals, zero_heavy, zero_heavy.map(lambda t: "0." + t)))
def test_every_plain_decimal_round_trips_and_matches_the_hf_tokenizer(hf_oracle, text):
    pieces = AUTHORS.number_tokens(text)
    assert AUTHORS.number_text(pieces) == text and pieces == hf_oracle(text)
    assert set(pieces) <= set(AUTHORS.vocabulary())
    old = ZERO_PIECES.number_tokens(text)
    assert ZERO_PIECES.number_text(old) == text and set(old) <= set(ZERO_PIECES.vocabulary())
    assert len(old) <= len(pieces)  # zero-padded pieces never need more tokens


def test_the_workbench_tokenizer_writes_and_reads_the_authors_pieces(tmp_path):
    tok = WorkbenchTokenizer("triple_digit", cache_dir=tmp_path)
    text = "x 007 and 1000000 and -0.0070"
    ids, values = tok.encode(text)
    assert [tok.tokens[i] for i in ids if i < tok.offset] == [
        "0",
        "0",
        "7",
        "100",
        "0",
        "0",
        "0",
        "0",
        "-",
        "0",
        ".",
        "0",
        "0",
        "70",
    ]
    assert tok.decode(ids, values) == text and not values.any()
