"""A GPT with a number head (appendix C.1): RoPE, QK-norm, RMSNorm, ReLU² MLP, untied embeddings,
no dropout, causal scaled-dot-product attention over packed sequences.

Packed rows hold many samples. Attention never crosses a sample boundary (a block-diagonal causal
boolean mask built from the doc id of every token) and RoPE positions restart at every sample.

Numbers enter at <|num|> positions: the number encoding joins the learned <|num|> embedding
(`encoding.embed`). They leave through `encoding.head`, read from the final hidden state of every
position whose next token is <|num|>. Loss = cross-entropy + 10 × number loss (C.1).

RMSNorm, QK-norm, RoPE, ReLU², the lm head's cross-entropy and the masked attention run as the
fused autograd functions of `fused.py` (same values, less memory traffic, and attention that skips
the keys of other samples: on a CPU they set the speed, benchmarks/train.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .encoders.base import NumberEncoding
from .fused import attention_plan, linear_cross_entropy, masked_attention, relu_squared, rms_norm, rotate
from .numbers import NUM_TOKEN
from .tokenizer import SPECIAL_TOKENS

NUMBER_LOSS_WEIGHT = 10.0
NUM_ID = SPECIAL_TOKENS.index(NUM_TOKEN)


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    block_size: int = 256  # context length of training rows
    mlp_ratio: int = 4
    activation: str = "relu2"  # "relu2" (modded nanoGPT, ours) or "gelu" (GPT-2)


PRESETS = {
    # ~0.4M parameters in the blocks (+0.5M in embedding and lm head with the 2060-token vocabulary)
    "cpu-tiny": GPTConfig(n_layer=2, n_head=2, d_model=128, block_size=128),
    # ~3.1M in the blocks (+1.1M embedding and lm head)
    "cpu-small": GPTConfig(n_layer=4, n_head=4, d_model=256, block_size=256),
    # appendix C.1: 6 layers, 6 heads, 768 wide, context 1024 (117M with the GPT-2 vocabulary)
    "paper": GPTConfig(n_layer=6, n_head=6, d_model=768, block_size=1024),
}


def preset(name: str, **overrides) -> GPTConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return replace(PRESETS[name], **overrides)


def packed_mask(doc_ids: Tensor) -> Tensor:
    """Causal attention that never crosses a sample boundary: [B, 1, T, T] bool (True = attend)."""
    T = doc_ids.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=doc_ids.device).tril()
    return ((doc_ids[:, :, None] == doc_ids[:, None, :]) & causal)[:, None]


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.d_model // cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        nn.init.zeros_(self.proj.weight)

    def forward(self, x, cos, sin, mask, plan=None, cache=None):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, self.head_dim).transpose(1, 3).unbind(2)
        # QK-norm, then RoPE: channel pairs (i, i + D/2) rotated by each token's angles [B, 1, T, D/2]
        q, k = rotate(rms_norm(q), cos, sin), rotate(rms_norm(k), cos, sin)
        if cache is not None:  # generation: keys and values of the earlier steps
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
        y = masked_attention(q, k, v, mask, plan)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.attn = Attention(cfg)
        self.up = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=False)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=False)
        nn.init.zeros_(self.down.weight)
        self.act = relu_squared if cfg.activation == "relu2" else F.gelu

    def forward(self, x, cos, sin, mask, plan=None, cache=None):
        x = x + self.attn(rms_norm(x), cos, sin, mask, plan, cache)
        return x + self.down(self.act(self.up(rms_norm(x))))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, encoding: NumberEncoding, vocab_size: int, num_id: int = NUM_ID):
        super().__init__()
        if cfg.d_model % cfg.n_head or (cfg.d_model // cfg.n_head) % 2:
            raise ValueError(f"d_model {cfg.d_model} must split into n_head {cfg.n_head} heads of even size")
        if cfg.activation not in ("relu2", "gelu"):
            raise ValueError(f"activation must be 'relu2' or 'gelu', got {cfg.activation!r}")
        if encoding.d_model != cfg.d_model:
            raise ValueError(f"the encoding was built for d_model={encoding.d_model}, the model has {cfg.d_model}")
        if not 0 <= num_id < vocab_size:
            raise ValueError(f"num_id {num_id} is outside the vocabulary of {vocab_size}")
        self.cfg, self.num_id = cfg, num_id
        self.wte = nn.Embedding(vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.lm_head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        nn.init.normal_(self.lm_head.weight, std=cfg.d_model ** -0.5)
        self.number = encoding
        head_dim = cfg.d_model // cfg.n_head
        inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """Optimizer groups of C.1. hidden: 2-D matrices in the blocks (Muon); embedding: token
        embedding + the encoding's combination layers; head: lm head + number head; scalar: the
        remaining parameters with fewer than 2 dimensions."""
        groups = {"hidden": [], "embedding": [], "head": [], "scalar": []}
        for name, p in self.named_parameters():
            if name.startswith("lm_head.") or name.startswith("number.number_head."):
                groups["head"].append(p)
            elif p.ndim < 2:
                groups["scalar"].append(p)
            elif name.startswith("blocks."):
                groups["hidden"].append(p)
            else:
                groups["embedding"].append(p)
        return groups

    def embed(self, ids: Tensor, values: Tensor) -> Tensor:
        x = self.wte(ids)
        if self.number.single_token:
            at = ids == self.num_id
            if at.any():
                x = x.clone()
                x[at] = self.number.embed(x[at], values[at]).to(x.dtype)
        return x

    def trunk(self, ids: Tensor, values: Tensor, positions: Tensor, mask: Tensor, cache=None) -> Tensor:
        """Final (normalized) hidden states [B, T, d]. `mask` [B, 1, T, T_keys] bool; `cache` a list
        with one [] per block, filled with keys/values for generation."""
        x = self.embed(ids, values)
        angles = positions[:, None, :, None].float() * self.inv_freq  # [B, 1, T, D/2]
        cos, sin = angles.cos(), angles.sin()
        plan = attention_plan(mask) if cache is None else None  # the keys each query block may see
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, mask, plan, None if cache is None else cache[i])
        return rms_norm(x)

    def forward(self, ids, values, positions, doc_ids, targets=None, target_values=None, loss_mask=None,
                ce_count=None, number_count=None):
        """Without targets: (logits [B, T, V], None). With targets: (None, the losses {"loss", "ce",
        "number"}); the lm head runs at the loss positions only (not on question tokens), fused with
        the cross-entropy, so the logits are never kept. The means divide by `ce_count` /
        `number_count` when given (the counts of the whole global batch, so data-parallel ranks
        average to the single-process loss)."""
        hidden = self.trunk(ids, values, positions, packed_mask(doc_ids))
        if targets is None:
            return self.lm_head(hidden), None
        mask = loss_mask if loss_mask is not None else torch.ones_like(targets, dtype=torch.bool)
        ce_sum = linear_cross_entropy(hidden[mask], self.lm_head.weight, targets[mask])
        ce = ce_sum / (ce_count if ce_count is not None else max(1, int(mask.sum())))
        losses = {"ce": ce}
        total = ce
        if self.number.single_token:
            at = mask & (targets == self.num_id)
            n = int(at.sum())
            if n:
                mean = self.number.loss(self.number.head(hidden[at]).float(), target_values[at])
                number = mean * n / (number_count if number_count is not None else n)
            else:  # keeps the head in the graph, so every data-parallel rank reduces the same tensors
                number = sum((p.sum() for p in self.number.parameters()), hidden.new_zeros(())) * 0.0
            losses["number"] = number
            total = total + NUMBER_LOSS_WEIGHT * number
        losses["loss"] = total
        return None, losses
