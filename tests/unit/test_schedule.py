"""Scheduler: slots and keys, crontab fields, catch-up after downtime, two schedulers, pruning."""

from __future__ import annotations

import pytest

from labkit.clock import FakeClock
from labkit.patterns.schedule import Scheduler, fire_time_of, parse_field, slot_iso, slot_key
from labkit.store import JobStore

T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC, a Thursday
HOUR = 3600.0


@pytest.fixture
def clock():
    return FakeClock(T0)


@pytest.fixture
def store(tmp_path, clock):
    with JobStore(tmp_path / "jobs.db", clock=clock) as s:
        yield s


def keys(fired):
    return [(f.schedule, f.fire_iso, f.created) for f in fired]


def test_every_enqueues_each_slot_once_with_a_slot_key(store, clock):
    sched = Scheduler(store, clock)
    sched.every(HOUR, "report", {"scope": "all"}, name="hourly")
    first = sched.tick()
    assert keys(first) == [("hourly", "2026-01-01T00:00:00Z", True)]
    assert first[0].job.key == "schedule:hourly:2026-01-01T00:00:00Z"
    assert fire_time_of(first[0].job) == T0
    clock.advance(30)
    assert sched.tick() == []  # same slot: nothing new
    clock.advance(HOUR)
    assert keys(sched.tick()) == [("hourly", "2026-01-01T01:00:00Z", True)]
    assert store.counts()["pending"] == 2


def test_two_schedulers_on_one_store_enqueue_each_slot_once(tmp_path, clock):
    a_store = JobStore(tmp_path / "jobs.db", clock=clock)
    b_store = JobStore(tmp_path / "jobs.db", clock=clock)  # a second connection, as a 2nd host
    a, b = Scheduler(a_store, clock, "host-a"), Scheduler(b_store, clock, "host-b")
    for s in (a, b):
        s.every(600, "sync", {"source": "erp"}, name="sync")
    created = []
    for _ in range(24):  # two hours, both ticking every 5 minutes, in turn
        created += [f for f in a.tick() + b.tick() if f.created]
        clock.advance(300)
    slots = [f.fire_time for f in created]
    assert len(slots) == len(set(slots)) == 12  # every 10-minute slot, each exactly once
    assert {f.scheduler for f in created} == {"host-a"}  # a ticks first, b always finds it
    assert len(a_store.jobs()) == 12


def test_catch_up_policies_after_downtime(tmp_path, clock):
    results = {}
    for policy in ("skip", "once", "all"):
        store = JobStore(tmp_path / f"{policy}.db", clock=FakeClock(T0))
        sched = Scheduler(store, store.clock)
        sched.every(HOUR, "report", name="hourly", catch_up=policy)
        sched.tick()  # 00:00 runs on time
        store.clock.advance(3 * HOUR + 600)  # down until 03:10: 01:00, 02:00, 03:00 missed
        results[policy] = [f.fire_iso[11:16] for f in sched.tick()]
    assert results == {
        "skip": [],  # nothing within the 60 s grace
        "once": ["03:00"],  # one run for the most recent missed slot
        "all": ["01:00", "02:00", "03:00"],
    }


def test_skip_still_runs_a_slot_within_grace(store, clock):
    sched = Scheduler(store, clock)
    sched.every(HOUR, "report", name="hourly", catch_up="skip", grace=120)
    clock.advance(HOUR + 90)
    assert [f.fire_iso for f in sched.tick()] == ["2026-01-01T01:00:00Z"]


def test_slots_before_the_schedule_existed_are_not_caught_up(store, clock):
    clock.advance(HOUR * 5 + 1)
    sched = Scheduler(store, clock)
    sched.every(HOUR, "report", name="hourly", catch_up="all")
    assert sched.tick() == []  # 05:00 passed a second before the schedule was added
    clock.advance(HOUR)
    assert len(sched.tick()) == 1


