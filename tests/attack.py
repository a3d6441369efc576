"""Attack the workbench as a hostile user would, and sort every outcome (not a pytest file).

    python tests/attack.py [--seed 0] [--quick]

Categories: parser text (generated numbers in every written form, fuzz, hostile long digit runs),
tokenizer text (the same through four encodings, lone surrogates), render and unparse, metrics
(bad shapes, NaN, inf, complex, bad lam), encoders (NaN, inf, huge, integers float64 would round,
NaN vectors), notebook runner parameters (papermill replaced by a recorder: nothing runs),
frontier client (redirects to a second loopback server, keys with whitespace, servers echoing the
key), the answers file the runner resumes from (torn and damaged lines), reply shapes (content as
null, numbers, parts, refusals; bad usage; invalid UTF-8, lone surrogates, deep JSON; Retry-After of
every form), reply sizes and timing (around the size cap in each framing, huge Content-Length,
dripping replies, dropped connections) and the answers file under two runners (a second runner
refused, a killed one resumed, failed questions asked again, repeated answers loaded once).
Issue 39's: locks and links (a .lock planted as a link, hard link, FIFO or folder under every
command that locks; a lock removed or a folder moved under a live holder; two threads of one
process), kernel cache (libraries planted at the C kernels' cache name), job results (result
files planted under the process IDs the next submitit jobs get), HTML labels (markup in the
leaderboard's intervals), tokenizer cache (the cached BPE edited on disk), encoding ranges (values
at and beyond each encoding's range, and what decode gives fed back), crafted checkpoints (files
that load with weights_only=True but are no checkpoint of the run) and notebook bounds (each
parameter at and beyond its bounds, output folders inside the checkout). Issue 66's: reasoning-gym
items (generated items checked against Fraction arithmetic, crafted ones of other types, deep
parentheses, long lines, huge answers), crafted model folders (config.json and the weight index
nested 100,000 deep, FIFOs, sizes changed; numeracy.json's values of other kinds, a head_width of
10^9), the TensorBoard folder (a link, deleted or swapped under a live writer, every write failing
as on a full disk) and dry-run records (impossible train_seconds, --jobs below 1, FIFOs and deep
records in the plan's folders). `--only NAME` runs the categories whose name holds NAME.

Each generated input ends as one of
  ok            it did what it should, checked against an oracle (decimal / fractions / struct,
                a round trip or a known value)
  clear error   an exception of the expected type whose message names what was wrong
  crash         any other exception (a traceback at the command line)
  hang          no answer within the input's time budget
  silent wrong  no exception, but the oracle disagrees (or the API key showed up somewhere)
  code ran      code the attack planted ran (its marker file appeared)
and the table counts them per category, with the files of the checkout each category changed
(writes into the checkout; caches aside); the first few crashes and wrong results are listed below
it. Runs against older checkouts too (PYTHONPATH=old/checkout): where `parse`/`encode` have no
written forms, round trips are checked the old way.
"""

from __future__ import annotations

import argparse
import email.utils
import inspect
import json
import logging
import math
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter, defaultdict
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import loopback  # tests/loopback.py, beside this script
import numpy as np
import torch

from workbench import encoders, metrics, notebook_parameters, notebooks, numbers
from workbench.frontier import answer_folders, client, prompts, scoring
from workbench.runs import locks
from workbench.tokenizer import Tokenizer

OK, CLEAR, CRASH, WRONG, CODE = "ok", "clear error", "crash", "silent wrong", "code ran"
HANG = "hang"
WRITES = "writes into the checkout"  # files of the checkout a category changed
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
    except CodeRan as e:
        return CODE, str(e)
    except Wrong as e:
        return WRONG, str(e)
    except Hang:
        return HANG, f"no answer within {budget:.0f} s"
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
SPECIAL_NUMBERS = [
    ".5",
    "1.50",
    "007",
    "-.5",
    "-0.0",
    "0.000",
    "00.70",
    "-00",
    "0",
    "-0",
    "9007199254740993",
    "1" + "0" * 400,
    "0." + "0" * 400 + "1",
    "17976931348623159" + "0" * 292,
    "0.30000000000000004",
    "0." + "0" * 323 + "5",
]
SEPARATORS = [" ", ", ", " = ", " (", "; ", "\n", " + ", " * ", " x ", ": "]


