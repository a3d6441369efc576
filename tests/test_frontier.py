"""Frontier benchmark: prompts, answer parsing (fuzzed), scoring, the HTTP client against a stub
server, the benchmark export, and the audit of the released labels."""

import json
import logging
import os
import threading
from decimal import Decimal
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import tasks
from workbench.frontier import answers, client, official, prompts, scoring

OFFICIAL = Path(
    os.environ.get(official.ENV, Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "official_bittokens")
)
needs_official = pytest.mark.skipif(not OFFICIAL.is_dir(), reason="released BitTokens data not present")


# ---- prompts -------------------------------------------------------------------------------


def test_system_prompts_carry_the_paper_facts():
    for task in tasks.numeric():
        p = prompts.system_prompt(task)
        assert p.startswith("You are an expert in numeracy.")
        assert "DO NOT USE a calculator tool. DO NOT USE python. DO NOT USE Wolfram Alpha." in p
        assert "Do not use code blocks to output the answer." in p
    assert prompts.system_prompt("interval").endswith("The answer must be one of the following: A, B, C, D, E, F.")
    assert '{"answer": <sorted_list>}' in prompts.system_prompt("sorting")
    assert prompts.system_prompt("minmax").endswith("exactly as it appears in the list.")
    for task in ("addition", "division", "exponentiation", "std"):
        assert "rounded to at most 15 significant digits" in prompts.system_prompt(task)
        assert "Return exactly one valid JSON object" in prompts.system_prompt(task)
    with pytest.raises(ValueError, match="no frontier system prompt"):
        prompts.system_prompt("text")
    with pytest.raises(ValueError, match="unknown task"):
        prompts.system_prompt("nope")


def test_export_benchmark_is_deterministic_and_atomic(tmp_path):
    df = prompts.export_benchmark(tmp_path / "bench", n_per_task=4, seed=3)
    assert len(df) == 4 * len(tasks.numeric()) and df["id"].is_unique
    first = (tmp_path / "bench.jsonl").read_bytes()
    prompts.export_benchmark(tmp_path / "bench", n_per_task=4, seed=3)
    assert (tmp_path / "bench.jsonl").read_bytes() == first
    back = prompts.load_benchmark(tmp_path / "bench.jsonl")
    assert back["answer"].tolist() == df["answer"].tolist()
    assert pd.read_csv(tmp_path / "bench.csv", dtype={"answer": str})["id"].tolist() == df["id"].tolist()
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
    for row in back.itertuples():  # labels are the exact answers of the frontier-form questions
        assert tasks.solve(row.text_prompt) == row.answer
    test = tasks.generate("multiplication", 4, seed=3, split="test")
    assert df.loc[df.task == "multiplication", "difficulty_sd"].tolist() == test["difficulty_sd"].tolist()


# ---- answer parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, task, expected",
    [
        ('{"answer": 5.4e-8}', "mean", Decimal("5.4e-8")),
        ('{"answer": "5.4e-8"}', "mean", Decimal("5.4e-8")),
        ('```json\n{"answer": -12.5}\n```', "addition", Decimal("-12.5")),
        ('Let me think. 3 * 4 = 12.\n{"answer": 1234567.125}', "multiplication", Decimal("1234567.125")),
        ('{"answer": "1,234,567.5"}', "addition", Decimal("1234567.5")),
        ("The answer is 42.", "division", Decimal(42)),
        ("-0.000003", "std", Decimal("-0.000003")),
        ("5.4 × 10^-8", "exponentiation", Decimal("5.4e-8")),
        ('"answer": 7', "minmax", Decimal(7)),
        ('{"answer": 123456789012345678901}', "mean", Decimal("123456789012345678901")),
        ('{"answer": [3, 1.5, -2]}', "sorting", [Decimal(3), Decimal("1.5"), Decimal(-2)]),
        ("[0.000000000044, 0.000000000031]", "sorting", [Decimal("4.4e-11"), Decimal("3.1e-11")]),
        ('{"answer": "B"}', "interval", "B"),
        ("c", "interval", "C"),
        ("garbage", "addition", None),
        ('{"answer": NaN}', "addition", None),
        ('{"answer": "1,5"}', "addition", None),
        ('{"answer": [1, "x"]}', "sorting", None),
        ('{"answer": "AB"}', "interval", None),
        ("", "mean", None),
    ],
)
def test_parse_answer(text, task, expected):
    assert answers.parse_answer(text, task) == expected


