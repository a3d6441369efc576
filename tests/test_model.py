"""The GPT: packing, the sample-boundary mask, the question mask, the number head, KV cache."""

import numpy as np
import pytest
import torch

from workbench import encoders
from workbench.measures.evaluate import answer, score
from workbench.model.fused import attention_plan
from workbench.model.gpt import GPT, KVCache, packed_mask, preset
from workbench.tasks import Regime
from workbench.tokenizer import Tokenizer
from workbench.training.batches import number_fields
from workbench.training.data import NotEnoughSamples, make_pool, next_batch, pack
from workbench.training.loss import losses as train_losses


@pytest.fixture(scope="module")
def tok():
    return Tokenizer("bittokens")


def tiny(tok, name="bittokens"):
    torch.manual_seed(0)
    cfg = preset("cpu-tiny")
    vocab = tok.vocab_size if name == "bittokens" else Tokenizer(name).vocab_size
    model = GPT(cfg, encoders.get(name), vocab, tok.num_id)
    for block in model.blocks:  # the zero-initialised output projections would hide cross-talk
        torch.nn.init.normal_(block.attn.proj.weight, std=0.05)
        torch.nn.init.normal_(block.down.weight, std=0.05)
    return model


def batch_of(tok, pairs, context=40, rows=2):
    return pack([tok.sample(p, a) for p, a in pairs] * 40, rows, context, tok.pad_id, tok.num_id)


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


@pytest.mark.parametrize("context, blocked", [(40, False), (128, True)])
def test_attention_never_crosses_a_sample_boundary(tok, context, blocked):
    """Both attention paths: plain SDPA over the mask (40 tokens: nothing worth skipping) and the
    query blocks of fused.masked_attention (128 tokens of short samples)."""
    model = tiny(tok)
    b = batch_of(tok, [("1.5 + 2", "3.5"), ("12 * 3", "36")], context)
    assert (attention_plan(packed_mask(b["doc_ids"]))[1] is not None) == blocked
    captured = {}

    def keep(module, inputs, output):
        output.retain_grad()
        captured["emb"] = output

    model.wte.register_forward_hook(keep)
    logits = model.logits(b["ids"], b["values"], b["positions"], b["doc_ids"])
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
    model.number_head.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape[0]))
    losses = train_losses(model, number_fields(b, model.number_head, model.num_id))
    expected = b["loss_mask"] & (b["targets"] == tok.num_id)
    assert seen == [int(expected.sum())] and expected.sum() > 0
    # every such position sits on <|eoq|> (the answer is one number) and has the answer as value
    assert (b["ids"][expected] == tok.eoq_id).all()
    assert set(b["target_values"][expected].tolist()) == {3.5, 36.0}
    assert torch.isfinite(losses["loss"])
    # C.1's per-token loss: the number term is averaged over all targets, not over numbers alone
    share = b["number_count"] / b["ce_count"]
    assert torch.allclose(losses["loss"], losses["ce"] + 10 * losses["number"] * share)


@pytest.mark.parametrize("loss", ["per_token", "separate_means"])
def test_the_loss_is_c1s_formula_with_task_weights(tok, loss):
    """Against the loss written out from plain logits: per token CE, + 10 x the number loss where the
    target is <|num|>, times the task's weight, averaged over all targets (C.1); or the old form,
    weighted mean CE + 10 x the weighted number loss averaged over numbers only."""
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny", loss=loss), encoders.get("bittokens"), tok.vocab_size, tok.num_id)
    pairs = [("1.5 + 2", "3.5"), ("<|min|>4, 2", "2"), ("12 * 3", "36")]
    samples = [(*tok.sample(p, a), k % 2) for k, (p, a) in enumerate(pairs)] * 30
    b = pack(samples, 2, 40, tok.pad_id, tok.num_id)
    weights = torch.tensor([0.5, 2.0])
    losses = train_losses(model, number_fields(b, model.number_head, model.num_id), weights)
    logits = model.logits(b["ids"], b["values"], b["positions"], b["doc_ids"])
    hidden = model.trunk(b["ids"], b["values"], b["positions"], packed_mask(b["doc_ids"]))
    m = b["loss_mask"]
    ce = torch.nn.functional.cross_entropy(logits[m], b["targets"][m], reduction="none")
    at = b["targets"][m] == tok.num_id
    number = model.number_head.loss(model.number_head(hidden[m][at]), b["target_values"][m][at])
    w = weights[b["task_ids"][m]]
    if loss == "per_token":
        per_token = ce.clone()
        per_token[at] += 10 * number
        expected = (w * per_token).sum() / m.sum()
    else:
        expected = (w * ce).sum() / m.sum() + 10 * (w[at] * number).sum() / at.sum()
    assert torch.allclose(losses["loss"], expected, rtol=1e-5)
    assert torch.allclose(losses["ce"], ce.mean(), rtol=1e-5)
    per_task = ce.detach().clone()
    per_task[at] += 10 * number.detach()
    for task in (0, 1):
        mine = b["task_ids"][m] == task
        assert torch.allclose(losses["task_loss"][task], per_task[mine].sum(), rtol=1e-5)
        assert losses["task_tokens"][task] == mine.sum()


