"""Two scheduler processes tick the same store at the same time: each slot becomes one job.

Both children replay the same 2 hours of simulated time (FakeClock, a tick a minute)
against one SQLite file, concurrently, so their enqueues really race.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.schedule import fire_time_of
from labkit.store import JobStore

CHILD = """
import sys
from labkit.clock import FakeClock
from labkit.schedule import Scheduler
from labkit.store import JobStore

path, name, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
clock = FakeClock(start)
scheduler = Scheduler(JobStore(path, clock=clock), clock, name)
scheduler.every(300, "sync", {"source": "erp"}, name="erp-sync", since=start)
created = 0
for _ in range(120):
    created += sum(f.created for f in scheduler.tick())
    clock.advance(60)
print(created, flush=True)
"""


def test_two_scheduler_processes_enqueue_each_slot_once(tmp_path):
    path = tmp_path / "jobs.db"
    JobStore(path, clock=FakeClock(LAB_EPOCH)).close()  # create the schema once
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), name, repr(LAB_EPOCH)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name in ("host-a", "host-b")
    ]
    created = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        created.append(int(out))
    jobs = JobStore(path, clock=FakeClock(LAB_EPOCH)).jobs()
    slots = Counter(fire_time_of(job) for job in jobs)
    assert len(slots) == 24  # 2 hours of 5-minute slots
    assert set(slots.values()) == {1}  # no slot twice
    assert sum(created) == 24  # the two processes together created each slot once
    print("created per process:", created)