def test_parse_keeps_all_digits():
    assert str(answers.parse_answer('{"answer": 0.12345678901234567}', "minmax")) == "0.12345678901234567"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.sampled_from(tasks.numeric()))
def test_parse_never_crashes(text, task):
    out = answers.parse_answer(text, task)
    assert out is None or isinstance(out, (Decimal, list, str))


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_parse_round_trips_any_float(x):
    assert answers.parse_answer(json.dumps({"answer": x}), "addition") == Decimal(repr(x))


# ---- scoring -------------------------------------------------------------------------------


def test_score_arithmetic_uses_log_smape_and_exact_match():
    s = scoring.score("division", '{"answer": 3.6}', "3.5")
    assert s["performance"] == pytest.approx(min(1, -np.log10(0.1 / 7.1) / 15)) and not s["exact"]
    assert scoring.score("addition", '{"answer": 1e-14}', "0.00000000000001")["exact"]
    assert scoring.score("mean", "no idea", "2") == {"parsed": None, "performance": 0.0, "exact": False}
    assert scoring.score("mean", '{"answer": 1e400}', "2")["performance"] == 0.0


def test_score_comparison_tasks():
    assert scoring.score("minmax", "0.50", "0.5")["exact"]
    assert not scoring.score("minmax", "0.12345678901234567", "0.12345678901234568")["exact"]
    assert scoring.score("sorting", '{"answer": [1, 2.5]}', "1, 2.5")["performance"] == 1.0
    assert not scoring.score("sorting", '{"answer": [1, 2.5]}', "1, 2.5, 3")["exact"]
    assert scoring.score("interval", "b", "B")["exact"] and not scoring.score("interval", "A", "B")["exact"]
    with pytest.raises(ValueError, match="reference answer"):
        scoring.score("addition", "1", "not a number")


def test_score_answers_file(tmp_path):
    bench = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "task": ["addition", "interval", "sorting"],
            "answer": ["3", "B", "1, 2"],
            "difficulty_sd": [1, 2, 3],
        }
    )
    rows = [
        {"id": "a", "model": "m", "response": '{"answer": 3}', "completion_tokens": 5},
        {"id": "b", "model": "m", "response": "A", "completion_tokens": 7},
        {"id": "c", "model": "m", "response": "???", "completion_tokens": 9},
    ]
    (tmp_path / "ans.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    per_sample, summary = scoring.score_answers(tmp_path / "ans.jsonl", bench)
    assert per_sample["performance"].tolist() == [1.0, 0.0, 0.0]
    assert summary.set_index("task").loc["sorting", "unparsed"] == 1
    assert summary["tokens"].tolist() == [5.0, 7.0, 9.0]
    with pytest.raises(ValueError, match="not in the benchmark"):
        scoring.score_answers(pd.DataFrame([{"id": "z", "response": "1"}]), bench)


# ---- client against a stub server ----------------------------------------------------------

KEY = "sk-test-SECRET-12345"


class _Stub(BaseHTTPRequestHandler):
    failures_left = 0
    seen = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(
            {
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "ctype": self.headers.get("Content-Type"),
                "body": body,
            }
        )
        if type(self).failures_left > 0:
            type(self).failures_left -= 1
            self.send_response(500)
            self.end_headers()
            self.wfile.write(f"upstream broke, your key was {KEY}".encode())
            return
        question = body["messages"][1]["content"]
        reply = {
            "choices": [{"message": {"role": "assistant", "content": json.dumps({"answer": tasks.solve(question)})}}],
            "usage": {"completion_tokens": 11},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub(monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Stub.seen, _Stub.failures_left = [], 0
    monkeypatch.setenv(client.BASE_URL_ENV, f"http://127.0.0.1:{server.server_port}/v1/")
    monkeypatch.setenv(client.API_KEY_ENV, KEY)
    yield _Stub
    server.shutdown()
    server.server_close()


def test_client_request_and_retry(stub, caplog):
    sleeps = []
    c = client.ChatClient("test-model", sleep=sleeps.append, backoff=0.5, temperature=0)
    assert KEY not in repr(c)
    stub.failures_left = 2
    with caplog.at_level(logging.DEBUG):
        content, usage = c.chat("sys", "What is 2 + 3?")
    assert json.loads(content) == {"answer": "5"} and usage["completion_tokens"] == 11
    assert sleeps == [0.5, 1.0] and len(stub.seen) == 3
    req = stub.seen[-1]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == f"Bearer {KEY}"
    assert req["ctype"] == "application/json"
    assert req["body"] == {
        "model": "test-model",
        "temperature": 0,
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "What is 2 + 3?"}],
    }
    assert "HTTP 500" in caplog.text and KEY not in caplog.text


def test_client_gives_up_without_leaking_the_key(stub, caplog):
    c = client.ChatClient("m", sleep=lambda s: None, max_retries=1)
    stub.failures_left = 5
    with caplog.at_level(logging.DEBUG), pytest.raises(client.LLMError) as err:
        c.chat("s", "What is 1 + 1?")
    assert "HTTP 500" in str(err.value) and KEY not in str(err.value) and "***" in str(err.value)
    assert KEY not in caplog.text and len(stub.seen) == 2


def test_client_needs_the_environment(monkeypatch):
    monkeypatch.delenv(client.BASE_URL_ENV, raising=False)
    with pytest.raises(ValueError, match=client.BASE_URL_ENV):
        client.ChatClient("m")


def test_run_benchmark_resumes(stub, tmp_path):
    prompts.export_benchmark(tmp_path / "bench", n_per_task=2, seed=1, task_list=["addition", "sorting", "interval"])
    c = client.ChatClient("m", sleep=lambda s: None)
    out = tmp_path / "answers.jsonl"
    assert client.run_benchmark(c, tmp_path / "bench.jsonl", out, limit=1).answered == 3
    with open(out, "a") as f:
        f.write('{"id": "torn')  # a crash in the middle of a write
    assert client.run_benchmark(c, tmp_path / "bench.jsonl", out).answered == 3
    assert client.run_benchmark(c, tmp_path / "bench.jsonl", out).answered == 0
    assert len(stub.seen) == 6
    assert stub.seen[0]["body"]["messages"][0]["content"] == prompts.system_prompt("addition")
    per_sample, summary = scoring.score_answers(out, tmp_path / "bench.jsonl")
    assert len(per_sample) == 6 and per_sample["exact"].all()  # the stub answers exactly


# ---- released data: loaders and label audit -------------------------------------------------


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="released BitTokens data not found"):
        official.load_samples(tmp_path / "nope")


