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

The same rules also refuse: ``find_secrets(payload)`` walks a JSON-like payload and
names every field that holds a secret (``payload.erp.note``) and what kind it is,
never its value. A field's value is scanned with the rules above (a number too, for a
card number); a field's name is judged by ``is_secret_field`` unless its value is true,
false or null (``"otp_enabled": false`` is a switch, not a code), after folding the
tricks that hide a name from a plain match (NFKC, so fullwidth letters are letters;
zero-width and other invisible characters removed; Cyrillic and Greek letters that
look Latin read as Latin). The store's enqueue refuses the same names
(``labkit.keys``), so there is one list, here.

A production system scrubs in its logging pipeline the same way (structlog processors,
Sentry's data scrubbing, Vector's redact transforms); the rule is the same: scrub
before you store.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

MAX_MESSAGE = 500
MASK = "***"

# Words that make a name a secret's name wherever they appear in it (DB_PASSWORD,
# aws_secret_access_key, githubToken), and short ones that do only as a whole part of
# the name (pass, pwd, pw: "compass" and "pwned_count" are not secrets).
_STRONG = (
    r"passw(?:or)?d|passphrase|secret|token(?!s|iz|_?count|_?type)|api[_-]?key|apikey|"
    r"private[_-]?key|access[_-]?key|signing[_-]?key|credentials?|session[_-]?id|sessionid|"
    r"cookie|bearer|jwt"
)
_WEAK = r"pass|pwd|pw|pin|cvv|cvc|auth|otp"
_NAME = (
    rf"(?:[\w.-]*(?:{_STRONG})[\w.-]*"
    rf"|(?:[\w.-]*[_.-])?(?:{_WEAK})(?:[_.-][\w.-]*)?)"
)
# A name ending like these points at a secret instead of holding it (``credential_id``,
# ``secret_name``, ``token_expires_at``): the lab's advice for payloads. A session id is
# the exception: it is the secret.
_REFERENCE = re.compile(
    r"(?i)(?<!session)(?<!session[_.-])[_.-]?(?:id|ids|ref|reference|name|arn|path|uri|url|"
    r"version|count|type|kind|scheme|method|provider|length|expires?(?:_at)?|at|age|ttl|"
    r"rotated_at|hint)$"
)


def _is_reference(name: str) -> bool:
    return bool(_REFERENCE.search(name.strip("'\"")))


_FIELD = re.compile(rf"(?i)^{_NAME}$")


def _mask_value(match: re.Match[str]) -> str:
    """``name<sep>***`` if the name is a secret's name that does not only refer to one."""
    name = match.group(1)
    if not _FIELD.match(name) or _is_reference(name):
        return match.group(0)
    return f"{name}{match.group(2)}{MASK}"


# A name before ``=``, ``:`` or ``%3D``: a run of name characters with a secret's word
# in it (a lookahead that scans the run once), then the whole run, taken possessively.
# ``({_NAME})`` here backtracked through the run once per word it held: minutes for a
# 200 KB "passwordpassword...". ``_mask_value`` then lets a reference name go.
_WORD = (
    rf"(?<![\w.-])(?=[\w.-]*?(?:{_STRONG})|(?:[\w.-]*?[_.-])?(?:{_WEAK})(?:[_.-]|(?![\w.-])))"
    r"([\w.-]++)"
)


# A value: a quoted string (spaces allowed) or a bare word.
_VALUE = r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s'\",;&}]+)"

