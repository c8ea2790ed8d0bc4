"""Chaos: real worker processes SIGKILLed, SIGSTOPped and cut off from PostgreSQL at random.

Three workers take jobs that arrive one every 30 ms, with short leases (0.5 s), using
the ledger (the effect row commits with the completion). A seeded chooser picks, again
and again, a fault and a victim, and strikes while the victim holds a lease: SIGKILL
(the worker is replaced), SIGSTOP (frozen past its lease, so another worker takes its
job, then SIGCONT: a zombie whose completion must be refused) or, on PostgreSQL,
``pg_terminate_backend`` of one of the worker's connections. Every fault is counted
only when it fired (the kill's return code, a live process stopped, a backend the
server confirms it terminated). A mutant run without the ledger must show duplicates,
so a clean report means something.

The report counts, from the database alone: lost (a job that never took effect),
duplicated (an effect row twice) and stuck (a job not finished at the end). All three
must be zero. The seed decides the sequence of faults and victims; where each lands in
a worker's work depends on timing, so a replay repeats the plan, not every interleaving.
``make soak`` runs 5,000 jobs and 60 faults per backend; ``make test`` a short run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from procs import effect_counts, finish, log_counts, new_db, spawn

from labkit.clock import SystemClock

pytestmark = pytest.mark.slow

LEASE_S = 0.5
WORKERS = 3
#: One job becomes due every ARRIVAL_S seconds: even one worker alone nearly keeps up, so
#: a backlog never hides an expired lease for long.
ARRIVAL_S = 0.03


class Backend:
    """Where the chaos run keeps its jobs, and what it can cut: SQLite or PostgreSQL."""

    name: str

    def spec(self, worker: str) -> dict[str, Any]:
        raise NotImplementedError

    def enqueue(self, n: int) -> list[int]:
        """``n`` jobs arriving one every ``ARRIVAL_S`` from now (``run_after``)."""
        raise NotImplementedError

    def report(self, ids: list[int]) -> dict[str, int]:
        raise NotImplementedError

    def terminate_one(self, worker: str, chooser: random.Random) -> bool:
        return False

    def holds(self, worker: str) -> bool:
        """Whether ``worker`` holds a lease now (a freeze then strands a job)."""
        raise NotImplementedError


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def spec(self, worker: str) -> dict[str, Any]:
        return {"db": str(self.path)}

    def holds(self, worker: str) -> bool:
        with new_db(self.path) as store:
            return any(j.lease_owner == worker for j in store.jobs(state="running", limit=50))

    def enqueue(self, n: int) -> list[int]:
        with new_db(self.path) as store:
            return _arrivals(store, n)

    def report(self, ids: list[int]) -> dict[str, int]:
        with new_db(self.path) as store:
            effects = effect_counts(store)
            states = {j.id: str(j.state) for j in store.jobs(limit=len(ids) + 10)}
        return _judge(ids, effects, states)


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, dsn: str, schema: str) -> None:
        from labkit.backends.postgres.store import PostgresJobStore
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
        return _arrivals(self.store, n)

    def report(self, ids: list[int]) -> dict[str, int]:
        rows = self.store.conn.execute("SELECT job_id, count(*) AS n FROM effects GROUP BY job_id")
        effects = {r["job_id"]: r["n"] for r in rows}
        states = {j.id: str(j.state) for j in self.store.jobs(limit=len(ids) + 10)}
        return _judge(ids, effects, states)

    def holds(self, worker: str) -> bool:
        return any(j.lease_owner == worker for j in self.store.jobs(state="running", limit=50))

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


def _arrivals(store: Any, n: int) -> list[int]:
    """Jobs that become due one every ``ARRIVAL_S``, as a steady stream of work would.

    Were they all due at once, a lease a fault left behind would be due later than every
    waiting job and taken over only at the very end; arriving over time, it is the
    oldest due job soon after it expires, so frozen workers really become zombies.
    Faults count as attempts: a high cap keeps chaos from burying a job.
    """
    start = store.clock.now()
    return [
        store.enqueue("effect", {"n": i}, key=f"chaos-{i}", max_attempts=1000,
                      run_after=start + i * ARRIVAL_S)[0].id
        for i in range(n)
    ]


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

    def __init__(self, backend: Backend, folder: Path, mode: dict[str, Any] | None = None) -> None:
        self.backend = backend
        self.folder = folder
        self.mode = mode or {"mode": "ledger"}
        self.live: dict[str, subprocess.Popen[str]] = {}
        self.stopped: dict[str, float] = {}  # worker -> when to SIGCONT it
        self.spawned = 0
        self.reports: list[dict[str, Any]] = []

    def begin(self, clock: SystemClock, jobs: int) -> list[int]:
        """Start the workers, and once all are open, enqueue the jobs and let them go.

        The jobs' arrival clock starts when the workers can take them (a Python process
        takes a while to start on a loaded machine); replacements start right away.
        """
        for slot in range(WORKERS):
            self.start(slot)
        while not all(self.ready(n) for n in self.live):
            assert all(p.poll() is None for p in self.live.values()), "a worker died starting"
            clock.sleep(0.01)
        ids = self.backend.enqueue(jobs)
        (self.folder / "go").touch()
        return ids

    def start(self, slot: int) -> str:
        name = f"w{slot}-{self.spawned}"
        self.spawned += 1
        # idle_s outlasts any freeze: a worker thawed after 2 s of SIGSTOP must not
        # mistake the jump in time for an empty queue and leave.
        spec = {**self.backend.spec(name), "name": name, **self.mode,
                "lease_s": LEASE_S, "pace_s": 0.02, "idle_s": 10.0,
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

    def settle(self, clock: SystemClock) -> None:
        """Wait until every worker is open and at least two run (not frozen).

        A frozen worker becomes a zombie only if another worker takes its expired job;
        with everyone frozen nobody would.
        """
        while not all(self.ready(n) for n in self.live) or len(self.live) - len(self.stopped) < 2:
            self.check_alive()
            clock.sleep(0.01)
            self.resume_due(clock.now())
        self.check_alive()

    def when_holding(self, victim: str, clock: SystemClock) -> None:
        """Wait (a second at most) until ``victim`` holds a lease: a fault on an idle
        worker strands no job and tests little."""
        give_up = clock.now() + 1.0
        while not self.backend.holds(victim) and clock.now() < give_up:
            clock.sleep(0.002)

    def freeze(self, victim: str, clock: SystemClock, thaw_after: float) -> None:
        """SIGSTOP ``victim`` while it holds a job, for ``thaw_after`` seconds.

        Frozen holding a lease it becomes the zombie this fault is for: its job goes to
        another worker, then it wakes up and tries to finish it.
        """
        self.when_holding(victim, clock)
        self.live[victim].send_signal(signal.SIGSTOP)
        self.stopped[victim] = clock.now() + thaw_after

    def check_alive(self) -> None:
        """Fail with the worker's own words if one exited while faults are still planned."""
        for name, proc in self.live.items():
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(
                    f"{name} exited ({proc.returncode}) before the faults ended: "
                    f"{out[-500:]} {err[-2000:]}"
                )

    def close(self) -> None:
        for proc in self.live.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def test_chaos_loses_nothing_duplicates_nothing_and_strands_nothing(
    backend: Backend, sizes: Any, rng: random.Random, request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("LABKIT_CHAOS_SEED") or rng.randrange(2**32))
    soak = " --soak" if request.config.getoption("--soak") else ""
    replay = (f"replay: LABKIT_CHAOS_SEED={seed} .venv/bin/pytest -p no:cacheprovider "
              f"tests/reliability/test_chaos.py -k {backend.name}{soak}")
    print(f"seed {seed}; {replay}")
    chooser, clock = random.Random(seed), SystemClock()
    kinds = ["kill", "stop"] + (["terminate"] if backend.name == "postgres" else [])
    # Every kind of fault at least once, the rest drawn at random, in a random order.
    plan = kinds + [chooser.choice(kinds) for _ in range(sizes.chaos_events - len(kinds))]
    chooser.shuffle(plan)
    fired = {"kill": 0, "stop": 0, "terminate": 0}
    crew = Crew(backend, tmp_path)
    try:
        ids = crew.begin(clock, sizes.chaos_jobs)
        slots = {name: k for k, name in enumerate(sorted(crew.live))}
        deadline = clock.now() + 600
        for fault in plan:
            clock.sleep(chooser.uniform(0.05, 0.4))
            crew.resume_due(clock.now())
            crew.settle(clock)
            victim = chooser.choice(sorted(n for n in crew.live if n not in crew.stopped))
            if fault == "kill":
                crew.when_holding(victim, clock)
                crew.live[victim].kill()
                crew.live[victim].communicate()
                fired["kill"] += crew.live.pop(victim).returncode == -signal.SIGKILL
                slot = slots.pop(victim)
                slots[crew.start(slot)] = slot
            elif fault == "stop":
                # Frozen past its lease: its job goes to another worker meanwhile.
                crew.freeze(victim, clock, chooser.uniform(2, 4) * LEASE_S)
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
    zombies = sum(r.get("lease_lost", 0) for r in crew.reports)
    print(f"chaos {backend.name} seed={seed}: {len(ids)} jobs, faults fired {fired}, "
          f"zombie completions refused {zombies}, calls cut {dropped}, "
          f"reconnects {reconnects} (counts of workers still alive at the end); "
          f"lost={outcome['lost']} duplicated={outcome['duplicated']} "
          f"stuck={outcome['stuck']}; {replay}")
    assert [r["errors"] for r in crew.reports] == [[]] * len(crew.reports), replay
    planned = {kind: plan.count(kind) for kind in fired}
    assert fired == planned, f"every planned fault must fire: {fired} != {planned} ({replay})"
    assert outcome == {"lost": 0, "duplicated": 0, "stuck": 0}, f"{outcome} ({replay})"


