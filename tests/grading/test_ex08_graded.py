"""``labkit grade`` on exercise 8 (Celery): the confined grader scores it like ``check()``.

Under ``labkit grade`` the workers a check starts with ``ns.spawn`` run inside bubblewrap
(when installed), as the slot's own uid, in a session of their own: the spawned pid is
the wrapper's, not Celery's. The harness must still find the pool children it kills,
count the tasks each worker started, and leave no Celery process behind. The reference
notebook must score full marks, the untouched one 0 "not started".
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from gradingkit import (
    EXERCISES,
    HIDDEN,
    SOLUTIONS,
    grade_class,
    notebook_for,
    processes_under,
    require_service,
    short_scratch,
)
from zoo_notebooks import every_entry

from labkit.grading import catalog
from labkit.grading.isolation import netns

pytestmark = [pytest.mark.services, pytest.mark.slow]

REDIS_ENTRY = "a Redis SET NX before the transaction"
#: Exercise 8's total, public and hidden checks (the red-team rounds change it), and the
#: most a severe mistake may score.
TOTAL = sum(c.points for c in catalog.all_checks("ex08", HIDDEN))
HALF = TOTAL // 2

EARLY_ACK_REMOVES = (
    "    app.conf.task_acks_late = True\n    app.conf.task_reject_on_worker_lost = True\n"
)
#: What the hostile notebook appends to its ex08_tasks.py: on every worker's import, reach for
#: the machine's Redis and PostgreSQL, and run a program on the host through PostgreSQL.
ATTACK = """

def _attack():
    import redis
    try:
        redis.Redis(host="127.0.0.1", port=6379, socket_timeout=2).set("{tag}", "forged")
    except Exception:
        pass
    try:
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as c:
            c.execute("CREATE TABLE IF NOT EXISTS {tag} (x int)")
            c.execute("COPY (SELECT 1) TO PROGRAM 'touch {marker}'")
    except Exception:
        pass


