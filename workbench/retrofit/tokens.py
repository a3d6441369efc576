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

The space before a number stays where the model's pretraining put it. Tokenizers that write a
number's digits apart from the space before it (SmolLM2, Llama 3, Qwen2: " 12" is "Ġ", "1", "2")
keep that space as their own lone space token before <|num|>, exactly as in pretraining. Tokenizers
that join the space to the digits (GPT-2: " 12" is one token "Ġ12") have no such habit, so for them
a number directly after a space is one token <|num_sp|> ("a number, with the space before it"),
the way "Ġ12" is: the head joins and predicts its value as at <|num|>, and decode writes " " and
the number. Which of the two a tokenizer is, is read from its own tokenization of " 7".

The model's own digit tokens: with an encoding no number ever reaches them, so they are never a
target; `digit_ids` lists them (every token whose text holds a digit) so that generation can mask
them (`NumberLM.generate`), and a number can only be written through the encoding. Those of them
that begin a number the way a number token does (`number_starts`: "4" for <|num|>, "Ġ4" for
<|num_sp|>) are the tokens <|num|> replaces: its rows can start as theirs and their probability
can be its (`NumberLM`, issue 68). A tokenizer that reads a digit as its unknown token, or does
not give "0123456789" back, is refused.

Where a question and an answer end (`frame`, issue 68). "equals" writes the end of a question as
an equation does in the model's pretraining text, " = " in its own tokens (`12 + 30 = 42`:
SmolLM2's "Ġ=", "Ġ", then the number), so the answer starts where the pretrained model puts the
first digit of a result: SmolLM2-135M-Instruct gives its digit tokens 0.996 of its probability
there, and 0.013 after the workbench's <|eoq|> (a new token it never saw; 50 addition questions,
benchmarks/retrofit_num_probability.py). Tokenizers that join the space to the digits (GPT-2) end
the question with " =" and give the answer its space, as "Ġ=", "Ġ42" (or <|num_sp|>). An answer
(and a text chunk) ends with the model's own end token (`eos_token`: SmolLM2's <|im_end|>), which
is `eos_id` then: fine-tuned to end its answers with a new <|eos|>, SmolLM2 ended them with
<|im_end|> or with text ("32<|im_end|>", "-32saurus"), so that after 6 steps none of 32 answers
read as a number; with its own end token P(end) after the number is 0.999 from step 4. "markers"
is the workbench's own "<|bos|>prompt<|eoq|>answer<|eos|>" (before issue 68). <|bos|> stays in
both: a question needs a start.

