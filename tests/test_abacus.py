"""Abacus: each digit's place within its number (hand-counted oracle), the random offset per
sample in training only, generation with the place embeddings equal to a full forward pass, bad
input, and a tiny training run whose answers decode (reversed digits' oracle)."""

import math

import numpy as np
import pytest
import torch
import zoo_checks
from test_reversed_digits import oracle_pieces, oracle_value

from workbench import encoders
from workbench.model.gpt import GPT, preset
from workbench.tokenizer import Tokenizer
from workbench.training.data import pack


@pytest.fixture(scope="module")
def tok():
    return Tokenizer("abacus")


def model_for(tok, **options):
    torch.manual_seed(0)
    return GPT(preset("cpu-tiny"), encoders.get("abacus", **options), tok.vocab_size, tok.num_id, tok.piece_ids)


def hand_places(pieces):
    """1, 2, ... over the digits of each run of pieces, 0 for everything else."""
    out, count = [], 0
    for p in pieces:
        count = count + 1 if p.isdigit() else count if p in "-." else 0
        out.append(count if p.isdigit() else 0)
    return out


def test_places_count_each_numbers_digits_in_the_order_written(tok):
    model = model_for(tok)
    ids, _ = tok.encode("<|bos|>-12.5 + 307 and 4000.25<|eoq|>")
    pieces = [tok.tokens[i] if i < tok.offset else "text" for i in ids]
    assert model.token_module.places(torch.as_tensor(ids)[None])[0].tolist() == hand_places(pieces)
    assert [p for p in pieces if p != "text"][1:6] == ["-", "5", ".", "2", "1"]  # reversed, as the paper
    assert encoders.get("abacus", reverse=False).number_tokens("-12.5") == ["-", "1", "2", ".", "5"]
    cut = encoders.get("abacus", max_places=3)
    short = GPT(preset("cpu-tiny"), cut, tok.vocab_size, tok.num_id, tok.piece_ids)
    assert short.token_module.places(torch.as_tensor(tok.encode("123456")[0])[None])[0].tolist() == [1, 2, 3, 3, 3, 3]


def source_places(ids, digit_ids):
    """The authors' places (mcleish7/arithmetic, abacus.py, `Abacus.forward` and `Abacus.helper`,
    before the training offset): the digit mask is the ids among the ten digit tokens; a segment
    starts at a digit after a non-digit (`starts`); a digit's place is its index minus its
    segment's start index, plus 1; every other token gets 0. Written here as a loop over one row."""
    out, start = [], None
    for t, i in enumerate(ids):
        digit = i in digit_ids
        start = (t if start is None else start) if digit else None
        out.append(t - start + 1 if digit else 0)
    return out


SOURCE_STRINGS = ("12.5 + 3.25 = 15.75", "-7.125", "-12.5 + 307 and 4000.25", ".5 - 0.25 = 0.25", "100 * 2.5 = 250")


def test_positions_source_are_the_authors_places(tok):
    model = model_for(tok, positions="source")
    digits = {tok.piece_ids[str(d)] for d in range(10)}
    ids = [tok.encode(f"<|bos|>{text}<|eoq|>")[0] for text in SOURCE_STRINGS]
    width = max(map(len, ids))
    batch = torch.full((len(ids), width), tok.pad_id)
    for row, i in zip(batch, ids):
        row[: len(i)] = torch.as_tensor(i)
    got = model.token_module.places(batch).tolist()
    for row, written in zip(got, batch.tolist()):
        assert row == source_places(written, digits)
    # "12.5" is written 5 . 2 1: the authors' units digit is place 1 after the point, ours place 2
    pieces = [tok.tokens[i] if i < tok.offset else "text" for i in ids[0]]
    assert pieces[1:5] == ["5", ".", "2", "1"] and got[0][1:5] == [1, 0, 1, 2]
    assert model_for(tok).token_module.places(batch[:1])[0, 1:5].tolist() == [1, 0, 2, 3]


def test_training_shifts_each_samples_places_by_one_random_offset(tok):
    model = model_for(tok, max_offset=50)
    batch = pack([tok.sample(f"{a} + {a}", f"{2 * a}") for a in range(100, 160)], 2, 64, tok.pad_id, tok.num_id)
    places = model.token_module.places(batch["ids"])
    seen = {}
    model.train()
    torch.manual_seed(1)
    added = model.token_module.embed(batch["ids"], batch["doc_ids"])
    table = model.token_module.embedding.weight
    for b, t in zip(*torch.nonzero(places).T.tolist()):
        row = [k for k in range(len(table)) if torch.equal(added[b, t], table[k])]
        assert len(row) == 1 and 1 <= row[0] - places[b, t] <= 50 or row[0] - places[b, t] == 0
        seen.setdefault(int(batch["doc_ids"][b, t]), set()).add(row[0] - int(places[b, t]))
    assert all(len(shift) == 1 for shift in seen.values())  # one offset per sample
    assert len({s for shift in seen.values() for s in shift}) > 3  # and different ones across samples
    model.eval()
    evaluated = model.token_module.embed(batch["ids"], batch["doc_ids"])
    assert torch.equal(evaluated, table[places] * (places > 0)[..., None])  # no offset at evaluation


def test_generation_equals_a_full_forward_pass(tok):
    model = model_for(tok)
    model.eval()
    digits = sorted(tok.piece_ids[str(d)] for d in range(10))
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.lm_head.weight[digits] = torch.randn(10, 128, generator=torch.Generator().manual_seed(0))
        model.token_module.embedding.weight.normal_(std=1.0)  # large, so that a wrong place changes the argmax
    prompts = [tok.encode(f"<|bos|>{p}") for p in ("12 + 3", "4 + 56789 is 1", "7")]
    for (ids, _), (new, _) in zip(prompts, model.generate(prompts, 10, eos_id=-1)):
        every = torch.as_tensor(np.concatenate([ids, new]))[None]
        n = every.shape[1]
        with torch.no_grad():
            logits = model.logits(
                every,
                torch.zeros(1, n, dtype=torch.float64),
                torch.arange(n)[None],
                torch.zeros(1, n, dtype=torch.long),
            )
        assert logits[0, len(ids) - 1 : -1].argmax(-1).tolist() == new and len(set(new)) > 2


def test_bad_input(tok):
    zoo_checks.bad_options("abacus")
    zoo_checks.refuses(encoders.get("abacus"), math.nan, "cannot encode", "finite")
    for bad in ({"max_offset": -1}, {"max_places": 0}, {"reverse": "yes"}, {"positions": "digits"}):
        with pytest.raises(ValueError, match="abacus"):
            encoders.get("abacus", **bad)
    assert encoders.get("abacus").token_module(128, tok.piece_ids).embedding.weight.shape == (201, 128)


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("abacus", tmp_path, pieces_of=oracle_pieces, value_of=oracle_value)
    assert read >= 8  # most of the 16 answers are numbers the oracle reads
    zoo_checks.runs_by_name("abacus", tmp_path, monkeypatch)
