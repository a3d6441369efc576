"""Questions of an independent generator (reasoning-gym) in the workbench's format, and Study 3's
scoring on them: the conversion against Fraction arithmetic, what is dropped, the clear error without
the package, the real package where it is installed, and generator_scores on a tiny trained run."""

import decimal
import random
import re
import shutil
import sys
import time
import types
from decimal import Context, Decimal
from fractions import Fraction

import pandas as pd
import pytest

from workbench import experiments, study
from workbench.study import generator
from workbench.training.optim import OptimConfig
from workbench.training.train import TrainConfig, train

PROMPT = "Please solve this problem to a maximum of 12 significant digits, rounding up from the half. Only reply with the final value.\n"


def decimal_item(expression, answer, index=3):
    """An item as reasoning-gym 0.1.25's decimal_arithmetic returns it (no expression in the metadata)."""
    return {
        "question": f"{PROMPT}{expression} = ?",
        "answer": answer,
        "metadata": {
            "source_dataset": "decimal_arithmetic",
            "source_index": index,
            "decimal_places": 3,
            "num_terms": 2,
            "difficulty": {"decimal_places": (3, 3), "num_terms": (2, 2)},
        },
    }


def products_item(expression, answer, index=0):
    return {
        "question": f"Solve the following multiplication: {expression}. Give only the result as your final answer.",
        "answer": answer,
        "metadata": {
            "source_dataset": "products",
            "source_index": index,
            "expression": expression,
            "num_terms": expression.count("*") + 1,
            "num_digits": 4,
            "difficulty": {"num_terms": (2, 2), "num_digits": (1, 5)},
        },
    }


def basic_item(expression, answer, index=0):
    return {
        "question": f"Calculate {expression}.",
        "answer": answer,
        "metadata": {
            "source_dataset": "basic_arithmetic",
            "source_index": index,
            "expression": expression,
            "num_terms": 2,
            "num_digits": 4,
            "difficulty": {"num_terms": (2, 2), "num_digits": (1, 4)},
        },
    }


def fifteen_digits(x: Fraction) -> Decimal:
    """x rounded half-even to 15 significant digits, by the decimal module (not the workbench's code)."""
    return Context(prec=15, rounding=decimal.ROUND_HALF_EVEN).divide(Decimal(x.numerator), Decimal(x.denominator))


def check_row(row, a: Fraction, op: str, b: Fraction):
    """The row asks `a op b` in the workbench's text and answers it to 15 digits, as a plain decimal."""
    left, shown_op, right = row["prompt"].split(" ")
    assert shown_op == op and Fraction(Decimal(left)) == a and Fraction(Decimal(right)) == b
    exact = a * b if op == "*" else a / b
    assert Decimal(row["answer"]) == fifteen_digits(exact)
    assert "e" not in row["answer"].lower() and not (("." in row["answer"]) and row["answer"].endswith("0"))
    assert row["answer_exact"] == (Fraction(Decimal(row["answer"])) == exact)


# items as reasoning-gym 0.1.25 returned them (seed 0), copied from its output
REAL = [
    (products_item("1663 * 5242", "8717446"), "multiplication", (Fraction(1663), "*", Fraction(5242))),
    (products_item("0 * 9", "0", index=23), "multiplication", (Fraction(0), "*", Fraction(9))),
    (decimal_item("0.664*6.635", "4.405640", index=0), "multiplication", (Fraction("0.664"), "*", Fraction("6.635"))),
    (decimal_item("(1.391*5.049)", "7.023159", index=2), "multiplication", (Fraction("1.391"), "*", Fraction("5.049"))),
    (decimal_item("6.062/9.923", "0.610903960496"), "division", (Fraction("6.062"), "/", Fraction("9.923"))),
    (decimal_item("(1.691/2.540)", "0.665748031496", index=4), "division", (Fraction("1.691"), "/", Fraction("2.54"))),
    (basic_item("-1515 / 15", "-101"), "division", (Fraction(-1515), "/", Fraction(15))),
    (basic_item("722 / 722", "1", index=5), "division", (Fraction(722), "/", Fraction(722))),
]


