"""Real worker processes on one job database: concurrency, kill -9, restarts, poison jobs.

The effect of a job is a row in an ``effects`` table of the same database, inserted in
the transaction that completes the job (the ledger), so "exactly once" is counted from
what happened. Tests marked "mutant" remove one safety rule (the ledger, the crash-loop
cap) and assert that the same scenario then shows the failure: proof that the suite
would notice if the rule went away.
"""

from __future__ import annotations

import random

import pytest
from procs import effect_counts, finish, killed, log_counts, new_db, replay, spawn

from labkit.clock import SystemClock
from labkit.job import JobState

pytestmark = pytest.mark.slow


def _enqueue(store, n: int, kind: str = "effect") -> list[int]:
    return [store.enqueue(kind, {"n": i}, key=f"job-{i}")[0].id for i in range(n)]


def test_four_worker_processes_run_every_job_exactly_once_with_the_ledger(tmp_path, sizes):
    db = tmp_path / "jobs.db"
    with new_db(db) as store:
        ids = _enqueue(store, sizes.jobs)
    go = tmp_path / "go"
    workers = [
        # A short pace between claim and completion is a job's own work: without it one
        # process can drain 400 jobs before the others' busy handlers wake up.
        spawn({"db": str(db), "name": f"w{k}", "mode": "ledger", "pace_s": 0.002,
               "ready": str(tmp_path / f"ready-{k}"), "go": str(go)})
        for k in range(4)
    ]
    clock = SystemClock()
    while len(list(tmp_path.glob("ready-*"))) < 4:  # all four open before any claims
        assert all(p.poll() is None for p in workers), "a worker died while starting"
        clock.sleep(0.01)
    go.touch()
    reports = [finish(p, timeout=600) for p in workers]

    # No SQLITE_BUSY (or anything else) escaped as an error in any worker.
    assert [r["errors"] for r in reports] == [[], [], [], []]
    # The four really shared the work (otherwise this proves nothing about concurrency).
    assert sum(r["done"] > 0 for r in reports) >= 2, reports
    assert sum(r["done"] for r in reports) == len(ids)
    with new_db(db) as store:
        assert effect_counts(store) == {i: 1 for i in ids}
        assert store.counts()["succeeded"] == len(ids)
        # No double claim: one attempt per job, each opened by exactly one lease.
        per_job = dict(store.conn.execute("SELECT job_id, count(*) FROM attempts GROUP BY job_id"))
        assert per_job == {i: 1 for i in ids}
        assert {j.attempt for j in store.jobs(limit=len(ids))} == {1}


def test_random_sigkill_with_restarts_loses_nothing_and_duplicates_nothing(tmp_path, sizes, rng):
    seed = rng.randrange(2**32)
    print(f"seed {seed}; {replay('random_sigkill', seed)}")
    chooser = random.Random(seed)
    clock = SystemClock()
    db = tmp_path / "jobs.db"
    with new_db(db) as store:
        ids = _enqueue(store, sizes.soak_jobs)
    spec = {"db": str(db), "mode": "ledger", "lease_s": 0.5, "pace_s": 0.005}
    live = {k: spawn({**spec, "name": f"w{k}"}) for k in range(2)}
    fired, progress = 0, 0
    deadline = clock.now() + 300
    with new_db(db) as watch:
        for kill in range(sizes.kills):
            # Let a random amount of work happen, then kill a random worker wherever it is.
            target = progress + chooser.randint(1, 20)
            while (progress := sum(effect_counts(watch).values())) < target:
                assert progress < len(ids), f"all jobs done after only {kill} kills: more jobs"
                assert clock.now() < deadline, "no progress: the workers are stuck"
                clock.sleep(0.005)
            victim = chooser.choice(sorted(live))
            live[victim].kill()
            fired += killed(live[victim])
            live[victim] = spawn({**spec, "name": f"w{victim}-{kill}"})
        reports = [finish(p, timeout=600) for p in live.values()]
        assert fired == sizes.kills, "every planned SIGKILL must have hit a live worker"
        assert [r["errors"] for r in reports] == [[], []]
        assert watch.counts()["succeeded"] == len(ids)
        assert effect_counts(watch) == {i: 1 for i in ids}


@pytest.mark.parametrize("kill_at", ["before_effect", "after_effect"])
def test_a_worker_killed_around_its_effect_loses_and_duplicates_nothing_with_the_ledger(
    tmp_path, kill_at
):
    db = tmp_path / "jobs.db"
    with new_db(db) as store:
        ids = _enqueue(store, 10)
    spec = {"db": str(db), "mode": "ledger", "lease_s": 0.3}
    assert killed(spawn({**spec, "name": "victim", "kill_at": kill_at, "kill_after": 3}))
    assert finish(spawn({**spec, "name": "rescuer"}))["errors"] == []
    with new_db(db) as store:
        assert effect_counts(store) == {i: 1 for i in ids}
        # The killed attempt is in the history: the job really was taken over.
        assert store.jobs(limit=20)[2].attempt == 2


def test_mutant_without_the_ledger_a_kill_after_the_effect_duplicates_it(tmp_path):
    """Same kill as above, but the effect commits apart from the completion: a duplicate."""
    db, log = tmp_path / "jobs.db", tmp_path / "effects.log"
    with new_db(db) as store:
        ids = _enqueue(store, 10)
    spec = {"db": str(db), "mode": "log", "log": str(log), "lease_s": 0.3}
    assert killed(spawn({**spec, "name": "victim", "kill_at": "after_effect", "kill_after": 3}))
    assert finish(spawn({**spec, "name": "rescuer"}))["errors"] == []
    assert log_counts(log) == {i: (2 if i == ids[2] else 1) for i in ids}


def _run_poison(tmp_path, mutant: str, max_spawns: int) -> tuple[object, int, int, dict]:
    db, log = tmp_path / "jobs.db", tmp_path / "effects.log"
    with new_db(db) as store:
        poison = store.enqueue("poison", {}, key="poison", max_attempts=3)[0]
        ids = _enqueue(store, 5)
    spec = {"db": str(db), "mode": "worker", "log": str(log), "lease_s": 0.3, "mutant": mutant}
    kills = spawns = 0
    while spawns < max_spawns:
        proc = spawn({**spec, "name": f"w{spawns}"})
        spawns += 1
        if killed(proc):
            kills += 1
        else:
            assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
            with new_db(db) as store:
                if store.get(poison.id).state == JobState.DEAD:
                    break
    with new_db(db) as store:
        return store.get(poison.id), kills, spawns, {"log": log_counts(log), "ids": ids}


def test_a_poison_job_that_kills_its_worker_every_time_ends_dead_after_max_attempts(tmp_path):
    job, kills, spawns, seen = _run_poison(tmp_path, mutant="", max_spawns=8)
    assert kills == 3, "the poison job must have killed exactly max_attempts worker processes"
    assert job.state == JobState.DEAD and job.attempt == 3
    assert "lease expired on the last attempt" in (job.dead_reason or "")
    assert seen["log"] == {i: 1 for i in seen["ids"]}  # the other jobs were not held hostage


def test_mutant_without_the_crash_loop_cap_the_poison_job_keeps_killing_workers(tmp_path):
    job, kills, spawns, _ = _run_poison(tmp_path, mutant="no_cap", max_spawns=5)
    assert kills == spawns == 5
    assert job.state == JobState.RUNNING and job.attempt == 5 > job.max_attempts
