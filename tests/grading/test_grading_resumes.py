"""A grading run survives its own crash: it is jobs on the lab's own store.

The class is graded for real (``labkit grade``, the sandbox CI has) three times over
the same submissions: once without a break, for the reference gradebook; once killed,
first one grading worker SIGKILLed in the middle of its notebook and then the whole
grader with its workers SIGKILLed; and once more with the same ``--run-id``, which must
finish the run: the same gradebook as the run without a break, no row twice, what was
graded before the kill not graded again, the notebook whose worker alone was killed
graded again after its lease, and those in flight when the grader died graded again at
once, without spending an attempt.
"""

from __future__ import annotations

import contextlib
import csv
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gradingkit import EXERCISES, SEED, SOLUTIONS, mounts_under, notebook_for, processes_under

from labkit.classroom.runlock import only_grader
from labkit.clock import FakeClock
from labkit.grading.grade import process_alive
from labkit.grading.isolation.confine import Confinement

pytestmark = pytest.mark.skipif(
    Confinement.detect().refusal() is not None, reason="labkit grade refuses this machine"
)
GRADED = ["ex02", "ex04"]
LEASE_S = 2.0


def _class(subs: Path) -> None:
    for student, source in (("ana", SOLUTIONS), ("bia", EXERCISES)):
        folder = subs / student
        folder.mkdir(parents=True)
        for exercise in GRADED:
            shutil.copy(notebook_for(source, exercise), folder)


def _argv(subs: Path, out: Path) -> list[str]:
    labkit = Path(sys.executable).parent / "labkit"
    argv = [str(labkit), "grade", str(subs), "--out", str(out), "--run-id", "r", "--jobs", "2"]
    argv += ["--seed", str(SEED), "--lease-s", str(LEASE_S)]
    for exercise in GRADED:
        argv += ["--exercise", exercise]
    return argv


def _rows(run: Path) -> list[tuple[str, ...]]:
    with (run / "grades.csv").open() as fh:
        return [tuple(r.values()) for r in csv.DictReader(fh)]


def _jobs(run: Path) -> dict[str, tuple[str, int, float]]:
    """Each job's key: (state, attempt, updated_at), read without the store."""
    if not (run / "jobs.db").exists():
        return {}
    try:
        with sqlite3.connect(f"file:{run / 'jobs.db'}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT key, state, attempt, updated_at FROM jobs").fetchall()
    except sqlite3.OperationalError:  # the grader is still making the tables
        return {}
    return {key: (state, attempt, updated) for key, state, attempt, updated in rows}


