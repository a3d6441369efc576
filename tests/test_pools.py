"""A training pool's samples (`data.build_pool`) are the tokenizer's samples of the generated
questions, tokenized when first read: the same arrays an eager list would hold, for every way a run
reads them (one index, a slice, from the end, `Pool.take`)."""

import numpy as np
import pytest

from workbench.tasks import Regime
from workbench.tokenizer import Tokenizer
from workbench.training.data import build_pool

D15 = Regime((0, 1), 15)


def same(a, b) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize(
    "task, encoding, regime",
    [("multiplication", "bittokens", D15), ("multiplication", "single_digit", D15), ("text", "single_digit", None)],
)
def test_a_pool_holds_the_tokenizers_sample_of_each_question(task, encoding, regime):
    tok = Tokenizer(encoding)
    pool = build_pool(task, 200, tok, 3, "train", regime)
    frame = pool.frame
    if task == "text":
        oracle = [tok.text_sample(t) for t in frame["answer"]]
    else:
        oracle = [tok.sample(p, a) for p, a in zip(frame["prompt"], frame["answer"])]
    picks = np.array([199, 0, 7, 7, 150, 42])  # a repeat, both ends
    assert all(same(s, oracle[i]) for s, i in zip(pool.take(picks), picks))
    assert same(pool.samples[-1], oracle[-1]) and same(pool.samples[-200], oracle[0])
    assert all(same(s, o) for s, o in zip(pool.samples[10:20:3], oracle[10:20:3]))
    assert all(same(s, o) for s, o in zip(pool.samples, oracle))  # and every one, in order
    assert pool.samples[7] is pool.take([7])[0]  # tokenized once, then kept
    assert len(pool.samples) == 200 and pool.mean_length == np.mean([len(s[0]) for s in oracle])
    for bad in (200, -201):
        with pytest.raises(IndexError):
            pool.samples[bad]
    with pytest.raises(IndexError):
        pool.take([200])


def test_a_pool_tokenizes_only_the_questions_a_run_reads(monkeypatch):
    tok = Tokenizer("bittokens")
    calls = []
    sample = tok.sample
    monkeypatch.setattr(tok, "sample", lambda p, a: calls.append(p) or sample(p, a))
    pool = build_pool("addition", 5000, tok, 0, "train", Regime((0, 1), 4))
    assert calls == []
    pool.take([9, 9, 4000])
    assert calls == [pool.frame["prompt"][9], pool.frame["prompt"][4000]]
