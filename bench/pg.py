"""The PostgreSQL subjects: labkit's PostgreSQL store, its peers, and the raw ceiling.

Same interface as bench/adapters.py (``enqueue``, ``work_one``, ``remaining``), same
effect, same workloads. Every subject lives in a schema of its own, named after the run's
temporary folder (``bench_<folder>``); ``drop(path)`` removes it when the measurement is
over, so a bench run leaves nothing behind in the shared database.

Each peer runs as its documentation recommends for at-least-once delivery:

- procrastinate 3: its own worker (``App.run_worker(wait=False)``, one job per fetch, one
  commit to fetch and one to finish). A worker killed mid-job leaves the job ``doing``;
  the documented remedy ("Retry stalled jobs") is a periodic call of
  ``job_manager.get_stalled_jobs()`` + ``retry_job()``, which this adapter makes before
  every drain, with workers heart-beating every 0.5 s.
- pgqueuer 1.6: ``QueueManager.run(mode=drain, batch_size=10)``: one statement claims up
  to 10 jobs, acknowledgements are buffered and written together; a job whose worker
  stops heart-beating for ``heartbeat_timeout`` (here 5 s) is picked again.
- the raw loop: ``UPDATE ... WHERE id = ANY(ARRAY(SELECT ... FOR UPDATE SKIP LOCKED))``
  claim, effect, one-statement ack; autocommit, so each statement is one commit.

The database is ``LABKIT_BENCH_PG`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.adapters import LEASE_S, Adapter, Effect, Labkit, LabkitBatch

DSN = os.environ.get("LABKIT_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
#: pgqueuer picks a job again once its worker's heartbeat is this old.
PGQ_HEARTBEAT_S = 5.0
#: procrastinate: a worker's heartbeat period, and the age at which its jobs are stalled.
PROC_HEARTBEAT_S = 0.5
PROC_STALLED_S = 1.5
#: What a W3 restart waits for a dead worker's job, per subject (its lease or heartbeat).
RECOVER_WAIT_S = {"pgqueuer": PGQ_HEARTBEAT_S * 2 + 1.0, "procrastinate": PROC_STALLED_S + 1.5}

logging.getLogger("procrastinate").setLevel(logging.ERROR)
logging.getLogger("pgqueuer").setLevel(logging.ERROR)


def schema_for(path: Path) -> str:
    """The schema of one measurement: ``bench_`` + the temporary folder's name."""
    return "bench_" + re.sub(r"[^a-z0-9_]", "_", path.name.lower())[:50]


def dsn_for(path: Path) -> str:
    """A DSN whose unqualified names land in this measurement's schema."""
    return make_conninfo(DSN, options=f"-c search_path={schema_for(path)}")


def create(path: Path) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema_for(path)))
        )


