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
database, so every process agrees and a restart loses nothing):

=====================================  =======  ========================================
metric                                 type     meaning
=====================================  =======  ========================================
``labkit_jobs{state}``                 gauge    jobs in each state (queue depth)
``labkit_oldest_ready_age_seconds``    gauge    how long the oldest ready job has waited
``labkit_dead_jobs{error_class}``      gauge    dead letters, by error class
``labkit_attempts_total{outcome}``     counter  finished attempts, by outcome
=====================================  =======  ========================================

``ops/alerts.yml`` holds example Prometheus alert rules on them. In production the same
numbers come from a queue's own exporter (celery-exporter, the RabbitMQ or Redis
exporters) or from these queries run by the database's exporter (sql_exporter).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
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


def _read(store: JobStore, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    # A connection of its own: a scrape never reads inside a writer's open transaction.
    with closing(dbfile.connect(store.path)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute(SQL[name], params)]


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
        jobs = GaugeMetricFamily("labkit_jobs", "Jobs in each state.", labels=["state"])
        found = {r["state"]: r["n"] for r in _read(self.store, "jobs_by_state", now)}
        for state in JobState:
            jobs.add_metric([state.value], found.get(state.value, 0))
        yield jobs
        [age] = _read(self.store, "oldest_ready_age", now)
        yield GaugeMetricFamily(
            "labkit_oldest_ready_age_seconds",
            "Seconds the oldest ready, unclaimed job has waited (0 when none waits).",
            value=age["age_s"] or 0.0,
        )
        dead = GaugeMetricFamily(
            "labkit_dead_jobs", "Dead jobs (dead letters) by error class.", labels=["error_class"]
        )
        for row in _read(self.store, "dead_by_class", now):
            dead.add_metric([row["error_class"]], row["n"])
        yield dead
        attempts = CounterMetricFamily(
            "labkit_attempts", "Finished attempts by outcome.", labels=["outcome"]
        )
        counted = {r["outcome"]: r["n"] for r in _read(self.store, "attempts_by_outcome", now)}
        for outcome in sorted(set(OUTCOMES) | set(counted)):
            attempts.add_metric([outcome], counted.get(outcome, 0))
        yield attempts


def registry_for(store: JobStore) -> CollectorRegistry:
    """A registry holding only this store's metrics (no process or platform metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store))
    return registry


def exposition(store: JobStore) -> tuple[str, str]:
    """The store's metrics in the Prometheus text format, and its content type."""
    return generate_latest(registry_for(store)).decode(), CONTENT_TYPE_LATEST
