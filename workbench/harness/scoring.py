"""One response scored for a harness: the workbench's frontier scorer (`workbench.frontier.scoring`)
under both of its readings, as the numbers a harness averages.

    metrics("addition", '{"answer": 42}', "42")
    # {'performance': 1.0, 'exact': 1.0, 'performance_careful': 1.0, 'exact_careful': 1.0, 'unparsed': 0.0}

What is taken from a response (the rules in full: `workbench/frontier/answers.py`):

* performance, exact, unparsed: the paper authors' reading (mode "paper"), so that the numbers
  are those of the paper's Tables 1 and 2 for the same answers: the "answer" of a JSON object when
  the response is one, else the first number anywhere in the text (after reasoning text too);
  a sorting answer is read as a list only from JSON or brackets. `unparsed` is 1 where that
  reading found no answer at all.
* performance_careful, exact_careful: the careful reading (mode "careful"): the last answer the
  response states (a JSON "answer" key, \\boxed{...}, "the answer is ...", or a response that
  is nothing but the value), scored on exact decimals; an operand restated from the question is
  never taken for the answer, and a response that states none scores 0.

`performance` is log-sMAPE (eq. 2: the fraction of 15 significant digits right) for the six
arithmetic tasks and accuracy (0/1) for minmax, sorting and interval; `exact` is the 15-digit
match for arithmetic and equals `performance` for the other three.
"""

from __future__ import annotations

from workbench.frontier import scoring

METRICS = ("performance", "exact", "performance_careful", "exact_careful", "unparsed")
HIGHER_IS_BETTER = {m: m != "unparsed" for m in METRICS}


def metrics(task: str, response, label: str) -> dict[str, float]:
    """The harness metrics of one response (None or a non-string response reads as no answer)."""
    response = response if isinstance(response, str) else ""
    paper = scoring.score(task, response, label, mode="paper")
    careful = scoring.score(task, response, label, mode="careful")
    return {
        "performance": float(paper["performance"]),
        "exact": float(paper["exact"]),
        "performance_careful": float(careful["performance"]),
        "exact_careful": float(careful["exact"]),
        "unparsed": float(paper["parsed"] is None),
    }
