"""A GPT with a number head (appendix C.1): the GPT-2 architecture of the paper's nanoGPT-2 (tanh
GELU MLP, biases, learnable RMSNorm, GPT-2 initialisation) with RoPE and QK-norm, untied embeddings,
no dropout, causal attention over packed sequences. `GPTConfig` switches each of these to the
alternatives of docs/fidelity.md (ReLU², no biases, no norm weights, LayerNorm, modded-nanoGPT init).

Packed rows hold many samples. Attention never crosses a sample boundary (a block-diagonal causal
boolean mask built from the doc id of every token) and RoPE positions restart at every sample.

Numbers enter at <|num|> positions: the encoding's number head joins the learned <|num|> embedding
(`number_head.embed`). They leave through `number_head`, read from the final hidden state of every
position whose next token is <|num|>. The loss (C.1) is per token: cross-entropy, plus 10 × the
number loss where the target is <|num|>, each token weighted by its task's weight (C.4's loss
normalisation), averaged over all target tokens. Digit encodings have no number head: their digits
are ordinary tokens.

`generate` decodes greedily with a KV cache; when the model writes <|num|>, the head's value is the
number and is fed back with the token, as in training.

RMSNorm, QK-norm, RoPE, ReLU², the lm head's cross-entropy and the masked attention run as the
fused autograd functions of `fused.py` (same values, less memory traffic, and attention that skips
the keys of other samples: on a CPU they set the speed, benchmarks/train.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from .encoders.base import NumberEncoding
from .fused import (attention_plan, linear_at_rows, linear_cross_entropy, masked_attention, relu_squared, rms_norm,
                    rotate, scale_at_rows)
from .numbers import NUM_TOKEN
from .tokenizer import CONTROL_TOKENS

NUM_ID = CONTROL_TOKENS.index(NUM_TOKEN)
ACTIVATIONS = {"gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu, "relu2": relu_squared}
NORMS = ("rms", "layer")
INITS = ("gpt2", "modded")
LOSSES = ("per_token", "separate_means")


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    block_size: int = 256  # context length of training rows
    mlp_ratio: int = 4
    activation: str = "gelu_tanh"  # GPT-2's (the authors' code); "gelu" exact; "relu2" modded nanoGPT
    bias: bool = True  # biases in the attention and MLP layers (GPT-2's)
    norm: str = "rms"  # RMSNorm (C.1) or "layer" (Table 9's LayerNorm ablation); QK-norm follows
    norm_weight: bool = True  # learnable gains in the block and final norms (the authors' nn.RMSNorm)
    init: str = "gpt2"  # GPT-2's N(0, 0.02) (the authors' code) or "modded" (zero output projections)
    loss: str = "per_token"  # C.1's per-token loss, or "separate_means": mean CE + 10 x mean number loss
    number_loss_weight: float = 10.0  # the 10 of C.1

    def __post_init__(self):
        for name, value, allowed in (("activation", self.activation, tuple(ACTIVATIONS)), ("norm", self.norm, NORMS),
                                     ("init", self.init, INITS), ("loss", self.loss, LOSSES)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(f"d_model {self.d_model} must split into n_head {self.n_head} heads of even size")


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


class Norm(nn.Module):
    """RMSNorm or LayerNorm over the last dimension, with a learnable gain (and, for LayerNorm, a
    bias) or none."""

    def __init__(self, d: int, kind: str = "rms", learnable: bool = True):
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.ones(d)) if learnable else None
        self.bias = nn.Parameter(torch.zeros(d)) if learnable and kind == "layer" else None

    def forward(self, x: Tensor, rows: Tensor | None = None, shape=None) -> Tensor:
        """The norm of x; x [N, d] may be the rows `rows` of an activation of `shape` (RMSNorm only),
        whose gain then gets the gradient of the whole activation's (see fused.scale_at_rows)."""
        if self.kind == "layer":
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias)
        y = rms_norm(x)
        if self.weight is None:
            return y
        return y * self.weight if rows is None else scale_at_rows(y, self.weight, rows, shape)


