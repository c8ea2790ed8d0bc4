"""Exercise 13's checks of ``claim_serial``: one job of a serial queue at a time, in
order; a head that waits, is dead or whose lease ran out; the rules on generated
tables."""

from __future__ import annotations

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex13.claims import (
    CHECKS,
    NOW,
    OLD_LEASE,
    _due_together,
    _id,
    _retry_and_new_job_tied,
    _scene_check,
    _tied_in_id_order,
    job,
    live,
    scenes,
    serial,
)
from labkit.grading.exercises.helpers import (
    holds_for,
)
from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.labdb import add_job
from labkit.lang import _


@CHECKS.add(
    2,
    "claim only each queue's head, its live job with the smallest id: while the head "
    "runs, the jobs behind it wait, then they go in order",
    severe=True,
)
def serial_runs_one_at_a_time_in_order(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        first, second, third = (add_job(conn, f"order:42:{n}", queue="order:42") for n in "abc")
        other = add_job(conn, "order:7:a", queue="order:7")
        got = [_id(serial(ns, path, w)) for w in ("w1", "w2", "w3")]
        expect(
            got == [first, other, None],
            _("[{first}, {other}, None]: each queue's head, then nothing (both heads run)").format(
                first=first, other=other
            ),
            got,
        )
        for done in (first, second):
            conn.execute("UPDATE jobs SET state = 'succeeded' WHERE id = ?", (done,))
            nxt = _id(serial(ns, path, "w1"))
            want = second if done == first else third
            expect(
                nxt == want,
                _("job {job_id} once job {done_id} succeeded").format(job_id=want, done_id=done),
                nxt,
            )


@CHECKS.add(
    2,
    "a head waiting in retry_wait, or pending but not due yet (run_after > now), is still "
    "the head: the jobs behind it wait, or they overtake it and run out of order",
    severe=True,
)
def a_waiting_head_blocks_its_queue(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(
            conn, "order:42:a", queue="order:42", state="retry_wait", attempt=1, run_after=NOW + 60
        )
        behind = add_job(conn, "order:42:b", queue="order:42")
        got = serial(ns, path, "w1")
        expect(got is None, "None: order:42's head retries at 160", got)
        got = serial(ns, path, "w1", NOW + 60)
        if got is None:
            # A head due at exactly 160 taken only after it (run_after < now) is one
            # claim late, not out of order: serial_claim_follows_the_rules_on_generated_tables
            # says so. This check asks that the head goes first once it is taken.
            got = serial(ns, path, "w1", NOW + 61)
        expect(
            _id(got) != behind and got is not None,
            "the head itself once it is due (160), not the job behind it",
            got,
        )
    # A head pending, due later (scheduled for 150), and a job behind it due now: the
    # head is the smallest live id whatever its run_after, so the job behind waits.
    with lab_file(ns) as (conn, path):
        head = add_job(conn, "order:43:a", queue="order:43", run_after=NOW + 50)
        add_job(conn, "order:43:b", queue="order:43")
        # (Taken a second past its run_after: run_after < now, one claim late, is
        # serial_claim_follows_the_rules_on_generated_tables' business.)
        got = [_id(serial(ns, path, "w1")), _id(serial(ns, path, "w2", NOW + 51))]
        expect(
            got == [None, head],
            _(
                "None at {now:g}: order:43's head, pending, is due at {due:g} (the job "
                "behind it, due now, waits); then job {job_id}, the head, at {later:g}"
            ).format(now=NOW, due=NOW + 50, job_id=head, later=NOW + 51),
            _("the claims took {got}").format(got=got),
        )
    # However far off the head is (a retry a day away): a look-ahead window that leaves
    # such a head out lets the job behind it overtake.
    with lab_file(ns) as (conn, path):
        add_job(conn, "order:44:a", queue="order:44", state="retry_wait", attempt=2,
                run_after=NOW + 86_400)  # fmt: skip
        add_job(conn, "order:44:b", queue="order:44")
        got = serial(ns, path, "w1")
        expect(
            got is None,
            _("None: order:44's head retries a day later, at {due:g}").format(due=NOW + 86_400),
            got,
        )


@CHECKS.add(
    2,
    "on any table: the head is each queue's live job (pending, retry_wait, running) "
    "with the smallest id; take the ready head with the smallest run_after, then id",
    timeout=30.0,
)
def serial_claim_follows_the_rules_on_generated_tables(ns: Namespace) -> None:
    # Heads due at exactly now, whatever their state: run_after <= now is due.
    due_now = [
        {"key": "job:0", "queue": "acme", "state": "retry_wait", "attempt": 1, "run_after": NOW},
        {"key": "job:1", "queue": "acme", "state": "pending", "attempt": 0, "run_after": NOW},
    ]
    _scene_check(ns, due_now, "claim_serial")
    # A head in retry_wait due at 150 waits, though the lease its failed run left ended
    # at 50 (only a running job comes back when its lease ends), and so does its queue.
    waiting = {"key": "job:0", "queue": "acme", "state": "retry_wait", "attempt": 1}
    behind = {"key": "job:1", "queue": "acme", "state": "pending", "attempt": 0, "run_after": 0.0}
    _scene_check(ns, [{**waiting, "run_after": 150.0, **OLD_LEASE}, behind], "claim_serial")
    # Two heads due together whose keys (and queues) sort the other way as text: by id.
    heads = _due_together(("sync:9:a", "sync:9"), ("sync:10:a", "sync:10"))
    _scene_check(ns, heads, "claim_serial")
    # A retry's head and a new job's head due together, saved in either order: the smaller
    # id, whatever the attempt or the updated_at (the retry's run failed at 95).
    for retry_first in (True, False):
        _scene_check(ns, _retry_and_new_job_tied(retry_first), "claim_serial")
    holds_for(scenes(), lambda jobs: _scene_check(ns, jobs, "claim_serial"), examples=25)
    _tied_in_id_order(ns, "claim_serial")


@CHECKS.add(
    1,
    "succeeded and dead jobs are out of the line: a dead head stops blocking; a head "
    "whose lease ended (its worker died) is claimed again before the jobs behind it",
)
def dead_and_expired_heads(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, "order:1:a", queue="order:1", state="dead", attempt=3)
        after_dead = add_job(conn, "order:1:b", queue="order:1")
        expired = add_job(conn, "order:2:a", **live("order:2", 1, lease_until=NOW))
        add_job(conn, "order:2:b", queue="order:2")
        got = sorted(_id(serial(ns, path, w)) or 0 for w in ("w1", "w2"))
        expect(
            got == sorted([after_dead, expired]),
            _("jobs {job_ids}: the job after the dead head, and the expired head again").format(
                job_ids=sorted([after_dead, expired])
            ),
            got,
        )
        # Taken back, the head is the new worker's, under a new lease, like any claim.
        row = job(conn, expired)
        taken = {k: row[k] for k in ("lease_owner", "lease_until", "attempt", "updated_at")}
        expect(
            row["lease_owner"] in ("w1", "w2")
            and row["lease_until"] == NOW + 30
            and row["attempt"] == 2
            and row["updated_at"] == NOW,
            _(
                "job {job_id}, taken back from the dead worker 'other': lease_owner w1 or w2 "
                "(the claim's worker), lease_until {until:g}, attempt 2, updated_at {now:g}"
            ).format(job_id=expired, until=NOW + 30, now=NOW),
            taken,
            _(
                "a claim sets lease_owner = :worker, lease_until = :now + :lease_s and "
                "updated_at = :now whatever the job held before, a job whose lease ended "
                "included"
            ),
        )
