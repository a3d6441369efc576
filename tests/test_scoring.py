"""Frontier scoring in both modes: the paper authors' per-answer scores (checked on real responses
from their released result files, against their scores in combined_samples_long.csv), each rule of
both readings with the examples of issue 15 and our own, and linear time on hostile input."""

import json
import math
import time
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import tasks
from workbench.frontier import answers, scoring


def log_smape(p, t):
    """Eq. 2 of the paper, written out: min(1, -log10(sMAPE + eps) / 15), eps = 1e-100."""
    p, t = float(p), float(t)
    return max(0.0, min(1.0, -math.log10(abs(p - t) / (abs(t) + abs(p) + 1e-100) + 1e-100) / 15))


def both(task, response, label):
    return scoring.score(task, response, label), scoring.score(task, response, label, mode="careful")


# ---- the paper mode reproduces the authors' per-answer scores ------------------------------------

# (task, raw_response, label, performance, exact15) of real answers: raw_response as stored in the
# authors' per-answer files (KreitnerL/BitTokens, frontier_model_analysis/results/), performance
# and exact15 as in their combined_samples_long.csv. Addition: Gemini 2.5 Flash without reasoning,
# rows 0, 1, 9-12, 14, 16, 21, 23, 25, 27, 29-31, 215; MinMax: Llama 4 Maverick rows 0, 11;
# Sorting: Llama 4 Maverick rows 2, 7.
AUTHORS_SCORES = [
    ("addition", '{"answer": 522579999.99999116689}', "522579999.999991", 1.0, 1),
    ("addition", '{"answer": -73.602242383311}', "-73.6022421744091", 0.58986524410245933, 0),
    ("addition", '{"answer": 714483758420.8228}', "714483729029421", 0.00005790595260448, 0),
    ("addition", '{"answer": -372646.65893517783}', "-372646.658935178", 1.0, 0),
    ("addition", '{"answer": -99945000000000.0000000166}', "-99945000000000", 1.0, 1),
    ("addition", '{"answer": -0.000000000004368641426}', "-0.00000000000436864142599275", 0.80540276985728798, 0),
    ("addition", '{"answer": -848447067177.44873}', "-848447067177.449", 1.0, 0),
    ("addition", '{"answer": -578666.88254545}', "-578666.882545449", 1.0, 0),
    ("addition", '{"answer": -0.00961658495574304}', "-0.00961658495588304", 0.74252801137564883, 0),
    ("addition", '{"answer": -2856.72225264299345593592533}', "-2856.72225264299", 1.0, 1),
    ("addition", '{"answer": 7246.666303769259}', "7246.66630376926", 1.0, 0),
    ("addition", '{"answer": -32999999.5669}', "-33299999.5669", 0.15629281786740770, 0),
    ("addition", '{"answer": 3144148635.811509994967949}', "3144148635.81151", 1.0, 1),
    ("addition", '{"answer": 0.07450218890757282}', "0.0745021889075728", 1.0, 1),
    ("addition", '{"answer": 0.08340190780119669}', "0.0834019078011967", 1.0, 0),
    ("addition", '{"answer": 9954149258099.974379660893464}', "9954149258099.97", 1.0, 1),
    ("minmax", '{"answer": 0.000000000044}', "0.000000000044", 1.0, None),
    ("minmax", '{"answer": -1.959357e-08}', "-0.00000001959357", 0.0, None),
    (
        "sorting",
        '{"answer": [1550.0595581225548, 1550.059558122555]}',
        "1550.0595581225548, 1550.059558122555",
        1.0,
        None,
    ),
    (
        "sorting",
        '{"answer": [14723.6256801591, 14723.62568015792, 14723.62568015877]}',
        "14723.6256801591, 14723.62568015877, 14723.62568015792",
        0.0,
        None,
    ),
]


@pytest.mark.parametrize("task, response, label, performance, exact15", AUTHORS_SCORES)
def test_paper_mode_gives_the_authors_per_answer_scores(task, response, label, performance, exact15):
    s = scoring.score(task, response, label)
    assert s["performance"] == pytest.approx(performance, abs=1e-12)
    if exact15 is not None:
        assert s["exact"] == bool(exact15)


