"""A standard-library client for any OpenAI-compatible `/chat/completions` endpoint, and a
resumable runner that appends one JSON line per answered question.

Base URL and key come only from the environment (WORKBENCH_LLM_BASE_URL, WORKBENCH_LLM_API_KEY);
the key is sent in the Authorization header and nowhere else: not in repr, logs or exceptions.
Whitespace around the key (a CRLF .env file) is stripped; a key with whitespace or control
characters inside is refused without being shown. Redirects are never followed: urllib would
re-send the Authorization header to whatever host the Location names (and turn the POST into a
GET), so a redirect is an LLMError that says where it pointed: set the base URL to that place.
"""
import http.client
import json
import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from .prompts import load_benchmark, system_prompt

BASE_URL_ENV = "WORKBENCH_LLM_BASE_URL"
API_KEY_ENV = "WORKBENCH_LLM_API_KEY"
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
log = logging.getLogger(__name__)


class LLMError(RuntimeError):
    """The endpoint failed or answered something that is not a chat completion."""


class _Redirected(Exception):
    """The endpoint answered with a redirect (carried: status code and Location)."""


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        fp.close()
        raise _Redirected(code, newurl)


def _header_safe(key):
    """Position of the first character of `key` that cannot go in an HTTP header, or None."""
    return next((i for i, ch in enumerate(key) if not "!" <= ch <= "~"), None)


class ChatClient:
    """chat(system, user) -> (content, usage) with retries (exponential backoff) on 429/5xx/timeouts."""

    def __init__(self, model, timeout=600.0, max_retries=5, backoff=2.0, sleep=time.sleep, **params):
        base_url, key = os.environ.get(BASE_URL_ENV), (os.environ.get(API_KEY_ENV) or "").strip()
        bad = _header_safe(key)
        if bad is not None:
            raise ValueError(f"{API_KEY_ENV} has whitespace or a non-printable character at "
                             f"position {bad} (key not shown); it cannot go in an HTTP header")
        if not base_url:
            raise ValueError(f"set {BASE_URL_ENV} to the endpoint's base URL (e.g. https://host/v1)")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"{BASE_URL_ENV} must start with http:// or https://")
        if not model or not isinstance(model, str):
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        if max_retries < 0 or timeout <= 0:
            raise ValueError("max_retries must be >= 0 and timeout > 0")
        self.model, self.url = model, base_url.rstrip("/") + "/chat/completions"
        self.timeout, self.max_retries, self.backoff, self.sleep = timeout, max_retries, backoff, sleep
        self.params = params  # extra request fields, e.g. temperature, reasoning_effort
        self.__key = key
        self._opener = urllib.request.build_opener(_RefuseRedirects)

    def __repr__(self):
        return f"ChatClient(model={self.model!r}, url={self.url!r}, key={'set' if self.__key else 'unset'})"

    def _scrub(self, text):
        """`text` without the key, also as repr would escape it inside a bytes or str literal."""
        if not self.__key:
            return text
        return text.replace(self.__key, "***").replace(repr(self.__key)[1:-1], "***")

    def _post(self, body):
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        with self._opener.open(request, timeout=self.timeout) as response:
            return response.read()

    def chat(self, system, user):
        body = {"model": self.model, "messages": [{"role": "system", "content": system},
                                                  {"role": "user", "content": user}], **self.params}
        for attempt in range(self.max_retries + 1):
            try:
                raw = self._post(body)
                break
            except _Redirected as e:
                code, location = e.args
                raise LLMError(self._scrub(
                    f"HTTP {code} from {self.url} redirects to {location}; redirects are not "
                    f"followed (the API key would go along, and the POST would become a GET): "
                    f"set {BASE_URL_ENV} to the endpoint that answers")) from None
            except urllib.error.HTTPError as e:
                detail = self._scrub(e.read()[:300].decode("utf-8", "replace"))
                if e.code not in RETRY_STATUS or attempt == self.max_retries:
                    raise LLMError(f"HTTP {e.code} from {self.url} after {attempt + 1} attempts: {detail}") from None
                wait = _retry_after(e.headers.get("Retry-After")) or self.backoff * 2 ** attempt
                log.warning("HTTP %d from %s, retry %d/%d in %.1fs", e.code, self.url, attempt + 1, self.max_retries, wait)
            except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets, torn replies
                reason = self._scrub(str(getattr(e, "reason", e)))
                if attempt == self.max_retries:
                    raise LLMError(f"no answer from {self.url} after {attempt + 1} attempts: {reason}") from None
                wait = self.backoff * 2 ** attempt
                log.warning("%s from %s, retry %d/%d in %.1fs", reason, self.url, attempt + 1, self.max_retries, wait)
            self.sleep(wait)
        try:
            reply = json.loads(raw)
            content = reply["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(f"not a chat completion from {self.url}: {self._scrub(raw[:300].decode('utf-8', 'replace'))}") from None
        return content if isinstance(content, str) else "", reply.get("usage") or {}


def _retry_after(value):
    try:
        return min(float(value), 300.0)
    except (TypeError, ValueError):
        return None


def _done_ids(path):
    """ids already answered; a torn last line (crash mid-write) is cut off, other damage raises."""
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
    for i, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                done.add(json.loads(line)["id"])
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{path}:{i} is not an answer record") from None
    return done


def run_benchmark(client, benchmark_path, answers_path, tasks=None, limit=None):
    """Ask `client` every question of the benchmark not yet in `answers_path`, appending
    {"id", "task", "model", "response", "completion_tokens", "seconds"} per line (fsync'd).
    Re-running resumes where it stopped. Returns the number of new answers."""
    bench = load_benchmark(benchmark_path)
    if tasks is not None:
        bench = bench[bench["task"].isin(tasks)]
    if limit is not None:
        bench = bench.groupby("task", sort=False).head(limit)
    done = _done_ids(answers_path)
    todo = bench[~bench["id"].isin(done)]
    Path(answers_path).parent.mkdir(parents=True, exist_ok=True)
    with open(answers_path, "a", encoding="utf-8") as f:
        for row in tqdm(todo.itertuples(index=False), total=len(todo), desc=client.model, disable=len(todo) < 20):
            start = time.perf_counter()
            content, usage = client.chat(system_prompt(row.task), row.text_prompt)
            record = {"id": row.id, "task": row.task, "model": client.model, "response": content,
                      "completion_tokens": usage.get("completion_tokens"),
                      "seconds": round(time.perf_counter() - start, 3)}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
    return len(todo)
