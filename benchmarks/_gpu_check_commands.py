"""gpu_check.py's two checks that run the workbench's own commands in fresh processes, as a user
types them: `resume` (a paper-tier training killed after its first checkpoint, then --resume) and
`retrofit` (a tiny Llama in bf16 fine-tuned by `python -m workbench.retrofit`, reloaded in a fresh
process). gpu_check.py's docstring says what each passes on."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def check_resume(args, size, device, tmp):
    out = tmp / "resume"
    steps = 4
    tokens = steps * size.rows * size.accum * size.context
    command = [
        sys.executable,
        "-m",
        "workbench.train",
        "--config",
        "paper",
        "--tasks",
        "addition,division,text",
        "--tokens",
        str(tokens),
        "--pool-size",
        str(size.pool),
        "--val-samples",
        "16",
        "--test-samples",
        "16",
        "--eval-every",
        "2",
        "--checkpoint-every",
        "2",
        "--device",
        args.device,
        "--out",
        str(out),
    ]
    if device.type != "cuda":
        command += [
            "--text-bpe",
            size.text_bpe,
            "--preset",
            size.preset,
            "--context",
            str(size.context),
            "--batch-size",
            str(size.rows),
            "--global-batch",
            str(size.rows * size.accum),
            "--no-bf16",
            "--vocab-size",
            str(size.vocab),
            "--threads",
            "1",
        ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.time()
    first = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    while first.poll() is None and not (out / "checkpoint.pt").exists():
        time.sleep(0.2)
    killed_at = time.time() - started
    if first.poll() is not None:
        return (
            False,
            f"the run ended (exit {first.returncode}) before its first checkpoint: "
            f"{first.stdout.read().decode()[-400:]}",
        )
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = subprocess.run(command + ["--resume"], cwd=ROOT, env=env, capture_output=True, text=True)
    total = time.time() - started
    logged = (
        [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
        if (out / "metrics.jsonl").exists()
        else []
    )
    finished = second.returncode == 0 and (out / "test_summary.csv").exists()
    line = (
        f"killed at {killed_at:.0f} s after its first checkpoint, resumed: exit {second.returncode}, steps "
        f"logged {logged} (want 1..{steps} once), {total:.0f} s in all"
    )
    if not finished:
        line += f"; {second.stdout[-300:]} {second.stderr[-600:]}"
    return finished and logged == list(range(1, steps + 1)), line


def check_retrofit(args, size, device, tmp):
    from workbench.retrofit.pretrain import build_model, corpus_texts, save, train_tokenizer

    tokenizer = train_tokenizer(corpus_texts("train")[:8], vocab_size=400)
    model = build_model("llama", tokenizer, hidden=128, layers=2, heads=2, context=128).to(torch.bfloat16)
    folder = save(model, tokenizer, tmp / "llama-bf16")
    out = tmp / "retrofit"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench.retrofit",
            "--model",
            str(folder),
            "--encoding",
            "bittokens",
            "--tasks",
            "addition",
            "--tokens",
            size.retrofit_tokens,
            "--bf16",
            "--device",
            args.device,
            "--pool-size",
            "400",
            "--val-samples",
            "8",
            "--test-samples",
            "8",
            "--text-samples",
            "2",
            "--eval-every",
            "4",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return (
            False,
            f"fine-tuning exit {done.returncode}: {(done.stderr or done.stdout).strip().splitlines()[-1][:300]}",
        )
    reload = """
import sys, torch
from workbench.measures.evaluate import answer
from workbench.retrofit import NumberLM
lm = NumberLM.from_pretrained(sys.argv[1]).to(sys.argv[2])
ids, values, _ = lm.tok.sample("3 + 4", "7")
ones = torch.ones(1, len(ids), dtype=torch.long, device=lm.device)
with torch.no_grad():
    out = lm.run(torch.as_tensor(ids)[None].to(lm.device), torch.as_tensor(values)[None].to(lm.device), ones)
    logits = torch.zeros(1, lm.tok.vocab_size, device=lm.device)
    logits[0, lm.tok.num_id] = 1  # the model writes <|num|>: its value comes from the head
    token, value = lm._next_token(logits, out.hidden_states[-1][:, -1])
texts = answer(lm, lm.tok, ["3 + 4"], 4)[0]
print(f"body {lm.hf.dtype}, head {next(lm.head.parameters()).dtype}, head's number {float(value[0]):.6g}, "
      f"answer to '3 + 4': {texts[0]!r}")
"""
    again = subprocess.run(
        [sys.executable, "-c", reload, str(out / "model"), args.device],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if again.returncode != 0:
        return False, f"reload exit {again.returncode}: {again.stderr.strip().splitlines()[-1][:300]}"
    return "head torch.float32" in again.stdout, f"fine-tuned and reloaded: {again.stdout.strip()}"
