"""The lesson-06 table on PostgreSQL and Redis Streams: the same verdicts as on SQLite.

Lesson 13 (``notebooks/13_beyond_one_machine.py``) runs the whole table on both engines,
compares every cell with SQLite's (outcome, effects, whether its fault fired), prints the
counts, and kills real worker processes at ``after_effect`` on both: nbval fails CI when
any of that changes, in both editions. These tests prove what the lesson does not run:
real kills at ``after_commit``, a row replayed on its own engine, and that runs leave no
schema or key behind (each run has its own schema or key prefix,
``labkit.backends.spec``, dropped when the run ends). The whole table compared cell by
cell here as well cost CI about 40 CPU-seconds a run for nothing the lesson misses.
"""

from __future__ import annotations

import uuid

import pytest

from labkit.backends import spec
from labkit.explore import crash_matrix, replay
from labkit.faults import LOST_RESPONSE

pytestmark = pytest.mark.services

ENGINES = ("postgres", "redis_streams")


@pytest.fixture
def services(postgres_dsn: str, redis_url: str) -> tuple[str, str]:
    return postgres_dsn, redis_url


def _still_there(postgres_dsn: str, redis_url: str, specs: list[str]) -> list[str]:
    import psycopg
    import redis

    names = [spec.split("=")[1].split("&")[0] for spec in specs]
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", [names]
        ).fetchall()
    client = redis.Redis.from_url(redis_url)
    try:
        keys = [k.decode() for n in names for k in client.scan_iter(match=f"{n}:*")]
    finally:
        client.close()
    return [r[0] for r in rows] + keys


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_real_kills_give_the_in_process_verdict(services, engine):
    # after_effect's real kills are lesson 13's, on both engines.
    points = ["after_commit"]
    real = crash_matrix(points=points, backend=engine, real_kill=True, parallel=2)
    fake = crash_matrix(points=points, backend=engine)
    for r, f in zip(real.rows, fake.rows, strict=True):
        assert (r.outcome, r.effects) == (f.outcome, f.effects), (r, f)
        assert r.fired and r.fired[0].startswith(f"kill at {r.point}") and r.restarts >= 1, r
    assert real.outcome("ack_first", "after_commit") == "lost"
    assert real.outcome("same_transaction", "after_commit") == "ok"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_row_replays_on_its_own_engine(services, engine):
    (row,) = crash_matrix(["reconcile"], [LOST_RESPONSE], backend=engine).rows
    assert f"backend={engine}" in row.replay, row.replay
    again = replay(row.replay)
    assert again == row


def test_runs_leave_no_schema_or_key_behind(services, monkeypatch):
    import labkit.explore.matrix as explore

    made: list[str] = []

    def recording(*args, **kwargs):
        made.append(spec.new_spec(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(explore, "new_spec", recording)
    crash_matrix(["ack_late"], ["after_effect"], backend="postgres")
    crash_matrix(["ack_late"], ["after_effect"], backend="redis_streams")
    assert len(made) == 2 and all("#" in m for m in made)
    assert _still_there(*services, made) == []


def test_reused_schemas_are_emptied_between_runs_and_dropped_at_the_end(services, tmp_path):
    from labkit.clock import FakeClock

    with spec.reuse_schemas():
        first = spec.new_spec("postgres", tmp_path, f"reuse_{uuid.uuid4().hex[:8]}")
        store = spec.open_store(first, FakeClock())
        store.enqueue("k", {}, key="a")
        store.close()
        spec.drop(first)
        second = spec.new_spec("postgres", tmp_path, "another_name")
        assert second == first, "the emptied schema is handed out again"
        store = spec.open_store(second, FakeClock())
        assert store.counts()["pending"] == 0 and store.get_by_key("a") is None
        store.close()
        spec.drop(second)
    assert _still_there(*services, [first]) == []
