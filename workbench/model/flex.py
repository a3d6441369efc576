"""FlexAttention over packed rows: attention inside each sample only, as a block-sparse mask.

The dense alternative, a boolean [B, 1, T, T] mask, rules out the flash kernels and computes every
query-key pair: on packed paper-tier rows only 1.6-5.4 % of the pairs are allowed and 23-25 % of
the 128 x 128 tiles hold any (docs/gpu.md). A FlexAttention block mask lists those tiles, so the
kernel skips the rest. The mask function is the one `model.packed_mask` writes densely: query q
sees key k of the same row when both belong to the same sample (doc id) and k <= q.

`attend` runs torch.compile's FlexAttention kernel on CUDA (the model's default there, attention
"auto"); elsewhere, and inside an already compiled region, flex_attention as it is (on a CPU its
unfused reference implementation, forward only: right, but only for checks; training refuses it).
"""

from __future__ import annotations

import torch
from torch import Tensor

try:
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

    AVAILABLE = True
except ImportError:  # a torch without FlexAttention: the dense mask it is
    BlockMask, AVAILABLE = (), False

_compiled = {}


def is_block_mask(mask) -> bool:
    return AVAILABLE and isinstance(mask, BlockMask)


def document_mask(doc_ids: Tensor):
    """The block mask of causal attention within each sample of packed rows (doc ids [B, T])."""

    def same_sample_causal(b, h, q, k):
        return (doc_ids[b, q] == doc_ids[b, k]) & (k <= q)

    B, T = doc_ids.shape
    return create_block_mask(
        same_sample_causal, B, None, T, T, device=doc_ids.device, _compile=doc_ids.device.type == "cuda"
    )


def attend(q: Tensor, k: Tensor, v: Tensor, block_mask) -> Tensor:
    """Softmax attention of q, k, v [B, H, T, D] through `block_mask` (scale 1 / sqrt(D), as SDPA)."""
    if q.device.type != "cuda" or torch.compiler.is_compiling():
        return flex_attention(q, k, v, block_mask=block_mask)
    if "kernel" not in _compiled:
        _compiled["kernel"] = torch.compile(flex_attention, dynamic=False)
    return _compiled["kernel"](q, k, v, block_mask=block_mask)
