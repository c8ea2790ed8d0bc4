"""Hidden checks for exercise 1: run only by ``labkit grade``, never shipped to students."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from labkit.grading.checks import Checks, Namespace, StudentRaised, expect
from labkit.grading.exercises.ex01.built_ids import naive, number, shown, shown_id
from labkit.grading.exercises.ex01.edges import (
    LONG_PATIENCE,
    MANY_ITEMS,
    MOST_ITEMS,
    past_every_cut,
)
from labkit.grading.exercises.ex01.intents import (
    INTENTS,
    PAYLOADS,
    SAMPLE_CALLS,
    _said,
    answered,
    built_key_pairs,
)
from labkit.grading.exercises.helpers import holds_for, raised_text
from labkit.lang import _

CHECKS = Checks("ex01", hidden=True)


@CHECKS.add(
    1,
    "the contract names the exact canonical form: sort_keys=True, "
    "separators=(',', ':'), ensure_ascii=False, then SHA-256 hex",
)
def fingerprint_matches_the_contract(ns: Namespace) -> None:
    payload = {"name": "Conceição", "tags": ["ção", 1, 2.5, None, True], "n": {"b": 1, "a": 2}}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    want = hashlib.sha256(text.encode()).hexdigest()
    got = ns.payload_fingerprint(payload)
    expect(
        got == want,
        _("{fingerprint}... (canonical JSON with non-ASCII kept)").format(fingerprint=want[:16]),
        f"{str(got)[:16]}...",
    )

    def exact(any_payload: dict[str, Any]) -> None:
        text = json.dumps(any_payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        want = hashlib.sha256(text.encode()).hexdigest()
        got = ns.payload_fingerprint(any_payload)
        expect(
            got == want,
            _(
                "{fingerprint}... for {payload} (the canonical JSON of the whole payload, "
                "None, blanks and all)"
            ).format(fingerprint=want[:16], payload=repr(any_payload)),
            f"{str(got)[:16]}...",
        )

    # What a retry resends unchanged, ids and instants included: a fingerprint that skips
    # (or pops) them as "volatile" misses a conflict on them.
    order = {
        "request_id": "req-7f3a",
        "created_at": "2026-12-04T03:00:00Z",
        "ts": 1733281200,
        "trace_id": "abc",
        "timestamp": 1.5,
        "sent_at": "2026-12-04T03:00:01Z",
        "amount_cents": 1990,
    }
    text = json.dumps(order, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    want = hashlib.sha256(text.encode()).hexdigest()
    got = ns.payload_fingerprint(dict(order))
    expect(
        got == want,
        _("{fingerprint}... for {payload}: every field hashed, ids and timestamps too").format(
            fingerprint=want[:16], payload=repr(order)
        ),
        f"{str(got)[:16]}...",
    )
    # The same letter written decomposed ('c' + U+0327): the contract hashes the text as
    # given, so a fingerprint of the NFC-normalised JSON is another one.
    exact({"name": "Conceic\u0327a\u0303o", "amount_cents": 1990})
    # Fields named as private or internal ('_id', '__v', a store's own): still payload. The
    # generated payloads hold such names only now and then, so here always.
    exact({"_id": "ord-7", "__v": 0, "_meta": {"_src": "app"}, "amount_cents": 1990})
    # The empty payload too: its canonical JSON is '{}', not the empty text.
    exact({})
    # ', ' and ': ' inside the values: json's default separators "compacted" afterwards
    # with .replace(', ', ',') (or every blank dropped) rewrite the values too.
    exact({"ship_to": "Rua A, 42", "note": "ref: 7, gate: B", "amount_cents": 1990})
    # Fields at their default (False, as a serializer's exclude_defaults leaves out) and
    # ints past 2**53 (made floats or text "for JavaScript clients"): still the payload as
    # given, so 9007199254740993 is not 9007199254740992 and a gift wrap turned off is a
    # change from a payload without the field.
    exact({"gift_wrap": False, "express": True, "amount_cents": 1990})
    exact({"order_id": 2**53 + 1, "ledger_id": -(2**63), "amount_cents": 1990})
    # Past 64 bits too (a UUID's .int, a 128-bit ledger id): ints too wide for a BIGINT
    # column written as text are still the ints the payload holds.
    exact({"order_id": 2**64 + 7, "trace": 2**127 + 5, "amount_cents": 1990})
    # A list of texts in the order given (a fingerprint that sorts only the lists of
    # strings, "tags have no order", writes another JSON), and a text with its '\r\n' line
    # ends as given (not made '\n', not stripped of control characters).
    exact({"tags": ["gift", "express"], "amount_cents": 1990})
    exact({"note": "line 1\r\nline 2", "amount_cents": 1990})
    # More fields a fingerprint may take for "not the payload": the key itself, a retry's
    # counters, ids of the message and of its trace, a nonce, a signature, instants of
    # receipt and update. A retry resends them unchanged; a change in them is a change.
    exact(
        {
            "idempotency_key": "billing:42:charge:v1",
            "correlation_id": "c-7",
            "message_id": "m-7",
            "event_id": "e-7",
            "span_id": "s-7",
            "nonce": "n-7",
            "signature": "sig-7",
            "hmac": "h-7",
            "retry_count": 0,
            "retries": 0,
            "received_at": "2026-12-04T03:00:02Z",
            "updated_at": "2026-12-04T03:00:03Z",
            "headers": {"user-agent": "app/7"},
            "user_agent": "app/7",
            "client_ip": "203.0.113.7",
            "ip": "203.0.113.7",
            "version": 3,
            "schema_version": 2,
            "metadata": {"source": "app"},
            "amount_cents": 1990,
        }
    )
    # Texts as given, top-level fields too: blanks around a name kept, an e-mail in its
    # case (a fingerprint that strips or lowercases "the fields that need it" rewrites
    # the payload). Lines (a list of dicts) in the order given, not sorted by their sku.
    exact({"note": " gift ", "email": "Ana@Example.COM", "amount_cents": 1990})
    exact({"lines": [{"sku": "B", "qty": 2}, {"sku": "A", "qty": 1}], "amount_cents": 1990})
    # Lists of numbers in the order given (rates, amounts), and a tag given twice kept twice.
    exact({"rates": [0.5, 0.25], "split_cents": [1000, 990], "amount_cents": 1990})
    exact({"tags": ["gift", "gift", "express"], "amount_cents": 1990})
    # Int field names, as json.dumps sorts them (9 before 10, as numbers) and writes them
    # ("9", "10"): names made text first sort '10' before '9'. A tuple is written as a
    # list, not refused: the contract's json.dumps encodes it.
    exact({"qty_by_line": {10: 1, 9: 2}, "amount_cents": 1990})
    exact({"size_cm": (10, 20), "amount_cents": 1990})
    # A payload whose field names are all ints, written as json.dumps sorts them (9 before
    # 10): names made text first, at the top level too, sort '10' before '9'.
    exact({10: 1, 9: 2})
    # Floats JSON writes as they are: NaN and Infinity (json.dumps' default allow_nan=True),
    # and -0.0. A fingerprint that refuses them (allow_nan=False), or "cleans" them to
    # null or 0.0, is not the contract's (and makes NaN another payload's twin: None's).
    for floats in (
        {"rate": float("nan"), "cap": float("inf"), "amount_cents": 1990},
        {"delta": -0.0, "amount_cents": 1990},
    ):
        try:
            exact(floats)
        except StudentRaised as exc:
            expect(
                False,
                _(
                    "a fingerprint for {payload}, as the contract's json.dumps writes it "
                    "(NaN, Infinity and -0.0 as they are: allow_nan is left at True)"
                ).format(payload=repr(floats)),
                _("payload_fingerprint raised {error}: {message}").format(
                    error=exc.type_name, message=exc.message
                ),
                _(
                    "call json.dumps with exactly the contract's arguments: allow_nan=False "
                    "refuses a payload the contract fingerprints, and a float 'cleaned' to null "
                    "or 0.0 is another payload's"
                ),
            )
    # A payload with many fields: every field is hashed, past the 64 or 100 a fingerprint
    # "bounded" to its first fields keeps.
    many = {f"f{n:04d}": n for n in range(MANY_ITEMS)}
    text = json.dumps(many, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    want = hashlib.sha256(text.encode()).hexdigest()
    got = ns.payload_fingerprint(dict(many))
    expect(
        got == want,
        _(
            "{fingerprint}... for a payload of {count} fields, 'f0000': 0 to 'f{last}': {last} "
            "(every field hashed, not its first 64 or 1000)"
        ).format(fingerprint=want[:16], count=f"{MANY_ITEMS:,}", last=MANY_ITEMS - 1),
        f"{str(got)[:16]}...",
    )
    # A long payload, past every width written in the code: still SHA-256 of the whole
    # canonical JSON (not another digest, nor hash(), for what is "too long").
    length = past_every_cut(ns.harness(HARNESS + "ints_written_in", ["payload_fingerprint"]))
    long = {"note": "x" * length, "amount_cents": 1990}
    text = json.dumps(long, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    want = hashlib.sha256(text.encode()).hexdigest()
    got = ns.payload_fingerprint(long)
    expect(
        got == want,
        _(
            "{fingerprint}... for a payload with a note of {length} characters (SHA-256 of the "
            "whole canonical JSON, however long)"
        ).format(fingerprint=want[:16], length=f"{length:,}"),
        f"{str(got)[:16]}...",
        _(
            "hash every payload the same way, hashlib.sha256 of its canonical JSON: another "
            "digest (or hash()) for a long one is a fingerprint no other worker makes"
        ),
    )
    holds_for(PAYLOADS, exact, examples=40)


#: Two keys that are two operations, though a normalised or shortened key makes them one.
TWIN_KEYS = [
    ("billing:1:charge:v1", "billing:2:charge:v1"),
    ("billing:INV-7:charge:v1", "billing:inv-7:charge:v1"),
    ("crm:José:sync:v1", "crm:Jose:sync:v1"),
    ("billing:" + "x" * 300 + "1:charge:v1", "billing:" + "x" * 300 + "2:charge:v1"),
    # Blanks are part of a key: ' billing' is another source than 'billing' (a strip()
    # of the key gives both one entry).
    (" billing:7:charge:v1", "billing:7:charge:v1"),
    ("billing:7:charge:v1 ", "billing:7:charge:v1"),
    # A run of blanks is not one blank, and a fullwidth id is not its ASCII look-alike
    # (a key "tidied" with re.sub(r"\s+", " ") or NFKC gives both one entry).
    ("billing:INV  7:charge:v1", "billing:INV 7:charge:v1"),
    ("billing:ＩＮＶ-42:charge:v1", "billing:INV-42:charge:v1"),
    # Non-ASCII letters are part of a key: encode('ascii', 'ignore' or 'replace') gives
    # 'Müller' and 'Möller' (or '北京' and '上海') one entry, and a slug that makes every
    # other character '_' gives 'INV 7' and 'INV_7' one.
    ("crm:Müller:sync:v1", "crm:Möller:sync:v1"),
    ("crm:北京:sync:v1", "crm:上海:sync:v1"),
    ("billing:INV 7:charge:v1", "billing:INV_7:charge:v1"),
    # Every part of the key counts: another version, another action, or an id written with
    # leading zeros is another operation (a key remembered without its ':v1', or with its
    # numbers "tidied", gives both one entry).
    ("billing:42:charge:v1", "billing:42:charge:v2"),
    ("billing:42:charge:v1", "billing:42:refund:v1"),
    ("billing:0042:charge:v1", "billing:42:charge:v1"),
    ("billing:INV-7-1:charge:v1", "billing:INV-71:charge:v1"),
    # The same letters, decomposed ('c' + U+0327) and composed ('ç'): a key "normalised"
    # with NFC gives both one entry, though the contract takes the key exactly as given.
    ("crm:Conceic\u0327a\u0303o:sync:v1", "crm:Conceição:sync:v1"),
    # A key "cleaned" as it came in: its line end cut off (keys read from lines or a CSV
    # written with '\r\n'), a byte-order mark or a zero-width space dropped, '%20'
    # decoded (a key from an HTTP header) or a newline escaped as '\' 'n' (one-line
    # logs). The key as given is the operation: each pair is two.
    ("billing:7:charge:v1\n", "billing:7:charge:v1"),
    ("billing:7:charge:v1\r\n", "billing:7:charge:v1"),
    ("\ufeffbilling:7:charge:v1", "billing:7:charge:v1"),
    ("billing:INV\u200b7:charge:v1", "billing:INV7:charge:v1"),
    ("billing:INV%207:charge:v1", "billing:INV 7:charge:v1"),
    ("billing:INV\n7:charge:v1", "billing:INV\\n7:charge:v1"),
    # Quotes around a key are part of it: a key "unquoted" as an HTTP header's quoted value
    # or a CSV field is (key.strip('"')) gives both one entry.
    ('"billing:7:charge:v1"', "billing:7:charge:v1"),
    # A tab or a no-break space is not a blank: a key with them made blanks (for logs, or
    # "normalised" after a copy from a document) gives both one entry.
    ("billing:INV\t7:charge:v1", "billing:INV 7:charge:v1"),
    ("billing:INV\u00a07:charge:v1", "billing:INV 7:charge:v1"),
    # Nor four blanks: a tab "expanded" as an editor does (replace('\t', '    ')) gives
    # the two one entry.
    ("billing:INV\t7:charge:v1", "billing:INV    7:charge:v1"),
    # A NUL character is part of a key too: a key with it dropped (PostgreSQL's text
    # columns refuse it) gives both one entry.
    ("billing:INV\x007:charge:v1", "billing:INV7:charge:v1"),
    # At the end too: a key with its trailing NULs stripped (rstrip('\x00'), as a C
    # string or a fixed-width field is read) gives both one entry.
    ("billing:7:charge:v1\x00", "billing:7:charge:v1"),
]


@CHECKS.add(
    1,
    "remember operations by key, not by payload, and by the key exactly as given (no "
    "lower(), no truncation, no accents stripped): two orders with equal contents are "
    "still two operations",
    severe=True,
)
def accept_does_not_confuse_keys(ns: Namespace) -> None:
    payload = {"amount_cents": 500}
    # Each pair in both orders: a lookup that falls back on a "tidied" key (seen.get(key)
    # or seen.get(key.lower())) only merges the two when the tidy one came first.
    for first, second in [*TWIN_KEYS, *((b, a) for a, b in TWIN_KEYS)]:
        run = ns.harness(
            "labkit.grading.exercises.ex01.harness:accept_calls",
            [[first, payload], [second, payload]],
        )
        a, b = (r.get("returned", r.get("raised")) for r in run["results"])
        expect(
            a is True and b is True,
            _("True for two different keys with the same payload, {first} and {second}").format(
                first=repr(first[:40]), second=repr(second[:40])
            ),
            _("{first} and {second}").format(first=repr(a), second=repr(b)),
        )
    # The key as given, not one read from the payload: a payload copied from another order
    # (its 'idempotency_key' or 'key' field left in) is still the operation of its key.
    stale = "billing:7:charge:v1"
    copied = {"amount_cents": 500, "idempotency_key": stale, "key": stale}
    run = ns.harness(
        "labkit.grading.exercises.ex01.harness:accept_calls",
        [["billing:8:charge:v1", dict(copied)], ["billing:9:charge:v1", dict(copied)]],
    )
    a, b = (r.get("returned", r.get("raised")) for r in run["results"])
    expect(
        a is True and b is True,
        _(
            "True for two different keys, 'billing:8:charge:v1' and 'billing:9:charge:v1', "
            "with one payload holding {field}"
        ).format(field=repr({"idempotency_key": stale})),
        _("{first} and {second}").format(first=repr(a), second=repr(b)),
        _(
            "remember the operation under the `key` argument: a key field inside the payload "
            "is payload (it may be stale, copied from another order), not the key"
        ),
    )
    # Keys longer than any width accept might cut them to (a number written in its code,
    # a 1024-character column, 64 KiB), differing in one character near the end or in the
    # middle (a cut that keeps a head and a tail).
    length = past_every_cut(ns.harness(HARNESS + "ints_written_in", ["accept"]))
    for row in ns.harness(HARNESS + "accept_long_keys", length):
        a, b = (r.get("returned", r.get("raised")) for r in row["results"])
        expect(
            a is True and b is True,
            (
                _(
                    "True for two different keys of {length} characters with the same "
                    "payload, one character apart in the middle"
                )
                if row["middle"]
                else _(
                    "True for two different keys of {length} characters with the same "
                    "payload, one character apart near the end"
                )
            ).format(length=f"{length + 18:,}"),
            _("{first} and {second}; `seen` kept {kept} keys").format(
                first=repr(a), second=repr(b), kept=row["kept"]
            ),
            _(
                "remember the key whole, however long: a key cut to a width (key[:1024], "
                "its first and last characters) gives two operations one entry, and the "
                "second is skipped as a repeat"
            ),
        )


# Not severe: an unreadable key (a sha256 of the intent, as the hint of
# key_is_the_same_in_another_process allows when it must be short) breaks the log search,
# not the work; a key that differs per process fails that severe check itself.
@CHECKS.add(1, "the key must not depend on the process (hash() is salted per process)")
def key_is_plain_text(ns: Namespace) -> None:
    key = ns.operation_key("billing", 42, "charge")
    expect(isinstance(key, str), "a str", type(key).__name__)
    expect(
        "42" in key and "charge" in key and "billing" in key,
        "a readable key that contains billing, 42 and charge (operators read keys in logs)",
        repr(key),
    )


@CHECKS.add(
    1,
    "the key shows each part as it was given, version included "
    "(billing:42:charge:v1, not billing:42:charge): operators grep logs for it",
)
def key_shows_every_part(ns: Namespace) -> None:
    def shown(intent: tuple[str, Any, str, int]) -> None:
        key = ns.operation_key(*intent)
        missing = [str(p) for p in intent if str(p) not in str(key)]
        expect(
            not missing,
            _("a key containing {parts}").format(parts=", ".join(map(str, intent))),
            repr(key),
        )

    # Parts with blanks, '/', '%' and accents, shown as given (not URL-quoted, not escaped).
    shown(("shop/eu", "José Ávila 7", "refund", 2))
    shown(("billing", "50% off", "charge", 1))
    # Quotes too: a key "made safe" for SQL (quotes doubled) no longer holds "d'Ávila".
    shown(("crm", "d'Ávila", "sync", 1))
    holds_for(INTENTS, shown, examples=30)


@CHECKS.add(
    2,
    "write the entity id as str() writes it (f'{entity_id}'), not as its repr "
    "(f'{entity_id!r}', repr(), type(entity_id)): an id read through pandas is "
    "numpy.int64(42), one of an enum an IntEnum member, and the same invoice gets a second "
    "key beside the one of the int 42, so it is charged twice. And write it whole: no "
    "'.0' taken off, no `entity_id or ''`, no cut to a width (key[:1024]), or two "
    "invoices share a key and the second is skipped",
    severe=True,
)
def an_id_equal_to_an_int_keeps_its_key(ns: Namespace) -> None:
    rows = ns.harness("labkit.grading.exercises.ex01.harness:keys_of_ids_equal_to_an_int")
    said = {
        "subclass": _("an int subclass (an id type of the caller's own)"),
        "IntEnum": _("an IntEnum member"),
        "numpy": _("numpy.int64 (an id read through pandas)"),
    }
    (_int, base), *others = rows
    if "returned" not in base:
        return  # the key of a plain int: the public checks judge it
    _ids_written_whole(ns)
    for what, got in others:
        if {"TypeError", "ValueError"} & set(got.get("raised", ())):
            continue  # an id type refused loudly: no second key either
        expect(
            got.get("returned") == base["returned"],
            _("the key of the id 42, {key}, for the id 42 as {what}").format(
                key=repr(base["returned"]), what=said.get(what, what)
            ),
            repr(got["returned"]) if "returned" in got else raised_text(got),
        )
    # A UUID id and its text are one entity: an ORM hands the UUID, a message its text. A
    # key of uuid.hex (or repr) for the one and of the text for the other charges twice.
    as_uuid, as_text = ns.harness(HARNESS + "keys_of_a_uuid_id", ENTITY_UUID)
    if not {"TypeError", "ValueError"} & set(as_uuid.get("raised", ())):
        expect(
            "returned" in as_uuid and as_uuid.get("returned") == as_text.get("returned"),
            _("the key of the id {id} as text, {key}, for the same id as a uuid.UUID").format(
                id=repr(ENTITY_UUID), key=repr(as_text.get("returned"))
            ),
            _said(as_uuid),
            _(
                "write the entity id as str() writes it: str() of a UUID is its text with "
                "the dashes, so the UUID and its text share one key (uuid.hex drops them)"
            ),
        )
    _decimal_ids(ns)


#: A Decimal id (a NUMERIC column as a database driver reads it) beside an int, and beside
#: another Decimal: (first, second, the same entity?). Decimal(4200) is the int's invoice
#: (a key of Decimal.normalize() writes it 4.2E+3); Decimal('42.4') is not Decimal('42')
#: (a key of quantize(Decimal(1)) makes it one).
DECIMAL_IDS: list[tuple[Any, Any, bool]] = [
    (number("4200"), 4200, True),
    (number("42.4"), number("42"), False),
]


def _decimal_ids(ns: Namespace) -> None:
    """``DECIMAL_IDS`` keyed as str() writes them: one key for one entity, two for two."""
    pairs = [(["billing", first, "charge"], ["billing", second, "charge"])
             for first, second, _same in DECIMAL_IDS]  # fmt: skip
    for n, a, b in built_key_pairs(ns, pairs):
        first, second, same = DECIMAL_IDS[n]
        both = "returned" in a and "returned" in b
        expect(
            both and (a["returned"] == b["returned"]) == same,
            (
                _("one key for the ids {first} and {second}, {key}")
                if same
                else _("different keys for the entity ids {first} and {second}")
            ).format(first=shown_id(first), second=shown_id(second), key=repr(b.get("returned"))),
            _("{first} and {second}").format(first=_said(a), second=_said(b)),
            _(
                "write the entity id as str() writes it: str(Decimal(4200)) is '4200', the "
                "int's key (Decimal.normalize() writes 4.2E+3), and str(Decimal('42.4')) "
                "keeps its decimals (quantize() or int() makes it the id 42)"
            ),
        )

#: An entity id as a UUID's text (lower case, with its dashes, as str() writes a UUID).
ENTITY_UUID = "0f8e4c2a-7b1d-4e9a-9c3f-5a6b7c8d9e0f"

#: Two entity ids a "tidied" key gives one key, though they are two: a text id with its
#: '.0' taken off (as pandas writes a float id) or read as a number ('1e3', '+7'), and
#: the ids a falsy test (`entity_id or ''`) makes one.
ODD_ID_TWINS: list[tuple[Any, Any]] = [
    ("2.0", "2"),
    ("42.0", 42),
    ("42.50", "42.5"),
    ("1e3", "1000"),
    ("+7", 7),
    (0, None),
    (0, ""),
    ("", None),
    # A negative id is another entity than its positive twin (abs(), lstrip('-')), and an
    # id holding braces is written as it is: a key made with .format() on text that
    # already holds the id substitutes '{action}' (or raises on '{7}').
    (-7, 7),
    ("-7", "7"),
    ("{action}", "charge"),
    ("{7}", "7"),
    # Ints past 2**53 are two entities: an id "normalised" through float()
    # (int(float(entity_id)), f'{entity_id:.0f}') makes them one.
    (2**53 + 1, 2**53),
    # Float ids are written whole too: a '.0' stripped with rstrip('.0') takes the zeros
    # before it as well, and 10.0 (or 100.0) shares the key of 1.0.
    (10.0, 1.0),
]


def _ids_written_whole(ns: Namespace) -> None:
    """Two entity ids are two keys: a long id past every width the code writes, changed
    at its end or in its middle, and ids a "tidied" key makes one (``ODD_ID_TWINS``)."""
    length = past_every_cut(ns.harness(HARNESS + "ints_written_in", ["operation_key"]))
    for row in ns.harness(HARNESS + "keys_of_long_intents", length):
        expect(
            not row["same"],
            (
                _(
                    "different keys for two entity ids of {length} characters, one "
                    "character apart in the middle"
                )
                if row["middle"]
                else _(
                    "different keys for two entity ids of {length} characters, one "
                    "character apart at the end"
                )
            ).format(length=f"{length:,}"),
            _("{key} for both").format(key=_said(row["first"])),
            _(
                "put the entity id into the key whole, however long: a key cut to a width "
                "(key[:1024], its first and last characters) gives two intents one key, "
                "and the second is skipped as a repeat"
            ),
        )
    for first, second in ODD_ID_TWINS:
        keys = []
        for entity_id in (first, second):
            try:
                keys.append(ns.operation_key("billing", entity_id, "charge"))
            except StudentRaised as exc:
                if exc.is_a("ValueError") or exc.is_a("TypeError"):
                    break  # an id refused loudly: no key shared either
                raise
        else:
            expect(
                keys[0] != keys[1],
                _("different keys for the entity ids {first} and {second}").format(
                    first=repr(first), second=repr(second)
                ),
                _("{key} for both").format(key=repr(keys[0])),
                _(
                    "write the entity id as str() writes it, nothing taken off or read as a "
                    "number ('2.0' is not '2'), and test for a missing id with `is None`, "
                    "not with `or` (0 is an id)"
                ),
            )


@CHECKS.add(
    1,
    "the key names the intent, not the machine: no host name, user, working folder, "
    "process id, time zone or language in it, or a retry that lands on another worker is "
    "not recognised and runs again",
    severe=True,
)
def key_is_the_same_on_another_machine(ns: Namespace) -> None:
    calls = [*SAMPLE_CALLS, *MACHINE_CALLS]
    got = ns.harness("labkit.grading.exercises.ex01.harness:keys_on_another_machine", calls)
    for args, here, there in zip(calls, got["here"], got["there"], strict=True):
        expect(
            here == there,
            _(
                "the same key for {args} on another machine (another host name, network "
                "card, user, user id, home and working folder, time zone and language)"
            ).format(args=_call_shown(args)),
            _("{here} here, {there} there").format(here=repr(here), there=repr(there)),
            _(
                "write a datetime id as str() writes it: a naive datetime (a nightly run's "
                "wall time) turned into an instant with .timestamp() or .astimezone() is "
                "read in the worker's time zone, so a worker in another zone makes another "
                "key and a retry there runs again"
            )
            if args in MACHINE_CALLS
            else None,
        )
    for args, here, there in zip(calls, got["here"], got["started"] or got["here"], strict=True):
        expect(
            here == there,
            _(
                "the same key for {args} in a worker started on another machine (the "
                "notebook's cells run again there, as a worker imports its module)"
            ).format(args=_call_shown(args)),
            _("{here} here, {there} there").format(here=repr(here), there=repr(there)),
            _(
                "nothing about the worker may go into the key, not even read once at import: "
                "a host name (socket.gethostname(), platform.uname()), a user or its id, a "
                "network card (uuid.getnode()), a process id (os.getpid()), a time zone "
                "(time.tzname), a language (LANG) or the module's "
                "__name__ ('__main__' in a notebook, the module's name in a worker) differs "
                "from one to another, and a retry that lands on another one runs again"
            ),
        )


#: Intents a key may read in the machine's time zone: a naive datetime id (a nightly run's
#: date and wall time) written through .timestamp() or .astimezone() is taken as the
#: worker's local time, so a worker in another zone makes another key.
MACHINE_CALLS: list[list[Any]] = [["cron", naive(2026, 12, 4, 2, 30), "nightly-report"]]


def _call_shown(args: list[Any]) -> Any:
    """A call's arguments as a message shows them: built ids as Python writes them."""
    return shown(args) if args in MACHINE_CALLS else args


