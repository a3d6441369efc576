from fractions import Fraction as F

import numpy as np
import pytest

from workbench.training.balancing import LossNormalizer, TaskBalancer, cap_ratios, update_ratios


def close(got, expected):
    assert np.allclose(got, [float(x) for x in expected], rtol=0, atol=1e-12), (got, expected)


def test_eq16_harmonic_by_hand():
    # r_old = 1/2, 1/4, 1/4; p = 1/2, 3/4, 0; lambda = -1 -> exponent 1 - lambda = 2
    # (1-p)^2 = 1/4, 1/16, 1        sum = 21/16  -> normalised 4/21, 1/21, 16/21
    # r_new = 1/2 * r_old + 1/2 * normalised:
    #   1/4 + 2/21 = 29/84,   1/8 + 1/42 = 25/168,   1/8 + 8/21 = 85/168
    got = update_ratios([0.5, 0.25, 0.25], [0.5, 0.75, 0.0], lam=-1, alpha=0.5)
    close(got, [F(29, 84), F(25, 168), F(85, 168)])
    assert sum([F(29, 84), F(25, 168), F(85, 168)]) == 1


def test_eq16_geometric_by_hand():
    # lambda = 0 -> exponent 1: (1-p) = 1/2, 1/4, 1   sum 7/4 -> 2/7, 1/7, 4/7
    #   1/4 + 1/7 = 11/28,   1/8 + 1/14 = 11/56,   1/8 + 2/7 = 23/56
    got = update_ratios([0.5, 0.25, 0.25], [0.5, 0.75, 0.0], lam=0, alpha=0.5)
    close(got, [F(11, 28), F(11, 56), F(23, 56)])


def test_alpha_is_momentum():
    old, p = [0.5, 0.25, 0.25], [0.5, 0.75, 0.0]
    close(update_ratios(old, p, alpha=1.0), old)  # all momentum: nothing changes
    close(update_ratios(old, p, alpha=0.0), [F(4, 21), F(1, 21), F(16, 21)])  # no memory: target
    # alpha = 0.8: 4/5 * old + 1/5 * target
    close(
        update_ratios(old, p, alpha=0.8),
        [
            F(4, 5) * F(1, 2) + F(1, 5) * F(4, 21),
            F(4, 5) * F(1, 4) + F(1, 5) * F(1, 21),
            F(4, 5) * F(1, 4) + F(1, 5) * F(16, 21),
        ],
    )
    # repeated updates converge to the target
    r = np.array(old)
    for _ in range(60):
        r = update_ratios(r, p, alpha=0.5)
    close(r, [F(4, 21), F(1, 21), F(16, 21)])


def test_lambda_minus_one_oversamples_the_worst_task():
    uniform, p = [0.25] * 4, [0.9, 0.8, 0.5, 0.2]
    harmonic = update_ratios(uniform, p, lam=-1, alpha=0)
    geometric = update_ratios(uniform, p, lam=0, alpha=0)
    arithmetic = update_ratios(uniform, p, lam=1, alpha=0)
    assert np.argmax(harmonic) == 3 and np.all(np.diff(harmonic) > 0)
    assert harmonic[3] > geometric[3] > arithmetic[3]
    close(arithmetic, [F(1, 4)] * 4)  # lambda = 1 ignores performance


def test_all_tasks_perfect_keeps_ratios():
    close(update_ratios([0.7, 0.3], [1.0, 1.0]), [F(7, 10), F(3, 10)])


def test_cap_respected_and_renormalised():
    # 0.7 -> 0.5, the excess 0.2 goes 2:1 to the others: 0.2 + 2/15 = 1/3, 0.1 + 1/15 = 1/6
    close(cap_ratios([0.7, 0.2, 0.1], 0.5), [F(1, 2), F(1, 3), F(1, 6)])
    # cascade: 0.6 -> 0.4; 0.6 split 7:1 -> 0.525 > 0.4 -> 0.4; the last gets 0.2
    close(cap_ratios([0.6, 0.35, 0.05], 0.4), [F(2, 5), F(2, 5), F(1, 5)])
    rng = np.random.default_rng(0)
    for _ in range(50):
        r = rng.dirichlet(np.full(9, 0.3))
        p = rng.uniform(0, 1, 9)
        out = update_ratios(r, p, max_ratio=0.2)
        assert out.max() <= 0.2 + 1e-12 and out.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="max_ratio"):
        cap_ratios([0.5, 0.5], 0.4)  # two tasks cannot both stay under 0.4


