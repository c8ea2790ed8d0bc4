"""The claim's two statements, the lazy sweep of exhausted leases, and batched completion."""

from __future__ import annotations

import sqlite3

import pytest

from labkit.clock import FakeClock
from labkit.errors import LeaseLost, StoreError
from labkit.job import JobState
from labkit.store.sqlite import BURY_EVERY_S, SQL, JobStore


def _ready_rows(db_path, clock, n: int, queue: str = "default") -> None:
    conn = sqlite3.connect(db_path)
    now = clock.now()
    conn.executemany(
        "INSERT INTO jobs (kind, queue, key, fingerprint, payload, state, attempt, max_attempts,"
        " run_after, created_at, updated_at) VALUES ('k', ?, ?, 'f', '{}', 'pending', 0, 5,"
        " ?, ?, ?)",
        [(queue, f"{queue}-{i}", now - i, now, now) for i in range(n)],
    )
    conn.commit()
    conn.close()


def _plan(db_path, name: str, params: dict[str, object]) -> list[str]:
    """EXPLAIN QUERY PLAN of a named statement, one detail string per line."""
    conn = sqlite3.connect(db_path)
    conn.execute("ANALYZE")
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + SQL[name], params)]
    conn.close()
    return plan


def test_a_one_queue_claim_reads_ready_jobs_in_index_order_without_sorting_them(
    store, clock, db_path
):
    # Sorting every ready job on every claim made draining N jobs cost O(N^2). With one
    # queue the index yields rows in (run_after, id) order; the only sort left is the
    # merge of the two branches, each already cut to :limit rows.
    _ready_rows(db_path, clock, 5_000)
    params = {"worker": "w", "now": clock.now(), "lease_s": 30.0, "limit": 1, "queue": "default"}
    plan = _plan(db_path, "claim_one_queue", params)
    assert any("USING INDEX jobs_ready" in line for line in plan), plan
    assert sum("TEMP B-TREE" in line for line in plan) == 1, plan
    assert plan.index(next(x for x in plan if "TEMP B-TREE" in x)) > plan.index("UNION ALL")


def test_a_many_queue_claim_cuts_each_branch_before_the_merge():
    # With an IN-list of queues SQLite must sort within each branch, but only the top
    # :limit rows of each reach the final merge.
    branches = SQL["claim"].split("UNION ALL")
    assert len(branches) == 2
    assert all("LIMIT :limit" in branch for branch in branches), SQL["claim"]


def test_one_queue_and_many_queues_claim_in_the_same_order(tmp_path):
    # The fast single-queue statement must hand out jobs exactly as the general one does,
    # expired leases included (due at the end of their lease).
    orders = []
    for variant, queues in (("one", ("default",)), ("many", ("default", "nothing-here"))):
        clock = FakeClock()
        store = JobStore(tmp_path / f"{variant}.db", clock=clock)
        for i, delay in enumerate([5, 0, 3, 0, 1]):
            store.enqueue("k", {"i": i}, key=f"k{i}", run_after=clock.now() - delay)
        first = store.claim("w", queues=queues, lease_s=10)
        clock.advance(11)  # its lease expires: it competes again
        orders.append([first.key] + [j.key for j in store.claim_many("w", 10, queues=queues)])
        store.close()
    assert orders[0] == orders[1]
    assert orders[0][0] == "k0" and sorted(orders[0][1:]) == ["k0", "k1", "k2", "k3", "k4"]


def test_an_exhausted_lease_is_never_claimed_while_other_work_keeps_claims_full(store, clock):
    poison, _ = store.enqueue("k", {"p": 1}, key="poison", max_attempts=1)
    assert store.claim("w1", lease_s=5).key == "poison"  # and w1 dies
    for i in range(3):
        store.enqueue("k", {"i": i}, key=f"work-{i}")
    clock.advance(6)
    taken = [store.claim("w2").key for _ in range(3)]
    assert taken == ["work-0", "work-1", "work-2"]  # the poison job is not among them


def test_a_claim_that_comes_up_short_buries_exhausted_leases(store, clock):
    store.enqueue("k", {"p": 1}, key="poison", max_attempts=1)
    store.claim("w1", lease_s=5)
    clock.advance(6)
    assert store.claim("w2") is None
    buried = store.get_by_key("poison")
    assert buried.state == JobState.DEAD and buried.error_class == "LeaseExpired"


