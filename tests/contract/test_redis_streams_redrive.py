"""A redrive on Redis Streams is one step: a crash or a second operator cannot split it.

The crash is injected after each Redis command the redrive sends in turn (a ``MULTI``
block counts as one): the client raises ``SimulatedCrash`` once the server has run the
command, so nothing after it is sent, which is what a process killed there leaves. Each
time the store must hold either the old state (dead, its dead letter kept, nothing to
claim) or the new one (pending, the dead letter gone, claimable once), never an entry
that no claim takes. On a real Redis, under a fresh key prefix per run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from labkit.clock import FakeClock
from labkit.errors import InvalidTransition, PermanentError, SimulatedCrash
from labkit.job import JobState

pytest.importorskip("redis")

from labkit.backends.redis.store import StreamJobStore  # noqa: E402

pytestmark = pytest.mark.services


@pytest.fixture
def open_store(redis_url: str, clock: FakeClock) -> Iterator[Any]:
    opened: list[StreamJobStore] = []

    def make() -> StreamJobStore:
        opened.append(StreamJobStore(redis_url, f"test:{uuid.uuid4().hex[:12]}", clock=clock))
        return opened[-1]

    yield make
    for s in opened:
        s.delete_all()
        s.close()


def _dead_job(store: StreamJobStore) -> int:
    store.enqueue("charge", {"n": 1}, key="k1")
    job = store.claim("w1")
    assert job is not None
    assert store.fail(job, PermanentError("bug")).state == JobState.DEAD
    return job.id


def _crash_after(monkeypatch: pytest.MonkeyPatch, client: Any, n: int) -> list[str]:
    """Make ``client`` raise SimulatedCrash right after its ``n``-th command ran."""
    sent: list[str] = []

    def sent_one(name: str) -> None:
        sent.append(name)
        if len(sent) == n:
            raise SimulatedCrash(f"crashed after command {n} ({name})")

    real_execute = client.execute_command

    def execute(*args: Any, **options: Any) -> Any:
        result = real_execute(*args, **options)
        sent_one(str(args[0]))
        return result

    real_pipeline = client.pipeline

    def pipeline(*args: Any, **options: Any) -> Any:
        pipe = real_pipeline(*args, **options)
        real_run = pipe.execute

        def run(*a: Any, **o: Any) -> Any:
            result = real_run(*a, **o)
            sent_one("MULTI")
            return result

        pipe.execute = run
        return pipe

    monkeypatch.setattr(client, "execute_command", execute)
    monkeypatch.setattr(client, "pipeline", pipeline)
    return sent


def _which_state(store: StreamJobStore, job_id: int) -> str:
    """'old' or 'new' if the store holds one of them whole; else what is wrong."""
    job = store.get(job_id)
    letters = store.q.dead_letters()
    claimed = store.claim("after-the-crash")
    if job.state == JobState.DEAD and len(letters) == 1 and claimed is None:
        return "old"
    if job.state == JobState.PENDING and not letters and claimed is not None:
        assert (claimed.id, claimed.attempt) == (job_id, 1)
        assert store.claim("after-the-crash") is None, "claimable twice"
        return "new"
    return (f"neither: job {job.state}, {len(letters)} dead letters, claim got "
            f"{claimed and claimed.key}, stream entries {store.q.length()}")  # fmt: skip


def test_a_crash_after_any_command_of_a_redrive_leaves_the_old_or_the_new_state(
    open_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashes: list[tuple[int, str, str]] = []
    for n in range(1, 50):
        store = open_store()
        job_id = _dead_job(store)
        with monkeypatch.context() as patch:
            sent = _crash_after(patch, store.r, n)
            try:
                store.redrive(job_id, note="fixed")
            except SimulatedCrash:
                pass
            else:
                break  # the redrive sent fewer than n commands: every gap was tried
        crashes.append((n, sent[-1], _which_state(store, job_id)))
    assert crashes, "no crash was ever injected"
    assert all(state in ("old", "new") for *_, state in crashes), crashes
    assert crashes[-1][2] == "new", "the last command of a redrive must be the one that moves it"


def test_a_redrive_of_a_job_another_operator_already_redrove_changes_nothing(
    open_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    job_id = _dead_job(store)
    stale = store.get(job_id)  # operator 2 reads the job as dead ...
    store.redrive(job_id)  # ... operator 1 redrives it first
    monkeypatch.setattr(store, "get", lambda _id: stale)
    with pytest.raises(InvalidTransition, match="not dead"):
        store.redrive(job_id)
    monkeypatch.undo()
    entries = store.r.xrange(store.q.stream)
    assert sum(1 for _id, f in entries if "redriven_from" in f) == 1, entries
    job = store.get(job_id)
    assert (job.state, job.redrives) == (JobState.PENDING, 1)
