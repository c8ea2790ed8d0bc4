"""A dedup record that hides the time it was written inside a digest of the key.

A task may record a key as ``sha256(f"{key}:{date.today()}")``, an md5 of the hour and
the key, or a ``uuid5`` of the key and the day since the epoch: a whole digest, which
``records.clock_fields_in`` cannot read a date in, yet a copy of the message that comes
on another day (an hour later) finds no record of the key and charges again.
``dated_digest_in`` tries the dates and hours of any zone around the check's time, next
to the key with any separator, alone or inside the module's f-strings
(``templates_in``), and says which digest of which text the record is.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

from labkit.grading.exercises.ex08.records import FIELD_SLACK_S

#: Dates a task may put next to a key before it digests the two
#: (``sha256(f"{key}:{date.today()}")``), as ``strftime`` formats...
DATED_FORMATS = (
    "%Y-%m-%d",
    "%Y%m%d",
    "%Y/%m/%d",
    "%d/%m/%Y",
    "%m/%d/%Y",
    "%d.%m.%Y",
    "%d-%m-%Y",
    "%y%m%d",
    "%y-%m-%d",
    "%x",
    "%Y-%j",
    "%Y%j",
    "%Y-%m",
    "%Y%m",
    "%Y-W%W",
    "%Y-%W",
    "%G-W%V",
    "%a %b %d %Y",
    "%d %b %Y",
    "%b %Y",
)
#: ... hours...
HOURED_FORMATS = ("%Y-%m-%d %H", "%Y-%m-%dT%H", "%Y%m%d%H", "%Y-%m-%d %H:00", "%Y-%m-%dT%H:00")
#: ... and minutes (in UTC and the check's own zone only: a record of the minute differs
#: between two deliveries a minute apart, which the check sees anyway).
MINUTED_FORMATS = ("%Y-%m-%d %H:%M", "%Y%m%d%H%M", "%Y-%m-%dT%H:%M")
#: The offsets from UTC a machine's local time may have, in steps of 15 minutes: the
#: student's code may run in another zone than the check (``labkit grade`` draws one per
#: run, and the notebook's PostgreSQL may have its own), and a local date or hour of any
#: zone is one of UTC's at one of these offsets.
ZONE_OFFSETS_S = tuple(range(-12 * 3600, 14 * 3600 + 1, 900))
#: ... and counts since the epoch in these units (hours, days, weeks; 10 minutes to 12
#: hours), ``int(time.time() // 86400)``.
DATED_UNITS_S = (60, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 604800)
#: What may stand between the key and the time.
DATED_SEPARATORS = ("", ":", "-", "_", "|", "/", " ", "@", ".", "#", ",", "+", ";", "~", "=")
#: Hex digests by their length, each by the name the feedback shows.
_HEX_DIGESTS: dict[int, tuple[str, ...]] = {
    32: ("md5",),
    40: ("sha1",),
    56: ("sha224", "sha3_224"),
    64: ("sha256", "blake2s", "sha3_256"),
    96: ("sha384", "sha3_384"),
    128: ("sha512", "blake2b", "sha3_512"),
}
_HEX_TOKEN = re.compile(
    r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{8}-?[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{4}-?"
    r"[0-9A-Fa-f]{4}-?[0-9A-Fa-f]{12}|[0-9A-Fa-f]{40,128})(?![0-9A-Fa-f])"
)
_UUID_SPACES = (uuid.NAMESPACE_DNS, uuid.NAMESPACE_URL, uuid.NAMESPACE_OID, uuid.NAMESPACE_X500)


def _dated_texts(now: float, slack_s: float = FIELD_SLACK_S) -> set[str]:
    """The texts of the time ``now`` (give or take ``slack_s``) a task may salt a key's
    digest with: dates and hours in ``DATED_FORMATS`` and ``HOURED_FORMATS`` in any time
    zone, minutes in UTC and the local zone, ``str()`` of a date, its ``toordinal()``, its
    ISO calendar, and counts since the epoch."""
    from datetime import date

    texts: set[str] = set()
    days: set[date] = set()
    for shift in (-slack_s, 0, slack_s):
        for offset in ZONE_OFFSETS_S:
            when = datetime.fromtimestamp(now + shift + offset, UTC)
            days.add(date(when.year, when.month, when.day))
            texts |= {when.strftime(fmt) for fmt in HOURED_FORMATS}
        for when in (datetime.fromtimestamp(now + shift, UTC), datetime.fromtimestamp(now + shift)):
            texts |= {when.strftime(fmt) for fmt in MINUTED_FORMATS}
        for unit in DATED_UNITS_S:
            texts.add(str(int((now + shift) // unit)))
    for day in days:
        texts |= {day.strftime(fmt) for fmt in DATED_FORMATS}
        texts |= {str(day.toordinal()), str(day.isocalendar()), str(tuple(day.isocalendar()))}
    return texts


def _digests_of(text: str, length: int) -> list[tuple[str, str]]:
    """``(name, hex)`` of each digest of ``text`` whose hex has ``length`` characters."""
    data = text.encode("utf-8")
    return [(name, hashlib.new(name, data).hexdigest()) for name in _HEX_DIGESTS.get(length, ())]


#: Each standard namespace's digest so far, for ``uuid3`` (md5) and ``uuid5`` (sha1).
_UUID_BASES = tuple(
    (how, hashlib.new(algorithm, space.bytes))
    for how, algorithm in (("uuid3", "md5"), ("uuid5", "sha1"))
    for space in _UUID_SPACES
)


def _uuid_of(text: str, uuids: set[str]) -> str | None:
    """``uuid3(ns, text)`` or ``uuid5(ns, text)`` (as ``"uuid5"``) if one of ``uuids``
    (32 hex digits, no dashes) is either, for any of the four standard namespaces."""
    data = text.encode("utf-8")
    for how, base in _UUID_BASES:
        made = base.copy()
        made.update(data)
        digest = made.hexdigest()
        # A UUID is the digest's first 32 hex digits, but for the version digit (the
        # 13th) and the variant's two bits (in the 17th).
        for u in uuids:
            if digest[:12] == u[:12] and digest[13:16] == u[13:16] and digest[17:32] == u[17:32]:
                return how
    return None


def templates_in(source: str) -> tuple[str, ...]:
    """The f-strings of ``source`` with two values or more, as ``str.format`` templates
    (``"charge:{}:{}"`` for ``f"charge:{key}:{date.today()}"``), and its short string
    constants that end (or start) with a separator (``"charge:"``), as ``"charge:{}"``:
    where a task puts a key and the date before it digests them."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    found: set[str] = set()
    parts_of_fstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                parts_of_fstrings.add(id(value))
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value.replace("{", "{{").replace("}", "}}"))
                else:
                    parts.append("{}")
            if parts.count("{}") >= 2 and len("".join(parts)) <= 64:
                found.add("".join(parts))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in parts_of_fstrings
            and 1 < len(node.value) <= 16
            and "\n" not in node.value
        ):
            text = node.value.replace("{", "{{").replace("}", "}}")
            if not text[-1].isalnum():
                found.add(text + "{}")
            if not text[0].isalnum():
                found.add("{}" + text)
    return tuple(sorted(found))