@CHECKS.add(
    1,
    "the key is made from its arguments alone, in every call: a key remembered from an "
    "earlier call (functools.lru_cache, a dict of keys) answers 42.0 with the key made "
    "for 42, which are equal, so two workers make two keys for one intent",
    severe=True,
)
def key_is_made_anew_in_every_call(ns: Namespace) -> None:
    before, calls = [["billing", 42, "charge"]], [["billing", 42.0, "charge"]]
    got = ns.harness(
        "labkit.grading.exercises.ex01.harness:keys_after_others_and_in_a_new_worker",
        before,
        calls,
    )
    for args, here, there in zip(calls, got["here"], got["started"] or got["here"], strict=True):
        expect(
            here == there,
            _(
                "the same key for {args} after a key for {before}, and in a new worker that "
                "asks for {args} first"
            ).format(args=args, before=before[0]),
            _("{here} here, {there} in the new worker").format(here=repr(here), there=repr(there)),
            _(
                "build the key from the arguments in every call: no functools.lru_cache, no "
                "dict of keys already made (42 and 42.0 are one entry there)"
            ),
        )


HARNESS = "labkit.grading.exercises.ex01.harness:"


@CHECKS.add(
    1,
    "a long key, payload or stored key is the same in every process: shortened with "
    "hash() (salted per process) or a random suffix, a worker restarted after a deploy "
    "makes another key or fingerprint for the same intent, and its retry runs again or is "
    "refused as a conflict",
    timeout=30.0,
    severe=True,
)
def long_inputs_are_the_same_in_another_process(ns: Namespace) -> None:
    names = ["operation_key", "payload_fingerprint", "accept"]
    length = past_every_cut(ns.harness(HARNESS + "ints_written_in", names))
    rows = ns.harness(HARNESS + "long_inputs_in_another_process", length)
    said = {
        "key": _(
            "the same key for an entity id of {length} characters here and in a new Python "
            "process (another hash seed, as a worker restarted after a deploy)"
        ),
        "fingerprint": _(
            "the same fingerprint for a payload with a note of {length} characters here and "
            "in a new Python process (another hash seed)"
        ),
        "repeat": _(
            "the same answer for the retry of a key of {length} characters, on the store "
            "accept filled here, in a new Python process (another hash seed)"
        ),
    }
    for what in ("key", "fingerprint", "repeat"):
        row = rows[what]
        if row is None:
            continue  # no such call there: judged by the other checks
        expect(
            row["same"],
            said[what].format(length=f"{length:,}"),
            _("{here} here, {there} there").format(here=row["here"], there=row["there"]),
            _(
                "make a long input short only with hashlib (sha256 of its text), never with "
                "hash(), uuid4() or random: hash() of a str is salted per process, so the key "
                "(or the fingerprint) of a long intent differs in every worker"
            ),
        )