@pytest.mark.parametrize("item, task, question", REAL)
def test_an_item_becomes_the_workbench_question_with_its_exact_answer(item, task, question):
    row = generator.convert(item, task)
    check_row(row, *question)
    assert (
        row["source"] == item["metadata"]["source_dataset"] and row["source_index"] == item["metadata"]["source_index"]
    )
    assert row["question"] == item["question"] and row["given"] == item["answer"]


def test_operands_are_printed_as_the_workbench_prints_numbers():
    assert generator.convert(decimal_item("(1.691/2.540)", "0.665748031496"), "division")["prompt"] == "1.691 / 2.54"
    assert generator.convert(products_item("1663 * 5242", "8717446"), "multiplication")["answer"] == "8717446"
    row = generator.convert(decimal_item("6.062/9.923", "0.610903960496"), "division")
    assert row["answer"] == "0.610903960495818" and not row["answer_exact"]  # 15 digits; the generator gave 12


@pytest.mark.parametrize(
    "item, task, reason",
    [
        (decimal_item("4.180+7.365", "11.545", index=1), "multiplication", "operation"),  # another operation
        (decimal_item("0.664*6.635", "4.405640"), "division", "operation"),
        (basic_item("-( 6775 / 271 )", "-25", index=11), "division", "shape"),  # a negated group
        (basic_item("( -( -8872 / 2218 ) )", "4", index=10), "division", "shape"),
        (products_item("1663 * 5242 * 9376", "81734773696"), "multiplication", "shape"),  # three terms
        ({"question": "What is the product?", "answer": "1", "metadata": {}}, "multiplication", "shape"),
        # reasoning-gym 0.1.25's basic_arithmetic without parentheses prints one divisor and divides by another
        (basic_item("47 / 77", "3807"), "division", "disagrees"),
        (decimal_item("6.062/9.923", "0.610903960497"), "division", "disagrees"),  # off in the 12th digit
        (products_item("99999999 * 99999999", str(99999999**2)), "multiplication", "answer"),  # >= 1e15
        (basic_item("5 / 0", "0"), "division", "answer"),
        (
            products_item("123456789012345678 * 2", str(123456789012345678 * 2)),
            "multiplication",
            "operand",
        ),  # 18 digits
    ],
)
def test_items_the_workbench_cannot_ask_are_dropped_with_their_reason(item, task, reason):
    with pytest.raises(generator.Dropped) as dropped:
        generator.convert(item, task)
    assert dropped.value.reason == reason and reason in generator.DROP_REASONS


def test_a_stated_precision_accepts_either_rounding_of_a_tie_and_nothing_else():
    assert generator.agrees(Fraction(1, 8), "0.12", 2) and generator.agrees(Fraction(1, 8), "0.13", 2)
    assert not generator.agrees(Fraction(1, 8), "0.11", 2) and not generator.agrees(Fraction(1, 8), "0.12")
    assert generator.agrees(Fraction(1, 8), "0.1250") and not generator.agrees(Fraction(1, 8), "one eighth")
    with pytest.raises(ValueError, match="multiplication"):
        generator.convert(products_item("2 * 3", "6"), "addition")


