"""A GPT with a number head (appendix C.1): RoPE, QK-norm, RMSNorm, ReLU² MLP, untied embeddings,
no dropout, causal scaled-dot-product attention over packed sequences.

Numbers enter at <|num|> positions: the number encoding joins the learned <|num|> embedding
(`encoding.embed`). They leave through `encoding.head`, read from the final hidden state of every
position whose next token is <|num|>. Loss = cross-entropy + 10 × number loss (C.1).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .encoders.base import NumberEncoding

NUMBER_LOSS_WEIGHT = 10.0


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    block_size: int = 256
    mlp_ratio: int = 4


PRESETS = {
    "cpu-tiny": GPTConfig(n_layer=2, n_head=2, d_model=128, block_size=128),
    "cpu-small": GPTConfig(n_layer=4, n_head=4, d_model=256, block_size=256),
    "paper": GPTConfig(n_layer=6, n_head=6, d_model=768, block_size=1024),  # 117M with GPT-2 vocab
}


def preset(name: str, **overrides) -> GPTConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return replace(PRESETS[name], **overrides)


def rope_tables(head_dim: int, length: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x [B, T, H, D]; cos/sin [B, T, 1, D/2] gathered at each token's position."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).type_as(x)


def packed_mask(doc_ids: Tensor) -> Tensor:
    """Causal attention that never crosses a sample boundary: [B, 1, T, T] bool."""
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

    def forward(self, x, cos, sin, mask, cache=None):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, self.head_dim).unbind(2)
        q, k = F.rms_norm(q, (self.head_dim,)), F.rms_norm(k, (self.head_dim,))  # QK-norm
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if cache is not None:  # generation: keys/values of earlier steps
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.attn = Attention(cfg)
        self.up = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=False)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=False)
        nn.init.zeros_(self.down.weight)

    def forward(self, x, cos, sin, mask, cache=None):
        d = x.shape[-1]
        x = x + self.attn(F.rms_norm(x, (d,)), cos, sin, mask, cache)
        return x + self.down(F.relu(self.up(F.rms_norm(x, (d,)))).square())


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, encoding: NumberEncoding, vocab_size: int, num_id: int):
        super().__init__()
        if cfg.d_model % cfg.n_head:
            raise ValueError(f"d_model {cfg.d_model} is not divisible by n_head {cfg.n_head}")
        if encoding.d_model != cfg.d_model:
            raise ValueError(f"the encoding was built for d_model={encoding.d_model}, the model has {cfg.d_model}")
        self.cfg, self.num_id = cfg, num_id
        self.wte = nn.Embedding(vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.lm_head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        nn.init.normal_(self.lm_head.weight, std=cfg.d_model ** -0.5)
        self.number = encoding
        cos, sin = rope_tables(cfg.d_model // cfg.n_head, 4 * cfg.block_size)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """Optimizer groups of C.1: hidden 2-D matrices, embeddings, heads, scalars."""
        head_ids = {id(p) for p in self.lm_head.parameters()}
        head_ids |= {id(p) for n, p in self.number.named_parameters() if n.startswith("number_head")}
        groups = {"hidden": [], "embedding": [], "head": [], "scalar": []}
        for name, p in self.named_parameters():
            if id(p) in head_ids:
                groups["head"].append(p)
            elif p.ndim < 2:
                groups["scalar"].append(p)
            elif name.startswith("blocks."):
                groups["hidden"].append(p)
            else:  # token embedding and the encoding's combination layers
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

    def forward(self, ids, values, positions, mask, cache=None):
        """-> (logits [B, T, V], final hidden states [B, T, d])."""
        x = self.embed(ids, values)
        cos = self.rope_cos[positions][:, :, None]
        sin = self.rope_sin[positions][:, :, None]
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, mask, None if cache is None else cache[i])
        hidden = F.rms_norm(x, (x.shape[-1],))
        return self.lm_head(hidden), hidden

    def loss(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        """CE on answer/text tokens + 10 × number loss at positions whose next token is <|num|>."""
        logits, hidden = self(batch["ids"], batch["values"], batch["positions"],
                              packed_mask(batch["doc_ids"]))
        mask = batch["loss_mask"]
        ce = F.cross_entropy(logits[mask].float(), batch["targets"][mask])
        total, parts = ce, {"ce": ce.item()}
        if self.number.single_token:
            at = mask & (batch["targets"] == self.num_id)
            if at.any():
                number_loss = self.number.loss(self.number.head(hidden[at]), batch["target_values"][at])
                total = total + NUMBER_LOSS_WEIGHT * number_loss
                parts["number"] = number_loss.item()
        return total, parts
