"""Abacus embeddings (McLeish et al., 2024, "Transformers can do arithmetic with the right
embeddings"): every digit token gets a learned embedding of its place within its number added to
its token embedding, so digits of the same significance in different numbers share a positional
signal; numbers are written least significant digit first (reversed_digits.py), so place 1 is
always the units of an integer.

    "-12.5 + 307" -> - 5 . 2 1   +   7 0 3
    places           0 1 0 2 3   0   1 2 3      (0: not a digit, no embedding added)

During training every sample's places are shifted by a random offset k in 0 ... `max_offset`
(the same k for all numbers of the sample), so the embeddings of places beyond the training
lengths are trained too, which is what lets Abacus extrapolate to longer numbers; at evaluation
k = 0. Places are counted in the order written, over the digits of a run of number pieces (the
sign and the point count as no digit), and cut at `max_places` (longer numbers share the last
place; the value is untouched: the digits are ordinary tokens).

Options: max_offset (100, the paper's), max_places (100), reverse (True: the paper's reversed
format; False counts the places of single digits written most significant first), positions
("number", or "source": the authors' count).
What we do differently: the embedding table is initialised N(0, 0.02) like our token embedding
and trained at its learning rate; the offset is drawn per sample (the paper: per batch element).

`positions`: the authors' code (mcleish7/arithmetic, abacus.py, `Abacus.helper`) counts over each
run of consecutive digit tokens and restarts at any other token, the point and the sign included:

    "-12.5 + 307" -> - 5 . 2 1   +   7 0 3
    "number"         0 1 0 2 3   0   1 2 3      (ours, the default)
    "source"         0 1 0 1 2   0   1 2 3      (the authors')

Their tasks are integers, where the two agree. Ours is the default because every published run
of this workbench was trained with it: it gives each digit its place within the whole number as
written. The authors' count gives the units of every number place 1 (reversed), so integer
digits line up across numbers whose fraction lengths differ, but it gives a fraction's first
digit the same place as the units. (The authors also add the embedding of place 0 at every
other token; we add nothing there, with either count.)
"""

from __future__ import annotations

from numbers import Integral

import torch
from torch import Tensor, nn

from . import register
from .base import TokenModule
from .digits import DigitEncoding
from .reversed_digits import ReversedDigits

POSITIONS = ("number", "source")  # ours (through "." and "-" within a number), the authors' (digit runs)


@register
class Abacus(ReversedDigits):
    name = "abacus"
    label = "Abacus"

    def __init__(self, max_offset: int = 100, max_places: int = 100, reverse: bool = True, positions: str = "number"):
        for option, value, low in (("max_offset", max_offset, 0), ("max_places", max_places, 1)):
            if isinstance(value, bool) or not isinstance(value, Integral) or not low <= value <= 10_000:
                raise ValueError(f"{self.name}: {option} must be an integer in {low}..10000, got {value!r}")
        if not isinstance(reverse, bool):
            raise ValueError(f"{self.name}: reverse must be True or False, got {reverse!r}")
        if positions not in POSITIONS:
            raise ValueError(
                f"{self.name}: positions must be one of {POSITIONS} (source: the authors' count, restarted "
                f"at every token that is not a digit), got {positions!r}"
            )
        self.max_offset, self.max_places, self.reverse = int(max_offset), int(max_places), reverse
        self.positions = positions

    def number_tokens(self, text: str) -> list[str]:
        return super().number_tokens(text) if self.reverse else DigitEncoding.number_tokens(self, text)

    def number_text(self, pieces: list[str]) -> str:
        return super().number_text(pieces) if self.reverse else "".join(pieces)

    def token_module(self, d_model: int, piece_ids: dict[str, int] | None) -> AbacusModule:
        return AbacusModule(self, d_model, piece_ids)


class AbacusModule(TokenModule):
    """The place embeddings, added at digit tokens."""

    def __init__(self, encoding: Abacus, d_model: int, piece_ids: dict[str, int] | None):
        super().__init__(encoding, d_model, piece_ids)
        self.embedding = nn.Embedding(encoding.max_places + encoding.max_offset + 1, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        kind = torch.zeros(max(self.piece_ids.values()) + 2, dtype=torch.long)  # 0: no piece, 1: piece, 2: digit
        for piece, i in self.piece_ids.items():
            kind[i] = 2 if piece.isdigit() else 1
        self.register_buffer("kind", kind, persistent=False)

    def places(self, ids: Tensor) -> Tensor:
        """[B, T]: 1, 2, ... for the digits of each run of number pieces in the order written (with
        positions="source", of each run of digits), 0 elsewhere; cut at max_places."""
        kind = self.kind[ids.clamp(max=len(self.kind) - 1)]
        digits = (kind == 2).long().cumsum(1)
        restart = kind == 0 if self.encoding.positions == "number" else kind != 2
        before = torch.where(restart, digits, 0).cummax(1).values  # digits before this run
        return ((digits - before) * (kind == 2)).clamp(max=self.encoding.max_places)

    def embed(self, ids: Tensor, doc_ids: Tensor) -> Tensor:
        places = self.places(ids)
        if self.training and self.encoding.max_offset:
            offsets = torch.randint(0, self.encoding.max_offset + 1, (int(doc_ids.max()) + 2,), device=ids.device)
            places = torch.where(places > 0, places + offsets[doc_ids + 1], 0)
        return self.embedding(places) * (places > 0)[..., None]
