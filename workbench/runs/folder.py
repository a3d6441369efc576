"""A run directory: what is in it, whether a new run or a resume may use it, where a run came
from (environment.json), and a finished run read back.

    OUT/config.json         the configuration, one key per flag (config.recorded)
    OUT/environment.json    commit, libraries, the machine and its kernels, every "auto" as resolved
    OUT/metrics.jsonl       one row per step           OUT/evals.jsonl  one row per evaluation
    OUT/checkpoint.pt       all a resume needs         OUT/best.pt      the best evaluation's weights
    OUT/test_samples.csv    every test answer          OUT/test_summary.csv  per task
    OUT/tb/                 TensorBoard's event files: the logs' numbers as scalars (events.py)

Every file is written atomically. A resume, or a study counting a finished run, needs the same
configuration (`config_differences`; the settings of PLACE_AND_PACE and RESUMABLE aside) and the
same kernels (`kernel_difference`); a resume also the same CPU model (`cpu_difference`), and a
record of the machine it can trust (`provenance_problem`): environment.json readable and whole, and
agreeing with the copy of it that every checkpoint keeps (`provenance`).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import torch

from .. import encoders, tasks
from ..config import TrainConfig, from_record, recorded
from ..model.gpt import GPT
from ..tokenizer import Tokenizer
from . import events
from .atomic import clean_temporaries, write_atomic
from .outputs import check_run_folder
from .reading import open_regular, read_json, read_json_lines

RUN_FILES = (
    "config.json",
    "environment.json",
    "metrics.jsonl",
    "evals.jsonl",
    "checkpoint.pt",
    "best.pt",
    "test_samples.csv",
    "test_summary.csv",
)
# Settings that change neither the training nor its results: where a run lives and how it is run.
PLACE_AND_PACE = ("out", "overwrite", "device", "checkpoint_every", "prefetch", "same_kernels")
# A resumed run may also change the kernels (threads, compile, the attention kernel: they change the
# floating-point sums, so a finished run's results, but not what it trains) and what only the final
# test reads.
RESUMABLE = PLACE_AND_PACE + ("threads", "compile", "attention", "test_samples")
# Settings added after runs were published, with the value every earlier run had: a record
# without them trained with that value.
ADDED_SINCE = {"text_bpe": "corpus", "loss_reference": "text", "numerics": "native", "tf32": True}


def prepare(cfg: TrainConfig, resume: bool, rank: int) -> tuple[Path, dict | None]:
    """The run directory, checked before anything in it is touched: a resume needs a checkpoint of
    the same configuration (returned, loaded); a new run never silently replaces an old one. Only
    then are the temporaries a killed atomic write left removed (the caller holds the folder's lock)."""
    out = Path(cfg.run.out)
    check_run_folder(out, RUN_FILES)
    existing = [name for name in RUN_FILES if (out / name).exists()]
    if resume and not (out / "checkpoint.pt").exists():
        raise FileNotFoundError(
            f"--resume: there is no {out / 'checkpoint.pt'} to continue from; start the run "
            "without --resume" + (f" (add --overwrite to replace {existing})" if existing else "")
        )
    if not resume and existing and not cfg.run.overwrite:
        raise FileExistsError(
            f"{out} already holds a run ({', '.join(existing)}): pass --resume to continue "
            "it, --overwrite to replace it, or choose a new --out"
        )
    ckpt = None
    if resume:
        ckpt = load_checkpoint(out / "checkpoint.pt")
        why = checkpoint_problem(ckpt)
        if why:
            raise ValueError(
                f"--resume: {out / 'checkpoint.pt'} is not a checkpoint this workbench wrote ({why}); "
                "start the run again with --overwrite"
            )
        differ = config_differences(ckpt["config"], cfg, ignore=RESUMABLE)
        if differ:
            raise ValueError(
                f"--resume: {out} was trained with another configuration ({differ}); resume with "
                "those values, or start a new run (--overwrite or another --out)"
            )
        # the machine: a record of it the resume can trust, then whether it is this one
        why, differ = provenance_problem(cfg, ckpt), kernel_difference(cfg) or cpu_difference(cfg)
        if differ and not why:
            why = f"{out} was made on another machine ({differ})"
        if why:
            raise ValueError(
                f"--resume: {why}; --no-same-kernels resumes it anyway (its numbers then retrace on no one "
                "machine), or start a new run (--overwrite or another --out)"
            )
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        clean_temporaries(out, RUN_FILES)
        if not resume:
            for name in existing:
                (out / name).unlink()
            events.remove(out)
    return out, ckpt


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
# What a run's numbers retrace on (keys of `environment`): the machine, its kernels and the numerics
# mode. A checkpoint keeps them, with the commit, for each machine the run trained on.
PROVENANCE = ("cpu_model", "kernels", "numerics", "cpu_capability", "mkl_branch")


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


def provenance(record: dict, step: int) -> dict:
    """What a checkpoint keeps of an environment record (`environment`): the PROVENANCE keys and
    the commit, from `step` on."""
    return {"from_step": step, **{key: record.get(key) for key in (*PROVENANCE, "workbench_commit")}}


def carried_provenance(ckpt: dict | None, record: dict, step: int) -> list[dict]:
    """The provenance a run's next checkpoints keep: the resumed checkpoint's (none for a new run,
    or an older checkpoint), and this process's machine from `step` on where it differs from the
    last one (a resume on another machine under --no-same-kernels, or from another commit)."""
    kept = list((ckpt or {}).get("provenance", []))
    now = provenance(record, step)
    same = kept and all(kept[-1].get(key) == now[key] for key in now if key != "from_step")
    return kept if same else kept + [now]


def provenance_problem(cfg: TrainConfig, ckpt: dict) -> str:
    """Why a resume of the run in cfg.run.out cannot trust the record of the machine it was made on
    ("" when it can, or with --no-same-kernels): environment.json missing, unreadable, not a record
    or without the kernels and CPU model, or disagreeing with the checkpoint's own copy of it
    (`provenance`; an older checkpoint keeps none, and its record is taken as it is)."""
    if not cfg.run.same_kernels:
        return ""
    path = Path(cfg.run.out) / "environment.json"
    record, why = read_record(path)
    if why:
        return f"{why}: it is the record of the machine the run was made on, which a resume must match"
    lacking = [key for key in ("kernels", "cpu_model") if not isinstance(record.get(key), str) or not record[key]]
    if lacking:
        return f"{path} records no {' and no '.join(lacking)}: the record of the machine is incomplete"
    kept = ckpt.get("provenance") or [{}]
    differ = [key for key in PROVENANCE if key in kept[-1] and kept[-1][key] != record.get(key)]
    if differ:
        key = differ[0]
        return (
            f"{path} records {key} {record.get(key)!r} but {Path(cfg.run.out) / 'checkpoint.pt'} was made with "
            f"{kept[-1][key]!r}{f' (and {len(differ) - 1} more)' if len(differ) > 1 else ''}: the record was "
            "edited, or written by another process"
        )
    return ""


def read_record(path: Path) -> tuple[dict, str]:
    """(the JSON object in `path`, "") or ({}, why it is none: missing, unreadable, not JSON, not an
    object), the reason one line naming the file."""
    try:
        record = read_json(path)
    except FileNotFoundError:
        return {}, f"{path} is missing"
    except ValueError as err:
        return {}, str(err)
    if not isinstance(record, dict):
        return {}, f"{path} holds a JSON {type(record).__name__}, not a record"
    return record, ""


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


def finished(cfg: TrainConfig) -> bool:
    """cfg.run.out holds a finished run (its test summary is the last thing training writes)."""
    return (Path(cfg.run.out) / "test_summary.csv").exists()


def recorded_differences(cfg: TrainConfig) -> str:
    """The settings that change results in which the run recorded in cfg.run.out (config.json)
    differs from `cfg`; "" when it is this run."""
    path = Path(cfg.run.out) / "config.json"
    try:  # bounded, regular files only: a plan reads every run's record, crafted ones included
        record = read_json(path)
    except (OSError, ValueError):
        return f"no readable {path}"
    return config_differences(record if isinstance(record, dict) else {}, cfg) or kernel_difference(cfg)


def resumable(cfg: TrainConfig) -> bool:
    """cfg.run.out holds a checkpoint of this configuration (the settings a resume may change aside)."""
    path = Path(cfg.run.out) / "checkpoint.pt"
    try:
        if not path.exists():
            return False
        ckpt = load_checkpoint(path)
        return not checkpoint_problem(ckpt) and not config_differences(ckpt["config"], cfg, RESUMABLE)
    except ValueError:  # a corrupt checkpoint: not one to continue from
        return False


def config_differences(record: dict, cfg: TrainConfig, ignore=PLACE_AND_PACE) -> str:
    """The settings in which a recorded configuration differs from `cfg` ("" if none), those in
    `ignore` aside: "seed: 1 (recorded) vs 2; tasks: ...". A setting the record lacks differs,
    unless it came later (ADDED_SINCE) and `cfg` has the value every earlier run had."""
    record = {**ADDED_SINCE, **record}
    now, missing = recorded(cfg), object()
    keys = [k for k in now if k not in ignore and record.get(k, missing) != now[k]]
    shown = [
        f"{k}: {record[k]!r} (recorded) vs {now[k]!r}" if k in record else f"{k}: not recorded vs {now[k]!r}"
        for k in keys[:6]
    ]
    return "; ".join(shown) + (f"; and {len(keys) - 6} more" if len(keys) > 6 else "")


def kernels(device: torch.device) -> str:
    """What does the floating-point arithmetic: the CPU kernels torch dispatches to (its capability:
    DEFAULT, AVX2, AVX512, ...; ATEN_CPU_CAPABILITY lowers it) or the GPU model. Runs on other
    kernels round differently, so they retrace each other only on the same kernels."""
    if device.type == "cuda":
        return f"cuda/{torch.cuda.get_device_name(device)}"
    return f"{device.type}/{torch.backends.cpu.get_cpu_capability()}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            return names[0]
    except OSError:
        pass
    return platform.processor() or platform.machine()


def numpy_simd() -> list[str]:
    """The SIMD extensions NumPy dispatches to here (NPY_DISABLE_CPU_FEATURES removes some)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # older NumPy
        return []
    return sorted(k for k, on in features.items() if on and (k.startswith("AVX512") or k.startswith("X86_V")))


def environment(cfg: TrainConfig, device: torch.device | None = None, run=None) -> dict:
    """What made a run, beside its configuration: the workbench's commit, the interpreter, the
    libraries, the machine (CPU model, torch's and NumPy's instruction sets, AMX, threads: the
    kernels decide the last bits of every sum), every "auto" setting as it resolved, and the
    checksums of the text it read (the BPE's corpus and the text task's source)."""
    from importlib.metadata import version

    from ..model import numerics
    from ..model.fused import _kernels_agree
    from ..tasks import text_sources
    from ..training.batches import prefetch_mode
    from ..training.optim import cpu_has_bf16_matrix_units, newton_schulz_dtype

    device = device or torch.device("cpu")
    record = {
        "workbench_commit": _commit(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        **{name: version(name) for name in ("torch", "numpy", "pandas", "tokenizers")},
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "kernels": kernels(device),
        "numpy_simd": numpy_simd(),
        "amx": cpu_has_bf16_matrix_units(),
        **numerics.state(),  # the mode and what pins it (torch's capability, MKL's branch, oneDNN's ISA)
        "bpe_corpus_sha256": text_sources.SHIPPED_SHA256,
        "text_source_sha256": text_sources.checksum(cfg.data.text_source)
        if any(tasks.get(t).answer == "text" for t in cfg.tasks)
        else None,
    }
    if run is not None:
        attention, prefetch = cfg.model.attention, cfg.run.prefetch
        record["tokenizer_sha256"] = run.tok.checksum  # a changed BPE file changes the losses from step 1
        head_size = run.model.cfg.d_model // run.model.cfg.n_head
        record["resolved"] = {
            "device": str(device),
            "newton_schulz": newton_schulz_dtype(cfg.optim, device),
            "attention": "flex"
            if attention == "flex" or (attention == "auto" and device.type == "cuda")
            else ("dense with the CPU block plan" if attention == "auto" else "dense"),
            "prefetch": prefetch_mode(prefetch, device.type),
            "grad_accum": run.accum,
            "tf32": device.type == "cuda" and cfg.run.tf32,
            "list_sampling": cfg.regime.list_rule,
            "cpu_kernels": device.type == "cpu" and torch.get_num_threads() == 1 and _kernels_agree(head_size),
        }
    return record


def _recorded(out, key: str) -> str | None:
    return read_record(Path(out) / "environment.json")[0].get(key)


def recorded_kernels(out) -> str | None:
    """The kernels the run in `out` was made on (`kernels`, as its environment.json records them),
    None where it recorded none or has not started: what its numbers retrace on."""
    return _recorded(out, "kernels")


def kernel_difference(cfg: TrainConfig, device: torch.device | None = None) -> str:
    """ "" when the run in cfg.out was made on this machine's kernels (or did not record them, or
    --no-same-kernels), else what differs, for the refusal."""
    if not cfg.run.same_kernels:
        return ""
    made_on = recorded_kernels(cfg.run.out)
    now = kernels(device or device_of(cfg.run.device))
    return "" if made_on in (None, now) else f"kernels: {made_on} (recorded) vs {now} here"


def cpu_difference(cfg: TrainConfig, device: torch.device | None = None) -> str:
    """ "" when the CPU run in cfg.out was begun on this CPU model (or recorded none, or
    --no-same-kernels), else both models. Only a resume asks: an Intel and an AMD CPU that both
    dispatch to `cpu/AVX512` trained the same run apart (MKL picks its code path by the CPU;
    docs/study.md, "Reproducibility across CPUs"), so a run continued on the other would be
    neither machine's run. A finished run is still counted, and read, anywhere."""
    if not cfg.run.same_kernels or not kernels(device or device_of(cfg.run.device)).startswith("cpu/"):
        return ""
    model, here = _recorded(cfg.run.out, "cpu_model"), cpu_model()
    return "" if model in (None, here) else f"CPU: {model} (recorded) vs {here} here"


