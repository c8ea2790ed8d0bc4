"""What an operator reads off a job database: inspection queries and Prometheus metrics.

The attempts table is the runs table the cron article asks for: one row per run of a
job, with worker, start, end, outcome and sanitized error. ``inspect(store, name)`` runs
one of the operator's questions on it (SQL in ``labkit/metrics.sql``):

- ``stuck_running``: running jobs whose lease expired, or running for ``older_than_s``;
- ``retry_storms``: kinds with many failed attempts in the last ``window_s``;
- ``oldest_pending``: ready jobs nobody has claimed, longest waiting first;
- ``dead_by_reason``: dead jobs grouped by error class and reason.

``StoreCollector`` turns the same database into Prometheus metrics at each scrape
(``prometheus_client``'s custom-collector pattern: the numbers are read from the
database, so every process agrees and a restart loses nothing). One scrape reads one
snapshot (a read transaction), so its numbers agree with each other:

=============================================  =========  ==================================
metric                                         type       meaning
=============================================  =========  ==================================
``labkit_jobs{state}``                         gauge      jobs in each state (queue depth)
``labkit_oldest_ready_age_seconds``            gauge      how long the oldest ready job has
                                                          waited
``labkit_dead_jobs{error_class}``              gauge      dead letters, by error class
``labkit_attempts_total{outcome}``             counter    finished attempts, by outcome
``labkit_attempt_duration_seconds{outcome}``   histogram  finished attempts' run time
                                                          (``finished_at - started_at``)
=============================================  =========  ==================================

No series vanishes when it reaches 0, because Prometheus cannot tell a vanished series
from a target that stopped answering, and ``sum()`` or ``rate()`` over it jumps:
``labkit_jobs`` reports every ``JobState``; the counter and the histogram report every
outcome of ``OUTCOMES``; ``labkit_dead_jobs`` reports, besides the classes of the jobs
dead now, every error class an attempt ever died of, with 0 once those jobs are redriven
or pruned (a class only a job that never ran was given, such as ``LeaseExpired`` set
by the sweep, is reported while such a job is dead). A cancelled job is not dead: it is
counted in ``labkit_jobs{state="cancelled"}``.

The counter and the histogram never go down. ``prune_finished`` deletes old attempts,
and a count of the attempts table would fall with them, which Prometheus reads as a
counter reset: ``rate()`` and ``increase()`` then count the whole remaining value as new.
So ``prune_finished`` first adds the attempts it deletes to the ``pruned_attempts`` table
(by outcome, error class and duration bucket), in the same transaction, and the metrics
are that table plus the attempts still there. The hot path writes nothing more; the
totals are in the database, so they survive a restart. ``labkit_attempts_total`` equals
the histogram's ``_count`` for the same outcome.

The histogram's buckets (``DURATION_BUCKETS``, seconds) span a quick handler to a
half-hour batch, with the default 30 s lease among them: 0.01, 0.05, 0.1, 0.5, 1, 5, 10,
30, 60, 300, 1800 and +Inf. They are written into the SQL (``duration_le`` in
``labkit/store/shared.sql``) because the pruned attempts are kept already bucketed:
changing them needs a new schema version. An attempt that ended with an expired lease
measures from its claim to the moment another worker took it over (or it was buried),
not the handler's run.

"""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from labkit import dbfile, queries
from labkit.job import JobState
from labkit.store import JobStore

SQL = queries.load("metrics.sql")

#: The operator's questions and their default parameters.
INSPECTIONS: dict[str, dict[str, float]] = {
    "stuck_running": {"older_than_s": 600.0},
    "retry_storms": {"window_s": 3600.0, "min_failures": 3},
    "oldest_pending": {"limit": 10},
    "dead_by_reason": {},
}
#: Attempt outcomes the counter always reports, so a rate() sees them from zero.
OUTCOMES = ("succeeded", "retry_wait", "dead", "lease_expired")
#: Upper bounds (seconds) of the attempt-duration histogram's buckets; the SQL fragment
#: ``duration_le`` (``labkit/store/shared.sql``) sorts attempts into the same ones.
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, math.inf)

Reader = Callable[[str, dict[str, Any]], list[dict[str, Any]]]


def _le(bound: float) -> str:
    # How prometheus_client's own Histogram writes a bound (its floatToGoString, untyped).
    return "+Inf" if bound == math.inf else repr(float(bound))


