"""Text sources of the text task: the embedded default stays byte-identical; local .txt, JSON Lines
and parquet files and `datasets` (local builders only: nothing is downloaded) give the same
documents; splits are held out by document; bad sources are refused with a clear error."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

# No test may reach the Hugging Face Hub: datasets reads these when it is first imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402

from workbench import tasks  # noqa: E402
from workbench.tasks import Regime  # noqa: E402
from workbench.tasks.text import CHUNK_CHARS, draw  # noqa: E402
from workbench.tasks.text_sources import TextSource, corpus, parse  # noqa: E402
from workbench.tokenizer import Tokenizer  # noqa: E402
from workbench.training.data import make_pool  # noqa: E402

# sha256 of generate("text", n, seed, split).to_csv() with the code before text sources existed
# (commit 38b8278): the default source must keep giving exactly these samples.
BEFORE = {
    ("train", 50, 0): "d4a2c8c8f6a09984",
    ("train", 300, 3): "97b5f3e0f66bb780",
    ("val", 50, 0): "bb3eaf8a1a61d9fd",
    ("val", 300, 3): "3d87405382fd24db",
    ("test", 50, 0): "5ffc2f5f62b32794",
    ("test", 300, 3): "4d74df42cbbaa5dd",
}


def documents(n=60):
    """n distinct documents of 300 to 2,900 characters, with numbers in them."""
    rng = np.random.default_rng(7)
    words = ["the", "model", "reads", "numbers", "like", "3.25", "and", "-17", "in", "text", "1e5"]
    return [f"Document {k}. " + " ".join(rng.choice(words, int(rng.integers(50, 450)))) for k in range(n)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    docs = documents()
    (folder / "docs.txt").write_text("<|eos|>\n".join(docs), encoding="utf-8")
    (folder / "para.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    (folder / "docs.jsonl").write_text("".join(json.dumps({"text": d, "n": k}) + "\n" for k, d in enumerate(docs)))
    (folder / "body.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in docs))
    pq.write_table(
        pa.table({"id": list(range(len(docs))), "text": docs}), folder / "docs.parquet", row_group_size=16
    )  # several row groups
    return folder, docs


def frame(spec, n=120, seed=0, split="train"):
    return tasks.generate("text", n, seed=seed, split=split, regime=Regime(text_source=spec))


@pytest.mark.parametrize("key", sorted(BEFORE))
def test_default_source_gives_the_same_bytes_as_before(key):
    split, n, seed = key
    got = tasks.generate("text", n, seed, split)
    assert hashlib.sha256(got.to_csv().encode()).hexdigest()[:16] == BEFORE[key]
    pd.testing.assert_frame_equal(got, frame("shipped", n, seed, split))


@pytest.mark.parametrize("name", ["docs.txt", "para.txt", "docs.jsonl", "docs.parquet", "body.jsonl?field=body"])
def test_local_files_give_the_documents_in_order(files, name):
    folder, docs = files
    assert corpus(f"files:{folder / name}").texts == docs


def test_hf_datasets_reads_the_same_local_files(files):
    folder, docs = files
    for spec in (f"hf:parquet?data_files={folder / 'docs.parquet'}", f"hf:json?data_files={folder / 'docs.jsonl'}"):
        assert corpus(spec).texts == docs
    assert corpus(f"hf:parquet?data_files={folder / 'docs.parquet'}&docs=7").texts == docs[:7]
    # one source, one set of samples: the same documents give the same chunks, whichever reader
    files_frame = frame(f"files:{folder / 'docs.parquet'}", split="test")
    hf_frame = frame(f"hf:parquet?data_files={folder / 'docs.parquet'}", split="test")
    assert files_frame["answer"].tolist() == hf_frame["answer"].tolist()


def test_splits_hold_out_whole_documents(files):
    folder, docs = files
    spec = f"files:{folder / 'docs.jsonl'}"
    seen = {}
    for split in ("train", "val", "test"):
        df = frame(spec, n=200, split=split)
        assert len(df) == 200 and (df["prompt"] == "").all()
        for name, chunk in zip(df["topic"], df["answer"]):
            document = docs[int(name.rsplit("#", 1)[1])]
            assert chunk in document and len(chunk) == min(CHUNK_CHARS, len(document))
        seen[split] = set(df["topic"])
    assert not (seen["train"] & seen["val"]) and not (seen["train"] & seen["test"]) and not (seen["val"] & seen["test"])
    assert len(seen["train"]) > 20  # the train split uses many documents, not one
    pd.testing.assert_frame_equal(frame(spec, n=50, seed=4, split="val"), frame(spec, n=50, seed=4, split="val"))


def test_documents_are_drawn_in_proportion_to_their_length(tmp_path):
    short = [f"short document number {k} " * 4 for k in range(39)]  # ~100 characters each
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in short + ["long " * 2000]))
    docs = corpus(f"files:{path}")
    candidates = draw(np.random.default_rng(0), 20_000, Regime(text_source=f"files:{path}"))
    share = np.mean(candidates["topic"] == f"{path}#39")
    assert share == pytest.approx(docs.lengths[39] / docs.lengths.sum(), abs=0.02)


def test_a_changed_file_is_read_again(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents(40)))
    assert len(corpus(f"files:{path}").texts) == 40
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents(50)))
    assert len(corpus(f"files:{path}").texts) == 50


def test_make_pool_tokenizes_text_from_a_file(files):
    folder, docs = files
    pool = make_pool(
        "text", 5, Tokenizer("bittokens"), 0, "val", Regime(text_source=f"files:{folder / 'docs.parquet'}")
    )
    assert len(pool.samples) == 5 and all(mask[1:].all() for _, _, mask in pool.samples)


def test_the_spec_forms():
    assert parse("shipped") == TextSource("shipped")
    assert parse("files:a.txt,b/*.parquet?field=body&docs=9") == TextSource(
        "files", paths=("a.txt", "b/*.parquet"), field="body", docs=9
    )
    assert parse("hf:HuggingFaceFW/fineweb-edu:sample-10BT?docs=50000") == TextSource(
        "hf", name="HuggingFaceFW/fineweb-edu", config="sample-10BT", docs=50000
    )
    assert parse("hf:json?data_files=x.jsonl,y.jsonl&split=train") == TextSource(
        "hf", name="json", data_files=("x.jsonl", "y.jsonl")
    )
    assert Regime.of(None, None, text_source="files:a.txt") == Regime(text_source="files:a.txt") != Regime()


@pytest.mark.parametrize(
    "spec, message",
    [
        ("", "non-empty string"),
        ("web:x", "unknown text source kind"),
        ("shipped:x", "takes no argument"),
        ("pydoc", "differ between Python patch releases"),
        ("files:", "names no file"),
        ("hf:", "names no dataset"),
        ("files:a.txt?split=x", "unknown option"),
        ("files:a.txt?docs=0", "positive integer"),
        ("files:a.txt?docs", "key=value"),
        ("files:a.txt?field=", "empty string"),
    ],
)
def test_malformed_specs_are_refused_before_reading(spec, message):
    with pytest.raises(ValueError, match=message):
        Regime(text_source=spec)


def test_unreadable_sources_name_the_problem(tmp_path, files):
    folder, docs = files
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\nnot json\n')
    (tmp_path / "few.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs[:3]))
    (tmp_path / "num.jsonl").write_text(json.dumps({"text": "a <|num|> b"}) + "\n")
    (tmp_path / "odd.csv").write_text("text\nx\n")
    (tmp_path / "blank.txt").write_text("\n\n  \n")
    cases = [
        (f"files:{tmp_path / 'missing.txt'}", "file not found"),
        (f"files:{tmp_path / 'nothing*.txt'}", "no file matches"),
        (f"files:{tmp_path / 'odd.csv'}", "is not one of"),
        (f"files:{tmp_path / 'bad.jsonl'}", r"bad.jsonl:2 is not JSON"),
        (f"files:{folder / 'docs.jsonl'}?field=body", "has no 'body' field"),
        (f"files:{folder / 'docs.parquet'}?field=body", "has no column 'body'"),
        (f"files:{tmp_path / 'num.jsonl'}", "<|num|>"),
        (f"files:{tmp_path / 'blank.txt'}", "no document"),
        (f"files:{tmp_path / 'few.jsonl'}", "each split needs one"),
    ]
    for spec, message in cases:
        with pytest.raises(ValueError, match=message):
            frame(spec, n=5)


def test_the_shipped_corpus_never_comes_from_the_interpreter():
    """Bug: the default text (or the BPE's training text) read from the interpreter's pydoc_data,
    which differs between Python patch releases. With pydoc_data made unimportable the default
    source gives the same bytes, and so does the tokenizer's corpus."""
    code = (
        "import sys, hashlib; sys.modules['pydoc_data'] = None; sys.modules['pydoc_data.topics'] = None\n"
        "from workbench import tasks; from workbench.tokenizer import corpus_text\n"
        "print(hashlib.sha256(tasks.generate('text', 50, 0, 'train').to_csv().encode()).hexdigest(),"
        " hashlib.sha256(corpus_text().encode()).hexdigest())"
    )
    blocked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    from workbench.tokenizer import corpus_text

    here = [
        hashlib.sha256(tasks.generate("text", 50, 0, "train").to_csv().encode()).hexdigest(),
        hashlib.sha256(corpus_text().encode()).hexdigest(),
    ]
    assert blocked == here


def test_a_damaged_shipped_corpus_is_refused(tmp_path, monkeypatch):
    from workbench.tasks import text_sources

    assert text_sources.checksum("shipped") == hashlib.sha256(text_sources.SHIPPED.read_bytes()).hexdigest()
    damaged = tmp_path / "pydoc_topics.json"
    damaged.write_bytes(text_sources.SHIPPED.read_bytes().replace(b"Python", b"Pyth0n", 1))
    monkeypatch.setattr(text_sources, "SHIPPED", damaged)
    text_sources.shipped_topics.cache_clear()
    try:
        with pytest.raises(ValueError, match="damaged or changed"):
            text_sources.shipped_topics()
    finally:
        text_sources.shipped_topics.cache_clear()


def _other_interpreter():
    """A Python 3.11 of another patch release on this machine (Debian's python3 beside the default
    one), or None."""
    import shutil

    for candidate in ("/usr/bin/python3", "/usr/bin/python3.11", shutil.which("python3")):
        if candidate and Path(candidate).exists():
            version = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:3])"], capture_output=True, text=True
            ).stdout.strip()
            if version.startswith("(3, 11,") and version != str(tuple(sys.version_info[:3])):
                return candidate
    return None


