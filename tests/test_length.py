"""The zoo's length axis (docs/study/zoo2.md): its registered runs, questions of exactly L digits
with their exact sums, a finished run scored at every length once, and the verdicts against
single digit."""

import re
import shutil
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from workbench import experiments, study
from workbench.config import OptimConfig
from workbench.study import length, parts
from workbench.study.run import write_results
from workbench.tokenizer import Tokenizer
from workbench.training.data import build_pool
from workbench.training.train import train

QUESTION = re.compile(r"^(-?\d+) ([+-]) (-?\d+)$")


def test_the_registered_runs():
    runs = study.plan([study.ZOO2_LENGTH])
    assert sorted((r.encoding, r.seed) for r in runs) == sorted(
        (e, s) for e in ("abacus", "position_coupling", "reversed_digits", "single_digit") for s in (0, 1)
    )
    for r in runs:
        cfg = r.config
        assert r.task == "addition" and cfg.tasks == ("addition",) and cfg.tokens == 1e6 and r.digits == 4
        assert cfg.data.decades == (0, 3) and cfg.data.max_digits == 4 and cfg.encoding == r.encoding
        assert cfg.updated(tasks=("multiplication",), decades=(0, 1), max_digits=1) == study.PRECISION.updated(
            encoding=r.encoding, seed=r.seed, max_digits=1
        )  # Study 1's recipe and model otherwise
    assert length.LENGTHS == (4, 5, 6, 7, 8)


@pytest.mark.parametrize("digits", [4, 5, 8])
def test_questions_add_integers_of_exactly_l_digits(digits):
    questions = length.length_questions(digits, seed=1, n=300)
    assert len(questions) == 300
    for prompt, answer in zip(questions.prompt, questions.answer):
        a, op, b = QUESTION.match(prompt).groups()
        assert len(a.lstrip("-")) == digits and len(b.lstrip("-")) == digits
        assert Fraction(answer) == Fraction(int(a) + (int(b) if op == "+" else -int(b)))
    again = length.length_questions(digits, seed=1, n=300)
    other = length.length_questions(digits, seed=0, n=300)
    assert questions.prompt.tolist() == again.prompt.tolist() != other.prompt.tolist()


def test_questions_at_the_training_length_are_none_the_run_trained_on():
    run = next(r for r in study.plan([study.ZOO2_LENGTH]) if r.seed == 0)
    pool = build_pool("addition", run.config.data.pool_size, Tokenizer("single_digit"), 0, "train", run.config.regime)
    asked = set(length.length_questions(4, seed=0).prompt)
    assert len(asked) > 400 and not asked & set(pool.frame.prompt)


@pytest.fixture
def tiny_plan(monkeypatch):
    """The axis's runs of seed 0 for abacus and single digit, at a few steps (the plan's own configs)."""
    base = study.PRECISION.updated(
        batch_size=2, tokens=2 * 128 * 4, pool_size=100, val_samples=4, test_samples=4, eval_every=2,
        checkpoint_every=2, optim=OptimConfig(newton_schulz="float32"),
    )  # fmt: skip
    monkeypatch.setattr(parts, "PRECISION", base)
    return [r for r in study.plan([study.ZOO2_LENGTH]) if r.seed == 0 and r.encoding in ("abacus", "single_digit")]


