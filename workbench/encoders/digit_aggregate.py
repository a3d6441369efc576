"""Digit-embedding aggregation (Sivakumar & Moosavi, COLING 2025, "How to leverage digit embeddings
to represent numbers?"): single-digit tokens, and one extra token per number whose input embedding
is an explicit aggregate of the number's digit embeddings, so the model is handed the number as a
whole instead of having to compose it from its digits unsupervised:

    "-12.5" -> - 1 2 . 5 <agg>        the <agg> input: its learned embedding + 3 E(1) + 2 E(2) + 1 E(5)

E being the model's own token embedding (gradients flow into it through the aggregate). A digit's
weight is its place counted from the number's last digit, 1, 2, 3, ... : a one-digit number's
aggregate is its digit's embedding, a digit of a higher place weighs more, and the weights are not
normalised, so a longer number has a larger aggregate. `<agg>` is written after the number, so
the model writes it too, and it is computed from the digits before it (in generation, from the
digits the model has just written); it is dropped when pieces are read back. No options.

Source: the paper (its repository, jasivan/Number-Embeddings, holds no code) and only its summary
could be read here: the aggregate of digit embeddings by a mathematical prior that keeps a single
digit's embedding, reflects base-10 place and does not normalise, given to the model as an extra
input token or as an extra loss. Ours where that summary is silent: the weights 1, 2, 3, ... (our
reading of the three properties, not the paper's formula), the token after the number (where a
model that writes the number can compute it), places counted through the point (the paper studies
integers); the extra-loss variant is not implemented.
"""

from __future__ import annotations

from functools import cached_property

import torch
from torch import Tensor, nn

from . import register
from .base import TokenModule
from .digits import DigitEncoding

AGGREGATE = "<agg>"


@register
class DigitAggregate(DigitEncoding):
    name = "digit_aggregate"
    label = "Digit aggregate"
    group = 1

    @cached_property
    def pieces(self) -> list[str]:
        return super().pieces + [AGGREGATE]

    def number_tokens(self, text: str) -> list[str]:
        return super().number_tokens(text) + [AGGREGATE]

    def number_text(self, pieces: list[str]) -> str:
        return "".join(p for p in pieces if p != AGGREGATE)

    def token_module(self, d_model: int, piece_ids: dict[str, int] | None) -> DigitAggregateModule:
        return DigitAggregateModule(self, d_model, piece_ids)


class DigitAggregateModule(TokenModule):
    """The weighted sum of a number's digit embeddings, added at the `<agg>` after it."""

    def __init__(self, encoding: DigitAggregate, d_model: int, piece_ids: dict[str, int] | None):
        super().__init__(encoding, d_model, piece_ids)
        # per token id: 0 other, 1 digit, 2 "." or "-", 3 <agg>
        kind = torch.zeros(max(self.piece_ids.values()) + 2, dtype=torch.long)
        for piece, i in self.piece_ids.items():
            kind[i] = 1 if piece.isdigit() else 3 if piece == AGGREGATE else 2
        self.register_buffer("kind", kind, persistent=False)

    def use_token_embedding(self, embedding: nn.Embedding) -> None:
        object.__setattr__(self, "token_embedding", embedding)  # the model's, not a parameter of this module

    def weights(self, ids: Tensor, doc_ids: Tensor) -> tuple[Tensor, Tensor]:
        """(weight [B, T] of each digit in the number it ends at, number [B, T]: for each digit, the
        flat index of the `<agg>` its number is aggregated at, -1 where none follows)."""
        kind = self.kind[ids.clamp(max=len(self.kind) - 1)]
        B, T = ids.shape
        flat, docs = kind.flatten(), doc_ids.flatten()
        same = torch.zeros_like(flat, dtype=torch.bool)  # the token before is of the same sample and row
        same[1:] = (docs[1:] == docs[:-1]) & (torch.arange(1, B * T, device=ids.device) % T != 0)
        part = (flat == 1) | (flat == 2)
        start = part & ~(torch.roll(part, 1) & same)
        run = torch.cumsum(start.long(), 0) - 1
        runs = int(start.sum())
        weight = torch.zeros(B * T, dtype=torch.float32, device=ids.device)
        target = torch.full((B * T,), -1, dtype=torch.long, device=ids.device)
        if not runs:
            return weight.view(B, T), target.view(B, T)
        digit = (flat == 1).long() * part
        each = torch.zeros(runs + 1, dtype=torch.long, device=ids.device).index_add_(0, run.clamp(min=0), digit)
        so_far = torch.cumsum(digit, 0) - (torch.cumsum(each, 0) - each)[run.clamp(min=0)]
        weight = torch.where(flat == 1, (each[run.clamp(min=0)] - so_far + 1).float(), 0.0)
        ends = (flat == 3) & torch.roll(part, 1) & same  # an <agg> right after a number
        at = torch.full((runs + 1,), -1, dtype=torch.long, device=ids.device)
        position = torch.arange(B * T, device=ids.device)
        at[run[torch.roll(ends, -1)]] = position[ends]
        target = torch.where(flat == 1, at[run.clamp(min=0)], -1)
        return weight.view(B, T), target.view(B, T)

    def embed(self, ids: Tensor, doc_ids: Tensor) -> Tensor:
        weight, target = self.weights(ids, doc_ids)
        rows = self.token_embedding(ids).flatten(0, 1)  # E of every token (used at digits)
        out = torch.zeros_like(rows)
        keep = target.flatten() >= 0
        if keep.any():
            out = out.index_add(0, target.flatten()[keep], rows[keep] * weight.flatten()[keep, None])
        return out.view(*ids.shape, -1)