def _workers(grader: int) -> dict[str, int]:
    """The grading workers the grader started: name -> pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == grader and b"labkit.classroom.worker" in argv:
            found[argv[-3].decode()] = int(entry.name)
    return found


def _wait_for(what: str, ready: object, deadline: float) -> None:
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)


def test_a_grading_run_killed_halfway_resumes_to_the_same_gradebook(
    tmp_path: Path, rng: random.Random, scratch: Path
) -> None:
    # Where the kills fall is drawn from the session's seed: after the first or second
    # notebook is graded for the worker, up to half a second later for the grader.
    first, pause = rng.choice([1, 2]), rng.uniform(0.0, 0.5)
    print(
        f"seed {SEED}: worker killed after {first} graded, grader {pause:.2f}s after the "
        f"next; replay: LABKIT_SEED={SEED} pytest tests/grading/test_grading_resumes.py"
    )
    subs = tmp_path / "subs"
    _class(subs)
    env = {**os.environ, "TMPDIR": str(scratch)}
    whole = subprocess.run(
        _argv(subs, tmp_path / "whole"), capture_output=True, text=True, env=env, timeout=600
    )
    assert whole.returncode == 0, whole.stderr
    expected = _rows(tmp_path / "whole" / "r")
    run = tmp_path / "killed" / "r"
    log = (tmp_path / "grader.log").open("w")
    grader = subprocess.Popen(
        _argv(subs, tmp_path / "killed"),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300

        def states() -> list[str]:
            return [s for s, _, _ in _jobs(run).values()]

        _wait_for(
            "a notebook graded while another was in flight",
            lambda: states().count("succeeded") >= first and "running" in states(),
            deadline,
        )
        holder = next(
            o
            for (o,) in sqlite3.connect(run / "jobs.db").execute(
                "SELECT lease_owner FROM jobs WHERE state = 'running'"
            )
        )
        victim = _workers(grader.pid)[holder]
        os.kill(victim, signal.SIGKILL)
        _wait_for(
            "the killed worker gone",
            lambda: (
                not Path(f"/proc/{victim}").exists()
                or "Z" in Path(f"/proc/{victim}/stat").read_text().split()[2]
            ),
            deadline,
        )
        graded = states().count("succeeded")
        _wait_for(
            "one more notebook graded", lambda: states().count("succeeded") > graded, deadline
        )
        time.sleep(pause)
        _wait_for("a notebook in flight", lambda: "running" in states(), deadline)
        os.killpg(grader.pid, signal.SIGKILL)
        assert grader.wait(60) == -signal.SIGKILL, "the grader was never killed"
    finally:
        if grader.poll() is None:
            os.killpg(grader.pid, signal.SIGKILL)
            grader.wait()
        log.close()
    before = _jobs(run)
    finished = {k: v for k, v in before.items() if v[0] == "succeeded"}
    assert 0 < len(finished) < len(before), f"the kill did not land halfway: {before}"
    in_flight = {k: v for k, v in before.items() if v[0] == "running"}
    assert in_flight, f"no notebook was being graded when the grader was killed: {before}"
    assert not (run / "grades.csv").exists(), "a gradebook was written by a run that was killed"

    resumed = subprocess.run(
        _argv(subs, tmp_path / "killed"), capture_output=True, text=True, env=env, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {len(finished)} of {len(before)} already graded" in resumed.stdout
    # The killed run's workers are provably dead (the run's lock is free), so what they
    # held is graded again at once, without waiting for a lease or spending an attempt.
    assert f"{len(in_flight)} notebook(s) were being graded when the run stopped" in (
        resumed.stdout
    ), resumed.stdout
    assert _rows(run) == expected, "the resumed run's gradebook differs from an unbroken run's"
    after = _jobs(run)
    assert {k: after[k] for k in finished} == finished, "a notebook was graded twice"
    assert {k: after[k][1] for k in in_flight} == {k: v[1] for k, v in in_flight.items()}, (
        "a notebook in flight when the grader was killed spent an attempt on the kill"
    )
    assert all(state == "succeeded" for state, _, _ in after.values()), after
    assert processes_under(scratch) == [], "student processes outlived their grader"
    assert mounts_under(scratch) == [], "a killed worker's scratch tmpfs was never unmounted"
    assert not list(scratch.glob("labkit-grade-*")), "a killed worker's scratch was left"


_GRADER = """
import subprocess, sys, time
from pathlib import Path
from labkit.classroom.runlock import only_grader
with only_grader(Path(sys.argv[1])) as lock:
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              pass_fds=(lock,))
    print(worker.pid, flush=True)
    time.sleep(600)
"""


def test_the_run_lock_outlives_the_grader_until_its_last_worker_is_gone(tmp_path: Path) -> None:
    """What lets a resumed run give back in-flight notebooks at once: the lock is free
    only when no worker of the killed grader is alive."""

    grader = subprocess.Popen([sys.executable, "-c", _GRADER, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    worker = 0
    try:
        assert grader.stdout is not None
        worker = int(grader.stdout.readline())
        os.kill(grader.pid, signal.SIGKILL)
        assert grader.wait(30) == -signal.SIGKILL
        clock = FakeClock()
        with pytest.raises(RuntimeError, match="whose grading workers still hold the run"):
            with only_grader(tmp_path, clock):
                pass
        assert clock.now() >= 10.0, "it gave up before the workers had time to follow"
        os.kill(worker, signal.SIGKILL)
        _wait_for("the worker gone", lambda: not process_alive(worker), time.monotonic() + 30)
        with only_grader(tmp_path, FakeClock()) as lock:
            assert lock > 2
    finally:
        for pid in (grader.pid, worker):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