The interface is `workbench.tokenizer.Tokenizer`'s (encode, decode, sample, text_sample, pad_id,
eos_id, num_id), so `data.make_pool` and `evaluate.evaluate` take it as they are.
"""

from __future__ import annotations

import copy
from itertools import groupby

import numpy as np

from ..encoders.base import NumberEncoding
from ..numbers import NUM_SPACE_TOKEN, NUM_TOKEN, parse_parts, write
from ..tokenizer import _marker_split, _segments, special_tokens
from .config import FRAMES

_CACHED_RUN_CHARS, _CACHED_RUNS = 64, 200_000  # short text runs (" * ") are looked up, not re-encoded
DIGITS = "0123456789"
EOQ = "<|eoq|>"
EQUALS = " = "  # the end of a question in the "equals" frame, as an equation writes it


def check_digits(hf_tokenizer, name: str) -> None:
    """ValueError, naming the model, when the tokenizer cannot write digits: one of them is its
    unknown token, or "0123456789" does not come back from its tokens."""
    unk = hf_tokenizer.unk_token_id
    for text in (DIGITS, " " + DIGITS):
        ids = hf_tokenizer.encode(text, add_special_tokens=False)
        back = hf_tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if (unk is not None and unk in ids) or back.strip() != DIGITS:
            shown = hf_tokenizer.convert_ids_to_tokens(ids)[:12]
            raise ValueError(
                f"the tokenizer of {name} ({type(hf_tokenizer).__name__}) maps digits to unknown "
                f"tokens ({text!r} -> {shown}, read back as {back!r}): it cannot read or write numbers"
            )


def joins_space(hf_tokenizer) -> bool:
    """Whether the tokenizer writes " 7" as one token (GPT-2), not as a space and a digit."""
    return len(hf_tokenizer.encode(" 7", add_special_tokens=False)) == 1


def with_number_tokens(hf_tokenizer, name: str, extra: tuple[str, ...] = ()):
    """A copy of `hf_tokenizer` holding every workbench special token (and `extra`) as one token;
    ValueError, naming the model, when the tokenizer cannot keep one whole."""
    from tokenizers import AddedToken

    wanted = special_tokens() + [t for t in extra if t not in special_tokens()]
    tok = hf_tokenizer
    missing = [t for t in wanted if t not in tok.get_vocab()]
    if missing:
        tok = copy.deepcopy(hf_tokenizer)
        try:
            tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in missing], special_tokens=True)
        except Exception as error:  # noqa: BLE001 - any refusal means the same thing to the user
            raise ValueError(
                f"the tokenizer of {name} ({type(tok).__name__}) cannot add the tokens {missing[:3]}...: {error}"
            ) from None
    for token in wanted:
        pieces = tok.encode(token, add_special_tokens=False)
        if pieces != [tok.convert_tokens_to_ids(token)]:
            shown = tok.convert_ids_to_tokens(pieces)
            raise ValueError(
                f"the tokenizer of {name} ({type(tok).__name__}) splits {token!r} into "
                f"{len(pieces)} tokens {shown[:6]}: it cannot hold the number token and the "
                "prompt markers; a tokenizer that keeps added tokens whole (a fast tokenizer) "
                "is needed"
            )
    return tok


class RetrofitTokenizer:
    """The model's tokenizer with the workbench's tokens; numbers read by `encoding` (None: as text)."""

    def __init__(self, hf_tokenizer, encoding: NumberEncoding | None, name: str = "the model", frame: str = "equals"):
        if frame not in FRAMES:
            raise ValueError(f"frame must be one of {FRAMES}, got {frame!r}")
        check_digits(hf_tokenizer, name)
        self.frame = frame
        joined = joins_space(hf_tokenizer)
        self.space_joined = encoding is not None and joined
        # a joined tokenizer writes " 42" as one token, so the answer keeps the space: "Ġ=", "Ġ42"
        self._question_end = EQUALS.rstrip() if joined else EQUALS
        self._answer_space = " " if joined else ""
        extra = (NUM_SPACE_TOKEN,) if self.space_joined else ()
        self.hf = with_number_tokens(hf_tokenizer, name, extra)
        self.encoding = encoding
        self.special_tokens = special_tokens() + list(extra)
        self._markers = _marker_split(special_tokens())  # <|num_sp|>, like <|num|>, is no marker
        self._id = {t: self.hf.convert_tokens_to_ids(t) for t in self.special_tokens}
        self.pad_id, self.bos_id, self.eoq_id, self.eos_id, self.num_id = (
            self._id[t] for t in ("<|pad|>", "<|bos|>", "<|eoq|>", "<|eos|>", NUM_TOKEN)
        )
        self._written = dict(self._id)  # the ids a marker is written as
        own_end = hf_tokenizer.eos_token_id
        if frame == "equals" and own_end is not None and own_end not in self._id.values():
            self.eos_id = self._written["<|eos|>"] = own_end
        self.num_space_id = self._id.get(NUM_SPACE_TOKEN)
        # the tokens that carry a number's value (one, or two where the space joins the digits)
        self.number_ids = (self.num_id,) + ((self.num_space_id,) if self.space_joined else ())
        self.vocab_size = len(self.hf)
        self._run_ids: dict[str, list[int]] = {}
        self._digit_texts: dict[int, str] | None = None

    def _digits(self) -> dict[int, str]:
        """The text of each of the model's own tokens that holds a digit, added tokens excepted."""
        if self._digit_texts is None:
            added = set(self._id.values())
            texts = self.hf.batch_decode(
                [[i] for i in range(len(self.hf))], skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
            self._digit_texts = {i: t for i, t in enumerate(texts) if i not in added and any(c in DIGITS for c in t)}
        return self._digit_texts

    @property
    def digit_ids(self) -> list[int]:
        """The model's own tokens whose text holds a digit (its number pieces), added tokens excepted."""
        return list(self._digits())

    @property
    def number_starts(self) -> dict[int, list[int]]:
        """For each token that carries a number, the model's own tokens that begin a number where
        it stands: those whose text begins with a digit for <|num|>, and, where the tokenizer joins
        the space to the digits, those that begin with a space and a digit for <|num_sp|>. A
        digit inside a token ("x2") begins no number; nor, where a space is its own token, does
        a token " 4" (<|num|> follows the lone space there)."""
        starts: dict[int, list[int]] = {n: [] for n in self.number_ids}
        for i, text in self._digits().items():
            if text[0] in DIGITS:
                starts[self.num_id].append(i)
            elif self.space_joined and text[0] == " " and text[1:2] in tuple(DIGITS):
                starts[self.num_space_id].append(i)
        return starts

    def is_number(self, ids):
        """Where ids (a numpy array or a torch tensor) are a token that carries a number's value."""
        out = ids == self.num_id
        if self.space_joined:
            out = out | (ids == self.num_space_id)
        return out

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
        """ids int64 [L] and values float64 [L] (the number at <|num|> positions, 0 elsewhere).
        In the "equals" frame <|eoq|> is written as the model's " = " and <|eos|> as its own end
        token."""
        ids, values, _ = self._encode(text)
        return ids, values

    def _encode(self, text: str):
        """encode's ids and values, and the number of <|eoq|> in the text with the position just
        after the last one (where an answer starts)."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a string, got {type(text).__name__}")
        if NUM_TOKEN in text or NUM_SPACE_TOKEN in text:
            raise ValueError(f"the text contains {NUM_TOKEN!r} itself; only parsed numbers are <|num|> tokens")
        ids: list[int] = []
        values: list[float] = []
        questions, answer_at, answer_space = 0, None, False
        for kind, piece in _segments(text, self._markers):
            if kind == "marker":
                if piece == EOQ and self.frame == "equals":
                    run = self._text_ids(self._question_end)
                    ids += run
                    values += [0.0] * len(run)
                    answer_space = bool(self._answer_space)
                else:
                    ids.append(self._written[piece])
                    values.append(0.0)
                    answer_space = False
                if piece == EOQ:
                    questions, answer_at = questions + 1, len(ids)
                continue
            if answer_space:
                piece, answer_space = self._answer_space + piece, False
            parts = [piece] if self.encoding is None else parse_parts(piece, self.encoding.signed)
            for k, part in enumerate(parts):
                if isinstance(part, str):
                    spaced = self.space_joined and part.endswith(" ") and k + 1 < len(parts)
                    run = self._text_ids(part[:-1] if spaced else part) if part != " " or not spaced else []
                    ids += run
                    values += [0.0] * len(run)
                else:
                    spaced = (
                        self.space_joined and k > 0 and isinstance(parts[k - 1], str) and parts[k - 1].endswith(" ")
                    )
                    ids.append(self.num_space_id if spaced else self.num_id)
                    values.append(part.value)
        return np.array(ids, dtype=np.int64), np.array(values, dtype=np.float64), (questions, answer_at)

    def decode(self, ids, values=None) -> str:
        """Inverse of encode: a <|num|> is written as render(value, 17) (<|num_sp|>: a space and
        the number), everything else by the model's tokenizer (markers as their text)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        values = np.zeros(len(ids)) if values is None else np.asarray(values, np.float64).reshape(-1)
        if len(values) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(values)} values")
        out = []
        rows = list(zip(ids.tolist(), values.tolist()))
        numbers = set(self.number_ids) if self.encoding is not None else set()
        for is_number, run in groupby(rows, key=lambda row: row[0] in numbers):
            run = list(run)
            if is_number:
                out += [(" " if i == self.num_space_id else "") + write(v) for i, v in run]
            else:
                out.append(
                    self.hf.decode([i for i, _ in run], skip_special_tokens=False, clean_up_tokenization_spaces=False)
                )
        return "".join(out)

    def sample(self, prompt: str, answer: str):
        """A task sample "<|bos|>prompt<|eoq|>answer<|eos|>" (<|eoq|> and <|eos|> written as the
        frame says) and its loss mask (the answer and its end), as
        `workbench.tokenizer.Tokenizer.sample`."""
        ids, values, (questions, answer_at) = self._encode(f"<|bos|>{prompt}{EOQ}{answer}<|eos|>")
        if questions != 1:
            raise ValueError(f"prompt and answer must not contain <|eoq|>: {prompt!r}, {answer!r}")
        return ids, values, np.arange(len(ids)) >= answer_at

    def text_sample(self, text: str):
        """Plain text "<|bos|>text<|eos|>" (<|eos|> as the frame writes it): every token after
        <|bos|> is a target."""
        ids, values = self.encode(f"<|bos|>{text}<|eos|>")
        return ids, values, np.arange(len(ids)) > 0

    def numeric(self, ids) -> np.ndarray:
        """True at the tokens that write a number: <|num|>, or (without an encoding) any token
        whose text holds a digit, the model's own number pieces."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.encoding is not None:
            return self.is_number(ids)
        texts = self.hf.convert_ids_to_tokens(ids.tolist())
        return np.array([any(c.isdigit() for c in t) for t in texts], dtype=bool)