def test_bad_input():
    with pytest.raises(ValueError, match="sum to 1"):
        update_ratios([0.5, 0.6], [0.1, 0.2])
    with pytest.raises(ValueError, match="performance"):
        update_ratios([0.5, 0.5], [0.1, float("nan")])
    with pytest.raises(ValueError, match="performance"):
        update_ratios([0.5, 0.5], [0.1, 1.5])
    with pytest.raises(ValueError, match="lam"):
        update_ratios([0.5, 0.5], [0.1, 0.2], lam=2)
    with pytest.raises(ValueError, match="shape"):
        update_ratios([0.5, 0.5], [0.1, 0.2, 0.3])


def test_task_balancer_update_counts_and_state():
    tasks = ["addition", "multiplication", "division", "text"]
    bal = TaskBalancer(tasks, lam=-1, alpha=0.5, max_ratio=0.4)
    close(list(bal.ratios.values()), [F(1, 4)] * 4)
    perf = {"addition": 0.99, "multiplication": 0.3, "division": 0.5, "text": 0.7}
    for _ in range(5):
        ratios = bal.update(perf)
    assert max(ratios, key=ratios.get) == "multiplication"
    assert max(ratios.values()) <= 0.4 + 1e-12 and sum(ratios.values()) == pytest.approx(1)
    counts = bal.task_counts(193)
    assert sum(counts.values()) == 193
    assert all(abs(counts[t] - 193 * ratios[t]) < 1 for t in tasks)
    # a partial update leaves the unscored task's share alone
    before = bal.ratios["text"]
    bal.update({"addition": 0.1, "multiplication": 0.9})
    assert bal.ratios["text"] == pytest.approx(before)
    other = TaskBalancer(tasks, max_ratio=0.4)
    other.load_state_dict(bal.state_dict())
    assert other.ratios == bal.ratios
    with pytest.raises(ValueError, match="unknown"):
        bal.update({"sorting": 0.5})
    with pytest.raises(ValueError, match="tasks"):
        TaskBalancer(["a", "b"]).load_state_dict(bal.state_dict())


def test_floor_keeps_a_share_for_solved_tasks():
    """(1 - p) >= floor: with floor 0.01 a perfect task weighs 0.01^2 under lambda = -1."""
    got = update_ratios([0.5, 0.5], [1.0, 0.9], lam=-1, alpha=0.0, floor=0.01)
    close(got, [F(1, 101), F(100, 101)])  # 0.01^2 : 0.1^2
    with pytest.raises(ValueError, match="floor"):
        update_ratios([0.5, 0.5], [1.0, 0.9], floor=1.0)


@pytest.mark.parametrize("momentum", [0.0, 0.5])
def test_loss_normalizer_scales_every_task_to_ten_then_follows_the_reference(momentum):
    """Three evaluations by hand. After the warm-up each task's weight is set to w_text mean_text
    / mean_t (momentum 0, the authors' and the default), or moved halfway there (momentum 0.5)."""
    norm = LossNormalizer(["mult", "add", "text"], warmup_tokens=100, reference="text", momentum=momentum)
    norm.observe([4.0, 0.02, 30.0], [2, 2, 10])  # means 2, 0.01, 3
    close(norm.update(tokens_seen=50), [5, 1000, F(10, 3)])  # 10 / mean
    norm.observe([8.0, 0.01, 30.0], [2, 1, 10])
    close(norm.update(tokens_seen=120), [F(10, 4), 1000, F(10, 3)])  # first eval past warm-up: still 10 / mean
    assert norm.warm
    norm.observe([2.0, 0.0, 20.0], [1, 0, 10])  # means 2, unseen, 2
    # after warm-up, towards w_text * mean_text / mean_t = (10/3) * 2 / 2; an unseen task keeps its weight
    goal = F(10, 3)
    close(norm.update(tokens_seen=200), [F(10, 4) + (1 - F(momentum)) * (goal - F(10, 4)), 1000, F(10, 3)])
    assert LossNormalizer(["a"], 0).momentum == 0.0  # the default is the authors' rule
    copy = LossNormalizer(["mult", "add", "text"], warmup_tokens=100, reference="text")
    copy.load_state_dict(norm.state_dict())
    assert copy.weights.tolist() == norm.weights.tolist() and copy.warm
    off = LossNormalizer(["a"], warmup_tokens=0, enabled=False)
    off.observe([5.0], [1])
    assert off.update(10).tolist() == [1.0]
    with pytest.raises(ValueError, match="not finite"):
        norm.observe([float("inf"), 0, 0], [1, 1, 1])
    with pytest.raises(ValueError, match="reference"):
        LossNormalizer(["a"], 0, reference="text")