@pytest.mark.parametrize("bias, norm_weight", [(True, True), (False, False)])
def test_the_last_block_at_the_loss_rows_gives_the_whole_blocks_loss_and_gradients_bit_for_bit(tok, bias, norm_weight):
    """The training forward runs the last block past its attention on the loss positions only; the
    loss and every gradient must equal the whole block's bit for bit (else runs stop retracing)."""
    torch.manual_seed(0)
    model = GPT(
        preset("cpu-tiny", bias=bias, norm_weight=norm_weight), encoders.get("bittokens"), tok.vocab_size, tok.num_id
    )
    pools = {"multiplication": make_pool("multiplication", 300, tok, seed=0, split="train", regime=Regime((0, 1), 2))}
    b = next_batch(pools, {"multiplication": 200}, np.random.default_rng(0), None, 4, 128, tok.pad_id, tok.num_id)
    results = []
    for whole in (False, True):
        if whole:  # the plain path: every row through the last block, then the loss rows
            model._last_block_on_rows = lambda x, rows: False
        losses = train_losses(model, number_fields(b, model.number_head, model.num_id), torch.tensor([0.7]))
        losses["loss"].backward()
        results.append([losses["loss"].detach()] + [p.grad for p in model.parameters()])
        model.zero_grad(set_to_none=True)
    assert 0 < b["loss_mask"].float().mean() < 0.5  # most rows are skipped
    assert all(torch.equal(a, w) for a, w in zip(*results))


def test_packed_sample_gives_the_same_logits_as_the_sample_alone(tok):
    """Positions restart and nothing leaks in: a sample's logits do not depend on its neighbours."""
    model = tiny(tok).eval()
    b = batch_of(tok, [("1.5 + 2", "3.5"), ("12 * 3", "36"), ("<|min|>4, 2, 9", "2")], context=60)
    logits = model.logits(b["ids"], b["values"], b["positions"], b["doc_ids"])
    row, doc = 1, int(b["doc_ids"][1, 20])
    at = b["doc_ids"][row] == doc
    assert b["positions"][row][at][0] == 0 and at.nonzero()[0, 0] > 0
    alone = model.logits(
        b["ids"][row][at][None],
        b["values"][row][at][None],
        b["positions"][row][at][None],
        torch.zeros(1, int(at.sum()), dtype=torch.long),
    )
    assert torch.allclose(logits[row][at], alone[0], atol=1e-5)


def rows_of(batch: dict, rank: int, world: int) -> dict:
    """The rank-th of `world` equal slices of the batch's rows; the counts stay the whole batch's."""
    per = batch["ids"].shape[0] // world
    return {k: v if v.ndim == 0 else v[rank * per : (rank + 1) * per] for k, v in batch.items()}


def test_global_counts_make_row_slices_add_up_to_the_whole_batch(tok):
    """What data-parallel training relies on: losses of row slices, each divided by the counts of the
    whole batch, sum to the loss of the whole batch."""
    model = tiny(tok)
    b = batch_of(tok, [("1.5 + 2", "3.5"), ("12 * 3", "36"), ("7 - 10", "-3")], context=30, rows=4)
    whole = train_losses(model, number_fields(b, model.number_head, model.num_id))
    parts = [
        train_losses(model, number_fields(rows_of(b, rank, 2), model.number_head, model.num_id)) for rank in range(2)
    ]
    for key in ("loss", "ce", "number"):
        assert torch.allclose(whole[key], parts[0][key] + parts[1][key], atol=1e-5)
    assert torch.allclose(
        whole["ce"],
        torch.nn.functional.cross_entropy(
            model.logits(b["ids"], b["values"], b["positions"], b["doc_ids"])[b["loss_mask"]],
            b["targets"][b["loss_mask"]],
        ),
        atol=1e-5,
    )


