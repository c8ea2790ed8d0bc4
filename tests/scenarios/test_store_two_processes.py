"""Two real processes on one job file, released at the same moment.

Threads in one process share the store's lock and never race inside SQLite; two
processes do. Each child opens its own JobStore, waits for the parent's "go" on stdin
(so both start together), does its work and prints one JSON line of what it saw.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.store import JobStore

KEYS = 200

ENQUEUER = """
import json, sys
from labkit.clock import FakeClock
from labkit.store import JobStore

store = JobStore(sys.argv[1], clock=FakeClock(float(sys.argv[2])))
print("READY", flush=True)
sys.stdin.readline()
seen = []
for n in range(int(sys.argv[3])):
    job, created = store.enqueue("charge", {"invoice": n}, key=f"billing:{n}:charge:v1")
    seen.append([job.key, job.id, created])
print(json.dumps(seen), flush=True)
"""

CLAIMER = """
import json, sys
from labkit.clock import FakeClock
from labkit.store import JobStore

store = JobStore(sys.argv[1], clock=FakeClock(float(sys.argv[2])))
print("READY", flush=True)
sys.stdin.readline()
claimed = []
while (job := store.claim(sys.argv[3], lease_s=3600)) is not None:
    claimed.append([job.id, job.attempt])
    store.complete(job)
print(json.dumps(claimed), flush=True)
"""


def _run_together(script: str, args: list[list[str]]) -> list[list[list[object]]]:
    """Start one child per argument list, release them at once, return their JSON lines."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, *a],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for a in args
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "READY"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outputs = [child.communicate(timeout=120) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


def test_two_processes_enqueueing_the_same_keys_at_once_create_each_job_once(tmp_path: Path):
    # A brand-new file: both children also race to create the schema.
    path = tmp_path / "jobs.db"
    first, second = _run_together(
        ENQUEUER, [[str(path), str(LAB_EPOCH), str(KEYS)] for _ in range(2)]
    )
    for (key_a, id_a, created_a), (key_b, id_b, created_b) in zip(first, second, strict=True):
        assert key_a == key_b and id_a == id_b, "both processes must get the same job"
        assert created_a != created_b, f"{key_a}: exactly one of the two enqueues creates it"
    with JobStore(path, clock=FakeClock(LAB_EPOCH)) as store:
        assert store.counts()["pending"] == KEYS


def test_two_processes_claiming_at_once_never_take_the_same_job(tmp_path: Path):
    path = tmp_path / "jobs.db"
    with JobStore(path, clock=FakeClock(LAB_EPOCH)) as store:
        ids = {store.enqueue("charge", {"invoice": n})[0].id for n in range(KEYS)}
    claims = _run_together(
        CLAIMER, [[str(path), str(LAB_EPOCH + 1), name] for name in ("w-a", "w-b")]
    )
    claimed = [job_id for worker in claims for job_id, _ in worker]
    assert sorted(claimed) == sorted(ids), "every job claimed once, none twice, none left"
    assert all(attempt == 1 for worker in claims for _, attempt in worker)
    with JobStore(path, clock=FakeClock(LAB_EPOCH + 2)) as store:
        assert store.counts()["succeeded"] == KEYS
        assert all(len(store.attempts(job_id)) == 1 for job_id in ids)
