"""The training loop's wiring: with `evaluate` replaced by a fixed stream of scores, a run logs the
scores, the ratios a TaskBalancer fed that stream computes (from the end of the balancer's warm-up
on), their harmonic mean (eq. 15), keeps the weights of the round with the best mean after the lr
warm-up, draws its batches by those ratios, weights each task's loss by C.4's normalisation of the
losses it measured, moves the curriculum's frontier exactly as the stream says and, for BitTokens,
hands the curriculum tasks over from the binary pool to the decimal one (A.3)."""

import math
import statistics

import numpy as np
import pandas as pd
import pytest
import torch

import workbench.training.batches
import workbench.training.train
from workbench import tasks
from workbench.runs.logs import load_metrics
from workbench.training.balancing import TaskBalancer
from workbench.training.optim import OptimConfig
from workbench.training.train import TrainConfig, train

TASKS = ("addition", "multiplication")  # multiplication has a curriculum (A.3), addition not
# Per validation round: the score of each task. Addition's answers all get it; multiplication's
# only at the level the curriculum's frontier should be at in that round (0 elsewhere), so the
# frontier moves on exactly the 1.0s (any threshold of eq. 14 is at most zeta0 = 0.9), and only if
# the curriculum is scored by the decimal levels (single digits are a decimal encoding). Addition's
# 1.0s leave it the balancer's floor; the best eq. 15 mean after the lr warm-up is round 3's,
# before it round 2's, and the arithmetic mean would pick round 4 (test_best_weights_...).
STREAM = [
    {"addition": 0.25, "multiplication": 0.0},
    {"addition": 1.0, "multiplication": 1.0},
    {"addition": 0.25, "multiplication": 1.0},
    {"addition": 1.0, "multiplication": 0.0},
    {"addition": 0.5, "multiplication": 1.0},
]
STEP_TOKENS = 2 * 128  # batch_size x context
WARMUP = 0.3  # of the 5 steps' tokens: the first evaluation (256 tokens) is in the warm-up, the second (512) not
LR_WARMUP_STEPS = 2  # 0.4 x 5 steps: the weights after steps 1 and 2 are never the best checkpoint
RUN = dict(
    encoding="single_digit",
    tasks=TASKS,
    preset="cpu-tiny",
    batch_size=2,
    tokens=STEP_TOKENS * len(STREAM),
    eval_every=1,
    checkpoint_every=100,
    pool_size=300,
    val_samples=64,
    test_samples=8,
    decades=(0, 2),
    max_digits=3,
    threads=1,
    adapt_warmup=WARMUP,
    balance_unit="samples",
    optim=OptimConfig(warmup_frac=LR_WARMUP_STEPS / len(STREAM)),
)


def start_level() -> int:
    """C.3's start: round(0.1 x the highest level of the training pool), no lower than its lowest."""
    levels = tasks.generate(
        "multiplication", RUN["pool_size"], seed=0, split="train", decades=RUN["decades"], max_digits=RUN["max_digits"]
    )["difficulty_sd"]
    return max(math.floor(0.1 * levels.max() + 0.5), levels.min())


def frontiers_before_each_round() -> list[int]:
    level, out = start_level(), []
    for scores in STREAM:
        out.append(level)
        level += scores["multiplication"] == 1.0
    return out


