"""The value-aware prefix token against the paper's equations, written here independently: the
<num> input is e(<num>) + f(x) with x the value of the digits after it (read here with
`fractions`), f an MLP of s(x) = sign(x) log10(|x| + 1); the loss at a <num> target is
weight x mean((proj(h) - f(x))^2) with f(x) fixed; in generation proj(h) is fed where the model
wrote <num>. Also: the tokens, bad options, a tiny training run."""

import math
import random
from fractions import Fraction

import pytest
import torch
import zoo_checks

from workbench import encoders
from workbench.encoders.base import run_starts
from workbench.model.gpt import GPT, preset
from workbench.numbers import render
from workbench.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tok():
    return Tokenizer("value_prefix")


def f_by_hand(module, x):
    """f(x) = W2 gelu(W1 s + b1) + b2, s = sign(x) log10(|x| + 1), in plain Python (float64)."""
    s = math.copysign(math.log10(abs(x) + 1), x) if x else 0.0
    first, second = module.embedding[0], module.embedding[2]
    hidden = [
        0.5 * v * (1 + math.erf(v / math.sqrt(2)))
        for v in (w * s + b for w, b in zip(first.weight[:, 0].tolist(), first.bias.tolist()))
    ]
    return [sum(w * h for w, h in zip(row, hidden)) + b for row, b in zip(second.weight.tolist(), second.bias.tolist())]


def test_the_prefix_before_every_number_and_the_text_without_it(tok):
    assert tok.tokens_of("x=-12.5, 3") == ["'x'", "'='", "<num>", "-", "1", "2", ".", "5", "','", "' '", "<num>", "3"]
    ids, values = tok.encode("1.2.3 and -0.05")
    assert tok.decode(ids, values) == "1.2.3 and -0.05"  # two numbers, each with its <num>


def test_the_num_input_is_f_of_the_value_of_the_digits_after_it(tok):
    torch.manual_seed(0)
    module = encoders.get("value_prefix").token_module(8, tok.piece_ids)
    rng = random.Random(1)
    texts = [render(rng.uniform(-1, 1) * 10.0 ** rng.randint(-6, 12), rng.randint(1, 17)) for _ in range(40)]
    ids, _ = tok.encode("<|bos|>" + " + ".join(texts) + " <num>")  # the last "<num>" is text, no prefix
    ids = torch.as_tensor(ids)[None]
    added = module.embed(ids, torch.zeros_like(ids))[0]
    prefix = (ids[0] == tok.piece_ids["<num>"]).nonzero()[:, 0].tolist()
    assert len(prefix) == len(texts)
    for at, text in zip(prefix, texts):
        x = float(Fraction(text))
        assert added[at].tolist() == pytest.approx(f_by_hand(module, x), rel=1e-5, abs=1e-6), text
    others = torch.ones(ids.shape[1], dtype=torch.bool)
    others[prefix] = False
    assert (added[others] == 0).all()
    at, value = module.values(ids[0], torch.zeros(ids.shape[1], dtype=torch.bool))
    assert [value[p].item() for p in prefix] == pytest.approx([float(Fraction(t)) for t in texts], rel=1e-15)


def test_a_num_without_digits_after_it_and_across_samples_gets_nothing(tok):
    module = encoders.get("value_prefix").token_module(8, tok.piece_ids)
    num, three = tok.piece_ids["<num>"], tok.piece_ids["3"]
    ids = torch.tensor([[tok.bos_id, num, num, three, tok.eos_id, num]])
    docs = torch.tensor([[0, 0, 0, 0, 0, 0]])
    added = module.embed(ids, docs)[0]
    assert added[1].abs().sum() == 0 and added[2].abs().sum() > 0 and added[5].abs().sum() == 0
    split = module.embed(torch.tensor([[num, three]]), torch.tensor([[0, 1]]))[0]  # the digit is another sample's
    assert split.abs().sum() == 0


def test_the_alignment_loss_at_num_targets(tok):
    torch.manual_seed(0)
    module = encoders.get("value_prefix", weight=0.5).token_module(8, tok.piece_ids)
    p = tok.piece_ids
    targets = torch.tensor([p["<num>"], p["4"], p["2"], tok.eos_id, p["<num>"], p["-"], p["7"], p["<num>"], p["1"]])
    starts = torch.tensor(
        [1, 0, 0, 0, 0, 0, 0, 0, 1]
    ).bool()  # the last <num> ends its row: its digit is the next row's
    hidden = torch.randn(len(targets), 8, requires_grad=True)
    loss = module.loss(hidden, torch.zeros(1, 8), targets, starts)
    for row, x in ((0, 42.0), (4, -7.0)):
        proj = (module.proj.weight @ hidden[row] + module.proj.bias).tolist()
        want = 0.5 * sum((a - b) ** 2 for a, b in zip(proj, f_by_hand(module, x))) / 8
        assert loss[row].item() == pytest.approx(want, rel=1e-5)
    assert loss[[1, 2, 3, 5, 6, 7, 8]].abs().sum() == 0
    loss.sum().backward()
    assert (
        module.proj.weight.grad.abs().sum() > 0 and module.embedding[0].weight.grad is None
    )  # f(x) is the fixed target


def test_generation_feeds_proj_of_the_hidden_state_that_wrote_num(tok, monkeypatch):
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), encoders.get("value_prefix"), tok.vocab_size, tok.num_id, tok.piece_ids).eval()
    with torch.no_grad():  # the model writes <num> first, then digits
        model.lm_head.weight[tok.piece_ids["<num>"]] += 5 * model.norm.weight
    prompt = [tok.encode("<|bos|>12 + 3<|eoq|>")]
    fed = []
    real = model.token_module.fed

    def spy(hidden, token):
        out = real(hidden, token)
        fed.append((token.tolist(), None if out is None else out.clone(), hidden.clone()))
        return out

    monkeypatch.setattr(model.token_module, "fed", spy)
    trunk, added = model.trunk, []

    def record(*args, **kwargs):
        added.append(kwargs.get("added"))
        return trunk(*args, **kwargs)

    monkeypatch.setattr(model, "trunk", record)
    ids, _ = model.generate(prompt, 3, tok.eos_id, tok.pad_id)[0]
    assert ids[0] == tok.piece_ids["<num>"]
    token, out, hidden = fed[0]
    assert token == [ids[0]] and torch.allclose(out, model.token_module.proj(hidden))
    # the step that reads the written <num>: its embedding gets proj(h) (f has no digits to read yet)
    assert torch.allclose(added[1][:, -1], out, atol=1e-6)


def test_bad_options():
    zoo_checks.bad_options("value_prefix")
    for bad in (-1, math.inf, "1", True):
        with pytest.raises(ValueError, match="value_prefix: weight"):
            encoders.get("value_prefix", weight=bad)


def test_tiny_training(tmp_path, monkeypatch):
    from workbench.runs.logs import load_metrics

    codec = encoders.get("value_prefix")
    zoo_checks.tiny_training(
        "value_prefix", tmp_path, pieces_of=codec.number_tokens, value_of=lambda p: value(codec, p)
    )
    steps, _ = load_metrics(tmp_path / "value_prefix")
    assert (steps["token_loss"] > 0).all()
    zoo_checks.runs_by_name("value_prefix", tmp_path, monkeypatch)


def value(codec, pieces):
    try:
        return float(codec.number_text(pieces))
    except ValueError:
        return None


def test_run_starts():
    assert run_starts(torch.tensor([3, 4, 5, 8, 9, 10, 11]), 5).tolist() == [
        True,
        False,
        True,
        True,
        False,
        True,
        False,
    ]