def test_the_cap_bounds_eq_16s_target_before_the_mix_or_the_mixed_ratios():
    """r_max = 0.3 over four tasks from uniform ratios, p = (0, 0.5, 0.9, 0.9), lambda = 0, alpha
    = 0.5; the target (1 - p) / sum is (10, 5, 1, 1) / 17. cap="target" (the authors'): the target
    is capped first (0.588 -> 0.3, its excess pushes 0.294 above 0.3 too: (0.3, 0.3, 0.2, 0.2)),
    then mixed with the uniform ratios: (0.275, 0.275, 0.225, 0.225). cap="ratios": mixed first,
    (0.419, 0.272, 0.154, 0.154), then capped: 0.3, and 0.7 split 0.272 : 0.154 : 0.154 puts the
    second at 0.328 > 0.3, so it is capped too: (0.3, 0.3, 0.2, 0.2)."""
    p, start = [0.0, 0.5, 0.9, 0.9], [F(1, 4)] * 4
    close(
        update_ratios(start, p, lam=0, alpha=0.5, max_ratio=0.3, cap="target"),
        [F(11, 40), F(11, 40), F(9, 40), F(9, 40)],
    )
    mixed = [(a + F(w, 17)) / 2 for a, w in zip(start, (10, 5, 1, 1))]
    assert mixed[1] / sum(mixed[1:]) * F(7, 10) > F(3, 10)  # the cascade
    close(
        update_ratios(start, p, lam=0, alpha=0.5, max_ratio=0.3, cap="ratios"), [F(3, 10), F(3, 10), F(1, 5), F(1, 5)]
    )
    with pytest.raises(ValueError, match="cap"):
        update_ratios(start, p, max_ratio=0.3, cap="mixed")


def test_weight_changes_mark_where_the_loss_weights_moved():
    import pandas as pd

    from workbench.training.balancing import weight_changes

    evals = pd.DataFrame(
        {
            "step": [50, 100, 150, 200],
            "loss_weight/addition": [4.0, 4.0, 4.02, 6.0],
            "loss_weight/minmax": [1.0, 1.0, 1.0, 1.0],
            "score/addition": [0.1, 0.2, 0.3, 0.4],
        }
    )
    # from 1 to 4 at step 50; 4 -> 4.02 is within 1 %; 4.02 -> 6 at step 200
    assert weight_changes(evals) == [50, 200]
    assert weight_changes(evals.assign(**{"loss_weight/addition": 1.0})) == []  # balancing off: never moved
    assert weight_changes(evals[["step", "score/addition"]]) == []  # a log without weights


def test_the_loss_reference_is_text_or_the_authors_last_task(tmp_path):
    """--loss-reference text matches every task to the text task and, without one, keeps the warm-up's
    weights; last (the authors' training/loss_and_task_weighting.py) matches to the last of --tasks."""
    from workbench.training.train import TrainConfig, setup
    from workbench.training.trainer import Trainer

    common = dict(preset="cpu-tiny", batch_size=2, tokens=1e4, pool_size=50, val_samples=4, test_samples=4, threads=1)
    for tasks_, rule, expected in (
        (("addition", "minmax"), "text", None),
        (("addition", "minmax"), "last", "minmax"),
        (("text", "addition"), "text", "text"),
        (("text", "addition"), "last", "addition"),
        (("addition",), "last", None),
    ):
        run = setup(
            TrainConfig.of(
                tasks=tasks_, loss_reference=rule, out=str(tmp_path / f"{rule}-{len(tasks_)}-{tasks_[0]}"), **common
            )
        )
        assert run.normalizer.reference == expected, (tasks_, rule)
        assert isinstance(run, Trainer)  # every member of the contract adapt.evaluate_and_adapt reads
