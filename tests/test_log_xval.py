"""Log-scaled xVal: s(x) against the formula in 50-digit decimals, round trips over float64's
range, the z-score statistics against numpy, the ideal head, bad input, and a tiny training run."""

import math
import random
import re
from decimal import Decimal, localcontext

import numpy as np
import pytest
import torch
import zoo_checks

from workbench import encoders
from workbench.model.gpt import GPT, preset
from workbench.tokenizer import Tokenizer
from workbench.training.batches import number_fields
from workbench.training.data import pack
from workbench.training.loss import losses as train_losses

CODEC = encoders.get("log_xval")


def oracle_scale(x, scale=6.0):
    with localcontext() as ctx:
        ctx.prec = 700  # 1 + |x| keeps the digits of |x| down to 1e-324
        d = abs(Decimal(repr(x)))
        s = (d + 1).ln() / Decimal(10).ln() / Decimal(repr(scale))
        return float(s) * (1 if x >= 0 else -1)


def values(n=400, seed=0):
    rng = random.Random(seed)
    return [
        rng.choice([-1, 1]) * float(f"{rng.randint(1, 9)}.{rng.randint(0, 10**14)}e{rng.randint(-300, 300)}")
        for _ in range(n)
    ] + [0.0, 1.0, -1.0, 0.5, 1e-10, 123.456, 1.7976931348623157e308]


@pytest.mark.parametrize("scale", [6.0, 1.0])
def test_the_scale_is_the_formula(scale):
    codec = encoders.get("log_xval", scale=scale)
    xs = values()
    got = codec.encode(torch.tensor(xs, dtype=torch.float64))[:, 0].tolist()
    for x, s in zip(xs, got):
        assert s == pytest.approx(oracle_scale(x, scale), rel=1e-15, abs=1e-300)


def test_round_trips_over_the_float64_range():
    xs = values(seed=1)
    back = CODEC.decode(CODEC.encode(torch.tensor(xs, dtype=torch.float64))).tolist()
    for x, b in zip(xs, back):
        assert b == pytest.approx(x, rel=2e-13), x
    assert CODEC.decode(CODEC.encode([0.0, -0.0])).tolist() == [0.0, 0.0]


def test_the_head_z_scores_by_every_target_seen_in_training():
    torch.manual_seed(0)
    head = CODEC.number_head(32)
    batches = [torch.tensor(values(20, seed=k), dtype=torch.float64) for k in range(4)]
    for batch in batches:
        head.loss(torch.zeros(len(batch), requires_grad=True), batch)
    seen = np.concatenate([CODEC.encode(b)[:, 0].numpy() for b in batches])
    assert head.mean.item() == pytest.approx(seen.mean(), rel=1e-12)
    assert head.std.item() == pytest.approx(seen.std(), rel=1e-12)
    head.eval()
    head.loss(torch.zeros(2, requires_grad=True), torch.tensor([1e9, 2e9], dtype=torch.float64))  # eval mode
    head.train()
    head.loss(torch.zeros(2), torch.tensor([1e9, 2e9], dtype=torch.float64))  # no gradient: a measurement
    assert head.count.item() == len(seen)
    x = torch.tensor([7.0, -0.0123, 123456.0], dtype=torch.float64)
    # the output is float32: its rounding (6e-8 of z) times std (~25 here) times ln(10) x scale
    assert head.predict(head.ideal_output(x)).tolist() == pytest.approx(x.tolist(), rel=1e-4)
    assert head.loss(head.ideal_output(x), x).abs().max() < 1e-12
    state = head.state_dict()
    assert {"count", "mean", "m2"} <= set(state)  # saved with the weights, so a resumed run keeps them


SOURCE = encoders.get("log_xval", variant="source")
V_MAX = 3e9  # the authors' constant (tum-ai/number-token-loss, t5_xval.py)


def source_number_loss(preds, labels):
    """The authors' number loss (tum-ai/number-token-loss, t5_xval.py, `T5RegressionModelXval.forward`):
    predictions and labels z-scored by the mean and the std (torch's, unbiased) + 1e-6 of the two
    together, then the mean squared difference. Written here from those lines."""
    combined = torch.cat([preds, labels])
    mean, std = combined.mean(), combined.std() + 1e-6
    return ((preds - mean) / std - (labels - mean) / std).square().mean()


def test_variant_source_scales_the_input_as_the_authors():
    """Their input: sign(x) · log10(|x| + 1) / (log10(V_MAX) / 10) (`T5RegressionModelXval.forward`)."""
    xs = values()
    got = SOURCE.encode(torch.tensor(xs, dtype=torch.float64))[:, 0].tolist()
    for x, s in zip(xs, got):
        assert s == pytest.approx(oracle_scale(x, math.log10(V_MAX) / 10), rel=1e-15, abs=1e-300)
    assert SOURCE.encode([1e30])[0, 0].item() / CODEC.encode([1e30])[0, 0].item() == pytest.approx(6.331, abs=1e-3)