def _commit() -> str | None:
    """The git commit of the workbench's checkout, with "+changes" when tracked files differ from
    it (a result from uncommitted code cannot be traced back); None outside a git checkout."""
    root = str(Path(__file__).resolve().parents[2])

    def git(*args):
        return subprocess.run(
            ["git", "-C", root, *args], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()

    try:
        head, changes = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if changes else "")


def fresh_run_dir(root="runs", prefix="train") -> Path:
    """A new run directory for a run started without --out: ROOT/PREFIX-DATE-TIME, made at once
    (-2, -3, ... when two runs start in the same second). Under torchrun every rank must name the
    same one: ROOT/PREFIX-<the rendezvous id>, which torchrun --standalone makes unique per launch."""
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
        if run_id in ("", "none"):
            raise ValueError(
                "under torchrun without --standalone the ranks cannot agree on a new run directory: name one with --out"
            )
        return Path(root) / f"{prefix}-{run_id[:8]}"
    base = Path(root) / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    Path(root).mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()  # exclusive: two runs started at once never share a folder
            return path
        except FileExistsError:
            continue
    raise OSError(f"no free run directory {base}-N in {root}: name one with --out")


def device_of(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device {name!r} is not a device (cpu, cuda, cuda:N or auto): {err}") from None


class Logger:
    """Appends training rows to metrics.jsonl and evaluation rows to evals.jsonl, and their numbers
    to TensorBoard's event files (rank 0 only); a run resumed after `start` steps, to a new event
    file that hides what the killed process logged beyond them."""

    def __init__(self, out: Path, rank: int, start: int = 0):
        self.paths = {"step": out / "metrics.jsonl", "eval": out / "evals.jsonl"}
        self.active = rank == 0
        self.events = events.Events(out, rank, start)

    def _append(self, kind: str, row: dict) -> None:
        if self.active:
            with self.paths[kind].open("a") as f:
                f.write(json.dumps(row) + "\n")

    def step(self, row: dict) -> None:
        self._append("step", row)
        self.events.add("train", row, row["step"])

    def evaluation(self, row: dict) -> None:
        self._append("eval", row)
        self.events.add("eval", row, row["step"])

    def test(self, summary: pd.DataFrame, step: int) -> None:
        """Each task's test score, at the last step (events only: test_summary.csv is the record)."""
        self.events.add("test", dict(zip(summary["task"], summary["score"].astype(float))), step)

    def close(self) -> None:
        self.events.close()


def load_metrics(run_dir) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per training step, one row per evaluation) of a run directory; a line cut short by
    a kill (or still being written) is left out, any other bad line is a ValueError naming it."""

    def read(name):
        try:
            return pd.DataFrame(read_json_lines(Path(run_dir) / name))
        except FileNotFoundError:
            return pd.DataFrame()

    return read("metrics.jsonl"), read("evals.jsonl")


def truncate_log(path: Path, step: int) -> None:
    """Keep the rows logged up to `step` (a line cut short by a kill is dropped); atomic."""
    if path.exists():
        rows = [r for r in path.read_text().splitlines() if _logged_by(r, step)]
        write_atomic(path, lambda tmp: Path(tmp).write_text("".join(r + "\n" for r in rows)))


def _logged_by(line: str, step: int) -> bool:
    try:
        return json.loads(line)["step"] <= step
    except (json.JSONDecodeError, KeyError, TypeError):
        return False


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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while a run trained: the step it reached and the checkpoint's (None before the first
    one), for `main`'s one line on how to resume."""

    def __init__(self, out: Path, step: int, total: int, checkpoint: int | None):
        super().__init__(f"interrupted at step {step} of {total}")
        self.out, self.step, self.total, self.checkpoint = out, step, total, checkpoint


