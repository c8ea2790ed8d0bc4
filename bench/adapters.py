"""One adapter per queue under test, all driven the same way by bench/child.py.

Every adapter offers ``enqueue(n)`` (one committed insert per job, payload ``{"i": i}``)
and ``work(effect, stop)`` (claim one job, run ``effect(i)``, acknowledge it; every claim
and every acknowledgement is its own commit unless the adapter says "batched"). The
effect is the same function for every library, passed in by the child process, so the
only thing that differs between rows of a table is the queue.

All databases run in WAL mode with ``synchronous=NORMAL`` (survives a process crash,
not a power cut) unless the adapter name says FULL: huey and persist-queue default to
FULL, so they are set to NORMAL here to compare like with like. The module is a little
over 400 lines: one short adapter per peer library, side by side so they can be compared.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

Effect = Callable[[int], None]

#: Lease used by labkit and the raw loop; W3 restarts wait this long for a dead worker's job.
LEASE_S = 0.5


class Adapter:
    """The interface every queue under test implements."""

    name = "?"
    #: W3: can a restarted worker get back a job whose worker was killed mid-way?
    recovers = True

    def __init__(self, path: Path) -> None:
        self.path = path

    def enqueue(self, n: int, start: int = 0) -> None:
        raise NotImplementedError

    def fill(self, n: int) -> None:
        """Put ``n`` jobs in the queue the quickest way the library offers (big W1 sizes
        on PostgreSQL, where one commit per job would take minutes); not a measurement."""
        self.enqueue(n)

    def work_one(self, effect: Effect, worker: str) -> int:
        """Process up to one claim's worth of jobs; return how many (0 = nothing ready)."""
        raise NotImplementedError

    def remaining(self) -> int:
        """Jobs not yet finished (for W3 restarts: is there anything left to wait for?)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


# -- labkit ----------------------------------------------------------------------------


class Labkit(Adapter):
    name = "labkit"

    def __init__(self, path: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(path)
        from labkit.clock import SystemClock
        from labkit.store import JobStore

        self.store = JobStore(path / "jobs.db", clock=SystemClock(), synchronous=synchronous)

    def enqueue(self, n: int, start: int = 0) -> None:
        enqueue = self.store.enqueue
        for i in range(start, start + n):
            enqueue("bench", {"i": i})

    def work_one(self, effect: Effect, worker: str) -> int:
        job = self.store.claim(worker, lease_s=LEASE_S)
        if job is None:
            return 0
        effect(job.payload["i"])
        self.store.complete(job)
        return 1

    def remaining(self) -> int:
        counts = self.store.counts()
        return counts["pending"] + counts["running"] + counts["retry_wait"]

    def close(self) -> None:
        self.store.close()


class LabkitMany(Labkit):
    """``claim_many(100)`` per transaction, then one ``complete`` (one commit) per job."""

    name = "labkit claim_many(100)"

    def work_one(self, effect: Effect, worker: str) -> int:
        jobs = self.store.claim_many(worker, 100, lease_s=LEASE_S)
        for job in jobs:
            effect(job.payload["i"])
            self.store.complete(job)
        return len(jobs)


class LabkitBatch(Labkit):
    """``claim_many(100)`` in one transaction, then ``complete_many``: 100 fenced completes
    sharing ONE commit, as the raw batched loop shares its acks."""

    name = "labkit claim_many(100) + complete_many"
    #: Jobs per claim (bench/pg.py's PostgreSQL row takes 10, as pgqueuer does).
    batch = 100

    def enqueue(self, n: int, start: int = 0) -> None:
        # The batched row enqueues in batches too: enqueue_many, 100 jobs per commit.
        for lo in range(start, start + n, 100):
            hi = min(lo + 100, start + n)
            self.store.enqueue_many("bench", [{"i": i} for i in range(lo, hi)])

    def work_one(self, effect: Effect, worker: str) -> int:
        jobs = self.store.claim_many(worker, self.batch, lease_s=LEASE_S)
        for job in jobs:
            effect(job.payload["i"])
        if jobs:
            self.store.complete_many(jobs)
        return len(jobs)


class LabkitLedger(Labkit):
    """The effect is a row in the job database, inserted in the transaction that completes.

    ``JobStore.complete(job, result, conn=...)`` joins that transaction: if the lease moved
    on it raises ``LeaseLost`` and the whole transaction, effect included, rolls back.
    """

    name = "labkit + ledger"

    def __init__(self, path: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(path, synchronous)
        # The caller's own connection, as an application would have; synchronous=NORMAL
        # like the store's, since the ledger transaction commits here.
        self.conn = sqlite3.connect(path / "jobs.db", isolation_level=None, timeout=10)
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, job_id INTEGER, i INTEGER)"
        )

    def work_one(self, effect: Effect, worker: str) -> int:
        job = self.store.claim(worker, lease_s=LEASE_S)
        if job is None:
            return 0
        i = job.payload["i"]
        # The child's effect object carries the W3 kill points; the log write is replaced
        # by the ledger row, so only its before/after hooks run here.
        getattr(effect, "before", _nothing)(i)
        complete_with_effect(self.store, self.conn, job, i, getattr(effect, "after", _nothing))
        return 1

    def close(self) -> None:
        self.conn.close()
        super().close()


def _nothing(i: int) -> None:
    pass


def complete_with_effect(
    store: Any, conn: sqlite3.Connection, job: Any, i: int, before_commit: Effect
) -> bool:
    """Insert the effect row and complete the job in ONE transaction on ``conn``.

    ``before_commit(i)`` runs after both statements and before COMMIT: W3 kills the
    worker there to show that the effect dies with the uncommitted completion.
    Returns False (and changes nothing) when the lease was lost.
    """
    from labkit.errors import LeaseLost

    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT INTO effects (job_id, i) VALUES (:job, :i)", {"job": job.id, "i": i})
        store.complete(job, None, conn=conn)
        before_commit(i)
        conn.execute("COMMIT")
        return True
    except LeaseLost:
        conn.execute("ROLLBACK")
        return False
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


# -- the raw sqlite3 loop: the ceiling ---------------------------------------------------

RAW_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY, payload TEXT NOT NULL, state INTEGER NOT NULL DEFAULT 0,
    owner TEXT, lease_until REAL);
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (id) WHERE state = 0;
CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (lease_until) WHERE state = 1;
"""

