"""Checks against a student's process over the channel: the ``Namespace`` contract, remote.

A tiny notebook's cells run in a real confined student process; checks written here call
it the way exercise checks do. Each check starts from the state the cells left (one
fork per check), a student exception comes back with the student's line, a live object
cannot come back, and a hung call is killed and the next check gets a fresh process.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.grading.checks import Check, CheckFailed, Namespace, StudentRaised, run_check
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.grader_side import StudentProcess
from labkit.grading.isolation.limits import Limits
from labkit.grading.isolation.remote import RemoteNamespace
from labkit.grading.seeds import student_seed

CELLS = [
    (0, "calls = 0\n"),
    (
        1,
        "def bump():\n"
        "    global calls\n"
        "    calls += 1\n"
        "    return calls\n"
        "\n"
        "def boom(n):\n"
        "    if n > 1:\n"
        "        raise ValueError(f'n={n} is too big')\n"
        "    return (n, b'ok', float('nan'))\n"
        "\n"
        "def a_set():\n"
        "    return {1, 2}\n"
        "\n"
        "def hang():\n"
        "    while True:\n"
        "        pass\n"
        "\n"
        "def stub():\n"
        "    raise NotImplementedError('Exercise 9')\n"
        "\n"
        "def scratch():\n"
        "    import multiprocessing, tempfile\n"
        "    multiprocessing.get_context('fork').Queue().put(1)\n"
        "    with tempfile.NamedTemporaryFile() as fh:\n"
        "        fh.write(b'x')\n"
        "    return True\n"
        "\n"
        "LIMIT = {'tries': 3}\n"
        "\n"
        "def draws():\n"
        "    import random\n"
        "    return [random.random() for _ in range(3)]\n"
        "\n"
        "draws()  # the cells drew already: a check must not depend on how much\n",
    ),
    (2, "def unbind_bump():\n    global bump\n    bump = 5\n"),
]


@pytest.fixture
def student(tmp_path: Path) -> Iterator[StudentProcess]:
    os.chmod(tmp_path, 0o755)
    work = tmp_path / "work"
    work.mkdir()
    confinement = Confinement.detect(Limits(cpu_seconds=60))
    confinement.hand_over(work)
    proc = StudentProcess(confinement, work, CELLS, cell_timeout=20)
    proc.start()
    yield proc
    proc.stop()


def _run(student: StudentProcess, body, timeout: float = 20, seed: str | None = None) -> object:  # type: ignore[no-untyped-def]
    box: dict[str, object] = {}

    def run(ns: Namespace) -> None:
        box["value"] = body(ns)

    if not student.alive:
        student.start()
    student.begin_check(seed)
    outcome = run_check(Check("c", 1, "hint", run, timeout=timeout), RemoteNamespace(student))
    if outcome.status == "timed out":
        student.stop()
    else:
        student.end_check()
    box["outcome"] = outcome
    return box


def test_calls_and_values_cross_as_data(student: StudentProcess) -> None:
    box = _run(student, lambda ns: (ns.boom(1), ns.LIMIT))
    first, limit = box["value"]  # type: ignore[index]
    assert first[:2] == (1, b"ok") and first[2] != first[2]  # nan
    assert limit == {"tries": 3}


def test_tmp_and_multiprocessing_work_inside_the_confinement(student: StudentProcess) -> None:
    assert _run(student, lambda ns: ns.scratch())["value"] is True


def test_each_check_starts_from_the_state_the_cells_left(student: StudentProcess) -> None:
    assert _run(student, lambda ns: (ns.bump(), ns.bump()))["value"] == (1, 2)
    assert _run(student, lambda ns: ns.bump())["value"] == 1  # not 3


def test_the_students_random_module_draws_as_it_does_in_process(student: StudentProcess) -> None:
    # Code that draws from the random module (not the seeded Random it is given) gets
    # the same numbers under the grader as in check(), from the check's seed.
    remote = [_run(student, lambda ns: ns.draws(), seed=student_seed("c"))["value"] for _ in "ab"]
    values: dict[str, object] = {}
    exec(CELLS[1][1], values)  # noqa: S102 - the test's own cell
    box: dict[str, object] = {}
    before = random.getstate()
    check = Check("c", 1, "hint", lambda ns: box.setdefault("value", ns.draws()))
    assert run_check(check, Namespace(values)).status == "passed"
    assert remote == [box["value"], box["value"]]
    assert random.getstate() == before  # the notebook's own random module, put back
    other = _run(student, lambda ns: ns.draws(), seed=student_seed("another check"))["value"]
    assert other != box["value"]


def test_a_student_exception_comes_back_with_the_students_line(student: StudentProcess) -> None:
    def body(ns: Namespace) -> StudentRaised:
        with pytest.raises(StudentRaised) as info:
            ns.boom(5)
        return info.value

    raised = _run(student, body)["value"]
    assert isinstance(raised, StudentRaised)
    assert raised.is_a("ValueError") and raised.is_a("Exception")
    assert raised.message == "n=5 is too big"
    assert raised.where == "line 8 of cell 1"


def test_the_stub_reads_not_started_and_a_missing_name_says_so(student: StudentProcess) -> None:
    assert _run(student, lambda ns: ns.stub())["outcome"].status == "not started yet"  # type: ignore[union-attr]

    def missing(ns: Namespace) -> None:
        with pytest.raises(CheckFailed, match="no such name"):
            ns.not_defined_anywhere()

    assert _run(student, missing)["outcome"].status == "passed"  # type: ignore[union-attr]


def test_a_function_called_in_a_loop_is_looked_up_once(
    student: StudentProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops: list[str] = []
    real = student.request

    def counted(message, timeout=None):  # type: ignore[no-untyped-def]
        ops.append(message["op"])
        return real(message, timeout)

    monkeypatch.setattr(student, "request", counted)
    assert _run(student, lambda ns: [ns.bump() for _ in range(5)])["value"] == [1, 2, 3, 4, 5]
    assert ops == ["get"] + ["call"] * 5  # each call still reaches the student's process


def test_a_function_rebound_to_data_after_a_lookup_reads_missing(student: StudentProcess) -> None:
    def body(ns: Namespace) -> None:
        assert ns.bump() == 1
        ns.unbind_bump()  # the student's code rebinds the name to data
        with pytest.raises(CheckFailed, match="no such name"):
            ns.bump()

    assert _run(student, body)["outcome"].status == "passed"  # type: ignore[union-attr]


def test_a_live_object_cannot_come_back(student: StudentProcess) -> None:
    outcome = _run(student, lambda ns: ns.a_set())["outcome"]
    assert outcome.status == "failed"  # type: ignore[union-attr]
    assert "a set object is not plain data" in outcome.got  # type: ignore[union-attr]


def test_a_hung_call_times_out_and_the_next_check_gets_a_fresh_process(
    student: StudentProcess,
) -> None:
    outcome = _run(student, lambda ns: ns.hang(), timeout=1)["outcome"]
    assert outcome.status == "timed out"  # type: ignore[union-attr]
    assert not student.alive and student.starts == 1
    assert _run(student, lambda ns: ns.bump())["value"] == 1
    assert student.starts == 2  # started again, cells re-run


def test_spawned_processes_are_confined_and_killed_after_the_check(
    student: StudentProcess,
) -> None:
    seen: dict[str, object] = {}

    def body(ns: Namespace) -> None:
        proc = ns.spawn(
            [
                sys.executable,
                "-c",
                "import os, time; print(os.getuid(), flush=True); time.sleep(60)",
            ],
            stdout=-1,
        )
        seen["proc"] = proc
        seen["uid"] = int(proc.stdout.readline())

    assert _run(student, body)["outcome"].status == "passed"  # type: ignore[union-attr]
    assert seen["proc"].poll() is not None  # type: ignore[attr-defined]
    if student.confinement.drop_uid:
        assert seen["uid"] == student.confinement.uid() != os.getuid()


@pytest.mark.parametrize("network", [False, True])
def test_the_machines_network_is_shared_only_where_no_namespace_can_be_made(
    tmp_path: Path, network: bool
) -> None:
    """An exercise that asks for the network gets its own namespace where the machine can
    make one (as root: ``netns``), and the machine's only where it cannot."""
    import dataclasses
    import socket

    from labkit.grading.isolation import netns

    confinement = Confinement.detect()
    if confinement.bwrap is None:
        pytest.skip("needs bubblewrap (apt-get install bubblewrap): " + confinement.describe())
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    cell = (
        "import socket\n"
        "def reach(port):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), 2).close()\n"
        "        return True\n"
        "    except OSError:\n"
        "        return False\n"
    )
    os.chmod(tmp_path, 0o755)
    work = tmp_path / "work"
    work.mkdir()
    shared = dataclasses.replace(confinement, network=network)
    shared.hand_over(work)
    proc = StudentProcess(shared, work, [(0, cell)], cell_timeout=20)
    try:
        proc.start()
        shared_network = network and netns.available() is not None
        assert _run(proc, lambda ns: ns.reach(port))["value"] is shared_network
        assert (proc.netns is not None) is (network and not shared_network)
    finally:
        proc.stop()
        server.close()


