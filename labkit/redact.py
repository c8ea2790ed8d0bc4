"""Keep secrets out of stored errors: what reaches the database is redacted and short.

A production system would lean on its logging library's filters (structlog processors,
Sentry's data scrubbing); the rule is the same: scrub before you store.
"""

from __future__ import annotations

import re

MAX_MESSAGE = 500

_SECRET_NAME = (
    r"(?:password|passwd|pwd|secret|client_secret|token|access_token|refresh_token|"
    r"api[_-]?key|apikey|private_key)"
)
# A value: a quoted string (spaces allowed) or a bare word.
_VALUE = r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s'\",;&}]+)"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Authorization: Bearer abc / "Authorization": "Token xyz" / Proxy-Authorization=Basic ..
    # (the whole header value goes, whatever its scheme)
    (
        re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*)(?:\"[^\"\n]*\"|'[^'\n]*'|[^\n,;}]+)"),
        r"\1***",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"), r"\1 ***"),
    # password=..., token: ..., "api_key": "...", DB_PASSWORD=..., github_token=...
    (
        re.compile(rf"(?i)(\b[\w-]*?{_SECRET_NAME}['\"]?\s*[:=]\s*){_VALUE}"),
        r"\1***",
    ),
    # scheme://user:password@host
    (re.compile(r"(://[^/\s:@]+:)[^@\s/]+@"), r"\1***@"),
    # card-like digit runs
    (re.compile(r"\b(?:\d[ -]?){13,19}\b"), "[card]"),
]

#: Field names a payload must never carry; pass a reference to a secret store instead.
SECRET_FIELDS = frozenset(
    {
        "password",
        "passwd",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "refresh_token",
        "api_key",
        "apikey",
        "authorization",
        "private_key",
        "card_number",
        "cvv",
    }
)


def redact(text: str) -> str:
    """Replace secret-looking values in ``text`` with ``***``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def sanitize(text: str, limit: int = MAX_MESSAGE) -> str:
    """Redact ``text`` and cut it to ``limit`` characters, marking the cut."""
    # NUL bytes and lone surrogates are storable in SQLite and refused by PostgreSQL.
    text = text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    text = redact(" ".join(text.split()))
    if len(text) > limit:
        text = text[: limit - 12] + " …[cut]"
    return text


def describe(error: BaseException, limit: int = MAX_MESSAGE) -> str:
    """``ErrorClass: message``, sanitized, for storage."""
    name, message = type(error).__name__, str(error)
    return sanitize(f"{name}: {message}" if message else name, limit)