def test_exact_match_truncates_the_float64_repr_to_15_digits():
    # truncation, not rounding: ...17783 keeps ...177, the label has ...178 (ours rounded: a match)
    assert scoring.first15("-372646.65893517783") == (1, "372646658935177", 5)
    assert scoring.first15("-372646.658935178") == (1, "372646658935178", 5)
    # a JSON float passes through float64: the 28-digit answer is '3144148635.81151', a match;
    # the same digits as a JSON string keep them and miss the label's last digit
    assert scoring.score("addition", '{"answer": 3144148635.811509994967949}', "3144148635.81151")["exact"]
    assert not scoring.score("addition", '{"answer": "3144148635.811509994967949"}', "3144148635.81151")["exact"]
    # no double rounding: .974379... is .975 as float64, truncated to .97 == the label
    paper, careful = both("addition", '{"answer": 9954149258099.974379660893464}', "9954149258099.97")
    assert paper["parsed"] == "9954149258099.975" and paper["exact"] and careful["exact"]
    # careful: one half-even rounding of the exact value; .975 as written rounds to .98, a miss
    paper, careful = both("addition", '{"answer": "9954149258099.975"}', "9954149258099.97")
    assert paper["exact"] and not careful["exact"]
    paper, careful = both("addition", '{"answer": -372646.65893517783}', "-372646.658935178")
    assert not paper["exact"] and careful["exact"]
    # missing digits count as zeros; a different exponent or sign is a miss
    assert scoring.first15("0.0015") == (0, "150000000000000", -3) == scoring.first15("1.5e-3")
    assert scoring.first15("-0") == (1, "0" * 15, 0) and scoring.first15("no number") is None
    assert not scoring.score("mean", '{"answer": 15}', "1.5")["exact"]


def _oracle_first15(token):
    """(sign, 15 digits, exponent) by string handling alone: the independent oracle."""
    sign = int(token.startswith("-"))
    mantissa, _, exp = token.lstrip("+-").lower().partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    if not digits:
        return (sign, "0" * 15, 0)
    point = len(whole) - (len(whole + frac) - len((whole + frac).lstrip("0")))
    return (sign, digits[:15].ljust(15, "0"), point - 1 + int(exp or 0))


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,3})?", fullmatch=True))
def test_first15_matches_a_string_oracle(token):
    assert scoring.first15(token) == _oracle_first15(token)
    assert scoring.first15(f"about {token} or so") == _oracle_first15(token)
    assert scoring.first15("01.5") == scoring.first15("0")  # a token never starts with 0 then a digit


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_paper_reads_a_json_float_through_float64(x):
    assert answers.paper_answer(json.dumps({"answer": x}), "mean") == str(x)
    assert answers.paper_answer(json.dumps({"answer": x}), "minmax") == json.dumps(x)  # as written


# ---- the paper's rules the old scorer broke, in both modes ---------------------------------------


def test_minmax_is_correct_only_when_written_as_in_the_list():
    paper, careful = both("minmax", '{"answer": 1.02e-9}', "0.00000000102")
    assert paper["performance"] == 0.0 and careful["performance"] == 1.0
    paper, careful = both("minmax", '{"answer": 0.00000000102}', "0.00000000102")
    assert paper["performance"] == careful["performance"] == 1.0
    paper, careful = both("minmax", '{"answer": "0.00000000102"}', "0.00000000102")
    assert paper["performance"] == careful["performance"] == 1.0
    # without JSON the first number is read as float64 and printed: '1.02e-09', '100.0'
    assert [both("minmax", r, r) for r in ("0.00000000102", "100")] == [
        (
            {"parsed": "1.02e-09", "performance": 0.0, "exact": False},
            {"parsed": "1.02E-9", "performance": 1.0, "exact": True},
        ),
        ({"parsed": "100.0", "performance": 0.0, "exact": False}, {"parsed": "100", "performance": 1.0, "exact": True}),
    ]