def test_first_differing_digit():
    assert official.first_differing_digit(Decimal("1.2345"), Decimal("1.2346")) == 5
    assert official.first_differing_digit(Decimal("0.0039999"), Decimal("0.004")) == 1
    assert official.first_differing_digit(Decimal("-2"), Decimal("2")) == 1
    assert official.first_differing_digit(Decimal("5.10"), Decimal("5.1")) == 0


@needs_official
def test_loaders():
    t = official.load_test_set("exponentiation")
    assert len(t) == 500 and t["answer"].map(type).eq(str).all()
    s = official.load_samples()
    assert len(s) == 13 * 9 * 500 and s["task"].isin(tasks.numeric()).all()
    assert set(zip(s["paper_model"], s["paper_reasoning"])) == set(official.MODELS.values())


def _mean_oracle(prompt):
    items = prompt.split("[")[1].split("]")[0].split(",")
    return sum((Fraction(Decimal(x.strip())) for x in items), Fraction(0)) / len(items)


@needs_official
def test_label_audit():
    summary = official.audit_summary().set_index("task")
    for task in ("minmax", "sorting", "interval"):  # comparison labels are all right
        assert summary.loc[task, "differ"] == 0
    for task in ("addition", "multiplication", "division"):  # single-step: only float noise in the 15th digit
        assert summary.loc[task, "wrong"] == 0 and summary.loc[task, "differ"] == summary.loc[task, "only_digit_15"]
    assert summary.loc["std", "wrong"] > 100  # std labels suffer float64 cancellation
    # our side of the disagreement, checked with an independent exact oracle for the mean
    audit = official.audit_labels("mean")
    for row in audit[~audit["agrees"]].itertuples():
        exact = _mean_oracle(row.text_prompt)
        assert abs(Fraction(Decimal(row.recomputed)) - exact) <= abs(exact) * Fraction(1, 10**14)
        assert abs(Fraction(Decimal(row.released)) - exact) > 0 or exact == 0
    # exponent +-1 questions whose released labels belong to another exponent
    exp = official.audit_labels("exponentiation").set_index("text_prompt")
    assert exp.loc["What is 2.88302 ^ 1?", "released"] == "39671.3109166273"
    assert exp.loc["What is 2.88302 ^ 1?", "recomputed"] == "2.88302"