#: The same field with two different non-ASCII values: a fingerprint of text encoded as
#: latin-1, ASCII or the locale's encoding (with errors="replace"), or folded to ASCII,
#: gives both one fingerprint.
NON_ASCII_CHANGES = [
    ({"city": "北京"}, {"city": "上海"}),
    ({"name": "Müller"}, {"name": "Möller"}),
    ({"payee": "João"}, {"payee": "Joao"}),
    ({"memo": "5 €"}, {"memo": "5 ₹"}),
]


@CHECKS.add(
    1,
    "fingerprint the canonical JSON encoded as UTF-8 (text.encode('utf-8')), whatever the "
    "machine's locale: latin-1, ASCII, the locale's encoding or an accent-stripping "
    "'normalisation' turn '北京' and '上海' (or 'João' and 'Joao') into one fingerprint, and "
    "a changed request is skipped as a repeat",
    severe=True,
)
def conflict_on_non_ascii_text(ns: Namespace) -> None:
    key = "crm:7:sync:v1"
    for first, then in NON_ASCII_CHANGES:
        run = ns.harness(HARNESS + "accept_calls_in_c_locale", [[key, first], [key, then]])
        said = run["results"][1]
        expect(
            "IdempotencyConflict" in said.get("raised", ()),
            _(
                "IdempotencyConflict for the same key with {first}, then {then}, on a worker "
                "whose locale is C (ASCII)"
            ).format(first=repr(first), then=repr(then)),
            _said(said),
        )