def test_a_busy_queue_buries_exhausted_leases_once_per_interval(store, clock):
    # While every claim finds work the sweep runs at most once per BURY_EVERY_S.
    poison, _ = store.enqueue(
        "k", {"p": 1}, key="poison", max_attempts=1, run_after=clock.now() - 100
    )
    for i in range(4):
        store.enqueue("k", {"i": i}, key=f"work-{i}")
    assert store.claim("w1", lease_s=0.1).key == "poison"  # swept here: the first claim
    clock.advance(BURY_EVERY_S * 0.5)  # the poison's lease expired; the interval did not
    assert store.claim("w2").key == "work-0"
    assert store.get(poison.id).state == JobState.RUNNING  # not swept yet, and not claimed
    clock.advance(BURY_EVERY_S * 0.6)
    assert store.claim("w2").key == "work-1"
    assert store.get(poison.id).state == JobState.DEAD


def test_complete_with_conn_commits_the_effect_and_the_completion_together(store, db_path):
    job, _ = store.enqueue("charge", {"invoice": 7}, key="inv-7")
    running = store.claim("w1")
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS ledger (invoice INTEGER PRIMARY KEY)")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO ledger VALUES (7)")
    done = store.complete(running, {"ok": True}, conn=conn)
    assert done.state == JobState.SUCCEEDED
    assert store.get(job.id).state == JobState.RUNNING  # not committed yet
    conn.execute("COMMIT")
    assert store.get(job.id).state == JobState.SUCCEEDED
    assert conn.execute("SELECT count(*) FROM ledger").fetchone()[0] == 1
    conn.close()


def test_complete_with_conn_by_a_zombie_is_refused_and_the_rollback_drops_the_effect(
    store, clock, db_path
):
    store.enqueue("charge", {"invoice": 8}, key="inv-8")
    zombie = store.claim("w1", lease_s=5)
    clock.advance(6)
    holder = store.claim("w2")
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS ledger (invoice INTEGER PRIMARY KEY)")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO ledger VALUES (8)")
    with pytest.raises(LeaseLost, match="roll back"):
        store.complete(zombie, conn=conn)
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM ledger").fetchone()[0] == 0
    assert store.get(holder.id).lease_token == holder.lease_token
    conn.close()


def test_complete_with_conn_needs_an_open_transaction_on_the_same_file(store, tmp_path, db_path):
    store.enqueue("charge", {"invoice": 9}, key="inv-9")
    running = store.claim("w1")
    idle = sqlite3.connect(db_path, isolation_level=None)
    with pytest.raises(StoreError, match="open transaction"):
        store.complete(running, conn=idle)
    other = sqlite3.connect(tmp_path / "other.db", isolation_level=None)
    other.execute("BEGIN")
    with pytest.raises(StoreError, match="not to this store's file"):
        store.complete(running, conn=other)
    assert store.get(running.id).state == JobState.RUNNING
    idle.close()
    other.close()


def test_complete_many_commits_the_holders_and_skips_a_lost_lease(store, clock):
    for i in range(3):
        store.enqueue("k", {"i": i}, key=f"b{i}")
    batch = store.claim_many("w1", 3, lease_s=5)
    clock.advance(6)
    taken = store.claim("w2")  # takes b0 over from w1
    done = store.complete_many(batch, results=[{"i": 0}, {"i": 1}, {"i": 2}])
    assert sorted(j.key for j in done) == ["b1", "b2"]
    assert store.get(taken.id).state == JobState.RUNNING
    assert store.get(taken.id).lease_owner == "w2"


def test_the_one_queue_claim_is_the_general_claim_with_one_queue_filter():
    # Two copies of the claim must not drift: apart from the queue filter they are equal.
    def body(name: str) -> str:
        lines = [ln.strip() for ln in SQL[name].splitlines() if not ln.strip().startswith("--")]
        return " ".join(" ".join(lines).split())

    general = body("claim")
    one = body("claim_one_queue").replace(
        "queue = :queue", "queue IN (SELECT value FROM json_each(:queues))"
    )
    assert one == general
