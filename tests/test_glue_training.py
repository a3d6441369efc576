"""The training loop's wiring: with `evaluate` replaced by a fixed stream of scores, a run logs the
scores, the ratios a TaskBalancer fed that stream computes, their harmonic mean (eq. 15), draws its
batches by those ratios, and moves the curriculum's frontier exactly as the stream says."""
import json
import statistics

import pandas as pd
import pytest

import workbench.train
from workbench.balancing import TaskBalancer
from workbench.train import TrainConfig, train

TASKS = ("addition", "multiplication")  # multiplication has a curriculum (A.3), addition not
# Per validation round: the score of every answer of each task. Multiplication's 1.0 beats any
# threshold of eq. 14 (at most zeta0 = 0.9), its 0.0 none: the frontier moves on exactly the 1.0s.
STREAM = [{"addition": 0.25, "multiplication": 0.0}, {"addition": 0.5, "multiplication": 1.0},
          {"addition": 0.75, "multiplication": 1.0}, {"addition": 0.125, "multiplication": 0.0},
          {"addition": 0.5, "multiplication": 1.0}]
RUN = dict(encoding="single_digit", tasks=TASKS, preset="cpu-tiny", batch_size=2, tokens=2 * 128 * len(STREAM),
           eval_every=1, checkpoint_every=100, pool_size=300, val_samples=64, test_samples=8,
           decades=(0, 2), max_digits=3, threads=1)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One training run with the stream as its evaluations; -> (metrics rows, frames, counts)."""
    calls, counts = [], []
    real_next_batch = workbench.train.next_batch

    def fake_evaluate(model, tok, frames, batch_size=64):
        """Every answer of task t gets STREAM[k][t]; exact is always False (not the score)."""
        k = len(calls)
        calls.append(frames)
        scores = STREAM[k] if k < len(STREAM) else {t: 0.5 for t in frames}
        return pd.concat([pd.DataFrame({"task": t, "prompt": f["prompt"].to_numpy(), "answer": f["answer"].to_numpy(),
                                        "prediction": "0", "score": scores[t], "exact": False,
                                        "input_tokens": 5, "output_tokens": 2}) for t, f in frames.items()],
                         ignore_index=True)

    def recording_next_batch(pools, task_counts, *args, **kwargs):
        counts.append(dict(task_counts))
        return real_next_batch(pools, task_counts, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench.train, "evaluate", fake_evaluate)
        mp.setattr(workbench.train, "next_batch", recording_next_batch)
        out = train(TrainConfig(**RUN, out=str(tmp_path_factory.mktemp("run"))))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r.get("eval")], calls, counts


def test_logged_scores_ratios_and_harmonic_mean_follow_the_stream(run):
    evals, calls, _ = run
    assert len(evals) == len(STREAM) and len(calls) == len(STREAM) + 1  # + the final test split
    balancer = TaskBalancer(TASKS)
    for row, scores in zip(evals, STREAM):
        expected = balancer.update(scores)
        assert {t: row[f"score/{t}"] for t in TASKS} == scores
        assert {t: row[f"ratio/{t}"] for t in TASKS} == expected  # exactly: the same floats
        eq15 = statistics.harmonic_mean([s + 1e-6 for s in scores.values()])  # eps of eq. 15
        assert row["harmonic_mean"] == pytest.approx(eq15, rel=1e-12)
    assert evals[-1]["ratio/multiplication"] != 0.5  # the stream moved the ratios


def test_batches_are_drawn_by_the_balancers_ratios(run):
    """Step s draws by the ratios after s evaluations (one per step): uniform first, then eq. 16."""
    _, _, counts = run
    assert len(counts) == len(STREAM)
    balancer = TaskBalancer(TASKS)
    for step, drawn in enumerate(counts):
        if step:
            balancer.update(STREAM[step - 1])
        assert drawn == balancer.task_counts(sum(drawn.values())), step
    assert counts[-1]["addition"] != counts[-1]["multiplication"]


def test_curriculum_frontier_advances_as_the_stream_says(run):
    evals, calls, _ = run
    frontier = [row["frontier/multiplication"] for row in evals]
    assert "frontier/addition" not in evals[0]
    start = frontier[0]  # no advance on the first round (score 0)
    assert start == round(0.1 * 34)  # C.3: round(0.1 * max difficulty); A.3: 2 x 17 digits
    levels = set(calls[0]["multiplication"]["difficulty_sd"])  # the frontier's level must be in the val set
    assert {start, start + 1, start + 2} <= levels
    assert frontier == [start, start + 1, start + 2, start + 2, start + 3]
