"""Store metrics and inspection queries, checked against the database read directly."""

from __future__ import annotations

import math
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from labkit import metrics, queries
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import PermanentError, TransientError
from labkit.retry import RetryPolicy, none
from labkit.store import JobStore
from labkit.store.contract import SCHEMA_VERSION
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


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _by_name(samples: Samples, name: str, **labels: str) -> dict[str, float]:
    """The samples called ``name`` with ``labels``, keyed by their remaining label (or "")."""
    out = {}
    for (sample, pairs), value in samples.items():
        got = dict(pairs)
        if sample == name and all(got.pop(k, None) == v for k, v in labels.items()):
            out[next(iter(got.values()), "")] = value
    return out


def _finished_attempts(store: JobStore) -> dict[str, int]:
    rows = _direct(
        store, "SELECT outcome, count(*) FROM attempts WHERE outcome IS NOT NULL GROUP BY outcome"
    )
    return dict(rows)


def test_attempts_total_never_falls_when_prune_deletes_the_rows(
    busy: tuple[JobStore, FakeClock],
) -> None:
    store, clock = busy
    before = _by_name(_samples(store), "labkit_attempts_total")
    rows_before = _finished_attempts(store)
    assert before == {o: rows_before.get(o, 0) for o in metrics.OUTCOMES}
    assert before["succeeded"] == 2
    clock.advance(10)
    assert store.prune_finished(0) == 2
    # The fault fired: the succeeded jobs' attempts are gone from the table, so a
    # COUNT(*) over it would now say 0.
    assert "succeeded" not in _finished_attempts(store)
    after = _by_name(_samples(store), "labkit_attempts_total")
    assert after == before
    # And it keeps counting from there.
    store.enqueue("invoice", {"do": "ok"}, key="inv:late")
    Worker(store, {"invoice": lambda job, ctx: "ok"}, name="w2").drain()
    assert _by_name(_samples(store), "labkit_attempts_total")["succeeded"] == 3


def test_the_kept_totals_survive_reopening_the_store(busy: tuple[JobStore, FakeClock]) -> None:
    store, clock = busy
    clock.advance(10)
    assert store.prune_finished(0) == 2
    pruned = _samples(store)
    store.close()
    again = JobStore(store.path, clock=clock)
    try:
        reopened = _samples(again)
    finally:
        again.close()
    for name in ("labkit_attempts_total", "labkit_attempt_duration_seconds_count"):
        assert _by_name(reopened, name) == _by_name(pruned, name)
        assert _by_name(reopened, name)["succeeded"] == 2


def test_an_empty_store_reports_every_series_at_zero(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "empty.db", clock=FakeClock(LAB_EPOCH))
    samples = _samples(store)
    assert _by_name(samples, "labkit_jobs") == {s: 0 for s in
                                                ("pending", "running", "succeeded",
                                                 "retry_wait", "dead", "cancelled")}
    assert _by_name(samples, "labkit_attempts_total") == dict.fromkeys(metrics.OUTCOMES, 0)
    assert _by_name(samples, "labkit_attempt_duration_seconds_count") == dict.fromkeys(
        metrics.OUTCOMES, 0
    )
    for outcome in metrics.OUTCOMES:
        buckets = _by_name(samples, "labkit_attempt_duration_seconds_bucket", outcome=outcome)
        assert len(buckets) == len(metrics.DURATION_BUCKETS) and set(buckets.values()) == {0}


