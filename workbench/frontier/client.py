"""A standard-library client for any OpenAI-compatible `/chat/completions` endpoint, and a
resumable runner that appends one JSON line per question to an answers file.
(Over 500 lines: the client and its runner share the refusals that keep a key and an answers file safe.)

Base URL and key come only from the environment (WORKBENCH_LLM_BASE_URL, WORKBENCH_LLM_API_KEY);
the key is sent in the Authorization header and nowhere else: not in repr, logs or exceptions.
Whitespace around the key (a CRLF .env file) is stripped; a key with whitespace or control
characters inside is refused without being shown. Redirects are never followed: urllib would
re-send the Authorization header to whatever host the Location names (and turn the POST into a
GET), so a redirect is an LLMError that says where it pointed: set the base URL to that place.

A reply is trusted for nothing. A request has one deadline (`timeout`) for the connection, the
headers and the whole body, however slowly they come; a body over `max_reply_bytes` is refused
(a larger Content-Length before reading anything). The answer is the message's `content`: a string,
or the `text` of its text parts joined (the chat-completions schema). Anything else (null, a
number, a refusal, a malformed part, invalid UTF-8, a lone surrogate, JSON too deep to decode,
malformed `usage`) is an LLMError for that question, never an empty answer.

The answers file holds two kinds of records, one per line:
    {"id", "task", "model", "response", "completion_tokens", "seconds"}   an answer
    {"id", "task", "model", "error", "seconds"}                            a failed question
Only answers count as done: a rerun asks every failed question again, and the loaders
(`answered`) skip failure records and keep the first answer of an id that appears twice.
"""

import email.utils
import http.client
import json
import logging
import math
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from tqdm import tqdm

from workbench.runs.locks import hold_file

from .prompts import load_benchmark, system_prompt

BASE_URL_ENV = "WORKBENCH_LLM_BASE_URL"
API_KEY_ENV = "WORKBENCH_LLM_API_KEY"
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
MAX_WAIT = 300.0  # seconds: the longest pause between attempts, whatever Retry-After says
MAX_REPLY_BYTES = 16 * 2**20  # a chat completion is kilobytes; 16 MiB leaves room for long reasoning
log = logging.getLogger(__name__)


class LLMError(RuntimeError):
    """The endpoint failed or answered something that is not a chat completion."""


class _Redirected(Exception):
    """The endpoint answered with a redirect (carried: status code and Location)."""


class _Status(Exception):
    """The endpoint answered with an error status (carried: code, Retry-After, start of the body)."""


class _TooBig(Exception):
    """The reply is larger than the client takes (carried: what was seen)."""


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        fp.close()
        raise _Redirected(code, newurl)


class _Deadline:
    """One deadline for a whole request. A socket timeout bounds each read, not their sum (a body
    dripping a byte a second never trips it), so a timer shuts the request's socket down when the
    time is up: whatever read is under way then ends, and `passed` says why."""

    def __init__(self, seconds):
        self.passed, self._copies, self._lock = False, [], threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()
        with self._lock:
            for copy in self._copies:
                copy.close()
            self._copies.clear()

    def watch(self, sock):
        """Watch a connected socket (through a duplicate: shutting it down ends the connection,
        also once TLS has wrapped the original)."""
        with self._lock:
            self._copies.append(sock.dup())
            if self.passed:
                self._shut(self._copies[-1])

    def _expire(self):
        with self._lock:
            self.passed = True
            for copy in self._copies:
                self._shut(copy)

    @staticmethod
    def _shut(sock):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the other side


class _Watched:
    """An HTTP(S) connection whose socket the deadline watches from the TCP connect on (before a
    proxy tunnel or the TLS handshake)."""

    def __init__(self, *args, deadline, **kwargs):
        super().__init__(*args, **kwargs)
        self._deadline = deadline
        self._create_connection = self._connect_watched  # http.client's seam for making the socket

    def _connect_watched(self, *args, **kwargs):
        sock = socket.create_connection(*args, **kwargs)
        self._deadline.watch(sock)
        return sock


class _HTTP(_Watched, http.client.HTTPConnection):
    pass


class _HTTPS(_Watched, http.client.HTTPSConnection):
    pass


