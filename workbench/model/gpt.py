"""A GPT with a number head (appendix C.1): the GPT-2 architecture of the paper's nanoGPT-2 (tanh
GELU MLP, biases, learnable RMSNorm, GPT-2 initialisation) with RoPE and QK-norm, untied embeddings,
no dropout, causal attention over packed sequences. `GPTConfig` switches each of these to the
alternatives of docs/fidelity.md (ReLU², no biases, no norm weights, LayerNorm, modded-nanoGPT init).

Packed rows hold many samples. Attention never crosses a sample boundary (a block-diagonal causal
boolean mask built from the doc id of every token) and RoPE positions restart at every sample.

Numbers enter at <|num|> positions: the encoding's number head joins the learned <|num|> embedding
(`number_head.join` of its `features`). They leave through `number_head`, read from the final
hidden state of every position whose next token is <|num|>. `forward(batch)` gives a training
batch's final hidden states at its loss positions; `loss.losses` applies the lm head and the number
head there (C.1's per-token loss); `logits` serves evaluation. Digit encodings have no number head:
their digits are ordinary tokens.

`generate` decodes greedily with a KV cache; when the model writes <|num|>, the head's value is the
number and is fed back with the token, as in training.

An encoding may also act on the token ids (`encoding.token_module`, built with the tokenizer's
`piece_ids`): what its `embed` returns is added to the token embeddings (in generation, computed
on the tokens so far, plus what its `fed` gives from the hidden state that chose the token), and
its per-token `loss` is added to the cross-entropy. None for the paper's encodings, whose training
is unchanged by these hooks.

RMSNorm, QK-norm, RoPE, ReLU², the lm head's cross-entropy and the masked attention run as the
fused autograd functions of `fused.py` (same values, less memory traffic, and attention that skips
the keys of other samples: on a CPU they set the speed, benchmarks/train.py); QK-norm + RoPE as C on
a one-thread CPU (cpu_kernels.c, the same bits).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from ..encoders.base import NumberEncoding
from ..numbers import NUM_TOKEN
from ..tokenizer import CONTROL_TOKENS
from . import flex
from .fused import (
    attention_plan,
    linear_at_rows,
    masked_attention,
    norm_rotate,
    relu_squared,
    rms_norm,
    rotate,
    scale_at_rows,
)
from .gpt_config import ACTIVATION_NAMES, ATTENTIONS, INITS, LOSSES, NORMS, PRESETS, GPTConfig, preset  # noqa: F401

NUM_ID = CONTROL_TOKENS.index(NUM_TOKEN)
ACTIVATIONS = {"gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu, "relu2": relu_squared}
assert tuple(ACTIVATIONS) == ACTIVATION_NAMES  # the names the flags list (gpt_config.py)


@contextmanager
def true_float32():
    """Float32 matrix products in IEEE float32 inside, whatever TF32 setting the run made outside.

    Training on CUDA turns TF32 on unless --no-tf32 (the fused loss's products on the tensor cores); it keeps
    10 of float32's 23 mantissa bits: xVal's value, a BitTokens bit near its threshold or a FoNE
    digit would then be decided on ~3 significant digits. The number heads run inside this, so the
    "float32" they promise is float32 on every device. A no-op for CPU products (TF32 is a CUDA
    setting); the flag is process-wide, so it is restored on the way out.
    """
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    matmul.allow_tf32 = False
    try:
        yield
    finally:
        matmul.allow_tf32 = before


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


def qk_norm_rotate(x: Tensor, cos: Tensor, sin: Tensor, kind: str) -> Tensor:
    """QK-norm of each head's queries or keys (no weights, of the model's norm kind), then RoPE."""
    return norm_rotate(x, cos, sin) if kind == "rms" else rotate(F.layer_norm(x, x.shape[-1:]), cos, sin)


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
        q, k = qk_norm_rotate(q, cos, sin, self.norm), qk_norm_rotate(k, cos, sin, self.norm)
        if cache is not None:  # generation: keys and values of the earlier steps come first
            k, v = cache.extend(layer, k, v)
        y = flex.attend(q, k, v, mask) if flex.is_block_mask(mask) else masked_attention(q, k, v, mask, plan)
        y = rearrange(y, "b h t d -> b t (h d)")
        if rows is None:
            return self.proj(y)
        return linear_at_rows(y.flatten(0, 1)[rows], self.proj, rows, y.shape[0] * y.shape[1])


class KVCache:
    """Keys and values of every layer for the tokens seen so far in generation, in buffers allocated
    once for the whole answer (`capacity` tokens; grown by doubling if a caller goes past it), and
    which of those keys a new token may attend to (the left padding of shorter prompts never)."""

    def __init__(self, n_layer: int, visible: Tensor, capacity: int | None = None):
        B, L = visible.shape
        self.capacity = max(L, capacity or L)
        self.seen = L  # tokens whose visibility is known
        self._visible = torch.zeros(B, self.capacity, dtype=torch.bool, device=visible.device)
        self._visible[:, :L] = visible
        self.keys: list[Tensor | None] = [None] * n_layer
        self.values: list[Tensor | None] = [None] * n_layer
        self.length = [0] * n_layer

    @property
    def visible(self) -> Tensor:
        """[B, keys] bool: which keys a query may attend to."""
        return self._visible[:, : self.seen]

    def grow(self) -> Tensor:
        """One more token, visible to every later one; returns `visible`."""
        if self.seen == self._visible.shape[1]:
            self._visible = torch.cat([self._visible, torch.zeros_like(self._visible)], 1)
        self._visible[:, self.seen] = True
        self.seen += 1
        return self.visible

    def extend(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write this step's keys/values [B, H, T, D] after the layer's; return all of them."""
        start, n = self.length[layer], k.shape[2]
        if self.keys[layer] is None or start + n > self.keys[layer].shape[2]:
            size = max(self.capacity, 2 * (start + n))
            keys, values = (t.new_empty(*t.shape[:2], size, t.shape[3]) for t in (k, v))
            if self.keys[layer] is not None:
                keys[:, :, :start], values[:, :, :start] = (
                    self.keys[layer][:, :, :start],
                    self.values[layer][:, :, :start],
                )
            self.keys[layer], self.values[layer] = keys, values
        self.keys[layer][:, :, start : start + n], self.values[layer][:, :, start : start + n] = k, v
        self.length[layer] = start + n
        return self.keys[layer][:, :, : start + n], self.values[layer][:, :, : start + n]


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.norm1, self.norm2 = (
            Norm(cfg.d_model, cfg.norm, cfg.norm_weight),
            Norm(cfg.d_model, cfg.norm, cfg.norm_weight),
        )
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
    def __init__(
        self,
        cfg: GPTConfig,
        encoding: NumberEncoding,
        vocab_size: int,
        num_id: int = NUM_ID,
        piece_ids: dict[str, int] | None = None,
    ):
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
        self.token_module = encoding.token_module(cfg.d_model, piece_ids)  # None: no hooks on the ids
        if self.token_module is not None:
            self.token_module.use_token_embedding(self.wte)
        head_dim = cfg.d_model // cfg.n_head
        inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.compiled_layers = None  # compile_layers()

    def _init_weights(self) -> None:
        """GPT-2's: every matrix N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 n_layer)),
        biases 0 (the number head keeps torch's defaults, as in the authors' code). "modded":
        modded-nanoGPT's zero residual projections, lm head N(0, d^-1/2), torch's default elsewhere."""
        residual = [m for b in self.blocks for m in (b.attn.proj, b.down)]
        if self.cfg.init == "modded":
            for m in residual:
                nn.init.zeros_(m.weight)
            nn.init.normal_(self.lm_head.weight, std=self.cfg.d_model**-0.5)
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
        norm gains); hidden: the matrices of the blocks (Muon); embedding: the token embedding (and a
        token module's `embedding`); head: all remaining parameters, the lm head and the number head
        with its joins."""
        groups = {"hidden": [], "embedding": [], "head": [], "scalar": []}
        for name, p in self.named_parameters():
            if p.ndim < 2:
                groups["scalar"].append(p)
            elif name.startswith("blocks."):
                groups["hidden"].append(p)
            elif name == "wte.weight" or name.startswith("token_module.embedding."):
                groups["embedding"].append(p)
            else:
                groups["head"].append(p)
        return groups

    def embed(
        self, ids: Tensor, values: Tensor, num_index: Tensor | None = None, features: Tensor | None = None
    ) -> Tensor:
        """Token embeddings [B, T, d], the number head's join at the <|num|> positions. Training
        batches bring those positions (`num_index`, flat in B x T) and the head's `features` of
        their values, computed where the batch was packed (batches.py); without them both are found
        here, which reads the tensors on the host (a sync on a GPU)."""
        x = self.wte(ids)
        if self.number_head is None:
            return x
        if num_index is None:
            at = ids == self.num_id
            if not at.any():
                return x
            num_index = at.flatten().nonzero().squeeze(1)
        flat = x.flatten(0, 1)
        rows = flat.index_select(0, num_index)
        with torch.autocast(x.device.type, enabled=False), true_float32():  # the join in float32, as the head
            joined = (
                self.number_head.join(rows, features)
                if features is not None
                else self.number_head.embed(rows, values.flatten()[num_index])
            )
        return flat.index_copy(0, num_index, joined.to(x.dtype)).view_as(x)

    def trunk(
        self,
        ids: Tensor,
        values: Tensor,
        positions: Tensor,
        mask,
        cache: KVCache | None = None,
        num_index: Tensor | None = None,
        features: Tensor | None = None,
        added: Tensor | None = None,
        rows: Tensor | None = None,
    ) -> Tensor:
        """Final (normalized) hidden states [B, T, d]. `mask` [B, 1, T, T_keys] bool, or a
        FlexAttention block mask (`attention_mask`); `added` [B, T, d]: the token module's addition
        to the embeddings. With `rows` (flat indices into B x T), those rows' only, [N, d]: where it
        can (`_last_block_on_rows`) the last block computes them alone past its attention, with the
        values the whole block gives them (the same products row by row)."""
        x = self.embed(ids, values, num_index, features)
        if added is not None:
            x = x + added.to(x.dtype)
        compiled = self.compiled_layers is not None and cache is None and self.training
        # the keys each query block may see (CPU only; not under compile, whose guards would see new blocks every step)
        plan = (
            attention_plan(mask)
            if cache is None and not compiled and self.cfg.attention == "auto" and not flex.is_block_mask(mask)
            else None
        )
        if not compiled and rows is not None and self._last_block_on_rows(x, rows):
            return self.layers(x, positions, mask, plan, cache, rows)
        hidden = (self.compiled_layers if compiled else self.layers)(x, positions, mask, plan, cache)
        return hidden if rows is None else hidden.flatten(0, 1).index_select(0, rows)

    def _last_block_on_rows(self, x: Tensor, rows: Tensor) -> bool:
        """Whether the last block may run past its attention on `rows` alone: RMSNorm and no autocast
        (what the row-wise layers of fused.py are written for), and some positions left out."""
        return (
            self.cfg.norm == "rms"
            and not torch.is_autocast_enabled(x.device.type)
            and rows.numel() < x.shape[0] * x.shape[1]
        )

    def layers(
        self, x: Tensor, positions: Tensor, mask, plan=None, cache: KVCache | None = None, rows: Tensor | None = None
    ) -> Tensor:
        """The blocks and the final norm on embeddings x [B, T, d]: what `--compile` compiles."""
        angles = positions[:, None, :, None].float() * self.inv_freq  # [B, 1, T, D/2]
        cos, sin = angles.cos(), angles.sin()
        shape = x.shape
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, mask, plan, cache, i, rows if i == len(self.blocks) - 1 else None)
        return self.norm(x) if rows is None else self.norm(x, rows, shape)

    def compile_layers(self, **options) -> None:
        """torch.compile the blocks for training (static shapes: one graph, no recompiles); the
        embedding, the heads and the fused loss, whose sizes change every step, stay eager."""
        self.compiled_layers = torch.compile(self.layers, dynamic=False, **options)

    def attention_mask(self, doc_ids: Tensor):
        """What attention may see in packed rows of doc ids [B, T]: a FlexAttention block mask
        (attention "flex", or "auto" on CUDA) or the dense boolean mask."""
        kind = self.cfg.attention
        if kind == "flex" or (kind == "auto" and doc_ids.device.type == "cuda" and flex.AVAILABLE):
            return flex.document_mask(doc_ids)
        return packed_mask(doc_ids)

    def forward(self, batch) -> Tensor:
        """The final hidden states at a training batch's loss positions, [N, d] (`batch`: a
        `batches.Batch`, its number fields computed ahead). The lm head and the number head read
        them in `loss.losses`; the logits of every position are never formed in training."""
        added = self.token_module.embed(batch.ids, batch.doc_ids) if self.token_module is not None else None
        return self.trunk(
            batch.ids,
            batch.values,
            batch.positions,
            self.attention_mask(batch.doc_ids),
            num_index=batch.num_index,
            features=batch.features,
            added=added,
            rows=batch.loss_index,
        )

    def logits(self, ids: Tensor, values: Tensor, positions: Tensor, doc_ids: Tensor) -> Tensor:
        """Logits [B, T, V] of packed rows (ids and values [B, T], positions restarting at each
        sample, doc ids): what perplexity reads. The <|num|> positions are found here."""
        added = self.token_module.embed(ids, doc_ids) if self.token_module is not None else None
        return self.lm_head(self.trunk(ids, values, positions, self.attention_mask(doc_ids), added=added))

    def number_outputs(self, hidden: Tensor) -> Tensor:
        """The number head on hidden states [N, d], in float32 whatever autocast says: under bf16
        its matmuls would round xVal's scale to 8 significant bits (a step of 2^-6 in [2, 4):
        ±11 % in the value) and the bit and digit logits likewise; TF32 likewise to 11 (`true_float32`)."""
        with torch.autocast(hidden.device.type, enabled=False), true_float32():
            return self.number_head(hidden.float())

    def number_losses(self, hidden: Tensor, targets: Tensor | None = None, values: Tensor | None = None) -> Tensor:
        """Per-number loss [N] of the head at hidden states [N, d], in float32: against `targets`
        (the head's `loss_target`, computed ahead) or the float64 target `values`."""
        out = self.number_outputs(hidden)
        with torch.autocast(hidden.device.type, enabled=False), true_float32():
            if targets is not None:
                return self.number_head.loss_from(out, targets)
            return self.number_head.loss(out, values)

    @torch.no_grad()
    def generate(
        self, prompts: list[tuple[np.ndarray, np.ndarray]], max_new_tokens: int, eos_id: int, pad_id: int = 0
    ) -> list[tuple[list[int], list[float]]]:
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
            ids[b, L - n :], values[b, L - n :] = torch.as_tensor(i), torch.as_tensor(v, dtype=torch.float64)
            real[b, L - n :], positions[b, L - n :] = True, torch.arange(n)
        # padding attends to padding only (a query that sees no key would give NaN), real tokens to real ones
        mask = ((real[:, :, None] == real[:, None, :]) & torch.ones(L, L, dtype=torch.bool).tril())[:, None]
        cache = KVCache(len(self.blocks), real.to(device), L + max_new_tokens)
        history = ids.to(device)  # every token so far, for a token module that reads them (padding is never a piece)
        added = self._added(history, real)
        hidden = self.trunk(
            ids.to(device), values.to(device), positions.to(device), mask.to(device), cache, added=added
        )[:, -1]
        # the answers stay on the device; a GPU reads whether every row is done only every few tokens
        tokens = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=device)
        numbers = torch.zeros(B, max_new_tokens, dtype=torch.float64, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        next_position = positions[:, -1].to(device) + 1
        check, steps = (1 if device.type == "cpu" else 8), 0
        for step in range(max_new_tokens):
            token, value = self._next_token(hidden)
            tokens[:, step], numbers[:, step] = token, value
            steps = step + 1
            done |= token == eos_id
            if steps == max_new_tokens or (steps % check == 0 and bool(done.all())):
                break
            step_mask = cache.grow()[:, None, None]
            history = torch.cat([history, token[:, None]], 1) if self.token_module is not None else history
            added = self._added(history, cache.visible)
            added = None if added is None else added[:, -1:]
            fed = self.token_module.fed(hidden, token) if self.token_module is not None else None
            if fed is not None:  # what the token module feeds with the chosen token (TokenModule.fed)
                added = added + fed[:, None].to(added.dtype)
            hidden = self.trunk(
                token[:, None],
                value[:, None],
                next_position[:, None],
                step_mask,
                cache,
                added=added,
            )[:, -1]
            next_position += 1
        out = []
        for row_ids, row_values in zip(tokens[:, :steps].tolist(), numbers[:, :steps].tolist()):
            n = row_ids.index(eos_id) + 1 if eos_id in row_ids else steps  # up to <|eos|>, included
            out.append((row_ids[:n], row_values[:n]))
        return out

    def _added(self, history: Tensor, real: Tensor) -> Tensor | None:
        """The token module's addition to the embeddings of the tokens so far [B, T] (one sample
        per row, padding a sample of its own), or None."""
        if self.token_module is None:
            return None
        device = self.lm_head.weight.device
        return self.token_module.embed(history.to(device), torch.where(real, 0, -1).to(device))

    def _next_token(self, hidden: Tensor, every_row: bool | None = None) -> tuple[Tensor, Tensor]:
        """Greedy token [B] and its value [B] (the head's, where the token is <|num|>), on the
        model's device. The head reads the <|num|> rows only (what CPU answers were always computed
        from) or, `every_row` (the default on a GPU), every row and keeps the <|num|> rows' values,
        so that no row selection makes the host wait."""
        token = self.lm_head(hidden).argmax(-1)
        value = torch.zeros(len(token), dtype=torch.float64, device=token.device)
        if self.number_head is None:
            return token, value
        is_num = token == self.num_id
        if not (hidden.device.type == "cuda" if every_row is None else every_row):
            if is_num.any():
                value[is_num] = self.number_head.predict(self.number_outputs(hidden[is_num])).to(value)
            return token, value
        predicted = self.number_head.predict(self.number_outputs(hidden)).to(value)
        return token, torch.where(is_num, predicted, value)
