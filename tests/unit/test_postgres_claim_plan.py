"""The PostgreSQL claim reads an index in order and stops at its limit, whatever the planner knows.

A claim that sorts every ready row costs O(N) per claim and O(N^2) to drain a queue (the
PostgreSQL store measured 227 jobs/s at 10,000 ready jobs that way). Here the claim runs
under ``EXPLAIN (ANALYZE, FORMAT JSON)`` inside a transaction that is rolled back, and the
plan it really executed is checked: the ready rows come from an index scan of
``jobs_ready`` that returned at most ``limit`` rows per queue, no node read or sorted
anything near the number of ready jobs, and no node scanned ``jobs`` sequentially. It is
checked on a never-analyzed table (no statistics), after ANALYZE, and with the generic
plan a prepared statement switches to after five executions.

The claims of the account and serial queues (``labkit/backends/postgres/queues.sql``) are
checked the same way, among many more rows of other queues: no sequential scan of ``jobs``, and no
node handles (returns, or reads and drops) more than what the claim must look at. A capped
claim looks at the first ``cap`` rows of each account, not at a flooded account's whole
backlog; a serial claim at the live jobs of its keys. Their UPDATE reads the chosen ids
with ``= ANY(ARRAY(...))``, as the store's claim does.
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

from labkit.backends.postgres import queues as pg_queues
from labkit.backends.postgres.store import SQL, PostgresJobStore
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
    store: PostgresJobStore,
    limit: int,
    queues: list[str],
    generic: bool = False,
    statement: str | None = None,
    **extra: Any,
) -> list[dict[str, Any]]:
    """The plan of a claim (the store's unless ``statement``) as it ran, rolled back."""
    params = {"worker": "w", "queues": queues, "lease_s": 30.0, "limit": limit,
              "now": store.clock.now(), **extra}
    conn = store.conn
    with conn.transaction(force_rollback=True):
        if generic:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        explain = "EXPLAIN (ANALYZE, FORMAT JSON) " + (statement or SQL["claim"])
        row = conn.execute(explain, params).fetchone()
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


# -- the claims of the account and serial queues -----------------------------------------

ACCOUNTS = [f"account:{n}" for n in range(5)]
FLOOD = 600  # ready jobs in each account: a backlog the capped claim must not read whole
CAP = 2
KEYS = [f"serial:order:{n}" for n in range(5)]
DEPTH = 6  # jobs behind each serial key


def _add_jobs(store: PostgresJobStore, queue: str, count: int, state: str = "pending") -> None:
    store.conn.execute(
        "INSERT INTO jobs (kind, queue, key, fingerprint, payload, state, max_attempts,"
        " run_after, created_at, updated_at)"
        " SELECT 'k', %(q)s, %(q)s || '-' || g, 'f', '{}', %(state)s, 5,"
        "        %(now)s - %(n)s + g, %(now)s, %(now)s FROM generate_series(1, %(n)s) AS g",
        {"q": queue, "n": count, "state": state, "now": store.clock.now()},
    )


def _lease(store: PostgresJobStore, queue: str, nth: int, until: float) -> None:
    """Make the ``nth`` oldest job of ``queue`` (0 first) run under a lease until ``until``."""
    store.conn.execute(
        "UPDATE jobs SET state = 'running', lease_token = id || '.1', lease_owner = 'w0',"
        " lease_until = %(until)s, attempt = 1 WHERE id = (SELECT id FROM jobs"
        " WHERE queue = %(q)s ORDER BY id OFFSET %(nth)s LIMIT 1)",
        {"q": queue, "nth": nth, "until": until},
    )


@pytest.fixture
def queues_store(postgres_dsn: str, schema: str) -> Iterator[PostgresJobStore]:
    s = PostgresJobStore(postgres_dsn, clock=FakeClock(), schema=schema)
    try:
        s.conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        now = s.clock.now()
        # Other queues' jobs, ready and finished: what an IN (subquery) would hash whole.
        _add_jobs(s, "default", READY)
        _add_jobs(s, "done", READY, "succeeded")
        for account in ACCOUNTS:
            _add_jobs(s, account, FLOOD)
            _lease(s, account, 0, now + 30)  # one slot of the cap taken...
            _lease(s, account, 1, now - 1)  # ...and an expired lease, claimable again
        for key in KEYS:
            _add_jobs(s, key, DEPTH)
        _lease(s, KEYS[0], 0, now + 30)  # a running head: the key waits
        _lease(s, KEYS[1], 0, now - 1)  # an expired head: claimable again
        yield s
    finally:
        s.close()


def _check_queue_claim(plan: list[dict[str, Any]], claimed: int, bound: int) -> None:
    seq = [n for n in plan if n["Node Type"] == "Seq Scan" and n["Relation Name"] == "jobs"]
    assert not seq, "no sequential scan of jobs"
    handled = max(
        (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n.get("Actual Loops", 1)
        for n in plan
    )
    assert handled <= bound, f"a node handled {handled} rows"
    updated = plan[0]
    assert updated["Node Type"] == "ModifyTable"
    assert updated["Actual Rows"] == claimed


def _check_capped(store: PostgresJobStore, statement: str, limit: int, cap: int,
                  generic: bool = False) -> None:
    plan = _executed_plan(store, limit, ACCOUNTS, generic, statement, cap=cap)
    # Each account runs one job: cap - 1 slots left in each. What the claim may look at:
    # per account and branch its first `cap` rows, each with one running count, and
    # `limit` chosen rows; never an account's whole backlog.
    claimed = min(limit, (cap - 1) * len(ACCOUNTS))
    _check_queue_claim(plan, claimed, 2 * cap * len(ACCOUNTS) + limit + 20)


def _check_serial(store: PostgresJobStore, statement: str, limit: int,
                  generic: bool = False) -> None:
    plan = _executed_plan(store, limit, KEYS, generic, statement)
    # Every key's head but the running one. What the claim may look at: the keys' live
    # jobs (a serial key holds a few), and `limit` chosen rows.
    _check_queue_claim(plan, min(limit, len(KEYS) - 1), DEPTH * len(KEYS) + limit + 20)


@pytest.mark.parametrize("limit", [1, 10, 100])
@pytest.mark.parametrize("cap", [2, 100])
def test_capped_claim_reads_the_first_cap_rows_of_each_account_whatever_the_planner_knows(
    queues_store: PostgresJobStore, limit: int, cap: int
) -> None:
    claim = pg_queues.SQL["claim_capped"]
    assert _never_analyzed(queues_store), "the first plan must be made without statistics"
    _check_capped(queues_store, claim, limit, cap)
    queues_store.conn.execute("ANALYZE jobs")
    assert not _never_analyzed(queues_store)
    _check_capped(queues_store, claim, limit, cap)
    _check_capped(queues_store, claim, limit, cap, generic=True)


@pytest.mark.parametrize("limit", [1, 10, 100])
def test_serial_claim_reads_only_the_live_jobs_of_its_keys_whatever_the_planner_knows(
    queues_store: PostgresJobStore, limit: int
) -> None:
    claim = pg_queues.SQL["claim_serial"]
    assert _never_analyzed(queues_store), "the first plan must be made without statistics"
    _check_serial(queues_store, claim, limit)
    queues_store.conn.execute("ANALYZE jobs")
    assert not _never_analyzed(queues_store)
    _check_serial(queues_store, claim, limit)
    _check_serial(queues_store, claim, limit, generic=True)


def test_the_check_catches_an_update_that_reads_the_chosen_ids_with_in(
    queues_store: PostgresJobStore,
) -> None:
    # The UPDATE as it was; once analyzed, a big enough claim hashes every row of jobs.
    claim = pg_queues.SQL["claim_capped"]
    assert "id = ANY(ARRAY(SELECT id FROM chosen))" in claim
    with_in = claim.replace(
        "id = ANY(ARRAY(SELECT id FROM chosen))", "id IN (SELECT id FROM chosen)"
    )
    queues_store.conn.execute("ANALYZE jobs")
    _check_capped(queues_store, claim, 100, 100)
    with pytest.raises(AssertionError, match="no sequential scan of jobs"):
        _check_capped(queues_store, with_in, 100, 100)
