"""The Trainer contract: what a training process offers what training learns from each evaluation
(`adapt.evaluate_and_adapt`). The training loop's `Run` (train.py) and the retrofit's `Job`
(retrofit/finetune.py) both implement it, so the curricula, the task balancer, the loss weights and
the choice of the best checkpoint are one code for both.

    class Run(Trainer): ...                  # a dataclass holding the fields below
    row = evaluate_and_adapt(run, step, lr, loss)
    isinstance(job, Trainer)                 # True: every member is there

The settings (`cfg`) are read for their `tasks`, `tokens`, `balance` and `evaluation` groups, and
for the lr schedule's shape (`lr_shape()`: the curricula follow it, `adapt.build_sampler`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pandas as pd

    from ..config import Grouped
    from .balancing import LossNormalizer, TaskBalancer
    from .curriculum import Sampler


@runtime_checkable
class Trainer(Protocol):
    """What `adapt.evaluate_and_adapt` reads and changes of a training process."""

    cfg: Grouped  # the run's settings: TrainConfig, or the retrofit's RetrofitConfig
    val: dict  # the validation questions per task
    sampler: Sampler  # the curricula and A.3's binary pools (adapt.build_sampler)
    balancer: TaskBalancer  # eq. 16's task ratios
    normalizer: LossNormalizer  # C.4's loss weights
    state: dict  # its "best" score (eq. 15) and "warm_evaluations", saved in checkpoints
    total_steps: int
    tokens_per_step: int  # a field or a property
    warmup_steps: int  # of the lr schedule: the best checkpoint is chosen after them

    def answer(self, frames: dict) -> pd.DataFrame:
        """The answers table of `measures.evaluate.evaluate` for these questions per task."""
        ...

    def perplexity(self, texts) -> dict:
        """`measures.perplexity.perplexity` of these texts ("ppl_all" is read)."""
        ...

    def has_best(self) -> bool:
        """Whether best weights are kept (or being written) already."""
        ...

    def keep_best(self) -> None:
        """Keep the current weights as the best."""
        ...
