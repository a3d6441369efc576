"""A run's checkpoints: checkpoint.pt, all a resume needs, checked for its shape before anything is
restored from it (`checkpoint_problem`); best.pt, the best evaluation's weights, written on a worker
thread while training goes on (`BestWriter`); and a finished run read back, ready to answer
questions (`load_run`). A missing, corrupt or crafted file is one clear error naming it.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .. import encoders
from ..config import TrainConfig, from_record
from ..model.gpt import GPT
from ..tokenizer import Tokenizer
from .atomic import write_atomic
from .reading import open_regular, read_json

# What train.save_checkpoint writes: each key and the type of its value.
CHECKPOINT_KEYS = {
    "model": dict,
    "optimizers": list,
    "balancer": dict,
    "normalizer": dict,
    "curricula": dict,
    "rng": str,
    "torch_rng": torch.Tensor,
    "state": dict,
    "config": dict,
}


# Written since provenance was kept in the checkpoint: an older checkpoint without it still loads,
# as one that keeps no record of its machine.
CHECKPOINT_OPTIONAL = {"provenance": list}


def checkpoint_problem(ckpt) -> str:
    """Why `ckpt` is not a checkpoint train.save_checkpoint wrote ("" when its shape is one): checked
    before anything is restored from it, so a damaged or crafted file is one clear error."""
    if not isinstance(ckpt, dict):
        return f"it holds a {type(ckpt).__name__}, not a checkpoint"
    for key, kind in CHECKPOINT_KEYS.items():
        if key not in ckpt:
            return f"it has no {key!r}"
        if not isinstance(ckpt[key], kind):
            return f"its {key!r} is a {type(ckpt[key]).__name__}, not a {kind.__name__}"
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in ckpt["model"].items()):
        return "its 'model' holds more than named tensors"
    step = ckpt["state"].get("step")
    if type(step) is not int or step < 0:
        return f"its step is {step!r}, not a count of steps"
    try:
        json.loads(ckpt["rng"])
    except ValueError:
        return "its 'rng' is not a generator state"
    if ckpt["torch_rng"].dtype != torch.uint8:
        return f"its 'torch_rng' is {ckpt['torch_rng'].dtype}, not a generator state"
    for key, kind in CHECKPOINT_OPTIONAL.items():
        if key in ckpt and not isinstance(ckpt[key], kind):
            return f"its {key!r} is a {type(ckpt[key]).__name__}, not a {kind.__name__}"
    kept = ckpt.get("provenance", [])
    if not all(
        isinstance(entry, dict) and all(isinstance(v, (str, int, type(None))) for v in entry.values()) for entry in kept
    ):
        return "its 'provenance' holds more than records of machines"
    return ""


def load_weights(model: GPT, path: Path) -> None:
    """Load a weights file (best.pt) into `model`; a ValueError naming the file if it holds no
    weights of this model (another size, encoding or vocabulary, or no weights at all)."""
    weights = load_checkpoint(path)
    if not isinstance(weights, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in weights.items()
    ):
        raise ValueError(f"{path} holds no model weights (a {type(weights).__name__} of other things)")
    try:
        model.load_state_dict(weights)
    except RuntimeError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        raise ValueError(f"{path} does not hold this model's weights: {(lines[1:] or lines)[0][:300]}") from None


def load_checkpoint(path: Path) -> dict:
    """torch.load(weights_only=True) with a clear error for a missing or corrupt file; a FIFO or
    a folder in its place is refused without waiting on it (a plain open of a FIFO hangs)."""
    with open_regular(path) as f:
        try:
            return torch.load(f, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - any unpickling failure means a bad file
            raise ValueError(f"checkpoint {path} is corrupt or not a workbench checkpoint: {err}") from err


def load_run(run_dir, weights: str = "best.pt", device: str = "cpu") -> tuple[GPT, Tokenizer, TrainConfig]:
    """A run directory's model (its best weights, or `weights`), tokenizer and configuration, as
    its config.json recorded them, ready to answer questions (`evaluate.evaluate`)."""
    folder = Path(run_dir)
    try:  # a FIFO, a gigabyte or a 100,000-deep array there: a ValueError, not a hang or RecursionError
        record = read_json(folder / "config.json")
    except (OSError, ValueError) as err:
        raise ValueError(f"{folder} holds no readable config.json of a training run: {err}") from None
    cfg = from_record(record)
    encoding = encoders.get(cfg.encoding, **cfg.encoding_options)
    tok = Tokenizer(encoding, vocab_size=cfg.model.vocab_size, bpe=cfg.model.text_bpe)
    model = GPT(cfg.model_config(), encoding, tok.vocab_size, tok.num_id, tok.piece_ids)
    load_weights(model, folder / weights)
    return model.to(device).eval(), tok, cfg


class BestWriter:
    """best.pt written on a worker thread: the weights are copied to the host at once (training
    goes on changing them) and written to disk while the next steps run, so an improving
    evaluation does not stall the GPU on the disk. `wait` before anything relies on best.pt being
    complete: a checkpoint (which records the best score), the final test; a failed write raises
    there."""

    def __init__(self):
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="best.pt")
        self.pending, self.saved = None, False

    def holds(self, path: Path) -> bool:
        """Whether best.pt exists or is being written (every rank decides alike)."""
        return self.saved or path.exists()

    def save(self, path: Path, state: dict, write: bool = True) -> None:
        """Write `state` to `path` (on this rank if `write`; the others only note it)."""
        self.saved = True
        if not write:
            return
        self.wait()
        snapshot = {k: v.detach().to("cpu", copy=True) for k, v in state.items()}
        self.pending = self.worker.submit(write_atomic, path, lambda tmp: torch.save(snapshot, tmp))

    def wait(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.worker.shutdown(wait=True)
