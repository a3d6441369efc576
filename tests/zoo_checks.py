"""Checks every encoding of the zoo runs in its test file (not a test file itself).

`tiny_training(name, tmp_path, options, oracle)` trains the encoding through the command line for
a few hundred tokens (seconds), then checks that the numbers it writes mean what they should:
  - the answer tokens of every test question decode (tokenizer) to the answer's value, and, for a
    digit encoding, they are the pieces the test file's own `oracle(text)` gives;
  - the trained model's generated answers, as the evaluation reads them, are the text of the
    tokens it wrote (decoded piece by piece with `oracle_value`, where the tokens form a number).
It also runs the experiments runner and the study's plan by name.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import torch

import workbench.training.train as train_module
from workbench import encoders, experiments, tasks
from workbench.measures.evaluate import answer
from workbench.model.gpt import GPT
from workbench.numbers import parse
from workbench.runs.checkpoints import load_checkpoint
from workbench.runs.logs import load_metrics
from workbench.tokenizer import Tokenizer
from workbench.training.train import TrainConfig, main

STEPS = 30


def tiny_training(name: str, tmp_path, options: dict | None = None, pieces_of=None, value_of=None):
    """Train `name` with `options` from the CLI; check its answers and generations. pieces_of(text):
    the oracle's pieces of a number's text (digit encodings); value_of(pieces): the oracle's value
    of one number's pieces, None where they do not form one. Returns the number of generated
    numbers the oracle could read (the rest were not well-formed numbers)."""
    options = options or {}
    out = tmp_path / name
    flags = [f for k, v in options.items() for f in ("--encoding-option", f"{k}={json.dumps(v)}")]
    main(
        [
            "--encoding",
            name,
            *flags,
            "--tasks",
            "addition",
            "--preset",
            "cpu-tiny",
            "--batch-size",
            "2",
            "--tokens",
            str(2 * 128 * STEPS),
            "--pool-size",
            "200",
            "--val-samples",
            "8",
            "--test-samples",
            "16",
            "--eval-every",
            str(STEPS),
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
    steps, evals = load_metrics(out)
    assert len(steps) == STEPS and np.isfinite(steps["loss"]).all() and len(evals) == 1
    assert pd.read_csv(out / "test_summary.csv").encoding.tolist() == [name]
    codec = encoders.get(name, **options)
    tok = Tokenizer(codec)
    frame = tasks.generate("addition", 40, seed=3, split="test", decades=(-2, 3), max_digits=4)
    _answers_decode(tok, frame["answer"], pieces_of)
    model = GPT(
        TrainConfig.of(encoding=name, encoding_options=options).model_config(),
        codec,
        tok.vocab_size,
        tok.num_id,
        tok.piece_ids,
    )
    model.load_state_dict(load_checkpoint(out / "best.pt"))
    return _generations_decode(model, tok, list(frame["prompt"][:16]), value_of)


def _answers_decode(tok: Tokenizer, answers, pieces_of) -> None:
    for text in answers:
        ids, values = tok.encode(text)
        assert float(tok.decode(ids, values)) == float(text), text
        if pieces_of is not None:
            assert [tok.tokens[i] for i in ids] == pieces_of(text), text


def _generations_decode(model: GPT, tok: Tokenizer, prompts: list[str], value_of) -> int:
    """The evaluation's text of each generated answer against the oracle's reading of its tokens."""
    texts, _, _ = answer(model, tok, prompts, 12)
    encoded = [tok.encode(f"<|bos|>{p}<|eoq|>") for p in prompts]
    generated = model.generate(encoded, 12, tok.eos_id, tok.pad_id)
    read = 0
    for text, (ids, values) in zip(texts, generated):
        if ids and ids[-1] == tok.eos_id:
            ids, values = ids[:-1], values[:-1]
        assert text == tok.decode(ids, values)
        if tok.encoding.single_token:
            if ids and all(i == tok.num_id for i in ids) and len(ids) == 1:
                assert math.isclose(float(text), values[0], rel_tol=1e-15)
                read += 1
            continue
        if ids and all(len(tok.special_tokens) <= i < tok.offset for i in ids):
            meant = value_of([tok.tokens[i] for i in ids])
            if meant is not None:
                assert parse(text)[1] == [meant], (text, meant)
                read += 1
    return read


def runs_by_name(name: str, tmp_path, monkeypatch) -> None:
    """The experiments runner and the study's zoo-free plan take the encoding by name."""
    calls = []

    def fake_train(cfg, resume=False):
        calls.append(cfg.encoding)
        run = tmp_path / f"{cfg.encoding}-seed{cfg.seed}"
        run.mkdir(exist_ok=True)
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
    table = experiments.run_protocol("cpu-tier", seeds=(0,), out=tmp_path, encodings=[name])
    assert calls == [name] and set(table.encoding) == {name}


def bad_options(name: str) -> None:
    """An option the encoding does not have is a clear error naming the encoding."""
    try:
        encoders.get(name, no_such_option=1)
    except ValueError as err:
        assert name in str(err) and "no_such_option" in str(err)
    else:
        raise AssertionError(f"{name} accepted an option it does not have")


def refuses(codec, value, *words) -> None:
    """encode(value) raises a ValueError naming the encoding, the value and `words`."""
    try:
        codec.encode(torch.tensor([value], dtype=torch.float64))
    except ValueError as err:
        message = str(err)
        assert codec.name in message and all(w in message for w in words), message
    else:
        raise AssertionError(f"{codec.name} encoded {value!r} without an error")
