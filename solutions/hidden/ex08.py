"""Hidden checks for exercise 8: dedup per key, duplicate messages, one transaction.

``two_deliveries_at_once_charge_once`` runs two pool children and holds both copies of
one message inside their transactions at the same time (the check locks ``charges``
until both wait): a dedup that reads ``processed`` and inserts it later, after the
charge, lets both copies through, which one child taking messages in turn never shows.
"""

from __future__ import annotations

from labkit.grading.exercises.ex08.checks import TIMEOUT, Ex08Run
from labkit.grading.checks import Checks, Namespace, expect
from labkit.integrations.celery import harness, points
from labkit.integrations.celery.app import pg
from labkit.lang import _

CHECKS = Checks("ex08", hidden=True)


@CHECKS.add(
    2,
    "dedup by the task's key: two invoices are two charges, even for one customer",
    timeout=TIMEOUT,
    severe=True,
)
def two_invoices_two_charges(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        run.worker()
        run.send("inv-a", "cus_same", 500)
        run.send("inv-b", "cus_same", 500)
        run.settle()
        got = (run.charges("inv-a"), run.charges("inv-b"))
        expect(
            got == (1, 1),
            "1 charge row for each of two keys",
            _("{first} and {second}").format(first=got[0], second=got[1]),
        )


@CHECKS.add(
    1,
    "the same message published twice (a producer retry) must charge once",
    timeout=TIMEOUT,
    severe=True,
)
def duplicate_message_charges_once(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        run.worker()
        run.send("inv-dup")
        run.send("inv-dup")
        run.settle()
        n = run.charges("inv-dup")
        expect(
            n == 1, "1 charge row for a key sent twice", _("{count} charge rows").format(count=n)
        )


def _waiting_on_a_lock(app_name: str, run: Ex08Run) -> list[int]:
    """Backend pids of the worker's sessions (by application name) waiting for a lock."""
    with pg(run.config) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE application_name = %s AND wait_event_type = 'Lock'",
            (app_name,),
        ).fetchall()
    return [int(row["pid"]) for row in rows]


def _processed_keys(run: Ex08Run) -> set[str]:
    """The keys committed in ``processed`` (the check's own uncommitted row is not seen)."""
    with pg(run.config) as conn:
        return {str(row["key"]) for row in conn.execute("SELECT key FROM processed")}


def _terminate(backends: list[int], run: Ex08Run) -> None:
    with pg(run.config) as conn:
        for pid in backends:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


@CHECKS.add(
    3,
    "the dedup record and the charge commit together: with them in two transactions, "
    "a kill between the two commits charges twice",
    timeout=TIMEOUT,
    severe=True,
)
def dedup_commits_with_the_charge(ns: Namespace) -> None:
    key = "inv-tx"
    with Ex08Run(ns) as run:
        worker = run.worker()
        # The check holds the key in `processed` (uncommitted): the task's own insert of
        # that key must wait, so the kill lands while the task is writing its dedup record.
        with pg(run.config) as blocker:
            blocker.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
            run.send(key)
            try:
                # A task that ends without waiting never wrote the task's key: no need to
                # wait out the 30 s to say so.
                harness.wait_until(
                    lambda: bool(_waiting_on_a_lock(run.config.tag, run))
                    or any(event == "end" for event, *_rest in points.runs(run.folder)),
                    30,
                    "the task to wait for its dedup record",
                )
                if not _waiting_on_a_lock(run.config.tag, run):
                    raise TimeoutError("the task ended without waiting")
            except TimeoutError:
                run.check_not_stub()
                others = sorted(_processed_keys(run) - {key})
                expect(
                    False,
                    _("the task to insert its key {key} into processed").format(key=repr(key)),
                    _("it recorded {keys} in processed, not the task's key").format(keys=others)
                    if others
                    else _("it never touched processed while the check held that key"),
                    "record the task's key with INSERT INTO processed ... in the charge's "
                    "transaction",
                )
            waiting = _waiting_on_a_lock(run.config.tag, run)  # the task about to die
            children = worker.pool_children()
            harness.wait_until(
                lambda: bool(points.runs(run.folder)), 10, "the task's start record"
            )
            _event, task_id, _pid, _parent = points.runs(run.folder)[-1]
            run.kills.record(task_id, run.procs)
            run.kill_children(worker, children)
            # The dead task's session would finish its statement once the lock is free
            # (PostgreSQL notices a dead client only when it next writes to it); end that
            # session, as PostgreSQL eventually would, so nothing the killed task began
            # commits. Only that one: the redelivery may already be waiting too.
            _terminate(waiting, run)
            blocker.rollback()
        run.settle()
        n = run.charges(key)
        expect(
            n == 1,
            "1 charge row after a kill while the task wrote its dedup record",
            _("{count} charge rows").format(count=n),
            "commit the charge and the dedup record in ONE transaction",
        )


@CHECKS.add(
    2,
    "two copies of one message at once, on two pool children (a producer retry while "
    "the first copy runs): the dedup record must be claimed by an INSERT that waits for "
    "the other transaction, not read with a SELECT and written after the charge",
    timeout=TIMEOUT,
    severe=True,
)
def two_deliveries_at_once_charge_once(ns: Namespace) -> None:
    key = "inv-twice"
    with Ex08Run(ns) as run:
        run.worker(concurrency=2)
        # Until both copies wait on a lock, no charge row can be written: each copy gets
        # as far as it can in its transaction, and they are inside it together.
        with pg(run.config) as blocker:
            blocker.execute("LOCK TABLE charges IN EXCLUSIVE MODE")
            run.send(key)
            run.send(key)
            try:
                harness.wait_until(
                    lambda: len(_waiting_on_a_lock(run.config.tag, run)) >= 2,
                    30,
                    "both copies of the message to wait inside their transactions",
                )
            except TimeoutError:
                run.check_not_stub()
                waiting = len(_waiting_on_a_lock(run.config.tag, run))
                expect(
                    False,
                    "two copies of one message to run at once on two pool children",
                    _(
                        "{waiting} of them waited in the database while the check held charges"
                    ).format(waiting=waiting),
                    "insert into processed and charges in the task, in one transaction",
                )
            blocker.rollback()
        run.settle()
        n = run.charges(key)
        expect(
            n == 1,
            "1 charge row after two copies of one message ran at the same time",
            _("{count} charge rows").format(count=n),
            "claim the key first with INSERT INTO processed ... ON CONFLICT (key) DO NOTHING "
            "RETURNING key in the charge's transaction: the second copy's INSERT waits for "
            "the first to commit, then finds the key taken",
        )
