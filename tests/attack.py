"""Attack the workbench as a hostile user would, and sort every outcome (not a pytest file).

    python tests/attack.py [--seed 0] [--quick]

Categories: parser text (generated numbers in every written form, fuzz, hostile long digit runs),
tokenizer text (the same through four encodings, lone surrogates), render and unparse, metrics
(bad shapes, NaN, inf, complex, bad lam), encoders (NaN, inf, huge, integers float64 would round,
NaN vectors), notebook runner parameters (papermill replaced by a recorder: nothing runs),
frontier client (redirects to a second loopback server, keys with whitespace, servers echoing the
key) and the answers file the runner resumes from (torn and damaged lines).

Each generated input ends as one of
  ok            it did what it should, checked against an oracle (decimal / fractions / struct,
                a round trip or a known value)
  clear error   an exception of the expected type whose message names what was wrong
  crash         any other exception, or no answer within the input's time budget
  silent wrong  no exception, but the oracle disagrees (or the API key showed up somewhere)
and the table counts them per category; the first few crashes and wrong results are listed below
it. Runs against older checkouts too (PYTHONPATH=old/checkout): where `parse`/`encode` have no
written forms, round trips are checked the old way.
"""
from __future__ import annotations

import argparse
import inspect
import json
import logging
import math
import os
import random
import signal
import struct
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter, defaultdict
from decimal import Decimal, localcontext
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import torch

from workbench import encoders, metrics, notebooks, numbers
from workbench.frontier import client
from workbench.tokenizer import Tokenizer

OK, CLEAR, CRASH, WRONG = "ok", "clear error", "crash", "silent wrong"
FORMS = "forms" in inspect.signature(numbers.parse).parameters  # written forms (new API)
KEY = "sk-attack-SECRET-24680"


class Wrong(Exception):
    """The oracle disagrees with the result."""


class Hang(BaseException):
    """The input used up its time budget."""


def run_case(fn, errors=(ValueError,), words=(), budget=10.0):
    """Classify one input: fn() returns when right, raises Wrong when the oracle disagrees."""
    def alarm(*_):
        raise Hang()
    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
        return OK, ""
    except Wrong as e:
        return WRONG, str(e)
    except Hang:
        return CRASH, f"no answer within {budget:.0f} s"
    except errors as e:
        if KEY in str(e) or KEY in repr(e):
            return WRONG, f"the key is in the error: {type(e).__name__}"
        clear = any(w.lower() in str(e).lower() for w in words)
        return (CLEAR, "") if clear else (CRASH, f"unclear {type(e).__name__}: {str(e)[:120]}")
    except Exception as e:
        return CRASH, f"{type(e).__name__}: {str(e)[:120]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def refused(result):
    raise Wrong(f"accepted, returned {str(result)[:80]}")


# -- numbers in text -------------------------------------------------------------------------
SPECIAL_NUMBERS = [".5", "1.50", "007", "-.5", "-0.0", "0.000", "00.70", "-00", "0", "-0",
                   "9007199254740993", "1" + "0" * 400, "0." + "0" * 400 + "1",
                   "17976931348623159" + "0" * 292, "0.30000000000000004", "0." + "0" * 323 + "5"]
SEPARATORS = [" ", ", ", " = ", " (", "; ", "\n", " + ", " * ", " x ", ": "]


