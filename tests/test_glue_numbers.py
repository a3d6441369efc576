"""The number path between the units: the number loss trains against the answer's values, generate
writes the head's value, the head variants are what their names say, and the scores reported
under "score" are eq. 1-2's log-sMAPE (arithmetic) or accuracy, with exact match beside them.

Most tests use a planted model whose answer is known without running it: every block is zeroed
(the trunk is then the normalized token embedding), the lm head writes <|num|> after <|eoq|> and
<|eos|> after a number, and the number head's output is c times the ±1 IEEE bits of one value.
"""

import math
import struct
from fractions import Fraction

import pandas as pd
import pytest
import torch

from workbench import encoders, tasks
from workbench.measures.evaluate import answer, evaluate, score, summarize
from workbench.model.gpt import GPT, preset
from workbench.tokenizer import Tokenizer
from workbench.training.batches import number_fields
from workbench.training.data import pack
from workbench.training.loss import losses as train_losses

C = 30.0  # logit magnitude of the planted head: BCE of a right bit is softplus(-30) ~ 1e-13


@pytest.fixture(scope="module")
def tok():
    return Tokenizer("bittokens")


def planted(tok, answer: float, stops: bool = True) -> GPT:
    """A GPT (BitTokens, linear head) that answers every question with <|num|>(answer)<|eos|>, or
    (stops=False) with <|num|>(answer) over and over."""
    cfg = preset("cpu-tiny", d_model=256)  # 128 dims for the bits, the rest free for markers
    model = GPT(cfg, encoders.get("bittokens", combine="sum"), tok.vocab_size, tok.num_id)
    with torch.no_grad():
        for p in model.blocks.parameters():  # norm gains and biases too: every block adds 0
            p.zero_()
        model.wte.weight.zero_()
        model.lm_head.weight.zero_()
        model.wte.weight[tok.eoq_id, -1] = 1.0  # after the question ...
        model.lm_head.weight[tok.num_id, -1] = 1.0  # ... write <|num|>
        model.wte.weight[tok.num_id, -2 if stops else -1] = 1.0  # after a number ...
        model.lm_head.weight[tok.eos_id, -2] = 1.0  # ... write <|eos|> (or <|num|> again)
        model.number_head.output.weight.zero_()
        model.number_head.output.bias.copy_(C * model.encoding.encode([answer])[0, :64])
    return model.eval()


def bits(x: float) -> int:
    return struct.unpack(">Q", struct.pack(">d", x))[0]


def softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def oracle_log_smape(p: float, t: float) -> float:
    """Eq. 1-2 in exact rational arithmetic (only the final log10 is a float)."""
    if not math.isfinite(p):
        return 0.0
    eps = Fraction(1, 10**100)
    s = abs(Fraction(p) - Fraction(t)) / (abs(Fraction(t)) + abs(Fraction(p)) + eps)
    return max(0.0, min(1.0, -math.log10(s + eps) / 15))


# -- the number loss trains against the answer ----------------------------------------------------
QUESTIONS = ["1.5 + 2", "10 - 6.5", "0.5 * 7", "14 / 4"]  # all 3.5, no 3.5 in any question


