"""A real worker process for the reliability tests: ``python proc_worker.py '<json spec>'``.

It claims jobs from a labkit job database until none is left (waiting out the leases of
workers that were killed), and prints one JSON line: how many jobs it finished, how many
completions were refused with LeaseLost, and every error it met (the tests assert there
are none, which is how "no SQLITE_BUSY escapes as an error" is checked).

Spec keys:
- ``db``, ``name``, ``lease_s``; ``idle_s``: how long to wait for a dead worker's lease.
- ``pg_dsn`` and ``schema`` instead of ``db``: the same worker on PostgreSQL (ledger
  mode: the effect row and the completion commit together on the worker's own
  connection). A dropped connection (the chaos run terminates backends) is counted
  in ``dropped``, not as an error: the next call reconnects.
- ``mode``: ``ledger`` - the effect is a row of the ``effects`` table inserted in the same
  transaction as the fenced completion (``complete_with_effect``: ``store.complete`` with
  ``conn=`` the worker's own connection); ``log`` - the effect
  is a line appended to the file ``log`` (O_APPEND), then ``store.complete`` runs in a
  transaction of its own; ``worker`` - jobs run through ``labkit.worker.Worker`` with the
  handlers below (``effect`` logs a line, ``poison`` SIGKILLs this process).
- ``kill_at`` (``before_effect`` | ``after_effect``) with ``kill_after``: SIGKILL this
  process around the k-th job it claims. In ledger mode "after effect" means after the
  effect row is inserted and before COMMIT.
- ``mutant``: break one safety rule on purpose (see ``MUTANTS``) so a test can show the
  suite notices.
- ``ready``/``go``: touch the file ``ready`` once the store is open, then wait for the
  file ``go``, so several workers start claiming together.
- ``pace_s``: seconds of pretend work between claim and effect, so a kill has a job in
  hand most of the time and a run lasts long enough to be killed several times.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

from labkit.clock import SystemClock
from labkit.errors import ConnectionLost, LeaseLost
from labkit.job import Job
from labkit.store.sqlite import SQL, JobStore

EFFECTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL)"
)

#: name -> (statement, text that must be removed, replacement). Applying one to
#: labkit.store.sqlite.SQL removes a single safety rule; ``apply_mutant`` fails if the text is
#: not there, so a mutant can never silently be a no-op.
MUTANTS: dict[str, list[tuple[str, str, str]]] = {
    # complete no longer checks the lease token: a zombie can finish a job that another
    # worker now holds (the state check alone still stops a second completion).
    "no_token": [("complete", "AND lease_token = :token", "")],
    # complete has no fence at all: a zombie can finish a job that is already finished.
    "no_fence": [("complete", "AND state = 'running' AND lease_token = :token", "")],
    # nothing buries a job whose worker died on its last attempt, and the claim takes
    # expired leases whatever the attempt count: a poison job loops forever.
    "no_cap": [
        ("bury_exhausted", "AND attempt >= max_attempts", "AND 0"),
        ("claim", "AND attempt < max_attempts", ""),
    ],
}


def apply_mutant(name: str) -> None:
    for statement, old, new in MUTANTS[name]:
        if old not in SQL[statement]:
            raise SystemExit(f"mutant {name}: {old!r} not found in SQL[{statement!r}]")
        # Every claim variant (e.g. a single-queue fast path) carries the same rule.
        targets = [statement] + (
            [n for n in SQL if n.startswith("claim_")] if statement == "claim" else []
        )
        for target in targets:
            SQL[target] = SQL[target].replace(old, new)


def ledger_connection(store: JobStore) -> sqlite3.Connection:
    """The application's own connection to the job database, where effect rows go."""
    conn = sqlite3.connect(store.path, isolation_level=None, timeout=10)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def complete_with_effect(
    store: JobStore,
    job: Job,
    after_effect: Any = None,
    conn: sqlite3.Connection | None = None,
) -> bool:
    """Insert the effect row and ``store.complete(job, conn=conn)`` in ONE transaction.

    ``conn`` is the application's connection (one is opened for this call if none is
    given). If the lease moved on, ``complete`` raises LeaseLost and the whole
    transaction - effect included - rolls back. Returns whether the job was completed.
    """
    own = conn is None
    conn = ledger_connection(store) if conn is None else conn
    try:
        # store.transaction: BEGIN IMMEDIATE with the store's busy handling (StoreBusy,
        # never a raw "database is locked"); ROLLBACK on any exception, LeaseLost included.
        with store.transaction(conn):
            conn.execute("INSERT INTO effects (job_id) VALUES (:id)", {"id": job.id})
            store.complete(job, None, conn=conn)
            if after_effect is not None:
                after_effect()
        return True
    except LeaseLost:
        return False
    finally:
        if own:
            conn.close()


