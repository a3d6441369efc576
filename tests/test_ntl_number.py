"""Number Token Loss at the number level against the `ntloss` package's own outputs, recorded here,
and against the package itself where it is installed; the runs of digits cut at a row's end and
at a gap; the model's loss; bad options; a tiny training run.

The recorded numbers: ntloss 0.3.2 from PyPI (its `NumberLevelLoss` as in ai4sd/number-token-loss
at 9ed3fde, whose differences from 0.3.2 move no value), in a separate venv with torch 2.13.0 (CPU),
`NumberLevelLoss(tokenizer, float_level=..., reweigh=...)(LOGITS, LABELS, reduction="none")` with a
Hugging Face WordLevel tokenizer of VOCAB; every non-zero entry, to 7 decimals (float32 there)."""

import math

import pytest
import torch
import zoo_checks

from workbench import encoders
from workbench.encoders.base import run_starts
from workbench.model.gpt import GPT, preset
from workbench.runs.logs import load_metrics
from workbench.tokenizer import Tokenizer
from workbench.training.batches import number_fields
from workbench.training.data import pack
from workbench.training.loss import losses as train_losses

VOCAB = ["<pad>", "a", "+", "=", ".", "-"] + [str(d) for d in range(10)] + ["<eos>"]
ROWS = [  # "_": a label the loss ignores (-100), as a prompt's
    "_ _ 1 2 . 3 4 + 5 6 7 = 0 a 9 8",
    "3 1 a - 4 0 5 . 0 0 6 _ 2 2 . 7 <eos>",
]
T = 17
SOURCE = {  # (float_level, reweigh): {(row, position): the package's loss there}
    (False, False): {(0, 2): 0.4950635, (0, 5): 0.1966953, (0, 8): 0.0033688, (0, 12): 1.0, (0, 14): 0.2906356,
                     (1, 0): 0.4505673, (1, 4): 0.0859715, (1, 8): 0.955943, (1, 12): 0.4203539, (1, 15): 0.1820116},
    (False, True): {(0, 2): 0.709536, (0, 5): 0.7223744, (0, 8): 0.2064642, (0, 12): 1.0046375, (0, 14): 0.6492102,
                    (1, 0): 0.9538917, (1, 4): 0.5215417, (1, 8): 0.9806049, (1, 12): 0.6300178, (1, 15): 0.1919404},
    (True, False): {(0, 2): 0.4898427, (0, 8): 0.0033688, (0, 12): 1.0, (0, 14): 0.2906356, (1, 0): 0.4505673,
                    (1, 4): 0.0862388, (1, 12): 0.4110994},
    (True, True): {(0, 2): 0.7064896, (0, 8): 0.2064642, (0, 12): 1.0046375, (0, 14): 0.6492102, (1, 0): 0.9538917,
                   (1, 4): 0.521683, (1, 12): 0.624054},
}  # fmt: skip
SOURCE_MEAN = {(False, False): 0.4080611, (False, True): 0.6570219, (True, False): 0.3902504, (True, True): 0.6666328}


def labels_and_logits():
    labels = torch.full((len(ROWS), T), -100, dtype=torch.long)
    for b, row in enumerate(ROWS):
        for t, piece in enumerate(row.split()):
            labels[b, t] = -100 if piece == "_" else VOCAB.index(piece)
    b, t, v = torch.meshgrid(torch.arange(len(ROWS)), torch.arange(T), torch.arange(len(VOCAB)), indexing="ij")
    return labels, (3 * torch.sin(1.3 * b + 0.7 * t + 0.37 * v * (t + 1))).float()


def ours(float_level, reweigh, weight=1.0):
    """Our module on the same logits: hidden = each loss position's logits, lm head = identity."""
    labels, logits = labels_and_logits()
    codec = encoders.get("ntl_number", weight=weight, float_level=float_level, reweigh=reweigh)
    module = codec.token_module(len(VOCAB), {p: VOCAB.index(p) for p in [".", "-"] + [str(d) for d in range(10)]})
    loss_index = (labels != -100).flatten().nonzero()[:, 0]
    got = module.loss(
        logits.flatten(0, 1)[loss_index], torch.eye(len(VOCAB)), labels.flatten()[loss_index], run_starts(loss_index, T)
    )
    return {(int(i) // T, int(i) % T): float(x) for i, x in zip(loss_index, got) if x != 0}


@pytest.mark.parametrize("float_level, reweigh", list(SOURCE))
def test_the_loss_of_each_number_is_the_packages(float_level, reweigh):
    got, want = ours(float_level, reweigh), SOURCE[(float_level, reweigh)]
    assert set(got) == set(want)  # one loss per number, at its first digit, cut at rows and gaps alike
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=2e-7), key
    assert sum(got.values()) / len(got) == pytest.approx(SOURCE_MEAN[(float_level, reweigh)], abs=1e-6)
    half = ours(float_level, reweigh, weight=0.5)
    assert all(half[k] == pytest.approx(got[k] / 2, rel=1e-6) for k in got)


def test_against_the_package_itself_where_installed():
    ntloss = pytest.importorskip("ntloss")
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = {t: i for i, t in enumerate(VOCAB)}
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<pad>"))
    )
    labels, logits = labels_and_logits()
    for float_level, reweigh in SOURCE:
        theirs = ntloss.NumberLevelLoss(tokenizer=tok, float_level=float_level, reweigh=reweigh)(
            logits, labels, reduction="none"
        )
        got = ours(float_level, reweigh)
        assert {(int(i), int(j)) for i, j in torch.nonzero(theirs)} == set(got)
        assert all(got[k] == pytest.approx(float(theirs[k]), abs=2e-7) for k in got)


