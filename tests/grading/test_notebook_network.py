"""Exercise 8 under ``labkit grade``: a network namespace, a RabbitMQ and a PostgreSQL per notebook.

Exercise 8's student code must speak TCP to a broker and a database. It used to share
the machine's network, and so reached every local service: the machine's PostgreSQL as
a superuser (``pg_read_file`` read the hidden checks, ``COPY ... TO PROGRAM`` ran shell
commands on the host as ``postgres``), an unauthenticated Redis, other students'
servers. Now each notebook gets a network namespace with only a loopback
(``labkit.grading.isolation.netns``) and services of its own in it
(``services.NotebookServices``). These tests drive a real confined student, its real
services and real spawned processes; they need root, bubblewrap, ``ip``, RabbitMQ and
PostgreSQL's programs (CI has them all).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from gradingkit import confined_student, in_a_check

from labkit.grading import catalog
from labkit.grading.checks import Namespace
from labkit.grading.isolation import netns
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.grader_side import StudentProcess
from labkit.grading.isolation.limits import Limits

CONFINED = Confinement.detect(Limits(cpu_seconds=120), network=True)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        netns.available() is not None or CONFINED.bwrap is None,
        reason=f"needs root, bubblewrap, ip and nsenter: {netns.available() or 'no bwrap'}",
    ),
]

#: Run in the student's sandbox: what of the machine its code can reach, and what its
#: own PostgreSQL lets it do (it is superuser there).
ATTACK = """
import json, os, socket, sys
import psycopg
marker, hidden, tag, relay = sys.argv[1:5]
seen = {}
for port in (5432, 5672, 6379, 15672, int(relay)):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        seen[port] = True
    except OSError:
        seen[port] = False
with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
    seen["data_directory"] = conn.execute("SHOW data_directory").fetchone()[0]
    conn.execute(f"CREATE TABLE {tag} (x int)")
    try:
        inside = os.path.join(os.getcwd(), "ran-inside")
        conn.execute(
            # The program reads what COPY writes first: one that exits before PostgreSQL
            # has written to it makes the COPY fail on a broken pipe (seen once under load).
            f"COPY (SELECT 1) TO PROGRAM 'cat >/dev/null; id -u > {inside}; "
            f"id -u > {marker} 2>/dev/null; true'"
        )
        seen["program"] = "ran"
    except psycopg.Error as exc:
        seen["program"] = type(exc).__name__
    try:
        seen["hidden"] = conn.execute("SELECT pg_read_file(%s)", (hidden,)).fetchone()[0][:40]
    except psycopg.Error as exc:
        seen["hidden"] = type(exc).__name__
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StudentProcess]:
    """One notebook for the module: its services boot once (RabbitMQ takes about 10 s).
    The last test ends it."""
    with confined_student(tmp_path_factory.mktemp("netns"), CONFINED) as proc:
        yield proc


def test_exercise_8_is_the_only_exercise_that_asks_for_a_network() -> None:
    asking = [e for e in catalog.exercises() if catalog.public(e).network]
    assert asking == ["ex08"]


def test_the_students_code_reaches_its_own_services_and_nothing_of_the_machine(
    student: StudentProcess, tmp_path: Path
) -> None:
    import json

    tag = f"attack_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "ran-on-the-host"  # outside the student's folder
    hidden = Path(__file__).resolve().parents[2] / "solutions" / "hidden" / "ex08.py"
    (student.workdir / "attack.py").write_text(ATTACK)

    def body(ns: Namespace) -> dict[str, object]:
        found = ns.services("rabbitmq", "postgres")
        assert found["postgres"].student == "postgresql://postgres@127.0.0.1:5432/test"
        assert found["postgres"].checker != found["postgres"].student  # a relay
        relay = found["postgres"].checker.split(":")[-1].split("/")[0]  # the check's way in
        proc = ns.spawn(
            [sys.executable, "attack.py", str(marker), str(hidden), tag, relay],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        seen: dict[str, object] = json.loads(out)
        seen["relay"] = seen.pop(relay)
        # The check reaches the same database through its relay and sees the table.
        with psycopg.connect(found["postgres"].checker) as conn:
            seen["checker_sees"] = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE tablename = %s", (tag,)
            ).fetchone()[0]
        return seen

    seen = in_a_check(student, body)
    assert isinstance(seen, dict)
    # Its own broker and database answer at the usual ports; nothing else listens there.
    assert seen["5432"] is True and seen["5672"] is True
    assert seen["6379"] is False and seen["15672"] is False
    assert seen["relay"] is False  # the check's relay, on the host's loopback, is not its
    socket.create_connection(("127.0.0.1", 6379), timeout=2).close()  # yet the machine's is up
    assert str(seen["data_directory"]).startswith(str(student.workdir))
    assert seen["checker_sees"] == 1
    # Superuser of its own cluster: the program ran, as the student, inside the sandbox.
    assert seen["program"] == "ran"
    assert (student.workdir / "ran-inside").read_text().strip() == str(CONFINED.uid())
    assert not marker.exists(), "a program run through PostgreSQL wrote on the host"
    assert seen["hidden"] == "UndefinedFile"  # the hidden checks are not in its world
    # The machine's own PostgreSQL never saw the student's table.
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test") as conn:
        machine = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename = %s", (tag,)
        ).fetchone()[0]
    assert machine == 0


def test_the_services_outlive_a_check_and_die_with_the_notebook(
    student: StudentProcess,
) -> None:
    def first(ns: Namespace) -> str:
        url = ns.services("postgres")["postgres"].checker
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE left_by_check_1 (x int)")
        return url

    def second(ns: Namespace) -> int:
        url = ns.services("postgres")["postgres"].checker
        with psycopg.connect(url) as conn:
            return int(
                conn.execute(
                    "SELECT count(*) FROM pg_tables WHERE tablename = 'left_by_check_1'"
                ).fetchone()[0]
            )

    in_a_check(student, first)
    assert in_a_check(student, second) == 1  # one cluster for the notebook's checks
    name = student.netns.name if student.netns else ""
    assert (Path("/run/netns") / name).exists()
    uid = CONFINED.uid()
    student.stop()
    assert not (Path("/run/netns") / name).exists()
    left = subprocess.run(["pgrep", "-u", str(uid)], capture_output=True, text=True).stdout
    assert left.strip() == "", f"processes of the student's uid outlived the notebook: {left}"