def test_a_harness_looking_up_a_missing_definition_says_no_such_name(
    student: StudentProcess,
) -> None:
    def body(ns: Namespace) -> None:
        with pytest.raises(CheckFailed, match="no such name") as info:
            ns.harness(
                "labkit.grading.exercises.ex01.harness:keys_later", [["billing", 1, "charge"]], 1.0
            )
        assert "'operation_key'" in info.value.expected

    assert _run(student, body)["outcome"].status == "passed"  # type: ignore[union-attr]


def test_a_spawned_process_killed_by_a_signal_reads_as_killed(student: StudentProcess) -> None:
    def body(ns: Namespace) -> int:
        code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
        return ns.spawn([sys.executable, "-c", code]).wait(30)

    assert _run(student, body)["value"] == -9  # not bubblewrap's 137


LIMITED_CELL = (
    "import os\n"
    "def write_big(n):\n"
    "    with open('big.bin', 'wb') as fh:\n"
    "        fh.write(b'x' * n)\n"
    "def open_many(n):\n"
    "    return len([open('small.txt', 'w') for _ in range(n)])\n"
    "def spin():\n"
    "    while True:\n"
    "        pass\n"
)


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[StudentProcess]:
    os.chmod(tmp_path, 0o755)
    work = tmp_path / "work"
    work.mkdir()
    limits = Limits(file_size=1 << 20, open_files=64, cpu_seconds=2)
    confinement = Confinement.detect(limits)
    confinement.hand_over(work)
    proc = StudentProcess(confinement, work, [(0, LIMITED_CELL)], cell_timeout=20)
    proc.start()
    yield proc
    proc.stop()