def test_mutant_without_the_ledger_a_worker_frozen_past_its_lease_duplicates_effects(
    tmp_path: Path, rng: random.Random
) -> None:
    """The same chaos judge on workers whose effect commits apart from the completion.

    A worker frozen (SIGSTOP) past its lease wakes up and does the effect a second time,
    after another worker already did it: the judge must count duplicates, or the clean
    runs above would prove nothing.
    """
    seed = int(os.environ.get("LABKIT_CHAOS_SEED") or rng.randrange(2**32))
    print(f"seed {seed}; replay: LABKIT_CHAOS_SEED={seed} .venv/bin/pytest "
          "-p no:cacheprovider tests/reliability/test_chaos.py -k mutant")
    chooser, clock = random.Random(seed), SystemClock()
    backend = SqliteBackend(tmp_path / "jobs.db")
    log = tmp_path / "effects.log"
    crew = Crew(backend, tmp_path, {"mode": "log", "log": str(log)})
    stops = 0
    try:
        ids = crew.begin(clock, 200)
        for _ in range(4):
            clock.sleep(chooser.uniform(0.05, 0.4))
            crew.resume_due(clock.now())
            crew.settle(clock)
            victim = chooser.choice(sorted(n for n in crew.live if n not in crew.stopped))
            crew.freeze(victim, clock, chooser.uniform(2, 4) * LEASE_S)
            stops += 1
        crew.resume_due(clock.now(), everyone=True)
        reports = [finish(p, timeout=600) for p in crew.live.values()]
    finally:
        crew.close()
    assert stops == 4 and [r["errors"] for r in reports] == [[]] * WORKERS
    counts = log_counts(log)
    duplicated = sum(1 for i in ids if counts.get(i, 0) > 1)
    assert sum(r["lease_lost"] for r in reports) > 0, "a frozen worker must have lost a lease"
    assert duplicated > 0, f"without the ledger a frozen worker must duplicate (seed {seed})"
