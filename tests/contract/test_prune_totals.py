"""prune_finished keeps what it deletes as totals, on every backend in conftest.BACKENDS.

The metrics (``labkit.metrics``) count attempts as the attempts table plus
``pruned_attempts``; a backend whose prune forgot the fold would make those counters fall.
"""

from __future__ import annotations

from typing import Any

from labkit.clock import FakeClock
from labkit.errors import TransientError
from labkit.retry import RetryPolicy, none


def _values(row: Any) -> tuple[Any, ...]:
    # sqlite3 gives tuples, psycopg (as the store sets it up) dicts by column name.
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


def test_prune_adds_the_attempts_it_deletes_to_the_kept_totals(make_store, caller_connection):
    clock = FakeClock()
    store = make_store(clock, retry=RetryPolicy(3, none()))
    store.enqueue("k", {}, key="a")
    first = store.claim("w")
    clock.advance(2)
    store.fail(first, TransientError("503"))
    second = store.claim("w")
    clock.advance(40)
    store.complete(second)
    clock.advance(10)
    assert store.prune_finished(0) == 1
    conn = caller_connection(store)
    rows = conn.execute(
        "SELECT outcome, error_class, le, attempts, seconds FROM pruned_attempts"
        " ORDER BY outcome"
    ).fetchall()
    assert [_values(r) for r in rows] == [
        ("retry_wait", "TransientError", "5", 1, 2.0),  # 2 s: the 5 s bucket
        ("succeeded", "-", "60", 1, 40.0),  # 40 s: the 60 s bucket
    ]
    # The history itself is gone: the totals are all that is left of it.
    assert _values(conn.execute("SELECT count(*) AS n FROM attempts").fetchone()) == (0,)