def drop(path: Path) -> None:
    """Remove the measurement's schema and everything in it."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema_for(path)))
        )


def ledger_effects(path: Path) -> list[int]:
    """The effect rows of the ``labkit + ledger`` subject, one per committed effect."""
    with psycopg.connect(dsn_for(path), autocommit=True) as conn:
        return [i for (i,) in conn.execute("SELECT i FROM effects")]


# -- labkit ----------------------------------------------------------------------------


class PgLabkit(Labkit):
    """``PostgresJobStore.claim`` -> effect -> ``complete``: two commits per job.

    The SQLite row's enqueue, work and counts, on the PostgreSQL store.
    """

    name = "labkit PostgreSQL"
    postgres = True

    def __init__(self, path: Path) -> None:
        Adapter.__init__(self, path)  # not Labkit's: that one opens a SQLite file
        from labkit.backends.postgres.store import PostgresJobStore
        from labkit.clock import SystemClock

        self.store = PostgresJobStore(DSN, clock=SystemClock(), schema=schema_for(path))

    def fill(self, n: int) -> None:
        for lo in range(0, n, 1000):
            self.store.enqueue_many("bench", [{"i": i} for i in range(lo, min(lo + 1000, n))])


class PgLabkitBatch(PgLabkit, LabkitBatch):
    """``claim_many(10)`` (one statement, one commit) then ``complete_many`` (one commit).

    Ten per claim, like pgqueuer's default batch, so the two compare like with like.
    """

    name = "labkit PostgreSQL claim_many(10) + complete_many"
    batch = 10


class PgLabkitLedger(PgLabkit):
    """The effect is a row written in the transaction that completes the job."""

    name = "labkit PostgreSQL + ledger"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.store.conn.execute(
            "CREATE TABLE IF NOT EXISTS effects (id BIGSERIAL PRIMARY KEY, job_id BIGINT, i INT)"
        )
        self.conn = self.store.connect(autocommit=False)

    def work_one(self, effect: Effect, worker: str) -> int:
        from labkit.errors import LeaseLost

        job = self.store.claim(worker, lease_s=LEASE_S)
        if job is None:
            return 0
        i = job.payload["i"]
        getattr(effect, "before", _nothing)(i)
        try:
            with self.conn.transaction():
                self.conn.execute(
                    "INSERT INTO effects (job_id, i) VALUES (%s, %s)", (job.id, i)
                )
                self.store.complete(job, None, conn=self.conn)
                # W3 kills here: the effect row dies with the uncommitted completion.
                getattr(effect, "after", _nothing)(i)
        except LeaseLost:
            return 1  # rolled back: the job belongs to someone else now
        return 1

    def close(self) -> None:
        self.conn.close()
        super().close()


def _nothing(i: int) -> None:
    pass


# -- the raw psycopg loop: the ceiling ---------------------------------------------------

RAW_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload TEXT NOT NULL,
    state SMALLINT NOT NULL DEFAULT 0, owner TEXT, lease_until DOUBLE PRECISION);
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (id) WHERE state = 0;
CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (lease_until) WHERE state = 1;
"""
RAW_CLAIM = """
UPDATE jobs SET state = 1, owner = %(owner)s, lease_until = %(until)s
 WHERE id = ANY(ARRAY(SELECT id FROM jobs WHERE state = 0 ORDER BY id LIMIT %(limit)s
                      FOR UPDATE SKIP LOCKED))
RETURNING id, payload
"""
RAW_RECLAIM = """
UPDATE jobs SET owner = %(owner)s, lease_until = %(until)s
 WHERE id = ANY(ARRAY(SELECT id FROM jobs WHERE state = 1 AND lease_until <= %(now)s
                      LIMIT %(limit)s FOR UPDATE SKIP LOCKED))
RETURNING id, payload
"""
RAW_ACK = "UPDATE jobs SET state = 2 WHERE id = ANY(%(ids)s) AND owner = %(owner)s AND state = 1"


class PgRaw(Adapter):
    """The thinnest durable claim/ack loop on psycopg; each statement its own commit."""

    name = "raw psycopg SKIP LOCKED"
    postgres = True
    batch = 1

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        create(path)
        self.conn = psycopg.connect(dsn_for(path), autocommit=True)
        self.conn.execute(RAW_SCHEMA)

    def enqueue(self, n: int, start: int = 0) -> None:
        execute = self.conn.execute
        for i in range(start, start + n):
            execute("INSERT INTO jobs (payload) VALUES (%s)", (json.dumps({"i": i}),))

    def fill(self, n: int) -> None:
        for lo in range(0, n, 1000):
            rows = [(json.dumps({"i": i}),) for i in range(lo, min(lo + 1000, n))]
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.executemany("INSERT INTO jobs (payload) VALUES (%s)", rows)

    def work_one(self, effect: Effect, worker: str) -> int:
        from labkit.clock import SystemClock

        now = SystemClock().now()
        params = {"owner": worker, "until": now + LEASE_S, "now": now, "limit": self.batch}
        rows = (self.conn.execute(RAW_CLAIM, params).fetchall()
                or self.conn.execute(RAW_RECLAIM, params).fetchall())
        for _, payload in rows:
            effect(json.loads(payload)["i"])
        if rows:
            self.conn.execute(RAW_ACK, {"ids": [r[0] for r in rows], "owner": worker})
        return len(rows)

    def remaining(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM jobs WHERE state < 2").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class PgRawBatched(PgRaw):
    name = "raw psycopg SKIP LOCKED batched(10)"
    batch = 10

    def enqueue(self, n: int, start: int = 0) -> None:
        # 100 per commit, as the labkit batched row: one executemany in one transaction.
        for lo in range(start, start + n, 100):
            rows = [(json.dumps({"i": i}),) for i in range(lo, min(lo + 100, start + n))]
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.executemany("INSERT INTO jobs (payload) VALUES (%s)", rows)


from bench.pg_peers import PgQueuer, Procrastinate  # noqa: E402 - they use the helpers above

PG_ADAPTERS: dict[str, type[Adapter]] = {
    "pg_labkit": PgLabkit,
    "pg_labkit_batch": PgLabkitBatch,
    "pg_labkit_ledger": PgLabkitLedger,
    "pg_raw": PgRaw,
    "pg_raw_batched": PgRawBatched,
    "procrastinate": Procrastinate,
    "pgqueuer": PgQueuer,
}
