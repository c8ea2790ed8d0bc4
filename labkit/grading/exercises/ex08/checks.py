"""Exercise 8: a Celery task module that charges once, whatever is killed.

The student's ``%%writefile ex08_tasks.py`` cell leaves the module in their folder
(``ns.workdir``). Each check starts real ``celery worker`` processes on it through
``ns.spawn`` (RabbitMQ, a fresh queue; PostgreSQL, a fresh schema with ``charges`` and
``processed``; under ``labkit grade`` both are the notebook's own, ``ns.services``),
pauses the task at a point with ``labkit.integrations.celery.points`` (loaded into the
worker with ``--include``; ``commits`` adds a point right after each COMMIT), SIGKILLs
the pool child or the whole worker, lets the broker redeliver, and counts the
``charges`` rows itself (``workers.Ex08Run``). The student's code is never imported
here: it runs only in the workers.
"""

from __future__ import annotations

import contextlib
import string

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex08.workers import Ex08Run, scene_randoms
from labkit.integrations.celery import commits, harness
from labkit.lang import _

CHECKS = Checks("ex08", "a Celery task that charges once, whatever is killed", network=True)

#: Seconds one check may take: it starts workers and waits for Celery to notice kills.
TIMEOUT = 120.0

__all__ = ["CHECKS", "TIMEOUT", "Ex08Run", "redelivery_killed_after_each_commit"]


#: The hint for "0 rows" when the runs log shows the killed task ran again: the ack
#: settings did their job, and the task itself threw the redelivery away. A hint is
#: looked up in the catalog again where the report shows it (``scoring.shown``).
SKIPPED_REDELIVERY = _(
    "the message came back and your task ran again, but charged nothing: the redelivery "
    "must charge when the first run's charge never committed. Is the key recorded in "
    "processed before the charge commits (or in another transaction), or does the task "
    "return early when it sees a redelivered message?"
)


#: The hint for "0 rows" when a run of the task raised: a failed task is acknowledged, so
#: the error, not the ack settings, lost the charge.
RAISED = _(
    "your task raised an error, and a failed task is acknowledged: its charge is lost. "
    "Run `celery -A ex08_tasks worker --loglevel INFO` in your folder and send it a "
    "charge to see the traceback (a table or schema not found: connect with connect(), "
    "which reads EX08_DSN and EX08_SCHEMA)"
)


def _charged_once(run: Ex08Run, key: str, when: str, hint: str) -> None:
    n = run.charges(key)
    got = _("{count} charge rows").format(count=n)
    # A run killed by the check records nothing: a FAILURE here is the task's own error.
    raised = [r.value for runs in run.returned().values() for r in runs if r.state != "SUCCESS"]
    if n != 1 and raised:
        got = _("{count} charge rows; a run of the task raised {error}").format(
            count=n, error=raised[-1][:200]
        )
    if n == 0:
        hint = RAISED if raised else SKIPPED_REDELIVERY if run.ran_again() else hint
    expect(
        n == 1,
        _("exactly 1 charge row for {key} {when}").format(key=repr(key), when=when),
        got,
        hint,
    )


@CHECKS.add(1, "the worker imports ex08_tasks.py and charges once", timeout=TIMEOUT)
def worker_starts_and_charges_once(ns: Namespace) -> None:
    # "inv-1" with check()'s customer and amount; under labkit grade, one more key with
    # the run's own. A customer id is case-sensitive (cus_Q123456x): both cases in it.
    sent = {}
    for nth, rng in enumerate(scene_randoms("row")):
        sent["inv-1" if nth == 0 else f"inv-1-{nth}"] = (
            f"cus_{rng.choice(string.ascii_uppercase)}{rng.randrange(10**6):06d}"
            f"{rng.choice(string.ascii_lowercase)}",
            rng.randrange(101, 10**6),
        )
    with Ex08Run(ns) as run:
        run.worker()
        for key, (customer, amount) in sent.items():
            run.send(key, customer, amount)
        run.settle()
        for key, wanted in sent.items():
            _charged_once(
                run, key, _("with nothing killed"), _("the task must insert into charges")
            )
            [row] = run.rows(key)
            expect(
                row == wanted,
                _(
                    "the charge row for {key} to hold the message's customer and amount: {wanted}"
                ).format(key=repr(key), wanted=wanted),
                _("it holds {row}").format(row=row),
                _(
                    "insert (key, customer, amount) as the task received them: the amount is "
                    "already in cents, and a customer id is an opaque, case-sensitive string "
                    "(no lower(), no strip())"
                ),
            )


