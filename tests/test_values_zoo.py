"""The zoo at the edges of its options and statistics (issue 40): Abacus' offsets up to and
including max_offset, log-scaled xVal's z-score of a batch against every target seen including
that batch, the place-value and scientific tokens at their option's last place and exponent, and
perplexity's numeric/text split where a number is the first target, the last one or the first
token of a window, against a token-by-token oracle."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from workbench import encoders
from workbench.measures.perplexity import perplexity
from workbench.model.gpt import GPT, preset
from workbench.tokenizer import Tokenizer


# -- Abacus: every offset 0 ... max_offset is drawn, and the largest place + offset has a row ---------
@pytest.fixture(scope="module")
def abacus_tok():
    return Tokenizer("abacus")


@pytest.mark.parametrize("max_offset", [1, 3])
def test_abacus_draws_every_offset_up_to_and_including_max_offset(abacus_tok, max_offset):
    """400 samples, one per row, each a number longer than max_places (3): in training each
    sample's digits are shifted by one offset drawn uniformly from 0 ... max_offset, both ends
    included, so the last place (3) shifted by the largest offset uses the table's last row.
    Bugs: the largest offset never drawn (randint's exclusive end), a table one row short."""
    tok = abacus_tok
    torch.manual_seed(0)
    codec = encoders.get("abacus", max_offset=max_offset, max_places=3)
    model = GPT(preset("cpu-tiny"), codec, tok.vocab_size, tok.num_id, tok.piece_ids)
    module = model.token_module
    table = module.embedding.weight
    assert len(table) == 3 + max_offset + 1  # places 1 ... 3, offsets 0 ... max_offset, and 0 for "no digit"
    ids = torch.as_tensor(tok.encode("<|bos|>12345 + 6<|eoq|>")[0])
    rows = 400
    batch, docs = ids.repeat(rows, 1), torch.arange(rows)[:, None].expand(rows, len(ids))
    places = module.places(batch)
    assert places.max() == 3
    module.train()
    added = module.embed(batch, docs)
    shifts = []
    for r in range(rows):
        at = torch.nonzero(places[r]).flatten()
        found = set()
        for t in at.tolist():
            match = [k for k in range(len(table)) if torch.equal(added[r, t], table[k])]
            assert len(match) == 1
            found.add(match[0] - int(places[r, t]))
        assert len(found) == 1  # one offset per sample
        shifts.append(found.pop())
    counts = np.bincount(shifts, minlength=max_offset + 1)
    assert len(counts) == max_offset + 1 and min(shifts) == 0  # nothing beyond max_offset
    expected = rows / (max_offset + 1)
    assert all(abs(c - expected) < 5 * math.sqrt(expected) for c in counts), counts  # every offset, uniformly


# -- log-scaled xVal: a batch is z-scored by the statistics that already include it -------------------
def oracle_s(x: float, scale: float = 6.0) -> float:
    return math.copysign(math.log1p(abs(x)) / math.log(10) / scale, x) if x else 0.0


def test_log_xval_z_scores_each_batch_by_every_target_seen_including_that_batch():
    """The docstring: the head regresses (s - mean) / std, mean and std of every target s seen in
    training steps so far -- this step's targets joined first. With the output 0, the loss of a
    target is z^2. Bug: the batch z-scored before it joins the statistics (the first batch then
    by mean 0 and std 1, every later one by stale statistics). A first batch of one target: its
    z is 0 (mean = s, std taken as 1 for fewer than two targets)."""
    torch.manual_seed(0)
    codec = encoders.get("log_xval")
    head = codec.number_head(16)
    head.train()
    rng = np.random.default_rng(0)
    batches = [[37.0]] + [list(rng.choice([-1, 1], 6) * 10.0 ** rng.uniform(-3, 8, 6)) for _ in range(4)]
    seen = []
    for batch in batches:
        seen += [oracle_s(x) for x in batch]
        mean, sd = np.mean(seen), (np.std(seen) if len(seen) > 1 else 1.0)
        wanted = [((oracle_s(x) - mean) / sd) ** 2 for x in batch]
        out = torch.zeros(len(batch), requires_grad=True)
        got = head.loss(out, torch.tensor(batch, dtype=torch.float64))
        assert got.tolist() == pytest.approx(wanted, rel=1e-5, abs=1e-7)
    assert head.count.item() == len(seen)


# -- place value and scientific: the option's last place and exponent are tokens ----------------------
@pytest.mark.parametrize(
    "text, ok", [("999", True), ("-0.01", True), ("909.09", True), ("1000", False), ("0.001", False)]
)
def test_place_value_takes_the_places_max_place_and_min_place_themselves(text, ok):
    """max_place 2, min_place -2: 10^2 and 10^-2 are places of the vocabulary, 10^3 and 10^-3 are
    refused. Bugs: >= for > at either end; the last place's pieces missing from the vocabulary."""
    codec = encoders.get("place_value", max_place=2, min_place=-2)
    if not ok:
        with pytest.raises(ValueError, match="beyond max_place"):
            codec.number_tokens(text)
        return
    pieces = codec.number_tokens(text)
    assert set(pieces) <= set(codec.pieces)
    assert codec.number_text(pieces) == text
    assert len(codec.pieces) == 2 + 10 * 5  # "-", "." and ten digits at each of the places 2 ... -2


@pytest.mark.parametrize(
    "text, ok",
    [("9990", True), ("1000", True), ("0.001", True), ("-0.00999", True), ("10000", False), ("0.0009", False)],
)
def test_scientific_takes_the_exponents_plus_and_minus_max_exponent(text, ok):
    """max_exponent 3: <e+3> and <e-3> are tokens, 10^4 and 10^-4 are refused. Bugs: the range of
    exponent tokens one short at either end; >= for >."""
    codec = encoders.get("scientific", max_exponent=3)
    if not ok:
        with pytest.raises(ValueError, match="beyond the exponent tokens"):
            codec.number_tokens(text)
        return
    pieces = codec.number_tokens(text)
    assert set(pieces) <= set(codec.pieces)
    assert float(codec.number_text(pieces)) == float(text)
    assert len(codec.exponents) == 2 * 3 + 1


# -- perplexity: numeric and text targets, where a number is at either end of a window ---------------
@pytest.fixture(scope="module")
def ppl_toks():
    return {name: Tokenizer(name) for name in ("single_digit", "fone", "xval")}


def random_model(tok):
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), tok.encoding, tok.vocab_size, tok.num_id)
    for p in model.parameters():  # random everywhere, so each target's CE is its own
        if p.ndim == 2:
            torch.nn.init.normal_(p, std=0.3)
    return model