class _WatchedHandler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """urllib's http and https handlers, opening watched connections (proxies still apply)."""

    def __init__(self, deadline):
        super().__init__()
        self.deadline = deadline

    def http_open(self, req):
        return self.do_open(partial(_HTTP, deadline=self.deadline), req)

    def https_open(self, req):
        return self.do_open(partial(_HTTPS, deadline=self.deadline), req)


def _header_safe(key):
    """Position of the first character of `key` that cannot go in an HTTP header, or None."""
    return next((i for i, ch in enumerate(key) if not "!" <= ch <= "~"), None)


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


class ChatClient:
    """chat(system, user) -> (content, usage) with retries (exponential backoff, or the server's
    Retry-After) on 429/5xx, timeouts and broken connections."""

    def __init__(
        self,
        model,
        timeout=600.0,
        max_retries=5,
        backoff=2.0,
        sleep=time.sleep,
        max_reply_bytes=MAX_REPLY_BYTES,
        **params,
    ):
        base_url, key = os.environ.get(BASE_URL_ENV), (os.environ.get(API_KEY_ENV) or "").strip()
        bad = _header_safe(key)
        if bad is not None:
            raise ValueError(
                f"{API_KEY_ENV} has whitespace or a non-printable character at "
                f"position {bad} (key not shown); it cannot go in an HTTP header"
            )
        if not base_url:
            raise ValueError(f"set {BASE_URL_ENV} to the endpoint's base URL (e.g. https://host/v1)")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"{BASE_URL_ENV} must start with http:// or https://")
        if not model or not isinstance(model, str) or not model.isprintable():
            raise ValueError(f"model must be a non-empty printable string, got {model!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        _positive("timeout", timeout)
        _positive("max_reply_bytes", max_reply_bytes)
        if not 0 <= backoff <= MAX_WAIT:
            raise ValueError(f"backoff must be between 0 and {MAX_WAIT:g} seconds, got {backoff!r}")
        self.model, self.url = model, base_url.rstrip("/") + "/chat/completions"
        self.timeout, self.max_retries, self.backoff, self.sleep = timeout, max_retries, backoff, sleep
        self.max_reply_bytes = int(max_reply_bytes)
        self.params = params  # extra request fields, e.g. temperature, reasoning_effort
        self.__key = key

    def __repr__(self):
        return f"ChatClient(model={self.model!r}, url={self.url!r}, key={'set' if self.__key else 'unset'})"

    def _scrub(self, text):
        """`text` fit for a message: no lone surrogate (escaped), no key (also as repr would
        escape it inside a bytes or str literal)."""
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        if not self.__key:
            return text
        return text.replace(self.__key, "***").replace(repr(self.__key)[1:-1], "***")

    def _post(self, body):
        """The reply's body, read within one deadline and the size cap."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        with _Deadline(self.timeout) as deadline:
            opener = urllib.request.build_opener(_RefuseRedirects, _WatchedHandler(deadline))
            try:
                raw = self._read(opener, request)
            except (OSError, http.client.HTTPException):
                if not deadline.passed:
                    raise
                raw = None  # the read was cut short by the deadline
            if deadline.passed:
                raise TimeoutError(f"no complete reply within the {self.timeout:g} s deadline")
        return raw

    def _read(self, opener, request):
        try:
            response = opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            detail = e.read(300)
            e.close()
            raise _Status(e.code, e.headers.get("Retry-After"), detail) from None
        with response:
            length = _content_length(response.headers.get("Content-Length"))
            if length is not None and length > self.max_reply_bytes:
                raise _TooBig(f"Content-Length {length}")
            raw = response.read(self.max_reply_bytes + 1)
        if len(raw) > self.max_reply_bytes:
            raise _TooBig(f"more than {self.max_reply_bytes} bytes")
        if length is not None and len(raw) < length:
            raise http.client.IncompleteRead(b"", length - len(raw))  # the connection broke mid-body
        return raw

    def _ask(self, body):
        """The raw reply to `body`, retrying 429/5xx, timeouts and broken connections."""
        for attempt in range(self.max_retries + 1):
            last, wait = attempt == self.max_retries, None
            try:
                return self._post(body)
            except _Redirected as e:
                code, location = e.args
                raise LLMError(
                    self._scrub(
                        f"HTTP {code} from {self.url} redirects to {location}; redirects are not "
                        f"followed (the API key would go along, and the POST would become a GET): "
                        f"set {BASE_URL_ENV} to the endpoint that answers"
                    )
                ) from None
            except _TooBig as e:
                raise LLMError(
                    f"the reply from {self.url} is too large ({e.args[0]}; the limit is "
                    f"max_reply_bytes={self.max_reply_bytes})"
                ) from None
            except _Status as e:
                code, retry_after, detail = e.args
                reason = f"HTTP {code}"
                if code not in RETRY_STATUS or last:
                    raise LLMError(
                        self._scrub(
                            f"{reason} from {self.url} after {attempt + 1} attempts: "
                            f"{detail.decode('utf-8', 'replace')}"
                        )
                    ) from None
                wait = _retry_after(retry_after)
            except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets, torn replies
                reason = self._scrub(str(getattr(e, "reason", e)) or type(e).__name__)
                if last:
                    raise LLMError(f"no answer from {self.url} after {attempt + 1} attempts: {reason}") from None
            if wait is None:
                wait = min(self.backoff * 2.0 ** min(attempt, 30), MAX_WAIT)
            log.warning("%s from %s, retry %d/%d in %.1fs", reason, self.url, attempt + 1, self.max_retries, wait)
            self.sleep(wait)

    def chat(self, system, user):
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            **self.params,
        }
        raw = self._ask(body)
        try:
            return _completion(raw)
        except ValueError as e:
            raise LLMError(
                self._scrub(
                    f"not a usable chat completion from {self.url} ({e}): {raw[:300].decode('utf-8', 'replace')}"
                )
            ) from None


def _content_length(value):
    """The Content-Length header as a number of bytes, or None when absent or unreadable."""
    value = (value or "").strip()
    return int(value) if value.isascii() and value.isdigit() else None


def _retry_after(value):
    """The seconds a Retry-After header asks for (a number or an HTTP date) within [0, MAX_WAIT],
    or None when it says nothing usable (then the backoff applies)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
            if when.tzinfo is None:  # "-0000": UTC without a claim about the local zone
                when = when.replace(tzinfo=timezone.utc)
            seconds = (when - datetime.now(timezone.utc)).total_seconds()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return None if math.isnan(seconds) else min(max(seconds, 0.0), MAX_WAIT)


def _completion(raw):
    """(content, usage) of a chat-completion reply; a ValueError says what is wrong with it."""
    try:
        reply = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"invalid UTF-8 at byte {e.start}") from None
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None
    except MemoryError:
        raise ValueError("JSON too large to read in memory") from None
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not (
        isinstance(choices, list)
        and choices
        and isinstance(choices[0], dict)
        and isinstance(choices[0].get("message"), dict)
    ):
        raise ValueError("no choices[0].message")
    usage = reply.get("usage")
    usage = {} if usage is None else usage
    if not isinstance(usage, dict):
        raise ValueError(f"usage is {_json_kind(usage)}, not an object")
    tokens = usage.get("completion_tokens")
    if tokens is not None and (type(tokens) is not int or tokens < 0):
        raise ValueError(f"usage.completion_tokens is {_json_kind(tokens)} {str(tokens)[:20]}, not a count")
    return _answer(choices[0]["message"]), usage


