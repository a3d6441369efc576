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

CODEC = encoders.get("log_xval")


def oracle_scale(x, scale=6.0):
    with localcontext() as ctx:
        ctx.prec = 700  # 1 + |x| keeps the digits of |x| down to 1e-324
        d = abs(Decimal(repr(x)))
        s = (d + 1).ln() / Decimal(10).ln() / Decimal(repr(scale))
        return float(s) * (1 if x >= 0 else -1)


def values(n=400, seed=0):
    rng = random.Random(seed)
    return [rng.choice([-1, 1]) * float(f"{rng.randint(1, 9)}.{rng.randint(0, 10**14)}e{rng.randint(-300, 300)}")
            for _ in range(n)] + [0.0, 1.0, -1.0, 0.5, 1e-10, 123.456, 1.7976931348623157e308]


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


def test_bad_input():
    for value in (math.nan, math.inf, -math.inf):
        zoo_checks.refuses(CODEC, value, "cannot encode", "finite")
    zoo_checks.bad_options("log_xval")
    for bad in (0, -1.0, math.inf, True):
        with pytest.raises(ValueError, match="log_xval.*scale"):
            encoders.get("log_xval", scale=bad)


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("log_xval", tmp_path)
    assert read >= 8  # most of the 16 answers are one <|num|>, written as its value
    zoo_checks.runs_by_name("log_xval", tmp_path, monkeypatch)


def test_values_whose_scale_would_underflow_are_an_error_naming_them():
    """Bug: 5e-324 (and every |x| whose s underflows) came back as 0 without an error."""
    smallest = CODEC.smallest
    assert 3e-307 < smallest < 3.2e-307
    for bad in (5e-324, -5e-324, 1e-310, -2.2250738585072014e-308, smallest / 2):
        with pytest.raises(ValueError, match=rf"^log_xval cannot encode {re.escape(repr(bad))}: its scale s would underflow"):
            CODEC.encode(torch.tensor([1.0, bad], dtype=torch.float64))
    edge = torch.tensor([smallest, -smallest, 1e-300, 0.0], dtype=torch.float64)
    back = CODEC.decode(CODEC.encode(edge))
    assert back.tolist() == pytest.approx(edge.tolist(), rel=1e-13)
    # whatever decode gives (a head's output, fed back during generation), encode takes
    s = torch.cat([torch.tensor([1e-320, 2.2250738585072014e-308, 3e-308], dtype=torch.float64),
                   torch.logspace(-310, 1, 2000, dtype=torch.float64)])[:, None]
    CODEC.encode(CODEC.decode(torch.cat([s, -s])))
