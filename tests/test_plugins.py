"""An encoding and a task defined here, in the test file, registered and nothing else: the
scorecard, the tokenizer, training from the CLI, experiments and scoring take them as they are."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import workbench.training.train as train_module
from workbench import encoders, experiments, tasks
from workbench.encoders.base import NumberEncoding, NumberHead, as_float64
from workbench.measures import desiderata, scorecard
from workbench.runs.logs import load_metrics
from workbench.tasks.arithmetic import score_numbers
from workbench.tasks.base import Task
from workbench.tasks.exact import fmt_all
from workbench.tasks.sampling import numbers, question_hash
from workbench.training.train import main


class Raw(NumberEncoding):
    """A toy single-token encoding: the float64 value itself, one dimension."""

    name = "raw"

    @property
    def width(self):
        return 1

    def encode(self, x):
        return as_float64(x)[:, None]

    def decode(self, encoding):
        return encoding.detach().double()[:, 0]

    def number_head(self, d_model):
        return RawHead(self, d_model)


class RawHead(NumberHead):
    def __init__(self, encoding, d_model):
        super().__init__(encoding, d_model)
        self.output = nn.Linear(d_model, 1)

    def embed(self, num_embedding, x):
        return num_embedding + torch.tanh(self.encoding.encode(x)).to(num_embedding)

    def forward(self, hidden):
        return self.output(hidden)[..., 0]

    def loss(self, out, target):
        return (out.float() - as_float64(target).to(out.device).float()).square()

    def predict(self, out):
        return out.detach().double().cpu()

    def target_vector(self, x):
        return self.encoding.encode(x)

    def output_of(self, vector):
        return vector[:, 0].float()


def draw_negation(rng, m, regime):
    M, e = numbers(
        rng,
        np.clip(rng.integers(*regime.decades, m, endpoint=True), -14, 14),
        rng.integers(1, regime.max_digits + 1, m),
    )
    return {"M": M, "e": e, "valid": np.ones(m, bool), "key": question_hash(M, e)}


def build_negation(c, limit):
    c = {k: v[:limit] for k, v in c.items()}
    x, minus_x = fmt_all(c["M"], c["e"]), fmt_all(-c["M"], c["e"])
    n = len(x)
    return pd.DataFrame(
        {
            "prompt": [f"<|neg|>{v}" for v in x],
            "text_prompt": [f"What is -({v})?" for v in x],
            "answer": minus_x,
            "difficulty": np.zeros(n, np.int64),
            "difficulty_sd": np.zeros(n, np.int64),
        }
    )


NEGATION = Task(
    name="negation",
    family="single_step",
    label="Neg",
    answer="number",
    metric="log_smape",
    draw=draw_negation,
    build=build_negation,
    max_difficulty=lambda base: 0,
    score=score_numbers,
    markers=("<|neg|>",),
    system_prompt="Negate the number.",
)


@pytest.fixture
def plugins():
    with encoders.registered(Raw), tasks.registered(NEGATION):
        yield


def test_the_plugins_are_registered_only_inside_the_fixture(plugins):
    assert "raw" in encoders.names() and "negation" in tasks.names()
    frame = tasks.generate("negation", 50, seed=1, split="test", decades=(0, 2), max_digits=3)
    assert [float(a) for a in frame.answer] == [-float(p.split("|>")[1]) for p in frame.prompt]
    assert tasks.get("negation").score(["-1.5", "2"], ["-1.5", "-2"])["exact"].tolist() == [True, False]


def test_registration_is_undone_after_the_block():
    assert "raw" not in encoders.names() and "negation" not in tasks.names()


def test_scorecard_for_free(plugins):
    m = scorecard.measure_all(n_values=100, d9_steps=3, progress=False)
    card = scorecard.scorecard(m)
    raw = card[card.encoding == "raw"].set_index("desideratum")
    assert list(raw.index) == list(desiderata.DESIDERATA)
    assert raw.loc["D1", "value"] == pytest.approx(1.0, abs=0.05)  # one <|num|> per signed number
    assert raw.loc["D2", "verdict"] == "pass"  # float64 in, the same float64 out
    assert (raw["paper"] == "—").all()  # the paper never judged it


def test_training_run_for_free_from_the_cli(plugins, tmp_path, capsys):
    out = tmp_path / "run"
    main(
        [
            "--encoding",
            "raw",
            "--tasks",
            "negation,addition",
            "--preset",
            "cpu-tiny",
            "--batch-size",
            "2",
            "--tokens",
            str(2 * 128 * 20),
            "--pool-size",
            "200",
            "--val-samples",
            "8",
            "--test-samples",
            "8",
            "--eval-every",
            "10",
            "--checkpoint-every",
            "10",
            "--decades",
            "0",
            "2",
            "--max-digits",
            "3",
            "--threads",
            "1",
            "--out",
            str(out),
        ]
    )
    steps, evals = load_metrics(out)
    assert len(steps) == 20 and np.isfinite(steps["number"]).all() and (steps["number"] > 0).all()
    assert list(evals["step"]) == [10, 20] and {"score/negation", "ratio/negation"} <= set(evals.columns)
    summary = pd.read_csv(out / "test_summary.csv")
    assert set(summary.task) == {"negation", "addition"} and (summary.encoding == "raw").all()
    assert json.loads((out / "config.json").read_text())["encoding"] == "raw"
    assert "run directory" in capsys.readouterr().out


def test_experiments_accept_a_new_encoding(plugins, tmp_path, monkeypatch):
    calls = []

    def fake_train(cfg, resume=False):
        calls.append(cfg.encoding)
        run = tmp_path / f"{cfg.encoding}-seed{cfg.seed}"
        run.mkdir()
        pd.DataFrame(
            {
                "task": ["addition"],
                "score": [0.5],
                "exact": [0.25],
                "input_tokens": [6.0],
                "output_tokens": [2.0],
                "encoding": [cfg.encoding],
                "seed": [cfg.seed],
                "train_seconds": [1.0],
            }
        ).to_csv(run / "test_summary.csv", index=False)
        return run

    monkeypatch.setattr(train_module, "train", fake_train)
    table = experiments.run_protocol("cpu-tier", seeds=(0,), out=tmp_path, encodings=["raw"])
    assert calls == ["raw"] and set(table.encoding) == {"raw"}
