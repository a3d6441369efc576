"""Does a retrofitted model write <|num|>? Its probability at an answer's first token (issue 68).

    python benchmarks/retrofit_num_probability.py init  [--prompts 50] [--csv FILE]
    python benchmarks/retrofit_num_probability.py run   --adoption new|old [--steps 16] [--every 2] [--csv FILE]
    python benchmarks/retrofit_num_probability.py speed [--steps 3] [--csv FILE]
    python benchmarks/retrofit_num_probability.py frames [--prompts 50] [--csv FILE]

`init`: SmolLM2-135M-Instruct (`--model`, any folder works) as it starts, before any step: the
digit-token baseline in both frames (how much probability the pretrained model gives its digit
tokens where the answer starts), and BitTokens under every choice of issue 68 (`--num-init`,
`--digit-mass`, `--frame`). `run`: a short LoRA fine-tuning (the registered experiment's LoRA
settings, addition of numbers 1 ... 100 with 2 significant digits, questions only: short rows),
measured every `--every` steps, with issue 68's choices (`new`) or those before it (`old`), the
same data and seed. `speed`: tokens per second of full, LoRA and frozen-lower-half fine-tuning
steps of the registered experiment's size (512 tokens, a quarter text), after one warm-up step.
`frames`: the pretrained model with its own digits, zero-shot, where a question ends in the
workbench's <|eoq|>, in " = ", and in the model's chat template (the question as the user's
message, as it is and ending in " ="): `p_digits` where the answer starts, the greedy answer
(8 tokens, cut at the frame's end token) and `right`, the share whose first number is the answer.

The measures, per question of the test split (means over `--prompts` questions; questions are
teacher-forced with their answer): at the answer's first token, `p_num` (P(<|num|>) under the
model's softmax), `p_digits` (the probability of the model's tokens that begin a number there:
what masking the digits throws away), `p_write` (P(<|num|>) in the distribution generation draws
from: the digits masked, their mass merged into <|num|> or dropped), `writes_num` (the share of
questions whose greedy first token is <|num|>), `ce_answer` (the loss of that target, nats),
`h_l1` (the l1 norm of the hidden state the lm head reads there: an AdamW step of lr moves a row's
logit by about lr x h_l1 at most); after the answer's number, `p_num_after` (P(<|num|>) there in
generation's distribution: a second number where the answer should end) and `p_eos_after` (of
the token that ends an answer: the model's own in the "equals" frame); and the greedy answers as
the test split is answered (at most the answer's tokens and one more): `score` (mean log-sMAPE),
`answered` (the share that reads as one number) and the first four (`answers`). The baseline's rows give `p_digits`, the answers and `writes_num` as its greedy
first token being a digit.

`--model tiny` is a random 2-layer Llama with a tokenizer trained on the corpus, built in a
temporary folder: the smallest size, which tests/test_benchmarks.py runs (`init`, `run`).

One thread (`--threads`): the numbers of a machine whose other cores are busy are slower than
the machine's own; the load average is printed with every timing.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from workbench import tasks
from workbench.measures.evaluate import answer, answer_cap, score
from workbench.retrofit import NumberLM
from workbench.retrofit.config import RetrofitConfig
from workbench.retrofit.finetune import load_lm, rows, setup, train_step
from workbench.tasks.base import parse_float

OLD = {"num_init": "mean", "digit_mass": "drop", "frame": "markers"}  # every run before issue 68
NEW = {"num_init": "digits", "digit_mass": "merge", "frame": "equals"}
QUESTIONS = dict(decades=(0, 1), max_digits=2)  # the registered experiment's numbers
LORA = dict(lora=True, lr=1e-3, lora_rank=16, lora_alpha=32.0, head_lr=3e-3)  # its LoRA mode


def questions(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    frame = tasks.generate("addition", n, seed, "test", **QUESTIONS)
    return list(frame["prompt"]), list(frame["answer"])


@torch.no_grad()
def measure(lm: NumberLM, prompts: list[str], answers: list[str]) -> dict[str, float]:
    """The module docstring's measures, as means over the questions (medians of p_num and p_digits too)."""
    samples = [lm.tok.sample(p, a) for p, a in zip(prompts, answers)]
    batch = rows([(*s, 0) for s in samples], lm.tok.pad_id, 10_000)
    lm.eval()
    out = lm.run(batch["ids"].to(lm.device), batch["values"].to(lm.device), batch["attention_mask"].to(lm.device))
    at = torch.tensor([int(np.flatnonzero(mask)[0]) - 1 for _, _, mask in samples])  # input index of the answer's
    r = torch.arange(len(samples))
    logits, inputs, targets = out.logits[r, at].float().cpu(), batch["ids"][r, at], batch["targets"][r, at]
    starts = lm.tok.number_starts[lm.tok.num_id]  # the baseline's too: its digits
    raw = logits.softmax(-1)
    row = {
        "p_digits": float(raw[:, starts].sum(-1).mean()),
        "p_digits_median": float(raw[:, starts].sum(-1).median()),
        "h_l1": float(out.hidden_states[-1][r, at].float().abs().sum(-1).mean()),
    }
    texts, _, _ = answer(lm, lm.tok, prompts, answer_cap(lm.tok, answers))  # as the test split is answered
    row |= {
        "score": float(score("addition", texts, answers)["score"].mean()),
        "answered": float(np.mean([np.isfinite(parse_float(t)) for t in texts])),
        "answers": " | ".join(texts[:4]),
    }
    if lm.head is None:
        row["writes_num"] = float(torch.isin(logits.argmax(-1), torch.tensor(starts)).float().mean())
        return row
    write = lm.next_token_logits(logits, inputs).softmax(-1)
    after = lm.next_token_logits(out.logits[r, at + 1].float().cpu(), batch["ids"][r, at + 1]).softmax(-1)
    row |= {
        "p_num": float(raw[:, lm.tok.num_id].mean()),
        "p_num_median": float(raw[:, lm.tok.num_id].median()),
        "p_write": float(write[:, lm.tok.num_id].mean()),
        "writes_num": float((write.argmax(-1) == lm.tok.num_id).float().mean()),
        "ce_answer": float(lm.token_losses(logits, targets, inputs).mean()),
        "p_num_after": float(after[:, lm.tok.num_id].mean()),
        "p_eos_after": float(after[:, lm.tok.eos_id].mean()),
    }
    return row


