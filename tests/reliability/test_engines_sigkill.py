"""Four worker processes on PostgreSQL and on Redis Streams, SIGKILLed at random.

Counted from the append-only effects log each engine keeps (tests/reliability/
engine_worker.py): every job's effect exactly once, none lost, none twice. The sizes
come from ``sizes`` (conftest): a few hundred jobs in the normal suite, 10,000 under
``make soak``. A mutant run without the ledger / idempotency record shows the count
would catch a duplicate.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from procs import replay

from labkit.clock import SystemClock

pytestmark = [pytest.mark.slow, pytest.mark.services]

WORKER = Path(__file__).with_name("engine_worker.py")
WORKERS = 4


def _spawn(spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, killed whole in the finally
    )


def _kill_group(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)


def _report(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"worker exited {proc.returncode}:\n{err[-3000:]}"
    return dict(json.loads(out.strip().splitlines()[-1]))


# -- the engines: fill, count effects, clean up ----------------------------------------


@pytest.fixture
def pg_engine(postgres_dsn: str) -> Iterator[dict[str, Any]]:
    import psycopg

    from labkit.backends import spec
    from labkit.backends.postgres.store import PostgresJobStore

    schema = f"soak_{uuid.uuid4().hex[:12]}"

    def fill(n: int) -> list[str]:
        with PostgresJobStore(postgres_dsn, clock=SystemClock(), schema=schema) as store:
            store.conn.execute(
                "CREATE TABLE effects (id BIGINT GENERATED ALWAYS AS IDENTITY, job_id BIGINT)"
            )
            keys = [f"job-{i}" for i in range(n)]
            with store.conn.transaction():
                for key in keys:
                    store.enqueue("effect", {"key": key}, key=key, max_attempts=50)
            return keys

    conn = psycopg.connect(postgres_dsn, autocommit=True)

    def effects() -> dict[str, int]:
        rows = conn.execute(
            f'SELECT j.key, count(*) FROM "{schema}".effects e '
            f'JOIN "{schema}".jobs j ON j.id = e.job_id GROUP BY j.key'
        ).fetchall()
        return {k: int(n) for k, n in rows}

    def total() -> int:
        row = conn.execute(f'SELECT count(*) FROM "{schema}".effects').fetchone()
        return int(row[0]) if row else 0

    try:
        yield {
            "spec": {"engine": "postgres", "url": postgres_dsn, "schema": schema, "lease_s": 0.5},
            "fill": fill,
            "effects": effects,
            "total": total,
        }
    finally:
        conn.close()
        spec.drop(f"{postgres_dsn}#schema={schema}")


@pytest.fixture
def redis_engine(redis_url: str) -> Iterator[dict[str, Any]]:
    from labkit.backends.redis.streams import StreamQueue

    prefix = f"soak:{uuid.uuid4().hex[:12]}"
    q = StreamQueue(redis_url, prefix)

    def fill(n: int) -> list[str]:
        keys = [f"job-{i}" for i in range(n)]
        pipe = q.r.pipeline(transaction=False)
        for key in keys:
            pipe.xadd(q.stream, {"key": key, "kind": "effect", "payload": "{}"})
        pipe.execute()
        return keys

    def effects() -> dict[str, int]:
        counts: dict[str, int] = {}
        for key in q.r.lrange(f"{prefix}:effects", 0, -1):
            counts[key] = counts.get(key, 0) + 1
        return counts

    try:
        yield {
            "spec": {"engine": "redis", "url": redis_url, "prefix": prefix, "idle_ms": 500},
            "fill": fill,
            "effects": effects,
            "total": lambda: int(q.r.llen(f"{prefix}:effects")),
        }
    finally:
        q.delete_all()
        q.close()


ENGINES = {"postgres": "pg_engine", "redis_streams": "redis_engine"}


def _soak(
    engine: dict[str, Any], jobs: int, kills: int, seed: int, mutant: str = ""
) -> tuple[list[str], dict[str, int], int, list[dict[str, Any]]]:
    """Run 4 workers over ``jobs`` jobs, SIGKILL one at random ``kills`` times, restart it."""
    chooser = random.Random(seed)
    clock = SystemClock()
    keys = engine["fill"](jobs)
    base = {**engine["spec"], "pace_s": 0.02 if mutant else 0.002, "mutant": mutant}
    live = {k: _spawn({**base, "name": f"w{k}"}) for k in range(WORKERS)}
    fired, progress = 0, 0
    total: Callable[[], int] = engine["total"]
    deadline = clock.now() + 1800
    try:
        for _kill in range(kills):
            target = progress + chooser.randint(1, max(2, jobs // (kills * 2)))
            while (progress := total()) < target:
                assert progress < jobs, "all jobs done before the planned kills: more jobs"
                assert clock.now() < deadline, "no progress: the workers are stuck"
                clock.sleep(0.01)
            victim = chooser.choice(sorted(live))
            os.killpg(live[victim].pid, signal.SIGKILL)
            live[victim].communicate(timeout=60)
            fired += live[victim].returncode == -signal.SIGKILL
            # Restarted under the same name: a Redis consumer first finishes its own PEL.
            live[victim] = _spawn({**base, "name": f"w{victim}"})
        reports = [_report(p, timeout=1800) for p in live.values()]
    finally:
        for proc in live.values():
            _kill_group(proc)
    return keys, engine["effects"](), fired, reports


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
def test_random_sigkills_lose_nothing_and_duplicate_nothing(request, engine_name, sizes, rng):
    seed = rng.randrange(2**32)
    print(f"seed {seed}; {replay('random_sigkills_lose_nothing', seed)}")
    engine = request.getfixturevalue(ENGINES[engine_name])
    keys, effects, fired, reports = _soak(engine, sizes.jobs, sizes.kills, seed)
    assert fired == sizes.kills, "every planned SIGKILL must have hit a live worker"
    assert [r["errors"] for r in reports] == [[]] * WORKERS
    lost = [k for k in keys if k not in effects]
    doubled = {k: n for k, n in effects.items() if n > 1}
    assert (lost, doubled) == ([], {}), f"seed {seed}: {len(lost)} lost, {len(doubled)} twice"
    assert sorted(effects) == sorted(keys)


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
def test_mutant_without_the_atomic_effect_record_the_count_sees_duplicates(
    request, engine_name, rng
):
    """Effect apart from the ack (PG) or without the record (Redis): kills now duplicate."""
    seed = rng.randrange(2**32)
    print(f"seed {seed}; {replay('mutant_without_the_atomic', seed)}")
    engine = request.getfixturevalue(ENGINES[engine_name])
    # Slow jobs and a short idle threshold: entries held by live but slow consumers are
    # taken over too, and killed consumers leave effects without acknowledgements.
    engine["spec"] = {**engine["spec"], "idle_ms": 1, "lease_s": 0.001}
    keys, effects, _fired, _reports = _soak(engine, 200, 4, seed, mutant="no_ledger")
    assert all(k in effects for k in keys)
    assert any(n > 1 for n in effects.values()), "the count never saw a duplicate"
