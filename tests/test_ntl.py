"""Number Token Loss: the loss at digit targets against its formulas computed by hand (plain
Python over the full softmax's digit entries), zero elsewhere, its weight in the model's loss and
its gradient, bad input, and a tiny training run whose answers decode (single digits)."""

import math
import os
import re
import subprocess
import sys
from fractions import Fraction

import pytest
import torch
import zoo_checks

from workbench import encoders
from workbench.model.gpt import GPT, preset
from workbench.runs.logs import load_metrics
from workbench.tokenizer import Tokenizer
from workbench.training.batches import micro_batches, number_fields, token_count
from workbench.training.data import pack
from workbench.training.loss import losses as train_losses
from workbench.training.train import main


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
    targets = torch.tensor(
        [tok.piece_ids["4"], text_id, tok.piece_ids["0"], tok.piece_ids["."], tok.piece_ids["9"], tok.eos_id]
    )
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
    costs = [module.loss(torch.eye(10)[k : k + 1], lm_weight, target).item() for k in range(10)]
    assert costs[4] < costs[3] < costs[2] < costs[0] and costs[5] < costs[9] and costs[4] < 1e-6


def test_the_model_adds_it_to_the_cross_entropy(tok):
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), encoders.get("ntl"), tok.vocab_size, tok.num_id, tok.piece_ids)
    ids, values, mask = tok.sample("12 + 34", "46")
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
    losses = train_losses(model, number_fields(batch, model.number_head, model.num_id))
    assert losses["token_loss"] > 0
    assert losses["loss"].item() == pytest.approx(losses["ce"].item() + losses["token_loss"].item(), rel=1e-6)
    without = GPT(preset("cpu-tiny"), encoders.get("ntl", weight=0.0), tok.vocab_size, tok.num_id, tok.piece_ids)
    without.load_state_dict(model.state_dict())
    assert train_losses(without, number_fields(batch, without.number_head, without.num_id))["token_loss"].item() == 0.0


def source_loss(logits, labels, digit_ids, weight):
    """The authors' training loss (tum-ai/number-token-loss): `T5VanillaForNumberTokenLoss.forward`
    adds weight x `WassersteinNumberTokenLoss.forward` to the model's mean cross-entropy over the
    labels. That NTL: the softmax over the number tokens' logits (ordered by value), the
    Wasserstein-1 distance of `_calculate_1d_wasserstein_dist` (the L1 distance of the two
    cumulative distributions) to the one-hot label, averaged over the labels that are number
    tokens. Written here from those lines, on full logits [N, V]."""
    ce = torch.nn.functional.cross_entropy(logits, labels)
    valid = torch.isin(labels, digit_ids)
    p = logits[valid][:, digit_ids].softmax(-1)
    one_hot = (labels[valid, None] == digit_ids).float()
    return ce + weight * (p.cumsum(-1) - one_hot.cumsum(-1)).abs().sum(-1).mean()


def ntl_batch(tok, rows=4):
    samples = [tok.sample(f"{a} + {b}", f"{a + b}") for a, b in ((12, 34), (5.25, 7), (908, 1.5), (3, 4), (66, 7.5))]
    samples = (samples + [tok.text_sample("twelve apples and 3 pears")]) * 3
    return pack(samples, rows, 24, tok.pad_id, tok.num_id)


def test_loss_source_is_the_authors_mean_over_digit_targets(tok):
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), encoders.get("ntl", loss="source"), tok.vocab_size, tok.num_id, tok.piece_ids)
    batch = number_fields(ntl_batch(tok), model.number_head, model.num_id)
    hidden = model(batch)
    got = train_losses(model, batch, hidden=hidden)
    targets = batch.targets.flatten()[batch.loss_index]
    digit_ids = torch.tensor([tok.piece_ids[str(d)] for d in range(10)])
    assert 0 < torch.isin(targets, digit_ids).float().mean() < 0.7  # digits and other targets: the two rules differ
    want = source_loss(hidden.detach() @ model.lm_head.weight.detach().T, targets, digit_ids, 0.3)
    assert got["loss"].item() == pytest.approx(want.item(), rel=1e-6)
    ours = GPT(preset("cpu-tiny"), encoders.get("ntl"), tok.vocab_size, tok.num_id, tok.piece_ids)
    ours.load_state_dict(model.state_dict())
    assert train_losses(ours, batch, hidden=hidden)["loss"].item() < want.item() - 1e-3  # the default is not theirs


