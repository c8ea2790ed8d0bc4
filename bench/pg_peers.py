"""The PostgreSQL peers of labkit's PostgreSQL store: procrastinate and pgqueuer.

Each runs as its documentation recommends for at-least-once delivery; see bench/pg.py
for the schema per measurement and bench/README.md for what each guarantees.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.adapters import Adapter, Effect
from bench.pg import PGQ_HEARTBEAT_S, PROC_HEARTBEAT_S, PROC_STALLED_S, create, dsn_for

# -- peers -------------------------------------------------------------------------------


class Procrastinate(Adapter):
    """procrastinate's own worker, one job per fetch; stalled jobs retried as documented."""

    name = "procrastinate"
    postgres = True
    drains = True  # one work_one call runs a worker until the queue is empty

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        import procrastinate

        create(path)
        self.dsn = dsn_for(path)
        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=self.dsn))
        self.effect: list[Effect] = []
        self.done = 0

        @self.app.task(name="touch", queue="bench")
        def touch(i: int) -> None:
            self.effect[0](i)
            self.done += 1

        self.touch = touch
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            installed = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        if installed is None or installed[0] is None:
            with self.app.open():
                self.app.schema_manager.apply_schema()

    def enqueue(self, n: int, start: int = 0) -> None:
        with self.app.open():
            defer = self.touch.defer
            for i in range(start, start + n):
                defer(i=i)

    def fill(self, n: int) -> None:
        with self.app.open():
            for lo in range(0, n, 1000):
                self.touch.batch_defer(*({"i": i} for i in range(lo, min(lo + 1000, n))))

    def work_one(self, effect: Effect, worker: str) -> int:
        self.effect[:] = [effect]
        before = self.done
        asyncio.run(self._drain(worker))
        return self.done - before

    async def _drain(self, worker: str) -> None:
        async with self.app.open_async():
            manager = self.app.job_manager
            for job in await manager.get_stalled_jobs(seconds_since_heartbeat=PROC_STALLED_S):
                await manager.retry_job(job)
            await self.app.run_worker_async(
                queues=["bench"], wait=False, concurrency=1, name=worker,
                install_signal_handlers=False, listen_notify=False,
                update_heartbeat_interval=PROC_HEARTBEAT_S,
                stalled_worker_timeout=PROC_STALLED_S,
            )

    def remaining(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
            ).fetchone()
        return int(row[0]) if row else 0


class PgQueuer(Adapter):
    """pgqueuer's QueueManager in drain mode, 10 jobs per dequeue, buffered acks."""

    name = "pgqueuer"
    postgres = True
    drains = True  # one work_one call runs a worker until the queue is empty
    batch = 10

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        create(path)
        self.dsn = dsn_for(path)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            installed = conn.execute("SELECT to_regclass('pgqueuer')").fetchone()
        if installed is None or installed[0] is None:
            asyncio.run(self._install())

    async def _queries(self) -> tuple[Any, Any]:
        from pgqueuer import PsycopgDriver, Queries

        conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        return conn, Queries(PsycopgDriver(conn))

    async def _install(self) -> None:
        conn, queries = await self._queries()
        async with conn:
            await queries.install()

    def enqueue(self, n: int, start: int = 0) -> None:
        asyncio.run(self._enqueue(n, start))

    async def _enqueue(self, n: int, start: int) -> None:
        conn, queries = await self._queries()
        async with conn:
            for i in range(start, start + n):
                await queries.enqueue("touch", json.dumps({"i": i}).encode())

    def fill(self, n: int) -> None:
        asyncio.run(self._fill(n))

    async def _fill(self, n: int) -> None:
        conn, queries = await self._queries()
        async with conn:
            for lo in range(0, n, 1000):
                count = min(lo + 1000, n) - lo
                await queries.enqueue(
                    ["touch"] * count,
                    [json.dumps({"i": i}).encode() for i in range(lo, lo + count)],
                    [0] * count,
                )

    def work_one(self, effect: Effect, worker: str) -> int:
        return asyncio.run(self._drain(effect))

    async def _drain(self, effect: Effect) -> int:
        from pgqueuer import QueueManager
        from pgqueuer.types import QueueExecutionMode

        done = 0
        conn, queries = await self._queries()
        async with conn:
            qm = QueueManager(queries)

            @qm.entrypoint("touch")
            async def touch(job: Any) -> None:
                nonlocal done
                effect(json.loads(job.payload)["i"])
                done += 1

            await qm.run(
                dequeue_timeout=timedelta(seconds=0.2), batch_size=self.batch,
                mode=QueueExecutionMode.drain,
                heartbeat_timeout=timedelta(seconds=PGQ_HEARTBEAT_S),
                log_aggregation_interval=timedelta(0),
            )
        return done

    def remaining(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()
        return int(row[0]) if row else 0


