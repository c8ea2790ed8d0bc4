"""Chaos: real worker processes SIGKILLed, SIGSTOPped and cut off from PostgreSQL at random.

Three workers drain a queue with short leases (0.5 s) using the ledger (the effect row
commits with the completion). A seeded chooser picks, again and again, a fault and a
victim: SIGKILL (the worker is replaced), SIGSTOP (frozen past its lease, so another
worker takes its job, then SIGCONT: a zombie that must change nothing) or, on
PostgreSQL, ``pg_terminate_backend`` of one of the worker's connections. Every fault
is counted only when it fired (the kill's return code, a live process stopped, a
backend the server confirms it terminated).

The report counts, from the database alone: lost (a job that never took effect),
duplicated (an effect row twice) and stuck (a job not finished at the end). All three
must be zero. The seed decides the sequence of faults and victims; where each lands in
a worker's work depends on timing, so a replay repeats the plan, not every interleaving.
``make soak`` runs 3,000 jobs and 60 faults per backend; ``make test`` a short run.
"""

from __future__ import annotations

import random
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from procs import effect_counts, finish, new_db, spawn

from labkit.clock import SystemClock

pytestmark = pytest.mark.slow

LEASE_S = 0.5
WORKERS = 3


class Backend:
    """Where the chaos run keeps its jobs, and what it can cut: SQLite or PostgreSQL."""

    name: str

    def spec(self, worker: str) -> dict[str, Any]:
        raise NotImplementedError

    def enqueue(self, n: int) -> list[int]:
        raise NotImplementedError

    def report(self, ids: list[int]) -> dict[str, int]:
        raise NotImplementedError

    def terminate_one(self, worker: str, chooser: random.Random) -> bool:
        return False


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def spec(self, worker: str) -> dict[str, Any]:
        return {"db": str(self.path)}

    def enqueue(self, n: int) -> list[int]:
        with new_db(self.path) as store:
            # Faults count as attempts: a high cap keeps chaos from burying a job.
            return [store.enqueue("effect", {"n": i}, key=f"chaos-{i}", max_attempts=1000)[0].id
                    for i in range(n)]

    def report(self, ids: list[int]) -> dict[str, int]:
        with new_db(self.path) as store:
            effects = effect_counts(store)
            states = {j.id: str(j.state) for j in store.jobs(limit=len(ids) + 10)}
        return _judge(ids, effects, states)


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, dsn: str, schema: str) -> None:
        from labkit.backends.postgres import PostgresJobStore
        from labkit.clock import SystemClock as Clock

        self.dsn, self.schema = dsn, schema
        self.store = PostgresJobStore(dsn, clock=Clock(), schema=schema)
        self.store.conn.execute(
            "CREATE TABLE IF NOT EXISTS effects (id BIGSERIAL PRIMARY KEY, job_id BIGINT NOT NULL)"
        )
        self.tag = f"chaos_{schema[-8:]}"

    def spec(self, worker: str) -> dict[str, Any]:
        separator = "&" if "?" in self.dsn else "?"
        return {
            "pg_dsn": f"{self.dsn}{separator}application_name={self.tag}_{worker}",
            "schema": self.schema,
        }

    def enqueue(self, n: int) -> list[int]:
        return [self.store.enqueue("effect", {"n": i}, key=f"chaos-{i}", max_attempts=1000)[0].id
                for i in range(n)]

    def report(self, ids: list[int]) -> dict[str, int]:
        rows = self.store.conn.execute("SELECT job_id, count(*) AS n FROM effects GROUP BY job_id")
        effects = {r["job_id"]: r["n"] for r in rows}
        states = {j.id: str(j.state) for j in self.store.jobs(limit=len(ids) + 10)}
        return _judge(ids, effects, states)

    def terminate_one(self, worker: str, chooser: random.Random) -> bool:
        rows = self.store.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %(app)s ORDER BY pid",
            {"app": f"{self.tag}_{worker}"},
        ).fetchall()
        if not rows:
            return False
        pid = chooser.choice([r["pid"] for r in rows])
        row = self.store.conn.execute(
            "SELECT pg_terminate_backend(%(pid)s) AS done", {"pid": pid}
        ).fetchone()
        return bool(row and row["done"])