@pytest.mark.slow
def test_a_text_trained_run_gives_the_same_losses_under_another_python_patch_release(tmp_path):
    """Bug: the corpus came from the interpreter's pydoc_data (3.11.2 and 3.11.7 differ), so a
    text-trained run diverged from its first step on another patch release. The other interpreter
    runs this checkout with this environment's packages (same minor version, same ABI)."""
    other = _other_interpreter()
    if other is None:
        pytest.skip("no Python 3.11 of another patch release on this machine")
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), *site])}
    args = [
        "-m",
        "workbench.train",
        "--tasks",
        "addition,text",
        "--tokens",
        str(8 * 128 * 20),
        "--threads",
        "1",
        "--eval-every",
        "10",
        "--test-samples",
        "8",
        "--val-samples",
        "8",
        "--pool-size",
        "200",
    ]
    for python, out in ((sys.executable, "here"), (other, "other")):
        subprocess.run(
            [python, *args, "--out", str(tmp_path / out)], env=env, check=True, capture_output=True, timeout=600
        )
    logs = [
        [json.loads(line) for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
        for d in ("here", "other")
    ]
    assert [r["loss"] for r in logs[0]] == [r["loss"] for r in logs[1]] and len(logs[0]) == 20
    versions = [json.loads((tmp_path / d / "environment.json").read_text())["python"] for d in ("here", "other")]
    assert versions[0] != versions[1]
