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
) -> str:
    """Dead-letter one unreadable entry and ``XACK`` it in one ``MULTI``; the dead entry's id."""
    raw = json.dumps(fields, default=str, ensure_ascii=False)[:KEPT_CHARS]
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
