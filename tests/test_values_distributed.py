"""Evaluation shared out over ranks (workbench/runs/distributed.py), for world sizes 1 to 5 (issue 40).

Each rank of a world runs as a thread here, and torch.distributed's two collectives that the
sharing calls are stood in for by the threads' own (all_gather_object, all_reduce with SUM), so
every rank's share is computed by the code under test with a fake rank and world. The oracle:
every question is answered exactly once and the gathered answers are one process's, in its order;
every text's tokens are counted exactly once, whatever the world size, including worlds with
more ranks than texts and splits that leave a remainder. A second check runs a real tiny model."""

import math
import threading

import numpy as np
import pandas as pd
import pytest
import torch

from workbench import encoders, tasks
from workbench.model.gpt import GPT, preset
from workbench.runs import distributed
from workbench.tokenizer import Tokenizer


class Collectives:
    """all_gather_object and all_reduce over `world` threads; each thread says its rank first."""

    def __init__(self, world: int):
        self.world, self.local = world, threading.local()
        self.barrier = threading.Barrier(world, timeout=60)
        self.slots = [None] * world

    def _exchange(self, value):
        self.slots[self.local.rank] = value
        self.barrier.wait()
        everything = list(self.slots)
        self.barrier.wait()  # every rank has read before the next call writes
        return everything

    def all_gather_object(self, out, obj, group=None):
        out[:] = self._exchange(obj)

    def all_reduce(self, tensor, op=None, group=None, async_op=False):
        tensor.copy_(torch.stack([t.clone() for t in self._exchange(tensor.clone())]).sum(0))


def on_every_rank(world, monkeypatch, fn):
    """fn(rank, world) on `world` threads with the stand-in collectives; the ranks' results."""
    fake = Collectives(world)
    monkeypatch.setattr(distributed.dist, "all_gather_object", fake.all_gather_object)
    monkeypatch.setattr(distributed.dist, "all_reduce", fake.all_reduce)
    results, errors = [None] * world, []

    def run(rank):
        fake.local.rank = rank
        try:
            results[rank] = fn(rank, world)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
            fake.barrier.abort()

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise errors[0]
    return results


def answered(frames):
    """A stand-in for evaluate: one row per question, in order, as evaluate's answers are."""
    return pd.concat(
        [frame.assign(task=task, prediction=frame["answer"]) for task, frame in frames.items()], ignore_index=True
    )


def question_frames():
    """Two tasks whose sizes leave remainders against the evaluation batch, and one short task."""
    b = distributed.BATCH
    sizes = {"addition": 3 * b + 5, "minmax": b - 1, "multiplication": 2}
    return {
        t: pd.DataFrame({"prompt": [f"{t} q{i}" for i in range(n)], "answer": [str(i) for i in range(n)]})
        for t, n in sizes.items()
    }


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
def test_every_question_is_answered_once_and_in_one_process_order(world, monkeypatch):
    """Bugs: batches dealt out so that one rank's share is skipped or dealt twice (a remainder
    lost), the gathered answers out of order, a rank left with a different table."""
    calls = []

    def fake_evaluate(model, tok, frames, max_new_tokens=None):
        calls.append([(t, p) for t, f in frames.items() for p in f["prompt"]])
        return answered(frames)

    monkeypatch.setattr(distributed, "evaluate", fake_evaluate)
    frames = question_frames()
    every = on_every_rank(
        world, monkeypatch, lambda rank, world: distributed.evaluate_shared(None, None, frames, None, rank, world)
    )
    expected = answered(frames)
    for table in every:
        pd.testing.assert_frame_equal(table, expected)
    asked = [q for call in calls for q in call]
    assert sorted(asked) == sorted((t, p) for t, f in frames.items() for p in f["prompt"])  # once each
    if world > 1:  # each call is one batch of evaluate's own size, within one task
        assert all(len(call) <= distributed.BATCH and len({t for t, _ in call}) == 1 for call in calls)


