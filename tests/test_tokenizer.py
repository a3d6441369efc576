"""Tokenizer: text -> (ids, values) -> text for every scheme; digits never inside BPE tokens."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from workbench import encoders
from workbench.numbers import render
from workbench.tokenizer import SPECIAL_TOKENS, Tokenizer, corpus_text

SCHEMES = ["bittokens", "fone", "xval", "single_digit", "triple_digit"]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    cache = tmp_path_factory.mktemp("tok")
    return {name: Tokenizer(name, cache_dir=cache) for name in SCHEMES}


def test_default_corpus_is_the_stdlib_topics():
    text = corpus_text()
    assert 400_000 < len(text) < 600_000


def test_corpus_files_errors(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        corpus_text([tmp_path / "missing.txt"])
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(ValueError, match="no text"):
        corpus_text([tmp_path / "empty.txt"])


@pytest.mark.parametrize("name", SCHEMES)
def test_round_trip_examples(tokenizers, name):
    tok = tokenizers[name]
    for text in ["What is 3.5 * -2.25?", "<|min|>1.5, 2, -3<|eoq|>-3<|eos|>", "x=-0.001; 1.50 and 5-3.",
                 "<|intva|>0.52: A 0.53 B 0.6 C", "version 3.10 (2024) costs $1,299.99"]:
        ids, values = tok.encode(text)
        assert tok.decode(ids, values) == text


def test_digits_never_merge_into_text_tokens(tokenizers):
    tok = tokenizers["bittokens"]
    merged = [t for t in tok.bpe.get_vocab() if len(t) > 1 and any(ch.isdigit() for ch in t)]
    assert merged == []
    ids, _ = tok.encode("abc123def")  # the digits go through the number scheme, not the BPE
    assert (ids == tok.num_id).sum() == 1


def test_single_token_numbers_carry_float64_values(tokenizers):
    tok = tokenizers["bittokens"]
    ids, values = tok.encode("12.5 * -3")
    nums = ids == tok.num_id
    assert nums.sum() == 2 and list(values[nums]) == [12.5, -3.0]
    fone_ids, fone_values = tokenizers["fone"].encode("12.5 * -3")
    assert list(fone_values[fone_ids == tok.num_id]) == [12.5, 3.0]  # FoNE: the minus stays text


def test_digit_schemes_write_digit_pieces(tokenizers):
    tok = tokenizers["single_digit"]
    ids, values = tok.encode("-12.5")
    assert [tok.tokens[i] for i in ids] == ["-", "1", "2", ".", "5"]
    assert not values.any()
    tri = tokenizers["triple_digit"]
    ids, _ = tri.encode("1234567")
    assert [tri.tokens[i] for i in ids] == ["123", "456", "7"]


def test_sample_masks_the_question(tokenizers):
    tok = tokenizers["bittokens"]
    ids, values, mask = tok.sample("1.5 + 2", "3.5")
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    eoq = int(np.flatnonzero(ids == tok.eoq_id)[0])
    assert not mask[: eoq + 1].any() and mask[eoq + 1:].all()
    assert values[eoq + 1] == 3.5
    ids, _, mask = tok.text_sample("plain text")
    assert not mask[0] and mask[1:].all()


def test_bad_ids_raise(tokenizers):
    tok = tokenizers["bittokens"]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size + 5])


number = st.decimals(min_value=-10**15, max_value=10**15, allow_nan=False, allow_infinity=False,
                     places=None).map(lambda d: render(float(d)))
word = st.sampled_from(["the", " value", " is", ",", " ", "\n", "(", ")", " x=", "*", " - ", "é", "数"])
special = st.sampled_from(SPECIAL_TOKENS[1:])
text = st.lists(st.one_of(number.map(lambda s: " " + s), word, special), max_size=25).map("".join)


@settings(max_examples=60, deadline=None)
@given(text)
def test_round_trip_for_numbers_up_to_15_digits(tokenizers, text):
    for name in SCHEMES:
        tok = tokenizers[name]
        ids, values = tok.encode(text)
        assert tok.decode(ids, values) == text