# Each rule: the pattern, its replacement, and the kind of secret it finds (what a
# refusal says instead of the value).
_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str], str]] = [
    # A PEM private key, whole, even cut off before its END line. The mask names no
    # key type, so the vendor detectors below do not take the mask for a key.
    (
        re.compile(
            r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|$)",
            re.DOTALL,
        ),
        "[private key]",
        "a private key (PEM)",
    ),
    # scheme://user:password@host, scheme://:password@host; the password may hold '@'
    # (the last '@' before the path ends it).
    (re.compile(r"(://[^/\s:@]*:)[^\s/]*@"), rf"\1{MASK}@", "a password in a URL"),
    # Authorization: Bearer abc / "Authorization": "Token xyz" / Cookie: a=b; c=d
    (
        re.compile(
            r"(?i)((?:proxy-)?authorization|set-cookie|cookie)(['\"]?\s*[:=]\s*)"
            r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\n,}]+)"
        ),
        rf"\1\2{MASK}",
        "an Authorization or Cookie header",
    ),
    (
        re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
        rf"\1 {MASK}",
        "a Bearer or Basic credential",
    ),
    # DB_PASSWORD=..., "api_key": "...", X-Api-Key: ..., pass=...
    (
        re.compile(rf"(?i){_WORD}(['\"]?\s*(?:[:=]|=>)\s*){_VALUE}"),
        _mask_value,
        "a secret assigned to a name (password=...)",
    ),
    # password%3Dhunter2%26user%3D... (a URL-encoded form or query string)
    (
        re.compile(rf"(?i){_WORD}(%3D)(?:(?!%26)[^\s&\"'])+"),
        _mask_value,
        "a secret assigned to a name in an encoded query",
    ),
    # "the password is hunter2", "token was abc"
    (
        re.compile(
            rf"(?i)\b({_STRONG}|{_WEAK})(\s+(?:is|was|are|=|:)\s+)(?!{re.escape(MASK)})\S+"
        ),
        rf"\1\2{MASK}",
        "a secret in a sentence (the password is ...)",
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
def _vendor_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """The regexes of detect-secrets' vendor detectors, each widened to the whole token,
    with the detector's name for what it finds (``AWS Access Key``)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.ip_public import IPPublicDetector

    patterns: list[tuple[re.Pattern[str], str]] = []
    mapping: dict[str, type[Any]] = dict(get_mapping_from_secret_type_to_class())
    for secret_type, cls in mapping.items():
        if not issubclass(cls, RegexBasedDetector) or issubclass(cls, IPPublicDetector):
            continue
        denylist = cast(Iterable[re.Pattern[str]], cls.denylist)  # a tuple on each class
        for regex in denylist:
            # Some detectors match a fixed-length prefix of a token; take the rest of it.
            widened = re.compile(rf"(?:{regex.pattern})[A-Za-z0-9_+/=-]*", regex.flags)
            patterns.append((widened, f"a vendor secret ({secret_type})"))
    return tuple(patterns)


def warm_up() -> None:
    """Build the vendor patterns now (importing detect-secrets, about 0.1 s) instead of at
    the first message scrubbed: for a process that forks children which all scrub."""
    _vendor_patterns()


# The rules that read a secret from the name before it: in an id (``password:42:reset:v1``,
# what ``labkit.keys.operation_key`` makes) the name says what the operation is about.
_BY_NAME = frozenset(
    {
        "a secret assigned to a name (password=...)",
        "a secret assigned to a name in an encoded query",
        "a secret in a sentence (the password is ...)",
    }
)
assert _BY_NAME <= {kind for _, _, kind in _RULES}, "a kind in _BY_NAME has no rule"


def _scrub(text: str, skip: frozenset[str] = frozenset()) -> tuple[str, list[str]]:
    """``text`` with every rule applied, and the kinds of the rules that changed it."""
    kinds: list[str] = []
    for pattern, replacement, kind in _RULES:
        if kind not in skip:
            text, kinds = _applied(pattern.sub(replacement, text), text, kind, kinds)
    for vendor, kind in _vendor_patterns():
        text, kinds = _applied(vendor.sub(MASK, text), text, kind, kinds)
    return _applied(_CARD.sub(_card, text), text, "a payment card number", kinds)


def _applied(new: str, old: str, kind: str, kinds: list[str]) -> tuple[str, list[str]]:
    return new, (kinds + [kind] if new != old else kinds)


def redact(text: str) -> str:
    """Replace secret-looking values in ``text`` with ``***`` (see the module docstring)."""
    return _scrub(text)[0]


def secret_kinds(text: str) -> list[str]:
    """What kinds of secret ``text`` holds, by the rules ``redact`` applies; [] if none."""
    return _scrub(text)[1]


def id_secret_kinds(text: str) -> list[str]:
    """What kinds of secret an id (an Idempotency-Key, a request id) holds: a token, a key,
    a card, a URL's password, by the rules of ``redact`` except those that judge a value by
    the name before it, since an id's parts name an intent (``password:42:reset:v1``)."""
    return _scrub(text, _BY_NAME)[1]


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


# Letters of other scripts that read as Latin ones (after NFKC, which already folds
# fullwidth and mathematical letters): the Cyrillic and Greek look-alikes of Unicode's
# confusables list (UTS #39) that a name of Latin letters could be spelled with. The
# first string holds no ASCII letter, however it looks: each is Cyrillic or Greek (and
# the last two Latin ı and ɑ).
_LOOK_ALIKES = dict(
    zip(
        "аеорсухіјѕԁһԛԝкАВЕНІЈКМОРСТХЅαεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧıɑ",
        "aeopcyxijsdhqwkabehijkmopctxsaeikvoptuxabezhikmnoptyxia",
        strict=True,
    )
)
assert not any(ch.isascii() for ch in _LOOK_ALIKES), "a look-alike must not be ASCII"
_TO_LATIN = str.maketrans(_LOOK_ALIKES)


def plain_name(name: str) -> str:
    """``name`` as a reader sees it: NFKC, invisible characters gone, look-alikes Latin,
    lower case: ``"p\\u0430ss\\u200bword"`` (a Cyrillic a, a zero-width space) is
    ``"password"``."""
    text = unicodedata.normalize("NFKC", name)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return text.translate(_TO_LATIN).lower()


#: Field names a payload must never carry, whatever surrounds them in the name.
SECRET_FIELDS = frozenset(
    {"authorization", "card_number", "cardnumber", "cvv", "cvc", "ssn", "iban"}
)


def is_secret_field(name: str) -> bool:
    """Whether a payload field named ``name`` would hold a secret.

    ``db_password``, ``secret_key``, ``aws_secret_access_key``, ``x-api-key``, ``pwd``,
    ``githubToken``, ``auth``, ``otp``: the same words as the text rules, anywhere in the
    name (or, for the short ones, as a whole part of it), read through ``plain_name``. A
    name that only refers to a secret (``credential_id``, ``secret_name``,
    ``token_expires_at``) passes: that is what a payload should carry instead.
    """
    lowered = plain_name(name).replace(" ", "_")
    if lowered in SECRET_FIELDS:
        return True
    return bool(_FIELD.match(lowered)) and not _is_reference(lowered)


#: The kind a field named like a credential is refused for.
NAMED_LIKE_A_CREDENTIAL = "a field named like a credential"
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class SecretField:
    """Where a payload holds a secret (``payload.erp.note``) and what kind, never its value."""

    path: str
    kind: str


def can_hold_secret(value: Any) -> bool:
    """False for true, false and null: a field holding one of them is a switch or a gap,
    never a credential, whatever it is called (``otp_enabled``, ``auth_required``)."""
    return not (value is None or value is True or value is False)


def find_secrets(payload: Any, root: str = "payload") -> list[SecretField]:
    """Every field of a JSON-like ``payload`` whose name or value is a secret, by path.

    A name is judged by ``is_secret_field`` (unless ``can_hold_secret`` says its value
    cannot hold one); a string or number value, and a key's own text, by the rules of
    ``redact``. One finding per path (the first kind found), in
    the payload's order.
    """
    found: dict[str, str] = {}
    # (path, the field's name or None, its value): a stack, so children go on reversed.
    stack: list[tuple[str, str | None, Any]] = [(root, None, payload)]
    while stack:
        path, name, item = stack.pop()
        if name is not None and can_hold_secret(item) and is_secret_field(name):
            found.setdefault(path, NAMED_LIKE_A_CREDENTIAL)
        if isinstance(item, dict):
            for kind in [k for key in map(str, item) for k in secret_kinds(key)][:1]:
                found.setdefault(path, f"a key that holds {kind}")
            fields = [(path + _segment(str(k)), str(k), v) for k, v in item.items()]
            stack.extend(reversed(fields))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(f"{path}[{i}]", None, v) for i, v in enumerate(item)]))
        elif isinstance(item, str | int | float) and not isinstance(item, bool):
            for kind in secret_kinds(item if isinstance(item, str) else repr(item))[:1]:
                found.setdefault(path, kind)
    return [SecretField(path, kind) for path, kind in found.items()]


def _segment(key: str) -> str:
    """``.name`` for a plain name; otherwise the name in JSON, escaped and cut short."""
    if _PLAIN_KEY.fullmatch(key):
        return f".{key}"
    shown = key if len(key) <= 40 else key[:40] + "…"
    return f"[{json.dumps(shown)}]"
