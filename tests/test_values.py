"""Values followed to where they are used, under non-default settings: what the optimizer steps
with, what the curricula's thresholds read, what a packed batch keeps, which questions every
evaluation receives, and every state a resume restores. Each test names the one-line bug it
exists to catch (they are planted in tests/mutations.py)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from tiny import tiny
from torch.optim.optimizer import register_optimizer_step_pre_hook

import workbench.training.train
from workbench import tasks
from workbench.runs.logs import load_metrics
from workbench.training.optim import OptimConfig
from workbench.training.train import TrainConfig, setup, train

# Every schedule setting away from its default, so a path that drops one falls back to another value.
OPTIM = OptimConfig(warmup_frac=0.3, lr_floor=0.001, hidden_lr=0.01, embedding_lr=0.05, head_lr=0.003, scalar_lr=0.015)
TINY = tiny(
    10,
    encoding="single_digit",
    tasks=("addition", "multiplication", "division"),
    pool_size=300,
    val_samples=16,
    test_samples=8,
    eval_every=2,
    checkpoint_every=2,
    decades=(0, 2),
    max_digits=3,
    optim=OPTIM,
)


def cosine_schedule(step: int, total: int, base: float, warmup_frac: float, floor: float) -> float:
    """C.1's schedule written out: linear warm-up over round(warmup_frac x total) steps (step s
    gets (s + 1) / warmup), then a cosine from `base` down to `floor`."""
    warmup = round(warmup_frac * total)
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / (total - warmup)
    return floor + (base - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def test_the_curricula_use_the_runs_lr_warm_up(tmp_path):
    """Bug: `_sampler` builds each Curriculum without the run's warmup_frac, so eq. 14's lr term
    uses the default 10 % warm-up (its warm-up steps and the lr drop L by the decay start)."""
    run = setup(TrainConfig.of(**TINY, out=str(tmp_path / "run")))
    total = run.total_steps
    for curriculum in run.sampler.curricula.values():
        assert curriculum.warmup_steps == round(OPTIM.warmup_frac * total) == 3
        decay_start = round(0.5 * total)
        assert curriculum.L == pytest.approx(1 - cosine_schedule(decay_start, total, 1.0, OPTIM.warmup_frac, 0.0))


def test_every_group_steps_with_the_lr_the_flags_define(tmp_path):
    """Bug: a schedule setting stops reaching the optimizers (e.g. `apply_schedule` called without
    the run's OptimConfig): the flag is parsed, stored and logged, but the groups step with the
    default schedule. The flags go through the command line; each optimizer step's lr is recorded
    as the optimizer sees it and compared with C.1's schedule written out from the flags."""
    seen = []
    hook = register_optimizer_step_pre_hook(
        lambda opt, args, kwargs: seen.extend((g["name"], g["lr"]) for g in opt.param_groups)
    )
    flags = [
        "--warmup-frac",
        "0.3",
        "--lr-floor",
        "0.001",
        "--hidden-lr",
        "0.01",
        "--embedding-lr",
        "0.05",
        "--head-lr",
        "0.003",
        "--scalar-lr",
        "0.015",
    ]
    try:
        workbench.training.train.main(
            [
                "--encoding",
                "single_digit",
                "--tasks",
                "addition",
                "--batch-size",
                "2",
                "--tokens",
                str(2 * 128 * 10),
                "--pool-size",
                "300",
                "--val-samples",
                "8",
                "--test-samples",
                "8",
                "--eval-every",
                "5",
                "--threads",
                "1",
                *flags,
                "--out",
                str(tmp_path / "run"),
            ]
        )
    finally:
        hook.remove()
    steps, _ = load_metrics(tmp_path / "run")
    base = {"hidden": 0.01, "embedding": 0.05, "head": 0.003, "scalar": 0.015}
    assert len(steps) == 10 and len(seen) == 10 * len(base)
    for step, row in steps.iterrows():
        stepped = dict(seen[len(base) * step : len(base) * (step + 1)])
        for group, lr in base.items():
            want = cosine_schedule(step, 10, lr, 0.3, min(0.001, lr))
            assert stepped[group] == pytest.approx(want, rel=1e-12) and row[f"lr/{group}"] == stepped[group], (
                step,
                group,
            )


def test_each_task_keeps_its_share_of_the_complete_samples_in_packed_rows(tmp_path):
    """Bug: `draw` stops shuffling the samples before `pack` fills the rows: the draw is right, but
    the task drawn last loses the samples that do not fit (its share of the complete samples
    halves) and rows become single-task. A complete sample is one whose <|eos|> is in the batch."""
    batches = []
    real = workbench.training.batches.next_batch

    def recording(pools, counts, *args, **kwargs):
        batch = real(pools, counts, *args, **kwargs)
        batches.append((dict(counts), batch))
        return batch

    cfg = TrainConfig.of(
        **{**TINY, "batch_size": 8, "tokens": 8 * 128 * 40, "eval_every": 1000}, out=str(tmp_path / "r")
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.training.batches, "next_batch", recording)
        mp.setattr(workbench.training.train, "final_test", lambda run, started: pd.DataFrame({"task": [], "score": []}))
        train(cfg)
    eos = 3  # <|eos|>, tokenizer.CONTROL_TOKENS
    complete, expected, mixed = np.zeros(3), np.zeros(3), []
    for counts, batch in batches:
        ends = batch["targets"] == eos
        per_task = np.bincount(batch["task_ids"][ends].numpy(), minlength=3)
        complete += per_task
        expected += np.array([counts[t] for t in cfg.tasks]) / sum(counts.values()) * per_task.sum()
        mixed += [len(set(batch["task_ids"][row][ends[row]].tolist())) > 1 for row in range(len(ends))]
    assert len(batches) == 40 and complete.sum() > 1500
    assert complete / complete.sum() == pytest.approx(expected / expected.sum(), abs=0.04)
    assert np.mean(mixed) > 0.9  # rows mix the tasks


def test_every_evaluation_receives_the_validation_split_and_the_final_test_the_test_split(tmp_path):
    """Bug: validation questions taken from another split (the training split: the balancer,
    curricula and best checkpoint would score memorised answers). Every evaluation's frames are
    exactly the validation split's questions; the final test's exactly the test split's; neither
    shares a question with the training pool."""
    frames_seen = []

    def recording_evaluate(model, tok, frames, max_new_tokens=None, batch_size=64):
        frames_seen.append({t: f.copy() for t, f in frames.items()})
        return pd.concat(
            [
                pd.DataFrame(
                    {
                        "task": t,
                        "prompt": f["prompt"],
                        "answer": f["answer"],
                        "prediction": "0",
                        "score": 0.5,
                        "exact": False,
                        "input_tokens": 5,
                        "output_tokens": 2,
                    }
                )
                for t, f in frames.items()
            ],
            ignore_index=True,
        )

    cfg = TrainConfig.of(**{**TINY, "eval_every": 5}, out=str(tmp_path / "r"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.training.train, "evaluate", recording_evaluate)
        train(cfg)
    split = {
        s: {t: tasks.generate(t, n, seed=cfg.seed, split=s, regime=cfg.regime) for t in cfg.tasks}
        for s, n in (
            ("val", cfg.evaluation.val_samples),
            ("test", cfg.evaluation.test_samples),
            ("train", cfg.data.pool_size),
        )
    }
    assert len(frames_seen) == 3  # steps 5 and 10, then the final test
    for k, frames in enumerate(frames_seen):
        want = split["test" if k == 2 else "val"]
        assert sorted(frames) == sorted(cfg.tasks)
        for task, frame in frames.items():
            assert frame["prompt"].tolist() == want[task]["prompt"].tolist(), (k, task)
            assert frame["answer"].tolist() == want[task]["answer"].tolist(), (k, task)
            assert not set(frame["prompt"]) & set(split["train"][task]["prompt"]), (k, task)
    for task in cfg.tasks:
        assert not set(split["val"][task]["prompt"]) & set(split["test"][task]["prompt"])


class Killed(Exception):
    """Stands for a SIGKILL right after a checkpoint (the files are written atomically)."""


def live_state(run) -> dict:
    """Everything a resumed run must continue from, read from the live objects (not from the
    checkpoint, so a field the checkpoint forgets is still compared)."""
    curricula = {t: (c.frontier, c.ratios.tolist(), c.mastered) for t, c in run.sampler.curricula.items()}
    return {
        "step": run.state["step"],
        "best": run.state["best"],
        "ratios": run.balancer.ratios,
        "loss_weights": run.normalizer.weights.tolist(),
        "loss_sums": run.normalizer.sums.tolist(),
        "loss_counts": run.normalizer.counts.tolist(),
        "normalizer_warm": run.normalizer.warm,
        "curricula": curricula,
        "rng": run.rng.bit_generator.state,
        "torch_rng": torch.get_rng_state().tolist(),
        "model": {k: v.clone() for k, v in run.model.state_dict().items()},
        "optimizers": [_tensors(o.state_dict()) for o in run.optimizers],
    }


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return value.clone().tolist()
    if isinstance(value, dict):
        return {k: _tensors(v) for k, v in value.items()}
    return [_tensors(v) for v in value] if isinstance(value, (list, tuple)) else value


def same(a: dict, b: dict) -> list[str]:
    """The fields of two live states that differ."""
    differ = [k for k in a if k != "model" and a[k] != b[k]]
    return differ + (["model"] if any(not torch.equal(a["model"][k], b["model"][k]) for k in a["model"]) else [])


def test_resume_restores_every_state_field_by_field(tmp_path):
    """Bugs: a resume that loses the best checkpoint's score (a later, worse round replaces
    best.pt), the balancer, the curricula, the loss normaliser, a random state or the clock.
    Run A goes through; run B is killed right after its step-6 checkpoint and resumed. Just after
    the resume, B's live state equals A's at step 6, field by field (the clock: B's own); at the
    end both runs' states, best weights and logs are equal. The score stream peaks at step 4,
    before the kill, so a lost best score changes best.pt."""
    stream = {2: 0.2, 4: 0.9, 6: 0.5, 8: 0.4, 10: 0.3}  # evaluation step -> the first task's score
    evaluations = iter(())

    def streamed(model, tok, frames, max_new_tokens=None, batch_size=64):
        score = next(evaluations, 0.5)  # the tasks' scores differ, so the balancer's ratios move
        return pd.concat(
            [
                pd.DataFrame(
                    {
                        "task": t,
                        "prompt": f["prompt"],
                        "answer": f["answer"],
                        "prediction": "0",
                        "score": score / 2**k,
                        "exact": False,
                        "input_tokens": 5,
                        "output_tokens": 2,
                    }
                )
                for k, (t, f) in enumerate(frames.items())
            ],
            ignore_index=True,
        )

    snapshots = {}
    real_save = workbench.training.train.save_checkpoint

    def save(run, kill_at=None):
        real_save(run)
        snapshots[(run.out.name, run.state["step"])] = (live_state(run), run.state["seconds"])
        if run.state["step"] == kill_at:
            raise Killed

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.training.train, "evaluate", streamed)
        mp.setattr(workbench.training.train, "save_checkpoint", save)
        evaluations = iter(stream.values())
        a = train(TrainConfig.of(**TINY, out=str(tmp_path / "a")))
        evaluations = iter(stream.values())
        mp.setattr(workbench.training.train, "save_checkpoint", lambda run: save(run, kill_at=6))
        with pytest.raises(Killed):
            train(TrainConfig.of(**TINY, out=str(tmp_path / "b")))
        cfg_b = TrainConfig.of(**TINY, out=str(tmp_path / "b"))
        resumed = setup(cfg_b, resume=True)
        restored, (at_kill, clock) = live_state(resumed), snapshots[("b", 6)]
        assert same(restored, snapshots[("a", 6)][0]) == [] and restored == at_kill | {"model": restored["model"]}
        assert resumed.state["seconds"] == clock > 0  # the clock goes on from the kill
        evaluations = iter(list(stream.values())[3:])
        mp.setattr(workbench.training.train, "save_checkpoint", save)
        b = train(cfg_b, resume=True)
    assert same(snapshots[("b", 10)][0], snapshots[("a", 10)][0]) == []
    assert snapshots[("a", 10)][0]["best"] == snapshots[("a", 4)][0]["best"]  # the best round is before the kill
    assert len(set(snapshots[("a", 6)][0]["ratios"].values())) == 3  # the balancer has moved
    best_a, best_b = (torch.load(d / "best.pt", weights_only=True) for d in (a, b))
    assert all(torch.equal(best_a[k], best_b[k]) for k in best_a)
    evals_a, evals_b = (load_metrics(d)[1].drop(columns="time", errors="ignore") for d in (a, b))
    pd.testing.assert_frame_equal(evals_a, evals_b)
    steps_a, steps_b = (load_metrics(d)[0] for d in (a, b))
    assert steps_a.loss.tolist() == steps_b.loss.tolist()
