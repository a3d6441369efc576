"""The training loss (appendix C.1, C.4): per token, cross-entropy, plus 10 × the number loss where
the target is <|num|> (a head's own `loss_weight` instead of 10 where it has one), plus an
encoding's own per-token loss (a token module's), each target weighted by its task's weight,
averaged over all targets of the global batch.

    hidden = model(batch)                          # final hidden states at the loss positions
    parts = losses(model, batch, task_weights, hidden)
    parts["loss"].backward()

An encoding's own per-token loss (a token module's) is averaged over all targets as well, or
over the targets it names (`TokenModule.averaged_over`, e.g. the Number Token Loss's authors'
mean over the digit targets).

The lm head runs at the loss positions only, fused with the cross-entropy (`fused.py`), so the
logits are never kept. Means divide by the batch's `ce_count` / `number_count`, the counts of the
whole global batch, so data-parallel ranks average to the single-process loss. With `--loss
separate_means` the number loss is averaged over the numbers instead (Table 9's reading).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..encoders.base import run_starts
from ..model.fused import chunk_elements, linear_cross_entropy


def losses(model, batch, task_weights: Tensor | None = None, hidden: Tensor | None = None) -> dict[str, Tensor]:
    """ "loss" (what is optimized), "ce" and "number" (unweighted means, for the log; "token_loss":
    the token module's loss over ce_count) and each task's summed unweighted per-token loss and its
    target count ("task_loss", "task_tokens": C.4's normalisation measures them). A target's weight
    is task_weights[its task] (1 without). `hidden`: `model(batch)`, computed here if not given
    (a data-parallel step passes the wrapper's output)."""
    hidden = model(batch) if hidden is None else hidden
    ce_count, loss_index = batch.ce_count, batch.loss_index
    targets = batch.targets.flatten().index_select(0, loss_index)
    tasks = batch.task_ids.flatten().index_select(0, loss_index)
    weights = task_weights[tasks] if task_weights is not None else torch.ones_like(targets, dtype=torch.float32)
    ce_sum, ce_each = linear_cross_entropy(
        hidden, model.lm_head.weight, targets, weights, chunk_elements(hidden.device)
    )
    per_token = ce_each.detach().clone()
    out = {"ce": ce_each.sum() / ce_count}
    total = ce_sum / ce_count
    if model.number_head is not None:
        number_index, wanted = batch.number_index, batch.number_targets
        values = None if wanted is not None else batch.target_values.flatten()[loss_index][number_index]
        # with no number in the batch the head still runs (on no rows): every parameter gets a
        # gradient, so data-parallel ranks reduce the same tensors
        number_each = model.number_losses(hidden.index_select(0, number_index), wanted, values)
        number_sum = (weights.index_select(0, number_index) * number_each).sum()
        weight = getattr(model.number_head, "loss_weight", None)
        weight = model.cfg.number_loss_weight if weight is None else weight  # C.1's 10, or the head's own
        per_token.index_add_(0, number_index, weight * number_each.detach())
        out["number"] = number_each.detach().sum() / batch.number_count
        scale = ce_count if model.cfg.loss == "per_token" else batch.number_count
        total = total + weight * number_sum / scale
    module = model.token_module
    runs = {"starts": run_starts(loss_index, batch.ids.shape[1])} if getattr(module, "reads_runs", False) else {}
    extra = module.loss(hidden, model.lm_head.weight, targets, **runs) if module is not None else None
    if extra is not None:  # the encoding's own per-token loss, weighted like the cross-entropy
        count = _token_loss_count(model.token_module, batch, targets)
        total = total + (weights * extra).sum() / count
        per_token += extra.detach()
        out["token_loss"] = extra.detach().sum() / count
    out["loss"] = total
    n_tasks = len(task_weights) if task_weights is not None else int(batch.task_ids.max()) + 1
    out["task_loss"] = per_token.new_zeros(n_tasks).index_add_(0, tasks, per_token)
    out["task_tokens"] = per_token.new_zeros(n_tasks).index_add_(0, tasks, torch.ones_like(per_token))
    return out


def _token_loss_count(module, batch, targets: Tensor) -> Tensor:
    """What the token module's loss sum is divided by: ce_count, or the count of the targets its
    mean is over (`averaged_over`) in the whole step's batch (`Batch.token_count`, counted where
    the step's batch was packed), or in this batch where that was not counted (a single batch)."""
    over = module.averaged_over(targets)
    if over is None:
        return batch.ce_count
    return batch.token_count if batch.token_count is not None else over.sum().clamp(min=1)