def tiny_model() -> str:
    """A random 2-layer Llama (width 128: BitTokens' head fits) in a folder removed at exit."""
    import atexit
    import shutil

    from workbench.retrofit.pretrain import build_model, corpus_texts, save, train_tokenizer

    folder = Path(tempfile.mkdtemp(prefix="tiny-llama-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    tokenizer = train_tokenizer(corpus_texts("train")[:8], vocab_size=400)
    save(build_model("llama", tokenizer, hidden=128, layers=2, heads=2, context=256), tokenizer, folder / "model")
    return str(folder / "model")


def load(model: str, encoding: str | None, **adoption) -> NumberLM:
    torch.manual_seed(0)  # the new rows and the head, as a run with --seed 0
    return NumberLM.from_pretrained(model, encoding, **adoption)


def init(args) -> pd.DataFrame:
    prompts, answers = questions(args.prompts)
    table = []
    for frame in ("markers", "equals"):
        started = time.time()
        table.append(
            {"encoding": "none", "frame": frame, **measure(load(args.model, None, frame=frame), prompts, answers)}
        )
        print(table[-1], f"{time.time() - started:.0f} s", flush=True)
    for frame in ("markers", "equals"):
        for num_init in ("mean", "digits"):
            lm = load(args.model, args.encoding, num_init=num_init, frame=frame)
            for digit_mass in ("drop", "merge"):
                started = time.time()
                lm.digit_mass, lm._merged = digit_mass, None  # the same weights, the other way of masking
                choice = {"num_init": num_init, "digit_mass": digit_mass, "frame": frame}
                table.append({"encoding": args.encoding, **choice, **measure(lm, prompts, answers)})
                print(table[-1], f"{time.time() - started:.0f} s", flush=True)
    return pd.DataFrame(table)


def frames(args) -> pd.DataFrame:
    prompts, answers = questions(args.prompts)
    table = []
    for name in ("markers", "equals", "chat", "chat ="):
        lm = load(args.model, None, frame="markers" if name == "markers" else "equals")
        if name.startswith("chat"):
            end = lm.tok.hf.eos_token_id  # the template's end of a turn
            texts = [
                lm.tok.hf.apply_chat_template(
                    [{"role": "user", "content": p + (" =" if name == "chat =" else "")}],
                    add_generation_prompt=True,
                    tokenize=False,
                )
                for p in prompts
            ]
            encoded = [np.array(lm.tok.hf.encode(t, add_special_tokens=False)) for t in texts]
            encoded = [(ids, np.zeros(len(ids))) for ids in encoded]
        else:
            end = lm.tok.eos_id
            encoded = [lm.tok.encode(f"<|bos|>{p}<|eoq|>") for p in prompts]
        started = time.time()
        with torch.no_grad():
            # rows() gives inputs and their next tokens: a pad after each prompt keeps its last token an input
            padded = [
                (np.append(i, lm.tok.pad_id), np.append(v, 0.0), np.ones(len(i) + 1, bool), 0) for i, v in encoded
            ]
            batch = rows(padded, lm.tok.pad_id, 10_000)
            out = lm.run(batch["ids"], batch["values"], batch["attention_mask"])
        last = torch.tensor([len(i) - 1 for i, _ in encoded])
        probs = out.logits[torch.arange(len(encoded)), last].float().softmax(-1)
        starts = lm.tok.number_starts[lm.tok.num_id]
        top = lm.tok.hf.convert_ids_to_tokens(probs.argmax(-1).tolist())
        said = [lm.tok.decode(*g) for g in lm.generate(encoded, 8, end)]
        said = [t.replace(lm.tok.hf.decode([end]), "") for t in said]
        first = [re.match(r"\s*(-?\d+(?:\.\d+)?)", t) for t in said]
        right = [bool(m) and float(m.group(1)) == float(a) for m, a in zip(first, answers)]
        table.append(
            {
                "frame": name,
                "p_digits": float(probs[:, starts].sum(-1).mean()),
                "p_digits_median": float(probs[:, starts].sum(-1).median()),
                "top_first_token": max(set(top), key=top.count),
                "right": float(np.mean(right)),
                "answers": " | ".join(repr(t) for t in said[:4]),
                "seconds": time.time() - started,
            }
        )
        print(table[-1], flush=True)
    return pd.DataFrame(table)


def config(args, out: str, **settings) -> RetrofitConfig:
    return RetrofitConfig.of(
        model=args.model,
        encoding=args.encoding,
        tasks=("addition",),
        seed=0,
        pool_size=2000,
        val_samples=8,
        eval_every=10**6,
        test_samples=1,
        text_samples=0,
        context=512,
        dtype="float32",
        device="cpu",
        threads=args.threads,
        out=out,
        **QUESTIONS,
        **settings,
    )


def run(args) -> pd.DataFrame:
    adoption = NEW if args.adoption == "new" else OLD
    prompts, answers = questions(args.prompts)
    with tempfile.TemporaryDirectory() as scratch:
        cfg = config(
            args,
            scratch,
            tokens=args.steps * args.batch_tokens,
            batch_tokens=args.batch_tokens,
            text_share=args.text_share,
            **LORA,
            **adoption,
        )
        job = setup(cfg, Path(scratch), load_lm(cfg))
        started, seen, table, parts = time.time(), 0, [], {}
        for step in range(args.steps + 1):
            if step % args.every == 0 or step == args.steps:
                clock = time.time()
                row = {"adoption": args.adoption, **adoption, "step": step, "tokens": seen}
                row |= {k: parts.get(k) for k in ("loss", "ce", "number")} | measure(job.lm, prompts, answers)
                table.append(row | {"measure_s": time.time() - clock, "elapsed_s": time.time() - started})
                print({k: round(v, 6) if isinstance(v, float) else v for k, v in table[-1].items()}, flush=True)
            if step < args.steps:
                parts = train_step(job, step)
                seen += parts["tokens"]
    return pd.DataFrame(table)


def speed(args) -> pd.DataFrame:
    table = []
    with tempfile.TemporaryDirectory() as scratch:
        for mode in ("full", "lora", "frozen"):
            settings = LORA if mode == "lora" else dict(lr=1e-4, head_lr=3e-3)
            cfg = config(args, scratch, tokens=10**6, batch_tokens=512, text_share=0.25, **settings)
            lm = load_lm(cfg)
            if mode == "frozen":  # the embedding (tied to the lm head) and the lower half: no backward through them
                layers = lm.hf.model.layers
                lm.hf.get_input_embeddings().weight.requires_grad_(False)
                for layer in layers[: len(layers) // 2]:
                    layer.requires_grad_(False)
            job = setup(cfg, Path(scratch) / mode, lm)
            train_step(job, 0)  # warm-up: allocations, the first pool draws
            clock, tokens = time.perf_counter(), 0
            for step in range(1, args.steps + 1):
                parts = train_step(job, step)
                tokens += parts["tokens"]
            seconds = time.perf_counter() - clock
            trainable = sum(p.numel() for p in job.lm.parameters() if p.requires_grad)
            table.append(
                {
                    "mode": mode,
                    "steps": args.steps,
                    "tokens": tokens,
                    "seconds": seconds,
                    "tokens_per_s": tokens / seconds,
                    "s_per_step": seconds / args.steps,
                    "trainable": trainable,
                    "load_average": os.getloadavg()[0],
                }
            )
            print(table[-1], flush=True)
            del job, lm
    return pd.DataFrame(table)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("init", "run", "speed", "frames"))
    parser.add_argument("--model", default="smollm2-135m", help="a folder, a packaged model, or tiny")
    parser.add_argument("--encoding", default="bittokens")
    parser.add_argument("--prompts", type=int, default=50, help="test questions measured")
    parser.add_argument("--adoption", choices=("new", "old"), default="new", help="run: issue 68's choices or before")
    parser.add_argument("--steps", type=int, default=16, help="run: optimizer steps; speed: timed steps")
    parser.add_argument("--every", type=int, default=2, help="run: measure every this many steps")
    parser.add_argument("--batch-tokens", type=int, default=512)
    parser.add_argument("--text-share", type=float, default=0.0, help="run: share of text (0: questions only)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--csv", help="write the table here (appended to if it exists)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.model == "tiny":
        args.model = tiny_model()
    table = {"init": init, "run": run, "speed": speed, "frames": frames}[args.what](args)
    print(table.to_string(index=False))
    if args.csv:
        path = Path(args.csv)
        path.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(path, mode="a" if path.exists() else "w", header=not path.exists(), index=False)


if __name__ == "__main__":
    main()
