"""Where a run came from (environment.json): the workbench's commit, the libraries, the machine and
its kernels, every "auto" setting as it resolved; whether the run in a folder was made on this
machine's kernels (`kernel_difference`) and CPU model (`cpu_difference`); and the copy of that
record every checkpoint keeps (`provenance`), which a resume checks environment.json against
(`provenance_problem`). Runs made on other kernels round differently: they retrace each other only
on the same kernels.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import torch

from .. import tasks
from ..config import TrainConfig
from .reading import read_json

# What a run's numbers retrace on (keys of `environment`): the machine, its kernels and the numerics
# mode. A checkpoint keeps them, with the commit, for each machine the run trained on.
PROVENANCE = ("cpu_model", "kernels", "numerics", "cpu_capability", "mkl_branch")


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
    docs/study/reproducibility.md), so a run continued on the other would be
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


def device_of(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"--device {name!r} is not a device (cpu, cuda, cuda:N or auto): {err}") from None