@pytest.mark.parametrize(
    ("call", "note"),
    [
        # each row: what the student's code does, and the line the feedback gets
        (lambda ns: ns.write_big(2 << 20), "limit hit: wrote a file bigger than 1 MiB"),
        (lambda ns: ns.open_many(200), "limit hit: opened more than 64 files at once"),
        (lambda ns: ns.spin(), "limit hit: used more than 2 s of CPU time"),
    ],
)
def test_each_limit_stops_the_code_and_is_named(limited: StudentProcess, call, note: str) -> None:  # type: ignore[no-untyped-def]
    outcome = _run(limited, call, timeout=60)["outcome"]
    assert outcome.status == "failed"  # type: ignore[union-attr]
    assert limited.limits_hit == [note]


def test_a_symlink_out_of_the_folder_is_gone_before_the_check_reads_it(
    student: StudentProcess, tmp_path: Path
) -> None:
    secret = tmp_path / "instructor-only.txt"
    secret.write_text("the hidden answer")
    secret.chmod(0o600)

    def body(ns: Namespace) -> list[str]:
        link = ns.workdir / "jobs.db"
        made = ns.make_link(str(secret), str(link))  # the student's code plants it
        assert made is True
        found = [p.name for p in ns.workdir.iterdir()]
        with pytest.raises(FileNotFoundError):
            link.read_text()  # the check, as root, never reads the secret through it
        return found

    student.cells.append(
        (9, "import os\ndef make_link(src, dst):\n    os.symlink(src, dst)\n    return True\n")
    )
    student.stop()
    assert "jobs.db" not in _run(student, body)["value"]  # type: ignore[operator]
