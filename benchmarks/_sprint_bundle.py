"""The GPU sprint's bundle (benchmarks/gpu_sprint.py's docstring says what a lease does): a plan's
run folders packed into at most 8 gzipped tars of at most 16 MiB, 64 MiB in all (what a lent
machine's call gives back), with a manifest of their SHA-256 and each run's state, and restored
into a run folder on the next lease or back on a CPU. A part's members are checked before anything
is written: plain files named run/file with a file a bundle holds, nothing else.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import re
import tarfile
from pathlib import Path

import pandas as pd

from workbench.runs.atomic import write_atomic
from workbench.runs.outputs import check_run_folder
from workbench.study.kept import thinned
from workbench.study.parts import Run

ROWS_FILE, SPEED_FILE, LEASES, MANIFEST = (
    "gpu-study.csv",
    "gpu-sprint-throughput.csv",
    "leases.jsonl",
    "sprint-manifest.json",
)
OVERFLOW = "bundle-overflow"  # under --out: the parts that did not fit the files that come back
STUB = ("config.json", "environment.json", LEASES, "test_summary.csv")  # a finished run, for the next lease
IN_FLIGHT = ("config.json", "environment.json", LEASES, "evals.jsonl", "metrics.jsonl", "checkpoint.pt", "best.pt")
DONE = STUB + ("test_samples.csv", "evals.jsonl", "metrics.jsonl", "best.pt")
TOP = (ROWS_FILE, SPEED_FILE)  # the plan's own files, carried in the first resume part
METRIC_ROWS = 2_000
MiB = 2**20
PART_BYTES, BUNDLE_BYTES, BUNDLE_FILES = 16 * MiB, 64 * MiB, 8  # what a lent machine's call gives back
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def steps_of(cfg) -> tuple[int, int]:
    """(steps, tokens a step) of a run on one process."""
    per = cfg.batch_size * cfg.model_config().block_size * cfg.accumulation(1)
    return max(1, math.ceil(cfg.tokens / per)), per


def state(folder: Path) -> tuple[str, int, float]:
    """(finished | in flight | to train, the step it would go on from, its training seconds then)."""
    from workbench.runs.checkpoints import load_checkpoint

    if (folder / "test_summary.csv").is_file():
        return "finished", -1, 0.0
    if (folder / "checkpoint.pt").is_file():
        try:
            ckpt = load_checkpoint(folder / "checkpoint.pt")
            return "in flight", int(ckpt["state"]["step"]), float(ckpt["state"]["seconds"])
        except (ValueError, KeyError, TypeError):
            pass
    return "to train", 0, 0.0


def _plain(value):
    return value.item() if hasattr(value, "item") else str(value)


def _gzip_tar(files: dict[str, bytes]) -> bytes:
    """A gzipped tar of {member name: bytes}, its times zeroed (the same runs give the same bytes).
    A part is such tars one after another: `tarfile.open(..., ignore_zeros=True)` (or `tar -xzif`)
    reads them as one."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)


def _files(folder: Path, names) -> dict[str, bytes]:
    """{run/name: bytes} of the files of `names` the folder holds; the step log thinned."""
    out = {}
    for name in names:
        path = folder / name
        if path.is_file():
            data = path.read_bytes()
            if name == "metrics.jsonl":
                lines = [line for line in data.decode().splitlines() if line.strip()]
                data = "".join(f"{line}\n" for line in thinned(lines, METRIC_ROWS)).encode()
            out[f"{folder.name}/{name}"] = data
    return out


def write_bundle(runs: list[Run], out: Path, dest: Path, before: dict, lease: dict) -> dict:
    """Pack the runs into DEST (see the module's docstring); returns the manifest written there."""
    resume, done, states = [], [], {}
    for r in runs:
        folder = out / r.name
        now, step, _ = state(folder)
        states[r.name] = dict(state=now, step=steps_of(r.config)[0] if now == "finished" else step)
        if now == "finished":
            resume.append(([r.name], _files(folder, STUB)))
            if before[r.name][0] != "finished" and (folder / "best.pt").is_file():
                done.append(([r.name], _files(folder, DONE)))
        elif now == "in flight":
            resume.append(([r.name], _files(folder, IN_FLIGHT)))
    top = {name: (out / name).read_bytes() for name in TOP if (out / name).is_file()}
    if top:
        resume.insert(0, ([], top))
    parts = []  # (kind, runs, the part's bytes): each set compressed once, whole sets to a part
    for kind, sets in (("resume", resume), ("done", done)):
        names, blobs = [], []
        for run_names, files in sets:
            blob = _gzip_tar(files)
            if len(blob) > PART_BYTES:
                raise ValueError(f"run {run_names} packs to {len(blob):,} bytes, over a part's {PART_BYTES:,}")
            if blobs and sum(map(len, blobs)) + len(blob) > PART_BYTES:
                parts.append((kind, names, b"".join(blobs)))
                names, blobs = [], []
            names, blobs = names + run_names, blobs + [blob]
        if blobs:
            parts.append((kind, names, b"".join(blobs)))
    dest.mkdir(parents=True, exist_ok=True)
    for old in [*dest.glob("sprint-*.tar.gz"), dest / MANIFEST]:
        old.unlink(missing_ok=True)  # a bundle is one lease's, whole
    overflow = out / OVERFLOW
    for old in overflow.glob("sprint-*.tar.gz"):
        old.unlink()
    listed, sent, counts, full = [], 0, {"resume": 0, "done": 0}, False
    for kind, names, blob in parts:  # resume parts first: what the next lease cannot do without
        counts[kind] += 1
        name = f"sprint-{kind}-{counts[kind]:02d}.tar.gz"
        # the manifest is one of the files that come back, and needs its room
        full = full or len(listed) + 2 > BUNDLE_FILES or sent + len(blob) > BUNDLE_BYTES - MiB
        where = overflow if full else dest
        write_atomic(where / name, lambda tmp, blob=blob: Path(tmp).write_bytes(blob))
        sent += 0 if full else len(blob)
        listed.append(
            dict(
                file=name,
                kind=kind,
                where=str(where) if full else "bundle",
                bytes=len(blob),
                sha256=hashlib.sha256(blob).hexdigest(),
                runs=names,
            )
        )
    manifest = dict(lease=lease, parts=listed, runs=states)
    write_atomic(dest / MANIFEST, lambda tmp: Path(tmp).write_text(json.dumps(manifest, indent=1, default=_plain)))
    return manifest