@pytest.mark.parametrize(
    "item, named",
    [
        ([1, 2], "dict"),
        ("1 * 2 = ?", "dict"),
        ({"answer": "2"}, "question"),
        ({"question": 5, "answer": "2"}, "question"),
        ({"question": "1 * 2 = ?"}, "answer"),
        ({"question": "1 * 2 = ?", "answer": 2}, "answer"),
        ({"question": "1 * 2 = ?", "answer": 10**5000}, "answer"),
        ({"question": "1 * 2 = ?", "answer": "2", "metadata": [1]}, "metadata"),
        ({"question": "x", "answer": "2", "metadata": {"expression": 5}}, "expression"),
        ({"question": "1 * 2 = ?", "answer": "2", "metadata": {"source_dataset": ["x"]}}, "source_dataset"),
        ({"question": "1 * 2 = ?", "answer": "2", "metadata": {"source_index": True}}, "source_index"),
        (decimal_item("1/3", "0.333").__or__({"question": "to a maximum of 0 significant digits\n1/3 = ?"}), "0"),
        ({"question": "to a maximum of 999999999999999999999 significant digits\n1/3 = ?", "answer": "0.3"}, "9999"),
        ({"question": "to a maximum of " + "9" * 5000 + " significant digits\n1/3 = ?", "answer": "0.3"}, "5,000"),
    ],
)
def test_a_crafted_item_is_a_one_line_error_naming_what_is_wrong(item, named):
    with pytest.raises(ValueError) as error:
        question = item.get("question") if isinstance(item, dict) else None
        generator.convert(item, "division" if "/" in str(question) else "multiplication")
    message = str(error.value)
    assert not isinstance(error.value, generator.Dropped)  # not an item of the package's kind: not counted as a drop
    assert named in message and "\n" not in message and len(message) < 200


def old_unwrap(expression):
    """The conversion's first peeling (a scan per layer: quadratic in the nesting), as the oracle."""
    text = expression.strip()
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, char in enumerate(text):
            depth += char == "("
            depth -= char == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1].strip()
    return text


OLD_EQUATION = re.compile(r"([^\n]*?)\s*=\s*\?\s*$")  # the first reading of a question's "... = ?" line


def test_the_expression_is_read_as_the_first_reading_did_on_short_questions():
    rng = random.Random(5)
    for _ in range(4000):
        text = "".join(rng.choice(["(", ")", " ", "1*2", "3", "\n", "=", "?", "x"]) for _ in range(rng.randint(0, 12)))
        balanced = text.count("(") == text.count(")")
        unwrapped, expected = generator._unwrap(text), old_unwrap(text)
        # where the parentheses do not pair, only whether a plain "a op b" is left matters
        assert (
            unwrapped == expected
            if balanced
            else bool(generator._PLAIN.match(unwrapped)) == bool(generator._PLAIN.match(expected))
        )
        found = OLD_EQUATION.search(text)
        try:
            assert generator.expression_of({"question": text, "answer": "1"}) == found.group(1)
        except generator.Dropped:
            assert found is None


def test_deep_parentheses_and_long_lines_take_linear_time():
    started = time.perf_counter()
    deep = "(" * 200_000 + " 1.5 * 2 " + ")" * 200_000  # quadratic peeling: 4e10 steps, hours
    assert generator.convert({"question": deep + " = ?", "answer": "3"}, "multiplication")["prompt"] == "1.5 * 2"
    for question in ("x" * 400_000, "1" * 400_000 + " =", "(" * 400_000 + "1 * 2 = ?"):
        with pytest.raises(generator.Dropped, match="shape"):
            generator.convert({"question": question, "answer": "2"}, "multiplication")
    with pytest.raises(generator.Dropped, match="operand.*40,000 significant digits"):
        generator.convert({"question": "7" * 40_000 + " * 2 = ?", "answer": "2"}, "multiplication")
    assert time.perf_counter() - started < 20


def test_an_answer_far_beyond_any_result_disagrees_at_once_and_trailing_zeros_still_agree():
    started = time.perf_counter()
    # Fraction(Decimal("2e99999999999")) would build an integer of 1e11 digits
    assert not generator.agrees(Fraction(2), "2e99999999999") and not generator.agrees(Fraction(0), "1e-99999999999")
    assert generator.agrees(Fraction(0), "0e99999999999") and generator.agrees(Fraction(2), "2." + "0" * 100_000)
    assert generator.agrees(Fraction(1, 8), "0" * 1000 + "0.1250") and not generator.agrees(Fraction(2), "2.0001")
    assert time.perf_counter() - started < 10


