"""The lesson-06 table on PostgreSQL and Redis Streams: the same verdicts as on SQLite.

Each run has its own schema or key prefix (``labkit.backends.spec``), dropped when the
run ends; the tests check that nothing under the runs' names is left behind.
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


@pytest.mark.parametrize("engine", ENGINES)
def test_every_cell_matches_sqlite_in_process(services, engine):
    sqlite = crash_matrix()
    other = crash_matrix(backend=engine)
    for s, o in zip(sqlite.rows, other.rows, strict=True):
        assert (s.strategy, s.point) == (o.strategy, o.point)
        # Every cell's fault fired on both engines, or on neither.
        assert bool(s.fired) == bool(o.fired), (s, o)
        assert (s.outcome, s.effects) == (o.outcome, o.effects), (s, o)
    assert other.counts()["duplicate"] == 6 and other.counts()["lost"] == 3
    assert all(f"backend={engine}" in r.replay for r in other.rows)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_real_kills_give_the_in_process_verdict(services, engine):
    points = ["after_effect", "after_commit"]
    real = crash_matrix(points=points, backend=engine, real_kill=True, parallel=2)
    fake = crash_matrix(points=points, backend=engine)
    for r, f in zip(real.rows, fake.rows, strict=True):
        assert (r.outcome, r.effects) == (f.outcome, f.effects), (r, f)
        assert r.fired and r.fired[0].startswith(f"kill at {r.point}") and r.restarts >= 1, r
    assert real.outcome("ack_late", "after_effect") == "duplicate"
    assert real.outcome("ack_first", "after_commit") == "lost"


@pytest.mark.parametrize("engine", ENGINES)
def test_a_row_replays_on_its_own_engine(services, engine):
    (row,) = crash_matrix(["reconcile"], [LOST_RESPONSE], backend=engine).rows
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