#: Payloads the canonical JSON in UTF-8 cannot hold, each beside the payload a lossy way
#: around it makes of it: a lone surrogate (a file name os.listdir could not decode)
#: replaced by '?', dropped, or turned back into the bytes of 'é' (encode's errors=
#: "replace", "ignore", "surrogateescape"), and dict keys JSON has no text for, which
#: json.dumps(skipkeys=True) drops.
LOSSY_PAIRS = [
    ({"file": "report-\udce9.pdf"}, {"file": "report-?.pdf"}),
    ({"file": "report-\udce9.pdf"}, {"file": "report-.pdf"}),
    ({"file": "caf\udcc3\udca9.pdf"}, {"file": "café.pdf"}),
    ({"prices": {("EUR",): 1990}}, {"prices": {("USD",): 99999}}),
]


@CHECKS.add(
    1,
    "a payload the canonical JSON in UTF-8 cannot hold (a lone surrogate from an "
    "undecodable file name, a tuple as a dict key) raises: encoded with errors='replace' "
    "or 'ignore', or dumped with skipkeys=True, it takes the fingerprint of another "
    "payload, and a changed request is skipped as a repeat",
)
def a_payload_json_cannot_hold_raises(ns: Namespace) -> None:
    for payload, lossy in LOSSY_PAIRS:
        try:
            got = ns.payload_fingerprint(payload)
        except StudentRaised:
            continue  # what the contract's json.dumps and encode("utf-8") do
        expect(
            got != ns.payload_fingerprint(lossy),
            _("an error for {payload}, or a fingerprint other than that of {lossy}").format(
                payload=ascii(payload), lossy=ascii(lossy)
            ),
            _("the same fingerprint for both: {fingerprint}...").format(fingerprint=str(got)[:16]),
            _(
                "fingerprint exactly json.dumps(payload, sort_keys=True, separators=(',', ':'), "
                "ensure_ascii=False).encode('utf-8'), with no errors= and no skipkeys: what "
                "it cannot encode must raise, not pass for another payload"
            ),
        )
    # A lone surrogate is no text UTF-8 can encode: encoded anyway (errors=
    # "surrogatepass", or "backslashreplace"), it gets a fingerprint the contract never
    # makes, which no other worker's (nor the store's) fingerprint of it matches.
    for payload, _lossy in LOSSY_PAIRS:
        if not isinstance(payload, dict) or not any(map(_lone_surrogate, payload.values())):
            continue
        try:
            got = ns.payload_fingerprint(payload)
        except StudentRaised:
            continue  # what the contract's encode("utf-8") does
        expect(
            False,
            _("an error for {payload}: UTF-8 cannot encode a lone surrogate").format(
                payload=ascii(payload)
            ),
            _("the fingerprint {fingerprint}...").format(fingerprint=str(got)[:16]),
            _(
                "encode the canonical JSON with text.encode('utf-8') and no errors= "
                "(not 'surrogatepass', not 'replace'): what UTF-8 cannot encode must raise"
            ),
        )


def _lone_surrogate(value: Any) -> bool:
    """Whether ``value`` is text holding a lone surrogate (U+D800 to U+DFFF)."""
    return isinstance(value, str) and any("\ud800" <= ch <= "\udfff" for ch in value)


#: Fields a retry tends to change: the same key with another value in one of them is
#: another payload all the same (the contract compares the whole fingerprint).
RETRY_FIELDS = [
    ("attempt", 1, 2),
    # Past 2**53: a fingerprint of the ints made floats ("for JavaScript clients") calls
    # two ids one apart the same.
    ("order_id", 2**53 + 3, 2**53 + 4),
    ("retry", 0, 1),
    ("sent_at", "03:00:00", "03:00:05"),
    # A third decimal: a fingerprint of values rounded to cents calls these the same.
    ("rate", 0.125, 0.124),
    # Case alone: a fingerprint of the lowercased JSON calls these the same.
    ("reference", "INV-7a", "INV-7A"),
    # Equal in Python, not in JSON: a fingerprint cached by the payload's items (a dict
    # keyed by frozenset(payload.items())) answers 1.0 and True with the one made for 1.
    ("quantity", 1, 1.0),
    ("gift", 1, True),
    # A number and its text: a fingerprint of the payload with numbers made text first
    # calls these the same.
    ("invoice", 42, "42"),
    # The payload's own id: a fingerprint that drops it ("the key names it already") calls
    # an order for another record a repeat.
    ("id", 7, 8),
    # A ninth decimal: a fingerprint of floats rounded to 6 places (to hide float noise)
    # calls these the same.
    ("fx_rate", 5.123456789, 5.123456788),
    # The same line twice is two items: a fingerprint of the lists as sets (or with their
    # repeated items dropped) calls an order for one item and one for two the same.
    ("lines", [{"sku": "A", "qty": 1}], [{"sku": "A", "qty": 1}, {"sku": "A", "qty": 1}]),
    # Blanks inside a value: a fingerprint of json's default output with its separators'
    # blanks replaced away (.replace(', ', ','), .replace(': ', ':'), or every ' ' dropped)
    # drops them from the values too, and calls two addresses or two names the same.
    ("payee", "Ana Maria", "AnaMaria"),
    ("ship_to", "Rua A, 42", "Rua A,42"),
    ("note", "ref: 7", "ref:7"),
    # A fourteenth decimal: a fingerprint of floats rounded to 9 or 12 places (to hide
    # float noise) calls these the same.
    ("unit_rate", 0.12345678912341, 0.12345678912342),
    # The last digit a float holds: 0.1 + 0.2 is not 0.3, and 19.9 is not the float just
    # above it. A fingerprint of floats made coarser in any way (rounded to 15 or 16
    # places or significant digits, stored as 32 bits) calls these the same.
    ("total", 0.30000000000000004, 0.3),
    ("price", 19.9, 19.900000000000002),
]

#: Fields present but empty: the same key with the field, then without it (or the other
#: way round) is another payload, as its canonical JSON says. A fingerprint that drops
#: empty lists and dicts ("nothing in them") calls these the same.
EMPTY_FIELDS: list[tuple[str, Any]] = [
    ("discounts", []),
    ("metadata", {}),
    # A field at its default (False, 0, ''): a fingerprint that leaves such fields out (a
    # serializer's exclude_defaults) calls a gift wrap turned off and no gift wrap field
    # the same.
    ("gift_wrap", False),
    ("discount_cents", 0),
    ("note", ""),
]
#: Two payloads whose field names differ only as a "tidied" name makes them one: in case
#: (lower() of the names, or snake_case made of camelCase) or in blanks around them.
FIELD_NAME_TWINS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"amount_cents": 500, "giftWrap": 1}, {"amount_cents": 500, "gift_wrap": 1}),
    ({"amount_cents": 500, "Note": "gift"}, {"amount_cents": 500, "note": "gift"}),
    ({"amount_cents": 500, " note": "gift"}, {"amount_cents": 500, "note": "gift"}),
]

