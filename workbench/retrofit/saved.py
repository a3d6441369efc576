"""The folder NumberLM.save_pretrained writes, read back: numeracy.json (checked key by key, so
that a crafted file is refused in one line naming it) and the number head's safetensors."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..encoders.base import NumberHead
from ..runs.reading import read_json
from .config import BEFORE_68, DIGIT_MASSES, FRAMES, NUM_INITS
from .joining import resolve

META_FILE = "numeracy.json"
FORMAT = "workbench.retrofit 1"


def read_meta(path: Path) -> dict | None:
    """numeracy.json of a folder this module saved; None for a plain model folder."""
    if not path.is_dir():
        raise ValueError(f"{path} is not a folder: give the local folder of a Hugging Face causal LM")
    if not (path / META_FILE).exists():
        return None
    file = path / META_FILE
    try:  # regular, bounded, not nested past what Python reads: else one line naming the file
        meta = read_json(file)
    except OSError as error:
        raise ValueError(f"{file} cannot be read: {error.strerror or error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{file} is not a {FORMAT} file")
    missing = [k for k in ("encoding", "encoding_options", "lora", "base_model") if k not in meta]
    if missing:
        raise ValueError(f"{file} lacks {missing}")
    # each value of the kind save_pretrained writes, so that a crafted one is refused here, in a
    # line naming it, and not as a TypeError where it is used
    kinds = {
        "encoding": (str, "a name"),
        "encoding_options": (dict, "a dict of options"),
        "lora": ((dict, type(None)), "a dict of rank, alpha and dropout, or null"),
        "base_model": ((str, type(None)), "a name or a relative path, or null"),
    }
    for key, (kind, what) in kinds.items():
        if not isinstance(meta[key], kind):
            raise ValueError(f"{file}: {key} is {what}, not {json.dumps(meta[key])[:60]}")
    if meta["lora"] is not None:
        if set(meta["lora"]) != {"rank", "alpha", "dropout"} or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in meta["lora"].values()
        ):
            raise ValueError(
                f"{file}: lora is a dict of rank, alpha and dropout (numbers), not {json.dumps(meta['lora'])[:60]}"
            )
        if meta["base_model"] is None:
            raise ValueError(f"{file}: a LoRA folder names its base_model, but it is null")
    try:  # an unknown encoding, option or option value (a head_width of 10^9) named with the file
        resolve(meta["encoding"], meta["encoding_options"])
    except ValueError as error:
        raise ValueError(f"{file}: {error}") from None
    for key, allowed in (("num_init", NUM_INITS), ("digit_mass", DIGIT_MASSES), ("frame", FRAMES)):
        if key in meta and meta[key] not in allowed:
            raise ValueError(f"{file}: {key} is one of {allowed}, not {json.dumps(meta[key])[:60]}")
    return {**BEFORE_68, **meta}  # a folder saved before issue 68 does not name them


def load_head(head: NumberHead, file: Path) -> None:
    """The saved head's weights (safetensors: no code is run), kept in float32."""
    from safetensors.torch import load_file

    if not file.exists():
        raise ValueError(f"{file.parent} names the encoding {head.encoding.name!r} but has no {file.name}")
    try:
        state = load_file(file)
        head.load_state_dict({k: v.float() for k, v in state.items()})
    except Exception as error:  # noqa: BLE001 - a corrupt file or another head's weights
        raise ValueError(
            f"{file} does not hold this {head.encoding.name} head's weights: {str(error).splitlines()[0][:300]}"
        ) from None