def test_param_groups_partition_every_parameter(tok):
    """C.1's groups: scalars (ndim < 2: biases, norm gains) at 0.02, the blocks' matrices with Muon,
    the token embedding at 0.03, everything else (lm head, number head, its joins) at 0.004."""
    for name, options in [
        ("bittokens", {}),
        ("bittokens", {"combine": "weighted"}),
        ("xval", {}),
        ("fone", {}),
        ("single_digit", {}),
    ]:
        cfg = preset("cpu-tiny")
        model = GPT(cfg, encoders.get(name, **options), 3000)
        groups = model.param_groups()
        ids = [id(p) for ps in groups.values() for p in ps]
        assert sorted(ids) == sorted(id(p) for p in model.parameters())  # each exactly once
        assert all(p.ndim == 2 for p in groups["hidden"]) and len(groups["hidden"]) == 4 * cfg.n_layer
        assert [p for p in groups["embedding"]] == [model.wte.weight]
        assert all(p.ndim < 2 for p in groups["scalar"]) and any(p is model.norm.weight for p in groups["scalar"])
        assert any(p is model.lm_head.weight for p in groups["head"])
        if model.number_head is None:  # digit encodings: no number head at all
            assert name == "single_digit"
            continue
        matrices = [p for p in model.number_head.parameters() if p.ndim == 2]  # FoNE's LayerNorm head has none
        assert all(any(p is q for q in groups["head"]) for p in matrices) and (matrices or name == "fone")
        if options:
            assert any(p is model.number_head.combine.weight for p in groups["head"])


def test_kv_cache_matches_full_recompute(tok):
    model = tiny(tok).eval()
    ids, values = tok.encode("<|bos|>1.5 + 2<|eoq|>3.5 and more text")
    ids, values = torch.from_numpy(ids)[None], torch.from_numpy(values)[None]
    T = ids.shape[1]
    pos = torch.arange(T)[None]
    full = model.trunk(ids, values, pos, packed_mask(torch.zeros(1, T, dtype=torch.long)))
    k = 5
    cache = KVCache(len(model.blocks), torch.ones(1, k, dtype=torch.bool))
    first = model.trunk(ids[:, :k], values[:, :k], pos[:, :k], packed_mask(torch.zeros(1, k, dtype=torch.long)), cache)
    steps = [first[:, -1]]
    for t in range(k, T):
        out = model.trunk(
            ids[:, t : t + 1],
            values[:, t : t + 1],
            pos[:, t : t + 1],
            torch.ones(1, 1, 1, t + 1, dtype=torch.bool),
            cache,
        )
        steps.append(out[:, -1])
    assert torch.allclose(torch.stack(steps[:-1], 1), full[:, k - 1 : -1], atol=1e-4)


def test_generate_and_score_run_for_every_encoding(tok):
    for name in ["bittokens", "fone", "xval", "single_digit", "triple_digit"]:
        t = Tokenizer(name)
        cfg = preset("cpu-tiny")
        model = GPT(cfg, encoders.get(name), t.vocab_size, t.num_id)
        texts, n_in, n_out = answer(model, t, ["1.5 + 2", "<|min|>3, 4"], max_new_tokens=4)
        assert len(texts) == 2 and all(isinstance(s, str) for s in texts)
        assert all(n > 0 for n in n_in) and all(1 <= n <= 4 for n in n_out)


def test_score_rules():
    s = score("addition", ["3.5", "abc", "3.6"], ["3.5", "3.5", "3.5"])
    assert list(s["exact"]) == [True, False, False] and s["score"][1] == 0
    assert list(score("interval", ["A", "B"], ["A", "C"])["exact"]) == [True, False]
    assert list(score("sorting", ["1, 2", "2, 1"], ["1, 2", "1, 2"])["exact"]) == [True, False]
    assert list(score("minmax", ["2", "2.0", "3"], ["2", "2", "2"])["exact"]) == [True, True, False]