class PgLedger:
    """The ledger on PostgreSQL: the effect row and the completion in one transaction of
    the application's own connection, replaced when a terminated backend broke it."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.conn: Any = None

    def complete_with_effect(self, job: Job, after_effect: Any = None) -> bool:
        if self.conn is None or self.conn.closed or self.conn.broken:
            if self.conn is not None:
                self.conn.close()
            self.conn = self.store.connect(autocommit=False)
        conn = self.conn
        try:
            conn.execute("INSERT INTO effects (job_id) VALUES (%(id)s)", {"id": job.id})
            self.store.complete(job, None, conn=conn)
            if after_effect is not None:
                after_effect()
            conn.commit()
            return True
        except LeaseLost:
            conn.rollback()
            return False
        except BaseException:
            if not (conn.closed or conn.broken):
                conn.rollback()
            raise

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def open_store(spec: dict[str, Any], clock: SystemClock) -> Any:
    """The spec's store: SQLite at ``db``, or PostgreSQL at ``pg_dsn`` in ``schema``."""
    if "pg_dsn" in spec:
        from labkit.backends.postgres.store import PostgresJobStore

        return PostgresJobStore(spec["pg_dsn"], clock=clock, schema=spec["schema"])
    return JobStore(spec["db"], clock=clock)


def expected_drop(exc: Exception) -> bool:
    """A connection dropped under the worker (a terminated PostgreSQL backend)."""
    if isinstance(exc, ConnectionLost):
        return True
    try:
        import psycopg
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, psycopg.OperationalError)


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("mutant"):
        apply_mutant(spec["mutant"])
    clock = SystemClock()
    store = open_store(spec, clock)
    name, lease_s = spec["name"], float(spec.get("lease_s", 30.0))
    idle_s = float(spec.get("idle_s", lease_s + 1.0))
    mode = spec.get("mode", "ledger")
    kill_at, kill_after = spec.get("kill_at"), int(spec.get("kill_after", 0))
    log_fd = os.open(spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT) if "log" in spec else -1
    out: dict[str, Any] = {"done": 0, "lease_lost": 0, "dropped": 0, "errors": []}
    pg = "pg_dsn" in spec
    pg_ledger = PgLedger(store) if pg else None
    ledger = ledger_connection(store) if mode == "ledger" and not pg else None

    def log_effect(job: Job) -> None:
        os.write(log_fd, b"%d\n" % job.id)

    worker = None
    if mode == "worker":
        from labkit.worker import Worker

        def effect(job: Job, ctx: Any) -> None:
            log_effect(job)

        def poison(job: Job, ctx: Any) -> None:
            _kill_self()

        worker = Worker(store, {"effect": effect, "poison": poison}, name=name, lease_s=lease_s)

    if "ready" in spec:
        Path(spec["ready"]).touch()
        while not Path(spec["go"]).exists():
            clock.sleep(0.005)
    pace_s = float(spec.get("pace_s", 0.0))

    seen, idle_since = 0, None
    while True:
        try:
            if worker is not None:
                ran = worker.run_once()
                got = ran is not None
                out["done"] += got
            else:
                job = store.claim(name, lease_s=lease_s)
                got = job is not None
                if job is not None:
                    seen += 1
                    if pace_s:
                        clock.sleep(pace_s)
                    if kill_at == "before_effect" and seen == kill_after:
                        _kill_self()
                    after = _kill_self if kill_at == "after_effect" and seen == kill_after else None
                    if mode == "ledger":
                        done = (
                            pg_ledger.complete_with_effect(job, after)
                            if pg_ledger is not None
                            else complete_with_effect(store, job, after, ledger)
                        )
                        if done:
                            out["done"] += 1
                        else:
                            out["lease_lost"] += 1
                    else:
                        log_effect(job)
                        if after:
                            after()
                        try:
                            store.complete(job)
                            out["done"] += 1
                        except LeaseLost:
                            out["lease_lost"] += 1
        except Exception as exc:  # report every error (a raw sqlite3 one is a bug), never hide
            if pg and expected_drop(exc):
                out["dropped"] += 1  # the chaos run terminated this worker's backend
                continue
            out["errors"].append(f"{type(exc).__name__}: {exc}")
            if len(out["errors"]) > 20:
                break
            continue
        if got:
            idle_since = None
            continue
        try:
            counts = store.counts()
        except Exception as exc:
            if pg and expected_drop(exc):
                out["dropped"] += 1
                continue
            raise
        if counts["pending"] + counts["running"] + counts["retry_wait"] == 0:
            break
        if idle_since is None:
            idle_since = clock.now()
        elif clock.now() - idle_since > idle_s:
            break
        clock.sleep(0.02)
    if ledger is not None:
        ledger.close()
    if pg_ledger is not None:
        pg_ledger.close()
    out["reconnects"] = getattr(store, "reconnects", 0)
    store.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