def test_finished_runs_answer_every_length_once_and_the_command_line_prints_the_cells(tmp_path, capsys, tiny_plan):
    names = [r.name for r in tiny_plan]
    for r in tiny_plan:
        train(r.config.updated(out=str(tmp_path / r.name)))
    table = length.length_scores(tmp_path, lengths=(4, 6), n=5)
    assert len(table) == 2 * 2 * 5 and set(table.run) == set(names) and set(table.length) == {4, 6}
    assert {"study", "encoding", "digits", "seed", "prompt", "answer", "prediction", "score", "exact"} <= set(table)
    assert table.score.between(0, 1).all()
    for n_digits, cell in table.groupby("length"):  # paired: both encodings answered the same questions
        by_run = [g.prompt.tolist() for _, g in cell.groupby("run")]
        assert by_run[0] == by_run[1] == length.length_questions(n_digits, 0, 5).prompt.tolist()
    written = (tmp_path / length.LENGTH_FILE).read_text()
    assert len(pd.read_csv(tmp_path / length.LENGTH_FILE)) == 20
    # scored runs are not scored again; other lengths or another n are refused, naming the file
    assert len(length.length_scores(tmp_path, lengths=(4, 6), n=5)) == 20
    assert (tmp_path / length.LENGTH_FILE).read_text() == written
    for lengths, n in (((4, 5), 5), ((4, 6), 6)):
        with pytest.raises(ValueError, match="cpu-study-length.csv holds lengths"):
            length.length_scores(tmp_path, lengths=lengths, n=n)
    # a run finished later is scored and appended
    shutil.copytree(tmp_path / names[1], tmp_path / names[1].replace("seed0", "seed1"))
    later = length.length_scores(tmp_path, lengths=(4, 6), n=5)
    assert len(later) == 30
    seed1 = later[(later.seed == 1) & (later.length == 6)].prompt.tolist()
    assert seed1 == length.length_questions(6, 1, 5).prompt.tolist()  # each run its own seed's questions
    assert (tmp_path / length.LENGTH_FILE).read_text().startswith(written)

    fresh = tmp_path / "fresh"
    for name in names:
        shutil.copytree(tmp_path / name, fresh / name)
    experiments.main(["study", "--out", str(fresh), "--score-length", "--seeds", "0"])
    printed = capsys.readouterr().out
    assert "longer numbers than trained on" in printed and "against single_digit" in printed
    assert set(pd.read_csv(fresh / length.LENGTH_FILE).length) == set(length.LENGTHS)
    with pytest.raises(SystemExit):
        experiments.main(["study", "--out", str(fresh), "--score-length", "--studies", "budget"])

    # published: the cells appended to results/, the answers kept beside the runs, the figure drawn
    write_results(fresh)
    into = tmp_path / "results"
    added = study.publish(fresh, [study.ZOO2_LENGTH], seeds=1, into=into)
    assert added[length.LENGTH_CELLS_FILE] == 2 * len(length.LENGTHS) * 2 and added["runs"] == 2
    cells = pd.read_csv(into / length.LENGTH_CELLS_FILE)
    answers = pd.read_csv(fresh / length.LENGTH_FILE)
    one = answers[(answers.encoding == "abacus") & (answers.length == 7)]
    row = cells[(cells.encoding == "abacus") & (cells.length == 7) & (cells.metric == "exact_match")].iloc[0]
    assert row["mean"] == pytest.approx(one.exact.mean()) and row.runs == 1 and row.answers == 500
    kept = pd.read_csv(into / "runs" / study.ZOO2_LENGTH / "length-answers.csv.gz")
    assert len(kept) == len(answers) and kept.prediction.equals(answers.prediction)
    again = study.publish(fresh, [study.ZOO2_LENGTH], seeds=1, into=into)
    assert again[length.LENGTH_CELLS_FILE] == 0 and again["runs"] == 0
    fig = length.figure(cells)
    assert len(fig.data) == 2 * 2 and "length axis" in fig.layout.title.text
    assert fig.layout.xaxis.title.text.startswith("operand length L (digits")


def test_cells_and_verdicts_against_single_digit():
    rng = np.random.default_rng(0)
    rows = []
    for encoding, level in (("abacus", 0.9), ("reversed_digits", 0.31), ("single_digit", 0.3)):
        for seed in (0, 1):
            for n_digits in (4, 5):
                score = np.clip(level + rng.normal(0, 0.01, 200), 0, 1)
                rows.append(
                    pd.DataFrame(
                        dict(
                            run=f"{encoding}-{seed}", study="zoo2_length", encoding=encoding, task="addition", digits=4
                        )
                        | dict(length=n_digits, score=score, exact=score > 0.5)
                    )
                )
    cells = length.length_cells(pd.concat(rows), draws=200)
    assert len(cells) == 3 * 2 * 2 and (cells.runs == 2).all() and (cells.answers == 400).all()
    row = cells[(cells.encoding == "abacus") & (cells.length == 5) & (cells.metric == "log_smape")].iloc[0]
    assert row["low"] <= row["mean"] <= row["high"] and abs(row["mean"] - 0.9) < 0.01
    verdicts = length.against_control(cells).set_index(["encoding", "length", "metric"]).ahead
    assert (verdicts.loc["abacus"] == "abacus").all()  # intervals apart and 0.6 > δ apart
    assert verdicts.loc[("reversed_digits", 4, "log_smape")] != "reversed_digits"  # 0.01 is no difference
    with pytest.raises(ValueError, match="no encoding beside"):
        length.against_control(cells[cells.encoding == "single_digit"])
