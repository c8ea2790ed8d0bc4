"""Stable operation keys and payload fingerprints.

A key names an intent ("charge invoice 42, version 1"), never an attempt: it is built
from the source, the entity and the action, never from the time or a fresh uuid, so a
retry, a second cron run or a redelivery all arrive with the same key and can be
recognised. The fingerprint is a hash of the canonical JSON of the payload, so the same
key arriving with different content is caught as a conflict instead of silently
returning the wrong job.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from typing import Any

from labkit import jobargs
from labkit.errors import PayloadError
from labkit.redact import can_hold_secret, is_secret_field

#: Payloads are for ids and small facts; large data belongs elsewhere, referenced by id.
MAX_PAYLOAD_BYTES = 256 * 1024


#: One encoder for every call: ``json.dumps`` with options builds a new one each time,
#: which costs more than encoding a small payload (bench/NOTES.md, enqueue).
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(payload: Any) -> str:
    """JSON with sorted keys and no spaces: equal payloads give equal text."""
    try:
        return _CANONICAL.encode(payload)
    except (TypeError, ValueError) as exc:
        raise PayloadError(
            f"payload is not plain JSON ({exc}); pass ids, strings, numbers, lists and dicts, "
            "for example convert datetimes with .isoformat() and Decimals with str()"
        ) from None


def fingerprint(payload: Any) -> str:
    """SHA-256 of the payload's canonical JSON, as hex."""
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def check_payload(payload: Any) -> str:
    """Validate a job payload and return its canonical JSON.

    Raises ``PayloadError`` when it is not JSON, too large, nested too deep, holds
    invalid Unicode, or carries a field named like a credential (``password``,
    ``token``…): a job row is read by many people and tools, so a payload carries a
    reference to a secret, never the secret.
    """
    return payload_text(payload)[0]


def payload_text(payload: Any) -> tuple[str, str]:
    """Check a payload once and return ``(canonical JSON, fingerprint)``.

    One walk over its containers (depth, credential-like field names), one serialization,
    one encoding: the text that is stored is the text that is hashed. An enqueue pays
    for this per job, so it does each step once (bench/NOTES.md, enqueue).
    """
    secrets = _walk(payload)
    text = canonical_json(payload)
    try:
        data = text.encode()
    except UnicodeEncodeError:
        jobargs.payload(payload)  # names where the lone surrogate is, and raises
        raise PayloadError("payload holds text that UTF-8 cannot encode") from None
    if len(data) > MAX_PAYLOAD_BYTES:
        raise PayloadError(
            f"payload is {len(data)} bytes, over the {MAX_PAYLOAD_BYTES} byte limit; store the "
            "data elsewhere (a file, a table) and put its id in the payload"
        )
    if secrets:
        raise PayloadError(
            f"payload field {min(secrets)!r} looks like a credential; never put secrets in a "
            "job. Pass a reference (for example 'credential_id') and look the secret up in "
            "the handler"
        )
    return text, hashlib.sha256(data).hexdigest()


def _walk(payload: Any) -> set[str]:
    """The credential-like field names anywhere in ``payload``; raise if it nests too deep.

    A field whose value is true, false or null holds no secret whatever its name
    (``otp_enabled``), as ``labkit.redact.find_secrets`` judges it too.

    Only containers are visited: a scalar needs no check here (the encoder refuses what
    JSON cannot say, and the encoding refuses lone surrogates).
    """
    found: set[str] = set()
    stack: list[tuple[Any, int]] = [(payload, 0)]
    while stack:
        item, depth = stack.pop()
        if depth >= jobargs.MAX_DEPTH and item:
            jobargs.payload(payload)  # its members nest too deep: says where, and raises
        if isinstance(item, dict):
            for name, inner in item.items():
                if can_hold_secret(inner) and _secret_name(
                    name if type(name) is str else str(name)
                ):
                    found.add(str(name))
                if isinstance(inner, dict | list | tuple):
                    stack.append((inner, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend(
                (inner, depth + 1) for inner in item if isinstance(inner, dict | list | tuple)
            )
    return found


@functools.lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    # Payloads of one kind repeat the same few field names: judge each name once.
    return is_secret_field(name)


def operation_key(source: str, entity_id: object, action: str, version: int = 1) -> str:
    """A key from intent: ``source:entity_id:action:vN``.

    ``operation_key("billing", 42, "charge")`` is the same string in every run, every
    process and every retry. Bump ``version`` only when the operation itself is meant to
    happen again (a second, deliberate charge).
    """
    parts = [str(source), str(entity_id), str(action)]
    for name, part in zip(("source", "entity_id", "action"), parts, strict=True):
        if not part.strip():
            raise ValueError(f"operation_key: {name} is empty; a key must name the intent")
    if version < 1:
        raise ValueError("operation_key: version starts at 1")
    return ":".join(parts) + f":v{version}"


AUTO_PREFIX = "auto:"


def unique_key() -> str:
    """A key for a job that has no natural one: it can never be deduplicated."""
    return AUTO_PREFIX + uuid.uuid4().hex


def is_natural(key: str) -> bool:
    """True for a key the caller chose (from intent), False for one labkit made up."""
    return not key.startswith(AUTO_PREFIX)


def short(fp: str) -> str:
    """The first 12 hex digits of a fingerprint, for messages."""
    return fp[:12]