#: Fields an accept may fingerprint the payload without (a copy "cleaned" of private,
#: volatile or transport fields): each is payload all the same.
ACCEPT_SKIPS = [
    "idempotency_key",
    "_id",
    "__v",
    "_meta",
    "request_id",
    "trace_id",
    "correlation_id",
    "timestamp",
    "created_at",
    "headers",
    "metadata",
    "nonce",
    "signature",
]
#: An event envelope changed outside its 'data' (or 'body'): an accept that fingerprints
#: only what is inside calls a charge and a refund of the same data a repeat.
ENVELOPE_CHANGES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (
        {"type": "charge", "data": {"amount_cents": 500}},
        {"type": "refund", "data": {"amount_cents": 500}},
    ),
    (
        {"body": {"amount_cents": 500}, "currency": "BRL"},
        {"body": {"amount_cents": 500}, "currency": "USD"},
    ),
]

#: A long invoice: a fingerprint of only the first few thousand characters of the JSON
#: misses a change in its last line.
LONG_INVOICE = {"lines": [{"sku": f"SKU-{i:03d}", "qty": 1} for i in range(300)]}


@CHECKS.add(
    1,
    "compare the fingerprint of the whole payload: a retry that changes a field (its "
    "attempt number, its sent_at) is another payload under the same key, a conflict to "
    "raise, not a repeat to skip",
    severe=True,
)
def conflict_on_any_field(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"amount_cents": 500, field: old}, {"amount_cents": 500, field: new})
        for field, old, new in RETRY_FIELDS
    ]
    for field, empty in EMPTY_FIELDS:
        bare, full = {"amount_cents": 500}, {"amount_cents": 500, field: empty}
        pairs += [(full, bare), (bare, full)]
    pairs += FIELD_NAME_TWINS
    # What accept itself may leave out of the fingerprint it compares ("private", "volatile"
    # or transport fields, an envelope's outer fields): each is payload, and a change in
    # it is a conflict.
    pairs += [
        ({"amount_cents": 500, name: "a"}, {"amount_cents": 500, name: "b"})
        for name in ACCEPT_SKIPS
    ]
    pairs += ENVELOPE_CHANGES
    # A payload emptied under the same key: an accept that compares only when the payload
    # has something in it (`if payload and known != fp`) calls it a repeat.
    pairs += [({"amount_cents": 500}, {})]
    # An integral float stays a float however big (json writes 1e+16, not 10000000000000000).
    pairs += [({"amount_cents": 10**16}, {"amount_cents": 1e16})]
    for first, then in pairs:
        # Copies: an accept that edits the payload it is given must not edit the text below.
        run = ns.harness(HARNESS + "accept_calls", [[key, dict(first)], [key, dict(then)]])
        said = run["results"][1]
        expect(
            "IdempotencyConflict" in said.get("raised", ()),
            _("IdempotencyConflict for the same key with {first}, then {then}").format(
                first=repr(first), then=repr(then)
            ),
            _said(said),
        )
    changed = {"lines": [dict(line) for line in LONG_INVOICE["lines"]]}
    changed["lines"][-1]["qty"] = 2
    run = ns.harness(HARNESS + "accept_calls", [[key, LONG_INVOICE], [key, changed]])
    said = run["results"][1]
    expect(
        "IdempotencyConflict" in said.get("raised", ()),
        _(
            "IdempotencyConflict for the same key with an invoice of 300 lines, then the "
            "same invoice with its last line's qty changed from 1 to 2"
        ),
        _said(said),
    )
    # Two payloads JSON cannot encode, one day apart: a fingerprint that answers "" (or
    # any one value) for what json.dumps refuses makes the second a repeat.
    run = ns.harness(HARNESS + "accept_payloads_holding_two_datetimes", key)
    said = run["results"][1]
    expect(
        not answered(said, new=False),
        _(
            "an error (TypeError from json.dumps) or IdempotencyConflict for the same key "
            "sent with a payload due on 2026-12-04, then due on 2026-12-05 (datetimes)"
        ),
        _("{first}, then {second}").format(first=_said(run["results"][0]), second=_said(said)),
        _(
            "let json.dumps raise for what it cannot encode: a fingerprint that answers one "
            "value ('' or a constant) for every such payload calls a changed payload a repeat"
        ),
    )
    # Longer than any width the fingerprint might cut the payload to (a number written in
    # the code, 64 KiB of JSON, a list's first thousand items): changed at the end of a
    # long text, in its middle, or in a long list's last item.
    written = ns.harness(HARNESS + "ints_written_in", ["accept", "payload_fingerprint"])
    length, items = past_every_cut(written), past_every_cut(written, MANY_ITEMS, MOST_ITEMS)
    said_where = {
        "end": _("a note of {length} characters, then the same note with its last one changed"),
        "middle": _(
            "a note of {length} characters, then the same note with its middle one changed"
        ),
        "last item": _("a list of {items} numbers, then the same list with its last one changed"),
    }
    for row in ns.harness(HARNESS + "accept_long_payloads", length, items):
        expect(
            "IdempotencyConflict" in row["second"].get("raised", ()),
            _("IdempotencyConflict for the same key with {what}").format(
                what=said_where[row["what"]].format(length=f"{length:,}", items=f"{items:,}")
            ),
            _("{first}, then {second}").format(
                first=_said(row["first"]), second=_said(row["second"])
            ),
            _(
                "fingerprint the whole canonical JSON, however long: a fingerprint of its "
                "first N characters (or of each text or list cut short) calls a changed "
                "payload a repeat"
            ),
        )
    # Nested deeper than any bound written in the code (a fingerprint that writes what
    # lies past some depth as '...', "against runaway recursion"): changed at the bottom.
    depth = past_every_cut(written, DEEP_FLOOR, DEEPEST)
    run = ns.harness(
        HARNESS + "accept_calls", [[key, _nested(depth, 500)], [key, _nested(depth, 501)]]
    )
    said = run["results"][1]
    expect(
        "IdempotencyConflict" in said.get("raised", ()),
        _(
            "IdempotencyConflict for the same key with a payload nested {depth} levels deep, "
            "then the same payload with its innermost amount_cents changed from 500 to 501"
        ).format(depth=depth + 1),
        _said(said),
        _(
            "fingerprint the whole canonical JSON, however deep: a fingerprint that cuts the "
            "payload at some depth calls a change below it a repeat"
        ),
    )
    _compared_whole(ns, key)


#: How deep a nested payload goes: past every number written in the code from 30 to 400
#: (json.dumps writes 400 levels well within Python's recursion limit).
DEEP_FLOOR, DEEPEST = 30, 400


def _nested(depth: int, amount: int) -> dict[str, Any]:
    """``{"amount_cents": amount}`` inside ``depth`` dicts, each under the key "child"."""
    payload: dict[str, Any] = {"amount_cents": amount}
    for _level in range(depth):
        payload = {"child": payload}
    return payload