def test_numbers_of_any_length_are_read():
    runaway = '{"answer": 1735300.' + "0" * 12_000  # looped until the output cap, never closed
    paper, careful = both("multiplication", runaway, "1735312.5")
    assert paper["parsed"] == "1735300.0"
    assert paper["performance"] == careful["performance"] == pytest.approx(log_smape(1735300, 1735312.5))
    assert paper["performance"] > 0.3
    paper, careful = both("multiplication", runaway + "}", "1735300")
    assert paper["performance"] == careful["performance"] == 1.0 and paper["exact"] and careful["exact"]
    # a JSON integer beyond Python's 4300-digit limit does not parse: the first number is read as
    # float64 and is inf; the careful value is 1.1e4999, also beyond float64: 0 either way
    paper, careful = both("multiplication", '{"answer": ' + "1" * 5000 + "}", "5")
    assert paper["parsed"] == "inf" and paper["performance"] == careful["performance"] == 0.0


def test_broken_json_still_yields_the_answer():
    for response in ("0.8392156009458}", '{"answer": 0.8392156009458}}', '{"answer": 0.8392156009458'):
        paper, careful = both("multiplication", response, "0.8392156009458")
        assert paper["exact"] and careful["exact"], response
    for response in ('"C"}', '{"answer": "C"', 'C"}'):
        paper, careful = both("interval", response, "C")
        assert paper["exact"] and careful["exact"], response
    paper, careful = both("addition", '{"answer": -.0000772980859}', "-0.0000772980859039587")
    assert paper["parsed"] == "-7.72980859e-05" and careful["parsed"] == "-0.0000772980859"
    assert (
        paper["performance"]
        == careful["performance"]
        == pytest.approx(log_smape(-0.0000772980859, -0.0000772980859039587))
    )


def test_prose_without_json():
    # the paper takes the first number; the careful reader the stated answer, or none
    response = "The numbers are 12.5 and 3.25, so the sum is 15.75."
    paper, careful = both("addition", response, "15.75")
    assert paper["parsed"] == "12.5" and paper["performance"] == pytest.approx(log_smape(12.5, 15.75))
    assert careful["parsed"] == "15.75" and careful["exact"]
    paper, careful = both("addition", "Adding 12.5 and 3.25 is easy.", "15.75")
    assert paper["performance"] > 0 and careful == {"parsed": None, "performance": 0.0, "exact": False}
    paper, careful = both("interval", "A: x < 5 holds, so the answer is A", "A")
    assert paper["parsed"] == "5.0" and not paper["exact"] and careful["exact"]  # a digit wins in P2
    paper, careful = both("interval", "I choose C", "C")
    assert paper["exact"] and careful == {"parsed": None, "performance": 0.0, "exact": False}


def test_paper_json_rules():
    # P0: one pair of braces: only the object counts, the prose around it is dropped
    assert answers.paper_answer('Let me think: 3 * 4 = 12. {"answer": 1234567.125} Done.', "mean") == "1234567.125"
    # ... even when the braces belong to LaTeX: '$-1.5 \cdot 10^{-3}$' is cut to '{-3}'
    paper, careful = both("mean", r"Final answer: $-1.5 \cdot 10^{-3}$", "-0.0015")
    assert paper["parsed"] == "-3.0" and careful["exact"]
    # P1: the key must be exactly "answer"; a nested one is found only by the first-number rule
    assert answers.paper_answer('{"result": {"answer": 1500, "note": 7}}', "addition") == "1500.0"
    assert answers.paper_answer('{"Answer": 7, "x": [1500]}', "addition") == "7.0"
    assert answers.paper_answer('{"answer": NaN}', "addition") == "nan"
    assert answers.paper_answer('{"answer": 1e400}', "addition") == "inf"
    # P3 (no digits anywhere): fences and <thought> go, then the first object with "answer"
    text = '<thought>no digits</thought>```json\n{"answer": "C"}\n```\n{"answer": "D"}'
    assert answers.paper_answer(text, "interval") == "C" and answers.parse_answer(text, "interval") == "D"
    assert answers.paper_answer('json: {"answer": "B"}', "interval") == "B"
    assert answers.paper_answer("No idea.", "interval") == "" and answers.paper_answer(None, "mean") == ""