@CHECKS.add(
    3,
    "killed before charging, the task must come back: acknowledge late "
    "(task_acks_late) and give the message back when the pool child dies "
    "(task_reject_on_worker_lost)",
    timeout=TIMEOUT,
    severe=True,
)
def worker_killed_before_the_charge(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        worker = run.worker()
        # The customer was charged before, for another invoice: a task that skips a
        # redelivered message when its customer already has a charge ("looks like a
        # duplicate") loses this one.
        earlier = run.send("inv-2-earlier")
        with contextlib.suppress(TimeoutError):
            harness.wait_until(
                lambda: bool(run.returned().get(earlier)), 30, "the earlier charge to end"
            )
        child = run.hold("task_start", "inv-2")
        run.kill_children(worker, [child])
        run.settle()
        _charged_once(
            run,
            "inv-2",
            _("after its pool child was SIGKILLed before charging"),
            _(
                "0 rows means the task was acknowledged and lost: set task_acks_late and "
                "task_reject_on_worker_lost"
            ),
        )


@CHECKS.add(
    3,
    "killed after the charge committed, the task runs again: the dedup record in "
    "the same transaction as the charge makes the second run charge nothing",
    timeout=TIMEOUT,
    severe=True,
)
def worker_killed_after_the_commit(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        worker = run.worker()
        child = run.hold("task_end", "inv-3")
        run.kill_children(worker, [child])
        run.settle()
        _charged_once(
            run,
            "inv-3",
            _("after its pool child was SIGKILLed once the charge had committed"),
            _(
                "2 rows means the redelivery charged again: insert the key into processed "
                "(ON CONFLICT DO NOTHING RETURNING key) in the charge's transaction, and "
                "skip the charge when no row comes back"
            ),
        )


@CHECKS.add(
    2,
    "the whole worker (main process) killed: RabbitMQ gives back every message that "
    "was not acknowledged, so only a late ack survives",
    timeout=TIMEOUT,
    severe=True,
)
def whole_worker_killed_before_the_charge(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        first = run.worker("w1")
        run.hold("task_start", "inv-4")
        run.kill_main(first)
        run.worker("w2")
        run.settle()
        _charged_once(
            run,
            "inv-4",
            _("after the whole worker was SIGKILLed and a new one started"),
            _(
                "0 rows means the message was acknowledged before the task ran (Celery's "
                "default): set task_acks_late"
            ),
        )


def split_commits_hint(rows: int) -> str:
    """The hint after a kill right after a commit left ``rows`` charge rows for the key:
    what a split in two transactions did (0: the charge lost, 2: charged twice)."""
    hints = {
        0: _(
            "the dedup record committed before the charge, so the redelivery skipped the "
            "key and the charge is lost: insert both in one `conn.transaction()`"
        ),
        2: _(
            "the charge committed before the dedup record, so the redelivery charged "
            "again: insert both in one `conn.transaction()`"
        ),
    }
    return hints.get(rows) or _("insert both in one `conn.transaction()`")


#: At most this many of the task's commits are each killed after, one delivery each.
COMMITS = 4


@CHECKS.add(
    3,
    "killed right after each COMMIT the task makes, the redelivery charges exactly once: "
    "the dedup record and the charge in ONE transaction, so no kill falls between them",
    timeout=TIMEOUT,
    severe=True,
)
def killed_right_after_each_commit(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        worker = run.worker()
        run.send("inv-probe")
        run.settle()
        made = commits.made(run.folder)
        expect(
            bool(made),
            "the task to commit its work to PostgreSQL",
            _("no COMMIT and no autocommitted write in the task's run"),
            "write through psycopg, in `with connect() as conn, conn.transaction():`",
        )
        probe = next(iter(made.values()))  # the probe's own run (a task it queued runs after)
        for nth, (what, where) in enumerate(probe[:COMMITS], start=1):
            key = f"inv-c{nth}"
            child = run.hold(commits.point(nth), key)
            run.kill_children(worker, [child])
            run.settle()
            n = run.charges(key)
            expect(
                n == 1,
                _(
                    "exactly 1 charge row for {key} after a kill -9 right after your "
                    "{boundary} at {where} (commit {commit_number} of {commit_count}) and "
                    "the redelivery"
                ).format(
                    key=repr(key),
                    boundary=what,
                    where=where,
                    commit_number=nth,
                    commit_count=len(probe),
                ),
                _("{count} charge rows").format(count=n),
                split_commits_hint(n),
            )


def redelivery_killed_after_each_commit(
    run: Ex08Run,
    worker: harness.CeleryWorker,
    redelivered: list[tuple[str, str]],
    first_commits: int,
) -> None:
    """When a redelivered run's commits (``redelivered``, from ``commits.made``) are more
    than a first delivery's (a path of its own: it looks in charges, charges, then
    records the key), kill a redelivery right after each of its commits too, let the
    next one run, and send a copy of the message later: the key is charged once, and
    stays charged once."""
    if len(redelivered) <= first_commits:
        return
    for nth, (what, where) in enumerate(redelivered[:COMMITS], start=1):
        key = f"inv-rc{nth}"
        child = run.hold("task_start", key)
        again = run.kill_and_hold_redelivery(worker, child, commits.point(nth))
        if again is not None:
            run.kill_children(worker, [again])
        run.settle()
        run.send(key)
        run.settle()
        n = run.charges(key)
        expect(
            n == 1,
            _(
                "exactly 1 charge row for {key} after a kill -9 right after the {boundary} "
                "at {where} of its redelivery (commit {commit_number} of {commit_count}), "
                "the next redelivery and a copy of the message sent later"
            ).format(
                key=repr(key),
                boundary=what,
                where=where,
                commit_number=nth,
                commit_count=len(redelivered),
            ),
            _("{count} charge rows").format(count=n),
            _(
                "a redelivered message runs as a first delivery does: the dedup record "
                "and the charge in ONE transaction. A redelivery that charges in one "
                "transaction and records the key in another leaves the key unrecorded "
                "when it dies between the two, and the next copy charges again"
            ),
        )