class Texts:
    """A stand-in for perplexity over texts whose cross-entropy sums are known: text k has
    tokens_k targets, of which text_k are text, and a CE of ce_k on each."""

    def __init__(self, n):
        rng = np.random.default_rng(n)
        self.texts = [f"text {k}" for k in range(n)]
        self.tokens = {t: int(rng.integers(3, 40)) for t in self.texts}
        self.text = {t: int(rng.integers(0, self.tokens[t] + 1)) for t in self.texts}
        self.ce = {t: float(rng.uniform(0.5, 5)) for t in self.texts}
        self.seen = []

    def perplexity(self, model, tok, texts, progress=True, **_):
        texts = list(texts)
        self.seen += texts
        tokens, text = sum(self.tokens[t] for t in texts), sum(self.text[t] for t in texts)
        ce_all = sum(self.ce[t] * self.tokens[t] for t in texts) / tokens
        ce_text = sum(self.ce[t] * self.text[t] for t in texts) / text if text else math.nan
        return {
            "ppl_all": math.exp(ce_all),
            "ppl_text": math.exp(ce_text),
            "ce_all": ce_all,
            "ce_text": ce_text,
            "tokens": tokens,
            "text_tokens": text,
            "samples": len(texts),
        }

    def pooled(self):
        tokens, text = sum(self.tokens.values()), sum(self.text.values())
        return (
            sum(self.ce[t] * self.tokens[t] for t in self.texts) / tokens,
            sum(self.ce[t] * self.text[t] for t in self.texts) / text,
            tokens,
            text,
        )


class FakeModel:
    lm_head = torch.nn.Linear(1, 1)


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("n_texts", [1, 3, 7, 10])
def test_every_text_is_counted_once_whatever_the_world_size(world, n_texts, monkeypatch):
    """Bugs: a contiguous share that drops the remainder (floor instead of ceiling), shares that
    overlap, a rank's sums counted twice or its token count taken as its CE sum."""
    texts = Texts(n_texts)
    monkeypatch.setattr(distributed, "perplexity", texts.perplexity)
    every = on_every_rank(
        world,
        monkeypatch,
        lambda rank, world: distributed.perplexity_shared(FakeModel(), None, texts.texts, rank, world, progress=False),
    )
    assert sorted(texts.seen) == sorted(texts.texts)  # each text scored by exactly one rank
    ce_all, ce_text, tokens, text = texts.pooled()
    for got in every:
        assert got["tokens"] == tokens and got["text_tokens"] == text and got["samples"] == n_texts
        assert got["ce_all"] == pytest.approx(ce_all, rel=1e-12) and got["ce_text"] == pytest.approx(ce_text, rel=1e-12)
        assert got["ppl_all"] == pytest.approx(math.exp(ce_all), rel=1e-12)
        assert got["ppl_text"] == pytest.approx(math.exp(ce_text), rel=1e-12)


@pytest.fixture(scope="module")
def tiny():
    tok = Tokenizer("xval")
    torch.manual_seed(0)
    model = GPT(preset("cpu-tiny"), encoders.get("xval"), tok.vocab_size, tok.num_id)
    return model, tok


def test_a_real_model_shared_out_gives_one_processs_answers_and_perplexity(tiny, monkeypatch):
    """The same with the real evaluate and perplexity on a tiny random model, 3 ranks (one of them
    with no batch of questions, one with a single text): the shared-out answers and perplexity are
    one process's (perplexity pools sums: equal up to rounding)."""
    model, tok = tiny
    frames = {
        "addition": tasks.generate(
            "addition", distributed.BATCH + 3, seed=1, split="val", decades=(0, 1), max_digits=2
        )[["prompt", "answer"]]
    }
    texts = list(tasks.generate("text", 7, seed=0, split="val")["answer"].str.slice(0, 300))
    alone = distributed.evaluate_shared(model, tok, frames, 4, 0, 1)
    ppl = distributed.perplexity_shared(model, tok, texts, 0, 1, progress=False)
    lock = threading.Lock()  # one rank at a time in the model (the threads share it); collectives outside
    for name in ("evaluate", "perplexity"):
        real = getattr(distributed, name)
        monkeypatch.setattr(distributed, name, lambda *a, real=real, **k: _locked(lock, real, *a, **k))
    every = on_every_rank(
        3,
        monkeypatch,
        lambda rank, world: (
            distributed.evaluate_shared(model, tok, frames, 4, rank, world),
            distributed.perplexity_shared(model, tok, texts, rank, world, progress=False),
        ),
    )
    for answers, shared in every:
        pd.testing.assert_frame_equal(answers, alone)
        assert shared["tokens"] == ppl["tokens"] and shared["text_tokens"] == ppl["text_tokens"]
        assert shared["ppl_all"] == pytest.approx(ppl["ppl_all"], rel=1e-9)
        assert shared["ppl_text"] == pytest.approx(ppl["ppl_text"], rel=1e-9)


def _locked(lock, fn, *args, **kwargs):
    with lock:
        return fn(*args, **kwargs)