def _preimages(
    key: str, times: set[str], templates: tuple[str, ...], names: tuple[str, ...]
) -> Iterator[str]:
    """Texts a task may digest a key and a time into: the two side by side with a
    separator between, or in one of ``templates`` (``names`` in any other of its slots)."""
    for when in times:
        for sep in DATED_SEPARATORS:
            yield key + sep + when
            yield when + sep + key
    for template in templates:
        slots = template.count("{}") - template.count("{{}}")
        if slots == 1:
            # A prefix or suffix of the module's: around the key and the time.
            for when in times:
                for sep in DATED_SEPARATORS[:6]:
                    yield template.format(key + sep + when)
                    yield template.format(when + sep + key)
            continue
        others = names or ("",)
        for k in range(slots):
            for t in range(slots):
                if k == t:
                    continue
                for other in others:
                    for when in times:
                        fill = [other] * slots
                        fill[k], fill[t] = key, when
                        with contextlib.suppress(IndexError, ValueError, KeyError):
                            yield template.format(*fill)


def dated_digest_in(
    record: str, key: str, source: str, names: tuple[str, ...], now: float
) -> str | None:
    """How ``record`` (a dedup record that is not ``key``) digests ``key`` together with
    the time it was written (``sha256(f"{key}:{date.today()}")``, an md5 of the hour and
    the key, a ``uuid5`` of the key and the day since the epoch), shown as
    ``sha256('inv-1:2026-12-05')``; None if it does not. The key and the time may sit in
    an f-string of the module's ``source`` (``f"charge:{key}:{day}"``, ``names`` in its
    other slots: the run's schema and queue) or after a prefix of it (``"charge:" +
    key``). A copy of the message that comes on another day (an hour later) finds no
    record of the key and charges again: the digest hides the date that
    ``clock_fields_in`` reads in a plain record."""
    return salted_digest_in(record, key, source, names, _dated_texts(now))


def salted_digest_in(
    record: str, key: str, source: str, names: tuple[str, ...], salts: set[str]
) -> str | None:
    """How ``record`` digests ``key`` together with one of ``salts`` (side by side with a
    separator, or in the module's f-strings, as ``dated_digest_in`` tries the dates), as
    ``sha256('inv-1:2026-12-05')``; None if it does not."""
    tokens = [t.lower() for t in _HEX_TOKEN.findall(record)]
    if not tokens or not salts:
        return None
    hexes = {t.replace("-", "") if len(t) in (32, 36) else t for t in tokens}
    # A UUID of version 3 or 5 (a digest of a name), with dashes or without (``.hex``).
    uuids = {h for h in hexes if len(h) == 32 and h[12] in "35" and h[16] in "89ab"}
    lengths = {len(h) for h in hexes}
    for text in _preimages(key, salts, templates_in(source), names):
        for length in lengths:
            for name, digest in _digests_of(text, length):
                if digest in hexes:
                    return f"{name}({text!r})"
        if uuids and (how := _uuid_of(text, uuids)):
            return f"{how}({text!r})"
    return None
