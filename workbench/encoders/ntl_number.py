"""Number Token Loss at the number level (the `ntloss` package's `NumberLevelLoss`, ai4sd/
number-token-loss, ntloss 0.3.0): single-digit tokens, trained with the cross-entropy plus `weight`
x a loss per *number*, where the digit-level NTL (ntl.py) has one per digit. For each run of digit
targets (a number), with p the softmax over the ten digit tokens' logits at each of its digits,

    y_hat = sum over its digits of (sum_i p_i i) x 10^k,   y = the number's value,
    NL-NTL = |y_hat - y| / (|y_hat| + |y| + eps)          (the symmetric MAPE, in [0, 1])

k being the digit's place counted from the run's last digit, so the loss of a number grows with
how far its expected value is from the true one, not with the digits' distances one by one.

Options, the package's:
  float_level (False)  False: "." ends a number (12.34 is two numbers, 12 and 34); True: a "."
                       between two digits joins them (12.34 is read as the integer 1234)
  reweigh (True)       the loss at a number times m, plus 1.01 x (1 - m), m being the whole
                       vocabulary's softmax mass on the ten digit tokens at the number's first digit:
                       a number the model does not even start to write costs ~1.01
  weight (0.3)         the package's recommended coefficient of its losses

As in the package, a number's loss is counted once, at its first digit (the other targets get 0),
and the sign is not part of the number ("-" is text). How it joins the cross-entropy is ntl.py's
default: per target, inside C.1's mean over all targets, with the target's task weight (the
package's `reduction="mean"` is a mean over the numbers, left to the caller to add).

What we do differently: the sums are in float64 and exact past 20 digits (the package keeps the
places below `max_number_length`, 20, and sums in the logits' dtype); the loss multiplies the final
hidden states by the ten digit rows of the lm head only (and by all rows at a number's first digit
where `reweigh` needs the whole softmax), never forming the full logits, as ntl.py says why.
"""

from __future__ import annotations

import math
from numbers import Real

import torch
from torch import Tensor

from . import register
from .base import TokenModule
from .single_digit import SingleDigit

EPS = 1.1920928955078125e-07  # the package's eps: float32's, the dtype its number values are in
MISS = 1.01  # reweigh: the cost of the mass outside the digit tokens (its max_dist is 1, sMAPE's bound)


@register
class NumberLevelLoss(SingleDigit):
    name = "ntl_number"
    label = "NTL, number level"
    paper_label = None

    def __init__(self, weight: float = 0.3, float_level: bool = False, reweigh: bool = True):
        if isinstance(weight, bool) or not isinstance(weight, Real) or not 0 <= weight < math.inf:
            raise ValueError(f"{self.name}: weight must be a finite number >= 0, got {weight!r}")
        for option, value in (("float_level", float_level), ("reweigh", reweigh)):
            if not isinstance(value, bool):
                raise ValueError(f"{self.name}: {option} must be True or False, got {value!r}")
        self.weight, self.float_level, self.reweigh = float(weight), float_level, reweigh

    def token_module(self, d_model: int, piece_ids: dict[str, int] | None) -> NumberLevelLossModule:
        return NumberLevelLossModule(self, d_model, piece_ids)


class NumberLevelLossModule(TokenModule):
    """The loss of each run of digit targets, at its first digit."""

    reads_runs = True

    def __init__(self, encoding: NumberLevelLoss, d_model: int, piece_ids: dict[str, int] | None):
        super().__init__(encoding, d_model, piece_ids)
        self.register_buffer("digit_ids", torch.tensor([self.piece_ids[str(d)] for d in range(10)]), persistent=False)
        self.point_id = self.piece_ids["."]

    def numbers(self, targets: Tensor, starts: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(digit [N] bool, first [N] bool: the first digit of each number, number [N] long: the
        index of the number each digit belongs to, -1 elsewhere), over runs of adjacent targets
        (`starts`: where a run is cut, as the package's rows are)."""
        n = len(targets)
        cut = torch.zeros(n, dtype=torch.bool, device=targets.device) if starts is None else starts
        digit = torch.isin(targets, self.digit_ids)
        before = torch.zeros_like(digit)  # the target before is a digit of the same run
        before[1:] = digit[:-1] & ~cut[1:]
        inside, goes_on = digit, before
        if self.encoding.float_level:  # a "." between two digits joins them
            after = torch.zeros_like(digit)
            after[:-1] = digit[1:] & ~cut[1:]
            point = (targets == self.point_id) & before & after
            inside = digit | point
            point_before = torch.zeros_like(digit)
            point_before[1:] = point[:-1] & ~cut[1:]
            goes_on = before | point_before
        first = inside & ~goes_on  # a run never starts at a joining "." (it follows a digit)
        number = torch.where(digit, torch.cumsum(first.long(), 0) - 1, -1)
        return digit, first, number

    def loss(self, hidden: Tensor, lm_weight: Tensor, targets: Tensor, starts: Tensor | None = None) -> Tensor:
        out = hidden.new_zeros(len(targets), dtype=torch.float32)
        digit, first, number = self.numbers(targets, starts)
        if not digit.any():
            return out
        p = (hidden[digit] @ lm_weight[self.digit_ids].T).float().softmax(-1)  # [n, 10]
        expected = p.double() @ torch.arange(10, device=p.device, dtype=torch.float64)
        truth = (targets[digit, None] == self.digit_ids).double().argmax(-1).double()
        of = number[digit]
        count = int(first.sum())
        digits = torch.zeros(count, dtype=torch.long, device=of.device).index_add_(0, of, torch.ones_like(of))
        first_of = torch.cumsum(digits, 0)[of] - digits[of]  # where each digit's number begins
        place = torch.arange(len(of), device=of.device) - first_of  # 0 at each first digit
        scale = torch.tensor(10.0, dtype=torch.float64, device=of.device) ** (digits[of] - 1 - place).double()
        y_hat = torch.zeros(count, dtype=torch.float64, device=of.device).index_add_(0, of, expected * scale)
        y = torch.zeros(count, dtype=torch.float64, device=of.device).index_add_(0, of, truth * scale)
        each = (y_hat - y).abs() / (y_hat.abs() + y.abs() + EPS)
        at = torch.nonzero(first)[:, 0]
        if self.encoding.reweigh:
            mass = (hidden[at] @ lm_weight.T).float().softmax(-1)[:, self.digit_ids].sum(-1).double()
            each = each * mass + MISS * (1 - mass)
        return out.index_put((at,), (self.encoding.weight * each).float())