@contextmanager
def _snapshot(store: JobStore) -> Iterator[Reader]:
    """``read(name, params)`` for several queries, all on one snapshot of the database.

    A connection of its own: a scrape never reads inside a writer's open transaction.
    One read transaction: a prune that commits between two queries cannot make them
    disagree (in WAL mode a reader's snapshot is fixed by its first read).
    """
    with closing(dbfile.connect(store.path)) as conn:
        conn.row_factory = sqlite3.Row

        def read(name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
            return [dict(row) for row in conn.execute(SQL[name], params)]

        conn.execute("BEGIN")
        try:
            yield read
        finally:
            if conn.in_transaction:  # a read only ever rolls back: it wrote nothing
                conn.execute("ROLLBACK")


def _read(store: JobStore, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with _snapshot(store) as read:
        return read(name, params)


def inspect(store: JobStore, name: str, **params: float) -> list[dict[str, Any]]:
    """Run the inspection query ``name`` at the store's clock time; rows as dicts."""
    if name not in INSPECTIONS:
        raise ValueError(f"no inspection query {name!r}; the queries are {', '.join(INSPECTIONS)}")
    unknown = sorted(set(params) - set(INSPECTIONS[name]))
    if unknown:
        raise ValueError(
            f"{name} takes {', '.join(INSPECTIONS[name]) or 'no parameters'}, not {unknown[0]!r}"
        )
    return _read(store, name, {**INSPECTIONS[name], **params, "now": store.clock.now()})


class StoreCollector:
    """A ``prometheus_client`` collector that reads the job database at every scrape."""

    def __init__(self, store: JobStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        now = {"now": self.store.clock.now()}
        with _snapshot(self.store) as read:
            by_state = {r["state"]: r["n"] for r in read("jobs_by_state", now)}
            [age] = read("oldest_ready_age", now)
            dead_now = {r["error_class"]: r["n"] for r in read("dead_by_class", now)}
            seen = {r["error_class"] for r in read("dead_classes_seen", now)}
            totals = read("attempt_totals", now)
        jobs = GaugeMetricFamily("labkit_jobs", "Jobs in each state.", labels=["state"])
        for state in JobState:
            jobs.add_metric([state.value], by_state.get(state.value, 0))
        yield jobs
        yield GaugeMetricFamily(
            "labkit_oldest_ready_age_seconds",
            "Seconds the oldest ready, unclaimed job has waited (0 when none waits).",
            value=age["age_s"] or 0.0,
        )
        dead = GaugeMetricFamily(
            "labkit_dead_jobs",
            "Dead jobs (dead letters) by error class; 0 for a class jobs died of before.",
            labels=["error_class"],
        )
        for error_class in sorted(seen | set(dead_now)):
            dead.add_metric([error_class], dead_now.get(error_class, 0))
        yield dead
        yield from _attempt_families(totals)


def _attempt_families(totals: list[dict[str, Any]]) -> Iterator[Metric]:
    """The attempts counter and the duration histogram, from ``attempt_totals`` rows."""
    counts: dict[str, dict[float, int]] = defaultdict(dict)
    seconds: dict[str, float] = defaultdict(float)
    for row in totals:
        counts[row["outcome"]][float(row["le"])] = row["n"]
        seconds[row["outcome"]] += row["seconds"] or 0.0
    attempts = CounterMetricFamily(
        "labkit_attempts", "Finished attempts by outcome (never falls on prune).",
        labels=["outcome"],
    )
    durations = HistogramMetricFamily(
        "labkit_attempt_duration_seconds",
        "Seconds from an attempt's claim to its end, by outcome.",
        labels=["outcome"],
    )
    for outcome in sorted(set(OUTCOMES) | set(counts)):
        found = counts.get(outcome, {})
        # Prometheus buckets are cumulative: le="5.0" counts every attempt of 5 s or less.
        cumulative = itertools.accumulate(found.get(le, 0) for le in DURATION_BUCKETS)
        buckets = [(_le(le), n) for le, n in zip(DURATION_BUCKETS, cumulative, strict=True)]
        # The counter is the +Inf bucket: labkit_attempts_total == the histogram's _count.
        attempts.add_metric([outcome], buckets[-1][1])
        durations.add_metric([outcome], buckets, sum_value=seconds.get(outcome, 0.0))
    yield attempts
    yield durations


def registry_for(store: JobStore) -> CollectorRegistry:
    """A registry holding only this store's metrics (no process or platform metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store))
    return registry


def exposition(store: JobStore) -> tuple[str, str]:
    """The store's metrics in the Prometheus text format, and its content type."""
    return generate_latest(registry_for(store)).decode(), CONTENT_TYPE_LATEST