@pytest.mark.parametrize("head_value", [3.5, 1.5, 2.0, -3.5, 0.0, 7.0])
def test_number_loss_is_the_bce_against_the_answers_bits(tok, head_value):
    """A head writing the bits of `head_value` at every number position has number loss
    (h softplus(C) + (64 - h) softplus(-C)) / 64, h = Hamming distance of the IEEE bits of
    head_value and of the answer 3.5 (struct): ~0 for the answer, large for a question's number.
    The loss optimized is C.1's per token: the 10 x number loss of each <|num|> target joins its
    token's cross-entropy and the sum is averaged over all targets, not over the numbers alone."""
    model = planted(tok, head_value)
    batch = pack([tok.sample(q, "3.5") for q in QUESTIONS] * 10, 3, 40, tok.pad_id, tok.num_id)
    losses = train_losses(model, number_fields(batch, model.number_head, model.num_id))
    h = bin(bits(head_value) ^ bits(3.5)).count("1")
    expected = (h * softplus(C) + (64 - h) * softplus(-C)) / 64
    assert losses["number"].item() == pytest.approx(expected, rel=1e-5, abs=1e-9)
    assert (losses["number"].item() < 1e-9) == (head_value == 3.5)
    targets = batch["loss_mask"].sum().item()
    numbers = (batch["loss_mask"] & (batch["targets"] == tok.num_id)).sum().item()
    assert 0 < numbers < targets  # each answer is <|num|> <|eos|>: half the targets are numbers
    per_token = losses["ce"].item() + 10 * expected * numbers / targets
    assert losses["loss"].item() == pytest.approx(per_token, rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("value", [3.5, 0.30000000000000004, -1e-300, 123456789012345.67])
def test_generate_writes_the_heads_value_exactly(tok, value):
    model = planted(tok, value)
    prompts = ["1.5 + 2", "<|min|>4, 2, 9", "12 * 3 - 7"]  # different lengths: a padded batch
    texts, n_in, n_out = answer(model, tok, prompts)
    assert [float(t) for t in texts] == [value] * 3  # the value itself, all 17 digits
    assert n_out == [2, 2, 2]  # <|num|> <|eos|>
    assert n_in == [len(tok.encode(f"<|bos|>{p}<|eoq|>")[0]) for p in prompts]


@pytest.mark.parametrize("value, text", [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf")])
def test_a_head_that_writes_nan_or_inf_scores_zero_instead_of_crashing(tok, value, text):
    """BitTokens' head can set all exponent bits (an untrained one does for 1 number in 2048): the
    answer has no decimal text, is written as Python writes it and scores 0, and the run goes on."""
    model = planted(tok, value)
    texts, _, n_out = answer(model, tok, ["1.5 + 2", "<|min|>4, 2"])
    assert texts == [text, text] and n_out == [2, 2]
    rows = evaluate(model, tok, {"addition": pd.DataFrame({"prompt": ["1.5 + 2"], "answer": ["3.5"]})})
    assert rows["score"].tolist() == [0.0] and rows["exact"].tolist() == [False]


def test_evaluation_caps_each_batch_at_its_longest_answer_plus_eos(tok):
    """The authors' generation cap (max_new_tokens=None): a model that never writes <|eos|> stops
    after as many tokens as the longest reference answer of its batch has, plus one for <|eos|>;
    a fixed cap replaces it."""
    model = planted(tok, 3.5, stops=False)
    frame = pd.DataFrame(
        {
            "prompt": ["<|asc|>2, 1", "<|asc|>5, 4, 3, 2, 1", "<|asc|>2, 1", "<|asc|>3, 2, 1"],
            "answer": ["1, 2", "1, 2, 3, 4, 5", "1, 2", "1, 2, 3"],
        }
    )
    rows = evaluate(model, tok, {"sorting": frame}, batch_size=2)
    length = [len(tok.encode(a)[0]) for a in frame["answer"]]
    assert length[1] > length[3] > length[0]
    assert rows["output_tokens"].tolist() == [length[1] + 1] * 2 + [length[3] + 1] * 2
    assert rows["prediction"][0].startswith("3.53.5")  # it did go on writing numbers
    fixed = evaluate(model, tok, {"sorting": frame}, max_new_tokens=7, batch_size=2)
    assert fixed["output_tokens"].tolist() == [7] * 4


# -- head variants ---------------------------------------------------------------------------------
def _affine_defect(head, d: int) -> float:
    """max |h(a) + h(b) - h(0) - h(a + b)|: 0 for an affine map."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, d, generator=g), torch.randn(16, d, generator=g)
    with torch.no_grad():
        return (head(a) + head(b) - head(torch.zeros(16, d)) - head(a + b)).abs().max().item()


BASES = {"binary": ({}, 64), "onehot": ({"base": 10}, 210), "bcd": ({"base": 10, "base10_layout": "bcd"}, 84)}
D_MODEL = 448  # >= 420, the width of the base-10 one-hot encoding with its reciprocal


@pytest.mark.parametrize("layout", BASES)
def test_bittokens_heads_are_what_their_names_say(layout):
    options, bits_out = BASES[layout]
    d = D_MODEL
    linear, mlp, none = (encoders.get("bittokens", head=h, **options).number_head(d) for h in ("linear", "mlp", "none"))
    n_params = lambda m: sum(p.numel() for p in m.parameters())
    # linear: one affine map d -> bits; mlp: d -> d/2 -> ReLU -> bits (section D.3, Table 13; the
    # hidden width d/2 is the authors'); none: no weights
    assert n_params(linear) == d * bits_out + bits_out
    assert n_params(mlp) == (d * (d // 2) + d // 2) + ((d // 2) * bits_out + bits_out)
    assert n_params(none) == 0
    assert _affine_defect(linear, d) < 1e-4
    assert _affine_defect(mlp, d) > 1e-2, "the mlp head is affine: its nonlinearity is missing"
    hidden = torch.randn(5, d)
    assert torch.equal(none(hidden), hidden[:, :bits_out])  # the first `bits` dims are the logits
    for head in (linear, mlp, none):
        assert head(hidden).shape == (5, bits_out)


@pytest.mark.parametrize("layout", BASES)
def test_head_none_reads_the_value_from_the_first_dims(layout):
    """A hidden state whose first dims are the value's own ±1 bits (or one-hot digits) decodes to
    that value exactly, and its loss against that value is lower than against any other."""
    d = D_MODEL
    codec = encoders.get("bittokens", head="none", **BASES[layout][0])
    head = codec.number_head(d)
    x = torch.tensor([3.5, -0.1, 6.02e23, 1e-300], dtype=torch.float64)
    hidden = torch.randn(4, d)
    hidden[:, : codec.bits] = 8 * codec.encode(x)[:, : codec.bits]
    assert torch.equal(head.predict(head(hidden)), x)
    right, wrong = head.loss(head(hidden), x), head.loss(head(hidden), x.flip(0))
    assert right.shape == wrong.shape == (4,)  # one loss per number
    assert right.max() < 1e-3 < wrong.min()


# -- scores ----------------------------------------------------------------------------------------
ARITHMETIC_TASKS = ["addition", "multiplication", "division", "exponentiation", "mean", "std"]
# prediction, answer, exact match (same sign, exponent and first 15 significant digits)
CASES = [
    ("3.5", "3.5", True),
    ("1001", "999", False),
    ("-5", "5", False),
    ("abc", "2", False),
    ("3.50000000000001", "3.5", False),  # 15th significant digit differs
    ("3.500000000000001", "3.5", True),  # 16th digit: beyond the 15 that count
    ("2e-20", "1e-20", False),
    ("1.00000000000001e-30", "1e-30", False),
    ("0", "0", True),
]


@pytest.mark.parametrize("task", ARITHMETIC_TASKS)
def test_score_of_arithmetic_tasks_is_log_smape_and_exact_match(task):
    assert tasks.with_metric("log_smape") == ARITHMETIC_TASKS  # the registry agrees on which they are
    preds, answers, exact = zip(*CASES)
    s = score(task, list(preds), list(answers))
    want = [oracle_log_smape(float(p) if p != "abc" else math.nan, float(a)) for p, a in zip(preds, answers)]
    assert s["score"].tolist() == pytest.approx(want, abs=1e-12)
    assert s["exact"].tolist() == list(exact)
    assert s["score"][1] == pytest.approx(3 / 15, abs=1e-12)  # sMAPE(1001, 999) = 1e-3: three digits


def test_evaluate_scores_what_the_model_wrote(tok):
    """End to end: the planted model answers 3.5 to everything; each row's score is eq. 2 of 3.5
    against its answer (accuracy for minmax), and summarize averages them per task."""
    model = planted(tok, 3.5)
    frames = {
        "addition": pd.DataFrame(
            {
                "prompt": ["1.5 + 2", "1 + 2.6", "999 + 2", "1 - 4.5", "3 + 0.5"],
                "answer": ["3.5", "3.6", "1001", "-3.5", "3.50000000000001"],
            }
        ),
        "minmax": pd.DataFrame({"prompt": ["<|min|>3.5, 4", "<|max|>3.5, 4"], "answer": ["3.5", "4"]}),
    }
    rows = evaluate(model, tok, frames, batch_size=2)  # several chunks per task
    assert rows["prediction"].tolist() == ["3.5"] * 7
    add = rows[rows.task == "addition"]
    want = [oracle_log_smape(3.5, float(a)) for a in frames["addition"]["answer"]]
    assert add["score"].tolist() == pytest.approx(want, abs=1e-12)
    assert add["exact"].tolist() == [True, False, False, False, False]
    assert rows[rows.task == "minmax"]["score"].tolist() == [1.0, 0.0]
    assert add["answer"].tolist() == frames["addition"]["answer"].tolist()  # rows stay with their question
    summary = summarize(rows).set_index("task")
    assert summary.loc["addition", "score"] == pytest.approx(sum(want) / 5, abs=1e-12)
    assert summary.loc["addition", "exact"] == pytest.approx(0.2)
    assert summary.loc["minmax", "score"] == pytest.approx(0.5)
    n_in = [len(tok.encode(f"<|bos|>{p}<|eoq|>")[0]) for p in frames["addition"]["prompt"]]
    assert summary.loc["addition", "tokens"] == pytest.approx(sum(n_in) / 5 + 2)
