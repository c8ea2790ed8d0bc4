"""Two scheduler processes tick the same store at the same time: each slot becomes one job.

Both children replay the same simulated time (FakeClock, a tick a minute) against one
SQLite file, concurrently (released together after both are ready), so their enqueues
really race: on time, and after a downtime where both catch up at once.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.patterns.schedule import Scheduler, fire_time_of, slot_iso
from labkit.store import JobStore

HOUR = 3600.0

CHILD = """
import sys
from labkit.clock import FakeClock
from labkit.patterns.schedule import Scheduler
from labkit.store import JobStore

path, name, start, since, every, policy, ticks = sys.argv[1:8]
clock = FakeClock(float(start))
scheduler = Scheduler(JobStore(path, clock=clock), clock, name)
scheduler.every(float(every), "sync", {"source": "erp"}, name="erp-sync", since=float(since),
                catch_up=policy)
print("ready", flush=True)
sys.stdin.readline()
created = 0
for _ in range(int(ticks)):
    created += sum(f.created for f in scheduler.tick())
    clock.advance(60)
print(created, flush=True)
"""


def race(path, start, since, every, policy, ticks):
    """Run two scheduler processes released together; return what each created."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), name]
            + [repr(start), repr(since), repr(every), policy, str(ticks)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("host-a", "host-b")
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    created = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        created.append(int(out))
    print("created per process:", created)
    return created


def slots_in(path):
    jobs = JobStore(path, clock=FakeClock(LAB_EPOCH)).jobs()
    return Counter(slot_iso(fire_time_of(job))[11:16] for job in jobs)


def test_two_scheduler_processes_enqueue_each_slot_once(tmp_path):
    path = tmp_path / "jobs.db"
    JobStore(path, clock=FakeClock(LAB_EPOCH)).close()  # create the schema once
    created = race(path, LAB_EPOCH, LAB_EPOCH, 300, "once", ticks=120)
    slots = slots_in(path)
    assert len(slots) == 24  # 2 hours of 5-minute slots
    assert set(slots.values()) == {1}  # no slot twice
    assert sum(created) == 24  # the two processes together created each slot once


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("all", ["00:00", "01:00", "02:00", "03:00"]),  # every missed slot, once
        ("once", ["00:00", "03:00"]),  # one run for the latest missed slot, once
        ("skip", ["00:00"]),  # missed slots dropped by both
    ],
)
def test_two_processes_catching_up_after_downtime_enqueue_each_slot_once(
    tmp_path, policy, expected
):
    path = tmp_path / "jobs.db"
    clock = FakeClock(LAB_EPOCH)  # 2026-01-01 00:00 UTC
    before = Scheduler(JobStore(path, clock=clock), clock, "before-the-outage")
    before.every(HOUR, "sync", {"source": "erp"}, name="erp-sync", catch_up=policy)
    assert [f.created for f in before.tick()] == [True]  # 00:00 ran on time
    # Every scheduler was down from 00:00 to 03:10; both come back at once and tick
    # for 20 simulated minutes (no new hourly slot in that window).
    created = race(path, LAB_EPOCH + 3 * HOUR + 600, LAB_EPOCH, HOUR, policy, ticks=20)
    slots = slots_in(path)
    assert sorted(slots) == expected
    assert set(slots.values()) == {1}
    assert sum(created) == len(expected) - 1
