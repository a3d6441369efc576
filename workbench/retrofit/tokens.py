"""A Hugging Face tokenizer that reads numbers the workbench's way.

The workbench's special tokens (<|pad|> <|bos|> <|eoq|> <|eos|> <|num|> and every task's prompt
markers) are added to a copy of the model's tokenizer as special tokens, each checked to stay one
token. With a number encoding the text between markers goes through `numbers.parse_parts` first:
each number becomes <|num|> with its float64 value, and only the text around it reaches the
model's tokenizer, so no digit of a number is ever one of its tokens. Without one (`encoding`
None: the digit-token baseline) the text, numbers included, is tokenized by the model's own
tokenizer as it is.

Text runs are tokenized one at a time, as `workbench.tokenizer` does: " * " between two numbers
is the tokenizer's reading of " * " alone (a SentencePiece tokenizer adds its prefix space to
every run; training and generation see the same).

The interface is `workbench.tokenizer.Tokenizer`'s (encode, decode, sample, text_sample, pad_id,
eos_id, num_id), so `data.make_pool` and `evaluate.evaluate` take it as they are.
"""
from __future__ import annotations

import copy
from itertools import groupby

import numpy as np

from ..encoders.base import NumberEncoding
from ..numbers import NUM_TOKEN, parse_parts, write
from ..tokenizer import _marker_split, _segments, special_tokens

_CACHED_RUN_CHARS, _CACHED_RUNS = 64, 200_000  # short text runs (" * ") are looked up, not re-encoded


def with_number_tokens(hf_tokenizer, name: str):
    """A copy of `hf_tokenizer` holding every workbench special token as one token; ValueError,
    naming the model, when the tokenizer cannot keep one whole."""
    from tokenizers import AddedToken
    wanted = special_tokens()
    tok = hf_tokenizer
    missing = [t for t in wanted if t not in tok.get_vocab()]
    if missing:
        tok = copy.deepcopy(hf_tokenizer)
        try:
            tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in missing], special_tokens=True)
        except Exception as error:  # noqa: BLE001 - any refusal means the same thing to the user
            raise ValueError(f"the tokenizer of {name} ({type(tok).__name__}) cannot add the tokens "
                             f"{missing[:3]}...: {error}") from None
    for token in wanted:
        pieces = tok.encode(token, add_special_tokens=False)
        if pieces != [tok.convert_tokens_to_ids(token)]:
            shown = tok.convert_ids_to_tokens(pieces)
            raise ValueError(f"the tokenizer of {name} ({type(tok).__name__}) splits {token!r} into "
                             f"{len(pieces)} tokens {shown[:6]}: it cannot hold the number token and the "
                             "prompt markers; a tokenizer that keeps added tokens whole (a fast tokenizer) "
                             "is needed")
    return tok


class RetrofitTokenizer:
    """The model's tokenizer with the workbench's tokens; numbers read by `encoding` (None: as text)."""

    def __init__(self, hf_tokenizer, encoding: NumberEncoding | None, name: str = "the model"):
        self.hf = with_number_tokens(hf_tokenizer, name)
        self.encoding = encoding
        self.special_tokens = special_tokens()
        self._markers = _marker_split(self.special_tokens)
        self._id = {t: self.hf.convert_tokens_to_ids(t) for t in self.special_tokens}
        self.pad_id, self.bos_id, self.eoq_id, self.eos_id, self.num_id = (
            self._id[t] for t in ("<|pad|>", "<|bos|>", "<|eoq|>", "<|eos|>", NUM_TOKEN))
        self.vocab_size = len(self.hf)
        self._run_ids: dict[str, list[int]] = {}

    @property
    def added_ids(self) -> list[int]:
        """Ids of the workbench's tokens: the rows a LoRA run trains besides its adapters."""
        return sorted(self._id.values())

    def _text_ids(self, run: str) -> list[int]:
        ids = self._run_ids.get(run)
        if ids is None:
            ids = self.hf.encode(run, add_special_tokens=False)
            if len(run) <= _CACHED_RUN_CHARS and len(self._run_ids) < _CACHED_RUNS:
                self._run_ids[run] = ids
        return ids

    def encode(self, text: str):
        """ids int64 [L] and values float64 [L] (the number at <|num|> positions, 0 elsewhere)."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a string, got {type(text).__name__}")
        if NUM_TOKEN in text:
            raise ValueError(f"the text contains {NUM_TOKEN!r} itself; only parsed numbers are <|num|> tokens")
        ids: list[int] = []
        values: list[float] = []
        for kind, piece in _segments(text, self._markers):
            if kind == "marker":
                ids.append(self._id[piece])
                values.append(0.0)
                continue
            parts = [piece] if self.encoding is None else parse_parts(piece, self.encoding.signed)
            for part in parts:
                if isinstance(part, str):
                    run = self._text_ids(part)
                    ids += run
                    values += [0.0] * len(run)
                else:
                    ids.append(self.num_id)
                    values.append(part.value)
        return np.array(ids, dtype=np.int64), np.array(values, dtype=np.float64)

    def decode(self, ids, values=None) -> str:
        """Inverse of encode: a <|num|> is written as render(value, 17), everything else by the
        model's tokenizer (markers as their text)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        values = np.zeros(len(ids)) if values is None else np.asarray(values, np.float64).reshape(-1)
        if len(values) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(values)} values")
        out = []
        rows = list(zip(ids.tolist(), values.tolist()))
        for is_number, run in groupby(rows, key=lambda row: row[0] == self.num_id and self.encoding is not None):
            run = list(run)
            if is_number:
                out += [write(v) for _, v in run]
            else:
                out.append(self.hf.decode([i for i, _ in run], skip_special_tokens=False,
                                          clean_up_tokenization_spaces=False))
        return "".join(out)

    def sample(self, prompt: str, answer: str):
        """A task sample "<|bos|>prompt<|eoq|>answer<|eos|>" and its loss mask (the answer and
        <|eos|>), as `workbench.tokenizer.Tokenizer.sample`."""
        ids, values = self.encode(f"<|bos|>{prompt}<|eoq|>{answer}<|eos|>")
        eoq = np.flatnonzero(ids == self.eoq_id)
        if len(eoq) != 1:
            raise ValueError(f"prompt and answer must not contain <|eoq|>: {prompt!r}, {answer!r}")
        return ids, values, np.arange(len(ids)) > eoq[0]

    def text_sample(self, text: str):
        """Plain text "<|bos|>text<|eos|>": every token after <|bos|> is a target."""
        ids, values = self.encode(f"<|bos|>{text}<|eos|>")
        return ids, values, np.arange(len(ids)) > 0

    def numeric(self, ids) -> np.ndarray:
        """True at the tokens that write a number: <|num|>, or (without an encoding) any token
        whose text holds a digit, the model's own number pieces."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.encoding is not None:
            return ids == self.num_id
        texts = self.hf.convert_ids_to_tokens(ids.tolist())
        return np.array([any(c.isdigit() for c in t) for t in texts], dtype=bool)
