"""Under ``labkit grade`` a Redis exercise gets a Redis of its own per check, and no network.

Exercise 9's student code used to share the machine's network to reach the machine's
Redis, and with it every local service (PostgreSQL as a superuser, other students'
servers). Now each check starts a private ``redis-server`` on a unix socket in the
student's folder (``labkit.grading.isolation.services``): the student's processes reach
it by path from a network namespace with nothing in it. These tests drive a real
confined student process and real spawned processes: the private Redis answers, the
machine's services do not, a check never sees another check's keys, and the server dies
with its check.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gradingkit import confined_student, in_a_check

from labkit.grading import catalog
from labkit.grading.checks import Namespace
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.grader_side import StudentProcess
from labkit.grading.isolation.limits import Limits

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("bwrap") is None,
    reason="needs redis-server and bubblewrap (CI has both)",
)

#: Tries the machine's Redis and PostgreSQL by TCP, and the check's Redis by its URL.
PROBE = """
import socket, sys
import redis
reached = []
for port in (6379, 5432):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        reached.append(port)
    except OSError:
        pass
print(redis.Redis.from_url(sys.argv[1]).ping(), reached)
"""


@pytest.fixture
def student(tmp_path: Path) -> Iterator[StudentProcess]:
    confined = Confinement.detect(Limits(cpu_seconds=60))
    assert confined.bwrap is not None and not confined.network
    with confined_student(tmp_path, confined) as proc:
        yield proc



def test_exercise_9_asks_for_no_network() -> None:
    assert catalog.public("ex09").network is False


def test_the_students_code_reaches_the_checks_redis_and_nothing_of_the_machine(
    student: StudentProcess, redis_url: str
) -> None:
    (student.workdir / "probe.py").write_text(PROBE)

    def body(ns: Namespace) -> str:
        url = ns.redis_url()
        assert url.startswith("unix://") and str(ns.workdir) in url
        proc = ns.spawn(
            [sys.executable, "probe.py", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        return out.decode().strip()

    # The machine's Redis is up (the redis_url fixture checked it), yet out of reach.
    assert in_a_check(student, body) == "True []"


def test_each_check_gets_an_empty_redis_that_dies_with_it(student: StudentProcess) -> None:
    import redis

    def first(ns: Namespace) -> int:
        client = redis.Redis.from_url(ns.redis_url())
        client.set("left-by-check-1", "x")
        server = ns._spawned[0]  # type: ignore[attr-defined]
        client.close()
        return int(server.pid)

    def second(ns: Namespace) -> list[bytes]:
        client = redis.Redis.from_url(ns.redis_url())
        keys: list[bytes] = client.keys("*")
        client.close()
        return keys

    pid = in_a_check(student, first)
    assert isinstance(pid, int)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert in_a_check(student, second) == []
