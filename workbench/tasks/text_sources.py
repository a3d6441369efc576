"""Where the text task's prose comes from: a text source, written as one string (a CLI flag, a
dataclass field) and read into a list of documents.

    shipped                         the corpus shipped with the workbench (default; offline): the 79
                                    pydoc topics of Python 3.11.7's documentation, PSF licence
                                    (workbench/corpus/), checked against its SHA-256 at load
    files:PATH[,PATH...]            local files or glob patterns ("data/*.parquet"), by extension:
                                      .txt   documents separated by "<|eos|>" (the authors'
                                             decoded FineWeb), else by blank lines
                                      .jsonl / .json   JSON Lines, one object per line
                                      .parquet         a table with a text column
    hf:NAME[:CONFIG]                a Hugging Face dataset streamed with `datasets` (a network, unless
                                    NAME is a local builder: hf:parquet?data_files=x.parquet)

Options follow a "?", joined by "&": field=text (the column or key holding the text), docs=N (read
at most N documents; hf defaults to 10000, files to all of them), split=train and data_files=PATH
(hf only). E.g. "hf:HuggingFaceFW/fineweb-edu:sample-10BT?docs=50000".

A document's split is fixed by a hash of the document (its content; a shipped topic's name), so no
document is in two splits and duplicates share one. Documents are read once per source (and file
state) and cached. Nothing comes from the interpreter: its own pydoc topics differ between Python
patch releases (3.11.2 and 3.11.7 do), and so would every text-trained result.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import itertools
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

import numpy as np

DEFAULT = "shipped"
SHIPPED = Path(__file__).resolve().parents[1] / "corpus" / "pydoc_topics.json"
SHIPPED_SHA256 = "e81a4f3fc71fafbd0d092e58804c106cd251e4580938d87221636fe846f18501"
HF_DOCS = 10_000  # documents read from a Hugging Face stream unless docs= says otherwise
FILE_KINDS = (".txt", ".jsonl", ".json", ".parquet")
_OPTIONS = {"shipped": (), "files": ("field", "docs"), "hf": ("field", "docs", "split", "data_files")}
HELP = (
    'text of the text task: "shipped" (the corpus shipped with the workbench, offline default), '
    '"files:PATH[,PATH...]" (.txt, .jsonl, .parquet; globs allowed) or "hf:NAME[:CONFIG]" (Hugging Face, '
    'streamed); options after "?": field=text, docs=N, split=train, data_files=PATH (hf). E.g. '
    '"hf:HuggingFaceFW/fineweb-edu:sample-10BT?docs=50000"'
)


@functools.cache
def shipped_topics() -> dict[str, str]:
    """The shipped corpus, {topic: text}, refused if its bytes are not the ones published."""
    data = SHIPPED.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHIPPED_SHA256:
        raise ValueError(
            f"the shipped corpus {SHIPPED} is damaged or changed (SHA-256 {digest[:16]}…, expected "
            f"{SHIPPED_SHA256[:16]}…); restore it from the repository (git checkout -- {SHIPPED.name})"
        )
    return json.loads(data)


def checksum(spec: str) -> str:
    """SHA-256 of a source's documents (names and texts), recorded beside each run's configuration."""
    if parse(spec).kind == "shipped":
        return SHIPPED_SHA256
    docs = corpus(spec)
    digest = hashlib.sha256()
    for name, text in zip(docs.names, docs.texts):
        digest.update(f"{len(name)}:{name}{len(text)}:{text}".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class TextSource:
    """A parsed source string (see the module docstring); `parse` makes one."""

    kind: str  # "shipped", "files" or "hf"
    paths: tuple[str, ...] = ()  # files: paths or glob patterns
    name: str = ""  # hf: dataset name (or a local builder: parquet, json, text)
    config: str | None = None  # hf: dataset configuration ("sample-10BT")
    split: str = "train"  # hf: the dataset's own split that is read (ours are cut by hash)
    data_files: tuple[str, ...] = ()  # hf: files for a local builder
    field: str = "text"
    docs: int | None = None  # at most this many documents (None: all; hf: HF_DOCS)


def parse(spec: str) -> TextSource:
    """The TextSource a string names; a ValueError says what is wrong with a bad one."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"a text source must be a non-empty string, got {spec!r}; {HELP}")
    kind, _, rest = spec.strip().partition(":")
    if kind == "pydoc":
        raise ValueError(
            'text source "pydoc" (the interpreter\'s own pydoc topics) is no longer offered: they differ '
            'between Python patch releases, and so did every result trained on them; "shipped" is a fixed '
            "copy (Python 3.11.7's topics) shipped with the workbench"
        )
    if kind not in _OPTIONS:
        raise ValueError(f"unknown text source kind {kind!r} in {spec!r}; {HELP}")
    rest, _, query = rest.partition("?")
    try:
        options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise ValueError(f"text source {spec!r}: options after '?' must be key=value pairs joined by '&'") from None
    unknown = sorted(set(options) - set(_OPTIONS[kind]))
    if unknown:
        raise ValueError(
            f"text source {spec!r}: unknown option(s) {unknown} for {kind!r} "
            f"(allowed: {list(_OPTIONS[kind]) or 'none'})"
        )
    docs = options.pop("docs", None)
    if docs is not None and not (docs.isdigit() and int(docs) > 0):
        raise ValueError(f"text source {spec!r}: docs must be a positive integer, got {docs!r}")
    docs = None if docs is None else int(docs)
    if options.get("field", "text") == "":
        raise ValueError(f"text source {spec!r}: field must name a column, got an empty string")
    if kind == "shipped":
        if rest:
            raise ValueError(f"text source {spec!r}: shipped takes no argument")
        return TextSource("shipped")
    if kind == "files":
        paths = tuple(p for p in rest.split(",") if p.strip())
        if not paths:
            raise ValueError(f"text source {spec!r} names no file; write files:PATH[,PATH...]")
        return TextSource("files", paths=paths, docs=docs, **options)
    name, _, config = rest.partition(":")
    if not name:
        raise ValueError(f"text source {spec!r} names no dataset; write hf:NAME[:CONFIG]")
    data_files = tuple(p for p in options.pop("data_files", "").split(",") if p)
    return TextSource("hf", name=name, config=config or None, data_files=data_files, docs=docs, **options)