_attack()
"""


@pytest.fixture(scope="module")
def graded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, list[str]], Path, Path]]:
    require_service("rabbitmq")
    require_service("postgres")
    root = tmp_path_factory.mktemp("ex08class")
    subs = root / "submissions"
    for student, folder in (("ref", SOLUTIONS), ("stub", EXERCISES)):
        (subs / student).mkdir(parents=True)
        notebook = notebook_for(folder, "ex08")
        shutil.copyfile(notebook, subs / student / notebook.name)
    # A wrong and hostile one: Celery's default early ack (the two settings deleted),
    # plus the attack on every worker's import. Its kills must cost it marks under the
    # grader too, so the kills really land in the sandbox; the attack must reach nothing
    # of the machine and change none of its marks. (Two notebooks until 2026-12-08, a
    # full ex08 grading each, about 50 s of a loaded worker.)
    wrong = nbformat.read(subs / "ref" / notebook_for(SOLUTIONS, "ex08").name, as_version=4)
    cell = next(c for c in wrong.cells if c.source.startswith("%%writefile ex08_tasks.py"))
    assert EARLY_ACK_REMOVES in cell.source
    cell.source = cell.source.replace(EARLY_ACK_REMOVES, "")
    tag, marker = f"mallory_{root.name}".replace("-", "_"), root / "ran-on-the-host"
    cell.source += ATTACK.format(tag=tag, marker=marker)
    (subs / "early").mkdir()
    nbformat.write(wrong, subs / "early" / "ex08_celery.ipynb")
    # A wrong one that keeps its dedup record in Redis: the notebook's own Redis answers
    # where the lab's does in check(), so the check named after the mistake catches it
    # and the others pass, instead of every check failing on a refused connection.
    redis_entry = next(e for e in every_entry() if e.mistake == REDIS_ENTRY)
    (subs / "redis").mkdir()
    nbformat.write(redis_entry.notebook(), subs / "redis" / "ex08_celery.ipynb")
    with short_scratch() as scratch:
        graded, feedback, _ = grade_class(root, subs, ["ex08"], scratch)
        rows = {r["student"]: [r["score"], r["max"], r["status"]] for r in graded}
        ATTACKS.update(tag=tag, marker=str(marker))
        yield rows, feedback, scratch


ATTACKS: dict[str, str] = {}


def test_reference_scores_full_marks_under_the_confined_grader(graded) -> None:  # type: ignore[no-untyped-def]
    rows, feedback, _ = graded
    text = (feedback / "ref.md").read_text()
    assert rows["ref"] == [str(TOTAL), str(TOTAL), "graded"], text
    # every check, public and hidden, passed on its own (no partial credit hides a failure)
    for check in (
        "worker_starts_and_charges_once | 1/1",
        "worker_killed_before_the_charge (severe) | 3/3",
        "worker_killed_after_the_commit (severe) | 3/3",
        "whole_worker_killed_before_the_charge (severe) | 2/2",
        "killed_right_after_each_commit (severe) | 3/3",
        "two_invoices_two_charges (hidden, severe) | 2/2",
        "duplicate_message_charges_once (hidden, severe) | 1/1",
        "dedup_commits_with_the_charge (hidden, severe) | 3/3",
        "two_deliveries_at_once_charge_once (hidden, severe) | 2/2",
        "two_workers_at_once_charge_once (hidden, severe) | 2/2",
        "charges_after_its_database_session_ended (hidden, severe) | 2/2",
        "replies_charged_or_already_charged (hidden, severe) | 1/1",
    ):
        assert check in text, text


def test_untouched_notebook_scores_zero_not_started(graded) -> None:  # type: ignore[no-untyped-def]
    rows, feedback, _ = graded
    assert rows["stub"] == ["0", str(TOTAL), "not started"]
    assert "not started yet" in (feedback / "stub.md").read_text()


def test_early_ack_loses_the_kill_checks_under_the_confined_grader(graded) -> None:  # type: ignore[no-untyped-def]
    rows, feedback, _ = graded
    text = (feedback / "early.md").read_text()
    # A lost charge is a severe mistake: the score is capped at half, and says why.
    assert rows["early"][2] == "graded" and 0 < int(rows["early"][0]) <= HALF, text
    assert f"score capped at half ({HALF}): worker_killed_before_the_charge" in text
    assert "worker_killed_before_the_charge (severe) | 0/3 | failed" in text
    assert "whole_worker_killed_before_the_charge (severe) | 0/2 | failed" in text
    assert "0 charge rows" in text  # failed by counting the rows, not by a harness error
    # The checks an early ack does not lose, it keeps, attack and all: each worker ran
    # the attack as it imported the tasks, and it cost none of these.
    for check in (
        "worker_starts_and_charges_once | 1/1 | passed",
        "two_invoices_two_charges (hidden, severe) | 2/2 | passed",
        "duplicate_message_charges_once (hidden, severe) | 1/1 | passed",
        "replies_charged_or_already_charged (hidden, severe) | 1/1 | passed",
    ):
        assert check in text, text


def test_a_dedup_record_in_redis_is_caught_by_its_check_under_the_confined_grader(graded) -> None:  # type: ignore[no-untyped-def]
    rows, feedback, _ = graded
    text = (feedback / "redis.md").read_text()
    assert rows["redis"][2] == "graded" and 0 < int(rows["redis"][0]) <= HALF, text
    assert "dedup_commits_with_the_charge (hidden, severe) | 0/3 | failed" in text
    assert "worker_killed_before_the_charge (severe) | 3/3 | passed" in text  # Redis answered


@pytest.mark.skipif(netns.available() is not None, reason=f"{netns.available()}")
def test_a_hostile_worker_reaches_nothing_of_the_machine(graded) -> None:  # type: ignore[no-untyped-def]
    import psycopg
    import redis

    rows, feedback, _ = graded
    assert rows["early"][2] == "graded", (feedback / "early.md").read_text()
    assert rows["ref"] == [str(TOTAL), str(TOTAL), "graded"]  # graded beside it (--jobs 2)
    tag = ATTACKS["tag"]
    assert redis.Redis(host="127.0.0.1", port=6379).get(tag) is None
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test") as conn:
        found = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = %s", (tag,))
        assert found.fetchone() == (0,)
    assert not Path(ATTACKS["marker"]).exists(), "a program ran on the host through PostgreSQL"


def test_the_attack_reaches_the_machine_when_nothing_confines_it(tmp_path: Path) -> None:
    # The test above can fail: run bare, the same code does write into the machine's services.
    import psycopg
    import redis

    require_service("redis")
    require_service("postgres")
    tag = f"mallory_bare_{tmp_path.name}".replace("-", "_")
    code = "import psycopg\n" + ATTACK.format(tag=tag, marker=tmp_path / "marker")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    machine = redis.Redis(host="127.0.0.1", port=6379)
    try:
        assert machine.get(tag) == b"forged"
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test") as conn:
            found = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = %s", (tag,))
            assert found.fetchone() == (1,)
    finally:
        machine.delete(tag)
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {tag}")


def test_no_process_of_the_run_outlives_the_grade(graded) -> None:  # type: ignore[no-untyped-def]
    _, _, scratch = graded
    left = processes_under(scratch)
    assert not left, f"still alive after labkit grade returned: {left}"


def test_the_leftover_detector_sees_a_process_working_there(tmp_path: Path) -> None:
    # The check above can fail: a process whose cwd is in the folder is found.
    proc = subprocess.Popen(
        [sys.executable, "-c", "import threading; threading.Event().wait(60)"],
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert proc.pid in [pid for pid, _ in processes_under(tmp_path)]
    finally:
        proc.kill()
        proc.wait(10)
    assert proc.pid not in [pid for pid, _ in processes_under(tmp_path)]