def test_a_number_by_hand_and_the_runs_it_reads():
    """Two digit targets 4 and 2 (the number 42) with known expected digits: sMAPE by hand."""
    codec = encoders.get("ntl_number", weight=1.0, reweigh=False)
    ids = {str(d): 10 + d for d in range(10)} | {".": 3, "-": 4}
    module = codec.token_module(4, ids)
    lm_weight = torch.zeros(30, 4)
    lm_weight[[10 + d for d in range(10)], 0] = torch.arange(10.0)  # logit of digit d = d * hidden[0]
    hidden = torch.tensor([[0.3, 0, 0, 0], [-0.2, 0, 0, 0]])
    targets = torch.tensor([14, 12])
    p = [[math.exp(d * h) for d in range(10)] for h in (0.3, -0.2)]
    expected = [sum(d * w for d, w in enumerate(row)) / sum(row) for row in p]
    y_hat = expected[0] * 10 + expected[1]
    want = abs(y_hat - 42) / (abs(y_hat) + 42 + 1.1920928955078125e-07)
    assert module.loss(hidden, lm_weight, targets).tolist() == pytest.approx([want, 0.0], rel=1e-6)
    digit, first, number = module.numbers(torch.tensor([14, 12, 3, 15, 1, 17]), torch.tensor([1, 0, 0, 0, 0, 1]).bool())
    assert first.tolist() == [True, False, False, True, False, True] and number.tolist() == [0, 0, -1, 1, -1, 2]


def test_the_model_adds_it_to_the_cross_entropy_over_whole_numbers():
    tok = Tokenizer("ntl_number")
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), encoders.get("ntl_number"), tok.vocab_size, tok.num_id, tok.piece_ids)
    samples = [tok.sample(f"{a} + {b}", f"{a + b}") for a, b in ((12, 34), (5.25, 7), (908, 1.5), (3, 4))] * 4
    batch = number_fields(pack(samples, 4, 24, tok.pad_id, tok.num_id), None, tok.num_id)
    got = train_losses(model, batch)
    assert got["token_loss"] > 0
    assert got["loss"].item() == pytest.approx(got["ce"].item() + got["token_loss"].item(), rel=1e-6)
    hidden = model(batch)
    targets = batch.targets.flatten()[batch.loss_index]
    each = model.token_module.loss(
        hidden, model.lm_head.weight, targets, run_starts(batch.loss_index, batch.ids.shape[1])
    )
    answers = sum(1 for row in range(4) for t in range(24) if batch.loss_mask[row, t])
    assert 0 < int((each > 0).sum()) < answers  # one loss per answer number, not per digit
    assert got["token_loss"].item() == pytest.approx(each.sum().item() / batch.ce_count.item(), rel=1e-6)


def test_bad_options():
    zoo_checks.bad_options("ntl_number")
    for bad in ({"weight": -1}, {"weight": math.nan}, {"float_level": 1}, {"reweigh": "yes"}):
        with pytest.raises(ValueError, match="ntl_number"):
            encoders.get("ntl_number", **bad)


def test_tiny_training(tmp_path, monkeypatch):
    read = zoo_checks.tiny_training("ntl_number", tmp_path, pieces_of=list, value_of=zoo_checks_value)
    assert read >= 0
    steps, _ = load_metrics(tmp_path / "ntl_number")
    assert (steps["token_loss"] > 0).all() and (steps["loss"] > steps["ce"]).all()
    zoo_checks.runs_by_name("ntl_number", tmp_path, monkeypatch)


def zoo_checks_value(pieces):
    text = "".join(pieces)
    try:
        return float(text) if text.strip("-.") and text.count(".") <= 1 and "-" not in text[1:] else None
    except ValueError:
        return None
