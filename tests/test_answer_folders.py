"""Folders of raw model answers: the authors' per-answer CSVs and our client's JSONL, loaded,
rescored under both readings, Tables 1 and 2 side by side, and notebook 04's section on them."""

import json

import pandas as pd
import pytest

from workbench.frontier import answer_folders, client, prompts

# the test set's columns (a few), then the answer columns of the authors' result files
ADDITION = pd.DataFrame(
    {
        "num1": ["9954149258100", "0.07224792217", "1", "2"],
        "operator": ["+", "+", "+", "+"],
        "text_prompt": [
            "What is 9954149258100 + -0.025620339106536?",
            "What is 0.07224792217 + -372646.7311831?",
            "What is 1 + 1.5?",
            "What is 2 + 2?",
        ],
        "answer": ["9954149258099.97", "-372646.658935178", "2.5", "4"],
        "difficulty": ["27", "36", "1", "0"],
        "difficulty_sd": ["12", "14", "1", "0"],
        "tokens": ["34", "23", "", "9"],
        "reasoning": ["", "", "", ""],
        "usage.completion_tokens": ["34", "23", "", "9"],
        "raw_response": [
            '{"answer": 9954149258099.974379660893464}',
            '{"answer": -372646.65893517783}',
            "The sum is 2.5",
            None,
        ],
    }
)
MINMAX = pd.DataFrame(
    {
        "list1": ["['0.00000000102', '0.5']", "['3', '7']"],
        "text_prompt": ["min?", "max?"],
        "answer": ["0.00000000102", "7"],
        "difficulty_sd": ["3", "0"],
        "tokens": ["12", "10"],
        "raw_response": ['{"answer": 1.02e-9}', '{"answer": 7}'],
    }
)
NAME = "{}_decimal_uniform_test_500_shuffle_{}_re_{}.csv"


class FakeClient:
    """Duck-types client.ChatClient: answers each question with a canned response."""

    model = "our/model"

    def __init__(self, responses):
        self.responses = responses

    def chat(self, system, user):
        return self.responses.pop(0), {"completion_tokens": 7}


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "answers"
    root.mkdir()
    ADDITION.to_csv(root / NAME.format("Addition", "openai__gpt-5", "minimal"), index=False)
    MINMAX.to_csv(root / NAME.format("MinMax", "openai__gpt-5", "minimal"), index=False)
    MINMAX.to_csv(root / NAME.format("MinMax", "acme__tiny-1", "none"), index=False)
    (root / "notes.csv").write_text("not,an,answer file\n")  # skipped: not an answer file
    bench = prompts.export_benchmark(root / "bench", n_per_task=1, seed=0, task_list=["addition", "sorting"])
    answers = [json.dumps({"answer": bench["answer"][0]}), "The sorted list is [" + bench["answer"][1] + "]"]
    client.run_benchmark(FakeClient(answers), root / "bench.jsonl", root / "our_model.jsonl")
    return root


def test_load_both_formats(folder):
    df = answer_folders.load_answer_folder(folder)
    assert list(df.columns) == answer_folders.COLUMNS and len(df) == 4 + 2 + 2 + 2
    authors = df[df["source"].str.startswith("Addition")]
    assert set(authors["model"]) == {"openai__gpt-5"} and set(authors["reasoning"]) == {"minimal"}
    assert authors["label"].tolist() == ADDITION["answer"].tolist()  # labels stay exact strings
    assert authors["tokens"].tolist() == [34, 23, -1, 9] and pd.isna(authors["response"].iloc[3])
    ours = df[df["source"] == "our_model.jsonl"]
    assert ours["task"].tolist() == ["addition", "sorting"] and set(ours["model"]) == {"our/model"}
    assert set(ours["reasoning"]) == {answer_folders.NO_REASONING_SETTING} and set(ours["tokens"]) == {7}


def test_only_the_first_500_answers_of_a_file_count(tmp_path):
    rows = pd.DataFrame({"answer": ["1"] * 502, "raw_response": ['{"answer": 1}'] * 500 + ["2", "2"]})
    rows.to_csv(tmp_path / NAME.format("Mean", "m", "high"), index=False)
    scored = answer_folders.rescore(answer_folders.load_answer_folder(tmp_path))
    assert len(scored) == answer_folders.FILE_ROWS and scored["performance_paper"].eq(1.0).all()