def test_sorting_in_both_modes():
    paper, careful = both("sorting", "[1, 2, 3]", "1, 2, 3")  # a bare list: the paper reads its first number
    assert paper["parsed"] == "1.0" and paper["performance"] == 0.0 and careful["performance"] == 1.0
    paper, careful = both("sorting", '{"answer": "1, 2, 3"}', "1, 2, 3")
    assert paper["exact"] and careful["exact"]
    paper, careful = both("sorting", "{'answer': [1, 2, 3]}", "1, 2, 3")  # single quotes: not JSON
    assert paper["parsed"] == "1.0" and not paper["exact"] and careful["exact"]
    # the paper compares float64 values, the careful reader exact decimals
    paper, careful = both("sorting", '{"answer": [0.10000000000000001, 0.2]}', "0.1, 0.2")
    assert paper["exact"] and not careful["exact"]
    paper, careful = both("sorting", "The sorted list is: 1, 2.5, 3.", "1, 2.5, 3")
    assert paper["parsed"] == "1.0" and not paper["exact"] and careful["exact"]
    assert answers.paper_list("['3', '1.5', '-2']") == [3.0, 1.5, -2.0]


# ---- the careful reading, rule by rule (with what the paper reads beside it) ----------------------


@pytest.mark.parametrize(
    "response, task, careful, paper",
    [
        # C1: the key "answer", any quotes, any depth, also in a fence or a truncated object
        ('{"result": {"answer": 1500}}', "addition", Decimal(1500), "1500.0"),
        ("{'answer': 1500}", "addition", Decimal(1500), "1500.0"),
        ('```json\n{"answer": 1500}\n```', "addition", Decimal(1500), "1500"),
        ('{"answer": "1,234.5"}', "addition", Decimal("1234.5"), "1,234.5"),
        ('{"answer": <numeric_answer>}\n{"answer": 42}', "addition", Decimal(42), "42.0"),
        # C2: \boxed{...}, with LaTeX powers of ten
        (r"\boxed{1.5 \times 10^{3}}", "addition", Decimal(1500), "1.5"),
        (r"so $\boxed{-2.5\cdot10^{-4}}$", "mean", Decimal("-0.00025"), "-2.5"),
        (r"\boxed{C}", "interval", "C", "C"),
        # C3: prose
        ("The answer is: 1500", "addition", Decimal(1500), "1500.0"),
        ("**Answer:** 1 500", "addition", Decimal(1500), "1.0"),
        ("The maximum is 7.25.", "minmax", Decimal("7.25"), "7.25"),
        ("The answer is (B).", "interval", "B", "B"),
        ("The answer is a tricky one.", "interval", None, "A"),
        ("The answer is 3 + 4 = 7", "addition", None, "3.0"),
        # C4: a code fence holding the value, or nothing but the value
        ("```\n1500\n```", "addition", Decimal(1500), "1500.0"),
        ("1 500", "addition", Decimal(1500), "1.0"),
        ("1,234", "addition", Decimal(1234), "1.0"),
        ("1'234", "addition", Decimal(1234), "1.0"),
        ("1\u202f234\u202f567.5", "addition", Decimal("1234567.5"), "1.0"),
        ("$1.5 \\times 10^{3}$", "addition", Decimal(1500), "3.0"),  # P0 cuts to {3}
        ("1.5 x 10^-3", "addition", Decimal("0.0015"), "1.5"),
        ("\u22125.5", "addition", Decimal("-5.5"), "5.5"),
        ("(c)", "interval", "C", "C"),
        # ambiguous separators are refused
        ("1,5", "addition", None, "1.0"),
        ("1,23", "addition", None, "1.0"),
        ("1.234,5", "addition", None, "1.234"),
        ("1,234 500", "addition", None, "1.0"),
        # prose without an answer: no operand restated from the question is taken for it
        ("What is 12.5 + 3.25? I cannot compute that.", "addition", None, "12.5"),
        ("", "mean", None, ""),
    ],
)
def test_careful_rules(response, task, careful, paper):
    assert answers.parse_answer(response, task) == careful
    assert answers.paper_answer(response, task) == paper