def oracle_split(model, tok, texts, context):
    """(CEs of numeric targets, CEs of text targets) of each "<|bos|>text<|eos|>": every target
    t >= 1 predicted from its window's tokens alone (window k holds tokens k*context ... (k+1)*context,
    one window per forward pass, positions from 0, nothing packed beside it). Numeric: the target is
    <|num|> or a number piece, or a text "-" token right before one (workbench.measures.perplexity's rule)."""

    def is_number(i):
        return i == tok.num_id or len(tok.special_tokens) <= i < tok.offset

    numeric, text = [], []
    for t_ in texts:
        ids, values, _ = tok.text_sample(t_)
        for start in range(0, len(ids) - 1, context):
            i = torch.as_tensor(ids[start : start + context])[None]
            v = torch.as_tensor(values[start : start + context])[None]
            with torch.no_grad():
                logits = model.logits(i, v, torch.arange(i.shape[1])[None], torch.zeros_like(i))
            for j in range(i.shape[1]):
                t = start + j + 1  # the target
                if t >= len(ids):
                    break
                ce = F.cross_entropy(logits[0, j : j + 1].double(), torch.as_tensor(ids[t : t + 1])).item()
                after = int(ids[t + 1]) if t + 1 < len(ids) else -1
                sign = ids[t] >= tok.offset and tok.decode([ids[t]]) == "-" and is_number(after)
                (numeric if is_number(int(ids[t])) or sign else text).append(ce)
    return numeric, text


EDGE_TEXTS = ["12 apples", "-3 is cold", "7", "pay 4", "x 5 y 66 z 0.5", "a-1"]


@pytest.mark.parametrize("name", ["single_digit", "fone", "xval"])
@pytest.mark.parametrize("context", [1, 2, 3])
def test_perplexity_splits_numeric_and_text_targets_at_the_ends_of_every_window(ppl_toks, name, context):
    """Texts that start or end with a number (the first target after <|bos|> is a number, the
    last one before <|eos|> follows one), contexts of 1 to 3 targets, so windows start and end at
    numbers. Bugs: the numeric mask read at the input token instead of the target; a window's
    first token counted as a target, or the first target of a sample dropped."""
    tok = ppl_toks[name]
    model = random_model(tok)
    numeric, text = oracle_split(model, tok, EDGE_TEXTS, context)
    got = perplexity(model, tok, EDGE_TEXTS, rows=3, context=context, progress=False)
    assert (got["tokens"], got["text_tokens"], got["numeric_tokens"]) == (
        len(numeric) + len(text),
        len(text),
        len(numeric),
    )
    assert got["ce_all"] == pytest.approx(np.mean(numeric + text), rel=1e-6)
    assert got["ce_text"] == pytest.approx(np.mean(text), rel=1e-6)