def traced_run(cfg: TrainConfig, score_of):
    """Train with `evaluate` replaced by `score_of(call index, task, frame)` -> the score of each
    row; records every evaluate call (its frames, generation cap and the model's weights), every
    batch's task counts and samples, and every forward pass's task weights and losses.
    -> (steps, evals, calls, draws, forwards)"""
    calls, draws, forwards = [], [], []
    real_next_batch, real_losses = workbench.training.batches.next_batch, workbench.training.train.step_losses

    def fake_evaluate(model, tok, frames, max_new_tokens=None, batch_size=64):
        """exact is always False (not the score)."""
        k = len(calls)
        calls.append((frames, max_new_tokens, {n: w.clone() for n, w in model.state_dict().items()}))
        return pd.concat(
            [
                pd.DataFrame(
                    {
                        "task": t,
                        "prompt": f["prompt"].to_numpy(),
                        "answer": f["answer"].to_numpy(),
                        "prediction": "0",
                        "score": score_of(k, t, f),
                        "exact": False,
                        "input_tokens": 5,
                        "output_tokens": 2,
                    }
                )
                for t, f in frames.items()
            ],
            ignore_index=True,
        )

    def recording_next_batch(pools, task_counts, rng, pick, *args, **kwargs):
        picked = {}

        def recording_pick(task, n, rng):
            picked[task] = pick(task, n, rng)
            return picked[task]

        batch = real_next_batch(pools, task_counts, rng, recording_pick, *args, **kwargs)
        draws.append((dict(task_counts), picked, pools))
        return batch

    def recording_losses(model, batch, task_weights=None, hidden=None):
        out = real_losses(model, batch, task_weights, hidden)
        forwards.append(
            {
                "weights": None if task_weights is None else task_weights.tolist(),
                **{k: out[k].detach().double().numpy().copy() for k in ("loss", "task_loss", "task_tokens")},
            }
        )
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.training.train, "evaluate", fake_evaluate)
        mp.setattr(workbench.training.batches, "next_batch", recording_next_batch)
        mp.setattr(workbench.training.train, "step_losses", recording_losses)
        out = train(cfg)
    steps, evals = load_metrics(out)
    return steps, evals.to_dict("records"), calls, draws, forwards


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    frontier = frontiers_before_each_round()

    def score_of(k, task, frame):
        if k >= len(STREAM):  # the final test split
            return 0.5
        if task == "multiplication":
            return np.where(frame["difficulty_sd"] == frontier[k], STREAM[k][task], 0.0)
        return STREAM[k][task]

    return traced_run(TrainConfig.of(**RUN, out=str(tmp_path_factory.mktemp("run"))), score_of)


def stream_means(calls) -> list[dict]:
    """The mean score of each task in each round: what the balancer and eq. 15 are fed."""
    frontier, out = frontiers_before_each_round(), []
    for k, (frames, _, _) in enumerate(calls[: len(STREAM)]):
        on_level = (frames["multiplication"]["difficulty_sd"] == frontier[k]).mean()
        out.append({"addition": STREAM[k]["addition"], "multiplication": STREAM[k]["multiplication"] * on_level})
    return out


def after_warmup(k: int) -> bool:
    """Evaluation k comes when the tokens seen have reached WARMUP of the budget (C.4's warm-up)."""
    return (k + 1) * STEP_TOKENS >= WARMUP * RUN["tokens"]


def balances(k: int) -> bool:
    """The balancer's first update is at the evaluation after the one that ends the warm-up (the
    authors': that one only renormalises the losses)."""
    return k >= 1 and after_warmup(k - 1)


def test_logged_scores_ratios_and_harmonic_mean_follow_the_stream(run):
    _, evals, calls, _, _ = run
    assert len(evals) == len(STREAM) and len(calls) == len(STREAM) + 1  # + the final test split
    assert all(cap is None for _, cap, _ in calls)  # the authors' cap: the longest answer of each batch
    means = stream_means(calls)
    assert 0 < means[1]["multiplication"] < 1  # the frontier's level is a part of the validation set
    balancer = TaskBalancer(TASKS, floor=0.01)  # C.4 with the authors' floor on 1 - p
    assert not after_warmup(0) and after_warmup(1) and not balances(1) and balances(2)
    assert any(scores["addition"] == 1.0 for scores in means[2:])  # where the floor decides
    for k, (row, scores) in enumerate(zip(evals, means)):
        expected = balancer.update(scores) if balances(k) else balancer.ratios
        assert {t: row[f"score/{t}"] for t in TASKS} == scores  # k / 64 of 1.0: exact
        assert {t: row[f"ratio/{t}"] for t in TASKS} == expected  # exactly: the same floats
        eq15 = statistics.harmonic_mean([s + 1e-6 for s in scores.values()]) - 1e-6  # eps of eq. 15, taken off
        assert row["harmonic_mean"] == pytest.approx(eq15, rel=1e-12, abs=1e-15)
    assert evals[1]["ratio/multiplication"] == 0.5  # the warm-up and its last round moved nothing
    assert evals[-1]["ratio/multiplication"] != 0.5  # the stream moved the ratios


def test_best_weights_are_the_rounds_with_the_best_harmonic_mean_after_the_lr_warm_up(run):
    """The final test answers with the weights of the round whose eq. 15 mean is the highest among
    the rounds after the lr warm-up (the authors' rule; the first eligible round is kept on ties)."""
    _, _, calls, _, _ = run
    means = stream_means(calls)
    harmonic = [statistics.harmonic_mean([s + 1e-6 for s in m.values()]) - 1e-6 for m in means]
    arithmetic = [statistics.mean(m.values()) for m in means]
    eligible = range(LR_WARMUP_STEPS, len(STREAM))
    best = max(eligible, key=lambda k: (harmonic[k], -k))
    # the stream is made so that each wrong rule would pick another round
    assert best != max(eligible, key=arithmetic.__getitem__) and best != max(
        range(len(STREAM)), key=harmonic.__getitem__
    )
    final = calls[-1][2]
    same = [
        k for k, (_, _, weights) in enumerate(calls[:-1]) if all(torch.equal(final[n], w) for n, w in weights.items())
    ]
    assert same == [best]