def _compared_whole(ns: Namespace, key: str) -> None:
    """A `seen` holding, under the key, a fingerprint one hex digit away from the payload's
    (at its start, its middle, its end): another payload's, so a conflict. An accept that
    compares a part of the fingerprints (fp[:12], as a message shows them) calls it a
    repeat."""
    payload = {"amount_cents": 500}
    fp = ns.payload_fingerprint(dict(payload))
    if not isinstance(fp, str) or len(fp) < 3:
        return  # fingerprint_tells_payloads_apart judges the fingerprint's shape
    for where, at in ((_("first"), 0), (_("middle"), len(fp) // 2), (_("last"), len(fp) - 1)):
        stored = fp[:at] + ("1" if fp[at] == "0" else "0") + fp[at + 1 :]
        run = ns.harness(HARNESS + "accept_calls", [[key, dict(payload)]], {key: stored})
        said = run["results"][0]
        expect(
            "IdempotencyConflict" in said.get("raised", ()),
            _(
                "IdempotencyConflict for {key} with {payload} when `seen` holds, under that key, "
                "a fingerprint that differs from the payload's in its {where} hex digit only"
            ).format(key=repr(key), payload=repr(payload), where=where),
            _said(said),
            _(
                "compare the whole fingerprints (known != fp): a part of them (fp[:12], "
                "startswith) calls another payload a repeat"
            ),
        )
    # A `seen` holding, under the key, an empty or placeholder value (left by a worker that
    # reserved the key and crashed): no fingerprint of this payload, so not a repeat.
    for stored in ("", "pending"):
        run = ns.harness(HARNESS + "accept_calls", [[key, dict(payload)]], {key: stored})
        said = run["results"][0]
        expect(
            not answered(said, new=False),
            _(
                "no False for {key} with {payload} when `seen` holds {stored} under that key "
                "(no fingerprint of this payload: IdempotencyConflict, as for any other value)"
            ).format(key=repr(key), payload=repr(payload), stored=repr(stored)),
            _said(said),
            _(
                "compare what `seen` holds with the fingerprint, whatever it holds "
                "(if known != fp): `if known and known != fp` calls an empty value a repeat, "
                "and work reserved by a worker that crashed never runs"
            ),
        )


@CHECKS.add(
    1,
    "`seen` is accept's only memory: no module-level cache and no dedup window. A store "
    "that never saw the key (another tenant's, one restored empty) must say True, and a "
    "store that has it must say False however late the repeat comes",
    severe=True,
)
def accept_remembers_only_in_seen(ns: Namespace) -> None:
    key, payload = "billing:42:charge:v1", {"amount_cents": 1990}
    run = ns.harness(
        HARNESS + "accept_in_another_store_and_later", key, payload, 86_400 * 3 + 3_601.5
    )
    results = run["results"]
    expect(
        answered(results["first"], new=True),
        _("True for {key} in an empty `seen`").format(key=repr(key)),
        _said(results["first"]),
    )
    expect(
        answered(results["other_store"], new=True) and key in run["other_seen"],
        _(
            "True for {key} in a second, empty `seen` (another store, which never saw it), "
            "and the key stored there"
        ).format(key=repr(key)),
        _("{said}; the second store holds {seen}").format(
            said=_said(results["other_store"]), seen=repr(run["other_seen"])
        ),
    )
    expect(
        answered(results["other_payload"], new=True),
        _(
            "True for {key} in a third, empty `seen` (another tenant's store) sent with "
            "another payload: that store never saw the key, so there is nothing to conflict with"
        ).format(key=repr(key)),
        _said(results["other_payload"]),
        _(
            "judge a conflict only against the fingerprint `seen` holds: a module-level map "
            "of first fingerprints refuses, in every other store, an operation it never saw"
        ),
    )
    expect(
        answered(results["later"], new=False),
        _(
            "False for {key} three days later in the store that already has it (a late repeat)"
        ).format(key=repr(key)),
        _said(results["later"]),
    )
    # A dedup window longer than three days (a week, a month, as payment providers keep
    # their keys) forgets the key all the same: the store is the memory, for as long as
    # it keeps the key.
    much_later = ns.harness(
        HARNESS + "accept_in_another_store_and_later", key, payload, 86_400 * 400 + 3_601.5
    )["results"]["later"]
    expect(
        answered(much_later, new=False),
        _(
            "False for {key} 400 days later in the store that already has it (a very late "
            "repeat: no dedup window, of a day, a week or a year)"
        ).format(key=repr(key)),
        _said(much_later),
    )
    # Any window forgets at its end, a decade's or a century's: a thousand years later the
    # store still has the key, so the repeat is still a repeat.
    ages_later = ns.harness(HARNESS + "accept_in_another_store_and_later", key, payload, AGES)[
        "results"
    ]["later"]
    expect(
        answered(ages_later, new=False),
        _(
            "False for {key} a thousand years later in the store that already has it (no "
            "dedup window of any length: not two years, not ten, not a century)"
        ).format(key=repr(key)),
        _said(ages_later),
        _(
            "keep no dedup window in accept, however long: a repeat that comes after it "
            "runs the work again, and only the store decides when its keys go"
        ),
    )
    # Another store that holds the key with another payload's fingerprint: a conflict
    # there, whatever this worker answered for the key on the first store (a fast path on
    # the last key and fingerprint it saw answers False from its own memory).
    other_fp = "0" * 64
    two = ns.harness(HARNESS + "accept_in_a_store_that_knows_better", key, payload, other_fp)
    if answered(two["first"], new=True):
        expect(
            "IdempotencyConflict" in two["second"].get("raised", ()),
            _(
                "IdempotencyConflict for {key} on a second `seen` that holds it with another "
                "fingerprint ({fingerprint}...), right after True for it on an empty one"
            ).format(key=repr(key), fingerprint=other_fp[:16]),
            _said(two["second"]),
            _(
                "judge every call by the `seen` it is given: a module-level memory of the "
                "last key (or of any key) answers for a store that holds something else"
            ),
        )
    # The same store, changed between two calls: the key deleted (an operator lets the
    # work run again, or the store expired it), then held with another payload's
    # fingerprint. A memory of this store kept beside it (a cache keyed by the store or by
    # id(seen)) answers both calls from what the store held before.
    changed = ns.harness(HARNESS + "accept_after_the_store_changed", key, payload, other_fp)
    if answered(changed["first"], new=True):
        expect(
            answered(changed["after_delete"], new=True) and changed["kept"],
            _(
                "True for {key} on a `seen` it was stored in and then deleted from (an "
                "operator lets the work run again), and the key stored again"
            ).format(key=repr(key)),
            _("{said}; the key {kept} in `seen` afterwards").format(
                said=_said(changed["after_delete"]),
                kept=_("was") if changed["kept"] else _("was not"),
            ),
            _(
                "look the key up in `seen` at every call: a cache of what this store held "
                "(keyed by the store or by id(seen)) still answers False when the key is gone"
            ),
        )
        expect(
            "IdempotencyConflict" in changed["after_replace"].get("raised", ()),
            _(
                "IdempotencyConflict for {key} once the same `seen` holds another fingerprint "
                "({fingerprint}...) under it"
            ).format(key=repr(key), fingerprint=other_fp[:16]),
            _said(changed["after_replace"]),
        )
    # The store outlives the worker: after a restart (a deploy, a crash) the new worker
    # has only `seen`, and a key it holds is a repeat there too.
    run = ns.harness(HARNESS + "accept_in_a_restarted_worker", key, payload)
    if not answered(run["first"], new=True) or run["restarted"] is None:
        return  # judged above, or no cells to start a worker from (check() in Jupyter)
    expect(
        answered(run["restarted"], new=False),
        _(
            "False for {key} in a worker started afresh (the notebook's cells run again) "
            "on the store that already has it: a repeat after a restart or a deploy"
        ).format(key=repr(key)),
        _said(run["restarted"]),
        _(
            "find the key in `seen` alone: a module-level set or dict of the keys this "
            "worker stored (or of their first-seen times) is empty in a new worker, and "
            "every retry after a deploy runs the work again"
        ),
    )


#: A thousand years and an hour, in seconds: later than the end of any dedup window.
AGES = 86_400 * 365_250 + 3_601.5


@CHECKS.add(
    1,
    "let an error come out of accept, of payload_fingerprint (a payload JSON cannot "
    "encode, a datetime, a set) or of the store `seen` (a lost connection): answering True "
    "without storing anything does the work again at every redelivery",
    severe=True,
)
def unencodable_payload_is_not_new_every_time(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    run = ns.harness(HARNESS + "accept_payload_with_a_datetime", key)
    expect(
        not answered(run["results"][0], new=False),
        _(
            "an error (TypeError from json.dumps), or True, for a key seen for the first "
            "time with a payload holding a datetime"
        ),
        _("{first}; `seen` holds {seen}").format(
            first=_said(run["results"][0]), seen=repr(run["seen"])
        ),
        _(
            "let the error of payload_fingerprint come out of accept: answering False for a "
            "payload it cannot fingerprint skips, as a repeat, work that never ran"
        ),
    )
    got = [r.get("returned") for r in run["results"]]
    expect(
        got != [True, True],
        "an error (TypeError from json.dumps), or False the second time, for the same "
        "key sent twice with a payload holding a datetime",
        _("{first}, then {second}; `seen` holds {seen}").format(
            first=_said(run["results"][0]), second=_said(run["results"][1]), seen=repr(run["seen"])
        ),
    )
    _store_errors_come_out(ns, key)


def _store_errors_come_out(ns: Namespace, key: str) -> None:
    """An error of the store ``seen`` comes out of accept: read or write."""
    run = ns.harness(HARNESS + "accept_on_a_failing_store", key)
    hint = _(
        'catch only what means "not there" (KeyError from seen[key]), or use seen.get(key) '
        "or `key in seen`: an `except Exception` takes a lost connection for a new key"
    )
    expect(
        "raised" in run["unreadable"],
        _(
            "an error (the store's ConnectionLost) from accept for {key} on a `seen` that "
            "cannot be read: it may hold the key"
        ).format(key=repr(key)),
        _said(run["unreadable"]),
        hint,
    )
    expect(
        "raised" in run["unwritable"],
        _(
            "an error (the store's ConnectionLost) from accept for {key} on a `seen` whose "
            "write failed: the fingerprint was not stored, so a redelivery would run the "
            "work again"
        ).format(key=repr(key)),
        _said(run["unwritable"]),
        _(
            "let the store's error out of accept: answering True for a key it could not "
            "store does the work now and again at every redelivery"
        ),
    )


#: A busy day's worth of operations: more than any bound a "tidy" store might keep.
LONG_DAY = 20_000
#: Months of operations, written into the store at once (as loading it would), for a
#: bound larger than a day's keys (a cap of 100,000).
MONTHS_OF_KEYS = 150_000


# 30 s, not the default: an accept that scans `seen` (key in list(seen)) is slow on 20,000
# keys but forgets none, and a timeout would cap it as severe.
@CHECKS.add(
    2,
    "`seen` remembers every key it is given, however many: a store that drops its oldest "
    "keys to stay small (a cap of 1000 entries, an LRU) answers True again for an old "
    "key's retry, and the work runs twice",
    timeout=30.0,
    severe=True,
)
def accept_forgets_no_key_on_a_long_day(ns: Namespace) -> None:
    run = ns.harness(
        "labkit.grading.exercises.ex01.harness:accept_on_a_long_day", LONG_DAY, MONTHS_OF_KEYS
    )
    repeat, conflict = run["repeat"], run["conflict"]
    expect(
        answered(repeat, False) and run["kept"] == LONG_DAY and run["first_kept"],
        _(
            "after {count} different keys, `seen` holding all {count} and a False for the "
            "first key's retry"
        ).format(count=LONG_DAY),
        _("{answer} for the retry, {kept} keys kept").format(
            answer=_said(repeat), kept=run["kept"]
        ),
    )
    expect(
        "raised" in conflict and "IdempotencyConflict" in conflict["raised"],
        _("IdempotencyConflict for the first key with another payload, after {count} keys").format(
            count=LONG_DAY
        ),
        _said(conflict),
    )
    crowded = run["crowded"]
    if crowded is None:
        return  # the store had lost keys already: judged above
    expect(
        answered(crowded["new"], True)
        and answered(crowded["repeat"], False)
        and crowded["kept"] == MONTHS_OF_KEYS + 1,
        _(
            "in a `seen` holding {count} keys (months of work, loaded from disk), True for "
            "a new key, then False for the first key's retry, and all {kept} keys kept"
        ).format(count=MONTHS_OF_KEYS, kept=MONTHS_OF_KEYS + 1),
        _("{new} for the new key, {answer} for the retry, {kept} keys kept").format(
            new=_said(crowded["new"]), answer=_said(crowded["repeat"]), kept=crowded["kept"]
        ),
        _(
            "no bound on `seen`, however large: a cap (of 50,000 or 100,000 keys) or a "
            "clear() when it grows drops old keys, and their retries run again"
        ),
    )
    # A bound larger than months of keys (a million, 2**20, a few GiB of memory) meets
    # years of them: a store that counts a billion keys, most of them on disk.
    vast = ns.harness(HARNESS + "accept_in_a_vast_store", YEARS_OF_KEYS)
    said = vast["results"]
    expect(
        answered(said["first"], True)
        and answered(said["new"], True)
        and answered(said["repeat"], False)
        and vast["first_kept"]
        and vast["kept"] == YEARS_OF_KEYS + 2,
        _(
            "in a `seen` whose len() counts {count} keys (years of work, most of them on "
            "disk), True for a new key, then False for the retry of a key it held, and all "
            "{kept} keys kept"
        ).format(count=f"{YEARS_OF_KEYS:,}", kept=f"{YEARS_OF_KEYS + 2:,}"),
        _("{new} for the new key, {answer} for the retry, {kept} keys kept").format(
            new=_said(said["new"]), answer=_said(said["repeat"]), kept=f"{vast['kept']:,}"
        ),
        _(
            "no bound on `seen` of any size, neither on len(seen) nor on its memory "
            "(sys.getsizeof): a store holds years of keys, and a cap of a million (or a "
            "clear() past 64 MiB) drops keys whose retries then run again"
        ),
    )
    _accept_calls_past_every_bound(ns)


#: Years of a busy service's keys: more than any bound on the store's size.
YEARS_OF_KEYS = 1_000_000_000

#: The largest number written in accept's code that ``_accept_calls_past_every_bound``
#: calls accept just past with new keys: 300,000 cheap calls take about a sixth of a
#: second. Up to ``CALLS_DRIVEN`` (a million, 2**20), accept is called that many times for
#: one key again: a bound counted in calls (not keys) is met in about as long, when the
#: budget allows (a million calls of a lean accept fit in it; of a heavier one, not).
KEYS_DRIVEN = 300_000
CALLS_DRIVEN = 1_100_000
#: The CPU seconds (on a quiet machine: ``caps._slowness``) the cheap calls may take in
#: all, or be seen to need from their start, before the check stops judging them: an
#: accept slow on each call is not judged here, and a right one holding large numbers
#: for other reasons pays no more than this.
CALLS_SECONDS = 0.25


def _accept_calls_past_every_bound(ns: Namespace) -> None:
    """A bound on ``seen`` counted in accept's calls or in the keys it kept on its own (a
    counter that clears ``seen`` every 100,000 calls, a deque or LRU of the last N keys)
    is a number written in accept's code: accept is called just past the largest one
    (hours in seconds and minutes in milliseconds are periods, not bounds)."""
    written = ns.harness(HARNESS + "ints_written_in", ["accept"])
    bounds = [n for n in written if LONG_DAY < n <= CALLS_DRIVEN and n % 3600 and n % 60_000]
    keyed = [n for n in bounds if n <= KEYS_DRIVEN]
    budget = CALLS_SECONDS
    for top, new_keys in ((max(keyed, default=0), True), (max(bounds, default=0), False)):
        if not top or (not new_keys and top <= KEYS_DRIVEN):
            continue
        run = ns.harness(HARNESS + "accept_past_calls", top + 2, budget, new_keys)
        if run is None:
            return  # too slow to reach the bound cheaply: not judged
        budget -= run["spent"]
        expect(
            answered(run["repeat"], False) and run["first_kept"],
            (
                _(
                    "after a first key and {count} calls of accept with new keys, the first "
                    "key still in `seen` and False for its retry"
                )
                if new_keys
                else _(
                    "after a first key and {count} calls of accept for one other key, the "
                    "first key still in `seen` and False for its retry"
                )
            ).format(count=f"{run['calls']:,}"),
            (
                _("{answer} for the retry; the first key was still in `seen`")
                if run["first_kept"]
                else _("{answer} for the retry; the first key was gone from `seen`")
            ).format(answer=_said(run["repeat"])),
            _(
                "count nothing to bound `seen`: a counter that clears it every N calls, or a "
                "deque or LRU of the last N keys that deletes the oldest from it, drops keys "
                "whose retries then run again"
            ),
        )


@CHECKS.add(
    1,
    "compute the fingerprint before you touch `seen`: an entry written first (a "
    "placeholder, to reserve the key) stays behind when the fingerprint fails, and the "
    "sender's fixed payload is refused as a conflict at every retry",
    severe=True,
)
def a_failed_fingerprint_leaves_seen_alone(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    run = ns.harness(HARNESS + "accept_after_an_unencodable_payload", key)
    first, fixed = run["results"]
    if "raised" not in first:
        return  # encoded some other way: unencodable_payload_is_not_new_every_time judges it
    expect(
        answered(fixed, True),
        _(
            "True for {key} sent again with its date as text, after accept raised for the "
            "payload holding a datetime"
        ).format(key=key),
        _("{answer}; `seen` holds {seen}").format(answer=_said(fixed), seen=repr(run["seen"])),
    )


#: A payload with what must never reach a log: a card number and an e-mail address.
PRIVATE: dict[str, Any] = {
    "card_number": "4111111111111111",
    "email": "ana@example.com",
    "amount_cents": 1990,
}


@CHECKS.add(
    1,
    "name the key in the IdempotencyConflict message, not the payload: payloads carry card "
    "numbers and addresses, and the message goes to logs many people read (show the "
    "fingerprints if you must show something)",
    severe=True,
)
def conflict_message_keeps_the_payload_out(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    changed = {**PRIVATE, "amount_cents": 2990}
    calls = [[key, dict(PRIVATE)], [key, dict(PRIVATE)], [key, changed]]
    run = ns.harness(HARNESS + "accept_calls_logged", calls)
    secrets = [str(v) for v in (PRIVATE["card_number"], PRIVATE["email"])]
    # A new key and a repeat are logged as long as a conflict: no payload there either.
    for what, said in zip((_("a new key"), _("a repeat")), run["results"][:2], strict=True):
        printed = said.get("printed", "")
        leaked = [v for v in secrets if v in printed]
        expect(
            not leaked,
            _(
                "nothing of the payload printed or logged by accept for {what} (the payload "
                "held the card number {card} and the e-mail {email})"
            ).format(what=what, card=PRIVATE["card_number"], email=PRIVATE["email"]),
            _("accept printed or logged {leaked}: {lines}").format(
                leaked=", ".join(leaked),
                lines=repr(
                    " | ".join(
                        line.strip()
                        for line in printed.splitlines()
                        if any(v in line for v in leaked)
                    )[:200]
                ),
            ),
            _(
                "log the key (and the fingerprint, if you like), never the payload: a log "
                "line that shows it for every new operation or repeat keeps card numbers "
                "and addresses where many people read them"
            ),
        )
    said = run["results"][2]
    if "IdempotencyConflict" not in said.get("raised", ()):
        return  # accept_conflict judges the missing conflict
    # The error as a log shows it (logging.exception): its notes (add_note) and the errors
    # chained to it are printed with the message, so a payload put there leaks as well.
    # And what the call printed or logged on its way to the error (a warning that shows
    # the payload "for debugging" is kept as long as the log).
    logged = said.get("logged", said.get("message", "")) + "\n" + said.get("printed", "")
    leaked = [v for v in secrets if v in logged]
    lines = [line.strip() for line in logged.splitlines() if any(v in line for v in leaked)]
    expect(
        not leaked,
        _(
            "an IdempotencyConflict message that names the key but none of the payload's "
            "values (the payload held the card number {card} and the e-mail {email})"
        ).format(card=PRIVATE["card_number"], email=PRIVATE["email"]),
        _(
            "the error as logged (its message, notes and chained errors), with what accept "
            "printed or logged, shows {leaked}: {lines}"
        ).format(leaked=", ".join(leaked), lines=repr(" | ".join(lines)[:200])),
        _(
            "put the key (and the fingerprints, if you like) in the message, never the "
            "payload or its fields, nor in a note (add_note), an error chained to it, a "
            "print or a log line: a log keeps them all"
        ),
    )


@CHECKS.add(
    1,
    "raise the IdempotencyConflict imported from labkit.errors, not a class of your own "
    "with that name: the code that calls accept catches labkit's, and yours goes past it",
)
def conflict_is_labkits_exception(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    run = ns.harness(
        HARNESS + "accept_calls",
        [[key, {"amount_cents": 1990}], [key, {"amount_cents": 2990}]],
    )
    said = run["results"][1]
    if "IdempotencyConflict" not in said.get("raised", ()):
        return  # accept_conflict judges the missing conflict
    expect(
        "LabkitError" in said["raised"],
        _(
            "labkit.errors.IdempotencyConflict (a LabkitError) for the same key sent with "
            "amount_cents 1990, then 2990"
        ),
        _("an IdempotencyConflict of another family: {classes}").format(
            classes=" < ".join(said["raised"])
        ),
        _(
            "use the IdempotencyConflict the first cell imports (from labkit.errors import "
            "IdempotencyConflict); a class defined again in the notebook has the same name "
            "but an `except IdempotencyConflict` in the worker does not catch it"
        ),
    )


@CHECKS.add(
    2,
    "write `seen[key]` once, with the fingerprint (seen[key] = fp, or seen.setdefault): a "
    "key written in two steps (a placeholder first, a short fingerprint, a pop and a "
    "re-insert, a write undone on a conflict) is found half-done by a worker reading "
    "`seen` between them, or left so by a crash",
    severe=True,
)
def accept_writes_seen_in_one_step(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    payload, other = {"amount_cents": 1990}, {"amount_cents": 2990}
    said = {"new": _("a new key"), "repeat": _("a repeat"), "conflict": _("a conflict")}
    for row in ns.harness(HARNESS + "accept_on_a_watched_store", key, payload, other):
        between = row["between"]
        expect(
            between is None,
            _(
                "`seen` only ever as it was before the call or as it is after it, at every "
                "write accept makes for {what} ({key}), so a worker reading it in between "
                "(or a crash right then) finds the key stored whole or not at all"
            ).format(what=said[row["what"]], key=repr(key)),
            _(
                "after one of its writes `seen` held {between} (before the call {before}, "
                "after it {after})"
            ).format(between=repr(between), before=repr(row["before"]), after=repr(row["after"])),
            _(
                "compute the fingerprint and compare first, then write once: "
                "seen[key] = fp. A placeholder (None, '', 'pending') makes another worker "
                "run the work again or refuse its retry as a conflict; a pop (or a write) "
                "undone afterwards shows the key missing (or with another fingerprint) "
                "in between"
            ),
        )


@CHECKS.add(
    1,
    "leave the caller's payload as it is: a field written into it (the key, the "
    "fingerprint, a default) or taken out of it makes the same dict, sent again by a retry "
    "loop, another payload, refused as a conflict (or a changed one taken for a repeat)",
)
def accept_leaves_the_payload_alone(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    payload = {"amount_cents": 1990, "attempt": 1, "currency": "BRL"}
    run = ns.harness(HARNESS + "accept_the_same_dict_again", key, payload)
    first, again = run["results"]
    expect(
        answered(first, new=True) and answered(again, new=False) and not run["changed"],
        _(
            "True, then False, for {key} sent twice as the very same dict {payload}, and "
            "that dict unchanged"
        ).format(key=repr(key), payload=repr(payload)),
        _("{first}, then {again}; accept changed the fields {changed} of the caller's dict").format(
            first=_said(first), again=_said(again), changed=repr(run["changed"])
        )
        if run["changed"]
        else _("{first}, then {again}").format(first=_said(first), again=_said(again)),
        _(
            "read the payload, never write into it: fingerprint it as it is, and keep the key "
            "and the fingerprint in `seen` only"
        ),
    )


#: Another worker's operation, run (on a store of its own) while accept reads `seen`.
OTHER_WORKER = ("billing:43:refund:v1", {"amount_cents": 700, "reason": "damaged"})


@CHECKS.add(
    1,
    "keep each call's key and fingerprint in local variables: a module-level (or a shared "
    "object's) scratch value is rewritten by another thread's call in between, and one "
    "operation's fingerprint is stored, or compared, under another's key",
    severe=True,
)
def accept_keeps_each_call_to_itself(ns: Namespace) -> None:
    key, payload = "billing:42:charge:v1", {"amount_cents": 1990}
    changed = {"amount_cents": 2990}
    rows = ns.harness(HARNESS + "accept_between_two_workers", key, payload, changed, *OTHER_WORKER)
    said = {"new": _("a new key"), "repeat": _("a repeat"), "conflict": _("a conflict")}
    for row in rows:
        expect(
            _answer_of_accept(row["result"]) == _answer_of_accept(row["alone"])
            and row["seen"] == row["seen_alone"]
            and _answer_of_accept(row["other"]) == _answer_of_accept(row["other_alone"])
            and row["other_seen"] == row["other_seen_alone"],
            _(
                "for {what} ({key}), interrupted while it read `seen` by another thread's "
                "call for {other} (new, on a store of its own), the same answers and stores "
                "as when each call runs alone: {alone}, `seen` {seen}; {other_alone}, its "
                "store {other_seen}"
            ).format(
                what=said[row["what"]],
                key=repr(key),
                other=repr(OTHER_WORKER[0]),
                alone=_said(row["alone"]),
                seen=row["seen_alone"],
                other_alone=_said(row["other_alone"]),
                other_seen=row["other_seen_alone"],
            ),
            _("{said}, `seen` then {seen}; the other call {other}, its store {other_seen}").format(
                said=_said(row["result"]),
                seen=row["seen"],
                other=_said(row["other"]),
                other_seen=row["other_seen"],
            ),
            _(
                "threads share the module: a fingerprint or a key kept in a global, a class "
                "attribute or one shared object (self.fp) is another call's by the time you "
                "read it back. Keep them in local variables"
            ),
        )

    # The same key, sent by another thread to another tenant's store (empty) while this
    # call reads `seen`: two stores, two operations, each new. An in-flight guard kept
    # beside the stores (a module-level set of the keys being accepted) answers the second
    # from the first, False (or an error), and that tenant's work never runs.
    [row] = ns.harness(
        HARNESS + "accept_between_two_workers", key, payload, changed, key, payload, ["new"]
    )
    expect(
        answered(row["result"], new=True)
        and answered(row["other"], new=True)
        and row["other_seen"] == row["other_seen_alone"],
        _(
            "True for {key} on an empty `seen`, and True too for the same key sent, while "
            "accept read that `seen`, by another thread to another tenant's store (empty), "
            "the key stored there"
        ).format(key=repr(key)),
        _("{said}; the other thread's call {other}, its store then {other_seen}").format(
            said=_said(row["result"]), other=_said(row["other"]), other_seen=row["other_seen"]
        ),
        _(
            "judge each call by the `seen` it is given, nothing else: a module-level set of "
            "the keys being accepted (an in-flight guard) answers, for another store, from "
            "a call that has nothing to do with it. Hold a lock if you must, but never "
            "answer from it"
        ),
    )

    # A module lock waited for with a timeout (acquire(timeout=1)), then an answer given
    # without reading `seen` (False, "a repeat"; True; an error): the other worker's call
    # waits longer than that while this one holds the lock (a slow store), and its new
    # operation is skipped or done twice.
    [row] = ns.harness(
        HARNESS + "accept_between_two_workers",
        key,
        payload,
        changed,
        *OTHER_WORKER,
        ["new"],
        LONG_PATIENCE,
    )
    expect(
        answered(row["result"], new=True)
        and answered(row["other"], new=True)
        and row["other_seen"] == row["other_seen_alone"],
        _(
            "True for {key} on an empty `seen`, and True too for {other} (new, on a store of "
            "its own) sent by another thread that waits {wait:g} s while this call reads "
            "`seen`, the other key stored there"
        ).format(key=repr(key), other=repr(OTHER_WORKER[0]), wait=LONG_PATIENCE),
        _("{said}; the other thread's call {other}, its store then {other_seen}").format(
            said=_said(row["result"]), other=_said(row["other"]), other_seen=row["other_seen"]
        ),
        _(
            "wait for a lock you take as long as it takes (no timeout), or take none: an "
            "answer given when the lock stays busy, without reading `seen`, skips a new "
            "operation or does one twice"
        ),
    )

    # Another thread fingerprints another payload while this call writes the JSON of its
    # lines: a buffer (io.StringIO), an encoder or a hash object kept at module level and
    # reused by both calls mixes the other payload's text into this one's fingerprint.
    row = ns.harness(
        HARNESS + "fingerprint_between_two_threads",
        INTERRUPTED_PAYLOAD,
        "lines",
        OTHER_WORKER[1],
    )
    expect(
        _answer_of_accept(row["result"]) == _answer_of_accept(row["alone"])
        and _answer_of_accept(row["other"]) == _answer_of_accept(row["other_alone"]),
        _(
            "the same fingerprint for {payload} when another thread fingerprints {other} "
            "while this call writes its JSON: {alone}, and {other_alone} for the other"
        ).format(
            payload=INTERRUPTED_PAYLOAD,
            other=OTHER_WORKER[1],
            alone=_said(row["alone"]),
            other_alone=_said(row["other_alone"]),
        ),
        _("{said}; the other thread's call {other}").format(
            said=_said(row["result"]), other=_said(row["other"])
        ),
        _(
            "threads share the module: a buffer (io.StringIO), an encoder or a hash object "
            "kept at module level and reused by every call is written by another thread's "
            "call in between. Make them anew in each call"
        ),
    )


#: A payload with nested fields, written by json while another thread fingerprints too.
INTERRUPTED_PAYLOAD: dict[str, Any] = {
    "amount_cents": 1990,
    "lines": {"sku": "A-1", "quantity": 2},
    "note": "gift",
}


def _answer_of_accept(result: dict[str, Any]) -> Any:
    """What a call answered, its error's classes for an error (not its message)."""
    return ("raised", result["raised"]) if "raised" in result else result.get("returned")


@CHECKS.add(
    1,
    "name the call's own key in the IdempotencyConflict message: a key kept in a global "
    "for the message is another thread's by the time the conflict is raised",
)
def conflict_names_its_own_key_between_calls(ns: Namespace) -> None:
    key, payload = "billing:42:charge:v1", {"amount_cents": 1990}
    rows = ns.harness(
        HARNESS + "accept_between_two_workers", key, payload, {"amount_cents": 2990}, *OTHER_WORKER
    )
    said = rows[-1]["result"]
    if "IdempotencyConflict" not in said.get("raised", ()):
        return  # accept_keeps_each_call_to_itself judges the missing conflict
    expect(
        key in said.get("message", ""),
        _(
            "an IdempotencyConflict message naming {key}, though another thread's call for "
            "{other} ran while accept read `seen`"
        ).format(key=repr(key), other=repr(OTHER_WORKER[0])),
        _said(said),
    )


@CHECKS.add(
    1,
    "when payload_fingerprint raises (json.dumps cannot encode a datetime, a set, a "
    "Decimal, bytes), accept raises that error too, stores nothing, and makes up no "
    "fingerprint of its own (repr(), default=str) nor calls it an IdempotencyConflict",
)
def accept_fails_as_the_fingerprint_does(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    for row in ns.harness(HARNESS + "accept_what_the_fingerprint_refuses", key):
        if "raised" not in row["fingerprint"]:
            continue  # a fingerprint that encodes it: fingerprints_of_values_and_their_text
        got = row["accept"]
        expect(
            "raised" in got and "IdempotencyConflict" not in got["raised"] and not row["seen"],
            _(
                "the error payload_fingerprint raises ({error}) from accept for a new key "
                "with a payload holding {kind}, and nothing stored"
            ).format(error=row["fingerprint"]["raised"][0], kind=row["kind"]),
            _("{said}; `seen` holds {seen}").format(said=_said(got), seen=row["seen"]),
            _(
                "fingerprint with payload_fingerprint and let its error out: a fallback "
                "(repr(), json.dumps(default=str)) stores a fingerprint the contract never "
                "makes (a datetime and its text alike, a set in this process's order), and "
                "an IdempotencyConflict tells the caller a key came back with another payload"
            ),
        )