@dataclass(frozen=True)
class Corpus:
    """The documents of a source. `ids` (int64) identify a document for the split hash; `lengths`
    in characters; `weighted`: draw documents in proportion to their length (shipped: uniformly)."""

    names: list
    texts: list
    ids: np.ndarray
    lengths: np.ndarray
    weighted: bool


def corpus(spec: str) -> Corpus:
    """The documents of source `spec`, read once per source and file state (size, mtime)."""
    source = parse(spec)
    stamp = []
    for f in _files(source) if source.kind == "files" else ():
        status = os.stat(f)
        stamp.append((f, status.st_mtime_ns, status.st_size))
    return _read(spec.strip(), tuple(stamp))


@functools.lru_cache(maxsize=4)
def _read(spec: str, stamp: tuple) -> Corpus:
    source = parse(spec)
    if source.kind == "shipped":
        names, texts = zip(*sorted(shipped_topics().items()))
        ids = [zlib.crc32(n.encode()) for n in names]  # by topic name, as since the first version
        return _corpus(list(names), list(texts), ids, weighted=False)
    documents = _read_files(source, [f for f, _, _ in stamp]) if source.kind == "files" else _read_hf(source)
    names, texts = [], []
    for name, text in itertools.islice(documents, source.docs or (HF_DOCS if source.kind == "hf" else None)):
        names.append(name)
        texts.append(text)
    if not texts:
        raise ValueError(f"text source {spec!r} holds no document with text")
    return _corpus(names, texts, [zlib.crc32(t.encode()) for t in texts], weighted=True)


def _corpus(names, texts, ids, weighted) -> Corpus:
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    return Corpus(names, texts, np.array(ids, dtype=np.int64), lengths, weighted)


def _files(source: TextSource) -> list[str]:
    files = []
    for pattern in source.paths:
        if any(c in pattern for c in "*?["):
            found = sorted(glob.glob(pattern))
            if not found:
                raise ValueError(f"text source: no file matches {pattern!r}")
        elif not Path(pattern).is_file():
            raise ValueError(f"text source: file not found: {pattern!r}")
        else:
            found = [pattern]
        for f in found:
            if not f.endswith(FILE_KINDS):
                raise ValueError(
                    f"text source: {f!r} is not one of {FILE_KINDS} (use hf:json, "
                    "hf:text ... with data_files= for other formats)"
                )
        files += found
    return files


def _read_files(source: TextSource, files):
    """(name, text) of every non-blank document, file by file, in order."""
    for f in files:
        reader = _txt if f.endswith(".txt") else _parquet if f.endswith(".parquet") else _jsonl
        for k, text in enumerate(t for t in reader(f, source.field) if t.strip()):
            yield f"{f}#{k}", _checked(text, f"document {k} of {f}")


def _txt(path, field):
    text = Path(path).read_text(encoding="utf-8")
    documents = text.split("<|eos|>") if "<|eos|>" in text else re.split(r"\n[ \t\r]*\n", text)
    return [d.strip() for d in documents]


def _jsonl(path, field):
    with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{path}:{line_number} is not JSON ({error}); JSON Lines hold one object per line"
                ) from None
            yield _field(row, field, f"{path}:{line_number}")


def _parquet(path, field):
    import pyarrow.parquet as pq

    table = pq.ParquetFile(path)
    if field not in table.schema_arrow.names:
        raise ValueError(
            f"{path} has no column {field!r} (columns: {table.schema_arrow.names}); choose one with ?field="
        )
    batches = table.iter_batches(columns=[field], batch_size=1024)
    texts = itertools.chain.from_iterable(batch.column(0).to_pylist() for batch in batches)
    for row, text in enumerate(texts):
        yield _field({field: text}, field, f"row {row} of {path}")


def _read_hf(source: TextSource):
    try:
        import datasets
    except ImportError:
        raise ValueError("text sources hf:... need the `datasets` package (pip install -r requirements.txt)") from None
    from tqdm.auto import tqdm

    extra = {"data_files": list(source.data_files)} if source.data_files else {}
    stream = datasets.load_dataset(source.name, source.config, split=source.split, streaming=True, **extra)
    limit = source.docs or HF_DOCS
    rows = tqdm(stream, total=limit, desc=f"reading {source.name}", leave=False, mininterval=5)
    documents = (_field(row, source.field, f"row {k} of {source.name}") for k, row in enumerate(rows))
    for k, text in enumerate(t for t in documents if t.strip()):
        yield f"{source.name}#{k}", _checked(text, f"document {k} of {source.name}")


def _field(row, field, where) -> str:
    if not isinstance(row, dict) or field not in row:
        keys = list(row) if isinstance(row, dict) else type(row).__name__
        raise ValueError(f"{where} has no {field!r} field (found: {keys}); choose one with ?field=")
    text = row[field]
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ValueError(f"{where}: {field!r} is a {type(text).__name__}, not text")
    return text


def _checked(text: str, where: str) -> str:
    """Refuse at reading time what the tokenizer would refuse later, naming the document."""
    if "<|num|>" in text:
        raise ValueError(f"{where} contains the token <|num|> itself, which text may not hold")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{where} has a lone surrogate at character {error.start}: not valid Unicode") from None
    return text