def test_batches_are_drawn_by_the_balancers_ratios(run):
    """Step s draws by the ratios after s evaluations (one per step): uniform first, then eq. 16.
    (This run counts shares in samples; test_token_shares covers the default, tokens.)"""
    _, _, calls, draws, _ = run
    assert len(draws) == len(STREAM)
    balancer = TaskBalancer(TASKS, floor=0.01)
    for step, (drawn, picked, _) in enumerate(draws):
        if step and balances(step - 1):
            balancer.update(stream_means(calls)[step - 1])
        assert drawn == balancer.task_counts(sum(drawn.values())), step
        assert {t: len(s) for t, s in picked.items()} == drawn
    assert draws[-1][0]["addition"] != draws[-1][0]["multiplication"]


def test_task_losses_are_weighted_by_the_loss_normalisation(run):
    """C.4: every task's loss is scaled to 10 (w = 10 / its mean per-token loss since the last
    evaluation) at each evaluation until the first one after the warm-up; then, without a text
    task to follow, the weights stay. The loss optimized is the weighted per-token loss."""
    _, evals, _, _, forwards = run
    assert len(forwards) == len(STREAM)
    weights = [1.0, 1.0]
    for step, f in enumerate(forwards):
        assert f["weights"] == pytest.approx(weights, rel=1e-6), step
        assert f["task_tokens"].min() > 0 and f["task_loss"].min() > 0
        assert f["loss"] == pytest.approx((f["weights"] * f["task_loss"]).sum() / f["task_tokens"].sum(), rel=1e-5)
        if step == 0 or not after_warmup(step - 1):  # the evaluation after this step renormalises
            weights = (10 * f["task_tokens"] / f["task_loss"]).tolist()
        assert [evals[step][f"loss_weight/{t}"] for t in TASKS] == pytest.approx(weights, rel=1e-6)
    assert weights != pytest.approx([1.0, 1.0], rel=0.1) and weights[0] != pytest.approx(weights[1], rel=1e-3)


def test_curriculum_frontier_advances_as_the_stream_says(run):
    _, evals, calls, _, _ = run
    frontier = [row["frontier/multiplication"] for row in evals]
    assert "frontier/addition" not in evals[0]
    start = start_level()
    assert start == 2  # levels 2 … 6 (two operands of 1 … 3 digits): 0.1 x 6 rounds to 1, below them
    levels = set(calls[0][0]["multiplication"]["difficulty_sd"])  # the frontier's levels must be in the val set
    assert {start, start + 1, start + 2} <= levels
    assert frontier == [start, start + 1, start + 2, start + 2, start + 3]


# -- A.3: BitTokens learn multiplication from binary-significance numbers, then decimal ones -------
HANDOVER = dict(RUN, encoding="bittokens", endgame_share=0.4)  # the last 2 of 5 steps on the decimal pool


@pytest.fixture(scope="module")
def bittokens_run(tmp_path_factory):
    return traced_run(
        TrainConfig.of(**HANDOVER, out=str(tmp_path_factory.mktemp("bittokens"))), lambda k, task, frame: 0.5
    )


def test_bittokens_hand_over_from_the_binary_pool_to_the_decimal_one(bittokens_run):
    """Multiplication's samples come from a pool that is not the decimal training pool for the
    first 60 % of the steps and from the decimal pool for the last 40 %; until the hand-over its
    curriculum is scored on questions of its own (binary validation set), after it on none."""
    _, evals, calls, draws, _ = bittokens_run
    assert len(draws) == len(STREAM)
    handed_over = [step >= 0.6 * len(STREAM) for step in range(len(STREAM))]
    assert handed_over == [False, False, False, True, True]
    for step, (_, picked, pools) in enumerate(draws):
        decimal = {id(s) for s in pools["multiplication"].samples}
        from_decimal = [id(s) in decimal for s in picked["multiplication"]]
        assert picked["multiplication"] and set(from_decimal) == {handed_over[step]}, step
        assert all(id(s) in {id(p) for p in pools["addition"].samples} for s in picked["addition"])
    assert [row["endgame/multiplication"] for row in evals] == [int(h) for h in handed_over]
    # evaluations: the validation set of both tasks, and the binary one of multiplication until the hand-over
    shapes = [sorted(frames) for frames, _, _ in calls]
    assert shapes == [TASKS_SORTED, ["multiplication"]] * 3 + [TASKS_SORTED] * 2 + [TASKS_SORTED]
    validation, binary = calls[0][0]["multiplication"], calls[1][0]["multiplication"]
    assert not set(binary["prompt"]) & set(validation["prompt"])
    assert "frontier/multiplication" in evals[0]


