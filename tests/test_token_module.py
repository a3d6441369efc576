"""The token-module hooks (`encoding.token_module`): an addition to the token embeddings computed
from the ids, and an extra per-token loss, with a toy encoding defined here. What each test
catches: the addition not reaching the trunk, generation feeding a wrong row of it (the KV-cache
path must equal a full forward pass over the same tokens), the extra loss counted with the wrong
weight or denominator, the embedding landing in the wrong optimizer group, a missing piece map
passing silently."""

import numpy as np
import pytest
import torch
from torch import nn

from workbench import encoders
from workbench.encoders.base import TokenModule
from workbench.encoders.single_digit import SingleDigit
from workbench.model.gpt import GPT, packed_mask, preset
from workbench.tokenizer import Tokenizer
from workbench.training.batches import number_fields
from workbench.training.loss import losses as train_losses


class CountingModule(TokenModule):
    """Adds embedding[k] at the k-th digit of a run of number pieces (k from 1; 0 elsewhere) and a
    loss of `scale` x (target id mod 3) at every target that is a digit."""

    def __init__(self, encoding, d_model, piece_ids):
        super().__init__(encoding, d_model, piece_ids)
        self.embedding = nn.Embedding(40, d_model)
        nn.init.normal_(self.embedding.weight, std=1.0)
        self.digits = sorted(piece_ids[str(d)] for d in range(10))
        self.pieces = sorted(piece_ids.values())
        self.scale = 0.5

    def places(self, ids):
        digit, piece = torch.isin(ids, torch.tensor(self.digits)), torch.isin(ids, torch.tensor(self.pieces))
        count = digit.long().cumsum(1)
        start = torch.where(piece, 0, count).cummax(1).values
        return (count - start) * digit

    def embed(self, ids, doc_ids):
        return self.embedding(self.places(ids).clamp(max=39)) * (self.places(ids) > 0)[..., None]

    def loss(self, hidden, lm_weight, targets):
        digit = torch.isin(targets, torch.tensor(self.digits))
        return torch.where(digit, self.scale * (targets % 3).float(), 0.0) + 0 * hidden.sum(1)


class Counting(SingleDigit):
    name = "counting_toy"

    def token_module(self, d_model, piece_ids):
        return CountingModule(self, d_model, piece_ids)


@pytest.fixture(scope="module")
def setup():
    with encoders.registered(Counting):
        tok = Tokenizer("counting_toy")
        torch.manual_seed(0)
        model = GPT(preset("cpu-tiny"), encoders.get("counting_toy"), tok.vocab_size, tok.num_id, tok.piece_ids)
        yield tok, model


def test_places_count_the_digits_of_each_number(setup):
    tok, model = setup
    ids, _ = tok.encode("<|bos|>-12.5 * 307<|eoq|>")
    places = model.token_module.places(torch.as_tensor(ids)[None])[0].tolist()
    pieces = [tok.tokens[i] if i < tok.offset else "t" for i in ids]
    assert all(place == 0 for piece, place in zip(pieces, places) if piece == "t")
    assert [(p, k) for p, k in zip(pieces, places) if p != "t"] == [
        ("<|bos|>", 0),
        ("-", 0),
        ("1", 1),
        ("2", 2),
        (".", 0),
        ("5", 3),
        ("3", 1),
        ("0", 2),
        ("7", 3),
        ("<|eoq|>", 0),
    ]


def test_the_addition_reaches_the_trunk(setup):
    tok, model = setup
    ids, values = tok.encode("<|bos|>12 * 34<|eoq|>408<|eos|>")
    ids, values = torch.as_tensor(ids)[None], torch.as_tensor(values)[None]
    positions, docs = torch.arange(ids.shape[1])[None], torch.zeros_like(ids)
    logits = model.logits(ids, values, positions, docs)
    added = model.token_module.embed(ids, docs)
    assert added.abs().sum() > 0
    by_hand = model.lm_head(model.trunk(ids, values, positions, packed_mask(docs), added=added))
    without = model.lm_head(model.trunk(ids, values, positions, packed_mask(docs)))
    assert torch.equal(logits, by_hand) and not torch.allclose(logits, without)


