"""Perplexity (Table 4's "all" and "text only") against a token-by-token oracle, the numeric-token
mask on hand-made text, a uniform model, and the text task's scaled-perplexity score."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from workbench import tasks
from workbench.measures.perplexity import numeric_targets, perplexity, text_score
from workbench.model.gpt import GPT, preset
from workbench.tokenizer import Tokenizer

HAND_MADE = "Pay -12 dollars, 3.5 more-or-less - 7 and x-1e5 (-4)"


@pytest.fixture(scope="module")
def toks():
    return {name: Tokenizer(name) for name in ("single_digit", "fone", "xval", "bittokens")}


def tiny(tok):
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), tok.encoding, tok.vocab_size, tok.num_id)
    for p in model.parameters():  # random everywhere: the zero-initialised projections would hide cross-talk
        if p.ndim == 2:
            torch.nn.init.normal_(p, std=0.3)
    return model


def numeric_texts(tok, text):
    """What each numeric token of `text` says (a <|num|> as its value)."""
    ids, values = tok.encode(text)
    return [tok.decode([i], [v]) for i, v, n in zip(ids, values, numeric_targets(tok, ids)) if n]


def test_numeric_mask_on_hand_made_text(toks):
    # digit encoding (signed): every number piece, its sign piece, and the text "-" of "x-1" before a digit;
    # never the hyphens of "more-or-less" nor the " -" before a space
    assert numeric_texts(toks["single_digit"], HAND_MADE) == [
        "-",
        "1",
        "2",
        "3",
        ".",
        "5",
        "7",
        "-",
        "1",
        "5",
        "-",
        "4",
    ]
    # single-token encoding that leaves the sign to text (FoNE): <|num|> tokens and a "-" token right
    # before one; " -" (merged with the space before it) is not the token "-", as in the authors' rule
    assert numeric_texts(toks["fone"], HAND_MADE) == ["12", "3.5", "7", "-", "1", "5", "-", "4"]
    # signed single-token encoding: the sign is inside the number
    assert numeric_texts(toks["xval"], HAND_MADE) == ["-12", "3.5", "7", "-", "1", "5", "-4"]


def oracle(model, tok, texts, context):
    """Token by token: each target predicted from its window's tokens alone (one forward pass per
    target, nothing else in the batch), F.cross_entropy; per sample: (CEs of all, CEs of text-only)."""
    per_sample = []
    for text in texts:
        ids, values, _ = tok.text_sample(text)
        all_ce, text_ce = [], []
        per_sample.append((all_ce, text_ce))
        for t in range(1, len(ids)):
            start = (t - 1) // context * context
            i, v = torch.as_tensor(ids[start:t])[None], torch.as_tensor(values[start:t])[None]
            logits = model.logits(i, v, torch.arange(t - start)[None], torch.zeros_like(i))
            ce = F.cross_entropy(logits[0, -1:].double(), torch.as_tensor(ids[t : t + 1])).item()
            all_ce.append(ce)
            is_number = ids[t] == tok.num_id or len(tok.special_tokens) <= ids[t] < tok.offset
            after = ids[t + 1] if t + 1 < len(ids) else -1
            is_sign = (
                tok.decode([ids[t]]) == "-"
                and ids[t] >= tok.offset
                and (after == tok.num_id or len(tok.special_tokens) <= after < tok.offset)
            )
            if not (is_number or is_sign):
                text_ce.append(ce)
    return per_sample


def pooled(per_sample, which):
    values = [ce for sample in per_sample for ce in sample[which]]
    return float(np.mean(values)), len(values)


@pytest.mark.parametrize("name", ["single_digit", "bittokens"])
def test_perplexity_matches_the_token_by_token_oracle(toks, name):
    tok = toks[name]
    model = tiny(tok)
    texts = [HAND_MADE, "Version 3.11 shipped 7 new modules.", "a", "x = -2.5e3 - 4 and 10% of 12,000"]
    context = 12  # shorter than most samples: windows, several per row, padding
    per_sample = oracle(model, tok, texts, context)
    (ce_all, n_all), (ce_text, n_text) = pooled(per_sample, 0), pooled(per_sample, 1)
    got = perplexity(model, tok, texts, rows=3, context=context, progress=False)
    assert got["tokens"] == n_all and got["text_tokens"] == n_text and got["numeric_tokens"] == n_all - n_text > 0
    assert got["ce_all"] == pytest.approx(ce_all, rel=1e-5) and got["ppl_all"] == pytest.approx(
        math.exp(ce_all), rel=1e-5
    )
    assert got["ce_text"] == pytest.approx(ce_text, rel=1e-5) and got["ppl_text"] == pytest.approx(
        math.exp(ce_text), rel=1e-5
    )
    # the pooled value does not depend on batching; the authors' mean of per-batch exp does
    one_batch = perplexity(model, tok, texts, rows=1000, context=context, progress=False)
    assert one_batch["ppl_all"] == pytest.approx(got["ppl_all"], rel=1e-6)
    assert one_batch["ppl_all_batch_mean"] == pytest.approx(one_batch["ppl_all"], rel=1e-6)
    assert model.training  # the mode it came in


def test_the_authors_variant_averages_exp_of_each_batch_mean(toks):
    tok = toks["bittokens"]
    model = tiny(tok)
    texts = [HAND_MADE, "Version 3.11 shipped 7 new modules to 12 users.", "x = -2.5e3 - 4 and 10% of 12,000"]
    lengths = [len(tok.text_sample(t)[0]) for t in texts]
    context = max(lengths) - 1
    assert 2 * min(lengths) > context + 1  # one sample per row, one row per batch
    per_sample = oracle(model, tok, texts, context)
    got = perplexity(model, tok, texts, rows=1, context=context, progress=False)
    expected = np.mean([math.exp(np.mean(all_ce)) for all_ce, _ in per_sample])
    assert got["ppl_all_batch_mean"] == pytest.approx(expected, rel=1e-5)
    assert got["ppl_all_batch_mean"] != pytest.approx(got["ppl_all"], rel=1e-3)


def test_windows_leave_no_target_out_and_count_none_twice(toks):
    tok = toks["bittokens"]
    texts = list(tasks.generate("text", 6, seed=0, split="val")["answer"])
    model = tiny(tok)
    short = perplexity(model, tok, texts, rows=2, context=16, progress=False)
    expected = sum(len(tok.text_sample(t)[0]) - 1 for t in texts)
    assert short["tokens"] == expected and short["samples"] == 6


def test_a_uniform_model_has_the_vocabulary_size_as_perplexity(toks):
    tok = toks["single_digit"]
    model = tiny(tok)
    torch.nn.init.zeros_(model.lm_head.weight)  # every logit 0: p = 1 / V for every token
    got = perplexity(model, tok, [HAND_MADE, "plain words only"], rows=2, progress=False)
    assert got["ppl_all"] == pytest.approx(tok.vocab_size, rel=1e-12)
    assert got["ppl_text"] == pytest.approx(tok.vocab_size, rel=1e-12)
    assert got["ppl_all_batch_mean"] == pytest.approx(tok.vocab_size, rel=1e-12)


def test_bad_input_is_refused(toks):
    tok = toks["bittokens"]
    model = tiny(tok)
    for texts in ([], ["ok", 3]):
        with pytest.raises(ValueError, match="non-empty list of text"):
            perplexity(model, tok, texts, progress=False)
    with pytest.raises(ValueError, match="rows and context"):
        perplexity(model, tok, ["ok"], rows=0, progress=False)


def test_text_score_is_the_authors_scaled_perplexity():
    # min(1, exp((40 - ppl) / 100)), research notes A/H: 1 up to perplexity 40, then e^-1 per 100
    assert text_score(1.0) == text_score(40.0) == 1.0
    assert text_score(140.0) == pytest.approx(0.36787944117144233, rel=1e-15)
    assert text_score(90.0) == pytest.approx(0.6065306597126334, rel=1e-15)
    assert text_score(math.inf) == 0.0 and math.isnan(text_score(math.nan))
    assert text_score(120.0, best=20.0) == pytest.approx(0.36787944117144233)  # solo text (scaled_ppl_hard)
    with pytest.raises(ValueError, match="scale"):
        text_score(50.0, scale=0)


@pytest.mark.parametrize("name", ["single_digit", "triple_digit", "fone"])
def test_numeric_mask_at_the_vocabulary_boundaries(name):
    """Each id alone (no sign rule) around both boundaries of the number pieces: numeric exactly
    when it is <|num|> or one of the encoding's own pieces, by name (the oracle), never the last
    special token nor the first text token."""
    tok = Tokenizer(name)
    pieces = set(tok.encoding.vocabulary()) if not tok.encoding.single_token else set()
    first, last = len(tok.special_tokens), tok.offset
    ids = sorted({*range(max(0, first - 3), first + 3), *range(last - 3, last + 3), tok.num_id})
    for i in ids:
        expected = i == tok.num_id or (i < len(tok.tokens) and tok.tokens[i] in pieces)
        assert bool(numeric_targets(tok, np.array([i]))[0]) == expected, (name, i)
    assert any(tok.tokens[i] in pieces for i in ids if i < len(tok.tokens)) or not pieces