def _answer(message):
    """The answer text of a message: `content` if a string, else the text of its text parts."""
    content = message.get("content")
    if isinstance(content, list):
        content = _text_parts(content)
    elif not isinstance(content, str):
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise ValueError(f"the model refused: {refusal[:200]}")
        raise ValueError(f"content is {_json_kind(content)}, not text")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"the answer holds a lone surrogate at position {e.start}") from None
    return content


def _text_parts(parts):
    """Content parts (chat-completions schema): the text parts' `text` joined. A refusal part or a
    malformed part is an error; a part of another type (some servers send their reasoning as
    "thinking" parts) is not the answer and is skipped."""
    texts = []
    for i, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "refusal":
            raise ValueError(f"the model refused: {str(part.get('refusal'))[:200]}")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "text" or not isinstance(kind, str):
            raise ValueError(f"content part {i} is {_json_kind(part)} without a type and text")
    if not texts:
        raise ValueError(f"content is a list of {len(parts)} parts without a text part")
    return "".join(texts)


def _json_kind(value):
    kinds = {
        type(None): "null",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }
    return kinds.get(type(value), type(value).__name__)


def _record_kind(record):
    """ "answer", "failure" (a question that failed: asked again on a rerun) or None (damage)."""
    if not isinstance(record, dict) or not isinstance(record.get("id"), (str, int)):
        return None
    if "response" in record:
        return "answer"
    return "failure" if "error" in record else None