def test_generation_equals_a_full_forward_pass(setup):
    """Greedy generation with the KV cache and the added rows = argmax of a full pass over the same
    tokens, for prompts of different lengths (left padding) that end inside a number."""
    tok, model = setup
    model.eval()
    digits = model.token_module.digits
    with torch.no_grad():  # the lm head writes digits only, so the generated tokens get places 2, 3, ...
        keep = model.lm_head.weight.clone()
        model.lm_head.weight.zero_()
        model.lm_head.weight[digits] = torch.randn(10, keep.shape[1], generator=torch.Generator().manual_seed(0))
    prompts = [tok.encode(f"<|bos|>{p}") for p in ("12 * 3", "4 + 56789 is 1", "7")]
    generated = model.generate(prompts, 12, eos_id=-1)
    assert all(set(g) <= set(digits) and len(set(g)) > 2 for g, _ in generated)
    for (ids, _values), (new_ids, _) in zip(prompts, generated):
        every = torch.as_tensor(np.concatenate([ids, new_ids]))[None]
        n = every.shape[1]
        with torch.no_grad():
            logits = model.logits(
                every,
                torch.zeros(1, n, dtype=torch.float64),
                torch.arange(n)[None],
                torch.zeros(1, n, dtype=torch.long),
            )
        assert logits[0, len(ids) - 1 : -1].argmax(-1).tolist() == new_ids
    with torch.no_grad():
        model.lm_head.weight.copy_(keep)


def test_the_extra_loss_is_added_per_target_with_its_task_weight(setup):
    tok, model = setup
    model.train()
    ids, values, mask = tok.sample("12 * 34", "408")
    T = len(ids) - 1
    batch = dict(
        ids=torch.as_tensor(ids[:-1])[None],
        values=torch.as_tensor(values[:-1])[None],
        positions=torch.arange(T)[None],
        doc_ids=torch.zeros(1, T, dtype=torch.long),
        targets=torch.as_tensor(ids[1:])[None],
        target_values=torch.as_tensor(values[1:])[None],
        loss_mask=torch.as_tensor(mask[1:])[None],
        task_ids=torch.zeros(1, T, dtype=torch.long),
    )
    batch.update(ce_count=batch["loss_mask"].sum(), number_count=torch.tensor(1))
    weights = torch.tensor([3.0])
    losses = train_losses(model, number_fields(batch, model.number_head, model.num_id), weights)
    targets = batch["targets"][batch["loss_mask"]]
    digit_targets = [int(t) for t in targets if tok.tokens[int(t)] in "0123456789" and int(t) < tok.offset]
    extra = sum(0.5 * (t % 3) for t in digit_targets)
    count = len(targets)
    assert losses["token_loss"].item() == pytest.approx(extra / count)
    assert losses["loss"].item() == pytest.approx(3.0 * (losses["ce"].item() + extra / count), rel=1e-5)
    assert losses["task_loss"].item() == pytest.approx(losses["ce"].item() * count + extra, rel=1e-5)


def test_the_embedding_joins_the_embedding_group_and_a_missing_map_is_an_error(setup):
    tok, model = setup
    groups = model.param_groups()
    assert any(p is model.token_module.embedding.weight for p in groups["embedding"])
    with pytest.raises(ValueError, match="counting_toy.*piece_ids"):
        GPT(preset("cpu-tiny"), encoders.get("counting_toy"), tok.vocab_size, tok.num_id)


def test_encodings_without_a_module_build_none():
    for name in ("bittokens", "fone", "xval", "single_digit", "triple_digit", "numerologic"):
        assert encoders.get(name).token_module(64, {"0": 5}) is None
