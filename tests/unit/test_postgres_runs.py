"""A lesson's run schema: what runs that died left is swept, a live run's schema is kept.

Each test's runs use a prefix of the test's own schema (``<schema>_``), so they never touch
a real lesson's schemas, and the ``schema`` fixture drops whatever they leave.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

try:
    import psycopg
except ImportError:  # the driver comes with the `services` extra (make venv-test)
    if os.environ.get("LABKIT_REQUIRE_SERVICES") == "1":
        raise
    pytest.skip("psycopg is not installed: pip install -e '.[services]'", allow_module_level=True)

from labkit.backends.postgres.runs import RunSchema

# A run that creates its schema and is then SIGKILLed: no clean-up cell, no unlock.
DIES = """
import sys
import psycopg
from labkit.backends.postgres.runs import RunSchema
run = RunSchema(sys.argv[1], sys.argv[2])
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    conn.execute(f'CREATE SCHEMA "{run.name}"')
print(run.name, flush=True)
sys.stdin.readline()  # alive until killed
"""


def _schemas(dsn: str, prefix: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s) ORDER BY 1",
            [prefix],
        ).fetchall()
    return [r[0] for r in rows]


def _create(dsn: str, name: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')


def test_a_killed_runs_schema_is_swept_and_a_live_runs_is_kept(postgres_dsn, schema):
    prefix = f"{schema}_"
    child = subprocess.Popen(
        [sys.executable, "-c", DIES, postgres_dsn, prefix],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert child.stdout is not None
        killed = child.stdout.readline().strip()
        assert killed.startswith(prefix), "the child never made its run schema"
        with RunSchema(postgres_dsn, prefix) as live:
            _create(postgres_dsn, live.name)
            # Same prefix, not a run's name: never the sweep's business.
            others = [f"{prefix}notes", f"{prefix}0123456789abcdef"]
            for name in others:
                _create(postgres_dsn, name)
            with RunSchema(postgres_dsn, prefix) as alive_beside:
                assert alive_beside.swept == []  # the child still runs: its schema stays
            child.kill()  # SIGKILL: the server frees its lock once it sees the session gone
            child.wait(30)
            swept: list[str] = []
            for _ in range(100):
                with RunSchema(postgres_dsn, prefix) as after:
                    swept = after.swept
                if swept:
                    break
                threading.Event().wait(0.1)  # a moment for the server to notice
            assert swept == [killed]
            assert _schemas(postgres_dsn, prefix) == sorted([live.name, *others])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_closed_runs_schema_is_swept_by_the_next_run(postgres_dsn, schema):
    prefix = f"{schema}_"
    first = RunSchema(postgres_dsn, prefix)
    _create(postgres_dsn, first.name)
    first.close()  # as if the lesson failed before its clean-up cell and the kernel ended
    with RunSchema(postgres_dsn, prefix) as second:
        assert second.swept == [first.name]
        assert second.name != first.name
    assert _schemas(postgres_dsn, prefix) == []


def test_the_redis_keys_of_a_finished_run_go_and_a_live_runs_stay(postgres_dsn, redis_url, schema):
    import redis

    prefix, keys = f"{schema}_", f"{schema}:"
    finished = RunSchema(postgres_dsn, prefix)
    finished.close()  # ended before its clean-up cell: its keys stay on the server
    kept = [f"{keys}notes:x", f"{keys}{finished.id}"]  # not under a run's prefix
    with RunSchema(postgres_dsn, prefix) as live, redis.Redis.from_url(redis_url) as r:
        try:
            for run_id in (finished.id, live.id):
                for name in ("stream", "dead", "done:inv-1"):
                    r.set(f"{keys}{run_id}:{name}", "x")
            for key in kept:
                r.set(key, "x")
            with RunSchema(postgres_dsn, prefix) as next_run:
                assert next_run.sweep_keys(redis_url, keys) == [keys + finished.id]
                assert next_run.sweep_keys(redis_url, keys) == []  # nothing more to do
            left = sorted(k.decode() for k in r.scan_iter(match=f"{keys}*"))
            live_keys = [f"{keys}{live.id}:{n}" for n in ("stream", "dead", "done:inv-1")]
            assert left == sorted([*live_keys, *kept])
        finally:
            for key in r.scan_iter(match=f"{keys}*"):
                r.delete(key)


@pytest.mark.parametrize(
    "bad",
    [
        "Lesson13_",  # upper case would need quoting everywhere
        "lesson-13_",  # not an identifier
        "",  # no prefix: every run-shaped schema on the server would match
    ],
)
def test_a_prefix_that_cannot_start_a_schema_name_is_refused(bad):
    with pytest.raises(ValueError, match="prefix must start"):
        RunSchema("postgresql://nobody@127.0.0.1:1/none", bad)