def test_a_malformed_item_from_the_package_names_its_source_and_index(monkeypatch):
    items = [basic_item("-1515 / 15", "-101"), {"question": "Calculate 4 / 2.", "answer": 2}]
    monkeypatch.setitem(sys.modules, "reasoning_gym", fake_reasoning_gym({"basic_arithmetic": items}))
    with pytest.raises(ValueError, match=r"basic_arithmetic, item 1: .*answer is text, not an int"):
        generator.questions("division", 2, sources=[("basic_arithmetic", {})])


def test_without_reasoning_gym_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # import reasoning_gym raises ImportError
    with pytest.raises(ImportError, match=r"pip install reasoning-gym==0\.1\.25.*independent"):
        generator.questions("division", 10)
    with pytest.raises(ValueError, match="positive integer"):
        generator.questions("division", 0)


def fake_reasoning_gym(items: dict[str, list[dict]]):
    """A stand-in for the package: create_dataset(name, seed=, size=, **config)[i] is items[name][i];
    like decimal_arithmetic, drawing sets the thread's decimal precision to 12."""
    made = []

    class Dataset:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, index):
            decimal.getcontext().prec = 12
            return items[self.name][index % len(items[self.name])]

    def create_dataset(name, **config):
        made.append((name, config))
        return Dataset(name)

    return types.SimpleNamespace(create_dataset=create_dataset, made=made)


def test_questions_share_n_between_the_sources_and_count_what_they_drop(monkeypatch):
    fake = fake_reasoning_gym(
        {
            "basic_arithmetic": [
                basic_item("-1515 / 15", "-101"),
                basic_item("-( 6775 / 271 )", "-25"),
                basic_item("5 - 3", "2"),
            ],
            "decimal_arithmetic": [
                decimal_item("6.062/9.923", "0.610903960496"),
                decimal_item("4.180+7.365", "11.545"),
            ],
        }
    )
    monkeypatch.setitem(sys.modules, "reasoning_gym", fake)
    before = decimal.getcontext().prec
    table = generator.questions("division", 5, seed=7)
    assert decimal.getcontext().prec == before  # the generator's context change stays inside
    assert table.source.tolist() == ["basic_arithmetic"] * 3 + ["decimal_arithmetic"] * 2
    assert [(name, c["seed"]) for name, c in fake.made] == [
        ("basic_arithmetic", 7),
        ("decimal_arithmetic", 7 + generator.SEED_STRIDE),
    ]
    assert all(c["min_terms"] == c["max_terms"] == 2 for _, c in fake.made)
    assert table.attrs["drawn"] == {"basic_arithmetic": 7, "decimal_arithmetic": 3}
    assert table.attrs["dropped"]["basic_arithmetic"] == dict(shape=2, operation=2, operand=0, answer=0, disagrees=0)
    assert table.attrs["dropped"]["decimal_arithmetic"]["operation"] == 1
    for row in table.to_dict("records"):
        left, op, right = row["prompt"].split(" ")
        check_row(row, Fraction(Decimal(left)), op, Fraction(Decimal(right)))
    # a source that never gives the task's operation is given up with its drops named
    monkeypatch.setitem(sys.modules, "reasoning_gym", fake_reasoning_gym({"products": [basic_item("5 - 3", "2")]}))
    with pytest.raises(ValueError, match="gave 0 multiplication questions.*operation"):
        generator.questions("multiplication", 2, sources=[("products", {})])


def test_the_real_package_gives_questions_that_check_against_fractions():
    pytest.importorskip("reasoning_gym")
    before = decimal.getcontext().prec
    for task, op in (("multiplication", "*"), ("division", "/")):
        table = generator.questions(task, 60, seed=0)
        assert len(table) == 60 and set(table.source) == {name for name, _ in generator.SOURCES[task]}
        for row in table.to_dict("records"):
            left, shown, right = row["prompt"].split(" ")
            assert shown == op
            check_row(row, Fraction(Decimal(left)), op, Fraction(Decimal(right)))
        assert generator.questions(task, 60, seed=0).equals(table)  # the same seed, the same questions
    assert decimal.getcontext().prec == before


