"""Text -> (token ids, float64 values) -> text, for every number encoding.

Ids are laid out as: the special tokens, then the number pieces of a digit encoding (none for
single-token encodings), then a byte-level BPE trained locally with HF `tokenizers` on the
corpus with its digits removed. Numbers never reach the BPE: `numbers.parse_parts` cuts them out
first, so a digit can never merge into a text token. A single-token encoding writes each number
as <|num|> plus its value; a digit encoding writes its digit pieces.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from . import encoders
from .encoders.base import NumberEncoding
from .numbers import NUM_TOKEN, parse_parts, render

SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|eoq|>", "<|eos|>", NUM_TOKEN, "<|min|>", "<|max|>",
                  "<|asc|>", "<|desc|>", "<|intva|>", "<|mean|>", "<|std|>"]
# A literal "<|num|>" in input text stays text: only parsed numbers become <|num|> tokens.
_MARKERS = [t for t in SPECIAL_TOKENS if t != NUM_TOKEN]
_SPECIAL_SPLIT = re.compile("(" + "|".join(map(re.escape, _MARKERS)) + ")")
CACHE = Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "workbench")) / "tokenizers"


def corpus_text(files=None) -> str:
    """The training text: the standard library's pydoc topics (~465k characters) by default."""
    if files is None:
        from pydoc_data.topics import topics
        return "\n\n".join(topics[k] for k in sorted(topics))
    texts = []
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise ValueError(f"corpus file not found: {path}")
        texts.append(path.read_text(encoding="utf-8"))
    text = "\n\n".join(texts)
    if not text.strip():
        raise ValueError(f"the corpus files {list(map(str, files))} hold no text")
    return text


def _train_bpe(text: str, vocab_size: int, cache_dir: Path) -> HFTokenizer:
    """Byte-level BPE on the digit-free corpus, cached by the hash of corpus and size."""
    key = hashlib.sha1(f"{vocab_size}\n{text}".encode()).hexdigest()[:16]
    path = cache_dir / f"bpe-{key}.json"
    if path.exists():
        return HFTokenizer.from_file(str(path))
    bpe = HFTokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([re.sub(r"[0-9]", "", text)], trainer)
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".json")
    os.close(fd)
    bpe.save(tmp)
    os.replace(tmp, path)
    return bpe


class Tokenizer:
    """Special tokens + number scheme + BPE; see the module docstring for the id layout."""

    def __init__(self, encoding: NumberEncoding | str, vocab_size: int = 2048,
                 corpus_files=None, cache_dir=None):
        self.encoding = encoders.get(encoding) if isinstance(encoding, str) else encoding
        if vocab_size < 300:
            raise ValueError(f"vocab_size must be >= 300 (256 bytes + merges), got {vocab_size}")
        self.bpe = _train_bpe(corpus_text(corpus_files), vocab_size, Path(cache_dir or CACHE))
        self.pieces = [] if self.encoding.single_token else self.encoding.vocabulary()
        self.tokens = SPECIAL_TOKENS + self.pieces
        self.offset = len(self.tokens)  # first BPE id
        self.vocab_size = self.offset + self.bpe.get_vocab_size()
        self._id = {t: i for i, t in enumerate(self.tokens)}
        self.pad_id, self.bos_id, self.eoq_id, self.eos_id, self.num_id = range(5)

    def token_id(self, token: str) -> int:
        return self._id[token]

    def encode(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """ids int64 [L] and values float64 [L] (the number at <|num|> positions, 0 elsewhere)."""
        ids, values, text_runs = [], [], []  # text_runs: (position in ids, text) for the BPE
        for segment in _SPECIAL_SPLIT.split(text):
            if segment in _MARKERS:
                ids.append(self._id[segment])
                values.append(0.0)
                continue
            for part in parse_parts(segment, self.encoding.signed):
                if isinstance(part, str):
                    text_runs.append((len(ids), part))
                    ids.append(None)
                    values.append(0.0)
                elif self.encoding.single_token:
                    ids.append(self.num_id)
                    values.append(part)
                else:
                    for piece in self.encoding.number_tokens(render(part, 17)):
                        ids.append(self._id[piece])
                        values.append(0.0)
        if text_runs:  # one batched BPE call, then splice the runs in
            encoded = self.bpe.encode_batch([t for _, t in text_runs], add_special_tokens=False)
            out_ids, out_values, last = [], [], 0
            for (pos, _), enc in zip(text_runs, encoded):
                out_ids += ids[last:pos] + [i + self.offset for i in enc.ids]
                out_values += values[last:pos] + [0.0] * len(enc.ids)
                last = pos + 1
            ids, values = out_ids + ids[last:], out_values + values[last:]
        return np.array(ids, dtype=np.int64), np.array(values, dtype=np.float64)

    def decode(self, ids, values=None) -> str:
        ids = np.asarray(ids, dtype=np.int64)
        values = np.zeros(len(ids)) if values is None else np.asarray(values, dtype=np.float64)
        out, run = [], []
        for i, v in zip(ids.tolist(), values.tolist()):
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary (size {self.vocab_size})")
            if i >= self.offset:
                run.append(i - self.offset)
                continue
            if run:
                out.append(self.bpe.decode(run, skip_special_tokens=False))
                run = []
            out.append(render(v, 17) if i == self.num_id else self.tokens[i])
        if run:
            out.append(self.bpe.decode(run, skip_special_tokens=False))
        return "".join(out)

    def sample(self, prompt: str, answer: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A task sample "<|bos|>prompt<|eoq|>answer<|eos|>"; the loss skips the question."""
        ids, values = self.encode(f"<|bos|>{prompt}<|eoq|>{answer}<|eos|>")
        question_end = int(np.flatnonzero(ids == self.eoq_id)[0])
        loss_mask = np.arange(len(ids)) > question_end
        return ids, values, loss_mask

    def text_sample(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Plain corpus text "<|bos|>text<|eos|>": the loss covers every token after <|bos|>."""
        ids, values = self.encode(f"<|bos|>{text}<|eos|>")
        return ids, values, np.arange(len(ids)) > 0
