"""What training learns from each evaluation, the same for `workbench.train` and
`workbench.retrofit`: the validation scores drive the difficulty curricula (C.3) and the task
balancer (eq. 16), the per-task losses set the loss weights (C.4), and the scores' generalized
mean (eq. 15) picks the best checkpoint.

    sampler = build_sampler(cfg, encoding, tok, pools, total_steps)   # the curricula and A.3's binary pools
    row = evaluate_and_adapt(trainer, step, lr, loss)                  # at every --eval-every steps

A trainer (train.Run, retrofit's Job) is what trainer.Trainer names: the settings, the validation
questions, the sampler, the balancer, the loss weights, the state checkpoints keep, and how it
answers questions, measures perplexity and keeps its best weights.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from .. import metrics, tasks
from ..measures.evaluate import summarize
from ..measures.perplexity import text_score
from .curriculum import Curriculum, Sampler
from .curriculum_authors import AuthorsCurriculum
from .data import make_pool
from .trainer import Trainer


def build_sampler(cfg, encoding, tok, pools: dict, total_steps: int) -> Sampler:
    """The curricula of C.3 and, for an encoding with base-2 difficulty, A.3's binary pools of the
    single-step curriculum tasks (with their own validation sets), as the settings `cfg` ask (its
    tasks, `difficulty` group, regime, pool and validation sizes, seed). The curricula read the lr
    schedule: its warm-up share and its floor as a share of the peak (`cfg.lr_shape()`)."""
    task_names, difficulty, regime, seed = cfg.tasks, cfg.difficulty, cfg.regime, cfg.seed
    pool_size, val_samples = cfg.data.pool_size, cfg.evaluation.val_samples
    warmup_frac, lr_floor = cfg.lr_shape()
    curriculum_tasks = [t for t in task_names if difficulty.curriculum and tasks.get(t).curriculum]
    binary_tasks = [
        t
        for t in curriculum_tasks
        if difficulty.binary_pool and encoding.difficulty_base == 2 and tasks.get(t).family == "single_step"
    ]
    binary_regime = replace(regime, significance="binary")
    binary = {
        t: (
            make_pool(t, pool_size, tok, seed, "train", binary_regime),
            make_pool(t, val_samples, tok, seed, "val", binary_regime).frame,
        )
        for t in binary_tasks
    }
    column = "difficulty" if encoding.difficulty_base == 2 else "difficulty_sd"
    # the levels the pool holds (the authors' "levels present in the data"): a narrowed regime's
    # pool holds far fewer than the paper's bound, and the frontier starts at 0.1 x its highest
    held = {t: getattr(binary[t][0] if t in binary else pools[t], column) for t in curriculum_tasks}
    if difficulty.curriculum_rule == "authors":  # their manager checks every task after each task's evaluation
        curricula = {
            t: AuthorsCurriculum(
                int(held[t].max()),
                total_steps,
                1.0,
                warmup_frac=warmup_frac,
                levels=held[t],
                hand_over=t in binary,
                checks=len(curriculum_tasks),
                lr_floor=min(lr_floor, 0.99),
            )
            for t in curriculum_tasks
        }
    else:
        curricula = {
            t: Curriculum(int(held[t].max()), total_steps, 1.0, warmup_frac=warmup_frac, levels=held[t])
            for t in curriculum_tasks
        }
    return Sampler(
        pools, curricula, encoding.difficulty_base, total_steps, binary, difficulty.endgame, difficulty.endgame_share
    )


def evaluate_and_adapt(trainer: Trainer, step: int, lr: float, loss: float) -> dict:
    """Answer the validation questions; feed the scores to the balancer and the curricula; keep
    the best weights by the generalized mean of the scores (eq. 15; text's left out with
    --no-select-with-text). Returns the evaluation row."""
    cfg, balance, evaluation = trainer.cfg, trainer.cfg.balance, trainer.cfg.evaluation
    questions = {t: frame for t, frame in trainer.val.items() if tasks.get(t).score is not None}
    answers = trainer.answer(questions) if questions else None
    scores = summarize(answers).set_index("task")["score"].to_dict() if questions else {}
    for task in [t for t in trainer.val if t not in questions]:  # prose: the authors' score of its perplexity
        scores[task] = text_score(trainer.perplexity(trainer.val[task]["answer"])["ppl_all"])
    tokens_seen = (step + 1) * trainer.tokens_per_step
    weights = trainer.normalizer.update(tokens_seen)
    trainer.state["warm_evaluations"] += tokens_seen >= balance.adapt_warmup * cfg.tokens
    active = {}  # a task's score on the set it trains on now, where that is not the validation set
    for task, (frame, column) in trainer.sampler.to_evaluate(trainer.val, step).items():
        scored = answers[answers.task == task] if frame is trainer.val[task] else trainer.answer({task: frame})
        if frame is not trainer.val[task]:
            active[task] = float(scored["score"].mean())
        per_level = pd.Series(scored["score"].to_numpy()).groupby(frame[column].to_numpy()).mean()
        curriculum = trainer.sampler.curricula[task]
        curriculum.update(per_level[per_level.index <= curriculum.max_difficulty].to_dict(), step + 1, lr)
    first = 2 if balance.balance_start == "next_evaluation" else 1
    if balance.balancing and scores and trainer.state["warm_evaluations"] >= first:
        trainer.balancer.update({**scores, **active} if balance.balance_active_set else scores)
    chosen = scores if evaluation.select_with_text else {t: s for t, s in scores.items() if t in questions}
    mean = metrics.generalized_mean(chosen.values(), balance.balance_lambda) if chosen else -loss
    eligible = not evaluation.select_after_warmup or step + 1 > trainer.warmup_steps or step + 1 == trainer.total_steps
    if eligible and (mean > trainer.state["best"] or not trainer.has_best()):
        trainer.state["best"] = mean
        trainer.keep_best()
    return {
        "step": step + 1,
        "harmonic_mean": mean,
        **{f"score/{t}": s for t, s in scores.items()},
        **{f"ratio/{t}": r for t, r in trainer.balancer.ratios.items()},
        **{f"loss_weight/{t}": float(w) for t, w in zip(cfg.tasks, weights)},
        **{f"active_score/{t}": s for t, s in active.items()},
        **{f"frontier/{t}": c.frontier for t, c in trainer.sampler.curricula.items()},
        **{f"endgame/{t}": int(trainer.sampler.in_endgame(t, step)) for t in trainer.sampler.binary},
    }