def test_generator_scores_score_a_finished_run_once_and_the_command_line_prints_them(tmp_path, monkeypatch, capsys):
    name = "budget_1M-multiplication-d4-single_digit-seed0"  # a Study 3 run of the plan, trained tiny
    cfg = TrainConfig.of(
        encoding="single_digit",
        tasks=("multiplication",),
        preset="cpu-tiny",
        batch_size=2,
        tokens=2 * 128 * 4,
        pool_size=100,
        val_samples=4,
        test_samples=4,
        eval_every=2,
        checkpoint_every=2,
        decades=(0, 1),
        max_digits=2,
        threads=1,
        optim=OptimConfig(newton_schulz="float32"),
        out=str(tmp_path / name),
    )
    train(cfg)
    fake = fake_reasoning_gym(
        {
            "products": [products_item("12 * 3", "36"), products_item("1663 * 5242", "8717446")],
            "decimal_arithmetic": [decimal_item("0.664*6.635", "4.405640")],
        }
    )
    monkeypatch.setitem(sys.modules, "reasoning_gym", fake)
    table = study.generator_scores(tmp_path, n=4, seed=0)
    assert (
        len(table) == 4
        and set(table.run) == {name}
        and table.prompt.tolist() == ["12 * 3", "1663 * 5242", "0.664 * 6.635", "0.664 * 6.635"]
    )
    assert table.answer.tolist() == ["36", "8717446", "4.40564", "4.40564"]
    assert {"study", "encoding", "digits", "seed", "prediction", "score", "exact", "source", "source_index"} <= set(
        table
    )
    assert table.score.between(0, 1).all()
    written = pd.read_csv(tmp_path / study.GENERATOR_FILE)
    assert len(written) == 4 and (written.n == 4).all() and (written.generator_seed == 0).all()
    # scored runs are not scored again; another n is refused; runs of another task are refused
    assert len(fake.made) == 2 and len(study.generator_scores(tmp_path, n=4, seed=0)) == 4 and len(fake.made) == 2
    with pytest.raises(ValueError, match=r"drawn with \(n, seed\)"):
        study.generator_scores(tmp_path, n=5, seed=0)
    # another run scored later appends to the file and leaves the rows written before as written
    first = (tmp_path / study.GENERATOR_FILE).read_text()
    shutil.copytree(tmp_path / name, tmp_path / name.replace("seed0", "seed1"))
    assert len(study.generator_scores(tmp_path, n=4, seed=0)) == 8
    assert (tmp_path / study.GENERATOR_FILE).read_text().startswith(first) and ",36," in first
    other = tmp_path / "other"
    (other / "multitask-multitask-d1-bittokens-seed0").mkdir(parents=True)
    (other / "multitask-multitask-d1-bittokens-seed0" / "test_summary.csv").write_text("task\n")
    with pytest.raises(ValueError, match="also train on.*multitask"):
        study.generator_scores(other, n=4, which=["multitask"])

    experiments.main(
        [
            "study",
            "--out",
            str(tmp_path),
            "--score-generator",
            "--generator-questions",
            "4",
            "--budgets",
            "1M",
            "--tasks",
            "multiplication",
        ]
    )
    printed = capsys.readouterr().out
    assert "reasoning-gym's questions: mean per cell" in printed and "single_digit" in printed
    for argv, message in (
        (["--score-generator", "--generator-questions", "0"], "positive integer"),
        (["--score-generator", "--overwrite"], "train nothing"),
        (["--score-official", str(tmp_path / "absent")], "released BitTokens data not found"),
        (["--score-generator", "--budgets", "lots"], "not a token budget"),
        (["--score-generator", "--generator-questions", "4", "--budgets", "7M"], "no run of the chosen parts"),
    ):
        with pytest.raises(SystemExit):
            experiments.main(["study", "--out", str(tmp_path)] + argv)
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        experiments.main(["study", "--out", str(tmp_path / "nowhere"), "--score-generator"])
    assert "is not a folder of study runs" in capsys.readouterr().err
