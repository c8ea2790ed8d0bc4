"""Exercise 3: claim a job atomically with a lease, in one ``UPDATE ... RETURNING``.

The student writes ``claim(conn, worker, now, lease_s)`` on the exercise table
(``labkit.grading.labdb``). The race check runs real threads, each with its own
connection, and widens the window between a read and a write (every plain SELECT
outside a transaction pauses), so a read-then-write claim is caught every time instead
of once in a while.
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.grading.core import CheckFailed, Checks, Namespace, expect
from labkit.grading.labdb import add_job, all_jobs, connect, lab_db

CHECKS = Checks("ex03", "atomic claim with a lease", needs=("claim",))

#: How long a plain SELECT pauses in the race check: enough for the others to read too.
RACE_PAUSE_S = 0.05


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class Traced:
    """A connection that records every statement and pauses after plain reads.

    ``pause`` > 0 widens the race between a SELECT and the UPDATE that follows it.
    """

    def __init__(self, conn: sqlite3.Connection, pause: float = 0.0) -> None:
        self._conn = conn
        self.pause = pause
        self.statements: list[str] = []
        self.pauses = 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements.append(" ".join(sql.split()))
        reading = sql.lstrip().upper().startswith("SELECT") and not self._conn.in_transaction
        cursor = self._conn.execute(sql, params)
        if reading and self.pause:
            rows = cursor.fetchall()
            self.pauses += 1
            time.sleep(self.pause)
            return _Rows(rows)
        return cursor

    def cursor(self) -> Traced:
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@contextmanager
def _db() -> Iterator[tuple[sqlite3.Connection, Path]]:
    with tempfile.TemporaryDirectory(prefix="labkit-ex03-") as tmp:
        path = Path(tmp) / "jobs.db"
        conn = lab_db(path)
        try:
            yield conn, path
        finally:
            conn.close()


def _claim(ns: Namespace, conn: Any, worker: str, now: float, lease_s: float = 30.0) -> Any:
    row = ns.claim(conn, worker, now, lease_s)
    if row is None:
        return None
    try:
        return dict(row)
    except (TypeError, ValueError):
        raise CheckFailed(
            "a dict (or sqlite3.Row) for the claimed job, or None",
            repr(row),
            "return dict(row) for the row RETURNING gave you",
        ) from None


def _job(conn: sqlite3.Connection, job_id: int) -> dict[str, Any]:
    return next(j for j in all_jobs(conn) if j["id"] == job_id)


@CHECKS.add(
    1,
    "UPDATE jobs SET state='running', lease_owner=:worker, lease_until=:now + :lease_s "
    "... WHERE id = (SELECT ... LIMIT 1) RETURNING *, then return dict(row) or None",
)
def claims_one_ready_job(ns: Namespace) -> None:
    with _db() as (conn, _):
        job_id = add_job(conn, "mail:1:send:v1")
        got = _claim(ns, conn, "w1", 100.0, 30.0)
        expect(got is not None, "the pending job", "None")
        expect(got.get("id") == job_id, f"a dict for job {job_id} (the whole row)", got)
        stored = _job(conn, job_id)
        expect(
            stored["state"] == "running" and stored["lease_owner"] == "w1",
            "the job running, leased to w1, in the database",
            f"state={stored['state']}, lease_owner={stored['lease_owner']}",
        )
        expect(
            stored["lease_until"] == 130.0,
            "lease_until = now + lease_s = 130.0",
            f"lease_until={stored['lease_until']}",
        )
        expect(bool(stored["lease_token"]), "a lease token", repr(stored["lease_token"]))
        again = _claim(ns, conn, "w2", 100.0, 30.0)
        expect(again is None, "None when nothing else is ready (w1 holds the only job)", again)


@CHECKS.add(
    2,
    "add one to attempt in the same UPDATE (attempt = attempt + 1): a crash "
    "redelivery is an attempt too, or a poison job loops forever",
)
def attempt_goes_up_by_one(ns: Namespace) -> None:
    with _db() as (conn, _):
        job_id = add_job(conn, "mail:1:send:v1")
        first = _claim(ns, conn, "w1", 100.0, 30.0)
        expect(
            first is not None and _job(conn, job_id)["attempt"] == 1,
            "attempt 1 after the first claim",
            f"attempt {_job(conn, job_id)['attempt']}",
        )
        second = _claim(ns, conn, "w2", 200.0, 30.0)  # w1's lease ended at 130
        expect(
            second is not None and _job(conn, job_id)["attempt"] == 2,
            "attempt 2 after the expired lease is claimed again",
            f"claim returned {'None' if second is None else 'the job'}, "
            f"attempt {_job(conn, job_id)['attempt']}",
        )


@CHECKS.add(
    2,
    "make a new token at every claim, for example lower(hex(randomblob(16))); a "
    "token that repeats (the worker's name, the job id) cannot fence off a zombie",
)
def token_is_fresh(ns: Namespace) -> None:
    with _db() as (conn, _):
        a, b = add_job(conn, "mail:1:send:v1"), add_job(conn, "mail:2:send:v1")
        _claim(ns, conn, "w1", 100.0, 30.0)
        _claim(ns, conn, "w1", 100.0, 30.0)
        token_a, token_b = _job(conn, a)["lease_token"], _job(conn, b)["lease_token"]
        expect(
            bool(token_a) and token_a != token_b,
            "different tokens for two claims",
            f"{token_a!r} and {token_b!r}",
        )
        _claim(ns, conn, "w1", 500.0, 30.0)  # both leases expired; w1 takes one back
        retaken = [j["lease_token"] for j in all_jobs(conn) if j["updated_at"] == 500.0]
        expect(
            len(retaken) == 1 and retaken[0] not in (token_a, token_b),
            "a new token when the same worker claims a job again after its lease expired",
            f"{retaken!r} (before: {token_a!r}, {token_b!r})",
        )


@CHECKS.add(
    2,
    "a running job whose lease_until <= now is ready again (its worker died); "
    "one whose lease is still valid is not",
)
def expired_lease_is_reclaimable(ns: Namespace) -> None:
    with _db() as (conn, _):
        dead = add_job(
            conn,
            "mail:1:send:v1",
            state="running",
            attempt=1,
            lease_owner="crashed",
            lease_until=50.0,
            lease_token="old-token",
            updated_at=20.0,
        )
        alive = add_job(
            conn,
            "mail:2:send:v1",
            state="running",
            attempt=1,
            lease_owner="busy",
            lease_until=200.0,
            lease_token="live-token",
            updated_at=20.0,
        )
        got = _claim(ns, conn, "w2", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == dead,
            f"job {dead} (lease expired at 50, now is 100)",
            "None" if got is None else f"job {got.get('id')}",
        )
        expect(
            _job(conn, dead)["lease_token"] != "old-token",
            "the old token replaced",
            repr(_job(conn, dead)["lease_token"]),
        )
        stolen = _claim(ns, conn, "w3", 100.0, 30.0)
        expect(
            stolen is None,
            f"None: job {alive} is leased until 200",
            f"job {stolen.get('id')}" if stolen else stolen,
        )


@CHECKS.add(
    1,
    "ready means pending or retry_wait with run_after <= now (or an expired lease); "
    "never succeeded or dead, never a job due later",
)
def respects_run_after_and_state(ns: Namespace) -> None:
    with _db() as (conn, _):
        add_job(conn, "a:1:v1", run_after=500.0)
        add_job(conn, "a:2:v1", state="succeeded", attempt=1)
        add_job(conn, "a:3:v1", state="dead", attempt=3)
        due = add_job(conn, "a:4:v1", state="retry_wait", attempt=1, run_after=90.0)
        got = _claim(ns, conn, "w1", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == due,
            f"job {due} (retry_wait, due at 90)",
            "None" if got is None else f"job {got.get('id')}",
        )
        more = _claim(ns, conn, "w1", 100.0, 30.0)
        expect(
            more is None,
            "None: the rest is due later, succeeded or dead",
            f"job {more.get('id')} ({_job(conn, more['id'])['key']})" if more else more,
        )


@CHECKS.add(
    1,
    "one UPDATE ... RETURNING, nothing else: a SELECT followed by an UPDATE leaves a "
    "gap in which another worker reads the same job",
)
def claim_is_one_statement(ns: Namespace) -> None:
    with _db() as (conn, _):
        add_job(conn, "mail:1:send:v1")
        traced = Traced(conn)
        ns.claim(traced, "w1", 100.0, 30.0)
        statements = [s for s in traced.statements if s]
        expect(
            len(statements) == 1
            and statements[0].upper().startswith("UPDATE")
            and "RETURNING" in statements[0].upper(),
            "exactly one statement, UPDATE ... RETURNING",
            f"{len(statements)} statement(s): "
            + "; ".join(s.split()[0].upper() for s in statements),
        )


@CHECKS.add(
    3,
    "two workers must never hold the same job: do the choosing and the taking in "
    "one statement (UPDATE ... WHERE id = (SELECT ...) RETURNING *)",
    timeout=20.0,
)
def no_double_claim_under_a_race(ns: Namespace) -> None:
    workers, n_jobs = 4, 6
    with _db() as (conn, path):
        ns.claim(conn, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        for i in range(n_jobs):
            add_job(conn, f"mail:{i}:send:v1")
        claims: list[tuple[str, int]] = []
        errors: list[str] = []
        start = threading.Barrier(workers)
        conns = [Traced(connect(path), pause=RACE_PAUSE_S) for _ in range(workers)]

        def work(name: str, own: Traced) -> None:
            start.wait()
            try:
                for _ in range(n_jobs + 2):
                    row = _claim(ns, own, name, 100.0, 30.0)
                    if row is None:
                        return
                    claims.append((name, row.get("id")))
            except Exception as exc:  # noqa: BLE001 - reported as the check's result
                errors.append(f"{name}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work, args=(f"w{i}", c)) for i, c in enumerate(conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in conns:
            c.close()
        expect(not errors, "no errors while 4 workers claim at once", "; ".join(errors[:2]))
        counts = Counter(job for _, job in claims)
        doubled = {job: [w for w, j in claims if j == job] for job, n in counts.items() if n > 1}
        expect(
            not doubled,
            "each job claimed by exactly one worker",
            "; ".join(f"job {j} claimed by {', '.join(ws)}" for j, ws in doubled.items()),
        )
        expect(len(counts) == n_jobs, f"all {n_jobs} jobs claimed", f"{len(counts)} claimed")
