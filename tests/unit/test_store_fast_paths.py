"""The shortcuts the batched paths take (bench/NOTES.md) must give what the plain code gives.

``Job.from_rows`` against ``Job.from_row``, ``keys.payload_text`` against the checks it
folds together, ``enqueue_batch_rows`` against ``enqueue_params``, the split history
triggers against the attempts a lease taken over must close.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from labkit import jobargs
from labkit.clock import FakeClock
from labkit.errors import PayloadError
from labkit.job import Job, JobState
from labkit.keys import canonical_json, check_payload, fingerprint, payload_text
from labkit.store import JobStore
from labkit.store.rules import enqueue_batch_rows, enqueue_params, row_params

PAYLOADS = [
    {"i": 1},
    {"b": [1, 2, {"x": "é"}], "a": 1.5, "c": None, "d": True},
    [],
    "text",
    {"nested": {"deeper": [{"k": "v"}]}},
]


@pytest.fixture
def store(tmp_path):
    with JobStore(tmp_path / "jobs.db", clock=FakeClock()) as s:
        yield s


def test_from_rows_builds_the_jobs_from_row_builds(store):
    store.enqueue_many("k", PAYLOADS)
    claimed = store.claim_many("w", 3)
    store.complete(claimed[0], {"ok": [1, 2]})
    store.fail(claimed[1], RuntimeError("boom"))
    rows = store.conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
    one_by_one = [Job.from_row(r) for r in rows]
    together = Job.from_rows(rows)
    assert [j.__dict__ for j in together] == [j.__dict__ for j in one_by_one]
    assert {j.state for j in together} >= {JobState.SUCCEEDED, JobState.RUNNING,
                                           JobState.PENDING}
    assert together[0].result == {"ok": [1, 2]}
    # dict rows (the PostgreSQL driver's) and rows with other columns take the same road.
    dicts = [dict(zip(r.keys(), r, strict=True)) for r in rows]
    assert Job.from_rows(dicts) == one_by_one
    partial = [{k: v for k, v in d.items() if k != "last_delay"} for d in dicts]
    assert Job.from_rows(partial) == one_by_one
    assert Job.from_rows([]) == []


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_text_is_the_checked_text_and_its_fingerprint(payload):
    text, fp = payload_text(payload)
    assert text == check_payload(payload) == canonical_json(payload)
    assert fp == fingerprint(payload) == hashlib.sha256(text.encode()).hexdigest()


def _nest(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        (_nest(jobargs.MAX_DEPTH + 1, 1), "nests deeper than 64"),  # a scalar one too deep
        (_nest(jobargs.MAX_DEPTH + 5, {}), "nests deeper than 64"),
        ({"a": _nest(jobargs.MAX_DEPTH, {"x": 1})}, "nests deeper than 64"),
        ({"bad": "\ud800"}, "payload['bad'] holds a lone surrogate"),
        ({"\udc00": 1}, "payload key holds a lone surrogate"),
        ([{"ok": 1}, ("\ud800",)], "payload[1][0] holds a lone surrogate"),
        ({"password": "x"}, "field 'password' looks like a credential"),
        ({"inner": [{"api_key": "x"}]}, "field 'api_key' looks like a credential"),
        ({"inner": ({"token": "x"},)}, "field 'token' looks like a credential"),
        ({"when": object()}, "not plain JSON"),
        ({"n": float("nan")}, "not plain JSON"),
        ({"blob": "x" * (256 * 1024)}, "over the 262144 byte limit"),
    ],
)
def test_payload_text_refuses_with_a_message_that_says_what_and_where(payload, said):
    with pytest.raises(PayloadError, match=re.escape(said)):
        payload_text(payload)


def test_payload_just_within_the_depth_limit_is_accepted():
    text, _ = payload_text(_nest(jobargs.MAX_DEPTH, 1))
    assert text.count("[") == jobargs.MAX_DEPTH


def test_batch_rows_carry_what_enqueue_params_would_insert():
    rows = enqueue_batch_rows("k", PAYLOADS, ["a", None, "c", None, "e"], "q", 5.0, 3, 1.0)
    for row, payload in zip(rows, PAYLOADS, strict=True):
        single = enqueue_params("k", payload, row[2], "q", 5.0, 3, 1.0)
        assert row_params(row) == {k: v for k, v in single.items() if k != "now"}
    # Generated keys share a stem and are numbered: unique, and adjacent in the index.
    stems = {rows[1][2].rsplit(".", 1)[0], rows[3][2].rsplit(".", 1)[0]}
    assert len(stems) == 1 and rows[1][2] != rows[3][2]


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        ({"kind": ""}, "kind"),
        ({"queue": "a\x00b"}, "queue"),
        ({"max_attempts": True}, "max_attempts"),
        ({"run_after": float("inf")}, "run_after"),
        ({"keys": ["ok", 7]}, "key"),
        ({"keys": ["ok", "\ud800"]}, "key"),
    ],
)
def test_batch_arguments_are_checked_once_for_the_batch_and_name_the_argument(args, wanted):
    call = {"kind": "k", "payloads": [{"i": 1}, {"i": 2}], "keys": [None, None],
            "queue": "q", "run_after": None, "max_attempts": 5, "now": 1.0, **args}
    with pytest.raises(ValueError, match=wanted):
        enqueue_batch_rows(**call)


def test_a_lease_taken_from_a_dead_worker_closes_its_attempt(store):
    clock = store.clock
    (job_id, _), = store.enqueue_many("k", [{"i": 1}])
    first = store.claim("dead-worker", lease_s=5)
    assert first is not None and first.id == job_id
    clock.advance(6)
    second = store.claim("live-worker", lease_s=5)
    assert second is not None and second.lease_token != first.lease_token
    store.complete(second)
    history = [(a.worker, a.outcome, a.finished_at is not None) for a in store.attempts(job_id)]
    assert history == [("dead-worker", "lease_expired", True), ("live-worker", "succeeded", True)]
    # Exactly one attempt is ever open while a job runs, none once it is done.
    open_now = store.conn.execute(
        "SELECT count(*) FROM attempts WHERE finished_at IS NULL").fetchone()[0]
    assert open_now == 0
