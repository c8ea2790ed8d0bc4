"""The ``labkit`` command on a real job database: inspect, retry-failed, redrive, worker."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from labkit.cli import main
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import PermanentError, TransientError
from labkit.store import JobStore


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Jobs 1-2 dead of a permanent error, 3-4 dead of used-up attempts, 5 pending."""
    path = tmp_path / "jobs.db"
    clock = FakeClock(LAB_EPOCH)
    with JobStore(path, clock=clock, rng=random.Random(1)) as store:
        for n in range(1, 6):
            store.enqueue("charge", {"invoice": n}, key=f"billing:{n}:charge:v1", max_attempts=1)
        for n in range(1, 5):
            job = store.claim("w1")
            assert job is not None
            error = (
                PermanentError("card declined") if n <= 2 else TransientError("503 from the ERP")
            )
            store.fail(job, error)
            clock.advance(10)
        assert store.counts()["dead"] == 4
    return path


def _states(path: Path) -> dict[int, str]:
    with JobStore(path) as store:
        return {j.id: str(j.state) for j in store.jobs()}


def test_inspect_shows_counts_and_dead_letters_with_reasons(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", str(db)]) == 0
    out = capsys.readouterr().out
    assert "dead" in out and "pending" in out
    assert "billing:1:charge:v1" in out and "permanent error: card declined" in out
    assert "attempts exhausted" in out


def test_inspect_as_of_reads_ages_at_that_time(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Job 1 died at LAB_EPOCH (2026-01-01 00:00:00); two hours later it is 2h old.
    assert main(["inspect", str(db), "--as-of", "2026-01-01T02:00:00Z"]) == 0
    first = capsys.readouterr().out
    assert main(["inspect", str(db), "--as-of", "2026-01-01 02:00:00"]) == 0
    assert capsys.readouterr().out == first  # no zone given: read as UTC
    row = next(line for line in first.splitlines() if "billing:1:charge:v1" in line)
    assert " 2h " in row, row


def test_redrive_as_of_makes_the_job_due_at_that_time(db: Path) -> None:
    assert main(["redrive", str(db), "1", "--as-of", "2026-01-01T03:00:00Z"]) == 0
    with JobStore(db) as store:
        job = store.get(1)
    assert (job.state, job.run_after) == ("pending", LAB_EPOCH + 3 * 3600)


def test_inspect_as_of_with_a_bad_time_says_what_it_wants(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["inspect", str(db), "--as-of", "yesterday"])
    assert exit_.value.code == 2
    assert "--as-of wants a time like 2026-01-01T08:00:00Z" in capsys.readouterr().err


def test_inspect_one_job_shows_its_attempts(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(db), "--job", "3"]) == 0
    out = capsys.readouterr().out
    assert "key=billing:3:charge:v1" in out and "state=dead" in out
    assert "w1" in out and "TransientError: 503 from the ERP" in out


def test_a_missing_database_is_a_clear_error_and_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    assert main(["inspect", str(missing)]) == 2
    assert "no database at" in capsys.readouterr().err
    assert not missing.exists()


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("shopping list\n")
    for command in (["inspect"], ["redrive", "--limit", "1"], ["retry-failed", "--limit", "1"]):
        assert main([command[0], str(bad), *command[1:]]) == 2
        assert "not a SQLite database" in capsys.readouterr().err
    assert bad.read_text() == "shopping list\n"


def test_bulk_redrive_without_limit_is_refused_and_changes_nothing(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _states(db)
    assert main(["redrive", str(db)]) == 2
    assert "--limit" in capsys.readouterr().err
    assert _states(db) == before


def test_redrive_dry_run_names_the_jobs_and_changes_nothing(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _states(db)
    assert main(["redrive", str(db), "--limit", "2", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would redrive 2 job(s)" in out and "nothing changed" in out
    assert "billing:1:charge:v1" in out and "billing:2:charge:v1" in out
    assert _states(db) == before


def test_redrive_with_limit_keeps_the_key_oldest_first(db: Path) -> None:
    assert main(["redrive", str(db), "--limit", "1", "--note", "card fixed"]) == 0
    with JobStore(db) as store:
        job = store.get(1)
        assert (job.state, job.key, job.redrives, job.attempt) == (
            "pending",
            "billing:1:charge:v1",
            1,
            0,
        )
        assert store.get(2).state == "dead"
        assert len(store.jobs()) == 5  # the same row, no copy


def test_redrive_by_id_refuses_a_job_that_is_not_dead(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _states(db)
    assert main(["redrive", str(db), "1", "5"]) == 2
    assert "5 is pending" in capsys.readouterr().err
    assert _states(db) == before
    assert main(["redrive", str(db), "1"]) == 0
    assert _states(db)[1] == "pending"


def test_retry_failed_needs_a_limit(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retry-failed", str(db)]) == 2
    assert "--limit" in capsys.readouterr().err


def test_retry_failed_redrives_transient_failures_and_leaves_permanent_ones(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["retry-failed", str(db), "--limit", "10", "--dry-run"]) == 0
    assert "would redrive 2 job(s)" in capsys.readouterr().out
    assert _states(db)[3] == "dead"
    assert main(["retry-failed", str(db), "--limit", "10"]) == 0
    out = capsys.readouterr().out
    assert "left 2 dead job(s) with permanent failures alone" in out
    assert _states(db) == {1: "dead", 2: "dead", 3: "pending", 4: "pending", 5: "pending"}


def test_worker_runs_the_handlers_until_idle(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cli_handlers.py").write_text(
        "def charge(job, ctx):\n    return {'charged': job.payload['invoice']}\n"
        "HANDLERS = {'charge': charge}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["worker", str(db), "--handlers", "cli_handlers:HANDLERS", "--until-idle"]) == 0
    assert "stopped after 1 job(s)" in capsys.readouterr().out
    assert _states(db)[5] == "succeeded"


def test_worker_with_handlers_that_cannot_load_says_why(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", str(db), "--handlers", "no_such_module_here:HANDLERS"]) == 2
    assert "cannot load handlers" in capsys.readouterr().err
    assert main(["worker", str(db), "--handlers", "nocolon"]) == 2
    assert "package.module:HANDLERS" in capsys.readouterr().err


def test_grade_with_a_missing_folder_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["grade", str(tmp_path / "none"), "--out", str(tmp_path / "g.csv")]) == 2
    assert "not a folder of student folders" in capsys.readouterr().err


def test_the_default_solutions_folder_is_the_one_grading_uses() -> None:
    from labkit.cli import build_parser
    from labkit.grading.course import Course

    args = build_parser().parse_args(["release", "out"])
    assert args.solutions == Course().solutions


def test_the_grade_limits_default_to_the_graders_own_limits() -> None:
    # One source for the numbers: the option defaults are read from Limits, not retyped.
    from labkit.cli import build_parser
    from labkit.grading.isolation.limits import Limits

    args = build_parser().parse_args(["grade", "subs"])
    limits = Limits()
    assert args.memory_mib << 20 == limits.memory
    assert args.max_processes == limits.processes
    assert args.max_open_files == limits.open_files
    assert args.max_file_mib << 20 == limits.file_size
    assert args.cpu_seconds == limits.cpu_seconds
    assert args.max_output_kib << 10 == limits.output
    assert args.memory_total_mib << 20 == limits.memory_total