def resume_command(argv: list[str], out, flag: str = "--resume") -> str:
    """The command line that continues this run: the same flags (a resume needs the same
    configuration), its run directory named, and --resume (or `flag`)."""
    argv = [a for a in argv if a not in ("--resume", "--overwrite")]
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", str(out)]
    world = int(os.environ.get("WORLD_SIZE", 1))
    launcher = f"torchrun --nproc_per_node {os.environ.get('LOCAL_WORLD_SIZE', world)}" if world > 1 else "python"
    return f"{launcher} -m workbench.train {shlex.join(argv + [flag])}"


def stop_line(stop: KeyboardInterrupt, argv: list[str], out) -> str:
    """Ctrl-C's one line: where the run stopped and how to go on."""
    if not isinstance(stop, Interrupted):  # before training began
        again = resume_command(argv, out) if (Path(out) / "checkpoint.pt").exists() else None
        return "interrupted before training began" + (f"; resume with: {again}" if again else "")
    where = f"interrupted at step {stop.step} of {stop.total}"
    if stop.checkpoint is None:
        return (
            f"{where}, before its first checkpoint (--checkpoint-every): nothing to resume; start again "
            f"with: {resume_command(argv, stop.out, '--overwrite')}"
        )
    return f"{where}; resume from the checkpoint of step {stop.checkpoint} with: {resume_command(argv, stop.out)}"