RAW_CLAIM = """
UPDATE jobs SET state = 1, owner = :owner, lease_until = :until
 WHERE id IN (SELECT id FROM jobs WHERE state = 0 ORDER BY id LIMIT :limit)
RETURNING id, payload
"""
RAW_RECLAIM = """
UPDATE jobs SET owner = :owner, lease_until = :until
 WHERE id IN (SELECT id FROM jobs WHERE state = 1 AND lease_until <= :now LIMIT :limit)
RETURNING id, payload
"""
RAW_ACK = "UPDATE jobs SET state = 2 WHERE id = :id AND owner = :owner AND state = 1"


class Raw(Adapter):
    """The thinnest durable claim/ack loop on sqlite3: the ceiling for labkit."""

    name = "raw sqlite WAL/NORMAL"
    batch = 1

    def __init__(self, path: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(path)
        self.conn = sqlite3.connect(path / "raw.db", isolation_level=None, timeout=10)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.conn.executescript(RAW_SCHEMA)

    def enqueue(self, n: int, start: int = 0) -> None:
        execute = self.conn.execute
        for i in range(start, start + n):
            execute("INSERT INTO jobs (payload) VALUES (?)", (json.dumps({"i": i}),))

    def work_one(self, effect: Effect, worker: str) -> int:
        from labkit.clock import SystemClock

        execute = self.conn.execute
        now = SystemClock().now()
        params = {"owner": worker, "until": now + LEASE_S, "now": now, "limit": self.batch}
        execute("BEGIN IMMEDIATE")
        rows = execute(RAW_CLAIM, params).fetchall() or execute(RAW_RECLAIM, params).fetchall()
        execute("COMMIT")
        if not rows:
            return 0
        if self.batch == 1:
            job_id, payload = rows[0]
            effect(json.loads(payload)["i"])
            execute("BEGIN IMMEDIATE")
            execute(RAW_ACK, {"id": job_id, "owner": worker})
            execute("COMMIT")
            return 1
        for _, payload in rows:
            effect(json.loads(payload)["i"])
        execute("BEGIN IMMEDIATE")
        self.conn.executemany(RAW_ACK, [{"id": r[0], "owner": worker} for r in rows])
        execute("COMMIT")
        return len(rows)

    def remaining(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM jobs WHERE state < 2").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class RawFull(Raw):
    name = "raw sqlite WAL/FULL"

    def __init__(self, path: Path) -> None:
        super().__init__(path, synchronous="FULL")


class RawBatched(Raw):
    """100 claims in one transaction, then 100 acks in one transaction; enqueue 100 per commit."""

    name = "raw sqlite batched(100)"
    batch = 100

    def enqueue(self, n: int, start: int = 0) -> None:
        for lo in range(start, start + n, 100):
            rows = [(json.dumps({"i": i}),) for i in range(lo, min(lo + 100, start + n))]
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany("INSERT INTO jobs (payload) VALUES (?)", rows)
            self.conn.execute("COMMIT")


# -- peers -------------------------------------------------------------------------------

_HUEY_EFFECT: list[Effect] = []


class Huey(Adapter):
    """SqliteHuey: dequeue DELETES the row (no ack), so a crash after dequeue loses the task."""

    name = "huey SqliteHuey"
    recovers = False

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        from huey import SqliteHuey

        self.huey = SqliteHuey("bench", filename=str(path / "huey.db"), results=False)
        self.huey.storage.conn.execute("PRAGMA synchronous=NORMAL")

        @self.huey.task()
        def touch(i: int) -> None:
            _HUEY_EFFECT[0](i)

        self.touch = touch

    def enqueue(self, n: int, start: int = 0) -> None:
        touch = self.touch
        for i in range(start, start + n):
            touch(i)

    def work_one(self, effect: Effect, worker: str) -> int:
        _HUEY_EFFECT[:] = [effect]
        task = self.huey.dequeue()
        if task is None:
            return 0
        self.huey.execute(task)
        return 1

    def remaining(self) -> int:
        return int(self.huey.pending_count())


class PersistQueue(Adapter):
    """persist-queue SQLiteAckQueue: get marks the row unack; a restart resumes unack rows."""

    name = "persist-queue SQLiteAckQueue"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        from persistqueue import SQLiteAckQueue

        self.q = SQLiteAckQueue(str(path / "pq"), multithreading=True, timeout=10)
        for conn in (self.q._conn, self.q._putter):
            conn.execute("PRAGMA synchronous=NORMAL")

    def enqueue(self, n: int, start: int = 0) -> None:
        put = self.q.put
        for i in range(start, start + n):
            put({"i": i})

    def work_one(self, effect: Effect, worker: str) -> int:
        from persistqueue import Empty

        try:
            item = self.q.get(block=False)
        except Empty:
            return 0
        effect(item["i"])
        self.q.ack(item)
        return 1

    def remaining(self) -> int:
        return int(self.q.ready_count() + self.q.unack_count())


class LiteQueue(Adapter):
    """litequeue 0.9: pop locks a message, done finishes it; nothing unlocks a dead worker's."""

    name = "litequeue"
    recovers = False

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        from litequeue import LiteQueue as LQ

        self.q = LQ(str(path / "lq.db"), timeout=10)

    def enqueue(self, n: int, start: int = 0) -> None:
        put = self.q.put
        for i in range(start, start + n):
            put(json.dumps({"i": i}))

    def work_one(self, effect: Effect, worker: str) -> int:
        message = self.q.pop()
        if message is None:
            return 0
        effect(json.loads(message.data)["i"])
        self.q.done(message.message_id)
        return 1

    def remaining(self) -> int:
        row = self.q.conn.execute(f"SELECT count(*) FROM {self.q.table} WHERE status = 0")
        return int(row.fetchone()[0])


ADAPTERS: dict[str, Callable[[Path], Adapter]] = {
    "labkit": Labkit,
    "labkit_many": LabkitMany,
    "labkit_batch": LabkitBatch,
    "labkit_ledger": LabkitLedger,
    "raw_normal": Raw,
    "raw_full": RawFull,
    "raw_batched": RawBatched,
    "huey": Huey,
    "persistqueue": PersistQueue,
    "litequeue": LiteQueue,
}
