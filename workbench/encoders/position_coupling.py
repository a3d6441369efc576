"""Position coupling (Cho et al., NeurIPS 2024, "Position coupling: improving length generalization
of arithmetic transformers using task structure"; HanseulJo/position-coupling): tokens that play
the same part in a task share one position ID, digits of the same place in every number above all,
so what a model learns about place k carries to numbers longer than it trained on. Single digits,
each number written least significant digit first (reversed_digits.py); every token of a sample
gets a learned embedding of its position ID added to its token embedding:

    "<|bos|> 307 + 25 <|eoq|> 332 <|eos|>" -> <|bos|> 7 0 3 ' +' ' ' 5 2 <|eoq|> 2 3 3 <|eos|>
    IDs, start s                                 0    s+1 s+2 s+3  s  s  s+1 s+2   s    s+1 s+2 s+3  s

A digit's ID is s + its place in the number counted in the order written, restarting after "."
or "-" (so the units of every integer share s + 1); the sample's first token gets 0 and every other
token s, as the source's "+" and "=". In training s is drawn per sample, uniformly in 1 ... max_position
- (the sample's highest place), so the embeddings of high IDs are trained too; at evaluation s = 1.
Option: max_position (132, the source's addition_coupled.yaml); IDs past it share the last.

The source's own setting (its `AdditionDatasetWithCoupledPositions`, `src/data/addition.py`) on
which the tests check the IDs: integers, reverse_output=True, the IDs into a learned absolute
position embedding and no other position encoding. What we do differently: our model keeps its
RoPE over the sequence positions (the coupled IDs are added beside it, as Abacus's places are);
every number is reversed, operands included (the source can write operands most significant
first, reverse_input=False, as their IDs are computed from the whole prompt); <|eos|> gets s (the
source's padding ID 0); fraction digits are counted from the number's last digit, since the
source has no decimals. How it differs from Abacus (abacus.py), whose places are the same for an
integer: Abacus adds an embedding at digits only, shifts places by 0 ... 100, and by default counts
through "." and "-" within a number.
"""

from __future__ import annotations

from numbers import Integral

import torch
from torch import Tensor, nn

from . import register
from .base import TokenModule
from .reversed_digits import ReversedDigits


@register
class PositionCoupling(ReversedDigits):
    name = "position_coupling"
    label = "Position coupling"

    def __init__(self, max_position: int = 132):
        if isinstance(max_position, bool) or not isinstance(max_position, Integral) or not 2 <= max_position <= 10_000:
            raise ValueError(f"{self.name}: max_position must be an integer in 2..10000, got {max_position!r}")
        self.max_position = int(max_position)

    def token_module(self, d_model: int, piece_ids: dict[str, int] | None) -> PositionCouplingModule:
        return PositionCouplingModule(self, d_model, piece_ids)


class PositionCouplingModule(TokenModule):
    """The embedding of every token's coupled position ID."""

    def __init__(self, encoding: PositionCoupling, d_model: int, piece_ids: dict[str, int] | None):
        super().__init__(encoding, d_model, piece_ids)
        self.embedding = nn.Embedding(encoding.max_position + 1, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        digit = torch.zeros(max(self.piece_ids.values()) + 2, dtype=torch.bool)
        for piece, i in self.piece_ids.items():
            digit[i] = piece.isdigit()
        self.register_buffer("digit", digit, persistent=False)

    def places(self, ids: Tensor) -> Tensor:
        """[B, T]: 1, 2, ... for the digits of each run of digits in the order written, 0 elsewhere."""
        digit = self.digit[ids.clamp(max=len(self.digit) - 1)]
        count = digit.long().cumsum(1)
        return (count - torch.where(digit, 0, count).cummax(1).values) * digit

    def starts(self, ids: Tensor, doc_ids: Tensor) -> Tensor:
        """Each sample's s for training, [docs + 1] (index doc + 1): uniform in 1 ... max_position -
        the sample's highest place (at least 1)."""
        docs = int(doc_ids.max()) + 2
        highest = torch.zeros(docs, dtype=torch.long, device=ids.device)
        highest = highest.scatter_reduce(0, (doc_ids + 1).flatten(), self.places(ids).flatten(), "amax")
        room = (self.encoding.max_position - highest).clamp(min=1)
        return 1 + (torch.rand(docs, device=ids.device) * room).long().clamp(max=room - 1)

    def positions(self, ids: Tensor, doc_ids: Tensor, start: Tensor | None = None) -> Tensor:
        """[B, T] coupled IDs; `start` [docs + 1] each sample's s (index doc + 1), all 1 without."""
        first = torch.ones_like(ids, dtype=torch.bool)
        first[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
        s = torch.ones_like(ids) if start is None else start[doc_ids + 1]
        return torch.where(first, 0, (s + self.places(ids)).clamp(max=self.encoding.max_position))

    def embed(self, ids: Tensor, doc_ids: Tensor) -> Tensor:
        start = self.starts(ids, doc_ids) if self.training else None
        return self.embedding(self.positions(ids, doc_ids, start))
