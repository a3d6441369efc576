"""Number Token Loss: the loss at digit targets against its formulas computed by hand (plain
Python over the full softmax's digit entries), zero elsewhere, its weight in the model's loss and
its gradient, bad input, and a tiny training run whose answers decode (single digits)."""
import math
import re
from fractions import Fraction

import pytest
import torch
import zoo_checks

from workbench import encoders
from workbench.batches import number_fields
from workbench.loss import losses as train_losses
from workbench.model import GPT, preset
from workbench.rundir import load_metrics
from workbench.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tok():
    return Tokenizer("ntl")


def oracle_pieces(text):
    return list(text)


def oracle_value(pieces):
    text = "".join(pieces)
    if not re.fullmatch(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)", text):
        return None
    magnitude = float(Fraction(text.lstrip("-")))
    return -magnitude if text.startswith("-") else magnitude


def by_hand(logits, target_digit, variant):
    """The NTL of one target from the ten digit logits, in plain Python."""
    exps = [math.exp(v - max(logits)) for v in logits]
    p = [e / sum(exps) for e in exps]
    if variant == "was":
        return sum(pi * abs(i - target_digit) for i, pi in enumerate(p))
    return (sum(pi * i for i, pi in enumerate(p)) - target_digit) ** 2


@pytest.mark.parametrize("variant", ["was", "mse"])
def test_the_loss_at_digit_targets_is_the_papers_formula(tok, variant):
    torch.manual_seed(0)
    codec = encoders.get("ntl", variant=variant, weight=0.7)
    module = codec.token_module(16, tok.piece_ids)
    lm_weight = torch.randn(tok.vocab_size, 16)
    hidden = torch.randn(6, 16, requires_grad=True)
    text_id = tok.offset + 5
    targets = torch.tensor([tok.piece_ids["4"], text_id, tok.piece_ids["0"], tok.piece_ids["."],
                            tok.piece_ids["9"], tok.eos_id])
    loss = module.loss(hidden, lm_weight, targets)
    digit_rows = [tok.piece_ids[str(d)] for d in range(10)]
    for row, digit in ((0, 4), (2, 0), (4, 9)):
        logits = (hidden[row] @ lm_weight[digit_rows].T).tolist()
        assert loss[row].item() == pytest.approx(0.7 * by_hand(logits, digit, variant), rel=1e-5)
    assert loss[[1, 3, 5]].tolist() == [0.0, 0.0, 0.0]
    loss.sum().backward()
    assert hidden.grad[[0, 2, 4]].abs().sum() > 0 and hidden.grad[[1, 3, 5]].abs().sum() == 0


def test_a_nearer_digit_costs_less(tok):
    module = encoders.get("ntl").token_module(10, tok.piece_ids)
    lm_weight = torch.zeros(tok.vocab_size, 10)
    lm_weight[[tok.piece_ids[str(d)] for d in range(10)]] = torch.eye(10) * 20  # hidden e_k predicts digit k
    target = torch.tensor([tok.piece_ids["4"]])
    costs = [module.loss(torch.eye(10)[k:k + 1], lm_weight, target).item() for k in range(10)]
    assert costs[4] < costs[3] < costs[2] < costs[0] and costs[5] < costs[9] and costs[4] < 1e-6


def test_the_model_adds_it_to_the_cross_entropy(tok):
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), encoders.get("ntl"), tok.vocab_size, tok.num_id, tok.piece_ids)
    ids, values, mask = tok.sample("12 + 34", "46")
    T = len(ids) - 1
    batch = dict(ids=torch.as_tensor(ids[:-1])[None], values=torch.as_tensor(values[:-1])[None],
                 positions=torch.arange(T)[None], doc_ids=torch.zeros(1, T, dtype=torch.long),
                 targets=torch.as_tensor(ids[1:])[None], target_values=torch.as_tensor(values[1:])[None],
                 loss_mask=torch.as_tensor(mask[1:])[None], task_ids=torch.zeros(1, T, dtype=torch.long))
    batch.update(ce_count=batch["loss_mask"].sum(), number_count=torch.tensor(1))
    losses = train_losses(model, number_fields(batch, model.number_head, model.num_id))
    assert losses["token_loss"] > 0
    assert losses["loss"].item() == pytest.approx(losses["ce"].item() + losses["token_loss"].item(), rel=1e-6)
    without = GPT(preset("cpu-tiny"), encoders.get("ntl", weight=0.0), tok.vocab_size, tok.num_id, tok.piece_ids)
    without.load_state_dict(model.state_dict())
    assert train_losses(without, number_fields(batch, without.number_head, without.num_id))["token_loss"].item() == 0.0


def test_bad_input(tok):
    zoo_checks.bad_options("ntl")
    zoo_checks.refuses(encoders.get("ntl"), math.nan, "cannot encode", "finite")
    for bad in ({"variant": "l1"}, {"weight": -1}, {"weight": math.inf}):
        with pytest.raises(ValueError, match="ntl"):
            encoders.get("ntl", **bad)


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("ntl", tmp_path, pieces_of=oracle_pieces, value_of=oracle_value)
    assert read >= 8  # most of the 16 answers are numbers the oracle reads
    steps, _ = load_metrics(tmp_path / "ntl")
    assert (steps["token_loss"] > 0).all() and (steps["loss"] > steps["ce"]).all()
    zoo_checks.runs_by_name("ntl", tmp_path, monkeypatch)