def test_pack_lays_samples_token_by_token_and_cuts_the_last_of_each_row():
    """Against a token-by-token reference: samples fill the rows in order, the one that reaches a
    row's end is cut (its rest is dropped), positions restart and doc ids count every sample."""
    rng = np.random.default_rng(1)
    samples = [
        (rng.integers(3, 9, n), rng.normal(size=n), rng.random(n) < 0.5, int(rng.integers(3)))
        for n in rng.integers(0, 30, 60)
    ]
    rows, width = 4, 41
    expected = {name: [[], [], [], []] for name in ("ids", "values", "mask", "doc", "pos", "task")}
    row = 0
    for k, (ids, values, mask, task) in enumerate(samples):
        for i in range(len(ids)):
            if row == rows:
                break
            for name, value in zip(expected, (ids[i], values[i], mask[i], k, i, task)):
                expected[name][row].append(value)
            if len(expected["ids"][row]) == width:
                row += 1
                break  # the rest of the sample is cut
    b = pack(samples, rows, width - 1, 0, 4)
    ids, values, doc = np.array(expected["ids"]), np.array(expected["values"]), np.array(expected["doc"])
    assert b["ids"].tolist() == ids[:, :-1].tolist() and b["targets"].tolist() == ids[:, 1:].tolist()
    assert b["values"].tolist() == values[:, :-1].tolist() and b["target_values"].tolist() == values[:, 1:].tolist()
    assert b["doc_ids"].tolist() == doc[:, :-1].tolist()
    assert b["positions"].tolist() == np.array(expected["pos"])[:, :-1].tolist()
    assert b["task_ids"].tolist() == np.array(expected["task"])[:, 1:].tolist()
    loss_mask = np.array(expected["mask"])[:, 1:] & (doc[:, 1:] == doc[:, :-1])
    assert b["loss_mask"].tolist() == loss_mask.tolist() and int(b["ce_count"]) == loss_mask.sum()
    assert int(b["number_count"]) == (loss_mask & (ids[:, 1:] == 4)).sum() > 0


def test_next_batch_draws_again_when_long_samples_cannot_fill_the_rows(tok):
    pools = {"sorting": make_pool("sorting", 50, tok, seed=0, split="train", regime=Regime((0, 1), 2))}
    few = {"sorting": 2}  # two samples of ~20 tokens: far from 3 rows of 40
    with pytest.raises(NotEnoughSamples):
        pack(pools["sorting"].samples[:2], 3, 40, tok.pad_id, tok.num_id)
    rng = np.random.default_rng(0)
    batch = next_batch(pools, few, rng, None, 3, 40, tok.pad_id, tok.num_id)
    assert batch["ids"].shape == (3, 40) and (batch["ids"] != tok.pad_id).all()
    again = next_batch(pools, few, np.random.default_rng(0), None, 3, 40, tok.pad_id, tok.num_id)
    assert torch.equal(batch["ids"], again["ids"])  # seeded: the same rows


def test_the_gpu_way_of_reading_numbers_gives_the_cpu_answers(tok):
    """On a GPU the number head reads every row and keeps the <|num|> rows' values (no row selection
    for the host to wait on); on a CPU it reads the <|num|> rows only. Both give the same tokens and
    the same numbers (to float32 rounding of a batch's products)."""
    for name in ("bittokens", "xval", "fone"):
        t = Tokenizer(name)
        model = GPT(preset("cpu-tiny"), encoders.get(name), t.vocab_size, t.num_id).eval()
        torch.manual_seed(1)
        with torch.no_grad():
            model.lm_head.weight[t.num_id] += 0.5  # half the rows write <|num|>
            hidden = torch.randn(64, model.cfg.d_model)
            rows, rows_value = model._next_token(hidden, every_row=False)
            every, every_value = model._next_token(hidden, every_row=True)
        assert torch.equal(rows, every) and 0 < int((rows == t.num_id).sum()) < 64
        assert torch.allclose(rows_value, every_value, rtol=1e-6, atol=0), name
        assert torch.equal(every_value[rows != t.num_id], torch.zeros_like(every_value[rows != t.num_id]))


def test_the_kv_cache_grows_past_its_capacity(tok):
    """A cache made for fewer tokens than a caller feeds it doubles its buffers and keeps every key."""
    cache = KVCache(1, torch.ones(2, 3, dtype=torch.bool), capacity=3)
    keys = [torch.randn(2, 1, 3, 4)] + [torch.randn(2, 1, 1, 4) for _ in range(6)]
    for k in keys:
        got, _ = cache.extend(0, k, k)
    assert torch.equal(got, torch.cat(keys, 2))
    for _ in range(6):
        cache.grow()
    assert cache.visible.shape == (2, 9) and bool(cache.visible.all())