def test_variant_source_head_is_the_authors_batch_z_scored_mse():
    torch.manual_seed(0)
    head = SOURCE.number_head(32)
    assert head.output[0].out_features == 1024 and head.loss_weight == 1.0
    x = torch.tensor([3.5, -12.25, 1e6, 0.0, 7.0, 2.5e-3], dtype=torch.float64)
    out = (torch.randn(len(x)) * 100).requires_grad_()
    ours = head.loss(out, x)
    ours.mean().backward()
    theirs_out = out.detach().double().requires_grad_()
    theirs = source_number_loss(theirs_out, x)
    theirs.backward()
    assert ours.mean().item() == pytest.approx(theirs.item(), rel=1e-6)
    assert out.grad.tolist() == pytest.approx(theirs_out.grad.tolist(), rel=1e-5, abs=1e-12)  # through mean and std
    assert head.predict(out).tolist() == out.detach().double().tolist()  # the output is the number itself
    assert head.loss(head.ideal_output(x), x).max() < 1e-12
    assert head.loss(torch.zeros(0, requires_grad=True), torch.zeros(0, dtype=torch.float64)).shape == (0,)


def test_variant_source_with_separate_means_is_twice_the_authors_loss():
    """Their loss is (CE + MSE) / 2; with --loss separate_means and the head's weight 1, ours is CE + MSE."""
    tok = Tokenizer(SOURCE)
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny", loss="separate_means"), SOURCE, tok.vocab_size, tok.num_id)
    pairs = [("1.5 + 2", "3.5"), ("12 * 3", "36"), ("7 - 10", "-3"), ("250 + 0.125", "250.125")]
    batch = number_fields(
        pack([tok.sample(p, a) for p, a in pairs] * 10, 2, 40, tok.pad_id, tok.num_id), model.number_head, model.num_id
    )
    hidden = model(batch)
    got = train_losses(model, batch, hidden=hidden)["loss"]
    targets = batch.targets.flatten()[batch.loss_index]
    ce = torch.nn.functional.cross_entropy(hidden @ model.lm_head.weight.T, targets)
    at = targets == tok.num_id
    preds = model.number_outputs(hidden[at]).double()
    labels = batch.target_values.flatten()[batch.loss_index][at]
    assert at.sum() >= 4 and got.item() == pytest.approx(
        2 * ((ce + source_number_loss(preds, labels)) / 2).item(), rel=1e-6
    )


def test_bad_input():
    for value in (math.nan, math.inf, -math.inf):
        zoo_checks.refuses(CODEC, value, "cannot encode", "finite")
    zoo_checks.bad_options("log_xval")
    for bad in (0, -1.0, math.inf, True):
        with pytest.raises(ValueError, match="log_xval.*scale"):
            encoders.get("log_xval", scale=bad)
    for bad in ({"variant": "authors"}, {"variant": "source", "scale": 2.0}):
        with pytest.raises(ValueError, match="log_xval.*variant"):
            encoders.get("log_xval", **bad)
    with pytest.raises(ValueError, match="log_xval cannot encode inf"):
        SOURCE.number_head(8).loss(torch.zeros(1), torch.tensor([math.inf], dtype=torch.float64))


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("log_xval", tmp_path)
    assert read >= 8  # most of the 16 answers are one <|num|>, written as its value
    zoo_checks.runs_by_name("log_xval", tmp_path, monkeypatch)


def test_values_whose_scale_would_underflow_are_an_error_naming_them():
    """Bug: 5e-324 (and every |x| whose s underflows) came back as 0 without an error."""
    smallest = CODEC.smallest
    assert 3e-307 < smallest < 3.2e-307
    for bad in (5e-324, -5e-324, 1e-310, -2.2250738585072014e-308, smallest / 2):
        with pytest.raises(
            ValueError, match=rf"^log_xval cannot encode {re.escape(repr(bad))}: its scale s would underflow"
        ):
            CODEC.encode(torch.tensor([1.0, bad], dtype=torch.float64))
    edge = torch.tensor([smallest, -smallest, 1e-300, 0.0], dtype=torch.float64)
    back = CODEC.decode(CODEC.encode(edge))
    assert back.tolist() == pytest.approx(edge.tolist(), rel=1e-13)
    # whatever decode gives (a head's output, fed back during generation), encode takes
    s = torch.cat(
        [
            torch.tensor([1e-320, 2.2250738585072014e-308, 3e-308], dtype=torch.float64),
            torch.logspace(-310, 1, 2000, dtype=torch.float64),
        ]
    )[:, None]
    CODEC.encode(CODEC.decode(torch.cat([s, -s])))