def test_a_dead_class_reports_zero_after_its_jobs_are_redriven_and_pruned(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    store = JobStore(tmp_path / "jobs.db", clock=clock, retry=RetryPolicy(3, none()))
    job, _ = store.enqueue("invoice", {}, key="inv:1")
    store.fail(store.claim("w"), Unpaid("invoice 1 unpaid"))
    assert _by_name(_samples(store), "labkit_dead_jobs") == {"Unpaid": 1}
    store.redrive(job.id)
    assert _by_name(_samples(store), "labkit_dead_jobs") == {"Unpaid": 0}
    store.complete(store.claim("w"))
    clock.advance(10)
    assert store.prune_finished(0) == 1
    assert _finished_attempts(store) == {}  # the dead attempt's row is gone
    assert _by_name(_samples(store), "labkit_dead_jobs") == {"Unpaid": 0}


#: Handler run times (clock seconds) and the bucket each lands in; the last is past 1800.
DURATIONS = [(0.005, "0.01"), (0.3, "0.5"), (0.5, "0.5"), (2.0, "5.0"), (45.0, "60.0"),
             (4000.0, "+Inf")]


@pytest.fixture
def timed(tmp_path: Path) -> tuple[JobStore, FakeClock]:
    """A store whose jobs each ran for one of DURATIONS, then failed once or succeeded."""
    clock = FakeClock()
    store = JobStore(tmp_path / "timed.db", clock=clock, retry=RetryPolicy(3, none()))
    for i, (seconds, _) in enumerate(DURATIONS):
        store.enqueue("report", {"s": seconds}, key=f"rep:{i}")
        job = store.claim("w", lease_s=10_000)
        clock.advance(seconds)
        store.complete(job)
    # One attempt that failed after 7 s: another outcome, with its own buckets.
    store.enqueue("report", {"s": 7}, key="rep:fails")
    job = store.claim("w")
    clock.advance(7)
    store.fail(job, TransientError("503"))
    return store, clock


def test_duration_histogram_buckets_are_cumulative_and_count_finished_attempts(
    timed: tuple[JobStore, FakeClock],
) -> None:
    store, _ = timed
    samples = _samples(store)
    buckets = _by_name(samples, "labkit_attempt_duration_seconds_bucket", outcome="succeeded")
    bounds = [float(le) for le in buckets]
    assert bounds == sorted(bounds) and bounds == list(metrics.DURATION_BUCKETS)
    values = list(buckets.values())
    assert values == sorted(values), "cumulative buckets never fall as le grows"
    expected = [sum(1 for s, _ in DURATIONS if s <= le) for le in metrics.DURATION_BUCKETS]
    assert values == expected
    assert buckets["0.5"] == 3  # 0.005, 0.3 and 0.5 (le is "less than or equal")
    finished = _finished_attempts(store)
    count = _by_name(samples, "labkit_attempt_duration_seconds_count")
    assert count["succeeded"] == buckets["+Inf"] == finished["succeeded"] == len(DURATIONS)
    assert count["retry_wait"] == finished["retry_wait"] == 1
    assert count == _by_name(samples, "labkit_attempts_total")
    [(seconds,)] = _direct(
        store,
        "SELECT sum(finished_at - started_at) FROM attempts WHERE outcome = 'succeeded'",
    )
    total = _by_name(samples, "labkit_attempt_duration_seconds_sum")
    assert total["succeeded"] == pytest.approx(seconds) == pytest.approx(4047.805)
    failed = _by_name(samples, "labkit_attempt_duration_seconds_bucket", outcome="retry_wait")
    assert (failed["5.0"], failed["10.0"]) == (0, 1)


def test_duration_histogram_is_the_same_after_prune(timed: tuple[JobStore, FakeClock]) -> None:
    store, clock = timed
    names = ("labkit_attempt_duration_seconds_bucket", "labkit_attempt_duration_seconds_sum",
             "labkit_attempt_duration_seconds_count")
    before = {k: v for k, v in _samples(store).items() if k[0] in names}
    clock.advance(10)
    assert store.prune_finished(0) == len(DURATIONS)
    assert _finished_attempts(store) == {"retry_wait": 1}
    after = {k: v for k, v in _samples(store).items() if k[0] in names}
    assert after.keys() == before.keys()
    for key, value in before.items():
        assert after[key] == pytest.approx(value), key


def test_the_sql_buckets_are_the_documented_ones() -> None:
    fragment = queries.load(queries.SHARED)["duration_le"]
    bounds = [float(b) for b in re.findall(r"THEN '([^']+)'", fragment)]
    assert "ELSE '+Inf'" in fragment
    assert (*bounds, math.inf) == metrics.DURATION_BUCKETS
    assert ", ".join(f"{b:g}" for b in bounds) in " ".join(metrics.__doc__.split())


def test_a_version_1_database_gains_the_totals_and_its_counts_stay(
    busy: tuple[JobStore, FakeClock],
) -> None:
    store, clock = busy
    before = _by_name(_samples(store), "labkit_attempts_total")
    store.close()
    # What labkit wrote before the kept totals: no pruned_attempts, version 1.
    with closing(sqlite3.connect(store.path)) as conn:
        conn.execute("DROP TABLE pruned_attempts")
        conn.execute("UPDATE labkit_meta SET value = '1' WHERE name = 'schema_version'")
        conn.commit()
    upgraded = JobStore(store.path, clock=clock)
    try:
        [(version,)] = _direct(upgraded, "SELECT value FROM labkit_meta")
        assert int(version) == SCHEMA_VERSION == 3
        assert _by_name(_samples(upgraded), "labkit_attempts_total") == before
        clock.advance(10)
        assert upgraded.prune_finished(0) == 2
        assert _by_name(_samples(upgraded), "labkit_attempts_total") == before
    finally:
        upgraded.close()