def qk_norm(x: Tensor, kind: str) -> Tensor:
    """QK-norm of each head's queries or keys: no weights, of the model's norm kind."""
    return rms_norm(x) if kind == "rms" else F.layer_norm(x, x.shape[-1:])


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.head_dim, self.norm = cfg.n_head, cfg.d_model // cfg.n_head, cfg.norm
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)

    def forward(self, x, cos, sin, mask, plan=None, cache=None, layer=0, rows=None):
        """The attention output [B, T, d]; with `rows` (flat indices into B x T) projected at those
        rows only, [N, d] (every position still gives its keys and values)."""
        # (unbound along a middle axis: unpacking a leading qkv axis breaks torch.compile in torch 2.13)
        q, k, v = rearrange(self.qkv(x), "b t (qkv h d) -> b h qkv t d", qkv=3, h=self.n_head).unbind(2)
        # QK-norm, then RoPE: channel pairs (i, i + D/2) rotated by each token's angles [B, 1, T, D/2]
        q, k = rotate(qk_norm(q, self.norm), cos, sin), rotate(qk_norm(k, self.norm), cos, sin)
        if cache is not None:  # generation: keys and values of the earlier steps come first
            k, v = cache.extend(layer, k, v)
        y = rearrange(masked_attention(q, k, v, mask, plan), "b h t d -> b t (h d)")
        if rows is None:
            return self.proj(y)
        return linear_at_rows(y.flatten(0, 1)[rows], self.proj, rows, y.shape[0] * y.shape[1])


