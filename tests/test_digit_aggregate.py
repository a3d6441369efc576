"""Digit-embedding aggregation: the <agg> input is its own embedding + sum_k w_k E(d_k), w_k the
digit's place counted from the number's last digit (1, 2, ...), computed here by hand from the
model's embedding rows; the rows depend on the tokens before them only (what generation computes);
gradients reach the digit embeddings; bad options; a tiny training run."""

import random

import pytest
import torch
import zoo_checks

from workbench import encoders
from workbench.model.gpt import GPT, preset
from workbench.numbers import render
from workbench.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tok():
    return Tokenizer("digit_aggregate")


@pytest.fixture(scope="module")
def model(tok):
    torch.manual_seed(0)
    return GPT(preset("cpu-tiny"), encoders.get("digit_aggregate"), tok.vocab_size, tok.num_id, tok.piece_ids)


def test_the_tokens(tok):
    assert tok.tokens_of("-12.5 + 3") == ["-", "1", "2", ".", "5", "<agg>", "' +'", "' '", "3", "<agg>"]
    ids, values = tok.encode("1.2.3 and -0")
    assert tok.decode(ids, values) == "1.2.3 and -0"


def test_the_aggregate_by_hand(tok, model):
    rng = random.Random(0)
    texts = [render(rng.uniform(-1, 1) * 10.0 ** rng.randint(-4, 10), rng.randint(1, 12)) for _ in range(30)]
    ids = torch.as_tensor(tok.encode("<|bos|>" + ", ".join(texts) + "<|eos|>")[0])[None]
    added = model.token_module.embed(ids, torch.zeros_like(ids))[0]
    E = model.wte.weight
    at = (ids[0] == tok.piece_ids["<agg>"]).nonzero()[:, 0].tolist()
    assert len(at) == len(texts)
    for position, text in zip(at, texts):
        digits = [c for c in text if c.isdigit()]
        want = sum((len(digits) - k) * E[tok.piece_ids[d]] for k, d in enumerate(digits))
        assert torch.allclose(added[position], want, atol=1e-6), text
    rest = torch.ones(ids.shape[1], dtype=torch.bool)
    rest[at] = False
    assert (added[rest] == 0).all()
    single = model.token_module.embed(torch.as_tensor(tok.encode("7")[0])[None], torch.zeros(1, 2, dtype=torch.long))
    assert torch.equal(single[0, 1], E[tok.piece_ids["7"]])  # a one-digit number: its digit's embedding


def test_each_row_reads_only_the_tokens_before_it_and_the_gradient_reaches_the_digits(tok, model):
    ids = torch.as_tensor(tok.encode("<|bos|>305 * -0.25 = 76.25<|eos|>")[0])[None]
    docs = torch.zeros_like(ids)
    whole = model.token_module.embed(ids, docs)
    for t in range(1, ids.shape[1] + 1):  # generation: the tokens so far, the last row kept
        assert torch.equal(model.token_module.embed(ids[:, :t], docs[:, :t])[0, -1], whole[0, t - 1])
    model.zero_grad()
    whole.sum().backward()
    grad = model.wte.weight.grad
    assert grad[tok.piece_ids["3"]].abs().sum() > 0 and grad[tok.piece_ids["9"]].abs().sum() == 0
    two = model.token_module.embed(torch.tensor([[tok.piece_ids["4"], tok.piece_ids["<agg>"]]]), torch.tensor([[0, 1]]))
    assert two.abs().sum() == 0  # no number before it in its own sample


def test_bad_options():
    zoo_checks.bad_options("digit_aggregate")


def test_tiny_training(tmp_path, monkeypatch):
    codec = encoders.get("digit_aggregate")

    def value(pieces):
        try:
            return float(codec.number_text(pieces))
        except ValueError:
            return None

    zoo_checks.tiny_training("digit_aggregate", tmp_path, pieces_of=codec.number_tokens, value_of=value)
    zoo_checks.runs_by_name("digit_aggregate", tmp_path, monkeypatch)