TASKS_SORTED = sorted(TASKS)


def test_token_shares_give_each_task_its_ratio_of_the_tokens():
    """--balance-unit tokens (the default): a task's samples are its ratio of the step's tokens
    divided by its mean sample length, so long samples (text) do not take the batch."""
    from types import SimpleNamespace

    from workbench.training import train

    pools = {"addition": SimpleNamespace(mean_length=10.0), "text": SimpleNamespace(mean_length=300.0)}
    balancer = TaskBalancer(["addition", "text"])
    balance = SimpleNamespace(balancing=True, balance_unit="tokens")
    run = SimpleNamespace(
        cfg=SimpleNamespace(tasks=("addition", "text"), balance=balance),
        balancer=balancer,
        pools=pools,
        tokens_per_step=3000,
        per_step=100,
    )
    assert train._task_counts(run) == {"addition": 150, "text": 5}  # 1500 tokens each
    balance.balance_unit = "samples"
    assert train._task_counts(run) == {"addition": 50, "text": 50}


@pytest.mark.parametrize("with_text", [True, False])
def test_the_checkpoint_choice_counts_text_unless_switched_off(tmp_path, with_text):
    """Eq. 15 over addition and text's score (the authors'), or over addition alone
    (--no-select-with-text): each rule picks another round's weights."""
    addition = [0.1, 0.1, 0.9, 0.5, 0.6]
    text_ppl = [400.0, 400.0, 340.0, 200.0, 270.0]  # text_score 0.05, 0.20, 0.10 in the eligible rounds
    text = [math.exp((40 - p) / 100) for p in text_ppl]
    harmonic = [statistics.harmonic_mean([a + 1e-6, t + 1e-6]) - 1e-6 for a, t in zip(addition, text)]
    expected = max(range(LR_WARMUP_STEPS, len(addition)), key=(harmonic if with_text else addition).__getitem__)
    assert expected == (3 if with_text else 2)
    ppl_calls = []

    def fake_perplexity(model, tok, texts, progress=True, **kwargs):
        ppl = text_ppl[len(ppl_calls)] if len(ppl_calls) < len(text_ppl) else 100.0
        ppl_calls.append(ppl)
        return {"ppl_all": ppl, "ppl_text": ppl}

    cfg = TrainConfig.of(**dict(RUN, tasks=("addition", "text"), select_with_text=with_text), out=str(tmp_path / "run"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.training.train, "perplexity", fake_perplexity)
        _, evals, calls, _, _ = traced_run(cfg, lambda k, task, frame: addition[k] if k < len(addition) else 0.5)
    assert [row["score/text"] for row in evals] == pytest.approx(text, rel=1e-12)
    chosen = harmonic if with_text else addition  # eq. 15 over one task: its score
    assert [row["harmonic_mean"] for row in evals] == pytest.approx(chosen, rel=1e-9)
    final = calls[-1][2]
    same = [
        k for k, (_, _, weights) in enumerate(calls[:-1]) if all(torch.equal(final[n], w) for n, w in weights.items())
    ]
    assert same == [expected]


def test_the_balancer_can_start_at_the_warm_up_evaluation(tmp_path):
    """--balance-start warmup_evaluation: the first update is at the evaluation that ends the
    warm-up itself (one evaluation earlier than the authors')."""
    cfg = TrainConfig.of(**dict(RUN, balance_start="warmup_evaluation"), out=str(tmp_path / "run"))
    _, evals, _, _, _ = traced_run(
        cfg, lambda k, task, frame: [0.2, 0.6, 0.4, 0.9, 0.5, 0.5][k] if task == "addition" else 0.3
    )
    balancer = TaskBalancer(TASKS, floor=0.01)
    for k, row in enumerate(evals):
        scores = {t: row[f"score/{t}"] for t in TASKS}
        expected = balancer.update(scores) if after_warmup(k) else balancer.ratios
        assert {t: row[f"ratio/{t}"] for t in TASKS} == expected, k
    assert evals[1]["ratio/addition"] != 0.5


@pytest.mark.parametrize("active_set", [True, False])
def test_bittokens_balance_on_the_binary_validation_set_until_the_hand_over(tmp_path, active_set):
    """Before A.3's hand-over the balancer is fed multiplication's score on its binary validation
    set, the set it trains on (the authors'); --no-balance-active-set feeds the decimal one. The
    binary set scores 0.75 here, the decimal one 0.25, addition 0.5 (means exact in binary)."""

    def score_of(k, task, frame):
        binary = task == "multiplication" and not frame["prompt"].isin(validation["prompt"]).any()
        return 0.75 if binary else 0.25 if task == "multiplication" else 0.5

    validation = tasks.generate(
        "multiplication", RUN["val_samples"], seed=0, split="val", decades=RUN["decades"], max_digits=RUN["max_digits"]
    )
    cfg = TrainConfig.of(**dict(HANDOVER, balance_active_set=active_set), out=str(tmp_path / "run"))
    _, evals, _, _, _ = traced_run(cfg, score_of)
    balancer = TaskBalancer(TASKS, floor=0.01)
    for k, row in enumerate(evals):
        handed_over = row["endgame/multiplication"]
        fed = {"addition": 0.5, "multiplication": 0.75 if active_set and not handed_over else 0.25}
        assert row["score/multiplication"] == 0.25  # the log and eq. 15 keep the decimal validation score
        expected = balancer.update(fed) if balances(k) else balancer.ratios
        assert {t: row[f"ratio/{t}"] for t in TASKS} == expected, k
    assert evals[2]["ratio/multiplication"] < 0.5 if active_set else evals[2]["ratio/multiplication"] > 0.5


def test_after_the_warm_up_each_loss_weight_is_set_to_match_the_text_tasks(tmp_path):
    """C.4 with a text task (the authors' rule, the default): until the warm-up's last evaluation
    every weight is 10 / the task's mean per-token loss since the last evaluation; after it, text's
    weight stays and each other weight is set to w_text mean_text / mean_task at every evaluation
    (not moved part of the way)."""
    cfg = TrainConfig.of(**dict(RUN, tasks=("addition", "text")), out=str(tmp_path / "run"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.training.train, "perplexity", lambda *a, **k: {"ppl_all": 300.0, "ppl_text": 300.0})
        _, evals, _, _, forwards = traced_run(cfg, lambda k, task, frame: 0.5)
    weights, warm, matched = [1.0, 1.0], False, 0
    for step, f in enumerate(forwards):
        assert f["weights"] == pytest.approx(weights, rel=1e-6), step
        seen = f["task_tokens"] > 0  # a task without targets in the step keeps its weight
        mean = np.where(seen, f["task_loss"] / np.maximum(f["task_tokens"], 1), np.nan)  # one step per evaluation
        if not warm:
            weights = [10 / m if s else w for m, s, w in zip(mean, seen, weights)]
            warm = after_warmup(step)
        elif seen.all():
            weights, matched = [weights[1] * mean[1] / mean[0], weights[1]], matched + 1
        assert [evals[step][f"loss_weight/{t}"] for t in cfg.tasks] == pytest.approx(weights, rel=1e-6), step
    assert warm and len(forwards) == 5 and matched >= 2  # weights set after the warm-up, twice or more


def test_curriculum_rule_authors_moves_the_frontier_by_their_rule(tmp_path):
    """--curriculum-rule authors: the run's curricula are the authors' (start at index int(0.15 n)
    of the held levels, here 2 … 6, so level 2; one level per evaluation while every level scores
    1.0; mastered at the top), logged like the paper's."""
    cfg = TrainConfig.of(**RUN, curriculum_rule="authors", out=str(tmp_path / "authors"))
    _, evals, _, _, _ = traced_run(cfg, lambda k, task, frame: 1.0)
    held = tasks.generate(
        "multiplication", RUN["pool_size"], seed=0, split="train", decades=RUN["decades"], max_digits=RUN["max_digits"]
    )["difficulty_sd"]
    assert sorted(set(held)) == [2, 3, 4, 5, 6]
    assert [row["frontier/multiplication"] for row in evals] == [3, 4, 5, 6, 6]
    with pytest.raises(ValueError, match="curriculum-rule"):
        TrainConfig.of(**RUN, curriculum_rule="fast")
