"""The Python side of the job contract that every backend shares, as pure functions.

The SQL differs between SQLite (``labkit.store.sqlite``) and PostgreSQL
(``labkit.backends.postgres.store``); what a backend checks before it writes, how it turns a
failure into the next state, and what its errors say must not. Each function here
takes plain values (no connection, no clock), so both stores call the same code and a
message or a retry rule cannot drift between them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from labkit import jobargs
from labkit.errors import IdempotencyConflict, InvalidTransition, LeaseLost, PayloadError
from labkit.job import Job, JobState
from labkit.keys import is_natural, payload_text, short, unique_key
from labkit.redact import describe, sanitize
from labkit.retry import RetryPolicy


def enqueue_params(
    kind: str,
    payload: Any,
    key: str | None,
    queue: str,
    run_after: float | None,
    max_attempts: int,
    now: float,
) -> dict[str, Any]:
    """Check an enqueue's arguments and return the insert's parameters.

    Raises ValueError (or PayloadError) before anything is written, so bad input loses
    nothing and says what to fix.
    """
    jobargs.name("kind", kind)
    jobargs.name("queue", queue)
    jobargs.name("key", key, optional=True)
    jobargs.count("max_attempts", max_attempts)
    due = now if run_after is None else jobargs.timestamp("run_after", run_after)
    text, fp = payload_text(payload)
    return {
        "kind": kind,
        "queue": queue,
        "key": key if key is not None else unique_key(),
        "fingerprint": fp,
        "payload": text,
        "max_attempts": max_attempts,
        "now": now,
        "run_after": due,
    }


def enqueue_batch_rows(
    kind: str,
    payloads: Sequence[Any],
    keys: Sequence[str | None],
    queue: str,
    run_after: float | None,
    max_attempts: int,
    now: float,
) -> list[tuple[str, str, str, str, str, int, float]]:
    """A batch of one kind, checked, as insert rows: (kind, queue, key, fingerprint,
    payload text, max_attempts, run_after). What the jobs share is checked once.

    Jobs without a key share one generated stem, numbered: unique like ``enqueue``'s, and
    adjacent in the key index, so the batch writes one region of it instead of one
    random page per job (bench/NOTES.md). ``row_params`` turns a row back into the
    parameters ``check_same_operation`` reads.
    """
    jobargs.name("kind", kind)
    jobargs.name("queue", queue)
    jobargs.count("max_attempts", max_attempts)
    due = now if run_after is None else jobargs.timestamp("run_after", run_after)
    stem = unique_key()
    rows = []
    for n, (payload, key) in enumerate(zip(payloads, keys, strict=True)):
        text, fp = payload_text(payload)
        rows.append((
            kind, queue, f"{stem}.{n:06d}" if key is None else str(jobargs.name("key", key)),
            fp, text, max_attempts, due,
        ))
    return rows


def row_params(row: tuple[Any, ...]) -> dict[str, Any]:
    """The enqueue parameters of one ``enqueue_batch_rows`` row."""
    kind, queue, key, fp, text, max_attempts, due = row
    return {"kind": kind, "queue": queue, "key": key, "fingerprint": fp, "payload": text,
            "max_attempts": max_attempts, "run_after": due}


def result_json(result: Any) -> str:
    """A handler's result as the JSON text ``complete`` stores.

    Anything JSON cannot say is stored as its ``str()``; ASCII escapes keep odd text
    (NUL bytes, lone surrogates) storable on every backend.
    """
    if result is None:
        return "null"  # most handlers return nothing: skip the encoder
    try:
        return json.dumps(result, default=str)
    except (ValueError, RecursionError) as exc:
        raise PayloadError(
            f"result cannot be stored as JSON ({type(exc).__name__}: {str(exc)[:120]}); "
            "return ids and small facts from a handler"
        ) from None


def stored_result(text: str) -> Any:
    """What a handler's result reads back as, from the text ``result_json`` made."""
    return None if text == "null" else json.loads(text)


