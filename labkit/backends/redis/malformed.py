"""Entries a consumer cannot read: set aside one at a time, so the rest of the stream runs.

A stream holds whatever anyone ``XADD``s to it: an entry without its ``key`` field, one
whose job record was never written (a producer that skipped ``enqueue``), or a job whose
payload is not JSON (a hand edit, a producer of another version). Raising on such an
entry stops every worker at the same entry, for good: it stays first in the pending
list, and every later claim meets it again. ``quarantine`` moves it to the dead-letter
stream with the reason and the raw fields, ``XACK``s it and marks its job record dead
when there is one, all in one ``MULTI``, so it is either still pending or set aside,
never lost; the claim then goes on to the next entry.

In production the same rule holds for any consumer: a message that cannot be decoded
goes to a dead-letter queue (RabbitMQ's dead-letter exchanges, SQS's redrive policy),
it does not stop the queue.
"""

from __future__ import annotations

import json
import math
from typing import Any

from labkit.job import JobState
from labkit.redact import sanitize

#: At most this much of a malformed entry's raw fields is kept with its dead letter.
KEPT_CHARS = 2_000


def decode_payload(text: str | None) -> tuple[Any, str | None]:
    """A job record's payload and what is wrong with it (None when it is JSON)."""
    if text is None:
        return None, "the job record has no payload field"
    try:
        return json.loads(text), None
    except (TypeError, ValueError) as exc:
        return text, f"its payload is not JSON ({type(exc).__name__}: {str(exc)[:80]})"


#: Fields of a job record read as numbers (by the claim script and by ``Job``).
_NUMBERS = {
    "id": int, "attempt": int, "max_attempts": int,
    "run_after": float, "created_at": float, "updated_at": float,
}  # fmt: skip


def record_problem(record: dict[str, str]) -> str | None:
    """What makes a job record unreadable (None when it can be claimed and read): its
    payload not JSON, or a number or the state that is not one, as a hand edit or a
    producer of another version leaves it."""
    problem = decode_payload(record.get("payload"))[1]
    if problem is not None:
        return problem
    for name, kind in _NUMBERS.items():
        try:
            value = kind(record.get(name) or "")
        except ValueError:
            return f"its {name} field is not a number"
        if not math.isfinite(value):
            return f"its {name} field is not a finite number"
    if record.get("state") not in {state.value for state in JobState}:
        return "its state field is not a job state"
    return None


def readable_numbers(record: dict[str, str], now: float) -> dict[str, str]:
    """Stand-ins for a set-aside record's unreadable numbers (0 for counts, ``now`` for
    times), so it can still be listed and counted as dead; its dead letter keeps the
    values as they were."""
    fixed = {}
    for name, kind in _NUMBERS.items():
        if name == "id":
            continue  # the id is how the record is found: it is never rewritten
        try:
            ok = math.isfinite(kind(record.get(name) or ""))
        except ValueError:
            ok = False
        if not ok:
            fixed[name] = "0" if kind is int else repr(now)
    return fixed


def quarantine(
    r: Any,
    *,
    stream: str,
    group: str,
    dead: str,
    entry_id: str,
    fields: dict[str, Any],
    reason: str,
    now: float,
    job_hash: str | None = None,
    record: dict[str, str] | None = None,
) -> str:
    """Dead-letter one unreadable entry and ``XACK`` it in one ``MULTI``; the dead entry's id."""
    kept = fields if record is None else {**fields, "record": record}
    raw = json.dumps(kept, default=str, ensure_ascii=False)[:KEPT_CHARS]
    letter = {
        "key": str(fields.get("key", "")),
        "kind": "",
        "payload": sanitize(raw, KEPT_CHARS),
        "origin": entry_id,
        "reason": sanitize(f"malformed entry: {reason}; set aside so the stream goes on"),
        "deliveries": "0",
    }
    with r.pipeline(transaction=True) as pipe:
        pipe.xadd(dead, letter)
        pipe.xack(stream, group, entry_id)
        if job_hash is not None:
            pipe.hset(
                job_hash,
                mapping={
                    **({} if record is None else readable_numbers(record, now)),
                    "state": JobState.DEAD.value,
                    "dead_reason": letter["reason"],
                    "error_class": "MalformedEntry",
                    "lease_owner": "",
                    "lease_token": "",
                    "lease_until": "",
                    "updated_at": repr(now),
                },
            )
        added = pipe.execute()[0]
    return str(added)
