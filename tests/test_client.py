"""The frontier client trusts nothing that comes back. It never sends the key anywhere but the
configured endpoint and never shows it (redirects refused: two local servers on 127.0.0.1 = two
hosts; whitespace around the key stripped; no error, log line or repr holds the key). Every reply
shape that is not an answer (null content, a number, a refusal, a malformed part, invalid UTF-8, a
lone surrogate, JSON too deep, bad usage) is the client's own error, recorded as a failed question
that a rerun asks again; Retry-After of any form gives a bounded wait; one deadline bounds a whole
request; a size cap bounds the body; one runner per answers file; repeated answers are dropped on
load. Loopback only; every wait is bounded."""

import email.utils
import json
import logging
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest
from loopback import Server

from workbench.frontier import answer_folders, client, prompts, scoring
from workbench.runs.locks import InUse

KEY = "sk-test-SECRET-67890"
REPLY = {"choices": [{"message": {"role": "assistant", "content": "42"}}], "usage": {"completion_tokens": 1}}


@pytest.fixture
def servers(monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    started = []

    def start(respond):
        started.append(Server(respond))
        return started[-1]

    yield start
    for server in started:
        server.close()


def answer(path):
    return 200, {"Content-Type": "application/json"}, json.dumps(REPLY).encode()


def make_client(monkeypatch, url, key=KEY, **kwargs):
    monkeypatch.setenv(client.BASE_URL_ENV, url + "/v1")
    monkeypatch.setenv(client.API_KEY_ENV, key)
    return client.ChatClient("m", **{"timeout": 5, "max_retries": 0, "sleep": lambda s: None, **kwargs})


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_host_is_refused_and_the_key_stays_home(servers, monkeypatch, caplog, code):
    elsewhere = servers(answer)
    home = servers(lambda path: (code, {"Location": elsewhere.url + "/v1/chat/completions"}, b""))
    c = make_client(monkeypatch, home.url)
    with caplog.at_level(logging.DEBUG), pytest.raises(client.LLMError) as error:
        c.chat("s", "u")
    message = str(error.value)
    assert f"HTTP {code}" in message and "not followed" in message and elsewhere.url in message
    assert client.BASE_URL_ENV in message and KEY not in message and KEY not in caplog.text
    assert elsewhere.seen == []  # nothing reached the other host: no key, no reply taken
    assert home.seen == [{"method": "POST", "path": "/v1/chat/completions", "auth": f"Bearer {KEY}"}]


def test_a_redirect_on_the_same_host_is_refused_too(servers, monkeypatch):
    home = servers(
        lambda path: (302, {"Location": "/v2/chat/completions"}, b"") if path.startswith("/v1") else answer(path)
    )
    c = make_client(monkeypatch, home.url)
    with pytest.raises(client.LLMError, match="redirects to .*/v2/chat/completions"):
        c.chat("s", "u")
    assert [r["path"] for r in home.seen] == ["/v1/chat/completions"]  # POST would have become a GET


@pytest.mark.parametrize("raw", [KEY + "\r", KEY + "\r\n", " " + KEY + "\n", "\t" + KEY])
def test_whitespace_around_the_key_is_stripped(servers, monkeypatch, raw):
    home = servers(answer)
    c = make_client(monkeypatch, home.url, key=raw)
    assert c.chat("s", "u") == ("42", {"completion_tokens": 1})
    assert home.seen[-1]["auth"] == f"Bearer {KEY}"


@pytest.mark.parametrize("raw", ["sk-te st", "sk-\rtest", "sk-tést", "sk-\x7f"])
def test_a_key_that_cannot_be_a_header_is_refused_without_showing_it(monkeypatch, raw):
    monkeypatch.setenv(client.BASE_URL_ENV, "http://127.0.0.1:9/v1")
    monkeypatch.setenv(client.API_KEY_ENV, raw)
    with pytest.raises(ValueError, match=client.API_KEY_ENV) as error:
        client.ChatClient("m")
    assert raw not in str(error.value) and raw.strip() not in str(error.value)


def test_no_error_log_or_repr_holds_the_key(servers, monkeypatch, caplog):
    echo = servers(lambda path: (500, {}, f"your key {KEY} was wrong".encode()))
    garbage = servers(lambda path: (200, {}, f"<html>{KEY}</html>".encode()))
    bounce = servers(lambda path: (302, {"Location": f"http://127.0.0.1:9/?key={KEY}"}, b""))
    closed = Server(answer)
    closed.close()  # a port nobody listens on any more
    with caplog.at_level(logging.DEBUG):
        for server in (echo, garbage, bounce, closed):
            c = make_client(monkeypatch, server.url, key=KEY + "\r\n")
            with pytest.raises(client.LLMError) as error:
                c.chat("s", "u")
            assert KEY not in str(error.value) and KEY not in repr(error.value) and KEY not in repr(c)
            assert ("***" in str(error.value)) == (server is not closed)  # the key was there, scrubbed
        c = make_client(monkeypatch, echo.url, max_retries=2)
        with pytest.raises(client.LLMError):
            c.chat("s", "u")
    assert "HTTP 500" in caplog.text and KEY not in caplog.text


# ---- reply shapes: an answer, or the client's own error (never an empty answer) ---------------


def completion(message, **extra):
    return json.dumps({"choices": [{"message": {"role": "assistant", **message}}], **extra}).encode()


def replying(body, status=200):
    return lambda path: (status, {"Content-Type": "application/json"}, body)


@pytest.mark.parametrize(
    "message, text",
    [
        ({"content": "42"}, "42"),
        ({"content": ""}, ""),  # a string is the model's answer, even an empty one
        ({"content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}]}, "42"),
        (
            {
                "content": [
                    {"type": "thinking", "thinking": [{"type": "text", "text": "7?"}]},
                    {"type": "text", "text": "42"},
                ]
            },
            "42",
        ),  # reasoning parts are not the answer
        ({"content": "é数 \u2028"}, "é数 \u2028"),
    ],
)
def test_content_a_string_or_text_parts_joined(servers, monkeypatch, message, text):
    c = make_client(monkeypatch, servers(replying(completion(message))).url)
    assert c.chat("s", "u") == (text, {})


@pytest.mark.parametrize(
    "message, says",
    [
        ({"content": None}, "content is null"),
        ({}, "content is null"),
        ({"content": 42}, "content is a number"),
        ({"content": 4.2}, "content is a number"),
        ({"content": True}, "content is a boolean"),
        ({"content": {"text": "42"}}, "content is an object"),
        ({"content": None, "refusal": "I cannot help with that"}, "the model refused: I cannot help"),
        ({"content": []}, "without a text part"),
        ({"content": [{"type": "thinking", "thinking": "hm"}]}, "without a text part"),
        ({"content": [{"type": "refusal", "refusal": "no"}]}, "the model refused: no"),
        ({"content": [{"type": "text"}]}, "part 0 is an object without a type and text"),
        ({"content": [{"type": "text", "text": 42}]}, "part 0"),
        ({"content": [{"type": "text", "text": "4"}, "2"]}, "part 1 is a string"),
        ({"content": [{"text": "42"}]}, "part 0"),
        ({"content": [None]}, "part 0 is null"),
    ],
)
def test_a_reply_without_an_answer_is_an_error_not_an_empty_answer(servers, monkeypatch, message, says):
    c = make_client(monkeypatch, servers(replying(completion(message))).url)
    with pytest.raises(client.LLMError, match="not a usable chat completion") as error:
        c.chat("s", "u")
    assert says in str(error.value)


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    "body, says",
    [
        (DEEP, "nested too deep"),
        (b'{"choices": ' + DEEP + b"}", "nested too deep"),
        (b'{"choices": [{"message": {"content": "4\xff2"}}]}', "invalid UTF-8 at byte 39"),
        (completion({"content": "4\ud8002"}), "lone surrogate at position 1"),
        (completion({"content": [{"type": "text", "text": "\udfff"}]}), "lone surrogate at position 0"),
        (completion({"content": "42"}, usage=[1]), "usage is a list, not an object"),
        (completion({"content": "42"}, usage="lots"), "usage is a string"),
        (completion({"content": "42"}, usage={"completion_tokens": "7"}), "completion_tokens is a string"),
        (completion({"content": "42"}, usage={"completion_tokens": -1}), "not a count"),
        (completion({"content": "42"}, usage={"completion_tokens": 7.5}), "not a count"),
        (b'{"choices": [{"message": {"content": "42"}}], "usage": {"completion_tokens": NaN}}', "not a count"),
        (b"", "not JSON"),
        (b"null", "no choices[0].message"),
        (b"[1]", "no choices[0].message"),
        (b'{"choices": []}', "no choices[0].message"),
        (b'{"choices": [1]}', "no choices[0].message"),
        (b'{"choices": [{"message": "42"}]}', "no choices[0].message"),
        (b'{"error": {"message": "quota"}}', "no choices[0].message"),
        (
            b'{"choices": [{"message": {"content": "'
            + b"9" * 5000
            + b'"}}], "usage": {"completion_tokens": '
            + b"9" * 5000
            + b"}}",
            "not JSON",
        ),  # an integer past Python's digit limit
    ],
)
def test_every_decoding_error_is_the_clients_own(servers, monkeypatch, body, says):
    c = make_client(monkeypatch, servers(replying(body)).url)
    with pytest.raises(client.LLMError, match="not a usable chat completion") as error:
        c.chat("s", "u")
    assert says in str(error.value)
    str(error.value).encode("utf-8")  # the message itself is clean text (no lone surrogate)


def test_a_reply_too_big_to_decode_is_the_clients_error(servers, monkeypatch):
    loads = json.loads

    def no_memory(text, **kwargs):  # the reply is too big; the server's reading of the request is not
        if isinstance(text, str) and "choices" in text:
            raise MemoryError
        return loads(text, **kwargs)

    monkeypatch.setattr(client.json, "loads", no_memory)
    c = make_client(monkeypatch, servers(answer).url)
    with pytest.raises(client.LLMError, match="too large to read in memory"):
        c.chat("s", "u")


# ---- Retry-After, deadline, size cap --------------------------------------------------------


def http_date(seconds_from_now):
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


@pytest.mark.parametrize(
    "value, low, high",
    [
        ("5", 5, 5),
        ("0", 0, 0),
        ("2.5", 2.5, 2.5),
        ("-5", 0, 0),
        ("-inf", 0, 0),
        ("inf", client.MAX_WAIT, client.MAX_WAIT),
        ("1e400", client.MAX_WAIT, client.MAX_WAIT),
        ("86400", client.MAX_WAIT, client.MAX_WAIT),
        (60, 50, 60),
        (-3600, 0, 0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", client.MAX_WAIT, client.MAX_WAIT),
        ("Wed, 21 Oct 2015 07:28:00 -0000", 0, 0),
    ],
)
def test_retry_after_gives_a_bounded_wait(value, low, high):
    """(an int: an HTTP date that many seconds from when the test runs, not from collection)"""
    value = http_date(value) if isinstance(value, int) else value
    assert low <= client._retry_after(value) <= high


@pytest.mark.parametrize(
    "value",
    [
        "nan",
        "-nan",
        "",
        "soon",
        "Wed, 21 Oct 2015 25:28:00 GMT",
        "Wed, 21 Oct 2015 07:28:00 +9999",
        "1 2 3 4 5",
        "\x00",
        "5 s",
        None,
    ],
)
def test_an_unreadable_retry_after_falls_back_to_the_backoff(value):
    assert client._retry_after(value) is None


@pytest.mark.parametrize(
    "value, waited",
    [
        ("-5", 0.0),
        ("nan", 0.5),
        ("inf", client.MAX_WAIT),
        ("soon", 0.5),
        ("Fri, 31 Dec 9999 23:59:59 GMT", client.MAX_WAIT),
        ("3", 3.0),
    ],
)
def test_a_429_with_any_retry_after_is_retried(servers, monkeypatch, value, waited):
    replies = [(429, {"Retry-After": value}, b"slow down"), answer("")]
    sleeps = []
    c = make_client(
        monkeypatch, servers(lambda path: replies.pop(0)).url, max_retries=1, backoff=0.5, sleep=sleeps.append
    )
    assert c.chat("s", "u") == ("42", {"completion_tokens": 1})
    assert sleeps == [waited]


def dripping(head, body, stop, every=0.05):
    """A raw reply: `head` at once, then `body` a byte at a time."""

    def write(wfile):
        wfile.write(head)
        for byte in body:
            if stop.wait(every):
                return
            wfile.write(bytes([byte]))

    return write


@pytest.mark.parametrize("part", ["body", "headers"])
def test_one_deadline_covers_the_whole_request(servers, monkeypatch, part):
    body = completion({"content": "42"})
    head = f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    holder = {}
    if part == "body":
        server = servers(lambda path: dripping(head, body, holder["stop"]))
    else:
        server = servers(lambda path: dripping(b"", head + body, holder["stop"]))
    holder["stop"] = server.stop
    c = make_client(monkeypatch, server.url, timeout=1)
    start = time.monotonic()
    with pytest.raises(client.LLMError, match="within the 1 s deadline"):
        c.chat("s", "u")  # each byte comes well within the timeout; the whole reply never does
    assert time.monotonic() - start < 3


def test_the_deadline_is_per_attempt_and_a_timely_reply_passes(servers, monkeypatch):
    body = completion({"content": "42"})
    head = f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    holder = {}
    server = servers(lambda path: dripping(head, body, holder["stop"], every=0.001))
    holder["stop"] = server.stop
    assert make_client(monkeypatch, server.url, timeout=5).chat("s", "u") == ("42", {})


def test_a_huge_content_length_is_refused_before_reading(servers, monkeypatch):
    head = b"HTTP/1.0 200 OK\r\nContent-Length: 1000000000000\r\n\r\n"
    server = servers(lambda path: lambda wfile: (wfile.write(head + b"{"), server.stop.wait(10)))
    c = make_client(monkeypatch, server.url, timeout=30)
    start = time.monotonic()
    with pytest.raises(
        client.LLMError,
        match=r"too large \(Content-Length 1000000000000; the limit is "
        r"max_reply_bytes=16777216\)",
    ):
        c.chat("s", "u")
    assert time.monotonic() - start < 5  # refused at the header, not after waiting for the body


@pytest.mark.parametrize("framing", ["close", "chunked", "lying length"])
def test_reading_stops_past_the_size_cap(servers, monkeypatch, framing):
    chunk = b" " * 65536

    def write(wfile):
        if framing == "chunked":
            wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        else:
            length = b"Content-Length: 100\r\n" if framing == "lying length" else b""
            wfile.write(b"HTTP/1.0 200 OK\r\n" + length + b"\r\n")
        for _ in range(10_000):  # 650 MB if nobody stops reading
            if server.stop.is_set():
                return
            wfile.write(b"10000\r\n" + chunk + b"\r\n" if framing == "chunked" else chunk)

    server = servers(lambda path: write)
    c = make_client(monkeypatch, server.url, max_reply_bytes=1_000_000)
    if framing == "lying length":  # 100 bytes taken as the body: blanks, not a completion
        with pytest.raises(client.LLMError, match="not JSON"):
            c.chat("s", "u")
    else:
        with pytest.raises(client.LLMError, match=r"too large \(more than 1000000 bytes"):
            c.chat("s", "u")


def test_a_body_cut_short_is_retried_then_an_error(servers, monkeypatch):
    server = servers(lambda path: lambda wfile: wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: 500\r\n\r\n{"))
    c = make_client(monkeypatch, server.url, max_retries=2)
    with pytest.raises(client.LLMError, match="no answer .* after 3 attempts: IncompleteRead"):
        c.chat("s", "u")
    assert len(server.seen) == 3


@pytest.mark.parametrize(
    "setting",
    [
        {"timeout": 0},
        {"timeout": float("nan")},
        {"timeout": float("inf")},
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"backoff": float("nan")},
        {"backoff": -1},
        {"max_reply_bytes": 0},
    ],
)
def test_bad_settings_are_refused(monkeypatch, setting):
    with pytest.raises(ValueError, match=next(iter(setting))):
        make_client(monkeypatch, "http://127.0.0.1:9", **setting)


# ---- the runner: failures recorded and asked again, one runner per file ----------------------


@pytest.fixture
def bench(tmp_path):
    prompts.export_benchmark(tmp_path / "bench", n_per_task=2, seed=1, task_list=["addition", "sorting"])
    return tmp_path / "bench.jsonl"


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_failed_question_is_recorded_and_asked_again(servers, monkeypatch, bench, tmp_path, caplog):
    bad = iter([completion({"content": None}), completion({"content": "4\udfff2"})])

    def respond(path):  # the 2nd and 4th questions fail on the first run, nothing on the second
        asked = len(server.bodies)
        return replying(next(bad) if asked in (2, 4) else completion({"content": "42"}))(path)

    server = servers(respond)
    c = make_client(monkeypatch, server.url)
    out = tmp_path / "answers.jsonl"
    with caplog.at_level(logging.WARNING):
        summary = client.run_benchmark(c, bench, out)
    assert (summary.answered, summary.failed, summary.done_before) == (2, 2, 0)
    assert "2 answered, 2 failed (asked again on a rerun)" in caplog.text
    first = records(out)  # valid UTF-8 JSON lines, the surrogate reply among them
    assert [("response" in r, "error" in r) for r in first] == [(True, False), (False, True)] * 2
    assert "content is null" in first[1]["error"] and "lone surrogate" in first[3]["error"]
    assert all(r.get("response") != "" for r in first)  # never an empty answer
    summary = client.run_benchmark(c, bench, out)
    assert (summary.answered, summary.failed, summary.done_before) == (2, 0, 2)
    asked = [b["messages"][1]["content"] for b in server.bodies]
    assert asked[4:] == [asked[1], asked[3]]  # the rerun asked the failed ones, and only them
    assert client.run_benchmark(c, bench, out).answered == 0 and len(server.bodies) == 6
    per_sample, _ = scoring.score_answers(out, bench)
    assert len(per_sample) == 4 and set(per_sample["response"]) == {"42"}


def test_the_run_stops_when_every_question_fails(servers, monkeypatch, bench, tmp_path):
    server = servers(lambda path: (401, {}, b"bad key"))
    c = make_client(monkeypatch, server.url)
    with pytest.raises(client.LLMError, match="stopped after 3 questions in a row failed .* 0 answered, 3 failed"):
        client.run_benchmark(c, bench, tmp_path / "a.jsonl", max_failures_in_a_row=3)
    assert len(records(tmp_path / "a.jsonl")) == 3 and len(server.seen) == 3


RUNNER = """
import sys
from workbench.frontier import client
print("asking", flush=True)
print(client.run_benchmark(client.ChatClient("m", timeout=30), sys.argv[1], sys.argv[2]))
"""


def test_a_second_runner_on_one_answers_file_is_refused(servers, monkeypatch, bench, tmp_path):
    release = threading.Event()

    def respond(path):  # the first question waits until the second runner has been refused
        release.wait(30)
        return answer(path)

    server = servers(respond)
    out = tmp_path / "answers.jsonl"
    env = {
        **__import__("os").environ,
        client.BASE_URL_ENV: server.url + "/v1",
        client.API_KEY_ENV: KEY,
        "no_proxy": "127.0.0.1",
    }
    first = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(bench), str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline().strip() == "asking"
        deadline = time.monotonic() + 30
        while not server.seen and time.monotonic() < deadline:  # the first runner holds the file
            time.sleep(0.02)
        c = make_client(monkeypatch, server.url)
        with pytest.raises(InUse, match=rf"^the file {out} is in use by process {first.pid} ") as error:
            client.run_benchmark(c, bench, out)
        assert "\n" not in str(error.value) and len(server.seen) == 1  # the second asked nothing
    finally:
        release.set()
        stdout, stderr = first.communicate(timeout=60)
    assert first.returncode == 0, stderr
    assert "4 answered, 0 failed" in stdout
    assert sorted(r["id"] for r in records(out)) == sorted(
        json.loads(line)["id"] for line in bench.read_text().splitlines()
    )
    assert client.run_benchmark(c, bench, out).answered == 0  # the lock went with the first runner


# ---- loading answers: failures skipped, repeated answers dropped -----------------------------


def test_repeated_answers_are_dropped_on_load_keeping_the_first(bench, tmp_path, caplog):
    rows = [json.loads(line) for line in bench.read_text().splitlines()]
    answers = [{"id": r["id"], "task": r["task"], "model": "m", "response": r["answer"]} for r in rows]
    wrong = [{**a, "response": "0"} for a in answers[:2]]
    failed = [{"id": rows[3]["id"], "task": rows[3]["task"], "model": "m", "error": "HTTP 500"}]
    other = [{**a, "model": "other"} for a in answers[:1]]  # another model may answer the same question
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "bench.jsonl").write_text(bench.read_text())
    lines = failed + answers + wrong + other
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    with caplog.at_level(logging.WARNING):
        got = client.answered(lines, "answers.jsonl")
    assert got == answers + other
    assert "answers.jsonl: 2 repeated answers dropped" in caplog.text
    per_sample, summary = scoring.score_answers(folder / "answers.jsonl", bench)
    assert len(per_sample) == 5 and (per_sample["response"] == per_sample["answer"]).all()
    loaded = answer_folders.load_answer_folder(folder)
    assert len(loaded) == 5 and (loaded["response"] == loaded["label"]).all()
    (folder / "copy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wrong))  # the same model, again
    assert len(answer_folders.load_answer_folder(folder)) == 5
    with pytest.raises(ValueError, match="answers.jsonl: record 2 is not an answer record"):
        client.answered([answers[0], {"id": "x"}], "answers.jsonl")


def test_the_done_set_counts_answers_only(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": "q1", "response": "1"}\n{"id": "q2", "error": "HTTP 500"}\n{"id": "q3", "response": ""}\n')
    assert client._done_ids(path) == {"q1", "q3"}
    path.write_bytes(b'{"id": "q1", "response": "\xff"}\n')
    with pytest.raises(ValueError, match="a.jsonl:1 is not an answer record"):
        client._done_ids(path)


# ---- HTTPS: the same deadline, and certificates still checked --------------------------------


@pytest.fixture
def tls_server(tmp_path, monkeypatch):
    """A loopback HTTPS server (self-signed certificate from openssl) dripping or not (`drip`)."""
    import shutil
    import ssl

    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            key,
            "-out",
            cert,
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    server = Server(lambda path: dripping(head, body, server.stop, every=server.every))
    body = completion({"content": "42"})
    head = f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    server.every = 0
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    server.url = server.url.replace("http://", "https://")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    yield server, cert
    server.close()


def test_https_keeps_checking_certificates_and_one_deadline(tls_server, monkeypatch):
    server, cert = tls_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(client.LLMError, match="CERTIFICATE_VERIFY_FAILED"):
        make_client(monkeypatch, server.url).chat("s", "u")  # a self-signed certificate is not trusted
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert make_client(monkeypatch, server.url).chat("s", "u") == ("42", {})
    server.every = 0.05
    start = time.monotonic()
    with pytest.raises(client.LLMError, match="within the 1 s deadline"):
        make_client(monkeypatch, server.url, timeout=1).chat("s", "u")
    assert time.monotonic() - start < 3


@pytest.mark.parametrize("line", [b'{"id": "q1", "response": "\xff"}', b"[" * 100_000, b'{"id": '])
def test_a_damaged_answers_file_is_a_clear_error_naming_the_line(tmp_path, line):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"id": "q0", "response": "1"}\n' + line + b"\n")
    with pytest.raises(ValueError, match=r"a.jsonl:2 is not valid JSON"):
        scoring.score_answers(path, pd.DataFrame({"id": ["q0"], "task": ["addition"], "answer": ["1"]}))
