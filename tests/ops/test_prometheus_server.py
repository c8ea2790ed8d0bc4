"""A real Prometheus server scrapes a job database and an alert of ``ops/alerts.yml`` fires.

``labkit.integrations.prometheus`` starts the ``prometheus`` binary (Debian's
``prometheus`` package) on a temporary TSDB. Without it these tests skip, saying how to
install it, unless ``LABKIT_REQUIRE_SERVICES=1``. Each run takes about ten seconds of wall
time: Prometheus hands its first target to the scrape loop after about five.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import yaml

from labkit import metrics
from labkit.clock import FakeClock
from labkit.errors import PermanentError
from labkit.integrations import prometheus
from labkit.integrations.celery.proctree import group_members
from labkit.store import JobStore
from labkit.worker import Worker

ROOT = Path(__file__).resolve().parents[2]
RULES = yaml.safe_load((ROOT / "ops" / "alerts.yml").read_text())
ALERT = "LabkitDeadLetterBacklog"
DEAD = "sum(labkit_dead_jobs)"

pytestmark = pytest.mark.slow


@pytest.fixture
def binary() -> str:
    try:
        found = prometheus.find_prometheus()
    except prometheus.PrometheusMissing as exc:
        pytest.fail(str(exc))
    if found is None:
        pytest.skip(prometheus.MISSING)
    return found


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore(tmp_path / "jobs.db", clock=FakeClock(), rng=random.Random(23))


def refused(job, ctx):
    raise PermanentError("ERP answered 400: no tax id")


def test_the_dead_letter_alert_goes_pending_then_fires(binary: str, store: JobStore) -> None:
    endpoint = prometheus.serve_metrics(metrics.registry_for(store))
    rules = prometheus.shortened_rule(RULES, ALERT, "3s")
    server = prometheus.Prometheus.start(endpoint.target, rules, binary=binary)
    try:
        workdir, pgid = server.workdir, server.popen.pid
        server.wait_for_target()
        server.wait_for_evaluation(ALERT)
        before = server.alert(ALERT)
        assert before.state == "inactive"
        for n in range(21):
            store.enqueue("sync_invoice", {"invoice": n})
        Worker(store, {"sync_invoice": refused}).drain()
        # The read before the jobs died is the first state: on a loaded machine the next
        # evaluation can turn the alert pending before the first poll of the watch.
        seen = prometheus.watch_alert(server, ALERT, until="firing", timeout=30, since=before)
        assert [s.state for s in seen] == ["inactive", "pending", "firing"], seen
        assert seen[-1].value == 21
        assert server.query(DEAD) == 21
    finally:
        server.stop()
        endpoint.stop()
    assert server.popen.returncode is not None
    assert group_members(pgid) == [], "a process of Prometheus's group outlived stop()"
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
    assert not workdir.exists()


def test_the_shortened_rule_keeps_the_expression() -> None:
    [group] = RULES["groups"]
    original = next(r for r in group["rules"] if r["alert"] == ALERT)
    [rule] = prometheus.shortened_rule(RULES, ALERT, "5s")["groups"][0]["rules"]
    assert rule["expr"] == original["expr"] and original["for"] == "1h" and rule["for"] == "5s"
    with pytest.raises(ValueError, match="no alert"):
        prometheus.shortened_rule(RULES, "NoSuchAlert", "5s")


def test_without_the_binary_ci_fails_instead_of_skipping(monkeypatch) -> None:
    monkeypatch.setattr(prometheus.shutil, "which", lambda name: None)
    monkeypatch.delenv("LABKIT_REQUIRE_SERVICES", raising=False)
    assert prometheus.find_prometheus() is None
    assert "apt-get install prometheus" in prometheus.MISSING
    monkeypatch.setenv("LABKIT_REQUIRE_SERVICES", "1")
    with pytest.raises(prometheus.PrometheusMissing, match="LABKIT_REQUIRE_SERVICES=1"):
        prometheus.find_prometheus()
