"""NumeroLogic, the encoding added as one file: its pieces, exact round trips (struct as the
oracle), the tokenizer, the scorecard, a CLI training run and the experiments runner."""

import math
import random
import struct

import pandas as pd
import pytest
import torch

from workbench import encoders, experiments
from workbench.measures import desiderata, scorecard
from workbench.numbers import render
from workbench.runs.logs import load_metrics
from workbench.tokenizer import Tokenizer
from workbench.training.train import main


def test_digits_are_prefixed_by_their_count():
    codec = encoders.get("numerologic")
    assert not codec.single_token and codec.number_head(256) is None
    assert codec.number_tokens("-1234.56") == ["-", "<4>", "1", "2", "3", "4", ".", "<.2>", "5", "6"]
    assert codec.number_tokens("7") == ["<1>", "7"]
    assert codec.number_tokens(".5") == ["<0>", ".", "<.1>", "5"]
    assert codec.number_tokens("1" * 30)[0] == "<21+>"
    assert codec.number_text(codec.number_tokens("-1234.56")) == "-1234.56"
    assert codec.number_text(["<9>", "4", "2"]) == "42"  # a wrong count never changes the value
    assert len(codec.vocabulary()) == len(set(codec.vocabulary())) == 12 + 22 + 21
    for bad in ("1e5", "1.", "", "+1"):
        with pytest.raises(ValueError):
            codec.number_tokens(bad)


def test_round_trip_is_bit_exact():
    codec = encoders.get("numerologic")
    rng = random.Random(0)
    xs = [struct.unpack(">d", struct.pack(">Q", rng.getrandbits(64)))[0] for _ in range(300)]
    xs = [x for x in xs if math.isfinite(x)] + [0.0, -0.0, 1e-300, 123.456, -7.0]
    back = codec.decode(codec.encode(torch.tensor(xs, dtype=torch.float64)))
    assert [struct.pack(">d", v) for v in back.tolist()] == [struct.pack(">d", v) for v in xs]


def test_tokenizer_writes_and_reads_the_counts(tmp_path):
    tok = Tokenizer("numerologic", cache_dir=tmp_path)
    text = "<|bos|>-12.5 * 3<|eoq|>-37.5<|eos|>"
    ids, _ = tok.encode(text)
    pieces = [tok.tokens[i] for i in ids if len(tok.special_tokens) <= i < tok.offset]
    assert pieces == ["-", "<2>", "1", "2", ".", "<.1>", "5", "<1>", "3", "-", "<2>", "3", "7", ".", "<.1>", "5"]
    assert tok.decode(ids) == text
    assert render(float(tok.decode(ids[-8:-1])), 17) == "-37.5"


def test_scorecard_cli_training_and_experiments(tmp_path):
    card = scorecard.scorecard(scorecard.measure_all(n_values=100, d9_steps=3, progress=False))
    rows = card[card.encoding == "numerologic"].set_index("desideratum")
    assert list(rows.index) == list(desiderata.DESIDERATA)
    assert rows.loc["D1", "value"] > 2 and rows.loc["D1", "verdict"] == "fail"  # digits + count tokens
    assert rows.loc["D2", "verdict"] == "pass"
    out = tmp_path / "run"
    main(
        [
            "--encoding",
            "numerologic",
            "--tasks",
            "addition",
            "--preset",
            "cpu-tiny",
            "--batch-size",
            "2",
            "--tokens",
            str(2 * 128 * 6),
            "--pool-size",
            "200",
            "--val-samples",
            "8",
            "--test-samples",
            "8",
            "--eval-every",
            "6",
            "--decades",
            "0",
            "1",
            "--max-digits",
            "2",
            "--threads",
            "1",
            "--out",
            str(out),
        ]
    )
    steps, _ = load_metrics(out)
    assert len(steps) == 6 and steps["loss"].iloc[-1] < steps["loss"].iloc[0]
    assert pd.read_csv(out / "test_summary.csv").encoding.tolist() == ["numerologic"]
    parser_choices = experiments.encoders.names()
    assert "numerologic" in parser_choices