def check_same_operation(existing: Job, params: dict[str, Any]) -> None:
    """Raise IdempotencyConflict unless ``existing`` is the operation ``params`` describe."""
    if existing.fingerprint != params["fingerprint"] or existing.kind != params["kind"]:
        raise IdempotencyConflict(
            f"key {params['key']!r} already names job {existing.id} "
            f"(kind {existing.kind!r}, payload fingerprint {short(existing.fingerprint)}), "
            f"but this call sent kind {params['kind']!r} with fingerprint "
            f"{short(params['fingerprint'])}. The same key must always carry the same "
            "operation: build the key from everything that makes the operation distinct, "
            "or bump its version for a deliberate new one."
        )


def check_lease_s(lease_s: float) -> float:
    """A lease must last some time, and end: finite and positive."""
    return jobargs.seconds("lease_s", lease_s)


def check_claim_limit(limit: int) -> int:
    """A claim takes a positive whole number of jobs (SQL reads -1 as "no limit")."""
    return jobargs.count("limit", limit, maximum=100_000)


def check_redrive_limit(limit: int) -> int:
    """``redrive_where`` must be told how many jobs, so nobody redrives a queue by accident."""
    if isinstance(limit, int) and not isinstance(limit, bool) and limit < 1:
        raise ValueError("limit must be a whole number >= 1: say how many jobs to redrive")
    return jobargs.count("limit", limit)


def lease_lost(
    name: str,
    job: Job,
    state: str,
    attempt: int,
    holder: str | None,
    in_caller_tx: bool,
) -> LeaseLost:
    """The error for a fenced ``name`` refused because ``job``'s token no longer matches.

    ``state``, ``attempt`` and ``holder`` describe the job as it is now.
    """
    now_holder = holder if state == JobState.RUNNING else None
    return LeaseLost(
        f"{name} refused for job {job.id} (attempt {job.attempt}, worker "
        f"{job.lease_owner}): it is now {state} at attempt {attempt}"
        + (f", held by {now_holder}" if now_holder else "")
        + ". The lease expired and the job moved on; this worker's result is discarded"
        + (" (roll back your transaction)." if in_caller_tx else ".")
    )


def not_dead(job_id: int, state: str) -> InvalidTransition:
    """The error for redriving a job that is not dead."""
    if state == JobState.CANCELLED:
        return InvalidTransition(
            f"job {job_id} is cancelled, not dead: a cancelled job is final and is not "
            "redriven; enqueue a new job if the work must run after all"
        )
    return InvalidTransition(
        f"job {job_id} is {state}, not dead; only dead jobs can be "
        "redriven (a job in retry_wait will run again by itself)"
    )


def fail_params(
    policy: RetryPolicy,
    rng: random.Random,
    job: Job,
    error: BaseException,
    *,
    now: float,
    previous: float,
    window_start: float,
) -> dict[str, Any]:
    """Decide what a failed attempt leads to; return the fenced ``fail`` update's parameters.

    ``previous`` is the job's last backoff delay (decorrelated jitter grows from it);
    ``window_start`` is when the deadline window opened: at acceptance, or at the
    latest redrive, which grants a fresh window.
    """
    decision = policy.decide(
        error,
        job.attempt,
        rng,
        previous=previous,
        started_at=window_start,
        now=now,
        max_attempts=job.max_attempts,
        # An outcome-unknown failure is retried only for a job keyed by its intent:
        # the key is what lets the destination (or a ledger) recognise the repeat.
        idempotent=is_natural(job.key),
    )
    return {
        "state": (JobState.RETRY_WAIT if decision.retry else JobState.DEAD).value,
        "run_after": now + decision.delay if decision.retry else job.run_after,
        "delay": decision.delay,
        "error": describe(error),
        "error_class": type(error).__name__,
        "dead_reason": None if decision.retry else sanitize(f"{decision.reason}: {error}"),
    }


def snooze_params(now: float, delay_s: float, reason: str) -> dict[str, Any]:
    """The fenced ``snooze`` update's parameters: wait ``delay_s`` without an attempt spent."""
    delay = jobargs.seconds("delay_s", delay_s, allow_zero=True)
    jobargs.text("reason", reason)
    return {"run_after": now + delay, "error": sanitize(reason), "error_class": "Snoozed"}