def test_careful_lists():
    expected = [Decimal("-1500"), Decimal("2.5"), Decimal("3")]
    for response in (
        '{"answer": [-1500, 2.5, 3]}',
        "{'answer': ['-1500', '2.5', '3']}",
        "Sorted list: [-1 500, 2.5, 3]",
        "The sorted list is -1500, 2.5, 3.",
        "```\n[-1500, 2.5, 3]\n```",
    ):
        assert answers.parse_answer(response, "sorting") == expected, response
    assert answers.parse_answer("[1, 2, x]", "sorting") is None
    assert answers.parse_answer("Sort [3, 1, 2] please", "sorting") is None  # the question's list


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(10**15), max_value=10**15), st.sampled_from([",", " ", "'", "\u00a0"]))
def test_careful_reads_grouped_thousands(k, sep):
    text = f"{k:,}".replace(",", sep)
    assert answers.parse_answer(text, "addition") == Decimal(k)
    assert answers.parse_answer(f"The answer is {text}.", "addition") == Decimal(k)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.sampled_from(tasks.numeric()))
def test_readers_never_crash(text, task):
    assert isinstance(answers.paper_answer(text, task), str)
    out = answers.parse_answer(text, task)
    assert out is None or isinstance(out, (Decimal, list, str))


# ---- the score() interface ------------------------------------------------------------------


def test_score_interface():
    with pytest.raises(ValueError, match="unknown scoring mode"):
        scoring.score("addition", "1", "1", mode="strict")
    with pytest.raises(ValueError, match="no frontier answer"):
        scoring.score("text", "1", "1")
    with pytest.raises(ValueError, match="unknown task"):
        scoring.score("nope", "1", "1")
    for mode in scoring.MODES:
        for task, label in (("addition", "x"), ("minmax", ""), ("sorting", "a, b"), ("interval", "123")):
            with pytest.raises(ValueError, match="reference answer"):
                scoring.score(task, "1", label, mode=mode)
        assert scoring.score("mean", None, "2", mode=mode) == {"parsed": None, "performance": 0.0, "exact": False}
        assert scoring.score("addition", '{"answer": -5}', "5", mode=mode)["performance"] == 0.0


# ---- linear time on hostile input -----------------------------------------------------------

HOSTILE = {  # name: (response of size n, n of the small response; the large one is 20 n)
    "open braces": (lambda n: "{" * n, 5_000),
    "balanced braces": (lambda n: "{" * n + "}" * n, 2_500),
    "open answer strings": (lambda n: '{"answer": "' * n, 1_000),
    "boxed": (lambda n: "\\boxed{" * n, 1_000),
    "answer keys": (lambda n: "answer is " * n, 1_000),
    "spaces after a number": (lambda n: "1" + " " * n + "x", 5_000),
    "thought tags": (lambda n: "<thought>" * n, 1_000),
}


def _seconds(read, text):
    start = time.perf_counter()
    for task in ("addition", "minmax", "sorting", "interval"):
        read(text, task)
    return time.perf_counter() - start


@pytest.mark.parametrize("name", HOSTILE)
def test_readers_are_linear_on_hostile_input(name):
    """20x the input may take at most 100x the time (linear: ~20x; quadratic: ~400x; the reader
    before issue 15 took 185x on the braces). Best of 3 interleaved runs each, so that a busy
    machine slows both sizes alike."""
    make, n = HOSTILE[name]
    small, large = make(n), make(20 * n)
    for read in (answers.paper_answer, answers.parse_answer):
        times = [(_seconds(read, small), _seconds(read, large)) for _ in range(3)]
        t_small, t_large = min(t for t, _ in times), min(t for _, t in times)
        assert t_large < 100 * t_small, f"{read.__name__} on {name}: {t_small:.4f} s -> {t_large:.4f} s"
