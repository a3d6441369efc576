"""study.publish: a study folder's complete cells appended to the published tables, every published
byte kept, the same folder published twice adding nothing, a published cell never replaced,
nothing written when any file refuses."""

import pandas as pd
import pytest

from workbench import study


def _folder(path, name, seeds=(0, 1, 2), scored=False):
    """A study folder as run_study writes it: one budget cell of two encodings, its seeds' rows and
    intervals, and (scored) the per-answer rows of scoring (2)."""
    path.mkdir(parents=True, exist_ok=True)
    rows, intervals, answers = [], [], []
    for k, encoding in enumerate(["bittokens_decimal_pool", "single_digit"]):
        cell = dict(study=name, encoding=encoding, task="division", digits=4)
        for seed in seeds:
            for metric, score in (("log_smape", 0.1 * (k + 1) + 0.01 * seed), ("exact_match", 0.05 * seed)):
                rows.append(
                    dict(
                        **cell,
                        seed=seed,
                        input_tokens=6.0,
                        output_tokens=2.0,
                        train_seconds=1.5,
                        metric=metric,
                        score=score,
                    )
                )
            for q in range(4):
                answers.append(
                    dict(
                        run=f"{name}-{encoding}-seed{seed}",
                        **cell,
                        seed=seed,
                        score=0.25 * q,
                        exact=q == 3,
                        output_tokens=2.0,
                    )
                )
        for metric in ("log_smape", "exact_match"):
            intervals.append(
                dict(
                    **cell,
                    metric=metric,
                    mean=0.2,
                    low=0.1,
                    high=0.3 + 1 / 3,
                    seeds=len(seeds),
                    questions=500,
                )
            )
    pd.DataFrame(rows).to_csv(path / study.RESULTS_FILE, index=False)
    pd.DataFrame(intervals).to_csv(path / study.INTERVALS_FILE, index=False)
    if scored:
        pd.DataFrame(answers).to_csv(path / study.OFFICIAL_FILE, index=False)
    return path


def test_publish_appends_new_cells_and_keeps_every_published_byte(tmp_path):
    published = _folder(tmp_path / "results", "budget_1M")
    before = {f: (published / f).read_bytes() for f in (study.RESULTS_FILE, study.INTERVALS_FILE)}
    new = _folder(tmp_path / "runs", "budget_3M", scored=True)
    _folder(tmp_path / "runs" / "other", "budget_10M")  # another folder's cells are not touched

    added = study.publish(new, ["budget_3M"], seeds=3, into=published)

    assert added == {study.RESULTS_FILE: 12, study.INTERVALS_FILE: 4, study.OTHER_QUESTIONS_FILE: 2, "runs": 0}
    for name, old in before.items():
        text = (published / name).read_bytes()
        assert text.startswith(old)  # the published rows, byte for byte
        both, source = pd.read_csv(published / name), pd.read_csv(new / name)
        pd.testing.assert_frame_equal(both.iloc[len(both) - len(source) :].reset_index(drop=True), source)
    table, intervals = study.read_study(published)  # still a valid study folder
    assert set(table.study) == {"budget_1M", "budget_3M"}
    cells = pd.read_csv(published / study.OTHER_QUESTIONS_FILE)
    assert set(cells.scoring) == {"authors_test_sets"} and (cells.runs == 3).all()
    assert cells.score.tolist() == pytest.approx([0.375, 0.375])  # (0 + .25 + .5 + .75) / 4 for every run

    after = {p.name: p.read_bytes() for p in published.iterdir()}
    assert study.publish(new, ["budget_3M"], seeds=3, into=published) == dict.fromkeys(added, 0)  # again: nothing new
    assert {p.name: p.read_bytes() for p in published.iterdir()} == after


def test_publish_refuses_a_published_cell_with_other_rows_and_writes_nothing(tmp_path):
    published = _folder(tmp_path / "results", "budget_1M")
    before = {p.name: p.read_bytes() for p in published.iterdir()}
    again = _folder(tmp_path / "runs", "budget_1M", seeds=(0, 1, 2, 3))
    with pytest.raises(ValueError, match="already holds 2 of these cells with other rows.*never replaced"):
        study.publish(again, ["budget_1M"], seeds=3, into=published)
    assert {p.name: p.read_bytes() for p in published.iterdir()} == before


def test_publish_leaves_out_a_cell_with_fewer_seeds(tmp_path):
    published = _folder(tmp_path / "results", "budget_1M")
    before = {p.name: p.read_bytes() for p in published.iterdir()}
    short = _folder(tmp_path / "runs", "budget_10M", seeds=(0, 1))
    with pytest.warns(UserWarning, match="left out, fewer than 3 seeds: .*budget_10M"):
        assert study.publish(short, ["budget_10M"], seeds=3, into=published) == {
            study.RESULTS_FILE: 0,
            study.INTERVALS_FILE: 0,
            "runs": 0,
        }
    assert {p.name: p.read_bytes() for p in published.iterdir()} == before


def test_publish_names_a_study_the_folder_does_not_hold(tmp_path):
    published = _folder(tmp_path / "results", "budget_1M")
    new = _folder(tmp_path / "runs", "budget_3M")
    with pytest.raises(ValueError, match=r"holds no results of \['budget_10M'\].*budget_3M"):
        study.publish(new, ["budget_3M", "budget_10M"], seeds=3, into=published)


@pytest.mark.parametrize("ending", [b"\r\n", b"\n"])
def test_publish_keeps_every_byte_of_a_file_and_appends_with_its_own_line_ending(tmp_path, ending):
    """Bug: a CRLF results file had all its earlier bytes rewritten (its line endings turned to LF)
    despite the "bytes kept" promise. Also a last line without its line ending is ended, not joined."""
    published = _folder(tmp_path / "results", "budget_1M")
    for name in (study.RESULTS_FILE, study.INTERVALS_FILE):
        path = published / name
        path.write_bytes(path.read_bytes().replace(b"\n", ending).removesuffix(ending))
    before = {f: (published / f).read_bytes() for f in (study.RESULTS_FILE, study.INTERVALS_FILE)}
    new = _folder(tmp_path / "runs", "budget_3M")
    added = study.publish(new, ["budget_3M"], seeds=3, into=published)
    assert added[study.RESULTS_FILE] == 12 and added[study.INTERVALS_FILE] == 4
    for name, old in before.items():
        text = (published / name).read_bytes()
        assert text.startswith(old)
        lines = text.split(ending)
        assert all(b"\r" not in line and b"\n" not in line for line in lines)  # one line ending throughout
        assert text.endswith(ending) and len(lines) - 1 == old.count(ending) + 1 + added[name]
    table, intervals = study.read_study(published)
    assert set(table.study) == {"budget_1M", "budget_3M"} and len(intervals) == 8