def written_number(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(SPECIAL_NUMBERS)
    digits = "0123456789"
    integer = "0" * rng.choice([0, 0, 1, 2]) + "".join(rng.choice(digits) for _ in range(rng.choice([0, 1, 2, 5, 9, 16, 25])))
    fraction = "".join(rng.choice(digits) for _ in range(rng.choice([0, 0, 1, 3, 8, 17, 30])))
    fraction += "0" * rng.choice([0, 0, 1, 3])
    if not integer and not fraction:
        integer = rng.choice(digits)
    text = integer + ("." + fraction if fraction else "")
    return ("-" if rng.random() < 0.4 else "") + text


def reader_value(written: str):
    """The float64 a reader means by `written`, or None when float64 cannot hold it exactly."""
    value = float(Decimal(written))
    if not math.isfinite(value) or Fraction(repr(value)) != Fraction(written):
        return None
    return value


def parse_compat(text, signed=True):
    return numbers.parse(text, signed, forms=True) if FORMS else (*numbers.parse(text, signed), None)


def check_parse(text, written, signed=True):
    """Round trip; every value means its written form; each generated number (`written`, None
    for fuzz) keeps its value."""
    template, values, forms = parse_compat(text, signed)
    rebuilt = numbers.unparse(template, values, forms) if FORMS else numbers.unparse(template, values)
    if rebuilt != text:
        raise Wrong(f"round trip gave {rebuilt[:60]!r}")
    for value, form in zip(values, forms or []):
        negative_zero = value == 0 and math.copysign(1, value) < 0
        if Decimal(repr(value)) != Decimal(form) or (value == 0 and negative_zero != form.startswith("-")):
            raise Wrong(f"value {value!r} for the written {form[:40]!r}")
    if written is not None:
        check_number_values(values, written, signed)


def check_number_values(values, written, signed):
    """Split `values` number by number (counts from parsing each alone); a number float64 holds
    must be one value equal to what a reader means (decimal oracle)."""
    at = 0
    for w in written:
        w = w if signed else w.lstrip("-")
        count = len(numbers.parse(" " + w, signed)[1])
        chunk = values[at:at + count]
        at += count
        expected = reader_value(w)
        if expected is not None and (chunk != [expected] or math.copysign(1, chunk[0]) != math.copysign(1, expected)):
            raise Wrong(f"{w[:40]!r} means {expected!r}, parsed as {chunk[:4]}")
    if at != len(values):
        raise Wrong(f"{len(values)} values, but the numbers alone give {at}")


def generated_text(rng):
    written = [written_number(rng) for _ in range(rng.randint(1, 6))]
    text = rng.choice(["", "x = ", "What is "]) + "".join(w + rng.choice(SEPARATORS) for w in written)
    return text, written


FUZZ = list("0123456789.-+ ,e[]()ax\n_") + ["é", "数", "½", "٣", "<|", "|>"]


def fuzz_text(rng):
    pieces = [rng.choice(FUZZ) for _ in range(rng.randint(0, 60))]
    if rng.random() < 0.05:
        pieces.insert(rng.randint(0, len(pieces)), numbers.NUM_TOKEN)
    return "".join(pieces)


def hostile_runs(quick):
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    rng = random.Random(1)
    for n in sizes:
        run = "".join(rng.choice("0123456789") for _ in range(n))
        for shape in ("1" + run[1:], "0." + run, "1" + "0" * n, "-" + "9" * n, ".".join([run[:n // 2]] * 2)):
            yield shape, 2.0 + 5e-5 * len(shape)


def parser_cases(rng, n, quick):
    for _ in range(n):
        text, written = generated_text(rng)
        yield (lambda t=text, w=written: check_parse(t, w)), (ValueError,), ()
        yield (lambda t=text, w=written: check_parse(t, w, signed=False)), (ValueError,), ()
    for _ in range(n):
        text = fuzz_text(rng)
        yield (lambda t=text: check_parse(t, None)), (ValueError,), ("placeholder",)
    yield (lambda: numbers.parse(b"1.5")), (ValueError,), ("string",)
    for text, budget in hostile_runs(quick):
        yield (lambda t=text: check_parse(t, None)), (ValueError,), (), budget


# -- tokenizer --------------------------------------------------------------------------------
def check_tokenizer(tok, text, written):
    """Round trip; no digit inside a BPE token; number values as in check_number_values."""
    if FORMS:
        ids, values, forms = tok.encode(text, forms=True)
        back = tok.decode(ids, values, forms)
    else:
        ids, values = tok.encode(text)
        back = tok.decode(ids, values)
    if back != text:
        raise Wrong(f"{tok.encoding.name}: decode gave {back[:60]!r} for {text[:60]!r}")
    if tok.encoding.single_token and written is not None:
        check_number_values(values[ids == tok.num_id].tolist(), written, tok.encoding.signed)
    if any(d in tok.bpe.id_to_token(int(i) - tok.offset) for i in ids[ids >= tok.offset] for d in "0123456789"):
        raise Wrong("a digit inside a BPE token")


def with_surrogate(rng, text):
    at = rng.randint(0, len(text))
    return text[:at] + chr(rng.randint(0xD800, 0xDFFF)) + text[at:]


def tokenizer_cases(rng, n, tokenizers):
    for _ in range(n):
        text, written = generated_text(rng)
        fuzz = fuzz_text(rng).replace(numbers.NUM_TOKEN, "")
        for tok in tokenizers:
            yield (lambda k=tok, t=text, w=written: check_tokenizer(k, t, w)), (ValueError,), ()
            yield (lambda k=tok, t=fuzz: check_tokenizer(k, t, None)), (ValueError,), ()
        bad = with_surrogate(rng, text)
        for tok in tokenizers:
            yield (lambda k=tok, t=bad: refused(k.encode(t))), (ValueError,), ("surrogate",)
    tok = tokenizers[0]
    for ids, values in [([tok.vocab_size], None), ([-1], None), ([tok.num_id], [math.nan]),
                        ([tok.num_id], [math.inf]), ([tok.num_id, tok.num_id], [1.0])]:
        yield (lambda i=ids, v=values: refused(tok.decode(i, v))), (ValueError,), ("vocabulary", "finite", "values")


# -- render / unparse -------------------------------------------------------------------------
def oracle_round(x, digits):
    f = Fraction(repr(float(x)))
    if f == 0:
        return f
    e = len(str(abs(f.numerator))) - len(str(f.denominator))
    while abs(f) >= Fraction(10) ** (e + 1):
        e += 1
    while abs(f) < Fraction(10) ** e:
        e -= 1
    unit = Fraction(10) ** (e - digits + 1)
    return round(f / unit) * unit


def check_render(x, digits):
    text = numbers.render(x, digits)
    if "e" in text or Fraction(text) != oracle_round(x, digits):
        raise Wrong(f"render({x!r}, {digits}) = {text!r}")
    if digits == 17 and (float(text) != x or math.copysign(1, float(text)) != math.copysign(1, x)):
        raise Wrong(f"render({x!r}, 17) = {text!r} does not read back")


def render_cases(rng, n):
    for _ in range(n):
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        digits = rng.randint(1, 17)
        if math.isfinite(x):
            yield (lambda a=x, d=digits: check_render(a, d)), (ValueError,), ()
        else:
            yield (lambda a=x: refused(numbers.render(a))), (ValueError,), ("finite",)
    for digits in (0, 18, -1):
        yield (lambda d=digits: refused(numbers.render(1.0, d))), (ValueError,), ("digits",)
    N = numbers.NUM_TOKEN
    yield (lambda: refused(numbers.unparse(f"{N} {N}", [1.0]))), (ValueError,), ("placeholders",)
    yield (lambda: refused(numbers.unparse(N, [math.nan]))), (ValueError,), ("finite",)


# -- metrics ----------------------------------------------------------------------------------
def oracle_log_smape(p, t):
    if not math.isfinite(p):
        return 0.0
    with localcontext() as ctx:
        ctx.prec = 60
        eps = Decimal("1e-100")
        s = abs(Decimal(p) - Decimal(t)) / (abs(Decimal(t)) + abs(Decimal(p)) + eps)
        return float(max(Decimal(0), min(Decimal(1), -(s + eps).log10() / 15)))


def oracle_exact(p, t):
    def key(x):
        f = Fraction(repr(float(x)))
        if f == 0:
            return (0,)
        return (f < 0, oracle_round(abs(x), 15))
    return math.isfinite(p) and key(p) == key(t)


def check_metrics(p, t):
    got = metrics.log_smape(p, t)
    want = np.vectorize(oracle_log_smape)(np.asarray(p, float), np.asarray(t, float))
    if got.shape != want.shape or not np.allclose(got, want, rtol=0, atol=1e-12):
        raise Wrong(f"log_smape {got.ravel()[:3]} vs oracle {want.ravel()[:3]}")
    exact = metrics.exact_match(p, t)
    want = np.atleast_1d(np.vectorize(oracle_exact)(np.asarray(p, float), np.asarray(t, float)))
    if exact.shape != want.shape or not np.array_equal(exact, want):
        raise Wrong(f"exact_match {exact.ravel()[:3]} vs oracle {want.ravel()[:3]}")


def random_values(rng, shape, specials=()):
    values = [rng.choice([rng.uniform(-1e6, 1e6), 10 ** rng.uniform(-300, 300), rng.randint(-50, 50)])
              for _ in range(int(np.prod(shape)))]
    for i in range(len(values)):
        if specials and rng.random() < 0.3:
            values[i] = rng.choice(specials)
    return np.array(values, dtype=float).reshape(shape)


def metric_cases(rng, n):
    for _ in range(n):
        shape = rng.choice([(), (1,), (3,), (2, 2)])
        t = random_values(rng, shape)
        p = t * rng.choice([1.0, 1 + 1e-9, 1 + 1e-16, -1.0]) if rng.random() < 0.5 else random_values(rng, shape)
        p = np.where(np.random.default_rng(rng.getrandbits(32)).random(shape) < 0.2, rng.choice([math.nan, math.inf, -math.inf]), p)
        yield (lambda a=p, b=t: check_metrics(a, b)), (ValueError,), ()
        bad_t = random_values(rng, shape if shape else (1,), specials=(math.nan, math.inf))
        if not np.isfinite(bad_t).all():
            yield (lambda b=bad_t: refused(metrics.log_smape(np.ones(b.shape), b))), (ValueError,), ("finite",)
        p_shape, t_shape = rng.choice([((3, 1), (3,)), ((2,), (3,)), ((1,), (3,)), ((3,), (3, 3)), ((2, 3), (3, 2))])
        fn = rng.choice([metrics.log_smape, metrics.exact_match, metrics.smape])
        yield (lambda f=fn, a=np.ones(p_shape), b=np.ones(t_shape): refused(f(a, b))), (ValueError,), ("shape",)
        weird = rng.choice([[1 + 2j], np.array([1.0 + 0j]), ["1.5"], [None], [[1.0], [2.0, 3.0]]])
        side = rng.choice(["pred", "target"])
        args = (weird, [1.0]) if side == "pred" else ([1.0], weird)
        yield (lambda f=fn, a=args: refused(f(*a))), (ValueError,), (side, "real", "complex")
    for lam in (math.nan, math.inf, -math.inf, "1", None):
        yield (lambda l=lam: refused(metrics.generalized_mean([0.5, 0.2], l))), (ValueError, TypeError), ("lam",)
    for scores in ([], [math.nan], [-0.5], [1j], [0.0, 1.0]):
        yield (lambda s=scores: refused(metrics.generalized_mean(s, -1, eps=0))), (ValueError,), ("score", "performance", "real")
    for _ in range(n // 4):
        scores = [rng.random() for _ in range(rng.randint(1, 6))]
        def mean_ok(s=scores):
            want = len(s) / sum(1 / (x + 1e-6) for x in s)
            if not math.isclose(metrics.generalized_mean(s), want, rel_tol=1e-12):
                raise Wrong("harmonic mean")
        yield mean_ok, (ValueError,), ()


# -- encoders ---------------------------------------------------------------------------------
def fone_oracle(x):
    """|x| mod 10^17 from its shortest decimal, to the nearest 10^-32 (the module docstring)."""
    with localcontext() as ctx:
        ctx.prec = 400
        d = abs(Decimal(repr(float(x)))) % (Decimal(10) ** 17)
        return float(d.quantize(Decimal(10) ** -32, rounding="ROUND_HALF_EVEN"))


def check_round_trip(name, codec, x, given=None):
    """decode(encode(given)) against the encoding's oracle for the float64 x (given: x as a tensor)."""
    given = torch.tensor([x], dtype=torch.float64) if given is None else given
    back = float(codec.decode(codec.encode(given))[0])
    if name == "bittokens":
        ok = struct.pack(">d", back) == struct.pack(">d", x)
    elif name == "fone":
        ok = back == fone_oracle(x)
    elif name == "xval":
        ok = back == 0 if abs(x) < 1e-14 else (math.isfinite(back) and abs(back - x) <= 1e-12 * abs(x))
    else:
        ok = back == x and math.copysign(1, back) == math.copysign(1, x)
    if not ok:
        raise Wrong(f"{name}: {x!r} came back as {back!r}")


def check_nan_decodes(codec, enc):
    """A NaN among the dims decode reads (BitTokens: the value bits, not the reciprocal) -> NaN."""
    back = codec.decode(enc)
    read = enc[:, :getattr(codec, "bits", codec.width)]
    bad = [float(v) for v, row in zip(back, read) if torch.isnan(row).any() and not math.isnan(v)]
    if bad:
        raise Wrong(f"{codec.name}: an encoding with NaN decoded to {bad[0]!r}")


def encoder_cases(rng, n):
    codecs = {name: encoders.get(name) for name in encoders.names()}
    for _ in range(n):
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if rng.random() < 0.3:
            x = rng.choice([math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, 1.7976931348623157e308,
                            -1.7976931348623157e308, 1e-15, 1e15, 1e17 + 1])
        for name, codec in codecs.items():
            if math.isfinite(x) or name == "bittokens":
                yield (lambda m=name, c=codec, v=x: check_round_trip(m, c, v)), (ValueError,), ()
            else:
                yield (lambda c=codec, v=x: refused(c.encode(torch.tensor([v])))), (ValueError,), ("finite", "nan", "inf")
    for name, codec in codecs.items():
        if codec.width:
            for _ in range(max(1, n // 20)):
                enc = codec.encode(torch.tensor([rng.uniform(-1e3, 1e3) for _ in range(4)], dtype=torch.float64)).double()
                mask = torch.rand(enc.shape, generator=torch.Generator().manual_seed(rng.getrandbits(31))) < rng.choice([0.01, 0.5, 1.0])
                enc[mask] = math.nan
                yield (lambda c=codec, e=enc: check_nan_decodes(c, e)), (ValueError,), ("nan",)
        else:
            yield (lambda c=codec: refused(c.decode(torch.tensor([[math.nan]])))), (ValueError,), ("nan", "piece")
        for value in (2**53 + 1, -(2**53 + 1), 2**63 - 1, 10**30):
            for wrap in (lambda v: [v], lambda v: np.array([v], dtype=object if abs(v) >= 2**63 else np.int64),
                         lambda v: torch.tensor([v]) if abs(v) < 2**63 else [1.5, v]):
                yield (lambda c=codec, v=wrap(value): refused(c.encode(v))), (ValueError,), (str(value),)
        for value in (2**53, -(2**60), 12345):
            for given in ([value], np.array([value]), torch.tensor([value]), value):
                yield (lambda m=name, c=codec, v=value, g=given: check_round_trip(m, c, float(v), g)), (ValueError,), ()
        for bad in ([1 + 2j], "abc", [None]):
            yield (lambda c=codec, v=bad: refused(c.encode(v))), (ValueError,), ("real", "complex")


# -- notebook runner --------------------------------------------------------------------------
NUMBER, INT, BOOL, STR = "number", "int", "bool", "str"
SPEC = {  # what each parameter takes, from the notebooks' comments (independent of the runner)
    "01_desiderata": {"n_values": {INT}, "full": {BOOL}, "seed": {INT}, "d9_steps": {INT, None},
                      "out_dir": {STR, None}, "figures_dir": {STR, None}, "figure_formats": {"list[str]"},
                      "threads": {INT}},
    "02_fone_locality": {"n_pairs": {INT}, "grid_digits": {INT}, "precision": {INT}, "probe_steps": {INT},
                         "seed": {INT}, "figures_dir": {STR, None}, "figure_formats": {"list[str]"}, "threads": {INT}},
    "03_training": {"encoding": {STR}, "tasks": {STR}, "preset": {STR}, "tokens": {NUMBER}, "seed": {INT},
                    "curriculum": {BOOL}, "balancing": {BOOL}, "decades": {"list[int]", None},
                    "max_digits": {INT, None}, "eval_every": {INT}, "val_samples": {INT},
                    "test_samples": {INT}, "out_dir": {STR, None}, "figures_dir": {STR, None},
                    "figure_formats": {"list[str]"}, "threads": {INT}},
    "04_paper_figures": {"official_data": {STR, None}, "study_dir": {STR, None}, "fig4_part": {STR},
                         "results_csv": {STR, None}, "answers_dir": {STR, None},
                         "exponent_samples": {INT}, "generator_samples": {INT}, "bootstrap_draws": {INT},
                         "seed": {INT},
                         "figures_dir": {STR, None}, "figure_formats": {"list[str]"}},
}
VALUES = [True, False, 0, 5, -3, 2.5, 1e6, math.nan, math.inf, "abc", "", "png", None, [0, 3],
          [0.5, 3], ["png"], ["html", 2], [], {"a": 1}, (0, 3)]
CLI_VALUES = ["abc", "", "5", "1e6", "True", "[0, 3]", "png", "None", "inf", "['png']"]


def takes(kinds, value) -> bool:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return ((value is None and None in kinds) or (BOOL in kinds and isinstance(value, bool))
            or (INT in kinds and is_int) or (STR in kinds and isinstance(value, str))
            or (NUMBER in kinds and (is_int or (isinstance(value, float) and math.isfinite(value))))
            or (isinstance(value, list) and any(k and k.startswith("list[") and
                                                all(takes({k[5:-1]}, v) for v in value) for k in kinds)))


def notebook_cases(rng, out_dir):
    reached = []
    notebooks.papermill.execute_notebook = lambda nb, path, parameters, **kw: reached.append(parameters)

    def attempt(name, key, value):
        reached.clear()
        valid = takes(SPEC[name][key], value)
        try:
            notebooks.execute(name, {key: value}, output_dir=out_dir)
        except ValueError as error:
            if valid:
                raise Wrong(f"{name}: the valid {key}={value!r} was refused: {error}") from None
            raise
        if not valid:
            raise Wrong(f"{name}: {key}={value!r} reached papermill")

    for name, spec in SPEC.items():
        for key in spec:
            values = VALUES + [notebooks._parse_parameter(f"{key}={v}")[1] for v in CLI_VALUES]
            for value in values:
                yield (lambda m=name, k=key, v=value: attempt(m, k, v)), (ValueError,), (key,)
        yield (lambda m=name: refused(notebooks.execute(m, {"budget": 10}, output_dir=out_dir))), (ValueError,), ("budget",)


# -- frontier client --------------------------------------------------------------------------
SERVERS = []  # every loopback server started, closed at the end of the run


class Server:
    """Loopback HTTP server in a thread; respond(path) -> (status, headers, body)."""

    def __init__(self, respond):
        SERVERS.append(self)
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def handle_any(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.seen.append(self.headers.get("Authorization"))
                status, headers, body = respond(self.path)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = handle_any

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


REPLY = json.dumps({"choices": [{"message": {"content": "42"}}]}).encode()


def ask(url, key, log_lines, retries=0):
    log_lines.clear()
    os.environ[client.BASE_URL_ENV] = url + "/v1"
    os.environ[client.API_KEY_ENV] = key
    c = client.ChatClient("m", timeout=5, max_retries=retries, sleep=lambda s: None)
    if KEY in repr(c):
        raise Wrong("the key is in repr")
    try:
        return c.chat("s", "u")
    finally:
        if any(KEY in line for line in log_lines):
            raise Wrong("the key is in the log")


def client_cases(rng, log_lines):
    answer = Server(lambda path: (200, {}, REPLY))

    def redirect(code, location):
        home = Server(lambda path: (code, {"Location": location}, b""))

        def case():
            answer.seen.clear()
            result = ask(home.url, KEY, log_lines)
            raise Wrong(f"followed the redirect and took {result!r}; the other host saw {answer.seen}")
        return case

    for code in (301, 302, 303, 307, 308):
        for location in (answer.url + "/v1/chat/completions", f"{answer.url}/?key={KEY}",
                         "/v2/chat/completions", "http://localhost:9/v1/chat/completions"):
            yield redirect(code, location), (client.LLMError,), ("redirect",)
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~"
    around, inside = [], []
    for _ in range(25):
        key = KEY + "".join(rng.choice(safe) for _ in range(rng.randint(0, 12)))
        around.append("".join(rng.choice(" \t\r\n") for _ in range(rng.randint(0, 3))) + key
                      + "".join(rng.choice(" \t\r\n") for _ in range(rng.randint(1, 3))))
        at = rng.randint(1, len(key) - 1)
        inside.append(key[:at] + rng.choice([" ", "\t", "\r", "\n", "é", "\x7f", "\u2028"]) + key[at:])
    for raw in around:
        def stripped(k=raw):
            answer.seen.clear()
            ask(answer.url, k, log_lines)
            if answer.seen != [f"Bearer {k.strip()}"]:
                raise Wrong(f"sent {answer.seen}")
        yield stripped, (ValueError, client.LLMError), ()
    for raw in inside:
        yield (lambda k=raw: refused(ask(answer.url, k, log_lines))), (ValueError,), (client.API_KEY_ENV,)
    for status, body in ((500, f"broken, key {KEY}"), (200, f"<html>{KEY}</html>"), (401, KEY), (429, "slow")):
        server = Server(lambda path, s=status, b=body: (s, {}, b.encode()))
        yield (lambda u=server.url: refused(ask(u, KEY + "\r\n", log_lines, retries=1))), (client.LLMError,), ("HTTP", "chat completion")
    closed = Server(lambda path: (200, {}, REPLY))
    closed.close()
    yield (lambda: refused(ask(closed.url, KEY, log_lines, retries=1))), (client.LLMError,), ("no answer",)
    yield (lambda: ask(answer.url, KEY, log_lines)), (client.LLMError,), ()


def answers_cases(rng, n, folder):
    good = [json.dumps({"id": f"q{i}", "response": "1"}) for i in range(5)]
    damage = ["not json", '{"no_id": 1}', "[1, 2]", '{"id": ', "\x00\x01", "null"]
    for k in range(n):
        lines = list(good)
        torn_last = rng.random() < 0.5
        broken_inner = rng.random() < 0.5
        if broken_inner:
            lines.insert(rng.randint(0, len(lines) - 1), rng.choice(damage))
        data = "\n".join(lines) + "\n" + ('{"id": "q9", "resp' if torn_last else "")
        path = Path(folder) / f"answers{k}.jsonl"
        path.write_text(data)

        def case(p=path, broken=broken_inner):
            done = client._done_ids(p)
            if broken:
                raise Wrong(f"a damaged line was accepted: {sorted(done)}")
            if done != {f"q{i}" for i in range(5)} or not p.read_text().endswith("\n"):
                raise Wrong(f"read {sorted(done)}")
        yield case, (ValueError,), ("is not an answer record",)


# -- training flags and run directories --------------------------------------------------------
BAD_FIELDS = {  # field -> values that must be refused, naming the flag
    "checkpoint_every": [0, -1, 2.5, True], "eval_every": [0, -3], "test_samples": [0, -1],
    "val_samples": [0], "pool_size": [0, -10], "batch_size": [0, -2], "tokens": [math.inf, math.nan, 0, -1e6],
    "context": [0, 4, 100_000, -8], "out": ["", "   "], "threads": [-1], "seed": [-1],
    "encoding": ["base64", ""], "tasks": [(), ("nope",), ("addition", "addition")], "preset": ["huge"],
    "decades": [(3, 1), (-20, 0), (0, 99)], "max_digits": [0, 18], "adapt_warmup": [-0.1, 2.0],
    "balance_floor": [1.0, -0.5], "balance_lambda": [2.0], "max_task_ratio": [0.01, 1.5],
    "max_answer_tokens": [-1], "text_source": ["ftp:x", ""], "activation": ["swish"], "norm": ["batch"],
    "encoding_options": [{"combine": "glue"}, {"nope": 1}],
}
GOOD_FIELDS = {"checkpoint_every": [1, 500], "tokens": [1.0, 3e6], "context": [8, 1024], "decades": [(0, 1), None],
               "max_digits": [1, 17, None], "tasks": [("addition", "text")], "encoding": ["xval", "numerologic"]}


def train_cases(rng, folder):
    from workbench import train as T  # the training loop's checks, imported only for this category
    small = dict(preset="cpu-tiny", batch_size=2, tokens=1024.0, threads=1)
    for name, values in BAD_FIELDS.items():
        for value in values:
            def case(name=name, value=value):
                refused(T.TrainConfig(**{**small, name: value}))
            words = (name.replace("_", "-"), "unknown encoding", "encoding", "decades", "max_digits", "text source",
                     "must be one of", "no option", "preset", "tasks")
            yield case, (ValueError,), words
    for name, values in GOOD_FIELDS.items():
        for value in values:
            yield (lambda name=name, value=value: T.TrainConfig(**{**small, name: value})), (), ()
    for k in range(10):  # a run directory: resume needs a checkpoint, an old run is never replaced
        out = Path(folder) / f"run{k}"
        out.mkdir()
        (out / rng.choice(["metrics.jsonl", "best.pt", "config.json"])).write_text("{}")
        cfg = T.TrainConfig(**small, out=str(out))
        yield (lambda cfg=cfg: refused(T._prepare_run_dir(cfg, resume=True, rank=0))), (FileNotFoundError,), ("--resume",)
        yield (lambda cfg=cfg: refused(T._prepare_run_dir(cfg, resume=False, rank=0))), (FileExistsError,), ("--overwrite",)
        bad = out / "checkpoint.pt"
        bad.write_bytes(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200))))
        yield (lambda bad=bad: refused(T.load_checkpoint(bad))), (ValueError,), ("corrupt",)
    huge = T.TrainConfig(**{**small, "batch_size": 64}, context=65536)
    yield (lambda: refused(T.check_memory(huge, 2100))), (MemoryError,), ("--batch-size",)


# -- the run ----------------------------------------------------------------------------------
def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="fewer inputs, no 1M-digit runs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    n = 80 if args.quick else 400
    rng = random.Random(args.seed)
    log_lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: log_lines.append(record.getMessage())
    logging.getLogger("workbench").addHandler(handler)
    logging.getLogger("workbench").setLevel(logging.DEBUG)
    folder = tempfile.mkdtemp(prefix="attack-")
    tokenizers = [Tokenizer(name) for name in ("bittokens", "fone", "single_digit", "triple_digit")]
    categories = {
        "parser text": parser_cases(rng, n, args.quick),
        "tokenizer text": tokenizer_cases(rng, n // 4, tokenizers),
        "render / unparse": render_cases(rng, n),
        "metrics": metric_cases(rng, n),
        "encoders": encoder_cases(rng, n // 2),
        "notebook parameters": notebook_cases(rng, folder),
        "frontier client": client_cases(rng, log_lines),
        "answers file": answers_cases(rng, n // 10, folder),
        "training flags, run directories": train_cases(rng, folder),
    }
    counts, examples = defaultdict(Counter), defaultdict(list)
    for category, cases in categories.items():
        started = time.perf_counter()
        for fn, errors, words, *budget in cases:
            label, detail = run_case(fn, errors, words, *budget)
            counts[category][label] += 1
            if label in (CRASH, WRONG) and len(examples[category]) < 4:
                examples[category].append(f"{label}: {detail}")
        print(f"  {category}: {sum(counts[category].values())} inputs, {time.perf_counter() - started:.1f} s",
              file=sys.stderr)
    for server in SERVERS:
        server.close()
    header = ["category", "inputs tried", OK, "clear errors", "crashes", "silent wrong results"]
    rows = [[c, sum(k.values()), k[OK], k[CLEAR], k[CRASH], k[WRONG]] for c, k in counts.items()]
    rows.append(["total", *(sum(r[i] for r in rows) for i in range(1, 6))])
    print(f"written forms: {'yes' if FORMS else 'no (old API)'}")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")
    for category, lines in examples.items():
        print(f"\n{category}:")
        for line in lines:
            print("  " + line)


if __name__ == "__main__":
    main()