def test_rescore_and_tables(folder):
    scored = answer_folders.rescore(answer_folders.load_answer_folder(folder))
    add = scored[scored["source"].str.startswith("Addition")]
    # the paper: truncated 15 digits of the float64 repr (a match, a miss), the first number, nothing
    assert add["exact_paper"].tolist() == [True, False, True, False]
    assert add["exact_careful"].tolist() == [True, True, True, False]
    assert add["performance_paper"].tolist() == [1.0, 1.0, 1.0, 0.0]
    mm = scored[scored["task"] == "minmax"]
    assert mm["performance_paper"].tolist() == [0.0, 1.0] * 2 and mm["performance_careful"].tolist() == [1.0] * 4
    ours = scored[scored["source"] == "our_model.jsonl"]
    assert ours["performance_careful"].tolist() == [1.0, 1.0] and ours["performance_paper"].tolist()[0] == 1.0

    t1 = answer_folders.side_by_side(scored, 1)
    assert list(t1.index[:1]) == [("GPT 5", "minimal")]  # the paper's name and its row first
    assert set(t1.index) == {("GPT 5", "minimal"), ("acme/tiny-1", "none"), ("our/model", "-")}
    assert t1.loc[("GPT 5", "minimal"), ("MinMax", "paper")] == 50.0
    assert t1.loc[("GPT 5", "minimal"), ("MinMax", "careful")] == 100.0
    assert t1.loc[("GPT 5", "minimal"), ("Add", "paper")] == 75.0
    assert list(t1.columns) == [
        ("Add", "paper"),
        ("Add", "careful"),
        ("MinMax", "paper"),
        ("MinMax", "careful"),
        ("Sort", "paper"),
        ("Sort", "careful"),
    ]
    t2 = answer_folders.side_by_side(scored, 2)
    assert list(t2.columns) == [("Add", "paper"), ("Add", "careful")]
    assert t2.loc[("GPT 5", "minimal"), ("Add", "paper")] == 50.0
    assert t2.loc[("GPT 5", "minimal"), ("Add", "careful")] == 75.0
    sentence = answer_folders.differences(scored)
    assert sentence.startswith("The careful reading scores 4 of 10 answers differently")
    assert "Table 1, our/model (-), Sort: 0.0 (paper) vs 100.0 (careful)" in sentence
    with pytest.raises(ValueError, match="only Tables 1 and 2"):
        answer_folders.table(scored, 3)


def test_identical_readings_say_so(tmp_path):
    pd.DataFrame({"answer": ["4"], "raw_response": ['{"answer": 4}']}).to_csv(
        tmp_path / NAME.format("Addition", "m", "none"), index=False
    )
    scored = answer_folders.rescore(answer_folders.load_answer_folder(tmp_path))
    assert (
        answer_folders.differences(scored)
        == "The careful reading scores 0 of 1 answers differently; no table cell moves."
    )


def test_bad_folders_are_clear_errors(folder, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        answer_folders.load_answer_folder(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no answer files"):
        answer_folders.load_answer_folder(empty)
    (folder / "bench.jsonl").rename(tmp_path / "elsewhere.jsonl")
    with pytest.raises(ValueError, match="no benchmark gives their labels"):
        answer_folders.load_answer_folder(folder)
    assert len(answer_folders.load_answer_folder(folder, benchmark=tmp_path / "elsewhere.jsonl")) == 10
    with pytest.raises(ValueError, match="not in the benchmark"):
        answer_folders.load_answer_folder(
            folder, benchmark=pd.DataFrame({"id": ["x"], "task": ["mean"], "answer": ["1"]})
        )
    pd.DataFrame({"answer": ["1"], "response": ["1"]}).to_csv(folder / NAME.format("Std", "m", "none"), index=False)
    with pytest.raises(ValueError, match=r"lacks columns \['raw_response'\]"):
        answer_folders.load_answer_folder(folder, benchmark=tmp_path / "elsewhere.jsonl")


@pytest.mark.slow
def test_notebook_rescores_a_folder(folder, tmp_path):
    from workbench.notebooks import execute

    params = {
        "official_data": None,
        "exponent_samples": 2000,
        "generator_samples": 200,
        "bootstrap_draws": 20,
        "figures_dir": str(tmp_path / "figures"),
        "figure_formats": ["html"],
        "answers_dir": str(folder),
        "study4": False,  # drawn by the notebook's own test
    }
    path = execute("04_paper_figures", params, output_dir=tmp_path)
    outputs = json.dumps([c.get("outputs", []) for c in json.loads(path.read_text())["cells"]])
    assert "Table 1, paper vs careful reading" in outputs and "Table 2, paper vs careful reading" in outputs
    assert "The careful reading scores 4 of 10 answers differently" in outputs
