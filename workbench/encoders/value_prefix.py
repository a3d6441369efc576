"""A value-aware prefix token (Dutulescu, Ruseti & Dascalu, 2026, "Value-aware numerical
representations for transformer language models", arXiv 2601.09706): the digits stay text, and a
`<num>` token before each number carries an embedding computed from the number's value by a small
MLP, f(x), so the model reads a number's magnitude in one token before it reads its digits.

    "-12.5" -> <num> - 1 2 . 5        the <num> input: its learned embedding + f(-12.5)

Training feeds f of the true value (the digits that follow, read from the tokens). Writing a number,
the model has no value yet when it writes `<num>`: the final hidden state h that chose `<num>` is
projected, proj(h), and fed in f(x)'s place; training aligns the two with `weight` x the mean
squared difference of proj(h) and f(x) at every `<num>` target, so proj(h) ~ f(x). The number the
model writes is its digits (the text); `<num>` is dropped when pieces are read back.

f: s(x) = sign(x) log10(|x| + 1) (log_xval.py's scale) -> Linear(1, d) -> GELU -> Linear(d, d);
proj: Linear(d, d). Options: weight (1.0).

Only the paper describes the method (no code was published with it), and only its summary could
be read here: the prefix, f(x) at training, proj(h) at inference and the alignment proj(h) ~ f(x).
What we chose where it is silent: f's input s(x) and its width; the alignment as a mean squared
error with f(x) held fixed (no gradient through the target side, so f is shaped by the digits'
cross-entropy alone); f(x) added to the learned `<num>` embedding rather than replacing it (the
same up to a bias, which the MLP has); a `<num>` not followed by digits (a model's own) gets no f.
"""

from __future__ import annotations

import math
from functools import cached_property
from numbers import Real

import torch
from torch import Tensor, nn

from . import register
from .base import TokenModule
from .digits import DigitEncoding

PREFIX = "<num>"


@register
class ValuePrefix(DigitEncoding):
    name = "value_prefix"
    label = "Value prefix"
    group = 1

    def __init__(self, weight: float = 1.0):
        if isinstance(weight, bool) or not isinstance(weight, Real) or not 0 <= weight < math.inf:
            raise ValueError(f"{self.name}: weight must be a finite number >= 0, got {weight!r}")
        self.weight = float(weight)

    @cached_property
    def pieces(self) -> list[str]:
        return super().pieces + [PREFIX]

    def number_tokens(self, text: str) -> list[str]:
        return [PREFIX] + super().number_tokens(text)

    def number_text(self, pieces: list[str]) -> str:
        return "".join(p for p in pieces if p != PREFIX)

    def token_module(self, d_model: int, piece_ids: dict[str, int] | None) -> ValuePrefixModule:
        return ValuePrefixModule(self, d_model, piece_ids)


def scale(x: Tensor) -> Tensor:
    """s(x) = sign(x) log10(|x| + 1), f's input."""
    return torch.sign(x) * torch.log10(x.abs() + 1)


