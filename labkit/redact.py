"""Keep secrets out of stored errors: what reaches the database is redacted and short.

Two layers, applied in order to every error message, dead reason and note before it
is stored or printed:

1. labkit's structural rules, for secrets identified by where they sit rather than by
   their shape: a PEM private-key block, the password of a URL (``redis://:pw@host``,
   ``user:p@ss@host``), an ``Authorization`` or ``Cookie`` header, a value assigned to
   a name that says secret (``DB_PASSWORD=``, ``aws_secret_access_key:``, ``pass=``,
   ``password%3D`` in an encoded query), "password is X", and card numbers (13-19
   digits, spaces, dots or dashes allowed, Luhn-valid).
2. The vendor-token detectors of detect-secrets (Yelp, Apache-2.0,
   https://github.com/Yelp/detect-secrets, ``detect_secrets/plugins/``): every
   ``RegexBasedDetector`` it ships (AWS access keys, Stripe, GitHub, GitLab, Slack,
   OpenAI, PyPI, npm, SendGrid, Twilio, Discord, Telegram, JWTs, ...) except the
   public-IP one, loaded from the installed package, so the list grows when the
   package is upgraded instead of being grown by hand here. Its high-entropy
   detectors are left out on purpose: they would also take sha256 digests, uuids and
   git shas, which an operator needs to read.

A production system scrubs in its logging pipeline the same way (structlog processors,
Sentry's data scrubbing, Vector's redact transforms); the rule is the same: scrub
before you store.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any, cast

MAX_MESSAGE = 500
MASK = "***"

# Words that make a name a secret's name wherever they appear in it (DB_PASSWORD,
# aws_secret_access_key, githubToken), and short ones that do only as a whole part of
# the name (pass, pwd, pw: "compass" and "pwned_count" are not secrets).
_STRONG = (
    r"passw(?:or)?d|passphrase|secret|token(?!s|iz|_?count|_?type)|api[_-]?key|apikey|"
    r"private[_-]?key|access[_-]?key|credentials?|session[_-]?id|sessionid|cookie"
)
_WEAK = r"pass|pwd|pw|pin|cvv|cvc"
_NAME = (
    rf"(?:[\w.-]*(?:{_STRONG})[\w.-]*"
    rf"|(?:[\w.-]*[_.-])?(?:{_WEAK})(?:[_.-][\w.-]*)?)"
)
# A name ending like these points at a secret instead of holding it (``credential_id``,
# ``secret_name``, ``token_expires_at``): the lab's advice for payloads. A session id is
# the exception: it is the secret.
_REFERENCE = re.compile(
    r"(?i)(?<!session)(?<!session[_.-])[_.-]?(?:id|ids|ref|reference|name|arn|path|uri|url|"
    r"version|count|type|kind|length|expires?(?:_at)?|at|age|ttl|rotated_at|hint)$"
)


def _is_reference(name: str) -> bool:
    return bool(_REFERENCE.search(name.strip("'\"")))


def _mask_value(match: re.Match[str]) -> str:
    """``name<sep>***`` unless the name only refers to a secret."""
    if _is_reference(match.group(1)):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{MASK}"


# A value: a quoted string (spaces allowed) or a bare word.
_VALUE = r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s'\",;&}]+)"

_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # A PEM private key, whole, even cut off before its END line.
    (
        re.compile(
            r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|$)",
            re.DOTALL,
        ),
        "-----BEGIN PRIVATE KEY----- *** -----END PRIVATE KEY-----",
    ),
    # scheme://user:password@host, scheme://:password@host; the password may hold '@'
    # (the last '@' before the path ends it).
    (re.compile(r"(://[^/\s:@]*:)[^\s/]*@"), rf"\1{MASK}@"),
    # Authorization: Bearer abc / "Authorization": "Token xyz" / Cookie: a=b; c=d
    (
        re.compile(
            r"(?i)((?:proxy-)?authorization|set-cookie|cookie)(['\"]?\s*[:=]\s*)"
            r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\n,}]+)"
        ),
        rf"\1\2{MASK}",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {MASK}"),
    # DB_PASSWORD=..., "api_key": "...", X-Api-Key: ..., pass=...
    (
        re.compile(rf"(?i)(?<![\w.-])({_NAME})(['\"]?\s*(?:[:=]|=>)\s*){_VALUE}"),
        _mask_value,
    ),
    # password%3Dhunter2%26user%3D... (a URL-encoded form or query string)
    (
        re.compile(rf"(?i)(?<![\w.-])({_NAME})(%3D)(?:(?!%26)[^\s&\"'])+"),
        _mask_value,
    ),
    # "the password is hunter2", "token was abc"
    (
        re.compile(
            rf"(?i)\b({_STRONG}|{_WEAK})(\s+(?:is|was|are|=|:)\s+)(?!{re.escape(MASK)})\S+"
        ),
        rf"\1\2{MASK}",
    ),
]

# 13 to 19 digits, single spaces, dots or dashes between them, not part of a longer
# number, word, uuid, version or address.
_CARD = re.compile(r"(?<![\w.+-])\d(?:[ .-]?\d){12,18}(?![\w]|[ .-]\d)")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    # Payment cards start with 2-6 (Mastercard, Amex, Visa, Mastercard, Discover) and
    # pass the Luhn check; a millisecond timestamp or an order number seldom does both.
    if digits[0] in "23456" and _luhn(digits):
        return "[card]"
    return match.group(0)


@functools.cache
def _vendor_patterns() -> tuple[re.Pattern[str], ...]:
    """The regexes of detect-secrets' vendor detectors, each widened to the whole token."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.ip_public import IPPublicDetector

    patterns: list[re.Pattern[str]] = []
    detectors: list[type[Any]] = list(get_mapping_from_secret_type_to_class().values())
    for cls in detectors:
        if not issubclass(cls, RegexBasedDetector) or issubclass(cls, IPPublicDetector):
            continue
        denylist = cast(Iterable[re.Pattern[str]], cls.denylist)  # a tuple on each class
        for regex in denylist:
            # Some detectors match a fixed-length prefix of a token; take the rest of it.
            patterns.append(
                re.compile(rf"(?:{regex.pattern})[A-Za-z0-9_+/=-]*", regex.flags)
            )
    return tuple(patterns)


def redact(text: str) -> str:
    """Replace secret-looking values in ``text`` with ``***`` (see the module docstring)."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    for vendor in _vendor_patterns():
        text = vendor.sub(MASK, text)
    return _CARD.sub(_card, text)


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


_FIELD = re.compile(rf"(?i)^{_NAME}$")
#: Field names a payload must never carry, whatever surrounds them in the name.
SECRET_FIELDS = frozenset(
    {"authorization", "card_number", "cardnumber", "cvv", "cvc", "ssn", "iban"}
)


def is_secret_field(name: str) -> bool:
    """Whether a payload field named ``name`` would hold a secret.

    ``db_password``, ``secret_key``, ``aws_secret_access_key``, ``x-api-key``, ``pwd``,
    ``githubToken``: the same words as the text rules, anywhere in the name (or, for
    the short ones, as a whole part of it). A name that only refers to a secret
    (``credential_id``, ``secret_name``, ``token_expires_at``) passes: that is what a
    payload should carry instead.
    """
    lowered = name.lower().replace(" ", "_")
    if lowered in SECRET_FIELDS:
        return True
    return bool(_FIELD.match(lowered)) and not _is_reference(lowered)