def written_number(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(SPECIAL_NUMBERS)
    digits = "0123456789"
    integer = "0" * rng.choice([0, 0, 1, 2]) + "".join(
        rng.choice(digits) for _ in range(rng.choice([0, 1, 2, 5, 9, 16, 25]))
    )
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
        chunk = values[at : at + count]
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
        for shape in ("1" + run[1:], "0." + run, "1" + "0" * n, "-" + "9" * n, ".".join([run[: n // 2]] * 2)):
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
    for ids, values in [
        ([tok.vocab_size], None),
        ([-1], None),
        ([tok.num_id], [math.nan]),
        ([tok.num_id], [math.inf]),
        ([tok.num_id, tok.num_id], [1.0]),
    ]:
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
    values = [
        rng.choice([rng.uniform(-1e6, 1e6), 10 ** rng.uniform(-300, 300), rng.randint(-50, 50)])
        for _ in range(int(np.prod(shape)))
    ]
    for i in range(len(values)):
        if specials and rng.random() < 0.3:
            values[i] = rng.choice(specials)
    return np.array(values, dtype=float).reshape(shape)


def metric_cases(rng, n):
    for _ in range(n):
        shape = rng.choice([(), (1,), (3,), (2, 2)])
        t = random_values(rng, shape)
        p = t * rng.choice([1.0, 1 + 1e-9, 1 + 1e-16, -1.0]) if rng.random() < 0.5 else random_values(rng, shape)
        p = np.where(
            np.random.default_rng(rng.getrandbits(32)).random(shape) < 0.2,
            rng.choice([math.nan, math.inf, -math.inf]),
            p,
        )
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
        yield (
            (lambda value=lam: refused(metrics.generalized_mean([0.5, 0.2], value))),
            (ValueError, TypeError),
            ("lam",),
        )
    for scores in ([], [math.nan], [-0.5], [1j], [0.0, 1.0]):
        yield (
            (lambda s=scores: refused(metrics.generalized_mean(s, -1, eps=0))),
            (ValueError,),
            ("score", "performance", "real"),
        )
    for _ in range(n // 4):
        scores = [rng.random() for _ in range(rng.randint(1, 6))]

        def mean_ok(s=scores):
            want = len(s) / sum(1 / (x + 1e-6) for x in s) - 1e-6  # eq. 15, its eps taken off again
            if not math.isclose(metrics.generalized_mean(s), want, rel_tol=1e-12, abs_tol=1e-15):
                raise Wrong("harmonic mean")

        yield mean_ok, (ValueError,), ()


# -- encoders ---------------------------------------------------------------------------------
def check_nan_decodes(codec, enc):
    """A NaN among the dims decode reads (BitTokens: the value bits, not the reciprocal) -> NaN."""
    back = codec.decode(enc)
    read = enc[:, : getattr(codec, "bits", codec.width)]
    bad = [float(v) for v, row in zip(back, read) if torch.isnan(row).any() and not math.isnan(v)]
    if bad:
        raise Wrong(f"{codec.name}: an encoding with NaN decoded to {bad[0]!r}")


def encoder_cases(rng, n):
    codecs = {name: encoders.get(name) for name in encoders.names()}
    for _ in range(n):
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if rng.random() < 0.3:
            x = rng.choice(
                [
                    math.nan,
                    math.inf,
                    -math.inf,
                    0.0,
                    -0.0,
                    5e-324,
                    1.7976931348623157e308,
                    -1.7976931348623157e308,
                    1e-15,
                    1e15,
                    1e17 + 1,
                ]
            )
        for name, codec in codecs.items():
            if math.isfinite(x) or name == "bittokens":  # an encoding of bounded range may refuse, saying so
                yield (lambda m=name, c=codec, v=x: check_range(m, c, v)), (ValueError,), ("cannot encode",)
            else:
                yield (
                    (lambda c=codec, v=x: refused(c.encode(torch.tensor([v])))),
                    (ValueError,),
                    ("finite", "nan", "inf"),
                )
    for name, codec in codecs.items():
        if codec.width:
            for _ in range(max(1, n // 20)):
                low = -1e3 if codec.signed else 0.0  # an unsigned encoding takes |x| (its sign is text)
                enc = codec.encode(
                    torch.tensor([rng.uniform(low, 1e3) for _ in range(4)], dtype=torch.float64)
                ).double()
                mask = torch.rand(enc.shape, generator=torch.Generator().manual_seed(rng.getrandbits(31))) < rng.choice(
                    [0.01, 0.5, 1.0]
                )
                enc[mask] = math.nan
                yield (lambda c=codec, e=enc: check_nan_decodes(c, e)), (ValueError,), ("nan",)
        else:
            yield (lambda c=codec: refused(c.decode(torch.tensor([[math.nan]])))), (ValueError,), ("nan", "piece")
        for value in (2**53 + 1, -(2**53 + 1), 2**63 - 1, 10**30):
            for wrap in (
                lambda v: [v],
                lambda v: np.array([v], dtype=object if abs(v) >= 2**63 else np.int64),
                lambda v: torch.tensor([v]) if abs(v) < 2**63 else [1.5, v],
            ):
                yield (lambda c=codec, v=wrap(value): refused(c.encode(v))), (ValueError,), (str(value),)
        for value in (2**53, -(2**60), 12345):
            for given in ([value], np.array([value]), torch.tensor([value]), value):
                yield (
                    (lambda m=name, c=codec, v=value, g=given: check_range(m, c, float(v), g)),
                    (ValueError,),
                    ("cannot encode",),
                )
        for bad in ([1 + 2j], "abc", [None]):
            yield (lambda c=codec, v=bad: refused(c.encode(v))), (ValueError,), ("real", "complex")


# -- notebook runner --------------------------------------------------------------------------
NUMBER, INT, BOOL, STR = "number", "int", "bool", "str"
SPEC = {  # what each parameter takes, from the notebooks' comments (independent of the runner)
    "01_desiderata": {
        "n_values": {INT},
        "full": {BOOL},
        "seed": {INT},
        "d9_steps": {INT, None},
        "out_dir": {STR, None},
        "figures_dir": {STR, None},
        "figure_formats": {"list[str]"},
        "threads": {INT},
    },
    "02_fone_locality": {
        "n_pairs": {INT},
        "grid_digits": {INT},
        "precision": {INT},
        "probe_steps": {INT},
        "seed": {INT},
        "figures_dir": {STR, None},
        "figure_formats": {"list[str]"},
        "threads": {INT},
    },
    "03_training": {
        "encoding": {STR},
        "tasks": {STR},
        "preset": {STR},
        "tokens": {NUMBER},
        "seed": {INT},
        "curriculum": {BOOL},
        "balancing": {BOOL},
        "decades": {"list[int]", None},
        "max_digits": {INT, None},
        "eval_every": {INT},
        "val_samples": {INT},
        "test_samples": {INT},
        "out_dir": {STR, None},
        "figures_dir": {STR, None},
        "figure_formats": {"list[str]"},
        "threads": {INT},
        "options": {"dict"},
    },
    "04_paper_figures": {
        "official_data": {STR, None},
        "study_dir": {STR, None, "list[str]"},
        "fig4_part": {STR, None},
        "results_csv": {STR, None},
        "answers_dir": {STR, None},
        "study4": {BOOL},
        "exponent_samples": {INT},
        "generator_samples": {INT},
        "bootstrap_draws": {INT},
        "seed": {INT},
        "figures_dir": {STR, None},
        "figure_formats": {"list[str]"},
    },
}
INJECTION = "\\\"+str(__import__('os').getpid())+\\\""  # what papermill once wrote into the code unescaped
VALUES = [
    True,
    False,
    0,
    5,
    -3,
    2.5,
    1e6,
    math.nan,
    math.inf,
    "abc",
    "",
    "png",
    None,
    [0, 3],
    [0.5, 3],
    ["png"],
    ["html", 2],
    [],
    {"a": 1},
    (0, 3),
    "abc\udcff",
    b"png",
    {0, 3},
    {"seed": (INJECTION,)},
    {("seed",): 1},
    {"seed": [b"1"]},
    {"seed": {"a": [1, {"b": (2,)}]}},
    {"seed": math.inf},
    {"seed": "x\udcff"},
    {1: "a"},
    {"seed": 1, "encoding_options": {"combine": "sum"}},
    {"tasks": ["addition"], "decades": [0, 3], "curriculum": False, "max_digits": None},
]
CLI_VALUES = [
    "abc",
    "",
    "5",
    "1e6",
    "True",
    "[0, 3]",
    "0,3",
    "png",
    "None",
    "inf",
    "['png']",
    "{'seed': ('x',)}",
    "{('a',): 1}",
    "{'seed': b'x'}",
    "{'seed': {1, 2}}",
    "{'a': [1, (2, 3)]}",
]


def same_json(a, b) -> bool:
    """a and b equal and of the same JSON types at every depth (True is not 1, a tuple no list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_json, a, b))
    return a == b


def is_json(value) -> bool:
    """The oracle of "JSON values only": what json writes and reads back unchanged, as UTF-8."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        return False
    return same_json(json.loads(text), value)


def takes(kinds, value) -> bool:
    if not is_json(value):
        return False
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return (
        (value is None and None in kinds)
        or (BOOL in kinds and isinstance(value, bool))
        or ("dict" in kinds and isinstance(value, dict))
        or (INT in kinds and is_int)
        or (STR in kinds and isinstance(value, str))
        or (NUMBER in kinds and (is_int or (isinstance(value, float) and math.isfinite(value))))
        or (
            isinstance(value, list)
            and any(k and k.startswith("list[") and all(takes({k[5:-1]}, v) for v in value) for k in kinds)
        )
    )


def notebook_cases(rng, out_dir):
    reached = []
    notebooks.papermill.execute_notebook = lambda nb, path, parameters, **kw: reached.append(parameters)

    def attempt(name, key, value):
        reached.clear()
        valid = takes(SPEC[name][key], value) and within_bounds(name, key, value)
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
            values = VALUES + [notebook_parameters.parse_parameter(f"{key}={v}")[1] for v in CLI_VALUES]
            for value in values:
                yield (lambda m=name, k=key, v=value: attempt(m, k, v)), (ValueError,), (key,)
        yield (
            (lambda m=name: refused(notebooks.execute(m, {"budget": 10}, output_dir=out_dir))),
            (ValueError,),
            ("budget",),
        )


# -- frontier client --------------------------------------------------------------------------
SERVERS = []  # every loopback server started, closed at the end of the run


def serve(respond):
    """A loopback server (tests/loopback.py), closed at the end of the run."""
    SERVERS.append(loopback.Server(respond))
    return SERVERS[-1]


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
    answer = serve(lambda path: (200, {}, REPLY))

    def redirect(code, location):
        home = serve(lambda path: (code, {"Location": location}, b""))

        def case():
            answer.seen.clear()
            result = ask(home.url, KEY, log_lines)
            raise Wrong(f"followed the redirect and took {result!r}; the other host saw {answer.seen}")

        return case

    for code in (301, 302, 303, 307, 308):
        for location in (
            answer.url + "/v1/chat/completions",
            f"{answer.url}/?key={KEY}",
            "/v2/chat/completions",
            "http://localhost:9/v1/chat/completions",
        ):
            yield redirect(code, location), (client.LLMError,), ("redirect",)
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~"
    around, inside = [], []
    for _ in range(25):
        key = KEY + "".join(rng.choice(safe) for _ in range(rng.randint(0, 12)))
        around.append(
            "".join(rng.choice(" \t\r\n") for _ in range(rng.randint(0, 3)))
            + key
            + "".join(rng.choice(" \t\r\n") for _ in range(rng.randint(1, 3)))
        )
        at = rng.randint(1, len(key) - 1)
        inside.append(key[:at] + rng.choice([" ", "\t", "\r", "\n", "é", "\x7f", "\u2028"]) + key[at:])
    for raw in around:

        def stripped(k=raw):
            answer.seen.clear()
            ask(answer.url, k, log_lines)
            if [r["auth"] for r in answer.seen] != [f"Bearer {k.strip()}"]:
                raise Wrong(f"sent {answer.seen}")

        yield stripped, (ValueError, client.LLMError), ()
    for raw in inside:
        yield (lambda k=raw: refused(ask(answer.url, k, log_lines))), (ValueError,), (client.API_KEY_ENV,)
    for status, body in ((500, f"broken, key {KEY}"), (200, f"<html>{KEY}</html>"), (401, KEY), (429, "slow")):
        server = serve(lambda path, s=status, b=body: (s, {}, b.encode()))
        yield (
            (lambda u=server.url: refused(ask(u, KEY + "\r\n", log_lines, retries=1))),
            (client.LLMError,),
            ("HTTP", "chat completion"),
        )
    closed = serve(lambda path: (200, {}, REPLY))
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


# -- reply shapes, sizes and timing, two runners on one answers file ----------------------------
TEXT = list('0123456789.-+ ,e[]{}":ax\n') + ["é", "数", "\u2028", "\x00", "\\", "😀"]


def random_text(rng, surrogates=0.1):
    text = "".join(rng.choice(TEXT) for _ in range(rng.randint(0, 12)))
    return with_surrogate(rng, text) if rng.random() < surrogates else text


def has_surrogate(text):
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def random_content(rng):
    """A message's content and the answer it holds (None: no answer, the client must refuse)."""
    kind = rng.choice(["string", "parts", "other"])
    if kind == "string":
        text = random_text(rng)
        return text, None if has_surrogate(text) else text
    if kind == "other":
        return rng.choice([None, 0, -1.5, 1e300, True, False, {"text": "1"}, {}]), None
    parts, texts, broken = [], [], False
    for _ in range(rng.randint(0, 4)):
        pick = rng.choice(["text", "text", "thinking", "refusal", "bad"])
        if pick == "text":
            texts.append(random_text(rng, surrogates=0.05))
            parts.append({"type": "text", "text": texts[-1]})
        elif pick == "thinking":  # some servers send their reasoning as parts: not the answer
            parts.append({"type": "thinking", "thinking": random_text(rng, 0)})
        else:
            broken = True
            parts.append(
                {"type": "refusal", "refusal": "no"}
                if pick == "refusal"
                else rng.choice(
                    [None, 5, "x", {"type": "text"}, {"type": "text", "text": 5}, {"text": "x"}, {"type": 5}]
                )
            )
    answer = "".join(texts)
    return parts, None if broken or not texts or has_surrogate(answer) else answer


def random_usage(rng):
    """(usage, whether the client takes it); None as usage: the field is absent."""
    usage = rng.choice(
        [
            None,
            "null",
            {},
            {"completion_tokens": rng.randint(0, 10**6)},
            {"prompt_tokens": 3},
            [1],
            "x",
            5,
            {"completion_tokens": "7"},
            {"completion_tokens": -3},
            {"completion_tokens": 2.0},
            {"completion_tokens": True},
            {"completion_tokens": None},
        ]
    )
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    fine = usage in (None, "null") or (
        isinstance(usage, dict) and (tokens is None or (type(tokens) is int and tokens >= 0))
    )
    return usage, fine


def damaged_body(rng, good):
    """A body that is no chat completion: empty, the wrong JSON, truncated, deep, invalid UTF-8."""
    kind = rng.choice(["json", "truncated", "deep", "utf8", "bom"])
    if kind == "json":
        return rng.choice(
            [
                b"",
                b"null",
                b"[]",
                b"42",
                b'{"choices": null}',
                b'{"choices": [{}]}',
                b'{"choices": [[]]}',
                b'{"choices": [{"message": null}]}',
                b'{"error": {"message": "quota"}}',
                b"<html>",
            ]
        )
    if kind == "truncated":
        return good[: rng.randint(0, len(good) - 1)]
    if kind == "deep":
        depth = rng.choice([1000, 10_000, 100_000, 300_000])
        return b'{"choices": ' + rng.choice([b"[", b'{"a": ']) * depth
    if kind == "utf8":
        at = rng.randint(0, len(good))
        return good[:at] + rng.choice([b"\xff", b"\xc0\xaf", b"\x80", b"\xed\xa0\x80"]) + good[at:]
    return b"\xef\xbb\xbf" + good


def replying_client(url, **settings):
    os.environ[client.BASE_URL_ENV] = url + "/v1"
    os.environ[client.API_KEY_ENV] = KEY
    return client.ChatClient("m", **{"timeout": 5, "max_retries": 0, "sleep": lambda s: None, **settings})


def expect(chat, answer):
    """chat() must give `answer`, or the client's own error when `answer` is None; an error's text
    is clean (no key, no lone surrogate)."""
    try:
        got, usage = chat()
    except client.LLMError as e:
        str(e).encode("utf-8")
        if answer is not None:
            raise Wrong(f"refused a good reply: {str(e)[:100]}") from None
        raise
    if answer is None:
        raise Wrong(f"took {got[:40]!r} from a reply without an answer")
    if got != answer or not isinstance(usage, dict):
        raise Wrong(f"answer {got[:40]!r}, expected {answer[:40]!r}")


def retry_after_value(rng):
    return rng.choice(
        [
            str(rng.randint(-(10**6), 10**6)),
            repr(rng.uniform(-1e4, 1e4)),
            "-5",
            "nan",
            "-nan",
            "inf",
            "-inf",
            "1e400",
            "9" * rng.randint(1, 5000),
            "",
            " 7 ",
            "1_0",
            "0x10",
            email.utils.formatdate(time.time() + rng.uniform(-1e9, 1e9), usegmt=True),
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Mon, 01 Jan 0001 00:00:00 GMT",
            "Wed, 21 Oct 2015 25:61:00 GMT",
            "".join(chr(rng.randint(0x20, 0xFF)) for _ in range(rng.randint(1, 30))),
        ]
    )


def check_retry_after(url, replies, value):
    """A 429 with Retry-After `value`, then the answer: one bounded wait, then the answer."""
    replies[:] = [(429, {"Retry-After": value}, b"slow down"), (200, {}, REPLY)]
    sleeps = []
    c = replying_client(url, max_retries=1, backoff=0.5, sleep=sleeps.append)
    if c.chat("s", "u")[0] != "42":
        raise Wrong("no answer after the retry")
    try:
        number = float(value)  # the oracle: a number is clamped to [0, MAX_WAIT], NaN falls back
        want = 0.5 if number != number else min(max(number, 0.0), client.MAX_WAIT)
    except ValueError:
        want = None  # a date or garbage: any wait within the bounds
    wait = sleeps[0] if len(sleeps) == 1 else None
    if wait is None or not 0 <= wait <= client.MAX_WAIT or (want is not None and wait != want):
        raise Wrong(f"Retry-After {value[:40]!r} gave the waits {sleeps}")


def shape_cases(rng, n):
    replies = []
    server = serve(lambda path: replies.pop(0))
    for _ in range(n):
        content, answer = random_content(rng)
        usage, usage_fine = random_usage(rng) if rng.random() < 0.3 else (None, True)
        reply = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        if usage is not None:
            reply["usage"] = None if usage == "null" else usage
        ascii_only = rng.random() < 0.5 or has_surrogate(json.dumps(reply, ensure_ascii=False))
        body = json.dumps(reply, ensure_ascii=ascii_only).encode("utf-8")  # a surrogate goes as \udXXX
        answer = answer if usage_fine else None
        if rng.random() < 0.2:
            body, answer = damaged_body(rng, body), None

        def case(b=body, a=answer):
            replies[:] = [(200, {}, b)]
            expect(lambda: replying_client(server.url).chat("s", "u"), a)

        yield case, (client.LLMError,), ("chat completion",)
    for _ in range(n // 4):
        yield (lambda v=retry_after_value(rng): check_retry_after(server.url, replies, v)), (), ()


def raw_reply(body, framing, stop, every=0.0, length=None):
    """A raw HTTP reply writing `body` framed by Content-Length (`length` if given, else the true
    one), chunks or the end of the connection; with `every` > 0 a byte at a time, that far apart."""

    def write(wfile):
        if framing == "chunked":
            head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            data = (
                b"".join(
                    b"%x\r\n%s\r\n" % (len(body[i : i + 65536]), body[i : i + 65536])
                    for i in range(0, len(body), 65536)
                )
                + b"0\r\n\r\n"
            )
        else:
            size = length if length is not None else len(body)
            head = b"HTTP/1.0 200 OK\r\n" + (b"Content-Length: %d\r\n" % size if framing == "length" else b"") + b"\r\n"
            data = body
        if every <= 0:
            wfile.write(head + data)
            return
        for byte in head + data:
            if stop.wait(every):
                return
            wfile.write(bytes([byte]))

    return write


def padded(size):
    """A chat completion of exactly `size` bytes (JSON allows the blanks)."""
    return REPLY + b" " * (size - len(REPLY))


def timed(chat, answer, limit):
    start = time.monotonic()
    try:
        expect(chat, answer)
    finally:
        if time.monotonic() - start > limit:
            raise Wrong(f"took {time.monotonic() - start:.1f} s, past the deadline")


def size_cases(rng, n):
    reply = []
    server = serve(lambda path: reply[0])

    def case(write, answer, words, limit=8.0, **settings):
        def run():
            reply[:] = [write]
            timed(lambda: replying_client(server.url, **settings).chat("s", "u"), answer, limit)

        return run, (client.LLMError,), words

    for _ in range(n):  # bodies around the cap, in each framing: the cap, never more, never less
        cap = rng.randint(len(REPLY), 300_000)
        size = rng.choice([cap, cap + 1, rng.randint(len(REPLY), cap), rng.randint(cap + 1, 3 * cap)])
        framing = rng.choice(["length", "chunked", "close"])
        answer = "42" if size <= cap else None
        yield case(raw_reply(padded(size), framing, server.stop), answer, ("too large",), max_reply_bytes=cap)
    for k in (8, 12, 15, 20, 30):  # a huge Content-Length, then nothing: refused at the header
        head = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n{" % 10**k
        write = lambda wfile, h=head: (wfile.write(h), server.stop.wait(30))
        yield case(write, None, ("too large",), limit=3.0, timeout=30)
    for part in ("head", "body"):  # a reply dripping a byte per 50 ms: one deadline for all of it
        slow = raw_reply(REPLY, "length", server.stop, every=0.05)
        if part == "head":
            yield case(slow, None, ("deadline",), limit=3.0, timeout=1)
        else:

            def write(wfile):
                wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(REPLY))
                raw_reply(REPLY, "close", server.stop, every=0.05)(wfile)

            yield case(write, None, ("deadline",), limit=3.0, timeout=1)
    yield case(raw_reply(REPLY, "length", server.stop, every=0.001), "42", ())  # slow but in time
    yield case(lambda wfile: server.stop.wait(30), None, ("deadline",), limit=3.0, timeout=1)  # silence
    for cut in (0, 1, len(REPLY) // 2, len(REPLY) - 1):  # the connection drops mid-body
        yield case(raw_reply(REPLY[:cut], "length", server.stop, length=len(REPLY)), None, ("no answer",))


RUNNER = """
import sys
from workbench.frontier import client
print("asking", flush=True)
print(client.run_benchmark(client.ChatClient("m", timeout=60), sys.argv[1], sys.argv[2]))
"""


def answer_ids(path):
    """ids answered in the answers file, in order (failure records left out)."""
    return [r["id"] for r in map(json.loads, Path(path).read_text(encoding="utf-8").splitlines()) if "response" in r]


def wait_until(condition, seconds=20.0):
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            raise Hang()
        time.sleep(0.02)


def two_runners(server, gate, bench, out, kill):
    """A runner in another process is held at its second question; this process starts a second
    runner on the same file: refused naming the first (or, once the first is killed, it resumes).
    Either way every question ends answered exactly once."""
    env = {**os.environ, client.BASE_URL_ENV: server.url + "/v1", client.API_KEY_ENV: KEY, "no_proxy": "127.0.0.1"}
    first = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(bench), str(out)],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: len(server.seen) >= 2, 60)
        if kill:
            first.kill()
            first.wait()
            gate.set()
            client.run_benchmark(replying_client(server.url), bench, out)
        else:
            try:
                client.run_benchmark(replying_client(server.url), bench, out)
                raise Wrong("a second runner appended to a file in use")
            except locks.InUse as e:
                if f"process {first.pid} " not in str(e) or str(out) not in str(e) or "\n" in str(e):
                    raise Wrong(f"the refusal does not name the holder and file in one line: {e}") from None
    finally:
        gate.set()
        first.communicate(timeout=60)
    ids = answer_ids(out)
    if sorted(ids) != sorted(set(ids)) or len(ids) != 4:
        raise Wrong(f"the file holds {ids}")


def failing_then_fine(rng, server, plan, bench, out):
    """Some questions get replies without an answer on the first run; the rerun asks exactly them
    again, and the loaded table holds each question once, never an empty answer."""
    bad = [rng.choice([{"content": None}, {"content": 7}, {"content": []}, {"content": "4\ud8002"}]) for _ in range(4)]
    fails = [rng.random() < 0.5 for _ in range(4)]
    plan[:] = [
        json.dumps({"choices": [{"message": b if f else {"content": "42"}}]}).encode() for b, f in zip(bad, fails)
    ] + [REPLY] * sum(fails)
    summary = client.run_benchmark(replying_client(server.url), bench, out)
    again = client.run_benchmark(replying_client(server.url), bench, out)
    if (summary.failed, again.answered, again.failed) != (sum(fails), sum(fails), 0):
        raise Wrong(f"first run {summary}, rerun {again}, failing {fails}")
    answers, _ = scoring.score_answers(out, bench)
    if len(answers) != 4 or set(answers["response"]) != {"42"}:
        raise Wrong(f"loaded {answers['response'].tolist()}")


def repeated_on_load(rng, bench, folder):
    """Answers repeated (two runners, a copied file) are loaded once, the first answer kept."""
    rows = [json.loads(line) for line in Path(bench).read_text().splitlines()]
    records, first = [], {}
    for _ in range(rng.randint(1, 12)):
        row = rng.choice(rows)
        record = {"id": row["id"], "task": row["task"], "model": rng.choice(["m", "n"])}
        if rng.random() < 0.3:
            records.append({**record, "error": "HTTP 500"})
            continue
        records.append({**record, "response": rng.choice(["1", "2", "[1, 2]", ""])})
        first.setdefault((record["model"], row["id"]), records[-1]["response"])
    Path(folder, "bench.jsonl").write_text(Path(bench).read_text())
    Path(folder, "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    loaded = answer_folders.load_answer_folder(folder)
    scored, _ = scoring.score_answers(Path(folder, "answers.jsonl"), bench)
    for table in (loaded, scored):
        if len(table) != len(first):
            raise Wrong(f"{len(table)} answers loaded from {len(first)} questions")
    got = dict(zip(zip(scored["model"], scored["id"]), scored["response"]))
    if got != first:
        raise Wrong(f"kept {got}, the first answers are {first}")


def concurrency_cases(rng, n, folder):
    gate, plan = threading.Event(), []

    def respond(path):
        if plan:
            return 200, {}, plan.pop(0)
        if len(held.seen) >= 2:  # the first runner's second question waits for the gate
            gate.wait(60)
        return 200, {}, REPLY

    held = serve(respond)
    bench = Path(folder) / "frontier_bench"
    prompts.export_benchmark(bench, n_per_task=2, seed=0, task_list=["addition", "sorting"])
    bench = bench.with_suffix(".jsonl")
    for k, kill in enumerate([False, True, False]):

        def case(k=k, kill=kill):
            held.seen.clear()
            gate.clear()
            two_runners(held, gate, bench, Path(folder) / f"runners{k}.jsonl", kill)

        yield case, (), (), 90.0
    for k in range(n):
        yield (lambda k=k: failing_then_fine(rng, held, plan, bench, Path(folder) / f"failing{k}.jsonl")), (), ()
    for k in range(n):
        sub = Path(folder) / f"loaded{k}"
        sub.mkdir()
        yield (lambda s=sub: repeated_on_load(rng, bench, s)), (), ()


# -- training flags and run directories --------------------------------------------------------
BAD_FIELDS = {  # field -> values that must be refused, naming the flag
    "checkpoint_every": [0, -1, 2.5, True],
    "eval_every": [0, -3],
    "test_samples": [0, -1],
    "val_samples": [0],
    "pool_size": [0, -10],
    "batch_size": [0, -2],
    "tokens": [math.inf, math.nan, 0, -1e6],
    "context": [0, 4, 100_000, -8],
    "out": ["", "   "],
    "threads": [-1],
    "seed": [-1],
    "encoding": ["base64", ""],
    "tasks": [(), ("nope",), ("addition", "addition")],
    "preset": ["huge"],
    "decades": [(3, 1), (-20, 0), (0, 99)],
    "max_digits": [0, 18],
    "adapt_warmup": [-0.1, 2.0],
    "balance_floor": [1.0, -0.5],
    "balance_lambda": [2.0],
    "max_task_ratio": [0.01, 1.5],
    "max_answer_tokens": [-1],
    "text_source": ["ftp:x", ""],
    "activation": ["swish"],
    "norm": ["batch"],
    "encoding_options": [{"combine": "glue"}, {"nope": 1}],
}
GOOD_FIELDS = {
    "checkpoint_every": [1, 500],
    "tokens": [1.0, 3e6],
    "context": [8, 1024],
    "decades": [(0, 1), None],
    "max_digits": [1, 17, None],
    "tasks": [("addition", "text")],
    "encoding": ["xval", "numerologic"],
}


def train_cases(rng, folder):
    from workbench.runs import checkpoints
    from workbench.runs import folder as run_folder
    from workbench.training import train as T  # the training loop's checks, imported only for this category

    small = dict(preset="cpu-tiny", batch_size=2, tokens=1024.0, threads=1)
    for name, values in BAD_FIELDS.items():
        for value in values:

            def case(name=name, value=value):
                refused(T.TrainConfig.of(**{**small, name: value}))

            words = (
                name.replace("_", "-"),
                "unknown encoding",
                "encoding",
                "decades",
                "max_digits",
                "text source",
                "must be one of",
                "no option",
                "preset",
                "tasks",
                "unknown task",
            )
            yield case, (ValueError,), words
    for name, values in GOOD_FIELDS.items():
        for value in values:
            yield (lambda name=name, value=value: T.TrainConfig.of(**{**small, name: value})), (), ()
    for k in range(10):  # a run directory: resume needs a checkpoint, an old run is never replaced
        out = Path(folder) / f"run{k}"
        out.mkdir()
        (out / rng.choice(["metrics.jsonl", "best.pt", "config.json"])).write_text("{}")
        cfg = T.TrainConfig.of(**small, out=str(out))
        yield (
            (lambda cfg=cfg: refused(run_folder.prepare(cfg, resume=True, rank=0))),
            (FileNotFoundError,),
            ("--resume",),
        )
        yield (
            (lambda cfg=cfg: refused(run_folder.prepare(cfg, resume=False, rank=0))),
            (FileExistsError,),
            ("--overwrite",),
        )
        bad = out / "checkpoint.pt"
        bad.write_bytes(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200))))
        yield (lambda bad=bad: refused(checkpoints.load_checkpoint(bad))), (ValueError,), ("corrupt",)
    huge = T.TrainConfig.of(**{**small, "batch_size": 64}, context=65536)
    yield (lambda: refused(T.check_memory(huge, 2100))), (MemoryError,), ("--batch-size",)


HOLDER = "import sys, time\nfrom workbench.runs.locks import hold\nwith hold(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(600)\n"


def held_by_another_process(folder):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "held":
        raise RuntimeError("the lock holder did not start")
    return proc


def writer_cases(rng, folder):
    """Two writers, one folder: a run directory, a study folder or a comparison's folder held by
    another process is refused at once naming its PID; a refused resume changes no file."""
    from workbench import experiments, study
    from workbench.training import train as T

    small = dict(
        preset="cpu-tiny",
        batch_size=2,
        tokens=2 * 128 * 2,
        pool_size=50,
        val_samples=4,
        test_samples=4,
        eval_every=2,
        threads=1,
        tasks=("addition",),
    )
    writers = [
        lambda out: T.train(T.TrainConfig.of(**small, out=str(out))),
        lambda out: T.train(T.TrainConfig.of(**small, out=str(out)), resume=True),
        lambda out: study.run_study([], out, jobs=1),
        lambda out: experiments.run_protocol("cpu-tier", seeds=(0,), out=out, encodings=["bittokens"]),
    ]
    for k, write in enumerate(writers * 2):
        out = Path(folder) / f"held{k}"

        def case(write=write, out=out):
            holder = held_by_another_process(out)
            try:
                refused(write(out))
            except locks.InUse as err:
                if f"process {holder.pid} " not in str(err):
                    raise Wrong(f"the refusal does not name the holder {holder.pid}: {err}") from None
                raise
            finally:
                holder.kill()
                holder.wait()

        yield case, (locks.InUse,), ("in use by process",)
    done = Path(folder) / "finished"
    T.train(T.TrainConfig.of(**small, out=str(done)))
    for _ in range(6):  # a resume with another configuration: refused, and not one byte changes
        changed = rng.choice(
            [
                dict(seed=rng.randint(1, 9)),
                dict(max_digits=rng.randint(2, 5)),
                dict(tasks=("addition", "minmax")),
                dict(pool_size=rng.randint(60, 90)),
            ]
        )

        def case(changed=changed):
            before = {p.name: p.read_bytes() for p in done.iterdir() if p.is_file()}
            try:
                refused(T.train(T.TrainConfig.of(**{**small, **changed}, out=str(done)), resume=True))
            finally:
                if {p.name: p.read_bytes() for p in done.iterdir() if p.is_file()} != before:
                    raise Wrong(f"a refused resume ({changed}) changed the run directory")

        yield case, (ValueError,), ("another configuration",)


def size_of_questions_cases(rng):
    """A run whose questions cannot fit in memory is refused before its first step, naming them."""
    from workbench.training import train as T

    tok = Tokenizer("bittokens")
    for _ in range(6):
        flag, value = rng.choice(
            [
                ("test_samples", 10 ** rng.randint(8, 10)),
                ("pool_size", 10 ** rng.randint(8, 10)),
                ("val_samples", 10 ** rng.randint(8, 10)),
            ]
        )
        cfg = T.TrainConfig.of(tasks=("addition", "sorting"), threads=1, **{flag: value})
        yield (
            (lambda cfg=cfg: refused(T.check_memory(cfg, tok.vocab_size, tok))),
            (MemoryError,),
            ("--" + flag.replace("_", "-"),),
        )
    fits = T.TrainConfig.of(tasks=("addition", "sorting", "text"), threads=1)
    yield (lambda: T.check_memory(fits, tok.vocab_size, tok)), (), ()


# -- issue 39: what another user of a shared machine can plant, and values beyond a range ------
class CodeRan(Exception):
    """Code planted by the attack ran (its marker file appeared)."""


def train_module():
    """workbench.training.train, and where a run's folder helpers live (the run folder's modules)."""
    from types import SimpleNamespace

    from workbench.runs import checkpoints, folder
    from workbench.training import train as T

    return T, SimpleNamespace(load_run=checkpoints.load_run, resumable=folder.resumable)


def train_config(**settings):
    T, _ = train_module()
    return T.TrainConfig.of(**settings) if hasattr(T.TrainConfig, "of") else T.TrainConfig(**settings)


TINY_RUN = dict(
    preset="cpu-tiny",
    batch_size=2,
    tokens=2 * 128 * 4,
    pool_size=50,
    val_samples=4,
    test_samples=4,
    eval_every=2,
    checkpoint_every=2,
    threads=1,
    tasks=("addition",),
)
PRECIOUS = b"precious bytes the attack must find unchanged\n"


def snapshot(paths):
    """What each path is now: its bytes, 'link -> target', 'missing' or 'folder' (nothing followed)."""
    state = {}
    for p in map(Path, paths):
        state[p] = (
            f"link -> {os.readlink(p)}"
            if p.is_symlink()
            else "missing"
            if not p.exists()
            else "folder"
            if p.is_dir()
            else "fifo"
            if p.is_fifo()
            else p.read_bytes()
        )
    return state


def nothing_lost(before):
    after = snapshot(before)
    changed = [str(p) for p in before if before[p] != after[p]]
    if changed:
        raise Wrong(f"changed by a refused command: {changed[:3]}")


def plant_lock(kind, lock: Path, victim: Path, ghost: Path):
    """Put at `lock` a symbolic link (to the victim, or dangling to `ghost`), a hard link to the
    victim, a FIFO or a folder."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink":
        lock.symlink_to(victim)
    elif kind == "dangling link":
        lock.symlink_to(ghost)
    elif kind == "hard link":
        os.link(victim, lock)
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()


def lock_cases(rng, folder):
    """A planted .lock under each command that takes a lock: refused, the file it points to kept;
    a lock removed or a folder moved under a live holder; two threads of one process."""
    from workbench import study
    from workbench.runs.atomic import write_atomic

    T, _ = train_module()
    base = Path(folder) / "locks"
    base.mkdir()
    answer = serve(lambda path: (200, {}, REPLY))
    bench = base / "bench"
    prompts.export_benchmark(bench, n_per_task=2, seed=0, task_list=["addition"])
    bench = bench.with_suffix(".jsonl")
    commands = {  # name: (the lock file of target t, the command on t)
        "hold": (lambda t: t / ".lock", lambda t: locks.hold(t).__enter__()),
        "hold_file": (lambda t: t.parent / f".{t.name}.lock", lambda t: locks.hold_file(t).__enter__()),
        "study": (lambda t: t / ".lock", lambda t: study.run_study([], t, jobs=1)),
        "train": (lambda t: t / ".lock", lambda t: T.train(train_config(**TINY_RUN, out=str(t)))),
        "answers": (
            lambda t: t.parent / f".{t.name}.lock",
            lambda t: client.run_benchmark(replying_client(answer.url), bench, t),
        ),
    }
    k = 0
    for kind in ("symlink", "dangling link", "hard link", "fifo", "folder"):
        for name, (lock_of, command) in commands.items():
            k += 1
            target = base / f"case{k}" / ("run" if name in ("hold", "study", "train") else "answers.jsonl")
            victim, ghost = base / f"victim{k}.txt", base / f"ghost{k}.txt"
            victim.write_bytes(PRECIOUS)
            plant_lock(kind, lock_of(target), victim, ghost)

            def case(target=target, command=command, watch=(victim, ghost, lock_of(target))):
                before = snapshot(watch)
                try:
                    refused(command(target))
                finally:
                    nothing_lost(before)

            yield case, (locks.InUse,), ("symbolic link", "names", "not a plain file", "cannot be opened")
    for k in range(2):  # .lock removed under a live holder in another process: nobody else gets in
        run = base / f"removed{k}"

        def case(run=run, k=k):
            holder = held_by_another_process(run)
            try:
                (run / ".lock").unlink()
                refused((locks.hold(run).__enter__ if k == 0 else lambda: study.run_study([], run, jobs=1))())
            finally:
                holder.kill()
                holder.wait()

        yield case, (locks.InUse,), ("in use by process",)
    for k, change in enumerate(("moved", "moved", "removed", "replaced")):
        run = base / f"{change}{k}"

        def case(run=run, change=change):
            with locks.hold(run):
                write_atomic(run / "a.txt", lambda tmp: Path(tmp).write_text("mine"))
                second = None
                if change == "moved":
                    run.rename(run.with_name(run.name + "-aside"))
                    second = held_by_another_process(run)
                else:
                    (run / ".lock").unlink()
                    if change == "replaced":
                        (run / ".lock").write_text("")
                try:
                    write_atomic(run / "b.txt", lambda tmp: Path(tmp).write_text("mine too"))
                    raise Wrong(f"wrote into a folder whose lock was {change}")
                finally:
                    if second:
                        second.kill()
                        second.wait()
                    if (run / "b.txt").exists():
                        raise Wrong("the write went through")

        yield case, (locks.InUse,), ("while this process held its lock",)
    for kind in ("hold", "hold_file"):  # a second thread of the holding process

        def case(kind=kind):
            take = locks.hold if kind == "hold" else locks.hold_file
            path, outcome = base / f"threads-{kind}", []

            def second():
                try:
                    with take(path):
                        outcome.append("held")
                except locks.InUse as err:
                    outcome.append(err)

            with take(path):
                thread = threading.Thread(target=second)
                thread.start()
                thread.join(30)
            if outcome and isinstance(outcome[0], Exception):
                raise outcome[0]
            raise Wrong("a second thread took the lock the first held")

        yield case, (locks.InUse,), ("another thread of this process",)
    slow = serve(lambda path: (time.sleep(0.05), (200, {}, REPLY))[1])
    for trial in range(5):  # two frontier runners in one process, one answers file

        def case(trial=trial):
            out, errors = base / f"runners{trial}.jsonl", []

            def runner():
                try:
                    client.run_benchmark(replying_client(slow.url), bench, out)
                except locks.InUse as err:
                    errors.append(err)

            threads = [threading.Thread(target=runner) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            ids = answer_ids(out)
            if len(ids) != len(set(ids)):
                raise Wrong(f"questions asked twice: {len(ids)} answers for {len(set(ids))} questions")
            if len(errors) != 1:
                raise Wrong(f"{len(errors)} runners refused, one should be")
            raise errors[0]

        yield case, (locks.InUse,), ("another thread of this process",)


PLANTED_C = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
    const char *mark = getenv("PLANTED_MARK");
    FILE *f = mark ? fopen(mark, "w") : 0;
    if (f) { fputs("ran", f); fclose(f); }
}
"""
LOAD_KERNELS = (
    "import warnings; warnings.simplefilter('always')\n"
    "from workbench.model import cpu_kernels\nprint('LOADED' if cpu_kernels.library() is not None else 'OFF')"
)


def kernel_cases(folder):
    """A library planted at the kernels' cache name: never loaded (its constructor never runs);
    a foreign folder refused, a broken library built again."""
    import hashlib
    import platform

    from workbench.model import cpu_kernels

    compiler = os.environ.get("CC") or "cc"
    base = Path(folder) / "kernels"
    base.mkdir()
    if subprocess.run(["which", compiler], capture_output=True).returncode:
        return
    (base / "planted.c").write_text(PLANTED_C)
    (base / "empty.c").write_text("int nothing_here(void) { return 0; }\n")
    for name in ("planted", "empty"):
        subprocess.run(
            [compiler, "-shared", "-fPIC", "-o", str(base / f"{name}.so"), str(base / f"{name}.c")], check=True
        )
    key = hashlib.sha256(
        "\0".join(
            [cpu_kernels.SOURCE.read_text(), compiler, *cpu_kernels.flags(), platform.machine(), platform.node()]
        ).encode()
    ).hexdigest()[:16]
    lib = f"cpu_kernels-{key}.so"

    def sha(p):
        return hashlib.sha256(Path(p).read_bytes()).hexdigest()

    def setup(cache, how):
        """The cache as the attacker leaves it; the planted library at the old flat name too."""
        private = cache / "cpu_kernels"
        private.mkdir(parents=True)
        shutil.copy(base / "planted.so", cache / lib)  # where an older workbench looked
        if how == "folder a link":
            elsewhere = cache.with_name(cache.name + "-elsewhere")
            elsewhere.mkdir(mode=0o700)
            shutil.copy(base / "planted.so", elsewhere / lib)
            (elsewhere / f"{lib}.sha256").write_text(sha(base / "planted.so"))
            private.rmdir()
            private.symlink_to(elsewhere)
            return "refused"
        source = base / ("empty.so" if how == "no kernels in it" else "planted.so")
        if how == "empty file":
            (private / lib).write_bytes(b"")
        elif how == "library a link":
            (private / lib).symlink_to(source)
        else:
            shutil.copy(source, private / lib)
        record = {"no record": None, "wrong record": "0" * 64}.get(how, sha(private / lib))
        if record is not None:
            (private / f"{lib}.sha256").write_text(record + "\n")
        if how == "group-writable library":
            (private / lib).chmod(0o666)
        mode = {"folder open to all": 0o777, "folder open to the group": 0o770}.get(how, 0o700)
        private.chmod(mode)
        if how == "folder of another user":
            os.chown(private, 65534, 65534)
        return "refused" if how.startswith("folder") else "rebuilt"

    hows = [
        "folder open to all",
        "folder open to the group",
        "folder a link",
        "no record",
        "wrong record",
        "library a link",
        "group-writable library",
        "no kernels in it",
        "empty file",
    ]
    if os.getuid() == 0:
        hows.append("folder of another user")
    for k, how in enumerate(hows):

        def case(k=k, how=how):
            cache, mark = base / f"cache{k}", base / f"ran{k}"
            expected = setup(cache, how)
            env = {**os.environ, "WORKBENCH_CACHE": str(cache), "PLANTED_MARK": str(mark)}
            env.pop("WORKBENCH_CPU_KERNELS", None)
            done = subprocess.run(
                [sys.executable, "-c", LOAD_KERNELS], env=env, capture_output=True, text=True, timeout=300
            )
            if mark.exists():
                raise CodeRan(f"{how}: the planted library's constructor ran")
            said = done.stdout.strip().splitlines()[-1:] or ["nothing"]
            if done.returncode != 0:
                raise RuntimeError(f"{how}: exit {done.returncode}: {done.stderr.strip()[-200:]}")
            if expected == "rebuilt":
                if said != ["LOADED"]:
                    raise Wrong(f"{how}: the kernels were not built again ({said}, {done.stderr.strip()[-150:]})")
                return
            if said != ["OFF"]:
                raise Wrong(f"{how}: loaded from a folder that is not private")
            raise ValueError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no warning")

        yield case, (ValueError,), ("private to you",)


class PlantedResult:
    """Unpickled, it touches its marker (code ran) and reads as a finished job's result."""

    def __init__(self, mark):
        self.mark = mark

    def __reduce__(self):
        return Path.touch, (Path(self.mark),)


def job_cases(folder):
    """Result files planted under the process IDs the next jobs will get (another user's code, or
    an old job of one's own), and the job killed before it writes its own: never read."""
    import pickle

    from workbench.runs import executors

    try:
        import submitit  # noqa: F401
    except ImportError:
        return
    base = Path(folder) / "jobs"
    jobs = executors.Executor("submitit-local", array_parallelism=1, time=10)
    for k, kind in enumerate(["planted code"] * 3 + ["an old result of one's own"] * 2):

        def case(k=k, kind=kind):
            out, mark = base / f"out{k}", base / f"ran{k}"
            (out / "jobs").mkdir(parents=True)
            planted = ("success", PlantedResult(mark)) if kind == "planted code" else ("success", None)
            data = pickle.dumps(planted)
            last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
            for pid in range(last + 1, last + 3000):
                (out / "jobs" / f"{pid}_0_result.pkl").write_bytes(data)
            ended, errors = {}, []

            def submit():
                try:
                    result = executors._submit_and_wait(
                        {"run": train_config(**TINY_RUN)}, out, 1, False, "attack", jobs
                    )
                    ended.update(result[0] if isinstance(result, tuple) else result)
                except Exception as err:  # noqa: BLE001 - reported as this input's crash
                    errors.append(err)

            thread = threading.Thread(target=submit, daemon=True)
            thread.start()
            wait_until(lambda: list((out / "jobs").rglob("*_submitted.pkl")) or errors, 120)
            for job in (out / "jobs").rglob("*_submitted.pkl"):
                try:
                    os.kill(int(job.name.split("_")[0]), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            thread.join(120)
            if mark.exists():
                raise CodeRan("a planted result file was unpickled")
            if errors:
                raise errors[0]
            if ended.get("run", ("",))[0] != "killed":
                raise Wrong(f"a killed job was reported {ended.get('run')}")

        yield case, (), (), 200.0


HTML_PAYLOADS = [
    '<a href="https://evil.example">2</a>',
    "<b>bold</b>",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "&lt;b&gt;",
    "a<br>b",
    "<span style='font-size:90px'>x</span>",
    "</text><svg onload=alert(1)>",
    "<i>",
    "x & y > z",
]


def leaderboard_intervals():
    rows = []
    for study, encoding, mean in [
        ("multitask_numeric", "bittokens", 0.9),
        ("multitask_numeric", "xval", 0.1),
        ("zoo_multitask", "abacus", 0.5),
    ]:
        rows.append(
            dict(
                study=study,
                encoding=encoding,
                task="addition",
                digits=1,
                metric="log_smape",
                mean=mean,
                low=mean - 0.05,
                high=mean + 0.05,
            )
        )
    rows.append(
        dict(
            study="zoo_precision",
            encoding="abacus",
            task="division",
            digits=2,
            metric="log_smape",
            mean=0.5,
            low=0.4,
            high=0.6,
        )
    )
    return rows


def html_cases():
    """Hostile text in the intervals' cells: every label the figure shows is text, never markup."""
    import html as html_module

    import pandas as pd

    from workbench import leaderboard

    for payload in HTML_PAYLOADS:
        for column in ("digits", "task", "encoding", "study"):

            def case(payload=payload, column=column):
                rows = pd.DataFrame(leaderboard_intervals())
                rows[column] = rows[column].astype(object)
                rows.loc[rows.study == "zoo_precision", column] = payload
                heat = leaderboard.figure(leaderboard.leaderboard(rows)).data[0]
                shown = (
                    [str(s) for s in list(heat.x) + list(heat.y)]
                    + [str(s) for row in heat.hovertext for s in row]
                    + [str(s) for row in heat.text for s in row]
                )
                raw = [s for s in shown if "<" in s.replace("<br>", "") or ">" in s.replace("<br>", "")]
                if raw:
                    raise Wrong(f"markup from the data in a label: {raw[0][:80]!r}")
                if column == "digits" and not any(html_module.unescape(s).endswith(payload) for s in heat.x):
                    raise Wrong(f"the label does not show {payload!r} as text")

            # refused where the rows enter (study/rows.py: names registered, digits a positive integer)
            yield case, (ValueError,), ("unknown", "not registered", "is not a positive integer")


def tokenizer_cache_edits():
    """(label, "json" or "raw", the edit of the parsed JSON) of every change made to a cached BPE."""

    def merges(f):
        def edit(d):
            f(d["model"]["merges"])

        return edit

    yield "one pair of merges swapped", "json", merges(lambda m: m.__setitem__(slice(0, 2), m[1::-1]))
    yield "ten merges swapped", "json", merges(lambda m: m.__setitem__(slice(5, 15), m[14:4:-1]))
    yield "200 merges reordered", "json", merges(lambda m: m.__setitem__(slice(0, 200), m[199::-1]))
    yield "every merge reversed", "json", merges(lambda m: m.reverse())
    yield "the last merge dropped", "json", merges(lambda m: m.pop())
    yield "a vocabulary id changed", "json", lambda d: d["model"]["vocab"].update({"Ġthe": 3})
    yield "a token added", "json", lambda d: d["model"]["vocab"].update({"Ġzzz": len(d["model"]["vocab"])})
    for label in (
        "cut in half",
        "empty",
        "not JSON",
        "another corpus's BPE",
        "a link to another BPE",
        "record removed",
        "record garbage",
        "file and record rewritten",
    ):
        yield label, "raw", None


def tokenizer_cache_cases(rng, folder):
    """The cached BPE edited on disk: built again (the same tokens, the same checksum) or, where the
    record was rewritten too, a different checksum, which a run records; never other tokens under
    the same record. And the cache key holds the tokenizers version."""
    import hashlib

    base = Path(folder) / "bpe"
    base.mkdir()
    corpus, other = base / "corpus.txt", base / "other.txt"
    words = ["alpha", "beta", "gamma", "delta", "number", "value", "the", "and", "of", "result", "sum"]
    corpus.write_text(
        "\n".join(" ".join(rng.choice(words) for _ in range(12)) + f" {rng.randint(0, 999)}" for _ in range(400))
    )
    other.write_text("zebra quokka xylophone " * 300)
    probe = "the sum of alpha and beta is 12, the value of gamma 3.5"

    def make(cache, text=corpus):
        return Tokenizer("bittokens", vocab_size=320, corpus_files=[text], cache_dir=cache)

    reference = make(base / "reference")
    want_ids, want_sum = reference.encode(probe)[0].tolist(), getattr(reference, "checksum", None)
    make(base / "foreign", other)
    [foreign] = (base / "foreign").glob("*.json")
    for k, (label, how, edit) in enumerate(tokenizer_cache_edits()):

        def case(k=k, label=label, how=how, edit=edit):
            cache = base / f"edit{k}"
            shutil.copytree(base / "reference", cache, symlinks=True)
            [path] = cache.glob("*.json")
            record = path.with_suffix(".sha256")
            if how == "json":
                data = json.loads(path.read_text())
                edit(data)
                path.write_text(json.dumps(data))
            elif label == "cut in half":
                path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
            elif label == "empty":
                path.write_bytes(b"")
            elif label == "not JSON":
                path.write_text("{not json")
            elif label == "another corpus's BPE":
                shutil.copy(foreign, path)
            elif label == "a link to another BPE":
                path.unlink()
                path.symlink_to(foreign)
            elif label == "record removed":
                record.unlink(missing_ok=True)
            elif label == "record garbage":
                record.write_text("garbage")
            else:  # the attacker's BPE with a record that matches it
                shutil.copy(foreign, path)
                record.write_text(hashlib.sha256(path.read_bytes()).hexdigest() + "\n")
            tok = make(cache)
            ids, checksum = tok.encode(probe)[0].tolist(), getattr(tok, "checksum", None)
            if ids == want_ids and checksum == want_sum:
                return  # built again (or an edit that changes nothing), recorded alike
            if checksum is not None and checksum != want_sum:
                return  # another tokenizer, and the run's record says so
            raise Wrong(f"{label}: other tokens under the same record (checksum {checksum})")

        yield case, (ValueError, OSError), ("tokenizer",)

    def version_key():
        import tokenizers

        real, cache = tokenizers.__version__, base / "versions"
        make(cache)
        tokenizers.__version__ = "0.0.0-another"
        try:
            make(cache)
        finally:
            tokenizers.__version__ = real
        if len(list(cache.glob("*.json"))) != 2:
            raise Wrong("a BPE trained by another tokenizers version was taken from the cache")

    yield version_key, (), ()


def representable(name, x):
    """Whether encoding `name` holds x (its module docstring), None where the oracle does not say."""
    if not math.isfinite(x):
        return name == "bittokens"
    if name == "bittokens":
        return True
    if name == "fone":
        if x < 0 or abs(x) >= 1e17:
            return x == 0
        with localcontext() as ctx:
            ctx.prec = 400
            return (Decimal(repr(x)) * Decimal(10) ** 32) % 1 == 0
    if name == "xval":
        return x == 0 or abs(x) >= 1e-14
    if name == "log_xval":
        return x == 0 or abs(x) >= 2.2250738585072014e-308 * math.log(10) * 6
    return None


def names_the_value(message, x):
    return repr(x) in message or (float(x).is_integer() and str(int(x)) in message)


def check_range(name, codec, x, given=None):
    """A value the encoding holds comes back (bit for bit, or to ~1e-12 for the xVals); one it does
    not is a ValueError naming the encoding and the value."""
    given = torch.tensor([x], dtype=torch.float64) if given is None else given
    holds = representable(name, x)
    try:
        back = float(codec.decode(codec.encode(given))[0])
    except ValueError as err:
        if holds:
            raise Wrong(f"{name}: refused {x!r}, which it holds: {err}") from None
        if name not in str(err) or not names_the_value(str(err), x):
            raise RuntimeError(f"unclear: {str(err)[:120]}") from None
        raise
    if holds is False:
        raise Wrong(f"{name}: {x!r} is beyond it, yet came back as {back!r} without an error")
    if name in ("xval", "log_xval"):
        ok = back == x if x == 0 else (math.isfinite(back) and abs(back - x) <= 1e-12 * abs(x))
    else:
        ok = struct.pack(">d", back) == struct.pack(">d", x) or (name == "fone" and x == 0 and back == 0)
    if not ok:
        raise Wrong(f"{name}: {x!r} came back as {back!r}")


def decoded_encodes(codec, outputs):
    """What decode gives for any head output (a model's own number, fed back during generation)
    encodes again."""
    back = codec.decode(outputs)
    back = back[torch.isfinite(back)]
    try:
        codec.encode(back)
    except ValueError as err:
        raise Wrong(f"{codec.name}: decode gave a number encode refuses: {err}") from None


RANGE_EDGES = [
    1e20,
    1e17,
    9.999999999999998e16,
    1.5e17,
    1e16,
    1e-32,
    1.5e-32,
    1e-33,
    1e-40,
    1.2345678901234567e-20,
    1e-15,
    9.9e-15,
    1e-14,
    1.0000000000000001e-14,
    -1e-20,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    3.1e-307,
    1e-300,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    -2.5,
    -0.0,
    0.0,
    123.456,
    1e15,
    1.2345678901234567e-14,
    9.87654321e14,
    -1e-14,
    3e-307,
    0.1,
    7.0,
]


def range_cases(rng, n):
    codecs = {name: encoders.get(name) for name in encoders.names()}
    values = list(RANGE_EDGES)
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(n)]
    values += [float(f"{rng.randint(1, 10 ** rng.randint(1, 17))}e{rng.randint(-30, 0)}") for _ in range(n // 2)]
    values = [v for v in values if math.isfinite(v)]
    for name, codec in codecs.items():
        for x in values:
            yield (lambda m=name, c=codec, v=x: check_range(m, c, v)), (ValueError,), ("cannot encode",)
    for name in ("bittokens", "fone", "xval", "log_xval"):
        codec = codecs[name]
        for k in range(5):
            gen = torch.Generator().manual_seed(rng.getrandbits(31))
            if name in ("xval", "log_xval"):
                outputs = torch.cat(
                    [
                        torch.randn(2000, 1, generator=gen, dtype=torch.float64) * 10**k,
                        torch.randn(200, 1, generator=gen, dtype=torch.float64) * 10.0 ** (-300 - k),
                    ]
                )
            else:
                outputs = torch.randn(2000, codec.width, generator=gen, dtype=torch.float64)
                if name == "fone" and k == 0:  # seventeen 9s before the point
                    angle = torch.full((1, 49), 2 * math.pi * 0.95, dtype=torch.float64)
                    outputs = torch.stack([angle.cos(), angle.sin()], -1).reshape(1, -1)
            yield (lambda c=codec, o=outputs: decoded_encodes(c, o)), (ValueError,), ()
    tok = Tokenizer("scientific")
    for text in ["1,000,000", "x 007", "-00 and 1.50", "1.2.3", ".5", "0.50", "12 and 3.25", "-4", "1e5", "100"]:

        def case(text=text):
            if not FORMS:
                return
            ids, values_, forms = tok.encode(text, forms=True)
            back = tok.decode(ids, values_, forms)
            if back != text:
                raise Wrong(f"scientific: {text!r} came back as {back!r}")

        yield case, (ValueError,), ("keeps a number's value, not its written form",)


def crafted_checkpoint_cases(folder):
    """Checkpoints that load with weights_only=True but are no checkpoint of this run: a resume
    and a model load refuse each in one clear error naming the file, or take it harmlessly."""
    import copy

    T, R = train_module()
    base = Path(folder) / "checkpoints"
    done = base / "done"
    T.train(train_config(**TINY_RUN, out=str(done)))
    real = torch.load(done / "checkpoint.pt", weights_only=True)
    best = torch.load(done / "best.pt", weights_only=True)
    first = next(iter(real["model"]))

    def variant(change):
        ckpt = copy.deepcopy(real)
        change(ckpt)
        return ckpt

    resumes = {
        "a list": [1, 2],
        "an empty dict": {},
        "a tensor": torch.zeros(3),
        "config a list": variant(lambda c: c.update(config=[1])),
        "no model": variant(lambda c: c.pop("model")),
        "model a tensor": variant(lambda c: c.update(model=torch.zeros(2))),
        "a weight of another shape": variant(lambda c: c["model"].update({first: torch.zeros(3, 3)})),
        "a weight missing": variant(lambda c: c["model"].pop(first)),
        "no optimizer state": variant(lambda c: c.update(optimizers=[])),
        "optimizer groups emptied": variant(lambda c: c["optimizers"][0]["param_groups"].clear()),
        "rng not JSON": variant(lambda c: c.update(rng="not json")),
        "rng of another generator": variant(lambda c: c.update(rng=json.dumps({"bit_generator": "MT19937"}))),
        "torch_rng too short": variant(lambda c: c.update(torch_rng=torch.zeros(3, dtype=torch.uint8))),
        "state without step": variant(lambda c: c.update(state={})),
        "state a list": variant(lambda c: c.update(state=[1])),
        "curricula of an unknown task": variant(lambda c: c.update(curricula={"nope": {}})),
        "balancer a string": variant(lambda c: c.update(balancer="x")),
        "normalizer empty": variant(lambda c: c.update(normalizer={})),
        "step beyond the run": variant(lambda c: c["state"].update(step=10**9)),
    }
    harmless = {"a weight of another dtype", "a NaN weight"}  # loaded as this model's weights, cast
    weights = {
        "a list": [1],
        "an empty dict": {},
        "a tensor": torch.zeros(2),
        "a weight of another shape": {**best, first: torch.zeros(3, 3)},
        "a weight missing": {k: v for k, v in best.items() if k != first},
        "an extra weight": {**best, "x.weight": torch.zeros(1)},
        "a weight of another dtype": {**best, first: best[first].double()},
        "a NaN weight": {**best, first: best[first] * float("nan")},
    }

    def copy_run(k):
        out = base / f"run{k}"
        shutil.copytree(done, out)
        return out

    k = 0
    for label, ckpt in resumes.items():
        k += 1
        out = copy_run(k)
        (out / "test_summary.csv").unlink()
        torch.save(ckpt, out / "checkpoint.pt")

        def resume(out=out, label=label):
            try:
                T.train(train_config(**TINY_RUN, out=str(out)), resume=True)
            except (ValueError, OSError, locks.InUse) as err:
                if "checkpoint.pt" not in str(err):
                    raise RuntimeError(f"{label}: unclear {type(err).__name__}: {str(err)[:100]}") from None
                raise
            raise Wrong(f"{label}: resumed from it")

        def resumable(out=out):  # True or False (a True is followed by the resume above: a clear error)
            R.resumable(train_config(**TINY_RUN, out=str(out)))

        yield resume, (ValueError, OSError, locks.InUse), ("checkpoint.pt",)
        yield resumable, (), ()
    for label, state in weights.items():
        k += 1
        out = copy_run(k)
        torch.save(state, out / "best.pt")

        def load(out=out, label=label):
            try:
                R.load_run(out)
            except (ValueError, OSError) as err:
                if "best.pt" not in str(err):
                    raise RuntimeError(f"{label}: unclear {type(err).__name__}: {str(err)[:100]}") from None
                raise
            if label not in harmless:
                raise Wrong(f"{label}: loaded as the run's model")

        yield load, (ValueError, OSError), ("best.pt",)


# The bounds the runner's parameters take (its `params` listing), written here independently.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
BOUNDS = {
    "01_desiderata": {"n_values": (100, 10**6), "seed": (0, 2**32 - 1), "d9_steps": (1, 10**5), "threads": (1, CORES)},
    "02_fone_locality": {
        "n_pairs": (1, 10**6),
        "grid_digits": (1, 3),
        "precision": (2, 1000),
        "probe_steps": (1, 10**4),
        "seed": (0, 2**32 - 1),
        "threads": (1, CORES),
    },
    "03_training": {
        "tokens": (1, 1e11),
        "seed": (0, 2**32 - 1),
        "max_digits": (1, 17),
        "eval_every": (1, 10**6),
        "val_samples": (1, 10**5),
        "test_samples": (1, 10**5),
        "threads": (1, CORES),
    },
    "04_paper_figures": {
        "exponent_samples": (1, 10**7),
        "generator_samples": (1, 10**6),
        "bootstrap_draws": (1, 10**5),
        "seed": (0, 2**32 - 1),
    },
}
OUTPUT_KEYS = ("out_dir", "figures_dir")


def writable_folder(value) -> bool:
    """The oracle of where a run may write: outside the repository, or inside its runs/ folder."""
    root = notebooks.ROOT.resolve()
    path = (root / value).resolve()
    return not path.is_relative_to(root) or path.is_relative_to(root / "runs")


def within_bounds(name, key, value) -> bool:
    if key in OUTPUT_KEYS and isinstance(value, str):
        return writable_folder(value)
    low_high = BOUNDS.get(name, {}).get(key)
    if low_high and isinstance(value, (int, float)) and not isinstance(value, bool):
        return low_high[0] <= value <= low_high[1]
    if key == "figure_formats" and isinstance(value, list):
        return 1 <= len(value) <= 3 and all(v in ("html", "png", "svg") for v in value)
    if key == "decades" and isinstance(value, list):
        return len(value) == 2 and all(-14 <= v <= 14 for v in value) and value[0] <= value[1]
    if key == "encoding" and isinstance(value, str):
        return value in encoders.names()
    if key == "study_dir" and value is not None:  # folders that exist (relative: to the checkout), 1 to 20 of them
        folders = [value] if isinstance(value, str) else value
        return 1 <= len(folders) <= 20 and all((notebooks.ROOT / Path(f).expanduser()).is_dir() for f in folders)
    place = (notebooks.ROOT / Path(value).expanduser()) if isinstance(value, str) else None
    if key == "official_data" and place is not None:  # "auto" or a folder that exists
        return value == "auto" or place.is_dir()
    if key == "answers_dir" and place is not None:
        return place.is_dir()
    if key == "results_csv" and place is not None:
        return place.is_file()
    if key == "model" and place is not None:  # a packaged model's name or a model folder
        from workbench.retrofit.hub import KNOWN

        return value in KNOWN or place.is_dir()
    if key == "preset" and isinstance(value, str):
        return value in ("cpu-tiny", "cpu-small", "paper")
    if key == "tasks" and isinstance(value, str):
        from workbench import tasks as registry

        names = [t.strip() for t in value.split(",")]
        return all(t in registry.names() for t in names) and len(set(names)) == len(names)
    return True


def bound_cases(out_dir):
    """Each numeric parameter just inside and outside its bounds and far beyond; output folders
    inside and outside the checkout; the notebook 05 values that failed in the kernel."""
    reached = []
    notebooks.papermill.execute_notebook = lambda nb, path, parameters, **kw: reached.append(parameters)
    root = notebooks.ROOT.resolve()
    inside = Path(out_dir) / "into-the-checkout"
    if not inside.exists():
        inside.symlink_to(root / "notebooks")

    def attempt(name, params, valid):
        reached.clear()
        try:
            notebooks.execute(name, params, output_dir=out_dir)
        except ValueError as error:
            if valid:
                raise Wrong(f"{name}: the valid {params} was refused: {error}") from None
            if not all(k in str(error) for k in params if k != "hidden"):
                raise RuntimeError(f"unclear: {str(error)[:120]}") from None
            raise
        if not valid:
            raise Wrong(f"{name}: {params} reached papermill")

    for name, keys in BOUNDS.items():
        for key, (low, high) in keys.items():
            for value in (low - 1, low, high, high + 1, 10**12, -(10**6)):
                value = float(value) if key == "tokens" else int(value)
                yield (lambda m=name, k=key, v=value: attempt(m, {k: v}, within_bounds(m, k, v))), (ValueError,), (key,)
    folders = [
        ".",
        "notebooks",
        "figures",
        "workbench",
        "docs",
        "results",
        "tests",
        "runs/attack",
        "runs",
        str(root),
        str(root / "notebooks" / "x"),
        "notebooks/../runs/y",
        "../" + root.name + "/docs",
        str(inside),
        str(Path(out_dir) / "elsewhere"),
        "figures/../runs/z",
    ]
    for name in BOUNDS:
        for key in OUTPUT_KEYS:
            if key not in notebook_parameters.parameters_of(
                notebooks.jupytext.read(notebooks.NOTEBOOK_DIR / f"{name}.py")
            ):
                continue
            for folder in folders:
                yield (lambda m=name, k=key, f=folder: attempt(m, {k: f}, writable_folder(f))), (ValueError,), (key,)
    retrofit = [
        ({"heads": 0}, False),
        ({"heads": 3}, False),
        ({"hidden": 96, "heads": 3}, True),
        ({"seeds": []}, False),
        ({"seeds": [0, 1]}, True),
        ({"hidden": 0}, False),
        ({"layers": 0}, False),
        ({"context": 0}, False),
        ({"vocab_size": 10}, False),
        ({"lr": 0.0}, False),
        ({"tokens": 0.0}, False),
        ({"encodings": []}, False),
        ({"encodings": ["none", "bitoken"]}, False),
        ({"device": "gpu"}, False),
        ({"threads": CORES + 1}, False),
        ({"pretrain_tokens": 1e12}, False),
        ({"batch_tokens": 0}, False),
    ]
    for params, valid in retrofit:
        yield (lambda p=params, v=valid: attempt("05_retrofit", p, v)), (ValueError,), tuple(params)


# -- issue 66: crafted reasoning-gym items, model folders, TensorBoard's folder, dry-run records --
CHECKOUT = Path(__file__).resolve().parents[1]
# Python's bytecode, git's index, a linter's cache: not the attack's writes
CACHES = {"__pycache__", ".pytest_cache", ".ruff_cache", ".git"}


def checkout_state() -> dict:
    """Every file of the checkout but caches (size, mtime, inode): a write by a category shows."""
    state = {}
    for base, folders, files in os.walk(CHECKOUT):
        folders[:] = [f for f in folders if f not in CACHES]
        for name in files:
            path = os.path.join(base, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            state[os.path.relpath(path, CHECKOUT)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return state


def checkout_writes(before: dict) -> list[str]:
    after = checkout_state()
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def one_line(error, *words):
    """The error as the attack wants it: one short line holding one of `words` (case-insensitive)."""
    text = str(error)
    if "\n" in text or len(text) > 400:
        raise Wrong(f"not one short line ({len(text)} characters): {text[:100]!r}")
    if words and not any(w.lower() in text.lower() for w in words):
        raise RuntimeError(f"unclear {type(error).__name__}: {text[:120]}")


def exact_answer_text(x: Fraction) -> str | None:
    """x as a plain decimal if it terminates (what a correct generator answers), else None."""
    den = x.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den != 1:
        return None
    k = 0
    while (x * 10**k).denominator != 1:
        k += 1
    digits = str(abs((x * 10**k).numerator)).rjust(k + 1, "0")
    text = digits if k == 0 else digits[:-k] + "." + digits[-k:]
    return ("-" if x < 0 else "") + text


def operand_text(rng) -> str:
    """An operand as a generator might print it, or one it never would."""
    kind = rng.random()
    if kind < 0.55:
        whole = str(rng.randint(0, 10 ** rng.randint(1, 6)))
        text = whole + ("." + str(rng.randint(0, 999)).rjust(3, "0") if rng.random() < 0.5 else "")
    elif kind < 0.65:
        text = "0" * rng.randint(1, 30) + str(rng.randint(1, 99))  # leading zeros
    elif kind < 0.75:
        text = str(rng.randint(1, 9)) + "0" * rng.choice([14, 15, 16, 40, 5000])  # beyond 1e15
    elif kind < 0.85:
        text = "0." + "0" * rng.choice([12, 13, 14, 30, 5000]) + str(rng.randint(1, 9))  # below 1e-14
    elif kind < 0.95:
        text = "".join(rng.choice("123456789") for _ in range(rng.choice([16, 17, 18, 25, 40_000])))
    else:
        text = "0"
    return ("-" if rng.random() < 0.2 else "") + text


def printable_range(text: str) -> str | None:
    """Why the workbench cannot print operand `text` ("" if it can): the oracle, from Decimal."""
    d = Decimal(text)
    if d == 0:
        return ""
    sign, digits, exponent = d.as_tuple()
    digits = "".join(map(str, digits)).rstrip("0")
    exponent += len("".join(map(str, d.as_tuple()[1]))) - len(digits)
    magnitude = exponent + len(digits) - 1
    return "" if len(digits) <= 17 and -14 <= magnitude <= 14 else "operand"


def fifteen(x: Fraction) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 15
        ctx.rounding = "ROUND_HALF_EVEN"
        return Decimal(x.numerator) / Decimal(x.denominator)


def rg_item_cases(rng, n):
    """Items shaped as reasoning-gym's (two operands, an operation, an answer right or wrong, in
    parentheses or not), converted and checked against Fraction arithmetic: the question asked,
    its 15-digit answer, or the reason it is dropped; and crafted ones (fields of other types,
    precisions of 0 or 10^21 digits, 40,000 nested parentheses, 400,000-character lines, answers
    of 2e99999999999), each a one-line ValueError within its time budget."""
    from workbench.study import generator

    def converted(item, task, expected, a=None, op=None, b=None):
        try:
            row = generator.convert(item, task)
        except generator.Dropped as why:
            if expected is None or why.reason != expected:
                raise Wrong(f"dropped as {why.reason!r}, expected {expected!r}: {str(why)[:80]}") from None
            one_line(why, why.reason)
            raise
        if expected is not None:
            raise Wrong(f"converted {row['prompt'][:40]!r}, expected a drop for {expected!r}")
        left, shown, right = row["prompt"].split(" ")
        exact = a * b if op == "*" else a / b
        if (Fraction(Decimal(left)), shown, Fraction(Decimal(right))) != (a, op, b):
            raise Wrong(f"asks {row['prompt']!r} for {a} {op} {b}")
        if Decimal(row["answer"]) != fifteen(exact) or row["answer_exact"] != (
            Fraction(Decimal(row["answer"])) == exact
        ):
            raise Wrong(f"answers {row['answer']!r} for {exact}")

    for _ in range(n):
        task = rng.choice(["multiplication", "division"])
        op = generator.OPERATIONS[task] if rng.random() < 0.7 else rng.choice("*/+-")
        left, right = operand_text(rng), operand_text(rng)
        a, b = Fraction(Decimal(left)), Fraction(Decimal(right))
        expression = f"{left} {op} {right}"
        depth = rng.choice([0, 0, 1, 2, 40_000])
        if depth:
            expression = "(" * depth + " " + expression + " " + ")" * depth
        expected = None
        if op != generator.OPERATIONS[task]:
            expected = "operation"
        elif printable_range(left) or printable_range(right):
            expected = "operand"
        elif op == "/" and b == 0:
            expected = "answer"
        exact = None if expected else (a * b if op == "*" else a / b)
        if exact is not None and exact != 0 and not Fraction(1, 10**14) <= abs(Fraction(fifteen(exact))) < 10**15:
            expected = "answer"
        answer = (exact_answer_text(exact) if exact is not None else None) or str(rng.randint(0, 99))
        precise = exact is not None and exact_answer_text(exact) is None
        if precise:  # a quotient that does not terminate: asked to 12 digits, as decimal_arithmetic asks
            with localcontext() as ctx:
                ctx.prec = 12
                answer = str(Decimal(exact.numerator) / Decimal(exact.denominator))
        if rng.random() < 0.2:  # a wrong answer; "-0" for 0 is the one that still agrees
            right = answer
            answer = rng.choice([answer + "1", "2e99999999999", "-" + answer, "nan", "1" + "0" * 1_000_000])
            if expected is None and not (exact == 0 and answer == "-" + right):
                expected = "disagrees"
        prompt = PRECISION_PROMPT if precise else ""
        item = rng.choice(
            [
                {"question": f"{prompt}{expression} = ?", "answer": answer, "metadata": {}},
                {
                    "question": f"{prompt}Compute {expression}.",
                    "answer": answer,
                    "metadata": {"expression": expression},
                },
            ]
        )
        yield (
            (lambda i=item, t=task, e=expected, a=a, o=op, b=b: converted(i, t, e, a, o, b)),
            (ValueError,),
            generator.DROP_REASONS,
            20.0,
        )
    crafted = [
        ([1, 2], "dict"),
        (None, "dict"),
        ("1 * 2 = ?", "dict"),
        ({}, "question"),
        ({"question": None, "answer": "2"}, "question"),
        ({"question": b"1 * 2 = ?", "answer": "2"}, "question"),
        ({"question": ["1 * 2 = ?"], "answer": "2"}, "question"),
        ({"question": "1 * 2 = ?"}, "answer"),
        ({"question": "1 * 2 = ?", "answer": 2}, "answer"),
        ({"question": "1 * 2 = ?", "answer": 2.0}, "answer"),
        ({"question": "1 * 2 = ?", "answer": 10**5000}, "answer"),
        ({"question": "1 * 2 = ?", "answer": {"value": 2}}, "answer"),
        ({"question": "1 * 2 = ?", "answer": "2", "metadata": [1]}, "metadata"),
        ({"question": "1 * 2 = ?", "answer": "2", "metadata": "x"}, "metadata"),
        ({"question": "x", "answer": "2", "metadata": {"expression": 5}}, "expression"),
        ({"question": "x", "answer": "2", "metadata": {"expression": ["1 * 2"]}}, "expression"),
        ({"question": "1 * 2 = ?", "answer": "2", "metadata": {"source_dataset": {"a": 1}}}, "source_dataset"),
        ({"question": "1 * 2 = ?", "answer": "2", "metadata": {"source_index": "3"}}, "source_index"),
        ({"question": "1 * 2 = ?", "answer": "2", "metadata": {"source_index": False}}, "source_index"),
    ]
    for digits in ("0", "000", "101", "999999999999999999999", "9" * 5000, "1" + "0" * 40):
        crafted.append(
            ({"question": f"to a maximum of {digits} significant digits\n1 / 3 = ?", "answer": "0.3"}, "significant")
        )
    for item, named in crafted:

        def case(item=item, named=named):
            try:
                question = item.get("question") if isinstance(item, dict) else None
                generator.convert(
                    item, "division" if isinstance(question, str) and "/" in question else "multiplication"
                )
            except generator.Dropped as why:
                raise Wrong(f"a crafted item counted as a drop ({why.reason}), not refused") from None
            except ValueError as err:
                one_line(err, named)
                raise
            raise Wrong("a crafted item converted")

        yield case, (ValueError,), ("reasoning-gym",), 5.0
    # long inputs, each in linear time: the budget is far below what a quadratic reading takes
    longs = [
        ("(" * 200_000 + "1 * 2" + ")" * 200_000 + " = ?", "2", None),
        ("(" * 200_000 + "1 * 2" + ")" * 199_999 + " = ?", "2", "shape"),
        ("x" * 400_000, "2", "shape"),
        ("1" * 400_000 + " =", "2", "shape"),
        ("( " * 100_000 + "1 * 2 = ?", "2", "shape"),
        ("1 * 2 = ?" + " " * 400_000, "2", None),
        ("\n" * 400_000 + "1 * 2 = ?", "2", None),
        ("1 * 2 = ?", "2." + "0" * 1_000_000, None),
        ("1 * 2 = ?", "0" * 1_000_000 + "2", None),
        ("1 * 2 = ?", "2e99999999999", "disagrees"),
        ("0 * 2 = ?", "0e-99999999999", None),
        ("7" * 40_000 + " * 2 = ?", "2", "operand"),
        ("1" + "0" * 1_000_002 + " * 2 = ?", "2", "operand"),
    ]
    for question, answer, expected in longs:
        item = {"question": question, "answer": answer}
        a = b = None
        if expected is None:
            a, b = (Fraction(0), Fraction(2)) if question.strip().startswith("0 *") else (Fraction(1), Fraction(2))
        yield (
            (lambda i=item, e=expected, a=a, b=b: converted(i, "multiplication", e, a, "*", b)),
            (ValueError,),
            generator.DROP_REASONS,
            5.0,
        )


PRECISION_PROMPT = (
    "Please solve this problem to a maximum of 12 significant digits, rounding up from the half. "
    "Only reply with the final value.\n"
)


DEEP_JSON = "[" * 100_000 + "]" * 100_000


def model_folder_cases(rng, folder):
    """Crafted Hugging Face folders and saved retrofit folders: every one is refused by
    NumberLM.from_pretrained in one line naming its folder or file, within its time budget, and
    leaves the folder as it was; sizes changed in config.json, files that are FIFOs, folders,
    nested 100,000 deep, larger than a record or not UTF-8; numeracy.json's values of other kinds."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from workbench.retrofit import NumberLM
    from workbench.retrofit.pretrain import build_model, corpus_texts, save, train_tokenizer

    base = Path(folder) / "models"
    tok = train_tokenizer(corpus_texts("train")[:8], vocab_size=400)
    plain = save(build_model("gpt2", tok, hidden=128, layers=1, heads=2, context=32), tok, base / "plain")
    saved = base / "saved-xval"
    NumberLM.from_pretrained(plain, "xval").save_pretrained(saved)
    config = json.loads((plain / "config.json").read_text())
    record = json.loads((saved / "numeracy.json").read_text())
    k = [0]

    def variant(source, edit):
        k[0] += 1
        target = base / f"v{k[0]}"
        shutil.copytree(source, target)
        edit(target)
        return target

    def write(name, content):
        def edit(target):
            path = target / name
            path.unlink(missing_ok=True)
            if content == "fifo":
                os.mkfifo(path)
            elif content == "folder":
                path.mkdir()
            elif content == "device":
                path.symlink_to("/dev/zero")  # endless bytes: read whole, it never ends
            elif isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content if isinstance(content, str) else json.dumps(content))

        return edit

    def refused_load(target, encoding, options=None, named=()):
        before = snapshot([p for p in target.iterdir() if not (p.is_symlink() and "dev" in os.readlink(p))])
        try:
            lm = NumberLM.from_pretrained(target, encoding, options)
        except ValueError as err:
            one_line(err, str(target), *named)
            nothing_lost(before)
            raise
        raise Wrong(f"loaded as a {type(lm.hf).__name__}")

    files = {
        "config.json": [
            DEEP_JSON,
            '{"a": ' * 50_000 + "1" + "}" * 50_000,
            "fifo",
            "folder",
            "device",
            [1, 2],
            "null",
            b"\xff\xfe{}",
            "{" + " " * (17 * 2**20) + "}",
            "{not json",
        ],
        "tokenizer_config.json": [DEEP_JSON, "fifo", "device", {"auto_map": {"AutoTokenizer": "evil.Tok"}}],
        "model.safetensors.index.json": [
            DEEP_JSON,
            {"weight_map": {"a": "../../etc/passwd"}},
            {"weight_map": {"a": 5}},
            {"weight_map": [1]},
            [1],
            "fifo",
        ],
        "model.safetensors": [
            b"\xff" * 8 + b"{}",
            (20).to_bytes(8, "little") + DEEP_JSON[:10].encode() + b"]" * 10,
            (len(DEEP_JSON) // 50).to_bytes(8, "little") + DEEP_JSON.encode()[: len(DEEP_JSON) // 50],
            "fifo",
            b"",
        ],
    }
    for name, contents in files.items():
        for content in contents:
            target = variant(plain, write(name, content))
            yield (lambda t=target: refused_load(t, "xval")), (ValueError,), (str(target),), 20.0
    sizes = ("n_layer", "n_embd", "n_head", "n_positions", "vocab_size")
    for _ in range(12):
        key = rng.choice(sizes)
        value = rng.choice([0, -1, 1e9, 10**9, 10**30, "12", None, [], True, config[key] + 1, config[key] * 2])
        target = variant(plain, write("config.json", {**config, key: value}))
        yield (lambda t=target: refused_load(t, "xval")), (ValueError,), (str(target),), 30.0
    meta_values = [
        {"encoding_options": [1]},
        {"encoding_options": "head_width=9"},
        {"encoding_options": {"head_width": 10**9}},
        {"encoding_options": {"head_width": 65_537}},
        {"encoding_options": {"head_width": -1}},
        {"encoding_options": {"head_width": "3072"}},
        {"encoding_options": {"head_width": 1e9}},
        {"encoding_options": {"offset": "nan"}},
        {"encoding_options": {"zzz": 1}},
        {"encoding": 5},
        {"encoding": None},
        {"encoding": "nope"},
        {"encoding": "bittokens", "encoding_options": {"mlp_hidden": 1e9, "head": "mlp"}},
        {"lora": [1]},
        {"lora": {"rank": "x"}},
        {"lora": {"rank": 4, "alpha": 8, "dropout": float("nan")}},
        {"lora": {"rank": 4, "alpha": 8, "dropout": 0.0}},
        {"base_model": 5},
        {"num_init": [1]},
        {"frame": "sideways"},
        {"format": "workbench.retrofit 0"},
    ]
    for change in meta_values:
        target = variant(saved, write("numeracy.json", {**record, **change}))
        yield (
            (lambda t=target: refused_load(t, None, named=("numeracy.json",))),
            (ValueError,),
            ("numeracy.json",),
            20.0,
        )
    for content in (DEEP_JSON, "fifo", "folder", "device", [1], b"\x80"):
        target = variant(saved, write("numeracy.json", content))
        yield (
            (lambda t=target: refused_load(t, None, named=("numeracy.json",))),
            (ValueError,),
            ("numeracy.json",),
            20.0,
        )
    for options in ({"head_width": 10**9}, {"head_width": 2**40}, {"head_width": 65_537}):  # asked for, not read
        yield (lambda o=options: refused_load(plain, "xval", o, ("head_width",))), (ValueError,), ("head_width",), 20.0
    yield (lambda: NumberLM.from_pretrained(plain, "xval", {"head_width": 64})), (), (), 30.0  # a narrow head is fine


THREAD_ERRORS: list[str] = []  # exceptions of threads that reached Python's hook (printed as tracebacks)


def tensorboard_cases(rng, folder):
    """RUN/tb/ as a link (to another run's events, dangling, to a file), deleted, swapped for a
    link, a file or a FIFO under a live writer, and every write failing as on a full, read-only or
    broken disk: a link is refused before anything is written through it, and the rest stop the
    events with one line while the calls return (training goes on); no thread prints a traceback
    and no event lands outside the run's own folder."""
    import errno
    import io
    from contextlib import redirect_stderr

    from tensorboard.compat.tensorflow_stub.io import gfile

    from workbench.runs import events
    from workbench.runs import folder as run_dirs

    base = Path(folder) / "tensorboard"
    base.mkdir()
    victim = base / "victim"
    victim.mkdir()
    (victim / (events.PREFIX + "other-run")).write_bytes(PRECIOUS)
    previous = threading.excepthook
    if not getattr(previous, "attack", False):

        def hook(args):  # whatever hook is below (the workbench's, once an Events exists) printing is a traceback
            printed = io.StringIO()
            with redirect_stderr(printed):
                previous(args)
            if printed.getvalue().strip():
                THREAD_ERRORS.append(f"{args.thread.name}: {args.exc_type.__name__}: {args.exc_value}")

        hook.attack = True
        threading.excepthook = hook
    k = [0]

    def run_folder():
        k[0] += 1
        out = base / f"run{k[0]}"
        out.mkdir()
        return out

    def quiet_run(write, planted=None):
        """`write(out)` under captured stderr -> the lines it printed; Wrong for a traceback, a
        thread's error, a second line or an event outside the folder."""
        before = snapshot([victim / p for p in os.listdir(victim)] + [victim])
        THREAD_ERRORS.clear()
        err = io.StringIO()
        with redirect_stderr(err):
            write()
        said = ("TensorBoard", "Traceback", "Error", "Exception")  # training's own progress lines aside
        lines = [line for line in err.getvalue().splitlines() if any(w in line for w in said)]
        if THREAD_ERRORS:
            raise Wrong(f"a thread printed a traceback: {THREAD_ERRORS[0][:100]}")
        if len(lines) > 1 or any("Traceback" in line for line in lines):
            raise Wrong(f"{len(lines)} lines: {lines[:2]}")
        if sorted(os.listdir(victim)) != sorted(p.name for p in before if p != victim):
            raise Wrong(f"an event was written through the link: {sorted(os.listdir(victim))}")
        nothing_lost(before)
        return lines

    # a link in place of tb/ before the run: refused by the run's checks and by the writer itself
    targets = [
        victim,
        base / "nowhere",
        victim / (events.PREFIX + "other-run"),
    ]  # another run's events, dangling, a file
    for target in targets:
        for where in ("prepare", "writer"):

            def case(target=target, where=where):
                out = run_folder()
                (out / "tb").symlink_to(target)
                if where == "prepare":
                    call = lambda: run_dirs.prepare(train_config(**TINY_RUN, out=str(out), overwrite=True), False, 0)
                else:
                    call = lambda: events.Events(out, 0)
                try:
                    quiet_run(call)
                except ValueError as err:
                    one_line(err, "link")
                    if not (out / "tb").is_symlink():
                        raise Wrong("the link was removed") from None
                    raise
                raise Wrong("a tb/ that is a link was taken")

            yield case, (ValueError,), ("link",), 30.0

    # changes under a live writer: the calls return, one line at most, nothing outside
    def swap(kind):
        def change(out):
            tb = out / "tb"
            if kind == "deleted":
                shutil.rmtree(tb)
            elif kind == "renamed":
                tb.rename(out / "tb.old")
            else:
                tb.rename(out / "tb.old")
                if kind == "link":
                    tb.symlink_to(victim)
                elif kind == "file":
                    tb.write_bytes(PRECIOUS)
                elif kind == "fifo":
                    os.mkfifo(tb)
                elif kind == "empty folder":
                    tb.mkdir()

        return change

    def failing(code):
        def change(out):
            def write(self, filename, content, mode):
                raise OSError(code, os.strerror(code), filename)

            gfile.LocalFileSystem._write = write

        return change

    original_write = gfile.LocalFileSystem._write
    changes = {kind: swap(kind) for kind in ("deleted", "renamed", "link", "file", "fifo", "empty folder")}
    changes.update(
        {
            f"writes fail: {errno.errorcode[c]}": failing(c)
            for c in (errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT, errno.EFBIG)
        }
    )
    for label, change in changes.items():
        for when in rng.sample(range(1, 8), 3):

            def case(change=change, when=when, label=label):
                out = run_folder()

                def write():
                    log = events.Events(out, 0)
                    try:
                        for step in range(1, 10):
                            if step == when:
                                change(out)
                            log.add("train", {"loss": 1.0 / step, "lr": 0.1}, step)
                            if step == when + 1:
                                time.sleep(rng.choice([0.0, 0.05]))
                    finally:
                        log.close()
                        gfile.LocalFileSystem._write = original_write

                lines = quiet_run(write)
                if not lines or "TensorBoard events stopped" not in lines[0]:
                    if label == "renamed":  # the writer keeps its folder, under its new name: no word needed
                        return
                    raise Wrong(f"{label}: the events stopped without a word: {lines}")
                if "/proc/" in lines[0]:
                    raise Wrong(f"the message names the handle, not the folder: {lines[0][:100]}")

            yield case, (), (), 30.0

    # a live training run whose tb/ is deleted half way: it finishes, every step in its logs
    for when in (2, 4):

        def case(when=when):
            from workbench.training import train as T

            out = base / f"live{when}"
            added = events.Events.add

            def add(self, group, row, step):
                if group == "train" and step == when and (out / "tb").exists():
                    shutil.rmtree(out / "tb")
                added(self, group, row, step)

            events.Events.add = add
            try:
                quiet_run(lambda: T.train(train_config(**TINY_RUN, out=str(out))))
            finally:
                events.Events.add = added
            steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
            if steps != list(range(1, len(steps) + 1)) or not (out / "test_summary.csv").exists():
                raise Wrong(f"the run did not finish every step: {steps}")

        yield case, (), (), 120.0


def dry_run_cases(rng, folder):
    """--dry-run against a finished run's records: a train_seconds drawn from times and non-times
    (below 0, 0, NaN, inf, text, subnormal), --jobs from -5 to 4 and of other types; each estimate
    either checked against tokens over seconds, or a one-line ValueError naming what is wrong.
    FIFOs in place of the summary, the checkpoint and config.json are refused or read as no record
    without waiting; a 100,000-deep config.json counts as another configuration."""
    import io as io_
    import re

    import pandas as pd

    from workbench import experiments
    from workbench.runs import dryrun

    base = Path(folder) / "dry-run"
    T, _ = train_module()
    cfg = train_config(**TINY_RUN, out=str(base / "done-seed0"))
    T.train(cfg)
    summary_file = base / "done-seed0" / "test_summary.csv"
    summary = pd.read_csv(summary_file)
    runs = {"done-seed0": cfg, "new-seed0": cfg.updated(seed=1)}

    def estimate(seconds_text, jobs):
        summary.assign(train_seconds=[seconds_text] * len(summary)).to_csv(summary_file, index=False)
        seconds = pd.to_numeric(pd.Series([seconds_text]), errors="coerce").iloc[0]
        valid_jobs = isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1
        speed = cfg.tokens / seconds if math.isfinite(seconds) and seconds > 0 else None
        possible = speed is not None and math.isfinite(speed) and valid_jobs
        try:
            text = dryrun.report("plan", runs, base, jobs=jobs)
        except ValueError as err:
            if possible:
                raise Wrong(f"a possible record refused: {err}") from None
            one_line(err, "train_seconds", "--jobs", "tokens/s")
            raise
        if not possible:
            raise Wrong(f"estimated from train_seconds {seconds_text!r}, jobs {jobs!r}: {text.splitlines()[-3]}")
        if f"cpu-tiny: {speed:,.0f} tokens/s (the median of 1 finished run(s) in OUT)" not in text:
            raise Wrong(f"not tokens over seconds ({speed:,.0f}): {text[-200:]}")
        line = next(line for line in text.splitlines() if line.startswith("estimated time"))
        if re.search(r"nan|inf|-\d", line) or "with 1 run(s) side by side" not in line:
            raise Wrong(f"the estimate reads {line!r}")

    times = [-200, -1e-9, 0, 0.0, "nan", "inf", "-inf", "soon", "", 5e-324, 1e-300, 1e300, 0.5, 60, 3600.0, "1e3"]
    for _ in range(40):
        seconds, jobs = rng.choice(times), rng.choice([-5, -1, 0, 1, 2, 4, True, 1.5, "2", None])
        yield (lambda s=seconds, j=jobs: estimate(s, j)), (ValueError,), ("train_seconds", "--jobs", "tokens/s"), 20.0

    def special(name, kind, expect):
        def case():
            path = base / name
            keep = path.read_bytes() if path.is_file() else None
            path.unlink(missing_ok=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "fifo":
                os.mkfifo(path)
            elif isinstance(kind, bytes):
                path.write_bytes(kind)
            else:
                path.write_text(kind)
            try:
                text = dryrun.report("plan", runs, base, jobs=1)
            except ValueError as err:
                if expect != "refused":
                    raise Wrong(f"refused: {err}") from None
                one_line(err, name.split("/")[-1])
                raise
            finally:
                path.unlink()
                if keep is not None:
                    path.write_bytes(keep)
            if expect == "refused" or not re.search(expect, text, re.M):
                raise Wrong(f"{name} as {kind[:20]!r}: no {expect!r} in {text[:300]!r}")

        return case

    summary.to_csv(summary_file, index=False)
    cases = [
        ("done-seed0/test_summary.csv", "fifo", "refused"),
        ("done-seed0/test_summary.csv", b"\xff\xfe", "refused"),
        ("done-seed0/config.json", "fifo", r"finished with another configuration: 1"),
        ("done-seed0/config.json", DEEP_JSON, r"finished with another configuration: 1"),
        ("done-seed0/config.json", "[1]", r"finished with another configuration: 1"),
        ("new-seed0/checkpoint.pt", "fifo", r"to train: +1$"),
        ("new-seed0/checkpoint.pt", "not a checkpoint", r"to train: +1$"),
    ]
    for name, kind, expect in cases:
        yield special(name, kind, expect), (ValueError,), (name.split("/")[-1],), 20.0
    for jobs in ("-5", "0"):

        def cli(jobs=jobs):
            err = io_.StringIO()
            from contextlib import redirect_stderr

            with redirect_stderr(err):
                try:
                    experiments.main(["cpu-tier", "--dry-run", "--jobs", jobs, "--out", str(base / "cli")])
                except SystemExit:
                    pass
            text = err.getvalue()
            if "Traceback" in text or text.count("error:") != 1 or "--jobs must be an integer >= 1" not in text:
                raise Wrong(f"--jobs {jobs}: {text[-200:]!r}")

        yield cli, (), (), 30.0


# -- the run ----------------------------------------------------------------------------------
def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="fewer inputs, no 1M-digit runs")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="run only the categories whose name holds NAME (repeatable)"
    )
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
        "reply shapes": shape_cases(rng, n),
        "reply sizes, timing": size_cases(rng, n // 10),
        "answers file, two runners": concurrency_cases(rng, n // 40, folder),
        "training flags, run directories": train_cases(rng, folder),
        "two writers, one folder": writer_cases(rng, folder),
        "questions beyond memory": size_of_questions_cases(rng),
        "locks and links": lock_cases(rng, folder),
        "kernel cache": kernel_cases(folder),
        "job results": job_cases(folder),
        "HTML labels": html_cases(),
        "tokenizer cache": tokenizer_cache_cases(rng, folder),
        "encoding ranges": range_cases(rng, n),
        "crafted checkpoints": crafted_checkpoint_cases(folder),
        "notebook bounds": bound_cases(folder),
        "reasoning-gym items": rg_item_cases(rng, n),
        "crafted model folders": model_folder_cases(rng, folder),
        "TensorBoard folder": tensorboard_cases(rng, folder),
        "dry-run records": dry_run_cases(rng, folder),
    }
    if args.only:
        categories = {c: cases for c, cases in categories.items() if any(o.lower() in c.lower() for o in args.only)}
    counts, examples = defaultdict(Counter), defaultdict(list)
    for category, cases in categories.items():
        started = time.perf_counter()
        before = checkout_state()
        for fn, errors, words, *budget in cases:
            label, detail = run_case(fn, errors, words, *budget)
            counts[category][label] += 1
            if label in (CRASH, HANG, WRONG, CODE) and len(examples[category]) < 4:
                examples[category].append(f"{label}: {detail}")
        written = checkout_writes(before)  # the whole category: a write by any input, or by its set-up
        counts[category][WRITES] = len(written)
        if written:
            examples[category].append(f"written into the checkout: {written[:4]}")
        print(
            f"  {category}: {sum(counts[category].values())} inputs, {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
    for server in SERVERS:
        server.close()
    header = [
        "category",
        "inputs tried",
        OK,
        "clear errors",
        "tracebacks",
        "hangs",
        "silent wrong results",
        "code ran",
        "writes into the checkout",
    ]
    rows = [
        [
            c,
            sum(v for key, v in k.items() if key != WRITES),
            k[OK],
            k[CLEAR],
            k[CRASH],
            k[HANG],
            k[WRONG],
            k[CODE],
            k[WRITES],
        ]
        for c, k in counts.items()
    ]
    rows.append(["total", *(sum(r[i] for r in rows) for i in range(1, len(header)))])
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
