"""The GPT: packing, the sample-boundary mask, the question mask, the number head, KV cache."""
import numpy as np
import pytest
import torch

from workbench import encoders
from workbench.data import pack
from workbench.evaluate import generate, score
from workbench.model import GPT, packed_mask, preset
from workbench.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tok():
    return Tokenizer("bittokens")


def tiny(tok, name="bittokens"):
    torch.manual_seed(0)
    cfg = preset("cpu-tiny")
    return GPT(cfg, encoders.get(name, d_model=cfg.d_model), Tokenizer(name).vocab_size if name != "bittokens"
               else tok.vocab_size, tok.num_id)


def batch_of(tok, pairs, context=40):
    return pack([tok.sample(p, a) for p, a in pairs] * 12, 2, context, tok.pad_id)


def test_pack_restarts_positions_and_masks_questions(tok):
    b = batch_of(tok, [("1.5 + 2", "3.5"), ("<|min|>4, 2", "2")])
    ids, pos, doc, mask = b["ids"][0], b["positions"][0], b["doc_ids"][0], b["loss_mask"][0]
    starts = torch.nonzero(ids == tok.bos_id).flatten()
    assert (pos[starts] == 0).all() and len(starts) >= 2
    for s in starts.tolist():  # inside a sample the question (bos .. eoq) is never a target
        eoq = s + int(torch.nonzero(ids[s:] == tok.eoq_id)[0, 0])
        assert not mask[s:eoq].any()
    # a target is never the first token of the next sample
    assert not mask[b["targets"][0] == tok.bos_id].any()
    assert torch.equal(doc[1:] >= doc[:-1], torch.ones(len(doc) - 1, dtype=torch.bool))


def test_attention_never_crosses_a_sample_boundary(tok):
    model = tiny(tok)
    b = batch_of(tok, [("1.5 + 2", "3.5"), ("12 * 3", "36")])
    captured = {}
    def keep(module, inputs, output):
        output.retain_grad()
        captured["emb"] = output
    model.wte.register_forward_hook(keep)
    logits, _ = model(b["ids"], b["values"], b["positions"], packed_mask(b["doc_ids"]))
    doc = b["doc_ids"][0]
    logits[0, doc == 1].sum().backward()
    grad = captured["emb"].grad[0].abs().sum(-1)
    assert grad[doc == 0].max() == 0  # the earlier sample gets no gradient
    assert grad[doc == 1].max() > 0
    assert grad[doc == 2].max() == 0  # nor the later one (causal)


def test_number_head_reads_positions_whose_next_token_is_num(tok):
    model = tiny(tok)
    b = batch_of(tok, [("1.5 + 2", "3.5"), ("12 * 3", "36")])
    seen = []
    original = model.number.head
    model.number.head = lambda h: seen.append(h.shape[0]) or original(h)
    loss, parts = model.loss(b)
    expected = int((b["loss_mask"] & (b["targets"] == tok.num_id)).sum())
    assert seen == [expected] and expected > 0
    assert "number" in parts and torch.isfinite(loss)


def test_param_groups_partition_every_parameter(tok):
    for name in ["bittokens", "xval", "fone"]:
        model = tiny(tok, name)
        groups = model.param_groups()
        ids = [id(p) for ps in groups.values() for p in ps]
        assert sorted(ids) == sorted(id(p) for p in model.parameters())
        assert all(p.ndim == 2 for p in groups["hidden"])
        assert any(p is model.lm_head.weight for p in groups["head"])
        assert any(p is model.wte.weight for p in groups["embedding"])


def test_kv_cache_matches_full_recompute(tok):
    model = tiny(tok).eval()
    ids, values = tok.encode("<|bos|>1.5 + 2<|eoq|>3.5 and more text")
    ids, values = torch.from_numpy(ids)[None], torch.from_numpy(values)[None]
    T = ids.shape[1]
    pos = torch.arange(T)[None]
    full, _ = model(ids, values, pos, packed_mask(torch.zeros(1, T, dtype=torch.long)))
    cache = [[] for _ in model.blocks]
    k = 5
    first, _ = model(ids[:, :k], values[:, :k], pos[:, :k], packed_mask(torch.zeros(1, k, dtype=torch.long)), cache)
    steps = [first[:, -1]]
    for t in range(k, T):
        out, _ = model(ids[:, t:t + 1], values[:, t:t + 1], pos[:, t:t + 1],
                       torch.ones(1, 1, 1, t + 1, dtype=torch.bool), cache)
        steps.append(out[:, -1])
    assert torch.allclose(torch.stack(steps[:-1], 1), full[:, k - 1:-1], atol=1e-4)


def test_generate_and_score_run_for_every_encoding(tok):
    for name in ["bittokens", "fone", "xval", "single_digit", "triple_digit"]:
        t = Tokenizer(name)
        cfg = preset("cpu-tiny")
        model = GPT(cfg, encoders.get(name, d_model=cfg.d_model), t.vocab_size, t.num_id)
        texts, n_in, n_out = generate(model, t, ["1.5 + 2", "<|min|>3, 4"], max_new_tokens=4)
        assert len(texts) == 2 and all(isinstance(s, str) for s in texts)
        assert all(n > 0 for n in n_in) and all(1 <= n <= 4 for n in n_out)


def test_score_rules():
    s = score("addition", ["3.5", "abc", "3.6"], ["3.5", "3.5", "3.5"])
    assert list(s["exact"]) == [True, False, False] and s["score"][1] == 0
    assert list(score("interval", ["A", "B"], ["A", "C"])["exact"]) == [True, False]
    assert list(score("sorting", ["1, 2", "2, 1"], ["1, 2", "1, 2"])["exact"]) == [True, False]
    assert list(score("minmax", ["2", "2.0", "3"], ["2", "2", "2"])["exact"]) == [True, True, False]
