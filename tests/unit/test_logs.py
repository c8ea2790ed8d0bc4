"""Structured job logs: every worker line carries job id, key, attempt and worker, redacted."""

from __future__ import annotations

import io
import logging

from labkit.clock import FakeClock
from labkit.errors import PermanentError, TransientError
from labkit.logs import FieldsByJob, JobFormatter, job_logs, parse
from labkit.retry import RetryPolicy, none
from labkit.store import JobStore
from labkit.worker import Worker


def _run(tmp_path, handlers, payloads, max_attempts=3):  # type: ignore[no-untyped-def]
    clock = FakeClock()
    store = JobStore(tmp_path / "jobs.db", clock=clock, retry=RetryPolicy(max_attempts, none()))
    for kind, key in payloads:
        store.enqueue(kind, {"n": key}, key=key, max_attempts=max_attempts)
    out = io.StringIO()
    with job_logs(out, clock=clock):
        Worker(store, handlers, name="w-log").drain()
    store.close()
    return parse(out.getvalue())


def test_each_outcome_logs_one_line_with_the_job_fields(tmp_path):
    def ok(job, ctx):
        return "done"

    def flaky(job, ctx):
        if job.attempt < 2:
            raise TransientError("503 from the ERP")
        return "done"

    def broken(job, ctx):
        raise PermanentError("400 bad invoice password=hunter2")

    lines = _run(
        tmp_path,
        {"ok": ok, "flaky": flaky, "broken": broken},
        [("ok", "k-ok"), ("flaky", "k-flaky"), ("broken", "k-broken")],
    )
    seen = [(line["key"], line["attempt"], line["outcome"]) for line in lines]
    assert sorted(seen) == sorted(
        [
            ("k-ok", 1, "succeeded"),
            ("k-flaky", 1, "retry_wait"),
            ("k-flaky", 2, "succeeded"),
            ("k-broken", 1, "dead"),
        ]
    )
    for line in lines:
        assert line["worker"] == "w-log" and isinstance(line["job_id"], int)
        assert line["logger"] == "labkit.worker"
    text = " ".join(str(line) for line in lines)
    assert "hunter2" not in text and "password=***" in text


def test_the_time_comes_from_the_clock_given(tmp_path):
    clock = FakeClock(1_767_225_600.0 + 90)
    record = logging.LogRecord("labkit.worker", logging.INFO, __file__, 1, "hello", (), None)
    record.job_id, record.key = 7, "billing:7:charge:v1"
    line = parse(JobFormatter(clock).format(record))[0]
    assert line["at"] == "2026-01-01 00:01:30"
    assert (line["job_id"], line["key"]) == (7, "billing:7:charge:v1")
    assert "attempt" not in line  # a field the record lacks is left out, not null


def test_job_logs_removes_its_handler_afterwards():
    logger = logging.getLogger("labkit")
    before = list(logger.handlers)
    with job_logs(io.StringIO()):
        assert len(logger.handlers) == len(before) + 1
    assert logger.handlers == before


def test_fields_by_job_adds_looked_up_fields_caches_answers_and_never_overrides():
    asked: list[int] = []
    answers = {7: {"request_id": "req-7"}}

    def lookup(job_id: int) -> dict:
        asked.append(job_id)
        return answers.get(job_id, {})

    fields = FieldsByJob(lookup, cache_size=2)

    def record(**extra) -> logging.LogRecord:
        rec = logging.LogRecord("labkit.worker", logging.INFO, __file__, 1, "m", (), None)
        rec.__dict__.update(extra)
        assert fields.filter(rec) is True  # a filter that adds fields drops nothing
        return rec

    assert record(job_id=7).request_id == "req-7"
    assert record(job_id=7).request_id == "req-7" and asked == [7]  # cached
    assert record(job_id=7, request_id="mine").request_id == "mine"  # the record's own wins
    assert not hasattr(record(job_id=8), "request_id")
    answers[8] = {"request_id": "req-8"}  # an empty answer was not cached: asked again
    assert record(job_id=8).request_id == "req-8" and asked == [7, 8, 8]
    assert not hasattr(record(), "request_id") and asked == [7, 8, 8]  # no job, no lookup
    record(job_id=9)
    answers[9] = {"request_id": "req-9"}
    record(job_id=9)
    assert set(fields._known) == {8, 9}  # the oldest answer left when the cache was full
