"""The ``labkit`` commands refuse a symbolic link planted as the database or beside it.

A link named like the job database, or like the ``-wal``, ``-shm`` or ``-journal`` file
SQLite keeps beside it, can redirect the command's writes to another file. Each refusal
must say what it is (a symbolic link, and where it points), why, and what to do; each
test failed before its fix, when the refusal said "needs write access" (or, for a
``-journal`` link, the command followed it). A link in the folder path above the
database is not refused, as before: it was put there on purpose and redirects nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.cli import main
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.store import JobStore


def _job_db(path: Path) -> Path:
    with JobStore(path, clock=FakeClock(LAB_EPOCH)) as store:
        store.enqueue("charge", {"n": 1}, key="kept")
    return path


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert "symbolic link" in said and "write access" not in said, said
    return said


@pytest.mark.parametrize(
    "command",
    [
        ["inspect"],  # a read
        ["redrive", "--limit", "5"],  # a write
    ],
)
def test_a_database_path_that_is_a_symlink_is_refused_as_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    (tmp_path / "real").mkdir()
    real = _job_db(tmp_path / "real" / "jobs.db")
    link = tmp_path / "jobs.db"
    link.symlink_to(real)
    said = _refused([command[0], str(link), *command[1:]], capsys)
    assert f"{link} is a symbolic link to {real}" in said
    assert "redirect" in said and f"Pass the real path ({real}) instead" in said, said
    assert sorted(p.name for p in real.parent.iterdir()) == ["jobs.db"]  # nothing opened


def test_a_dangling_symlink_is_refused_as_a_link_not_called_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "elsewhere" / "jobs.db"
    link = tmp_path / "jobs.db"
    link.symlink_to(target)
    said = _refused(["redrive", str(link), "--limit", "5"], capsys)
    assert f"{link} is a symbolic link to {target}, which does not exist" in said, said
    assert "no database at" not in said
    assert not target.parent.exists()


@pytest.mark.parametrize(
    "suffix",
    [
        "-wal",  # the write-ahead log: redirected, it takes every commit
        "-shm",  # the WAL index
        "-journal",  # the rollback journal: SQLite would read it back as a hot journal
    ],
)
@pytest.mark.parametrize("command", [["inspect"], ["retry-failed", "--limit", "5"]])
def test_a_symlinked_sibling_of_the_database_is_refused_as_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, command: list[str]
) -> None:
    db = _job_db(tmp_path / "jobs.db")
    target = tmp_path / "victim"
    target.write_bytes(b"someone else's data\n" * 100)
    sibling = tmp_path / f"jobs.db{suffix}"
    sibling.symlink_to(target)
    said = _refused([command[0], str(db), *command[1:]], capsys)
    assert f"{sibling} is a symbolic link to {target}" in said, said
    assert "redirect" in said and "remove the link" in said, said
    assert target.read_bytes() == b"someone else's data\n" * 100
    assert sibling.is_symlink()  # left for the operator to look at


def test_a_dangling_symlinked_wal_is_refused_and_its_target_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _job_db(tmp_path / "jobs.db")
    target = tmp_path / "planted-wal"
    (tmp_path / "jobs.db-wal").symlink_to(target)
    said = _refused(["redrive", str(db), "--limit", "5"], capsys)
    assert f"is a symbolic link to {target}, which does not exist" in said, said
    assert not target.exists()


def test_a_symlinked_folder_above_the_database_is_still_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The policy kept: dbfile never refused a link in the folder path, and SQLite keeps
    # the -wal and -shm beside the real file. This test passed before the fix too.
    (tmp_path / "real").mkdir()
    _job_db(tmp_path / "real" / "jobs.db")
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    assert main(["redrive", str(tmp_path / "linked" / "jobs.db"), "--limit", "5"]) == 0
    assert "redrove 0 job(s)" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["jobs.db"]
