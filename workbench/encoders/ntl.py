"""Number Token Loss (Zausinger et al., 2025, "Regress, don't guess: a regression-like loss on
number tokens for language models", ICML): single-digit tokens, trained with the cross-entropy
plus `weight` x a loss that knows digits are numbers. At every target that is a digit y, p is the
softmax over the ten digit tokens' logits alone and

    "was" (NTL-WAS, the paper's main variant): the Wasserstein-1 distance between p and the one-hot
          of y over the digit values 0 ... 9, which for a one-hot target is  sum_i p_i |i - y|
    "mse" (NTL-MSE): (sum_i p_i i - y)^2

so predicting 3 for a 4 costs less than predicting 9. Options: variant ("was"), weight (0.3, the
authors' recommended coefficient), loss ("per_token", or "source": the authors' mixing). The
digits are written as single_digit writes them.

`loss`: how the NTL joins the cross-entropy. The authors' code (tum-ai/number-token-loss,
`T5VanillaForNumberTokenLoss.forward` with `WassersteinNumberTokenLoss.forward`) adds weight x the
mean NTL over the digit targets to the mean cross-entropy over all targets:

    "source"      CE_mean + weight x mean over digit targets of NTL
    "per_token"   (sum over targets of CE + weight x NTL at digit targets) / all targets   (ours)

so ours weighs the NTL by weight x the share of digit targets among all targets (below weight
wherever some targets are not digits). Ours is the default because every published run of this
workbench was trained with it, and it is C.1's rule for every other extra loss here (the number
heads' 10 x per token): a digit target costs the same whatever else its batch holds. With
"source" the mean is over the digit targets of the whole step's batch (all micro-batches and
processes, as our cross-entropy's mean), each weighted by its task's weight as the cross-entropy.

Why not the `ntloss` package (MIT): it takes the full [batch, length, vocabulary] logits and a
Hugging Face tokenizer; our lm head is fused with the cross-entropy and never forms those logits,
and our tokenizer is not a Hugging Face one. Here the loss multiplies the final hidden states at
the digit targets by the ten digit rows of the lm head only ([n, 10] logits), and is added per
target token with the target's task weight, like the cross-entropy.
"""

from __future__ import annotations

import math
from numbers import Real

import torch
from torch import Tensor

from . import register
from .base import TokenModule
from .single_digit import SingleDigit

VARIANTS = ("was", "mse")
LOSSES = ("per_token", "source")  # ours (inside C.1's per-token mean), the authors' (a mean over the digit targets)


@register
class NumberTokenLoss(SingleDigit):
    name = "ntl"
    label = "Number Token Loss"
    paper_label = None

    def __init__(self, variant: str = "was", weight: float = 0.3, loss: str = "per_token"):
        if variant not in VARIANTS:
            raise ValueError(f"{self.name}: variant must be one of {VARIANTS}, got {variant!r}")
        if isinstance(weight, bool) or not isinstance(weight, Real) or not 0 <= weight < math.inf:
            raise ValueError(f"{self.name}: weight must be a finite number >= 0, got {weight!r}")
        if loss not in LOSSES:
            raise ValueError(
                f"{self.name}: loss must be one of {LOSSES} (source: the authors' mean over the digit "
                f"targets added to the mean cross-entropy), got {loss!r}"
            )
        self.variant, self.weight, self.loss = variant, float(weight), loss

    def token_module(self, d_model: int, piece_ids: dict[str, int] | None) -> NumberTokenLossModule:
        return NumberTokenLossModule(self, d_model, piece_ids)


class NumberTokenLossModule(TokenModule):
    """The loss over the digit tokens' logits, at the targets that are digits."""

    def __init__(self, encoding: NumberTokenLoss, d_model: int, piece_ids: dict[str, int] | None):
        super().__init__(encoding, d_model, piece_ids)
        self.digit_list = [
            self.piece_ids[str(d)] for d in range(10)
        ]  # for targets on the host, where batches are packed
        self.register_buffer("digit_ids", torch.tensor(self.digit_list), persistent=False)

    def averaged_over(self, targets: Tensor) -> Tensor | None:
        """loss="source": the digit targets (the authors' mean); else None, all targets."""
        if self.encoding.loss != "source":
            return None
        ids = (
            self.digit_ids
            if self.digit_ids.device == targets.device
            else torch.tensor(self.digit_list, device=targets.device)
        )
        return torch.isin(targets, ids)

    def loss(self, hidden: Tensor, lm_weight: Tensor, targets: Tensor) -> Tensor:
        out = hidden.new_zeros(len(targets), dtype=torch.float32)
        at = torch.isin(targets, self.digit_ids)
        if not at.any():
            return out
        p = (hidden[at] @ lm_weight[self.digit_ids].T).float().softmax(-1)  # [n, 10]
        values = torch.arange(10, device=hidden.device, dtype=torch.float32)
        truth = (targets[at, None] == self.digit_ids).float().argmax(-1).float()  # the target digit's value
        if self.encoding.variant == "was":
            each = (p * (values - truth[:, None]).abs()).sum(-1)
        else:
            each = ((p * values).sum(-1) - truth).square()
        return out.index_put((torch.nonzero(at)[:, 0],), self.encoding.weight * each)