class ValuePrefixModule(TokenModule):
    """f(x) at `<num>` inputs, proj(h) where the model writes `<num>`, and their alignment."""

    reads_runs = True

    def __init__(self, encoding: ValuePrefix, d_model: int, piece_ids: dict[str, int] | None):
        super().__init__(encoding, d_model, piece_ids)
        self.embedding = nn.Sequential(nn.Linear(1, d_model), nn.GELU(), nn.Linear(d_model, d_model))  # f
        self.proj = nn.Linear(d_model, d_model)
        # per token id: 0 other, 1 digit, 2 ".", 3 "-", 4 <num>; and each digit's value
        kind = torch.zeros(max(self.piece_ids.values()) + 2, dtype=torch.long)
        digit = torch.zeros_like(kind)
        for piece, i in self.piece_ids.items():
            kind[i] = 1 if piece.isdigit() else {".": 2, "-": 3, PREFIX: 4}[piece]
            digit[i] = int(piece) if piece.isdigit() else 0
        self.register_buffer("kind", kind, persistent=False)
        self.register_buffer("digit", digit, persistent=False)
        self.prefix_id = self.piece_ids[PREFIX]

    def values(self, ids: Tensor, cut: Tensor) -> tuple[Tensor, Tensor]:
        """For flat token ids [N] whose runs end where `cut` [N] is True (a new sample or row):
        (at [N] bool: a `<num>` followed by a number, value [N] float64: that number's value)."""
        kind = self.kind[ids.clamp(max=len(self.kind) - 1)]
        part = (kind >= 1) & (kind <= 3)
        start = part.clone()
        start[1:] &= ~(part[:-1] & ~cut[1:])
        run = torch.cumsum(start.long(), 0) - 1  # the number each piece belongs to
        runs = int(start.sum())
        value = torch.zeros(len(ids), dtype=torch.float64, device=ids.device)
        at = torch.zeros(len(ids), dtype=torch.bool, device=ids.device)
        if not runs:
            return at, value
        of = run[part]
        k = kind[part]

        def so_far(x: Tensor) -> Tensor:  # cumulative sum within each number, this piece included
            each = torch.zeros(runs, dtype=x.dtype, device=x.device).index_add_(0, of, x)
            return torch.cumsum(x, 0) - (torch.cumsum(each, 0) - each)[of]

        d = (k == 1).long()
        integer = so_far((k == 2).long()) == 0  # before the point
        whole = torch.zeros(runs, dtype=torch.long, device=ids.device).index_add_(0, of, d * integer)
        power = whole[of] - so_far(d)  # 10^power: "12.5" -> 1, 0, (.), -1
        digits = self.digit[ids[part]].double() * torch.tensor(10.0, dtype=torch.float64, device=ids.device) ** power
        total = torch.zeros(runs, dtype=torch.float64, device=ids.device).index_add_(0, of, digits * d)
        negative = torch.zeros(runs, dtype=torch.long, device=ids.device).index_add_(0, of, (k == 3).long()) > 0
        total = torch.where(negative, -total, total)
        value[part] = total[of]
        at[:-1] = (kind[:-1] == 4) & start[1:] & ~cut[1:]
        value = torch.roll(value, -1)  # a <num>'s value is that of the piece after it
        return at, torch.where(at, value, 0.0)

    def f(self, x: Tensor) -> Tensor:
        return self.embedding(scale(x)[:, None].to(self.proj.weight.dtype))

    def embed(self, ids: Tensor, doc_ids: Tensor) -> Tensor:
        flat, docs = ids.flatten(), doc_ids.flatten()
        cut = torch.ones_like(flat, dtype=torch.bool)
        cut[1:] = docs[1:] != docs[:-1]
        cut |= torch.arange(len(flat), device=ids.device) % ids.shape[1] == 0
        at, value = self.values(flat, cut)
        out = torch.zeros(len(flat), self.d_model, dtype=self.proj.weight.dtype, device=ids.device)
        if at.any():
            out = out.index_put((torch.nonzero(at)[:, 0],), self.f(value[at]))
        return out.view(*ids.shape, self.d_model)

    def loss(self, hidden: Tensor, lm_weight: Tensor, targets: Tensor, starts: Tensor | None = None) -> Tensor:
        out = hidden.new_zeros(len(targets), dtype=torch.float32)
        cut = torch.zeros_like(targets, dtype=torch.bool) if starts is None else starts
        at, value = self.values(targets, cut)
        if not at.any():
            return out
        wanted = self.f(value[at]).detach().float()
        each = (self.proj(hidden[at]).float() - wanted).square().mean(-1)
        return out.index_put((torch.nonzero(at)[:, 0],), self.encoding.weight * each)

    def fed(self, hidden: Tensor, token: Tensor) -> Tensor | None:
        """proj(h) where the model just wrote `<num>` (0 elsewhere), h [B, d] its final hidden state."""
        written = token == self.prefix_id
        if not written.any():
            return None
        return self.proj(hidden) * written[:, None]