def _read_parts(src: Path) -> tuple[dict[str, dict[str, bytes]], dict[str, bytes], list[str]]:
    """({run: {file: bytes}}, {top file: bytes}, notes) of every part in SRC, checked: each part's
    SHA-256 against the manifest where it names it; members only plain files named run/file with a
    file a bundle holds, or the plan's own top files (no links, no other paths)."""
    manifest = json.loads((src / MANIFEST).read_text()) if (src / MANIFEST).is_file() else {"parts": []}
    expected = {p["file"]: p for p in manifest["parts"]}
    runs: dict[str, dict[str, bytes]] = {}
    top, notes = {}, []
    allowed = set(DONE) | set(IN_FLIGHT)
    for part in sorted(src.glob("sprint-*.tar.gz")):
        blob = part.read_bytes()
        if part.name in expected and hashlib.sha256(blob).hexdigest() != expected[part.name]["sha256"]:
            raise ValueError(f"{part} is not the part the manifest names (its SHA-256 differs): fetch it again")
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz", ignore_zeros=True) as tar:
            for member in tar:
                parts = member.name.split("/")
                ok = member.isreg() and (
                    (len(parts) == 1 and parts[0] in TOP)
                    or (len(parts) == 2 and NAME.fullmatch(parts[0]) and parts[1] in allowed)
                )
                if not ok:
                    raise ValueError(f"{part} holds {member.name!r}, which no bundle of this command holds: refused")
                data = tar.extractfile(member).read()
                if len(parts) == 1:
                    top[parts[0]] = data
                else:
                    runs.setdefault(parts[0], {})[parts[1]] = data
    missing = [
        f"{p['file']} ({p['where']})"
        for p in manifest["parts"]
        if p["where"] == "bundle" and not (src / p["file"]).is_file()
    ]
    missing += [
        f"{p['file']} (left on the machine in {p['where']})" for p in manifest["parts"] if p["where"] != "bundle"
    ]
    if missing:
        notes.append(f"not in {src}: {', '.join(missing)}")
    return runs, top, notes


def _progress(files: dict[str, bytes] | None, folder: Path | None) -> float:
    """How far a run is: inf when finished, its checkpoint's step, or -1 (nothing to go on from)."""
    import torch

    if files is not None:
        if "test_summary.csv" in files:
            return math.inf
        if "checkpoint.pt" in files:
            return torch.load(io.BytesIO(files["checkpoint.pt"]), map_location="cpu", weights_only=True)["state"][
                "step"
            ]
        return -1
    now, step, _ = state(folder)
    return math.inf if now == "finished" else step if now == "in flight" else -1


def restore(src: Path, out: Path) -> list[str]:
    """Restore the runs of the bundle in SRC into OUT; one line per run saying what was done."""
    from workbench.runs.folder import RUN_FILES

    runs, top, lines = _read_parts(Path(src))
    out.mkdir(parents=True, exist_ok=True)
    for name, files in sorted(runs.items()):
        folder = out / name
        check_run_folder(folder, (*RUN_FILES, LEASES))
        theirs, ours = _progress(files, None), _progress(None, folder)
        if theirs < ours:
            lines.append(f"{name}: kept (further in {out})")
            continue
        if theirs > ours:  # the bundle's run replaces what OUT holds of it
            for old in (*RUN_FILES, LEASES):
                (folder / old).unlink(missing_ok=True)
        added = [f for f in files if not (folder / f).exists()]
        for f in added:
            write_atomic(folder / f, lambda tmp, data=files[f]: Path(tmp).write_bytes(data))
        where = "finished" if theirs == math.inf else f"at step {theirs}" if theirs >= 0 else "begun"
        lines.append(f"{name}: {where}" + ("" if added else " (nothing new)"))
    if SPEED_FILE in top:  # every lease's speeds, one table
        mine = pd.read_csv(out / SPEED_FILE) if (out / SPEED_FILE).is_file() else pd.DataFrame()
        both = pd.concat([mine, pd.read_csv(io.BytesIO(top[SPEED_FILE]))], ignore_index=True).drop_duplicates()
        write_atomic(out / SPEED_FILE, lambda tmp: both.to_csv(tmp, index=False))
    return lines
