"""The frontier client never sends the key anywhere but the configured endpoint and never shows it:
redirects are refused (two local servers on 127.0.0.1 = two hosts), whitespace around the key is
stripped, and no error, log line or repr holds the key. Loopback only; every wait is bounded."""
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from workbench.frontier import client

KEY = "sk-test-SECRET-67890"
REPLY = {"choices": [{"message": {"role": "assistant", "content": "42"}}], "usage": {"completion_tokens": 1}}


class Server:
    """A loopback HTTP server in a thread: answers each POST with `respond(path)` =
    (status, headers, body) and records the path and Authorization header of every request."""

    def __init__(self, respond):
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                outer.seen.append({"method": self.command, "path": self.path,
                                   "auth": self.headers.get("Authorization")})
                status, headers, body = respond(self.path)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET = handle_any

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 5
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


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
    home = servers(lambda path: (302, {"Location": "/v2/chat/completions"}, b"")
                   if path.startswith("/v1") else answer(path))
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
