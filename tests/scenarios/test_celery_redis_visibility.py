"""Redis: a killed worker's unacked task comes back after visibility_timeout AND a restore.

kombu restores unacked messages older than ``visibility_timeout`` when a worker starts
consuming, and then every ``unacked_restore_interval`` × ``unacked_restore_throttle``
seconds (10 × 10 by default) in each live worker. These tests watch both, from the
world's records and the ``unacked`` hash.
"""

from __future__ import annotations

import pytest

from labkit.clock import SystemClock
from labkit.integrations.celery import harness as celery_harness
from labkit.integrations.celery.run import CeleryRun

pytestmark = [pytest.mark.services, pytest.mark.slow]


def _strand(run: CeleryRun, key: str) -> object:
    """Two workers; the one that takes ``key`` is killed whole after the charge."""
    pair = (run.worker("a"), run.worker("b"))
    run.pause("after_effect")
    run.send("lab.charge_late_reject", "ack_late", key, "cus_1", 100)
    run.wait_paused()
    victim = run.holder(*pair)
    victim.kill_main()
    run.unpause()
    assert run.unacked() == 1 and run.count(key) == 1
    return pair[1] if victim is pair[0] else pair[0]


def test_with_default_sweeps_a_live_worker_leaves_it_stranded_a_new_one_restores(
    redis_url, tmp_path
):
    with CeleryRun(redis_url, tmp_path, transport_options={"visibility_timeout": 1}) as run:
        _strand(run, "k1")
        SystemClock().sleep(4)  # well past the visibility timeout
        assert run.count("k1") == 1 and run.unacked() == 1  # stranded: no sweep yet
        run.worker("c")  # its start-up restore finds the message old enough
        run.wait_effects("k1", 2, timeout=30)
        first, second = run.effects("k1")
        assert second.at - first.at >= 4
        assert run.unacked() == 0
    assert celery_harness.leftovers(run.config.tag) == []


def test_a_short_restore_interval_lets_the_live_worker_restore_it(redis_url, tmp_path):
    options = {
        "visibility_timeout": 1,
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }
    with CeleryRun(redis_url, tmp_path, transport_options=options) as run:
        _strand(run, "k2")
        run.wait_effects("k2", 2, timeout=20)  # no new worker: the survivor's sweep did it
        first, second = run.effects("k2")
        assert second.at - first.at >= 1
    assert celery_harness.leftovers(run.config.tag) == []


def test_a_countdown_longer_than_the_visibility_timeout_runs_twice(redis_url, tmp_path):
    # The countdown must outlast worker b's start: b restores the held message only while
    # worker a still holds it unacked, and a acks it once it ran at its ETA. A 5 s
    # countdown lost that race in CI, where a worker took over 3 s to start.
    countdown = 15
    clock = SystemClock()
    with CeleryRun(redis_url, tmp_path, transport_options={"visibility_timeout": 1}) as run:
        run.worker("a")
        sent = clock.now()
        run.send("lab.charge_late_reject", "ack_late", "eta", "cus_1", 100, countdown=countdown)
        run.wait_unacked(1)  # held by worker a until its ETA
        clock.sleep(1.5)  # older than the visibility timeout
        run.worker("b")
        started = clock.now() - sent
        assert started < countdown - 1, f"worker b took until {started:.1f}s, past the ETA"
        assert run.count("eta") == 0 and run.unacked() >= 1
        run.wait_effects("eta", 2, timeout=60)  # a bound for a loaded machine (CI saw 30 s pass)
        clock.sleep(1)
        assert run.count("eta") == 2
    assert celery_harness.leftovers(run.config.tag) == []
