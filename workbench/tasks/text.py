"""Text task: 1000-character chunks of prose, prompt "" and answer = chunk.

The prose comes from the regime's text source (`Regime.text_source`, see text_sources.py): the
shipped corpus (Python 3.11.7's pydoc topics) by default, local files or a Hugging Face dataset. Splits are by document (a
hash of it), so val/test text never appears in train. A chunk is a uniform window of a document;
documents are drawn in proportion to their length (every character about equally likely, as the
authors' random windows of a token stream), the shipped topics uniformly (as since the first version,
so its samples stay the same). The frame's `topic` names the document: the shipped topic, or
"PATH#k" / "DATASET#k" for the k-th document read from a file or dataset.
"""

import numpy as np
import pandas as pd

from .base import Task
from .registry import register
from .sampling import SPLITS, question_hash, split_of
from .text_sources import corpus

CHUNK_CHARS = 1000


def documents(text_source: str):
    """The source's documents (text_sources.Corpus), refused when a split would get none."""
    docs = corpus(text_source)
    counts = np.bincount(split_of(question_hash(docs.ids)), minlength=len(SPLITS))
    if not counts.all():
        raise ValueError(
            f"text source {text_source!r}: its {len(docs.texts)} documents give "
            f"{dict(zip(SPLITS, counts.tolist()))} to the splits; each split needs one "
            "(a document's split is a hash of it: ~30 documents make that likely)"
        )
    return docs


def draw(rng, m, regime):
    docs = documents(regime.text_source)
    if docs.weighted:
        ends = np.cumsum(docs.lengths)
        which = np.searchsorted(ends, rng.random(m) * ends[-1], side="right")
    else:
        which = rng.integers(0, len(docs.texts), m)
    lengths = docs.lengths[which]
    start = (rng.random(m) * np.maximum(lengths - CHUNK_CHARS, 1)).astype(np.int64)
    start = np.where(lengths > CHUNK_CHARS, start, 0)
    chunks = [docs.texts[d][s : s + CHUNK_CHARS] for d, s in zip(which.tolist(), start.tolist())]
    names = [docs.names[d] for d in which.tolist()]
    return dict(
        answer=np.array(chunks, dtype=object),
        topic=np.array(names, dtype=object),
        valid=np.ones(m, bool),
        key=question_hash(docs.ids[which]),
    )


def build(c, limit):
    chunks, names = c["answer"][:limit].tolist(), c["topic"][:limit].tolist()
    n = len(chunks)
    return pd.DataFrame(
        {
            "prompt": [""] * n,
            "text_prompt": [""] * n,
            "answer": chunks,
            "difficulty": np.zeros(n, np.int64),
            "difficulty_sd": np.zeros(n, np.int64),
            "topic": names,
        }
    )


TEXT = register(
    Task(
        name="text",
        family="text",
        label="Text",
        answer="text",
        metric="perplexity",
        draw=draw,
        build=build,
        max_difficulty=lambda base: 0,
    )
)
