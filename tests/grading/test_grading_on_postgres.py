"""A class graded by workers on several machines over PostgreSQL, exactly once.

``labkit grade --queue`` puts the run in PostgreSQL (jobs, plan, task list and the
notebooks themselves) and, with ``--jobs 0``, only waits and writes the gradebook;
three ``labkit grade-worker`` processes stand for three machines. One machine is
SIGKILLed while it grades a notebook; another has its database session terminated
(``pg_terminate_backend``) while it grades one. Every notebook must end graded once,
the killed machine's notebook again after its lease, the other's by the same worker
that lost its session, and the gradebook must equal a one-machine run's.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gradingkit import (
    EXERCISES,
    SEED,
    SOLUTIONS,
    mounts_under,
    notebook_for,
    processes_under,
    require_service,
)

from labkit.grading.isolation.confine import Confinement

psycopg = pytest.importorskip("psycopg")
pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        Confinement.detect().refusal() is not None, reason="labkit grade refuses this machine"
    ),
]
GRADED = ["ex02", "ex04"]
RUN = "pgclass"
SCHEMA = f"grading_{RUN}"
LABKIT = str(Path(sys.executable).parent / "labkit")


@pytest.fixture
def dsn() -> Iterator[str]:
    url = require_service("postgres")
    yield url
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')


def _class(subs: Path) -> None:
    for student, source in (("ana", SOLUTIONS), ("bia", EXERCISES)):
        (subs / student).mkdir(parents=True)
        for exercise in GRADED:
            shutil.copy(notebook_for(source, exercise), subs / student)


def _grade_argv(subs: Path, out: Path, *extra: str) -> list[str]:
    argv = [LABKIT, "grade", str(subs), "--out", str(out), "--run-id", RUN, "--seed", str(SEED)]
    for exercise in GRADED:
        argv += ["--exercise", exercise]
    return [*argv, *extra]


def _rows(run: Path) -> list[tuple[str, ...]]:
    with (run / "grades.csv").open() as fh:
        return [tuple(r.values()) for r in csv.DictReader(fh)]


def _jobs(conn: object) -> list[tuple[str, str, int, str | None]]:
    try:
        return conn.execute(  # type: ignore[attr-defined, no-any-return]
            f'SELECT key, state, attempt, lease_owner FROM "{SCHEMA}".jobs ORDER BY id'
        ).fetchall()
    except psycopg.errors.UndefinedTable:
        return []


def _wait_for(what: str, ready: Callable[[], object], deadline: float) -> object:
    while not (found := ready()):
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)
    return found


def test_workers_on_several_machines_grade_a_class_once_through_kills_and_drops(
    dsn: str, tmp_path: Path, scratch: Path
) -> None:
    subs = tmp_path / "subs"
    _class(subs)
    alone = subprocess.run(
        _grade_argv(subs, tmp_path / "alone", "--jobs", "2"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert alone.returncode == 0, alone.stderr
    expected = _rows(tmp_path / "alone" / RUN)

    spawned: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, "TMPDIR": str(scratch)}

    def spawn(argv: list[str], log: str) -> subprocess.Popen[bytes]:
        with (tmp_path / log).open("wb") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        spawned.append(proc)
        return proc

    admin = psycopg.connect(dsn, autocommit=True)
    try:
        deadline = time.monotonic() + 300
        collector = spawn(
            _grade_argv(subs, tmp_path / "queued", "--queue", dsn, "--jobs", "0", "--lease-s", "2"),
            "collector.log",
        )
        _wait_for("the class in the queue", lambda: len(_jobs(admin)) == 4, deadline)
        machines = [
            spawn(
                [LABKIT, "grade-worker", "--queue", dsn, "--run-id", RUN, "--jobs", "1"],
                f"machine{n}.log",
            )
            for n in range(3)
        ]

        def owners() -> list[str]:
            return [o for _, state, _, o in _jobs(admin) if state == "running" and o]

        killed_owner = str(_wait_for("a notebook being graded", lambda: owners(), deadline)[0])
        victim = next(m for m in machines if f"-{m.pid}-g" in killed_owner)
        os.killpg(victim.pid, signal.SIGKILL)
        assert victim.wait(30) == -signal.SIGKILL, "the machine was never killed"
        dropped_owner = str(
            _wait_for(
                "another worker grading",
                lambda: [o for o in owners() if o != killed_owner],
                deadline,
            )[0]
        )
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = left('labkit-grade-' || %s, 63)",
            [dropped_owner],
        ).fetchall()
        assert ended and all(ok for (ok,) in ended), "no session of that worker was ended"
        assert collector.wait(300) == 0, (tmp_path / "collector.log").read_text()
        for machine in machines:
            if machine is not victim:
                assert machine.wait(120) == 0, (tmp_path / "machine0.log").read_text()
        jobs = _jobs(admin)
    finally:
        for proc in spawned:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        admin.close()
    assert _rows(tmp_path / "queued" / RUN) == expected, "several machines graded differently"
    assert [state for _, state, _, _ in jobs] == ["succeeded"] * 4, jobs
    assert processes_under(scratch) == [], "student processes outlived their machine"
    assert mounts_under(scratch) == [], "a killed machine's scratch tmpfs was never unmounted"
    attempts = sorted(attempt for _, _, attempt, _ in jobs)
    assert attempts == [1, 1, 1, 2], (
        f"the killed machine's notebook is graded twice, no other: {jobs}"
    )
