"""What a dedup record made of something other than the key is made of.

The hidden checks learn the record a task writes to ``processed`` for a key. When it is
not the key itself, these helpers tell what else went into it: a part of the time it was
written (the hour of the day, the minute, the weekday: numbers a later copy of the
message no longer meets, ``clock_fields_in``) or the host it ran on (``host_in``), or a
digest of the key cut so short that two keys share it (``short_digest_of``, the key
perhaps next to a string of the module, ``affixes_in``), and find two keys that do
(``colliding_keys``). A whole digest of the key and the date it was written is
``dated``'s to find.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import math
import re
import socket
import uuid
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache, partial
from pathlib import Path

#: Digests a task may take of a key, by the name the feedback shows.
ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512", "blake2b", "blake2s")
#: A record with fewer bits of the key than this is shared by two keys among about
#: 2**(bits / 2): billions of charges for 64 bits, a few hundred for 16.
SAFE_BITS = 64
#: The widest digest the check looks for two keys of (a birthday search of about
#: 2**(bits / 2) digests: 260 000 for 36 bits, under a second).
SEARCHED_BITS = 36
#: Seconds either side of the check's time whose clock fields count (the record was
#: written moments before the check reads it).
FIELD_SLACK_S = 120


def _fields(when: datetime) -> set[int]:
    """The small numbers a clock reading shows: its hour, minute, day of the month,
    weekday (from 0 and from 1), ISO week, day of the year and month, and the hour
    and minute, or the month and day, side by side."""
    return {
        when.hour,
        when.minute,
        when.day,
        when.weekday(),
        when.isoweekday(),
        when.isocalendar()[1],
        when.timetuple().tm_yday,
        when.month,
        # 1630 (%H%M), 1205 (%m%d), 0512 (%d%m)
        when.hour * 100 + when.minute,
        when.month * 100 + when.day,
        when.day * 100 + when.month,
    }


def clock_fields_in(record: str, now: float, offsets: tuple[float, ...] = ()) -> list[str]:
    """The standalone numbers (1 to 4 digits between non-alphanumeric characters) of
    ``record`` that are a field of the time ``now`` (its hour, minute, day, weekday...,
    in UTC, the local time zone or at one of ``offsets`` seconds from UTC: the zone the
    student's code runs in, ``w49`` for a week), and the names of its month and weekday
    (``Dec``, ``Saturday``).
    ``record`` is what is left of a dedup record once the key is taken out of it."""
    fields: set[int] = set()
    for shift in (-FIELD_SLACK_S, 0, FIELD_SLACK_S):
        fields |= _fields(datetime.fromtimestamp(now + shift, UTC))
        fields |= _fields(datetime.fromtimestamp(now + shift))
        for offset in offsets:
            fields |= _fields(datetime.fromtimestamp(now + shift + offset, UTC))
    found = [
        digits
        for digits in re.findall(r"(?<![0-9A-Za-z])[wWhHdDmM]?(\d{1,4})(?![0-9A-Za-z])", record)
        if int(digits) in fields
    ]
    # Dec, December, Sat, Saturday: the month's and the weekday's names.
    names = {
        f"{when:%b}|{when:%B}|{when:%a}|{when:%A}".lower()
        for shift in (-FIELD_SLACK_S, 0, FIELD_SLACK_S)
        for when in (
            datetime.fromtimestamp(now + shift, UTC),
            datetime.fromtimestamp(now + shift),
            *(datetime.fromtimestamp(now + shift + offset, UTC) for offset in offsets),
        )
    }
    words = {word for joined in names for word in joined.split("|")}
    found += [w for w in re.findall(r"[A-Za-z]+", record) if w.lower() in words]
    return found


def host_in(record: str) -> str | None:
    """The host's name (its fully qualified name too; or its MAC address, its machine
    id), if ``record`` holds it: a copy of the message that another machine runs finds
    no record."""
    marks = {socket.gethostname(), socket.gethostname().split(".")[0]}
    # socket.getfqdn(): the name the resolver gives the host ("localhost" in a container).
    fqdn = socket.getfqdn()
    marks |= {fqdn, fqdn.split(".")[0]}
    # uuid.getnode(), the MAC address, in decimal or hex, and /etc/machine-id.
    node = uuid.getnode()
    marks |= {str(node), f"{node:x}", f"{node:012x}"}
    with contextlib.suppress(OSError):
        marks.add(Path("/etc/machine-id").read_text(encoding="utf-8").strip())
    for host in sorted(marks, key=len, reverse=True):
        if host and re.search(rf"(?<![0-9A-Za-z]){re.escape(host)}(?![0-9A-Za-z])", record):
            return host
    return None


@lru_cache(maxsize=8192)
def _hex(algorithm: str, key: str) -> str:
    return hashlib.new(algorithm, key.encode("utf-8")).hexdigest()


def _head(algorithm: str, n: int, key: str) -> str:
    return _hex(algorithm, key)[:n]


def _tail(algorithm: str, n: int, key: str) -> str:
    return _hex(algorithm, key)[-n:]


def _int_of_head(algorithm: str, m: int, key: str) -> str:
    return str(int(_hex(algorithm, key)[:m], 16))


def _int_mod(algorithm: str, m: int, key: str) -> str:
    return str(int(_hex(algorithm, key), 16) % 10**m)


def _blake(name: str, size: int, key: str) -> str:
    blake = hashlib.blake2b if name == "blake2b" else hashlib.blake2s
    return blake(key.encode("utf-8"), digest_size=size).hexdigest()


def _checksum(fn: Callable[[bytes], int], fmt: str, key: str) -> str:
    return fmt.format(fn(key.encode("utf-8")))


def _forms_of(token: str, key: str) -> list[tuple[str, float, Callable[[str], str]]]:
    """The short digest forms of ``key`` that give ``token``: ``(name, bits, form)``,
    ``form(key)`` the text a record holds."""
    found: list[tuple[str, float, Callable[[str], str]]] = []
    n = len(token)
    for name in ALGORITHMS:
        h = _hex(name, key)
        if 4 <= n < SAFE_BITS // 4 and h.startswith(token):
            found.append((f"{name}[:{n}]", 4 * n, partial(_head, name, n)))
        if 4 <= n < SAFE_BITS // 4 and h.endswith(token):
            found.append((f"{name}[-{n}:]", 4 * n, partial(_tail, name, n)))
        if not token.isdigit():
            continue
        for m in range(4, SAFE_BITS // 4):
            if str(int(h[:m], 16)) == token:
                found.append(
                    (
                        f"int({name}[:{m}], 16)",
                        4 * m,
                        partial(_int_of_head, name, m),
                    )
                )
        for m in range(max(3, n), 19):
            if str(int(h, 16) % 10**m) == token:
                found.append(
                    (
                        f"int({name}, 16) % 10**{m}",
                        m * math.log2(10),
                        partial(_int_mod, name, m),
                    )
                )
    # blake2b(key, digest_size=4).hexdigest(): a short digest of its own, not a cut one.
    if 4 <= n < SAFE_BITS // 4 and n % 2 == 0:
        for name, blake in (("blake2b", hashlib.blake2b), ("blake2s", hashlib.blake2s)):
            if blake(key.encode("utf-8"), digest_size=n // 2).hexdigest() == token:
                found.append(
                    (
                        f"{name}(digest_size={n // 2})",
                        4 * n,
                        partial(_blake, name, n // 2),
                    )
                )
    for name, fn in (("crc32", zlib.crc32), ("adler32", zlib.adler32)):
        value = fn(key.encode("utf-8"))
        for shown, text in ((name, str(value)), (name, f"{value:08x}"), (name, f"{value:x}")):
            if text == token:
                fmt = {str(value): "{}", f"{value:08x}": "{:08x}", f"{value:x}": "{:x}"}[text]
                found.append((shown, 32, partial(_checksum, fn, fmt)))
    return found


def _b64(algorithm: str, urlsafe: bool, n: int, key: str) -> str:
    raw = hashlib.new(algorithm, key.encode("utf-8")).digest()
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(raw).decode("ascii")[:n]


#: The fewest characters of a digest the search inside a record's text looks for (of a
#: crc32 in decimal, 6): a shorter run turns up in any text by chance.
INSIDE_MIN_CHARS = 4


def _longest(texts: Callable[[int], str], upto: int, haystack: str) -> int:
    """The largest n (up to ``upto``) whose ``texts(n)`` occurs in ``haystack``, 0 if none
    of ``INSIDE_MIN_CHARS`` or more does (each text holds the shorter ones in it)."""
    found = 0
    for n in range(INSIDE_MIN_CHARS, upto + 1):
        if texts(n) not in haystack:
            break
        found = n
    return found


def _cut_at(cut: Callable[[str, int, str], str], algorithm: str, key: str, n: int) -> str:
    return cut(algorithm, n, key)


def _b64_at(algorithm: str, urlsafe: bool, key: str, n: int) -> str:
    return _b64(algorithm, urlsafe, n, key)


def _forms_inside(key: str, text: str) -> list[tuple[str, float, Callable[[str], str]]]:
    """The short digest forms of ``key`` found anywhere inside ``text`` (in hex, in any
    case; in base64, whose case counts), however wrapped (``"h" + md5[:6]``, ``0x`` before a crc32,
    base64): each at its longest, so a digest of 64 bits or more is never taken for a
    shorter one cut out of it."""
    found: list[tuple[str, float, Callable[[str], str]]] = []
    lower = text.lower()
    for name in ALGORITHMS:
        h = _hex(name, key)
        for side, cut in (("head", _head), ("tail", _tail)):
            n = _longest(partial(_cut_at, cut, name, key), len(h), lower)
            if n and 4 * n < SAFE_BITS:
                shown = f"{name}[:{n}]" if side == "head" else f"{name}[-{n}:]"
                found.append((shown, 4 * n, partial(cut, name, n)))
        for urlsafe in (False, True):
            full = _b64(name, urlsafe, 200, key)
            n = _longest(partial(_b64_at, name, urlsafe, key), len(full), text)
            if n and 6 * n < SAFE_BITS:
                how = "urlsafe_b64encode" if urlsafe else "b64encode"
                found.append((f"{how}({name})[:{n}]", 6 * n, partial(_b64, name, urlsafe, n)))
    for name, fn in (("crc32", zlib.crc32), ("adler32", zlib.adler32)):
        value = fn(key.encode("utf-8"))
        for fmt in ("{:08x}", "{}"):
            if len(fmt.format(value)) >= 6 and fmt.format(value) in lower:
                found.append((name, 32, partial(_checksum, fn, fmt)))
                break
    return found


def short_digest_of(
    records: set[str], keys: list[str], affixes: tuple[str, ...] = ()
) -> tuple[str, float, Callable[[str], str]] | None:
    """The short digest form (fewer than ``SAFE_BITS`` bits) every one of ``keys`` is
    recorded under in ``records`` (the record holds it between non-alphanumeric
    characters, or anywhere in its text: ``"h" + md5[:6]``, base64), or None. The digest
    may be of the key alone or of the key after or before one of ``affixes``
    (``"charge:" + key``, the schema's name and a colon)."""
    found = _short_digest_by_token(records, keys, affixes)
    if found is not None:
        return found
    # The digest inside a word of the record, of the key alone: ``"h" + md5[:6]``,
    # ``0x`` before a crc32, the digest's bytes in base64 (whose case counts).
    text = "\n".join(sorted(records))
    for name, bits, form in _forms_inside(keys[0], text):
        if all(form(key) in text or form(key).lower() in text.lower() for key in keys[1:]):
            return name, bits, form
    return None


def _short_digest_by_token(
    records: set[str], keys: list[str], affixes: tuple[str, ...] = ()
) -> tuple[str, float, Callable[[str], str]] | None:
    """``short_digest_of`` for a digest that is a whole word of the record."""
    tokens = [set(re.findall(r"[0-9A-Za-z]+", record.lower())) for record in records]
    every = {token for found in tokens for token in found if len(token) < 20}
    wraps = [("", "")] + [(a, "") for a in affixes if a] + [("", a) for a in affixes if a]
    for before, after in wraps:
        for token in sorted(every):
            for name, bits, form in _forms_of(token, before + keys[0] + after):
                if bits >= SAFE_BITS:
                    continue

                def wrapped(
                    k: str,
                    form: Callable[[str], str] = form,
                    before: str = before,
                    after: str = after,
                ) -> str:
                    return form(before + k + after)

                if all(any(wrapped(key).lower() in found for found in tokens) for key in keys):
                    plain = not (before or after)
                    shown = name if plain else f"{name} of {before + '{key}' + after!r}"
                    return shown, bits, wrapped
    return None


def record_bits(record: str) -> float:
    """The most bits ``record`` can hold, whatever digest it is: its decimal digits (and
    a sign), its hex digits, or its letters, digits and base64 signs at 6 bits each.
    ``hashtext(key)``, a sha256 taken modulo ``2**32``: 10 digits, 33 bits."""
    text = re.sub(r"[^0-9A-Za-z+/]", "", record)
    sign = 1.0 if record.lstrip().startswith("-") else 0.0
    if re.fullmatch(r"[0-9]+", text):
        return len(text) * math.log2(10) + sign
    if re.fullmatch(r"[0-9a-f]*|[0-9A-F]*", text):
        return 4.0 * len(text)
    return 6.0 * len(text)


def digest_with(records: list[str], key: str, name: str, affixes: tuple[str, ...]) -> str | None:
    """The record in ``records`` that holds a hex digest (its first 64 bits at least) of
    ``key`` joined to one of ``affixes`` that holds ``name`` (a queue's name hidden in a
    ``sha256(f"{QUEUE}:{key}")``), or None."""
    for text in (t for a in affixes if name in a for t in (a + key, key + a)):
        for algorithm in ALGORITHMS:
            head = _hex(algorithm, text)[: SAFE_BITS // 4]
            found = next((r for r in records if head in r.lower()), None)
            if found is not None:
                return found
    return None


def affixes_in(source: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """Short strings a task may put before or after a key it digests: the string
    constants of its module (the literal parts of f-strings too), alone and next to
    ``names`` (the schema's and queue's, which the module reads from its environment)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    literals = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and len(node.value) <= 24
        and "\n" not in node.value
    } | {""}
    found = set(literals)
    for name in names:
        for literal in literals:
            found |= {name + literal, literal + name}
    return tuple(sorted(found - {""}))


def colliding_keys(
    form: Callable[[str], str], stem: str, limit: int = 1_000_000
) -> tuple[str, str] | None:
    """Two keys ``stem`` + 12 hex digits with the same ``form``: a birthday search,
    None past ``limit`` tries. The digits vary in many places, not only the last ones
    (keys of one length that differ in 4 bytes or fewer never share a crc32)."""
    seen: dict[str, str] = {}
    for n in range(limit):
        key = stem + hashlib.md5(str(n).encode()).hexdigest()[:12]
        digest = form(key)
        if digest in seen:
            return seen[digest], key
        seen[digest] = key
    return None


#: A statement that deletes rows of a table (``processed``, or a dedup table of the
#: task's own; its schema's name before it, quoted or not): a DELETE, a TRUNCATE, a DROP
#: TABLE (a module that drops its tables and creates them again as it is imported, "to
#: start clean", forgets every key at each worker's start: a deploy, a restart).
_DELETES = re.compile(
    r"\b(?:delete\s+from|truncate(?:\s+table)?|drop\s+table(?:\s+if\s+exists)?)\s+"
    r"(?:only\s+)?(?:\"?(?:\w+|\{\})\"?\.)?"
    r"\"?(?P<table>\w+|\{\})\"?(?![\w\"])",
    re.IGNORECASE,
)
#: ... unless it deletes one key's record, by a parameter (``WHERE key = %s``), from a
#: table of the task's own (a count of deliveries): one from ``processed`` is a record
#: lost all the same, whichever key the parameter holds (a loop over the oldest keys, one
#: DELETE each, is a trim of the table).
_ONE_KEY = re.compile(
    r"\bwhere\s+key\s*=\s*(?:%s|%\(\w+\)s|\$1|'?\{\}'?)\s*(?:returning\b[^;]*)?;?\s*$",
    re.IGNORECASE,
)


def deletes_in(source: str) -> list[str]:
    """The SQL texts of ``source`` (string constants, f-strings' literal parts with
    ``{}`` for each value) that delete rows (from ``processed``, or from a dedup table of
    the task's own) other than one key's by a parameter from a table other than
    ``processed``: a cleanup by age, a trim to the last keys (one DELETE per key too), a
    TRUNCATE, whether it runs after every charge, now and then at random, or in a task of
    its own."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    texts: list[str] = []
    parts_of_fstrings: set[int] = set()  # ast.walk meets an f-string before its parts
    # Docstrings and other bare strings are prose, not SQL the task runs.
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if id(node) in prose:
            continue
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                parts_of_fstrings.add(id(value))
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value)
                else:
                    parts.append("{}")
            texts.append("".join(parts))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in parts_of_fstrings
        ):
            texts.append(node.value)
    found = []
    for text in texts:
        match = _DELETES.search(text)
        if match and (
            match["table"].lower() == "processed" or not _ONE_KEY.search(text[match.end() :])
        ):
            found.append(" ".join(text[match.start() :].split()))
    return found
