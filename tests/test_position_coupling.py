"""Position coupling against the source's position IDs, recorded here; its random start in
training; the same places as Abacus's on integers; bad options; a tiny training run.

The recorded IDs: HanseulJo/position-coupling at b9cad94, `src/data/addition.py`'s
`AdditionDatasetWithCoupledPositions(..., reverse_input=True, reverse_output=True, padding=False,
randomize=False)[0]` for the inputs "a+b" (reversed) and labels "a+b" (reversed), run in a scratch
venv (torch 2.13.0, the package's __init__ files emptied so that only the dataset loads); the
model's IDs are [0] + input_positions + label_positions (`src/common/training_utils.py`)."""

import pytest
import torch
import zoo_checks

from workbench import encoders
from workbench.tokenizer import Tokenizer

SOURCE = {  # (a, b): ([0] + input_positions + label_positions), for "<bos> a + b = a+b"
    (307, 25): [0, 2, 3, 4, 1, 2, 3, 1, 2, 3, 4],
    (9, 91): [0, 2, 1, 2, 3, 1, 2, 3, 4],
    (1234, 5): [0, 2, 3, 4, 5, 1, 2, 1, 2, 3, 4, 5],
    (0, 0): [0, 2, 1, 2, 1, 2],
    (99999, 1): [0, 2, 3, 4, 5, 6, 1, 2, 1, 2, 3, 4, 5, 6, 7],
}


@pytest.fixture(scope="module")
def tok():
    return Tokenizer("position_coupling")


def ids_of(tok, a, b):
    ids, _ = tok.encode(f"<|bos|>{a} + {b}<|eoq|>{a + b}<|eos|>")
    return torch.as_tensor(ids)


@pytest.mark.parametrize("a, b", list(SOURCE))
def test_the_ids_are_the_sources(tok, a, b):
    module = encoders.get("position_coupling").token_module(16, tok.piece_ids).eval()
    ids = ids_of(tok, a, b)
    got = module.positions(ids[None], torch.zeros(1, len(ids), dtype=torch.long))[0].tolist()
    tokens = [tok.tokens_of("<|bos|>")[0]] + tok.tokens_of(f"{a} + {b}<|eoq|>{a + b}<|eos|>")
    # the source's tokens: <bos>, digits, "+", "=" (our <|eoq|>); ours add the text's space and <|eos|>
    kept = [g for g, t in zip(got, tokens) if t.isdigit() or "+" in t or t in ("<|bos|>", "<|eoq|>")]
    assert kept == SOURCE[(a, b)]
    assert all(g == 1 for g, t in zip(got, tokens) if not t.isdigit() and t != "<|bos|>")  # every other token: s


def test_training_draws_one_start_per_sample_within_max_position(tok):
    torch.manual_seed(0)
    module = encoders.get("position_coupling", max_position=20).token_module(16, tok.piece_ids).train()
    rows = [ids_of(tok, 307, 25), ids_of(tok, 1234, 5)]
    ids = torch.cat(rows)[None]
    doc_ids = torch.cat([torch.full((len(r),), k) for k, r in enumerate(rows)])[None]
    eval_ids = module.positions(ids, doc_ids)
    highest = [3, 4]  # the samples' highest places: 307 + 25 = 332, 1234 + 5 = 1239
    seen = [set(), set()]
    for _ in range(400):
        start = module.starts(ids, doc_ids)
        got = module.positions(ids, doc_ids, start)
        for k in range(2):
            assert 1 <= start[k + 1] <= 20 - highest[k]
            mine, before = got[doc_ids == k], eval_ids[doc_ids == k]
            assert mine[0] == 0 and (mine[1:] == before[1:] + start[k + 1] - 1).all()  # one shift a sample
            seen[k].add(int(start[k + 1]))
    assert seen == [set(range(1, 18)), set(range(1, 17))]  # every start it may draw, and no other
    assert module.embed(ids, doc_ids).shape == (1, ids.shape[1], 16)
    assert torch.equal(module.eval().embed(ids, doc_ids), module.embedding(eval_ids))


def test_the_digits_places_are_abacuss_on_integers(tok):
    """On integers the coupled ID of a digit is s + its Abacus place (Abacus's own count, reversed digits)."""
    coupling = encoders.get("position_coupling").token_module(16, tok.piece_ids).eval()
    abacus_tok = Tokenizer("abacus")
    abacus = encoders.get("abacus", positions="source").token_module(16, abacus_tok.piece_ids).eval()
    for a, b in SOURCE:
        ids = ids_of(tok, a, b)
        mine = coupling.positions(ids[None], torch.zeros(1, len(ids), dtype=torch.long))[0]
        places = abacus.places(ids_of(abacus_tok, a, b)[None])[0]
        assert (mine[places > 0] == places[places > 0] + 1).all()
        assert (
            (places == 0)
            == torch.tensor([not t.isdigit() for t in tok.tokens_of(f"<|bos|>{a} + {b}<|eoq|>{a + b}<|eos|>")])
        ).all()


def test_bad_options():
    zoo_checks.bad_options("position_coupling")
    for bad in (1, 10_001, True, 2.5):
        with pytest.raises(ValueError, match="position_coupling: max_position"):
            encoders.get("position_coupling", max_position=bad)


def test_tiny_training(tmp_path, monkeypatch):
    codec = encoders.get("position_coupling")
    zoo_checks.tiny_training(
        "position_coupling", tmp_path, pieces_of=codec.number_tokens, value_of=lambda p: value_of(codec, p)
    )
    zoo_checks.runs_by_name("position_coupling", tmp_path, monkeypatch)


def value_of(codec, pieces):
    try:
        return float(codec.number_text(pieces))
    except ValueError:
        return None
