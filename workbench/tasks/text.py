"""Text task: chunks of the embedded corpus (stdlib `pydoc_data.topics`), prompt "" and answer = chunk.

Splits are by topic (hash of the topic name), so val/test text never appears in train.
"""
import zlib

import numpy as np
import pandas as pd

from . import register
from .base import Task
from .sampling import question_hash

CHUNK_CHARS = 1000


def _topics():
    from pydoc_data.topics import topics
    return sorted(topics.items())


def draw(rng, m, regime):
    items = _topics()
    which = rng.integers(0, len(items), m)
    lengths = np.array([len(items[i][1]) for i in which.tolist()])
    start = (rng.random(m) * np.maximum(lengths - CHUNK_CHARS, 1)).astype(np.int64)
    start = np.where(lengths > CHUNK_CHARS, start, 0)
    key = question_hash(np.array([zlib.crc32(items[i][0].encode()) for i in which.tolist()], dtype=np.int64))
    return dict(topic=which, start=start, valid=np.ones(m, bool), key=key)


def build(c, limit):
    items = _topics()
    c = {k: v[:limit] for k, v in c.items()}
    chunks = [items[t][1][s:s + CHUNK_CHARS] for t, s in zip(c["topic"].tolist(), c["start"].tolist())]
    names = [items[t][0] for t in c["topic"].tolist()]
    n = len(chunks)
    return pd.DataFrame({"prompt": [""] * n, "text_prompt": [""] * n, "answer": chunks,
                         "difficulty": np.zeros(n, np.int64), "difficulty_sd": np.zeros(n, np.int64),
                         "topic": names})


TEXT = register(Task(name="text", family="text", label="Text", answer="text", metric="perplexity",
                     draw=draw, build=build, max_difficulty=lambda base: 0))
