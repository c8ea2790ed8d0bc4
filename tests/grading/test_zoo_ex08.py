"""Exercise 8's zoo: each plausible wrong task module is caught by the check named after it.

The student's code is a file (``ex08_tasks.py``, written by the notebook's
``%%writefile`` cell), so each entry rewrites a part of the reference file, then runs
the named check (real workers, real kills) and one check the variant still passes, so
the feedback points at the one mistake.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from gradingkit import HIDDEN, SOLUTIONS, namespace_of, notebook_for

from labkit.grading import catalog
from labkit.grading.checks import Check, CheckStatus, Namespace, run_check
from labkit.grading.exercises.ex08.checks import SKIPPED_REDELIVERY

pytestmark = [pytest.mark.services, pytest.mark.slow]

REFERENCE_SETTINGS = """\
    app.conf.task_acks_late = True
    app.conf.task_reject_on_worker_lost = True
"""
REFERENCE_BODY_START = "    with connect() as conn, conn.transaction():\n"

NO_DEDUP = """\
    with connect() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

TWO_TRANSACTIONS = """\
    with psycopg.connect(DSN, options=f"-c search_path={SCHEMA}", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
    return "charged"
"""

#: One transaction, but the dedup record is read with a SELECT and written after the
#: charge: two copies running at once both read "not processed" and both charge.
SELECT_THEN_INSERT = """\
    with connect() as conn, conn.transaction():
        if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
    return "charged"
"""

#: The dedup record commits on its own, first: a kill between the two commits leaves
#: the key "processed" with no charge, and the redelivery skips it (the charge is lost).
DEDUP_COMMITTED_FIRST = """\
    with connect() as conn:
        with conn.transaction():
            first = conn.execute(
                "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                "RETURNING key",
                (key,),
            ).fetchone()
        if first is None:
            return "already charged"
        with conn.transaction():
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    return "charged"
"""

#: The same split with an autocommit connection: each INSERT commits by itself.
DEDUP_AUTOCOMMITTED_FIRST = """\
    with psycopg.connect(DSN, options=f"-c search_path={SCHEMA}", autocommit=True) as conn:
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

DEDUP_BY_CUSTOMER = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (customer,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: The settings are right, but the task throws every redelivered message away before
#: the reference's body runs.
SKIPS_REDELIVERIES = """\
    from celery import current_task

    if (current_task.request.delivery_info or {}).get("redelivered"):
        return "skipped: looks like a duplicate"
"""


def _settings(text: str) -> Callable[[str], str]:
    """Replace the two settings in configure(app) by ``text``."""
    return lambda source: source.replace(REFERENCE_SETTINGS, text)


def _before_body(text: str) -> Callable[[str], str]:
    """Put ``text`` at the top of the charge task's body, before the reference's."""
    return lambda source: source.replace(REFERENCE_BODY_START, text + REFERENCE_BODY_START, 1)


def _body(text: str) -> Callable[[str], str]:
    """Replace the body of the charge task by ``text``."""

    def swap(source: str) -> str:
        start = source.index(REFERENCE_BODY_START)
        end = source.index('    return "charged"\n', start) + len('    return "charged"\n')
        return source[:start] + text + source[end:]

    return swap


ZOO = [
    # (name, how the reference file is changed, the check that must fail, what its
    # feedback must say, a check the mistake does not touch, which must pass)
    (
        "acks_late without reject_on_worker_lost",
        _settings("    app.conf.task_acks_late = True\n"),
        "worker_killed_before_the_charge",
        "SIGKILLed before charging",
        "worker_killed_after_the_commit",
    ),
    (
        "Celery's defaults (acknowledged before the task runs)",
        _settings("    pass\n"),
        "whole_worker_killed_before_the_charge",
        "whole worker was SIGKILLed",
        "worker_starts_and_charges_once",
    ),
    (
        "no dedup record",
        _body(NO_DEDUP),
        "worker_killed_after_the_commit",
        "once the charge had committed",
        "worker_killed_before_the_charge",
    ),
    (
        "dedup record in its own transaction, after the charge",
        _body(TWO_TRANSACTIONS),
        "dedup_commits_with_the_charge",
        "while the task wrote its dedup record",
        "worker_killed_after_the_commit",
    ),
    (
        # The hint must blame the task, not the ack settings, which are right here.
        "skips every redelivered message",
        _before_body(SKIPS_REDELIVERIES),
        "worker_killed_before_the_charge",
        "SIGKILLed before charging",
        "worker_starts_and_charges_once",
    ),
    (
        "dedup record committed first, in a transaction of its own",
        _body(DEDUP_COMMITTED_FIRST),
        "killed_right_after_each_commit",
        "right after your COMMIT at line",
        "worker_killed_after_the_commit",
    ),
    (
        "dedup record autocommitted before the charge",
        _body(DEDUP_AUTOCOMMITTED_FIRST),
        "killed_right_after_each_commit",
        "right after your autocommitted INSERT at line",
        "dedup_commits_with_the_charge",
    ),
    (
        "dedup read with a SELECT, written after the charge (two copies at once)",
        _body(SELECT_THEN_INSERT),
        "two_deliveries_at_once_charge_once",
        "two copies of one message ran at the same time",
        "duplicate_message_charges_once",
    ),
    (
        "dedup by customer instead of by key",
        _body(DEDUP_BY_CUSTOMER),
        "two_invoices_two_charges",
        "each of two keys",
        "worker_killed_after_the_commit",
    ),
]


def _checks() -> dict[str, Check]:
    return {c.name: c for c in catalog.all_checks("ex08", HIDDEN)}


def test_zoo_changes_are_real_edits():
    namespace_of(notebook_for(SOLUTIONS, "ex08"))
    source = (Path.cwd() / "ex08_tasks.py").read_text()
    for name, change, *_ in ZOO:
        assert change(source) != source, f"{name}: the edit did not apply to the reference"


@pytest.mark.parametrize(
    ("name", "change", "fails", "says", "passes"), ZOO, ids=[row[0] for row in ZOO]
)
def test_wrong_task_module_is_caught_by_its_named_check(
    postgres_dsn, amqp_url, name, change, fails, says, passes
):
    values, notes = namespace_of(notebook_for(SOLUTIONS, "ex08"))
    assert notes == []
    path = Path.cwd() / "ex08_tasks.py"
    path.write_text(change(path.read_text()))
    checks = _checks()
    caught = run_check(checks[fails], Namespace(values, Path.cwd()))
    assert caught.status == CheckStatus.FAILED, (name, caught)
    assert caught.earned == 0 and caught.expected and caught.got and caught.hint
    assert "Traceback" not in caught.got
    assert says in caught.expected, f"{name}: {fails} said {caught.expected!r}"
    kept = run_check(checks[passes], Namespace(values, Path.cwd()))
    assert kept.status == CheckStatus.PASSED, (name, kept)
    if name == "skips every redelivered message":
        assert caught.hint == SKIPPED_REDELIVERY, caught.hint
        assert "task_acks_late" not in caught.hint


def test_a_dedup_under_another_key_is_named_as_such(postgres_dsn, amqp_url):
    values, notes = namespace_of(notebook_for(SOLUTIONS, "ex08"))
    path = Path.cwd() / "ex08_tasks.py"
    path.write_text(_body(DEDUP_BY_CUSTOMER)(path.read_text()))
    caught = run_check(_checks()["dedup_commits_with_the_charge"], Namespace(values, Path.cwd()))
    assert caught.status == CheckStatus.FAILED, caught
    assert caught.got == "it recorded ['cus_8'] in processed, not the task's key", caught.got
