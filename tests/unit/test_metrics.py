"""Store metrics and inspection queries, checked against the database read directly."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from labkit import metrics
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import PermanentError, TransientError
from labkit.retry import RetryPolicy, none
from labkit.store import JobStore
from labkit.worker import Worker

ALERTS = Path(__file__).resolve().parents[2] / "ops" / "alerts.yml"


class Unpaid(PermanentError):
    """The invoice is not payable."""


@pytest.fixture
def busy(tmp_path: Path) -> tuple[JobStore, FakeClock]:
    """A store with work of every kind: waiting, failing, dead, stuck, done."""
    clock = FakeClock()
    store = JobStore(tmp_path / "jobs.db", clock=clock, retry=RetryPolicy(3, none()))

    def handler(job, ctx):  # type: ignore[no-untyped-def]
        behaviour = job.payload["do"]
        if behaviour == "transient":
            raise TransientError("503 from the ERP")
        if behaviour == "permanent":
            raise PermanentError("400 invalid invoice")
        if behaviour == "unpaid":
            raise Unpaid("invoice 9 unpaid")
        return "ok"

    plan = ["ok", "ok", "transient", "transient", "permanent", "permanent", "unpaid"]
    for i, behaviour in enumerate(plan):
        store.enqueue("invoice", {"do": behaviour}, key=f"inv:{i}", max_attempts=3)
    Worker(store, {"invoice": handler}, name="w1").drain()
    # One job a worker took and never finished (it died): its lease runs out.
    store.enqueue("report", {"month": 1}, key="rep:stuck")
    assert store.claim("w-gone", lease_s=30.0) is not None
    # Two jobs that wait, accepted 10 s apart.
    store.enqueue("report", {"month": 2}, key="rep:a")
    clock.advance(10)
    store.enqueue("report", {"month": 3}, key="rep:b")
    clock.advance(90)
    return store, clock


def _samples(store: JobStore) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text, content_type = metrics.exposition(store)
    assert content_type.startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _direct(store: JobStore, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(store.path)) as conn:
        return conn.execute(sql).fetchall()


def test_queue_depth_by_state_matches_the_jobs_table(busy: tuple[JobStore, FakeClock]) -> None:
    store, _ = busy
    samples = _samples(store)
    table = dict(_direct(store, "SELECT state, count(*) FROM jobs GROUP BY state"))
    for state in ("pending", "running", "succeeded", "retry_wait", "dead"):
        assert samples[("labkit_jobs", (("state", state),))] == table.get(state, 0)
    assert table["dead"] == 5 and table["running"] == 1


def test_oldest_ready_age_is_the_longest_wait(busy: tuple[JobStore, FakeClock]) -> None:
    store, clock = busy
    assert _samples(store)[("labkit_oldest_ready_age_seconds", ())] == 100.0
    clock.advance(5)
    assert _samples(store)[("labkit_oldest_ready_age_seconds", ())] == 105.0


def test_dead_jobs_by_error_class_and_attempts_by_outcome(busy: tuple[JobStore, FakeClock]) -> None:
    store, _ = busy
    samples = _samples(store)
    assert samples[("labkit_dead_jobs", (("error_class", "PermanentError"),))] == 2
    assert samples[("labkit_dead_jobs", (("error_class", "TransientError"),))] == 2
    assert samples[("labkit_dead_jobs", (("error_class", "Unpaid"),))] == 1
    outcomes = dict(
        _direct(
            store,
            "SELECT outcome, count(*) FROM attempts WHERE outcome IS NOT NULL GROUP BY outcome",
        )
    )
    for outcome in ("succeeded", "retry_wait", "dead"):
        assert samples[("labkit_attempts_total", (("outcome", outcome),))] == outcomes[outcome]
    # A counter present from zero, so a rate() over it works before the first one.
    assert samples[("labkit_attempts_total", (("outcome", "lease_expired"),))] == 0


def test_stuck_running_finds_the_expired_lease_only_once_it_expired(
    busy: tuple[JobStore, FakeClock],
) -> None:
    store, clock = busy
    [stuck] = metrics.inspect(store, "stuck_running")
    assert (stuck["key"], stuck["worker"], stuck["lease_expired"]) == ("rep:stuck", "w-gone", 1)
    assert stuck["running_s"] == 100.0
    # A long run whose lease is alive is listed only past older_than_s.
    store.enqueue("report", {"month": 4}, key="rep:long", queue="slow")
    assert store.claim("w-slow", queues=("slow",), lease_s=10_000) is not None
    clock.advance(50)
    keys = [r["key"] for r in metrics.inspect(store, "stuck_running", older_than_s=600)]
    assert "rep:long" not in keys
    clock.advance(600)
    keys = [r["key"] for r in metrics.inspect(store, "stuck_running", older_than_s=600)]
    assert "rep:long" in keys


def test_retry_storms_count_failed_attempts_in_the_window(
    busy: tuple[JobStore, FakeClock],
) -> None:
    store, clock = busy
    [storm] = metrics.inspect(store, "retry_storms", window_s=3600, min_failures=3)
    # 2 transient jobs x 3 attempts + 3 permanent deaths = 9 failed attempts.
    assert (storm["kind"], storm["failed_attempts"], storm["jobs"]) == ("invoice", 9, 5)
    assert metrics.inspect(store, "retry_storms", window_s=3600, min_failures=10) == []
    clock.advance(3600)
    assert metrics.inspect(store, "retry_storms", window_s=3600, min_failures=1) == []


def test_oldest_pending_and_dead_by_reason(busy: tuple[JobStore, FakeClock]) -> None:
    store, _ = busy
    waiting = metrics.inspect(store, "oldest_pending")
    assert [(r["key"], r["waiting_s"]) for r in waiting] == [("rep:a", 100.0), ("rep:b", 90.0)]
    dead = metrics.inspect(store, "dead_by_reason")
    assert sum(r["jobs"] for r in dead) == 5
    assert dead[0]["jobs"] == 2  # most frequent first
    assert {r["error_class"] for r in dead} == {"PermanentError", "TransientError", "Unpaid"}


def test_inspect_names_its_queries_and_parameters(busy: tuple[JobStore, FakeClock]) -> None:
    store, _ = busy
    with pytest.raises(ValueError, match="stuck_running"):
        metrics.inspect(store, "stuck")
    with pytest.raises(ValueError, match="window_s"):
        metrics.inspect(store, "retry_storms", windows=3)


def test_alert_rules_use_only_metrics_labkit_exports(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "empty.db", clock=FakeClock(LAB_EPOCH))
    exported = {
        family.name for family in text_string_to_metric_families(metrics.exposition(store)[0])
    }
    exported |= {name + "_total" for name in exported}
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    assert len(rules) >= 4
    for rule in rules:
        assert rule["alert"].startswith("Labkit") and rule["annotations"]["summary"]
        used = set(__import__("re").findall(r"\blabkit_[a-z_]+", rule["expr"]))
        assert used and used <= exported, (rule["alert"], used - exported)
