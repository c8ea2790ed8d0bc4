"""The ``labkit`` command under load and abuse: each test failed on the command before its fix.

Growth is measured by counting work, not by timing it: the number of Python function
calls (``sys.setprofile``) and the peak memory (``tracemalloc``) of one command on N
and on 4N dead jobs, compared inside one run. A linear command does about 4x the
calls; the quadratic one did about 16x.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from labkit.cli import build_parser, jobs, main
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import PermanentError, TransientError
from labkit.store import JobStore


def _dead_db(path: Path, n: int, kinds: tuple[str, ...] = ("charge",)) -> Path:
    """``n`` dead jobs: even ones dead of used-up attempts (retryable), odd ones permanent."""
    with JobStore(path, clock=FakeClock(LAB_EPOCH)) as store:
        for i in range(n):
            store.enqueue(kinds[i % len(kinds)], {"i": i}, key=f"job-{i}")
        with store.conn:
            store.conn.execute(
                "UPDATE jobs SET state = 'dead', error_class = 'E', updated_at = created_at + id,"
                " dead_reason = CASE WHEN id % 2 = 0 THEN 'attempts exhausted (1 of 1): 503'"
                " ELSE 'permanent error: 400' END"
            )
    return path


def _calls(argv: list[str]) -> int:
    """How many Python and C function calls ``labkit argv`` makes."""
    seen = [0]

    def count(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            seen[0] += 1

    sys.setprofile(count)
    try:
        assert main(argv) == 0
    finally:
        sys.setprofile(None)
    return seen[0]


def test_retry_failed_does_linear_work_in_the_number_of_dead_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = _dead_db(tmp_path / "small.db", 150)
    large = _dead_db(tmp_path / "large.db", 600)
    # A first run pays for imports and caches; only the next two are compared.
    _calls(["retry-failed", str(_dead_db(tmp_path / "warm.db", 10)), "--limit", "5"])
    work = {}
    for name, db in (("small", small), ("large", large)):
        work[name] = _calls(["retry-failed", str(db), "--limit", "100000", "--dry-run"])
    out = capsys.readouterr().out
    assert "would redrive 75 job(s)" in out and "would redrive 300 job(s)" in out
    ratio = work["large"] / work["small"]
    # Linear: ~4 (a little less, fixed costs). The `j not in matching` version: ~10-16.
    assert ratio < 6, f"4x the dead jobs cost {ratio:.1f}x the calls: {work}"


def test_retry_failed_memory_does_not_grow_with_the_dead_letter_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    peaks = {}
    for n in (600, 2400):
        db = _dead_db(tmp_path / f"dead-{n}.db", n)
        tracemalloc.start()
        try:
            assert main(["retry-failed", str(db), "--limit", "10", "--dry-run"]) == 0
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert "would redrive 10 job(s)" in capsys.readouterr().out
    # Reading every dead job (the old `store.jobs(limit=1_000_000)`) grew ~4x here.
    assert peaks[2400] < 2 * peaks[600], peaks


def test_retry_failed_redrives_across_pages_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _dead_db(tmp_path / "jobs.db", 40)
    monkeypatch.setattr(jobs, "BATCH", 7)  # several pages, and a short last one
    assert main(["retry-failed", str(db), "--limit", "15"]) == 0
    out = capsys.readouterr().out
    assert "retried 15 job(s)" in out and "left 20 dead job(s)" in out
    with JobStore(db) as store:
        redriven = [j.id for j in store.jobs(state="pending", limit=100)]
    assert redriven == list(range(2, 31, 2))  # the 15 oldest retryable ones, no repeats


@pytest.mark.parametrize("limit", ["-1", "0", "nan", "1.5", str(2**70)])
def test_a_limit_that_is_not_a_positive_whole_number_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], limit: str
) -> None:
    db = _dead_db(tmp_path / "jobs.db", 4)
    for argv in (["inspect", str(db)], ["retry-failed", str(db)], ["redrive", str(db)]):
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--limit", limit])
        assert exited.value.code == 2
        assert "--limit" in capsys.readouterr().err


def test_redrive_with_the_same_id_twice_redrives_it_once_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _dead_db(tmp_path / "jobs.db", 6)
    assert main(["redrive", str(db), "4", "4"]) == 0
    out = capsys.readouterr().out
    assert "redrove 1 job(s)" in out and "job-3" in out
    with JobStore(db) as store:
        assert store.get(4).state == "pending" and store.get(4).redrives == 1


def test_retry_failed_with_kind_counts_only_that_kind_as_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ids 1..8 alternate charge/mail; odd ids are permanent: charge 1,3,5,7 / mail none.
    db = _dead_db(tmp_path / "jobs.db", 8, kinds=("charge", "mail"))
    with JobStore(db) as store:
        store.conn.execute("UPDATE jobs SET dead_reason = 'permanent error: 400' WHERE id = 2")
    assert main(["retry-failed", str(db), "--limit", "10", "--kind", "mail"]) == 0
    out = capsys.readouterr().out
    assert "retried 3 job(s)" in out  # mail: ids 4, 6, 8 (2 is permanent now)
    assert "left 1 dead job(s) of kind mail with permanent failures alone" in out


def test_keys_and_kinds_are_escaped_so_they_cannot_forge_rows_or_paint_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "jobs.db"
    clock = FakeClock(LAB_EPOCH)
    forged_key = "real\n99  fake  forged-row  0s  1  0  all good"
    with JobStore(db, clock=clock, rng=random.Random(1)) as store:
        job, _ = store.enqueue("k\x1b[2J\x1b[31m", {}, key=forged_key, max_attempts=1)
        claimed = store.claim("w\x07")
        assert claimed is not None
        store.fail(claimed, PermanentError("bad\rline\x1b]0;owned\x07"))
    for argv in (
        ["inspect", str(db)],
        ["inspect", str(db), "--job", str(job.id)],
        ["redrive", str(db), str(job.id), "--dry-run"],
    ):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\r" not in out and "\x07" not in out, argv
        assert not any(line.startswith("99") for line in out.splitlines()), argv
        assert "real\\x0a99" in out and "k\\x1b[2J" in out, argv


def test_lease_expired_dead_jobs_are_retried_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "jobs.db"
    clock = FakeClock(LAB_EPOCH)
    with JobStore(db, clock=clock) as store:
        poison, _ = store.enqueue("poison", {}, key="poison", max_attempts=1)
        assert store.claim("w1", lease_s=5) is not None  # the worker dies holding it
        clock.advance(6)
        assert store.claim("w2") is None  # the claim buries it
        assert (store.get(poison.id).dead_reason or "").startswith("lease expired")
        flaky, _ = store.enqueue("charge", {}, key="flaky", max_attempts=1)
        store.fail(store.claim("w2"), TransientError("503"))  # type: ignore[arg-type]
    assert main(["retry-failed", str(db), "--limit", "10"]) == 0
    out = capsys.readouterr().out
    assert "retried 1 job(s)" in out and "--include-lease-expired" in out
    with JobStore(db) as store:
        assert store.get(poison.id).state == "dead" and store.get(flaky.id).state == "pending"
    assert main(["retry-failed", str(db), "--limit", "10", "--include-lease-expired"]) == 0
    with JobStore(db) as store:
        assert store.get(poison.id).state == "pending"


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "soon"])
def test_worker_with_a_bad_lease_is_a_usage_error_without_a_traceback(
    tmp_path: Path, value: str
) -> None:
    db = _dead_db(tmp_path / "jobs.db", 2)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "labkit",
            "worker",
            str(db),
            "--handlers",
            "x:Y",
            "--lease-s",
            value,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--lease-s" in done.stderr and "Traceback" not in done.stderr


def test_version_and_python_dash_m(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("labkit ")
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.startswith("labkit 0.")


def test_every_option_of_the_job_commands_has_help() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    missing = [
        f"{name} {action.dest}"
        for name in ("inspect", "redrive", "retry-failed", "worker")
        for action in commands[name]._actions  # type: ignore[index]
        if not action.help
    ]
    assert missing == []
    assert all(a.help for a in parser._actions)


def test_inspect_on_an_empty_file_leaves_it_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    assert main(["inspect", str(empty)]) == 2
    assert "empty file" in capsys.readouterr().err
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


@pytest.mark.parametrize(
    "argv",
    [
        ["retry-failed", "{db}", "--kind", "", "--limit", "5"],
        ["redrive", "{db}", "--kind", "", "--limit", "5"],
        ["redrive", "{db}", "--queue", "", "--limit", "5"],
        ["redrive", "{db}", "--error-class", "", "--limit", "5"],
        ["redrive", "{db}", "--kind", "k" * 2000, "--limit", "5"],
        ["worker", "{db}", "--handlers", "labkit.explore.strategies:HANDLERS", "--name", ""],
        ["worker", "{db}", "--handlers", "labkit.explore.strategies:HANDLERS", "--queue", ""],
    ],
    ids=lambda argv: " ".join(a if len(a) < 20 else a[:8] + "..." for a in argv[:1] + argv[2:4]),
)
def test_a_bad_name_option_is_an_argument_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    db = _dead_db(tmp_path / "jobs.db", 4)
    before = db.read_bytes()
    with pytest.raises(SystemExit) as stopped:
        main([str(db) if a == "{db}" else a for a in argv])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    option = next(a for a in argv if a.startswith("--") and a not in ("--limit", "--handlers"))
    assert f"argument {option}:" in err and "Traceback" not in err, err
    assert db.read_bytes() == before  # nothing was touched
