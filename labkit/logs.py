"""Log lines that carry the job: one JSON object per line with job id, key, attempt, worker.

A line like ``job 42 failed`` cannot be searched for the operation it was about; the
cron article's minimal kit asks for logs that carry the job's key, so that "what
happened to invoice 42" is one query. labkit's worker passes the fields with stdlib
``logging``'s ``extra=``; ``JobFormatter`` writes them as JSON next to the message::

    {"at": "2026-01-01 00:00:05", "level": "INFO", "event": "job 3 attempt 2 -> dead: ...",
     "job_id": 3, "key": "report:7:v1", "attempt": 2, "worker": "w1", "outcome": "dead"}

Messages are redacted (``labkit.redact``) on the way out, so a secret that reached an
exception text does not reach the log files. The time comes from an injected clock
when one is given (a lesson prints the same lines on every run), else from the record.

``FieldsByJob`` adds what a worker cannot know from the job alone, looked up by the
record's ``job_id``: the id of the HTTP request that created the job
(``labkit.integrations.http.correlation``), so one search finds the request and every
attempt.

In production: structlog or python-json-logger do this, and OpenTelemetry's logging
instrumentation adds trace ids the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from labkit.clock import Clock, isoformat
from labkit.redact import redact

#: The fields a job's log line may carry, in the order they are written.
JOB_FIELDS = ("job_id", "key", "attempt", "worker", "outcome", "error_class", "request_id")


def job_fields(job: Any, worker: str, outcome: str | None = None) -> dict[str, Any]:
    """The ``extra=`` for a log call about ``job`` (any object with id, key, attempt)."""
    fields: dict[str, Any] = {
        "job_id": job.id,
        "key": job.key,
        "attempt": job.attempt,
        "worker": worker,
    }
    if outcome is not None:
        fields["outcome"] = outcome
    return fields


class JobFormatter(logging.Formatter):
    """Format a record as one JSON line with the job fields it carries (see the module)."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__()
        self.clock = clock

    def format(self, record: logging.LogRecord) -> str:
        at = self.clock.now() if self.clock is not None else record.created
        line: dict[str, Any] = {
            "at": isoformat(at),
            "level": record.levelname,
            "logger": record.name,
            "event": redact(record.getMessage()),
        }
        for name in JOB_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = redact(value) if isinstance(value, str) else value
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False)


class FieldsByJob(logging.Filter):
    """Add the fields ``lookup(job_id)`` returns to each record that carries a ``job_id``.

    A field the record already has wins. Answers are cached per job (a job's request id
    never changes); an empty answer is asked again next time, since a lookup that
    failed (a busy database) says nothing about the job.
    """

    def __init__(self, lookup: Callable[[int], Mapping[str, Any]], cache_size: int = 1024) -> None:
        super().__init__()
        self.lookup = lookup
        self.cache_size = cache_size
        self._known: dict[int, dict[str, Any]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        job_id = getattr(record, "job_id", None)
        if job_id is None:
            return True
        fields = self._known.get(job_id)
        if fields is None:
            fields = dict(self.lookup(job_id))
            if fields:
                if len(self._known) >= self.cache_size:
                    self._known.pop(next(iter(self._known)))
                self._known[job_id] = fields
        for name, value in fields.items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


@contextmanager
def job_logs(
    stream: IO[str], clock: Clock | None = None, logger: str = "labkit", level: int = logging.INFO
) -> Iterator[logging.Handler]:
    """Send ``logger``'s records to ``stream`` as JSON lines while the block runs."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JobFormatter(clock))
    target = logging.getLogger(logger)
    previous = target.level
    target.addHandler(handler)
    target.setLevel(level)
    try:
        yield handler
    finally:
        target.removeHandler(handler)
        target.setLevel(previous)


def parse(lines: str) -> list[dict[str, Any]]:
    """The JSON log lines in ``lines`` as dicts (other lines skipped): for queries on logs."""
    found = []
    for line in lines.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return found