def test_loss_source_takes_its_mean_over_the_whole_steps_digit_targets(tok):
    """Micro-batches of gradient accumulation (and data-parallel ranks) each divide by the count of
    the whole step's digit targets, so their losses add up to the whole batch's."""
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), encoders.get("ntl", loss="source"), tok.vocab_size, tok.num_id, tok.piece_ids)
    batch = ntl_batch(tok)
    assert (
        token_count(
            batch, GPT(preset("cpu-tiny"), encoders.get("ntl"), tok.vocab_size, tok.num_id, tok.piece_ids).token_module
        )
        is None
    )  # the default's mean is over all targets
    whole = train_losses(model, number_fields(batch, model.number_head, model.num_id))
    batch["token_count"] = token_count(batch, model.token_module)
    digits = torch.isin(batch["targets"][batch["loss_mask"]], model.token_module.digit_ids).sum()
    assert batch["token_count"].item() == digits.item() > 0
    parts = [train_losses(model, number_fields(m, model.number_head, model.num_id)) for m in micro_batches(batch, 2)]
    for key in ("loss", "ce", "token_loss"):
        assert parts[0][key].item() + parts[1][key].item() == pytest.approx(whole[key].item(), rel=1e-5)
    ours = GPT(preset("cpu-tiny"), encoders.get("ntl"), tok.vocab_size, tok.num_id, tok.piece_ids)
    counted = train_losses(ours, number_fields(batch, ours.number_head, ours.num_id))["loss"]
    del batch["token_count"]
    assert counted == train_losses(ours, number_fields(batch, ours.number_head, ours.num_id))["loss"]  # not its mean


def test_loss_source_gives_a_steps_loss_whatever_its_micro_batches(tmp_path):
    """Two micro-batches of one row each give the step the loss of one batch of both rows: each
    divides by the step's count of digit targets, counted where the step's batch is packed."""
    first = {}
    for name, rows in (("whole", ["--batch-size", "2"]), ("accumulated", ["--batch-size", "1", "--grad-accum", "2"])):
        main(
            [
                "--encoding",
                "ntl",
                "--encoding-option",
                'loss="source"',
                "--tasks",
                "addition",
                "--preset",
                "cpu-tiny",
                *rows,
                "--tokens",
                str(2 * 128 * 2),
                "--pool-size",
                "200",
                "--val-samples",
                "8",
                "--test-samples",
                "8",
                "--eval-every",
                "2",
                "--decades",
                "0",
                "1",
                "--max-digits",
                "2",
                "--threads",
                "1",
                "--out",
                str(tmp_path / name),
            ]
        )
        first[name] = load_metrics(tmp_path / name)[0].iloc[0]
    for key in ("loss", "ce", "token_loss"):
        assert first["accumulated"][key] == pytest.approx(first["whole"][key], rel=1e-5)


@pytest.mark.slow
def test_loss_source_over_two_processes_equals_one_process_with_the_whole_batch(tmp_path):
    """torchrun, 2 processes x 2 micro-batches x 2 rows == 1 process x 8 rows: the ranks sum their
    counts of digit targets as they sum the cross-entropy's."""
    args = [
        "--encoding",
        "ntl",
        "--encoding-option",
        "loss=source",
        "--tasks",
        "addition,multiplication",
        "--preset",
        "cpu-tiny",
        "--tokens",
        str(8 * 128 * 6),
        "--pool-size",
        "300",
        "--val-samples",
        "8",
        "--test-samples",
        "8",
        "--eval-every",
        "6",
        "--decades",
        "0",
        "2",
        "--max-digits",
        "3",
        "--threads",
        "1",
        "--newton-schulz",
        "float32",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "workbench.train",
            *args,
            "--batch-size",
            "2",
            "--grad-accum",
            "2",
            "--out",
            str(tmp_path / "ddp"),
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=300,
    )
    main([*args, "--batch-size", "8", "--out", str(tmp_path / "single")])
    ddp, single = (load_metrics(tmp_path / name)[0] for name in ("ddp", "single"))
    assert len(ddp) == len(single) == 6
    for key in ("loss", "token_loss"):
        assert ddp[key].tolist() == pytest.approx(single[key].tolist(), rel=1e-4)


def test_bad_input(tok):
    zoo_checks.bad_options("ntl")
    zoo_checks.refuses(encoders.get("ntl"), math.nan, "cannot encode", "finite")
    for bad in ({"variant": "l1"}, {"weight": -1}, {"weight": math.inf}, {"loss": "mean"}):
        with pytest.raises(ValueError, match="ntl"):
            encoders.get("ntl", **bad)


def test_tiny_training_writes_numbers_that_mean_their_values(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("ntl", tmp_path, pieces_of=oracle_pieces, value_of=oracle_value)
    assert read >= 8  # most of the 16 answers are numbers the oracle reads
    steps, _ = load_metrics(tmp_path / "ntl")
    assert (steps["token_loss"] > 0).all() and (steps["loss"] > steps["ce"]).all()
    # near-uniform digit probabilities at the start: the NTL of a digit is 2.5 ... 4.5, so 0.3 x its
    # mean over the digit targets is at least 0.75; the default divides by all targets instead
    assert steps["token_loss"].iloc[0] < 0.7
    zoo_checks.tiny_training("ntl", tmp_path / "source", {"loss": "source"}, oracle_pieces, oracle_value)
    source, _ = load_metrics(tmp_path / "source" / "ntl")
    assert source["token_loss"].iloc[0] > 0.7 and (source["loss"] > source["ce"]).all()
    zoo_checks.runs_by_name("ntl", tmp_path, monkeypatch)
