"""A small causal LM pretrained from scratch on the workbench's text corpus: the stand-in for a
downloaded checkpoint (notebook 05, the tests). It is an ordinary Hugging Face model folder, so
everything downstream is the code that loads any local model.

    texts = corpus_texts("train")                         # the default text source's training documents
    tok = train_tokenizer(texts, vocab_size=2048)         # byte-level BPE with GPT-2's pre-tokenizer
    model = build_model("gpt2", tok, hidden=128, layers=4, heads=4, context=256)
    pretrain(model, tok, texts, tokens=2e6, context=256)  # next-token loss on random windows
    save(model, tok, "runs/tiny-gpt2")

The tokenizer is the model's own, digits included: GPT-2's pre-tokenizer cuts a run of digits
from the letters around it and the BPE merges digits as the corpus has them, so the digit-token
baseline of the retrofit writes numbers in the model's own pieces.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..runs.atomic import write_folder
from ..tasks.sampling import SPLITS, question_hash, split_of
from ..tasks.text import documents
from ..tasks.text_sources import DEFAULT
from ..training.optim import lr_multiplier
from .hub import quiet

EOS = "<|endoftext|>"
ARCHITECTURES = ("gpt2", "llama", "qwen2")


def corpus_texts(split: str = "train", text_source: str = DEFAULT) -> list[str]:
    """The documents of the text source that fall in `split` (the text task's split by hash)."""
    docs = documents(text_source)
    keep = split_of(question_hash(docs.ids)) == SPLITS.index(split)
    return [t for t, k in zip(docs.texts, keep) if k]


def train_tokenizer(texts: list[str], vocab_size: int = 2048):
    """A byte-level BPE trained on `texts`, as a transformers PreTrainedTokenizerFast (eos
    <|endoftext|>, no padding token: the retrofit adds its own)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS, bos_token=EOS)


def build_model(
    architecture: str, tokenizer, hidden: int = 128, layers: int = 4, heads: int = 4, context: int = 256, seed: int = 0
):
    """A randomly initialised causal LM of `architecture` (GPT-2, Llama or Qwen2) for the
    tokenizer's vocabulary; no dropout."""
    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, Qwen2Config

    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {architecture!r}")
    common = dict(vocab_size=len(tokenizer), bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    if architecture == "gpt2":
        config = GPT2Config(
            n_embd=hidden,
            n_layer=layers,
            n_head=heads,
            n_positions=context,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        )
    else:
        kind = LlamaConfig if architecture == "llama" else Qwen2Config
        config = kind(
            hidden_size=hidden,
            intermediate_size=4 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2),
            max_position_embeddings=context,
            **common,
        )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config)


def token_stream(tokenizer, texts: list[str]) -> np.ndarray:
    """All documents tokenized, each followed by <|endoftext|>, as one int64 array."""
    ids = []
    for text in texts:
        ids += tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    return np.array(ids, dtype=np.int64)


def pretrain(
    model,
    tokenizer,
    texts: list[str],
    tokens: float,
    context: int = 256,
    batch_size: int = 8,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Next-token training on random windows of the token stream of `texts` for `tokens` tokens
    (AdamW, linear warm-up over 5 % then cosine); returns the loss of every step."""
    stream = token_stream(tokenizer, texts)
    if len(stream) <= context:
        raise ValueError(f"the texts hold {len(stream)} tokens, fewer than one window of {context}")
    steps = max(1, math.ceil(tokens / (batch_size * context)))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    model.train()
    losses = []
    bar = tqdm(range(steps), desc="pretraining")
    for step in bar:
        starts = rng.integers(0, len(stream) - context, batch_size)
        batch = torch.from_numpy(np.stack([stream[s : s + context] for s in starts]))
        for group in optimizer.param_groups:
            group["lr"] = lr * lr_multiplier(step, steps, 0.05)
        loss = model(input_ids=batch, labels=batch).loss  # the model shifts the labels itself
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    return losses


def save(model, tokenizer, folder) -> Path:
    """save_pretrained of model and tokenizer into `folder` (written beside it, then renamed)."""

    def fill(tmp: Path) -> None:
        with quiet():
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)

    return write_folder(Path(folder), fill)