def _judge(ids: list[int], effects: dict[int, int], states: dict[int, str]) -> dict[str, int]:
    return {
        "lost": sum(1 for i in ids if effects.get(i, 0) == 0),
        "duplicated": sum(1 for i in ids if effects.get(i, 0) > 1),
        "stuck": sum(1 for i in ids if states.get(i) != "succeeded"),
    }


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield SqliteBackend(tmp_path / "jobs.db")
        return
    dsn = request.getfixturevalue("postgres_dsn")
    import psycopg
    from psycopg import sql

    schema = f"chaos_{uuid.uuid4().hex[:12]}"
    pg = PostgresBackend(dsn, schema)
    try:
        yield pg
    finally:
        pg.store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '10s'")
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class Crew:
    """The worker processes of one run; every one is killed and reaped at the end."""

    def __init__(self, backend: Backend, folder: Path) -> None:
        self.backend = backend
        self.folder = folder
        (folder / "go").touch()  # workers start claiming as soon as they are open
        self.live: dict[str, subprocess.Popen[str]] = {}
        self.stopped: dict[str, float] = {}  # worker -> when to SIGCONT it
        self.spawned = 0
        self.reports: list[dict[str, Any]] = []

    def start(self, slot: int) -> str:
        name = f"w{slot}-{self.spawned}"
        self.spawned += 1
        spec = {**self.backend.spec(name), "name": name, "mode": "ledger",
                "lease_s": LEASE_S, "pace_s": 0.02, "idle_s": 3 * LEASE_S,
                "ready": str(self.folder / f"ready-{name}"), "go": str(self.folder / "go")}
        self.live[name] = spawn(spec)
        return name

    def ready(self, name: str) -> bool:
        """Whether ``name`` has opened its store (a fault before that would test nothing)."""
        return (self.folder / f"ready-{name}").exists()

    def resume_due(self, now: float, everyone: bool = False) -> None:
        for name, at in list(self.stopped.items()):
            if everyone or now >= at:
                self.live[name].send_signal(signal.SIGCONT)
                del self.stopped[name]

    def close(self) -> None:
        for proc in self.live.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def test_chaos_loses_nothing_duplicates_nothing_and_strands_nothing(
    backend: Backend, sizes: Any, rng: random.Random, request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    seed = rng.randrange(2**32)
    soak = " --soak" if request.config.getoption("--soak") else ""
    replay = (f"replay: LABKIT_SEED={seed} .venv/bin/pytest -p no:cacheprovider "
              f"tests/reliability/test_chaos.py -k {backend.name}{soak}")
    print(f"seed {seed}; {replay}")
    chooser, clock = random.Random(seed), SystemClock()
    ids = backend.enqueue(sizes.chaos_jobs)
    kinds = ["kill", "stop"] + (["terminate"] if backend.name == "postgres" else [])
    # Every kind of fault at least once, the rest drawn at random, in a random order.
    plan = kinds + [chooser.choice(kinds) for _ in range(sizes.chaos_events - len(kinds))]
    chooser.shuffle(plan)
    fired = {"kill": 0, "stop": 0, "terminate": 0}
    crew = Crew(backend, tmp_path)
    try:
        slots = {crew.start(k): k for k in range(WORKERS)}
        deadline = clock.now() + 600
        for fault in plan:
            clock.sleep(chooser.uniform(0.05, 0.4))
            crew.resume_due(clock.now())
            while not all(crew.ready(n) for n in crew.live):
                assert all(p.poll() is None for p in crew.live.values()), "a worker died starting"
                clock.sleep(0.01)
            while len(crew.stopped) == len(crew.live):  # everyone frozen: wait for one
                clock.sleep(max(min(crew.stopped.values()) - clock.now(), 0.0))
                crew.resume_due(clock.now())
            victim = chooser.choice(sorted(n for n in crew.live if n not in crew.stopped))
            assert crew.live[victim].poll() is None, (
                f"{victim} exited before the chaos ended: enqueue more jobs ({replay})"
            )
            if fault == "kill":
                crew.live[victim].kill()
                crew.live[victim].communicate()
                fired["kill"] += crew.live.pop(victim).returncode == -signal.SIGKILL
                slot = slots.pop(victim)
                slots[crew.start(slot)] = slot
            elif fault == "stop":
                crew.live[victim].send_signal(signal.SIGSTOP)
                # Frozen past its lease: its job goes to another worker meanwhile.
                crew.stopped[victim] = clock.now() + chooser.uniform(2, 4) * LEASE_S
                fired["stop"] += 1
            else:
                fired["terminate"] += backend.terminate_one(victim, chooser)
            assert clock.now() < deadline, f"the chaos run took too long ({replay})"
        crew.resume_due(clock.now(), everyone=True)
        crew.reports = [finish(p, timeout=600) for p in crew.live.values()]
        # Jobs whose lease a fault left behind after the others went idle: one plain
        # worker, no faults, finishes them (this is what a restarted service does).
        crew.live.clear()
        sweeper = crew.start(WORKERS)
        crew.reports.append(finish(crew.live[sweeper], timeout=600))
    finally:
        crew.close()
    outcome = backend.report(ids)
    dropped = sum(r.get("dropped", 0) for r in crew.reports)
    reconnects = sum(r.get("reconnects", 0) for r in crew.reports)
    print(f"chaos {backend.name} seed={seed}: {len(ids)} jobs, faults fired {fired}, "
          f"calls cut {dropped}, reconnects {reconnects} (of workers still alive); "
          f"lost={outcome['lost']} duplicated={outcome['duplicated']} "
          f"stuck={outcome['stuck']}; {replay}")
    assert [r["errors"] for r in crew.reports] == [[]] * len(crew.reports), replay
    planned = {kind: plan.count(kind) for kind in fired}
    assert fired == planned, f"every planned fault must fire: {fired} != {planned} ({replay})"
    assert outcome == {"lost": 0, "duplicated": 0, "stuck": 0}, f"{outcome} ({replay})"
