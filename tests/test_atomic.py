"""write_atomic: the old file or the new one, never half of one, and no temporary left behind."""

import stat

import pytest

from workbench.runs.atomic import write_atomic


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "results.csv"
    write_atomic(target, lambda tmp: open(tmp, "w").write("old\n"))

    def half_then_crash(tmp):
        open(tmp, "w").write("ne")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        write_atomic(target, half_then_crash)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]


def test_writes_into_new_folders_as_an_ordinary_file(tmp_path):
    target = write_atomic(tmp_path / "a" / "b.txt", lambda tmp: open(tmp, "w").write("new"))
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