def test_pruning_keys_too_early_lets_a_reconciliation_run_a_slot_twice(tmp_path):
    def run_all(store):
        runs = 0
        while (job := store.claim("w")) is not None:
            store.complete(job)
            runs += 1
        return runs

    outcomes = {}
    for retention in (0.0, 7 * 86_400.0):
        clock = FakeClock(T0 + 1800)
        path = tmp_path / f"keep-{int(retention)}.db"
        store = JobStore(path, clock=clock)
        fast = Scheduler(store, clock, "fast")
        slow = Scheduler(JobStore(path, clock=clock), clock, "slow")  # restarted, reconciling
        for s in (fast, slow):
            s.every(HOUR, "charge", {"plan": "monthly"}, name="billing")
        clock.set(T0 + HOUR + 5)
        assert [f.created for f in fast.tick()] == [True]  # 01:00 enqueued and run
        runs = run_all(store)
        clock.advance(10)
        pruned = store.prune_finished(older_than_s=retention)
        clock.advance(20)
        again = slow.tick()  # the slow scheduler reconciles slot 01:00
        runs += run_all(store)
        outcomes[retention] = (pruned, [f.fire_iso for f in again], runs)
    # Pruned at once: the key is gone, so slot 01:00 is enqueued again and runs twice.
    assert outcomes[0.0] == (1, ["2026-01-01T01:00:00Z"], 2)
    # Kept for a week: the slow scheduler finds the key, enqueues nothing, one run.
    assert outcomes[7 * 86_400.0] == (0, [], 1)


def test_pruned_slot_runs_twice_in_the_job_history(tmp_path, clock):
    store = JobStore(tmp_path / "jobs.db", clock=clock)
    sched = Scheduler(store, clock)
    sched.every(HOUR, "charge", name="billing")
    ran = []
    for _ in range(2):  # tick, run, prune at once, tick again within the grace window
        for _fired in sched.tick():
            job = store.claim("w")
            ran.append(fire_time_of(job))
            store.complete(job)
        store.prune_finished(older_than_s=0)
        clock.advance(10)
    assert ran == [T0, T0]  # the same slot charged twice


def test_cron_fields(store, clock):
    assert parse_field("minute", "*/15") == {0, 15, 30, 45}
    assert parse_field("hour", "9-17/4") == {9, 13, 17}
    assert parse_field("weekday", "1-5") == {1, 2, 3, 4, 5}
    assert parse_field("weekday", 7) == {0}
    assert parse_field("day", [1, 15]) == {1, 15}
    with pytest.raises(ValueError, match="minute takes 0-59"):
        parse_field("minute", 60)
    with pytest.raises(ValueError, match="not understood"):
        parse_field("hour", "noon")


def test_cron_fires_at_matching_minutes_only(store, clock):
    sched = Scheduler(store, clock)
    # 30 */6 * * 1-5: half past every sixth hour, Monday to Friday
    sched.cron("sync", name="weekday-sync", minute=30, hour="*/6", weekday="1-5", catch_up="all")
    fired = []
    for _ in range(5 * 96):  # five days from Thursday, ticking every 15 minutes
        clock.advance(900)
        fired += [f.fire_iso for f in sched.tick()]
    days = sorted({f[:10] for f in fired})
    assert days == ["2026-01-01", "2026-01-02", "2026-01-05"]  # Thu, Fri, then Mon: weekend skipped
    assert fired[:4] == [f"2026-01-01T{h:02d}:30:00Z" for h in (0, 6, 12, 18)]


def test_cron_day_or_weekday_as_crontab_does(store, clock):
    sched = Scheduler(store, clock)
    when = sched.cron("k", name="c", minute=0, hour=0, day=1, weekday=0).when
    assert when.matches(T0)  # the 1st (a Thursday)
    assert when.matches(T0 + 3 * 86_400)  # Sunday the 4th
    assert not when.matches(T0 + 86_400)  # Friday the 2nd


def test_bad_schedules_are_refused(store, clock):
    sched = Scheduler(store, clock)
    with pytest.raises(ValueError, match="catch_up"):
        sched.every(60, "k", name="x", catch_up="sometimes")
    with pytest.raises(ValueError, match="without ':'"):
        sched.every(60, "k", name="a:b")
    with pytest.raises(ValueError, match="positive"):
        sched.every(0, "k", name="z")
    sched.every(60, "k", name="x")
    with pytest.raises(ValueError, match="already exists"):
        sched.every(60, "k", name="x")


def test_slot_key_format():
    assert slot_key("nightly", T0) == "schedule:nightly:2026-01-01T00:00:00Z"
    assert slot_iso(T0 + 59) == "2026-01-01T00:00:59Z"
