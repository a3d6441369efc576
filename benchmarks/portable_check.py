"""Do short runs give the committed bits on this machine? Portable numerics' promise, checked.

    python benchmarks/portable_check.py                  # every reference run; exit 0 only if all identical
    python benchmarks/portable_check.py --runs default   # some of them
    python benchmarks/portable_check.py --write          # make the references on this machine (commit them)

Each reference run (RUNS: the first run's command, FoNE on two tasks, xVal, single digit with text,
and the first run on two processes under torchrun) trains in a fresh process under portable
numerics, one thread, and is reduced to what it computed: the per-step losses of metrics.jsonl,
evals.jsonl without its clock, test_samples.csv, and the SHA-256 of the final weights (every
tensor of checkpoint.pt's model, in name order). `benchmarks/reference/portable.json` holds them as
made on one machine; a rerun anywhere prints one line per run, then the verdict.

Where ../shared/reference/amd_epyc_avx2_0ce36f7.json exists (another machine's run of the first
command at commit 0ce36f7), the default run's losses are also compared with its hash, as information
only, outside the verdict: that run's matrix products were MKL's COMPATIBLE branch, and portable
numerics now compute them with the workbench's own GEMM (workbench/model/gemm.py), so it DIFFERS by design.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "benchmarks" / "reference" / "portable.json"
OTHER_MACHINE = ROOT.parent / "shared" / "reference" / "amd_epyc_avx2_0ce36f7.json"
TRAIN = ["-m", "workbench.train", "--numerics", "portable", "--threads", "1"]
RUNS = {
    "default": TRAIN + ["--tokens", "6e4"],
    "fone": TRAIN + ["--encoding", "fone", "--tasks", "addition,multiplication", "--tokens", "4e4"],
    "xval": TRAIN + ["--encoding", "xval", "--tokens", "4e4"],
    "single_digit_text": TRAIN + ["--encoding", "single_digit", "--tasks", "addition,text", "--tokens", "4e4"],
    "torchrun_2": ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *TRAIN, "--tokens", "4e4"],
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def loss_rows(folder: Path) -> list[list]:
    """[[step, ce, number, loss], ...] of metrics.jsonl, as the other machine's reference hashes them."""
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [[r["step"], r["ce"], r.get("number"), r["loss"]] for r in rows]  # digit encodings have no number loss


def digest(folder: Path) -> dict:
    """What a run computed, without its clock: losses, evaluations, answers, final weights."""
    import torch

    rows = loss_rows(folder)
    evals = [json.loads(line) for line in (folder / "evals.jsonl").read_text().splitlines() if line.strip()]
    for row in evals:
        row.pop("time", None)
    state = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
    weights = hashlib.sha256()
    for name in sorted(state):
        weights.update(name.encode() + b"\0" + state[name].contiguous().numpy().tobytes())
    return {
        "rows": len(rows),
        "last_loss": rows[-1][3],
        "losses_sha256": sha(json.dumps(rows).encode()),
        "evals_sha256": sha(json.dumps(evals).encode()),
        "test_samples_sha256": sha((folder / "test_samples.csv").read_bytes()),
        "weights_sha256": weights.hexdigest(),
    }


def train(name: str, into: Path) -> Path:
    """Run `name` into a fresh folder under `into` (a clean environment: the mode comes from the flag)."""
    out = into / name
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "WORKBENCH_NUMERICS")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, *RUNS[name], "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"{name} failed (rc {done.returncode}):\n{done.stderr[-2000:]}")
    return out


def first_difference(mine: dict, theirs: dict) -> str:
    keys = [
        k for k in ("losses_sha256", "evals_sha256", "test_samples_sha256", "weights_sha256") if mine[k] != theirs[k]
    ]
    return ", ".join(k.removesuffix("_sha256") for k in keys)


def machine(run: Path | None = None) -> dict:
    """This machine, and how `run` computed (its environment.json: numerics, kernels, GEMM); without
    a run, how this process would."""
    from workbench.model import numerics
    from workbench.runs.provenance import cpu_model

    state = numerics.state()
    if run is not None:
        recorded = json.loads((run / "environment.json").read_text())
        state = {key: recorded.get(key) for key in state}
    return {"cpu_model": cpu_model(), "machine": platform.machine(), "python": platform.python_version(), **state}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=list(RUNS), help="which reference runs")
    parser.add_argument("--write", action="store_true", help=f"write the references ({REFERENCE.relative_to(ROOT)})")
    parser.add_argument("--keep", metavar="DIR", help="train into DIR and keep the run folders")
    args = parser.parse_args(argv)
    reference = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {"runs": {}}
    if not args.write and not reference["runs"]:
        parser.error(f"no references in {REFERENCE}: make them with --write")
    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="portable-check-"))
    scratch.mkdir(parents=True, exist_ok=True)
    same, made, computed = [], {}, None
    try:
        for name in args.runs:
            started = time.perf_counter()
            folder = train(name, scratch)
            computed = computed or machine(folder)
            made[name] = {"command": "python " + " ".join(RUNS[name]), **digest(folder)}
            seconds = time.perf_counter() - started
            if args.write:
                print(
                    f"{name}: written ({made[name]['rows']} steps, last loss {made[name]['last_loss']:.6f}, {seconds:.0f} s)"
                )
                continue
            theirs = reference["runs"].get(name)
            if theirs is None:
                print(f"{name}: no reference")
                same.append(False)
                continue
            differ = first_difference(made[name], theirs)
            same.append(not differ)
            verdict = "identical" if not differ else f"DIFFERS in {differ}"
            print(
                f"{name}: {verdict} ({made[name]['rows']} steps, last loss {made[name]['last_loss']:.9g}, {seconds:.0f} s)"
            )
        if "default" in made and OTHER_MACHINE.exists():
            other = json.loads(OTHER_MACHINE.read_text())["runs"]["portable"]
            ok = made["default"]["losses_sha256"] == other["sha256_of_rows_json"]
            print(
                f"default vs {OTHER_MACHINE.name} ({other['rows']} rows): {'identical' if ok else 'DIFFERS'} "
                "(information, not in the verdict: that run's products were MKL's COMPATIBLE branch)"
            )
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.write:
        reference = {"made_on": computed or machine(), "runs": {**reference["runs"], **made}}
        REFERENCE.parent.mkdir(exist_ok=True)
        REFERENCE.write_text(json.dumps(reference, indent=1) + "\n")
        print(f"references written to {REFERENCE.relative_to(ROOT)}")
        return 0
    print(
        f"verdict: {'all identical' if all(same) else 'NOT identical'} ({sum(same)} of {len(same)}) on "
        f"{machine()['cpu_model']} against references made on {reference.get('made_on', {}).get('cpu_model')}"
    )
    return 0 if all(same) else 1


if __name__ == "__main__":
    sys.exit(main())