def answered(records, source, seen=None):
    """The answers among the records of an answers file (`source` names it in messages): failure
    records skipped; of a question answered twice by one model (two runners, a copied file) the
    first answer kept, with a warning. `seen` carries (model, id) pairs across the files of a
    folder. A record of neither kind is a ValueError."""
    seen = set() if seen is None else seen
    answers, repeated = [], []
    for i, record in enumerate(records, 1):
        kind = _record_kind(record)
        if kind is None:
            raise ValueError(f"{source}: record {i} is not an answer record (no id with a response or an error)")
        key = (record.get("model"), record["id"])
        if kind == "failure":
            continue
        if key in seen:
            repeated.append(record["id"])
            continue
        seen.add(key)
        answers.append(record)
    if repeated:
        log.warning(
            "%s: %d repeated answers dropped (the first answer to each question is kept), e.g. %s",
            source,
            len(repeated),
            repeated[:3],
        )
    return answers


def _done_ids(path):
    """ids already answered (failures do not count); a torn last line (crash mid-write) is cut
    off, other damage raises."""
    path = Path(path)
    if not path.exists():
        return set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        log.warning("dropping a torn last line of %s", path)
        with open(path, "r+b") as f:
            f.truncate(cut)
        data = data[:cut]
    done = set()
    for i, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                record = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                record = None
            kind = _record_kind(record)
            if kind is None:
                raise ValueError(f"{path}:{i} is not an answer record")
            if kind == "answer":
                done.add(record["id"])
    return done


@dataclass
class RunSummary:
    """What one run_benchmark call did."""

    answered: int  # questions answered in this run
    failed: int  # questions that failed in this run (recorded; a rerun asks them again)
    done_before: int  # questions answered by earlier runs, not asked again

    def __str__(self):
        return (
            f"{self.answered} answered, {self.failed} failed (asked again on a rerun), "
            f"{self.done_before} answered before"
        )


def _ask_one(client, row):
    """The record of one question: its answer, or the client's error for it."""
    start = time.perf_counter()
    record = {"id": row.id, "task": row.task, "model": client.model}
    try:
        content, usage = client.chat(system_prompt(row.task), row.text_prompt)
        record |= {"response": content, "completion_tokens": usage.get("completion_tokens")}
    except LLMError as e:
        record["error"] = str(e)
    record["seconds"] = round(time.perf_counter() - start, 3)
    return record


def run_benchmark(client, benchmark_path, answers_path, tasks=None, limit=None, max_failures_in_a_row=10):
    """Ask `client` every question of the benchmark not yet answered in `answers_path`, appending
    an answer or a failure record per question (fsync'd), while holding the file's lock (a second
    runner on the same file is refused, naming the holder). Re-running resumes where it stopped
    and asks failed questions again. A question that fails does not stop the run, unless
    `max_failures_in_a_row` fail in a row (the endpoint is down or misconfigured): then an LLMError.
    Returns a RunSummary."""
    bench = load_benchmark(benchmark_path)
    if tasks is not None:
        bench = bench[bench["task"].isin(tasks)]
    if limit is not None:
        bench = bench.groupby("task", sort=False).head(limit)
    Path(answers_path).parent.mkdir(parents=True, exist_ok=True)
    with hold_file(answers_path):
        done = _done_ids(answers_path)
        todo = bench[~bench["id"].isin(done)]
        summary, in_a_row = RunSummary(0, 0, len(bench) - len(todo)), 0
        with open(answers_path, "a", encoding="utf-8") as f:
            bar = tqdm(todo.itertuples(index=False), total=len(todo), desc=client.model, disable=len(todo) < 20)
            for row in bar:
                record = _ask_one(client, row)
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
                f.flush()
                os.fsync(f.fileno())
                if "error" not in record:
                    summary.answered, in_a_row = summary.answered + 1, 0
                    continue
                summary.failed, in_a_row = summary.failed + 1, in_a_row + 1
                bar.set_postfix(failed=summary.failed)
                log.warning("%s failed: %s", row.id, record["error"])
                if in_a_row >= max_failures_in_a_row:
                    raise LLMError(
                        f"stopped after {in_a_row} questions in a row failed (the endpoint looks "
                        f"down or misconfigured); this run: {summary}"
                    )
    if summary.failed:
        log.warning("%s: %s", answers_path, summary)
    return summary