class KVCache:
    """Keys and values of every layer for the tokens seen so far in generation, and which of those
    keys a new token may attend to (the left padding of shorter prompts never)."""

    def __init__(self, n_layer: int, visible: Tensor):
        self.layers: list[tuple[Tensor, Tensor] | None] = [None] * n_layer
        self.visible = visible  # [B, keys] bool

    def extend(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append this step's keys/values [B, H, T, D] to the layer's; return all of them."""
        if self.layers[layer] is not None:
            k, v = (torch.cat([old, new], 2) for old, new in zip(self.layers[layer], (k, v)))
        self.layers[layer] = (k, v)
        return k, v


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.norm1, self.norm2 = Norm(cfg.d_model, cfg.norm, cfg.norm_weight), Norm(cfg.d_model, cfg.norm, cfg.norm_weight)
        self.attn = Attention(cfg)
        self.up = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=cfg.bias)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.act = ACTIVATIONS[cfg.activation]

    def forward(self, x, cos, sin, mask, plan=None, cache=None, layer=0, rows=None):
        """x [B, T, d] -> [B, T, d]; with `rows` (flat indices into B x T), the output at those rows
        only, [N, d]: past the attention every op is row by row, so the rest runs on those rows."""
        if rows is None:
            x = x + self.attn(self.norm1(x), cos, sin, mask, plan, cache, layer)
            return x + self.down(self.act(self.up(self.norm2(x))))
        shape, total = x.shape, x.shape[0] * x.shape[1]
        x = x.flatten(0, 1)[rows] + self.attn(self.norm1(x), cos, sin, mask, plan, rows=rows)
        h = self.act(linear_at_rows(self.norm2(x, rows, shape), self.up, rows, total))
        return x + linear_at_rows(h, self.down, rows, total)


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, encoding: NumberEncoding, vocab_size: int, num_id: int = NUM_ID):
        super().__init__()
        if not 0 <= num_id < vocab_size:
            raise ValueError(f"num_id {num_id} is outside the vocabulary of {vocab_size}")
        self.cfg, self.num_id, self.encoding = cfg, num_id, encoding
        self.wte = nn.Embedding(vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = Norm(cfg.d_model, cfg.norm, cfg.norm_weight)
        self.lm_head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        self._init_weights()
        self.number_head = encoding.number_head(cfg.d_model)  # None: numbers are digit tokens
        head_dim = cfg.d_model // cfg.n_head
        inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _init_weights(self) -> None:
        """GPT-2's: every matrix N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 n_layer)),
        biases 0 (the number head keeps torch's defaults, as in the authors' code). "modded":
        modded-nanoGPT's zero residual projections, lm head N(0, d^-1/2), torch's default elsewhere."""
        residual = [m for b in self.blocks for m in (b.attn.proj, b.down)]
        if self.cfg.init == "modded":
            for m in residual:
                nn.init.zeros_(m.weight)
            nn.init.normal_(self.lm_head.weight, std=self.cfg.d_model ** -0.5)
            return
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for m in residual:
            nn.init.normal_(m.weight, std=0.02 / math.sqrt(2 * self.cfg.n_layer))

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """Optimizer groups of C.1. scalar: every parameter with fewer than 2 dimensions (biases,
        norm gains); hidden: the matrices of the blocks (Muon); embedding: the token embedding;
        head: all remaining parameters, the lm head and the number head with its joins."""
        groups = {"hidden": [], "embedding": [], "head": [], "scalar": []}
        for name, p in self.named_parameters():
            if p.ndim < 2:
                groups["scalar"].append(p)
            elif name.startswith("blocks."):
                groups["hidden"].append(p)
            elif name == "wte.weight":
                groups["embedding"].append(p)
            else:
                groups["head"].append(p)
        return groups

    def embed(self, ids: Tensor, values: Tensor) -> Tensor:
        x = self.wte(ids)
        at = ids == self.num_id
        if self.number_head is not None and at.any():
            x = x.clone()
            x[at] = self.number_head.embed(x[at], values[at]).to(x.dtype)
        return x

    def trunk(self, ids: Tensor, values: Tensor, positions: Tensor, mask: Tensor, cache: KVCache | None = None,
              rows: Tensor | None = None) -> Tensor:
        """Final (normalized) hidden states [B, T, d]. `mask` [B, 1, T, T_keys] bool. With `rows`
        (flat indices into B x T), those rows' only, [N, d]: the last block computes them alone
        past its attention, with the values the whole block gives them (same products row by row)."""
        x = self.embed(ids, values)
        angles = positions[:, None, :, None].float() * self.inv_freq  # [B, 1, T, D/2]
        cos, sin = angles.cos(), angles.sin()
        plan = attention_plan(mask) if cache is None else None  # the keys each query block may see
        shape = x.shape
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, mask, plan, cache, i, rows if i == len(self.blocks) - 1 else None)
        return self.norm(x) if rows is None else self.norm(x, rows, shape)

    def forward(self, ids, values, positions, doc_ids, targets=None, target_values=None, loss_mask=None,
                ce_count=None, number_count=None, task_ids=None, task_weights=None):
        """Without targets: (logits [B, T, V], None). With targets: (None, losses): "loss" (what is
        optimized), "ce" and "number" (unweighted means, for the log) and, with `task_ids` [B, T]
        (the task index of every target), each task's summed unweighted per-token loss and its
        target count ("task_loss", "task_tokens": C.4's normalisation measures them). A target's
        weight is task_weights[its task] (1 without). The lm head runs at the loss positions only,
        fused with the cross-entropy, so the logits are never kept. Means divide by `ce_count` /
        `number_count` when given (the counts of the whole global batch, so data-parallel ranks
        average to the single-process loss)."""
        if targets is None:
            return self.lm_head(self.trunk(ids, values, positions, packed_mask(doc_ids))), None
        mask = loss_mask if loss_mask is not None else torch.ones_like(targets, dtype=torch.bool)
        hidden = self._loss_hidden(ids, values, positions, doc_ids, mask)
        ce_count = ce_count if ce_count is not None else max(1, int(mask.sum()))
        weights = task_weights[task_ids[mask]] if task_weights is not None else torch.ones_like(targets[mask], dtype=torch.float32)
        ce_sum, ce_each = linear_cross_entropy(hidden, self.lm_head.weight, targets[mask], weights)
        per_token = ce_each.detach().clone()
        losses = {"ce": ce_each.sum() / ce_count}
        total = ce_sum / ce_count
        if self.number_head is not None:
            at = targets[mask] == self.num_id  # among the loss positions
            number_count = number_count if number_count is not None else max(1, int(at.sum()))
            if at.any():
                number_each = self.number_head.loss(self.number_head(hidden[at]).float(), target_values[mask][at])
                number_sum = (weights[at] * number_each).sum()
                per_token[at] += self.cfg.number_loss_weight * number_each.detach()
            else:  # keeps the head in the graph, so every data-parallel rank reduces the same tensors
                number_sum = number_each = sum((p.sum() for p in self.number_head.parameters()), hidden.new_zeros(())) * 0.0
            losses["number"] = number_each.detach().sum() / number_count
            scale = ce_count if self.cfg.loss == "per_token" else number_count
            total = total + self.cfg.number_loss_weight * number_sum / scale
        losses["loss"] = total
        if task_ids is not None:
            tasks, n_tasks = task_ids[mask], len(task_weights) if task_weights is not None else int(task_ids.max()) + 1
            losses["task_loss"] = per_token.new_zeros(n_tasks).index_add_(0, tasks, per_token)
            losses["task_tokens"] = per_token.new_zeros(n_tasks).index_add_(0, tasks, torch.ones_like(per_token))
        return None, losses

    def _loss_hidden(self, ids, values, positions, doc_ids, mask) -> Tensor:
        """hidden[mask] of the final hidden states [N, d]: the last block computes the loss positions
        only (but with LayerNorm or under autocast, which the row-wise layers of fused.py lack)."""
        if torch.is_autocast_enabled(ids.device.type) or self.cfg.norm != "rms":
            return self.trunk(ids, values, positions, packed_mask(doc_ids))[mask]
        return self.trunk(ids, values, positions, packed_mask(doc_ids), rows=mask.flatten().nonzero().squeeze(1))

    @torch.no_grad()
    def generate(self, prompts: list[tuple[np.ndarray, np.ndarray]], max_new_tokens: int,
                 eos_id: int, pad_id: int = 0) -> list[tuple[list[int], list[float]]]:
        """Greedy continuation of each prompt (token ids, values) until <|eos|> (included) or
        `max_new_tokens`: its (ids, values). Prompts are left-padded into one batch; padding is
        never attended to."""
        self.eval()
        device = self.lm_head.weight.device
        B, L = len(prompts), max(len(ids) for ids, _ in prompts)
        ids = torch.full((B, L), pad_id, dtype=torch.long)
        values = torch.zeros(B, L, dtype=torch.float64)
        real = torch.zeros(B, L, dtype=torch.bool)
        positions = torch.zeros(B, L, dtype=torch.long)
        for b, (i, v) in enumerate(prompts):
            n = len(i)
            ids[b, L - n:], values[b, L - n:] = torch.as_tensor(i), torch.as_tensor(v, dtype=torch.float64)
            real[b, L - n:], positions[b, L - n:] = True, torch.arange(n)
        # padding attends to padding only (a query that sees no key would give NaN), real tokens to real ones
        mask = ((real[:, :, None] == real[:, None, :]) & torch.ones(L, L, dtype=torch.bool).tril())[:, None]
        cache = KVCache(len(self.blocks), real)
        hidden = self.trunk(ids.to(device), values.to(device), positions.to(device), mask.to(device), cache)[:, -1]
        out = [([], []) for _ in range(B)]
        done = torch.zeros(B, dtype=torch.bool)
        next_position = positions[:, -1] + 1
        for _ in range(max_new_tokens):
            token, value = self._next_token(hidden)
            for b in torch.nonzero(~done).flatten().tolist():
                out[b][0].append(int(token[b]))
                out[b][1].append(float(value[b]))
            done |= token == eos_id
            if done.all():
                break
            cache.visible = torch.cat([cache.visible, torch.ones(B, 1, dtype=torch.bool)], 1)
            step_mask = cache.visible[:, None, None].to(device)
            hidden = self.trunk(token[:, None].to(device), value[:, None].to(device),
                                next_position[:, None].to(device), step_mask, cache)[:, -1]
            next_position += 1
        return out

    def _next_token(self, hidden: Tensor) -> tuple[Tensor, Tensor]:
        """Greedy token [B] and its value [B] (the number head's, where the token is <|num|>)."""
        token = self.lm_head(hidden).argmax(-1).cpu()
        value = torch.zeros(len(token), dtype=torch.float64)
        is_num = token == self.num_id
        if self.number_head is not None and is_num.any():
            value[is_num] = self.number_head.predict(self.number_head(hidden[is_num.to(hidden.device)])).cpu()
        return token, value
