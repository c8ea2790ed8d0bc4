"""Exercise 6: the dead letter and the redrive that keeps the key.

The student writes ``dead_letter`` and ``redrive`` on the exercise table
(``labkit.grading.labdb``).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.grading.core import Checks, Namespace, StudentRaised, expect
from labkit.grading.labdb import add_job, all_jobs, lab_db

CHECKS = Checks("ex06", "dead letter and redrive", needs=("dead_letter", "redrive"))

NOW = 1000.0


@contextmanager
def _db() -> Iterator[sqlite3.Connection]:
    with tempfile.TemporaryDirectory(prefix="labkit-ex06-") as tmp:
        conn = lab_db(Path(tmp) / "jobs.db")
        try:
            yield conn
        finally:
            conn.close()


def _job(conn: sqlite3.Connection, job_id: int) -> dict[str, Any]:
    return next(j for j in all_jobs(conn) if j["id"] == job_id)


def _dead(conn: sqlite3.Connection, n: int, kind: str = "email", first_id: int = 0) -> list[int]:
    """``n`` dead jobs, the first the oldest (updated_at 10, 20, ...)."""
    return [
        add_job(
            conn,
            f"{kind}:{first_id + i}:send:v1",
            kind=kind,
            state="dead",
            attempt=3,
            dead_reason="attempts exhausted (3 of 3)",
            last_error="TimeoutError: slow",
            updated_at=10.0 * (first_id + i + 1),
        )
        for i in range(n)
    ]


def _running(conn: sqlite3.Connection, token: str = "tok-1") -> int:
    return add_job(
        conn,
        "pay:7:charge:v1",
        kind="payment",
        state="running",
        attempt=2,
        lease_owner="w1",
        lease_until=NOW + 30,
        lease_token=token,
        updated_at=NOW - 5,
    )


@CHECKS.add(
    2,
    "UPDATE ... SET state='dead', dead_reason=:reason, last_error=..., lease_owner, "
    "lease_until and lease_token to NULL, updated_at=:now WHERE id=:id AND "
    "state='running' AND lease_token=:token; return whether a row changed",
)
def dead_letter_records_the_reason(ns: Namespace) -> None:
    with _db() as conn:
        job_id = _running(conn)
        ok = ns.dead_letter(
            conn, job_id, "tok-1", "permanent error", ValueError("no such customer"), NOW
        )
        job = _job(conn, job_id)
        expect(ok is True, "True (the job was buried)", ok)
        expect(
            job["state"] == "dead" and job["dead_reason"] == "permanent error",
            "state dead with dead_reason 'permanent error'",
            f"state={job['state']}, dead_reason={job['dead_reason']!r}",
        )
        expect(
            "ValueError" in (job["last_error"] or "") and "no such customer" in job["last_error"],
            "last_error naming the class and message: 'ValueError: no such customer'",
            repr(job["last_error"]),
        )
        expect(
            job["lease_token"] is None
            and job["lease_owner"] is None
            and job["lease_until"] is None
            and job["updated_at"] == NOW,
            "the lease cleared and updated_at = now",
            {k: job[k] for k in ("lease_owner", "lease_until", "lease_token", "updated_at")},
        )
        expect(job["key"] == "pay:7:charge:v1", "the key unchanged", job["key"])


@CHECKS.add(
    1,
    "errors carry secrets (passwords, tokens in URLs): store "
    "labkit.redact.describe(error), never str(error) as it is",
)
def dead_letter_hides_secrets(ns: Namespace) -> None:
    with _db() as conn:
        job_id = _running(conn)
        error = PermissionError("login to https://erp:hunter2@erp.example failed, token=abc123xyz")
        ns.dead_letter(conn, job_id, "tok-1", "permanent error", error, NOW)
        stored = _job(conn, job_id)["last_error"] or ""
        leaked = [s for s in ("hunter2", "abc123xyz") if s in stored]
        expect(
            not leaked and "PermissionError" in stored,
            "the error class kept, the password and the token redacted",
            repr(stored),
        )


@CHECKS.add(1, "fence on the token: a worker whose lease moved on must change nothing")
def dead_letter_is_fenced(ns: Namespace) -> None:
    with _db() as conn:
        job_id = _running(conn, token="new-holder")
        before = _job(conn, job_id)
        ok = ns.dead_letter(conn, job_id, "stale-token", "permanent error", ValueError("x"), NOW)
        expect(ok is False, "False for a stale token", ok)
        expect(_job(conn, job_id) == before, "the job unchanged", _job(conn, job_id)["state"])


@CHECKS.add(
    2,
    "limit is required: raise ValueError when it is None or below 1, before "
    "touching anything (a whole dead-letter queue redriven by accident floods "
    "the service that killed those jobs)",
)
def redrive_requires_a_limit(ns: Namespace) -> None:
    with _db() as conn:
        _dead(conn, 3)
        before = all_jobs(conn)
        for limit in (None, 0):
            try:
                result = ns.redrive(conn, limit=limit, now=NOW)
            except StudentRaised as exc:
                result = "raised" if exc.is_a("ValueError", "TypeError") else exc.describe()
            expect(result == "raised", f"ValueError for limit={limit!r}", f"returned {result!r}")
        expect(all_jobs(conn) == before, "nothing changed", "jobs were changed")


@CHECKS.add(
    2,
    "redrive the same row (UPDATE, not INSERT): its key is how the destination "
    "recognises a repeat; a copy with a new key can charge twice",
)
def redrive_keeps_the_key(ns: Namespace) -> None:
    with _db() as conn:
        [job_id] = _dead(conn, 1)
        ids = ns.redrive(conn, limit=1, now=NOW)
        rows = all_jobs(conn)
        expect(
            len(rows) == 1,
            "still one row in jobs",
            f"{len(rows)} rows: " + ", ".join(f"{r['id']}:{r['key']}" for r in rows),
        )
        expect(list(ids) == [job_id], f"[{job_id}] returned", ids)
        expect(
            rows[0]["state"] == "pending" and rows[0]["key"] == "email:0:send:v1",
            "the job pending again with key 'email:0:send:v1'",
            f"state={rows[0]['state']}, key={rows[0]['key']!r}",
        )


@CHECKS.add(
    2,
    "ORDER BY updated_at, id LIMIT :limit: the oldest dead letters first, and "
    "never more than asked",
)
def redrive_respects_the_limit(ns: Namespace) -> None:
    with _db() as conn:
        ids = _dead(conn, 5)
        got = ns.redrive(conn, limit=2, now=NOW)
        pending = [j["id"] for j in all_jobs(conn) if j["state"] == "pending"]
        expect(len(pending) == 2, "2 jobs redriven with limit=2", f"{len(pending)} redriven")
        expect(
            list(got) == ids[:2] and pending == ids[:2],
            f"the two oldest, {ids[:2]}",
            f"returned {list(got)}, pending {pending}",
        )


@CHECKS.add(
    1,
    "only dead jobs are redriven: a pending, running, retry_wait or succeeded job "
    "is none of the redrive's business",
)
def redrive_only_dead_jobs(ns: Namespace) -> None:
    with _db() as conn:
        others = {
            "pending": add_job(conn, "o:1:v1", updated_at=1.0),
            "retry_wait": add_job(conn, "o:2:v1", state="retry_wait", attempt=1, updated_at=1.0),
            "succeeded": add_job(conn, "o:3:v1", state="succeeded", attempt=1, updated_at=1.0),
            "running": add_job(
                conn,
                "o:4:v1",
                state="running",
                attempt=1,
                lease_owner="w",
                lease_until=NOW + 60,
                lease_token="t",
                updated_at=1.0,
            ),
        }
        before = {k: _job(conn, v) for k, v in others.items()}
        [dead] = _dead(conn, 1)
        got = ns.redrive(conn, limit=100, now=NOW)
        expect(list(got) == [dead], f"only the dead job {dead}", list(got))
        changed = [k for k, v in others.items() if _job(conn, v) != before[k]]
        expect(not changed, "the other jobs untouched", f"changed: {changed}")


@CHECKS.add(
    1,
    "a redriven job starts over: attempt = 0, run_after = now, dead_reason NULL, "
    "redrives + 1, updated_at = now (or it dies again at once)",
)
def redrive_gives_a_fresh_start(ns: Namespace) -> None:
    with _db() as conn:
        [job_id] = _dead(conn, 1)
        ns.redrive(conn, limit=1, now=NOW)
        job = _job(conn, job_id)
        want = {
            "attempt": 0,
            "run_after": NOW,
            "dead_reason": None,
            "redrives": 1,
            "updated_at": NOW,
        }
        got = {k: job[k] for k in want}
        expect(got == want, str(want), str(got))


@CHECKS.add(1, "dry_run=True returns the ids it would redrive and changes nothing")
def dry_run_changes_nothing(ns: Namespace) -> None:
    with _db() as conn:
        ids = _dead(conn, 3)
        before = all_jobs(conn)
        got = ns.redrive(conn, limit=2, now=NOW, dry_run=True)
        expect(list(got) == ids[:2], f"{ids[:2]} returned", got)
        expect(
            all_jobs(conn) == before, "every job unchanged", [j["state"] for j in all_jobs(conn)]
        )


@CHECKS.add(1, "kind=... redrives only that kind ((:kind IS NULL OR kind = :kind))")
def redrive_filters_by_kind(ns: Namespace) -> None:
    with _db() as conn:
        mails = _dead(conn, 2, kind="email")
        pays = _dead(conn, 2, kind="payment", first_id=10)
        got = ns.redrive(conn, limit=10, now=NOW, kind="payment")
        expect(sorted(got) == pays, f"the payment jobs {pays}", list(got))
        expect(
            all(_job(conn, i)["state"] == "dead" for i in mails),
            "the email jobs still dead",
            [_job(conn, i)["state"] for i in mails],
        )
