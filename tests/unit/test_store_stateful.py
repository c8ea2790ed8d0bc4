"""Random sequences of store operations never break the job contract's invariants.

Hypothesis drives enqueue, claim (three workers), heartbeat, complete, fail (transient or
permanent), snooze, clock advances, redrive and calls with stale lease tokens; after every
step the invariants are checked against the database and a small model of what was done.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from labkit.clock import FakeClock
from labkit.errors import IdempotencyConflict, LeaseLost, PermanentError, TransientError
from labkit.job import Job, JobState
from labkit.retry import RetryPolicy, constant
from labkit.store import JobStore

WORKERS = st.sampled_from(["w1", "w2", "w3"])
KEYS = st.sampled_from([f"key-{n}" for n in range(6)])
TERMINAL = {JobState.SUCCEEDED, JobState.DEAD}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="labkit-stateful-"))
        self.clock = FakeClock()
        self.store = JobStore(
            self.folder / "jobs.db",
            clock=self.clock,
            retry=RetryPolicy(backoff=constant(5)),
            rng=random.Random(0),
        )
        self.payloads: dict[str, int] = {}  # key -> payload value first enqueued
        self.handed_out: list[Job] = []  # every job snapshot a claim returned
        self.tokens: dict[int, set[str]] = {}  # job id -> every token ever issued
        self.seen: dict[int, Job] = {}  # job id -> state at the last check
        self.may_reset: set[int] = set()  # jobs redriven or snoozed since the last check
        self.redriven: set[int] = set()  # jobs redriven since the last check

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- rules -----------------------------------------------------------------------------

    @rule(key=KEYS, value=st.integers(0, 2), max_attempts=st.integers(1, 3))
    def enqueue(self, key: str, value: int, max_attempts: int) -> None:
        try:
            job, created = self.store.enqueue(
                "k", {"v": value}, key=key, max_attempts=max_attempts
            )
        except IdempotencyConflict:
            assert key in self.payloads and self.payloads[key] != value
            return
        assert created == (key not in self.payloads)
        self.payloads.setdefault(key, value)
        assert job.payload == {"v": self.payloads[key]}

    @rule(worker=WORKERS, lease_s=st.sampled_from([5.0, 30.0]), many=st.booleans())
    def claim(self, worker: str, lease_s: float, many: bool) -> None:
        got = (
            self.store.claim_many(worker, 2, lease_s=lease_s)
            if many
            else [j for j in [self.store.claim(worker, lease_s=lease_s)] if j is not None]
        )
        for job in got:
            assert job.state == JobState.RUNNING and job.lease_owner == worker
            assert job.attempt <= job.max_attempts
            issued = self.tokens.setdefault(job.id, set())
            assert job.lease_token not in issued, "a claim reused an old lease token"
            issued.add(job.lease_token)
            self.handed_out.append(job)

    def _finish(self, index: int, action: str) -> None:
        held = self.handed_out[index % len(self.handed_out)]
        before = self.store.get(held.id)
        stale = before.lease_token != held.lease_token
        try:
            if action == "complete":
                after = self.store.complete(held, result={"by": held.lease_owner})
                assert after.state == JobState.SUCCEEDED
            elif action == "transient":
                after = self.store.fail(held, TransientError("503"))
                assert after.state in (JobState.RETRY_WAIT, JobState.DEAD)
                assert (after.state == JobState.DEAD) == (held.attempt >= held.max_attempts)
            elif action == "permanent":
                after = self.store.fail(held, PermanentError("400"))
                assert after.state == JobState.DEAD
            elif action == "heartbeat":
                after = self.store.heartbeat(held, lease_s=30)
                assert after.state == JobState.RUNNING
            else:
                after = self.store.snooze(held, 3)
                assert after.attempt == held.attempt - 1
                self.may_reset.add(held.id)
        except LeaseLost:
            assert stale, "the current holder was refused"
            assert self.store.get(held.id) == before, "a stale token changed the row"
            return
        assert not stale, f"a stale token was accepted by {action}"

    @precondition(lambda self: self.handed_out)
    @rule(
        index=st.integers(0, 10_000),
        action=st.sampled_from(["complete", "transient", "permanent", "heartbeat", "snooze"]),
    )
    def finish(self, index: int, action: str) -> None:
        self._finish(index, action)

    @rule(seconds=st.sampled_from([1.0, 5.0, 10.0, 40.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(index=st.integers(0, 10_000))
    def redrive(self, index: int) -> None:
        dead = self.store.jobs(state=JobState.DEAD)
        if not dead:
            return
        job = dead[index % len(dead)]
        back = self.store.redrive(job.id)
        assert back.state == JobState.PENDING and back.key == job.key
        assert back.redrives == job.redrives + 1
        self.may_reset.add(job.id)
        self.redriven.add(job.id)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def nothing_is_lost_and_invariants_hold(self) -> None:
        jobs = self.store.jobs()
        assert sorted(j.key for j in jobs) == sorted(self.payloads), "a job was lost or added"
        assert sum(self.store.counts().values()) == len(self.payloads)
        for job in jobs:
            assert (job.state == JobState.RUNNING) == (job.lease_token is not None)
            holders = [h for h in self.handed_out if h.id == job.id and
                       h.lease_token == job.lease_token and job.lease_token is not None]
            assert len(holders) <= 1, "two claims hold the same lease"
            assert 0 <= job.attempt <= job.max_attempts
            before = self.seen.get(job.id)
            if before is not None:
                if job.id not in self.may_reset:
                    assert job.attempt >= before.attempt, "attempt went down"
                if job.id in self.redriven:
                    assert job.redrives > before.redrives
                if before.state in TERMINAL and job.id not in self.redriven:
                    assert job.state == before.state, f"{before.state} changed without redrive"
                assert job.redrives >= before.redrives
            self.seen[job.id] = job
        self.may_reset.clear()
        self.redriven.clear()


StoreMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    database=None,  # nothing written into the working tree
    suppress_health_check=[HealthCheck.too_slow],
)
test_store_state_machine = StoreMachine.TestCase
