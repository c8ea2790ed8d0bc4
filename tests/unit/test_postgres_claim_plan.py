"""The PostgreSQL claim reads an index in order and stops at its limit, whatever the planner knows.

A claim that sorts every ready row costs O(N) per claim and O(N^2) to drain a queue (the
PostgreSQL store measured 227 jobs/s at 10,000 ready jobs that way). Here the claim runs
under ``EXPLAIN (ANALYZE, FORMAT JSON)`` inside a transaction that is rolled back, and the
plan it really executed is checked: the ready rows come from an index scan of
``jobs_ready`` that returned at most ``limit`` rows per queue, no node read or sorted
anything near the number of ready jobs, and no node scanned ``jobs`` sequentially. It is
checked on a never-analyzed table (no statistics), after ANALYZE, and with the generic
plan a prepared statement switches to after five executions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

try:
    import psycopg  # noqa: F401 - imported only so a missing driver skips the file
except ImportError:  # the driver comes with the `services` extra (make venv-test)
    if os.environ.get("LABKIT_REQUIRE_SERVICES") == "1":
        raise
    pytest.skip("psycopg is not installed: pip install -e '.[services]'", allow_module_level=True)

from labkit.backends.postgres import SQL, PostgresJobStore
from labkit.clock import FakeClock

READY = 3_000


@pytest.fixture
def store(postgres_dsn: str, schema: str) -> Iterator[PostgresJobStore]:
    s = PostgresJobStore(postgres_dsn, clock=FakeClock(), schema=schema)
    try:
        # Autovacuum would analyze the table behind the test's back: "no statistics" must
        # stay true until the test analyzes it itself.
        s.conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        now = s.clock.now()
        for queue, count in (("default", READY), ("other", READY)):
            s.conn.execute(
                "INSERT INTO jobs (kind, queue, key, fingerprint, payload, state, max_attempts,"
                " run_after, created_at, updated_at)"
                " SELECT 'k', %(q)s, %(q)s || '-' || g, 'f', '{}', 'pending', 5,"
                "        %(now)s - g, %(now)s, %(now)s FROM generate_series(1, %(n)s) AS g",
                {"q": queue, "n": count, "now": now},
            )
        # A few expired leases, so the second branch has rows to find too.
        s.conn.execute(
            "UPDATE jobs SET state = 'running', lease_token = id || '.1', lease_owner = 'gone',"
            " lease_until = %(now)s - 1, attempt = 1 WHERE id IN (SELECT id FROM jobs"
            " WHERE queue = 'default' ORDER BY id DESC LIMIT 20)",
            {"now": now},
        )
        yield s
    finally:
        s.close()


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _executed_plan(
    store: PostgresJobStore, limit: int, queues: list[str], generic: bool = False
) -> list[dict[str, Any]]:
    params = {"worker": "w", "queues": queues, "lease_s": 30.0, "limit": limit,
              "now": store.clock.now()}
    conn = store.conn
    with conn.transaction(force_rollback=True):
        if generic:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + SQL["claim"], params).fetchone()
    assert row is not None
    return list(_nodes(row["QUERY PLAN"][0]["Plan"]))


def _never_analyzed(store: PostgresJobStore) -> bool:
    row = store.conn.execute(
        "SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables"
        " WHERE relid = to_regclass('jobs')"
    ).fetchone()
    return row is not None and row["last_analyze"] is None and row["last_autoanalyze"] is None


def _check(plan: list[dict[str, Any]], limit: int, queues: list[str]) -> None:
    ready_scans = [n for n in plan if n.get("Index Name") == "jobs_ready"]
    assert ready_scans, "the ready rows must come from the jobs_ready index"
    for scan in ready_scans:
        assert scan["Node Type"] == "Index Scan", scan["Node Type"]
        # Loops: once per queue; each loop stops after `limit` rows.
        assert scan["Actual Rows"] <= limit, scan
    assert not [n for n in plan if n["Node Type"] == "Seq Scan"], "no sequential scan of jobs"
    biggest = max(n["Actual Rows"] * n.get("Actual Loops", 1) for n in plan)
    assert biggest <= 2 * limit * len(queues) + 20, f"a node handled {biggest} rows"
    updated = plan[0]
    assert updated["Node Type"] == "ModifyTable"
    assert updated["Actual Rows"] == limit


@pytest.mark.parametrize("limit", [1, 10, 100])
@pytest.mark.parametrize("queues", [["default"], ["default", "other"]])
def test_claim_stops_at_its_limit_with_and_without_statistics(
    store: PostgresJobStore, limit: int, queues: list[str]
) -> None:
    assert _never_analyzed(store), "the first plan must be made without statistics"
    _check(_executed_plan(store, limit, queues), limit, queues)
    store.conn.execute("ANALYZE jobs")
    assert not _never_analyzed(store)
    _check(_executed_plan(store, limit, queues), limit, queues)
    _check(_executed_plan(store, limit, queues, generic=True), limit, queues)


def test_the_check_catches_a_claim_that_sorts_every_ready_row(
    store: PostgresJobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim as it was: one ORDER BY over an expression no index serves.
    sorting = SQL["claim"].replace("ORDER BY run_after, id", "ORDER BY run_after + 0, id")
    monkeypatch.setitem(SQL, "claim", sorting)
    with pytest.raises(AssertionError):
        _check(_executed_plan(store, 10, ["default"]), 10, ["default"])
