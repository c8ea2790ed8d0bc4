"""Exercise 1's checks of ``idempotency_key``: stable, naming the whole intent (no two
intents share a key: case, accents, padding, long ids, separators), the same whatever
the clock and in another process."""

from __future__ import annotations

import random
import string
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Namespace, StudentRaised, expect
from labkit.grading.exercises.ex01.built_ids import aware, day, naive, shown
from labkit.grading.exercises.ex01.intents import (
    _WORD,
    CHECKS,
    HARNESS,
    INTENTS,
    SAMPLE_CALLS,
    _said,
    built_key_pairs,
)
from labkit.grading.exercises.helpers import holds_for
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.lang import _


@CHECKS.add(
    2,
    "build the key only from the arguments (source, entity, action, version): "
    "no uuid4(), no random, nothing that changes per call",
    severe=True,
)
def key_is_stable(ns: Namespace) -> None:
    first = ns.operation_key("billing", 42, "charge")
    again = ns.operation_key("billing", 42, "charge")
    expect(isinstance(first, str), "a str", type(first).__name__)
    expect(
        first == again,
        "the same key for the same intent, call after call",
        _("{first}, then {again}").format(first=repr(first), again=repr(again)),
    )
    explicit = ns.operation_key("billing", 42, "charge", version=1)
    expect(
        explicit == first,
        "version=1 to be the default",
        _("{without_version} without version, {with_version} with version=1").format(
            without_version=repr(first), with_version=repr(explicit)
        ),
    )

    def same_twice(intent: tuple[str, Any, str, int]) -> None:
        a, b = ns.operation_key(*intent), ns.operation_key(*intent)
        expect(
            a == b,
            _("the same key twice for {intent}").format(intent=repr(intent)),
            _("{first}, then {again}").format(first=repr(a), again=repr(b)),
        )

    holds_for(INTENTS, same_twice, examples=30)


@CHECKS.add(
    2,
    "put every part of the intent into the key, as it is: source, entity id, action "
    "and version (no lower(), no strip(), no truncation, no accents stripped, no int() of "
    "the id: 'INV-7' and 'inv-7', 'José' and 'Jose', '0042' and 42 are two intents, and two "
    "intents sharing a key means the second one is skipped as a repeat)",
    severe=True,
)
def key_names_the_intent(ns: Namespace) -> None:
    base = ns.operation_key("billing", 42, "charge")
    variants = {
        _("another entity (43)"): ns.operation_key("billing", 43, "charge"),
        _("another action (refund)"): ns.operation_key("billing", 42, "refund"),
        _("another source (erp)"): ns.operation_key("erp", 42, "charge"),
        _("version 2"): ns.operation_key("billing", 42, "charge", version=2),
    }
    for what, key in variants.items():
        expect(
            key != base,
            _("a different key for {what}").format(what=what),
            _("{key} for both").format(key=repr(key)),
        )

    def two_intents(pair: tuple[tuple[str, Any, str, int], tuple[str, Any, str, int]]) -> None:
        a, b = pair
        if a == b or str(a[1]) == str(b[1]) and a[::2] == b[::2] and a[3] == b[3]:
            return  # the same intent (42 and "42" may share a key)
        ka, kb = _key_or_refusal(ns, a), _key_or_refusal(ns, b)
        if ka is _REFUSED or kb is _REFUSED:
            return  # refused loudly: no key, so no key shared either
        expect(
            ka != kb,
            _("different keys for {first} and {second}").format(first=repr(a), second=repr(b)),
            _("{key} for both").format(key=repr(ka)),
        )

    for pair in (*TWINS, *COLON_TWINS):
        two_intents(pair)
    _built_twins_differ(ns)
    # An int id zero-padded to a width ('0000000042' for 42, to make keys sort): a text id
    # written that way is another intent, whatever the width.
    for n in (0, 7, 42, 31_337):
        for width in range(len(str(n)) + 1, 21):
            two_intents((_with_part(1, str(n).zfill(width)), _with_part(1, n)))
    pairs = st.one_of(
        CASE_PAIRS, LONG_ID_PAIRS, FOLDED_PAIRS, PADDED_PAIRS, st.tuples(INTENTS, INTENTS)
    )
    holds_for(pairs, two_intents, 60)


#: Two intents whose entity ids are objects, built beside the student's code
#: (``built_ids``): a nightly run's instant written whole (its date alone, or its time cut
#: to the second, gives two runs one key), a day written as itself (not as its week), and
#: one wall time in two zones, two instants (a key with the zone dropped gives them one).
BUILT_TWINS: list[tuple[list[Any], list[Any]]] = [
    (["cron", naive(2026, 12, 4, 2, 30), "nightly-report", 1],
     ["cron", naive(2026, 12, 4, 14, 30), "nightly-report", 1]),
    (["cron", naive(2026, 12, 4, 2, 30), "nightly-report", 1],
     ["cron", naive(2026, 12, 4, 2, 30, 0, 250_000), "nightly-report", 1]),
    (["cron", day(2026, 12, 1), "daily-report", 1],
     ["cron", day(2026, 12, 2), "daily-report", 1]),
    (["cron", aware(0, 2026, 12, 4, 2, 30), "nightly-report", 1],
     ["cron", aware(9 * 60, 2026, 12, 4, 2, 30), "nightly-report", 1]),
]  # fmt: skip


def _built_twins_differ(ns: Namespace) -> None:
    """``BUILT_TWINS`` get two keys each (or are refused loudly, ValueError or TypeError)."""
    for n, a, b in built_key_pairs(ns, BUILT_TWINS):
        first, second = BUILT_TWINS[n]
        both = "returned" in a and "returned" in b
        expect(
            both and a["returned"] != b["returned"],
            _("different keys for {first} and {second}").format(
                first=shown(first), second=shown(second)
            ),
            _("{key} for both").format(key=repr(a["returned"]))
            if both
            else _said(b if "returned" in a else a),
            _(
                "write the entity id as str() writes it, whatever its type: a datetime id "
                "is its date and time to the microsecond, with its zone when it has one; "
                "its date alone, its time to the second or the zone dropped gives two "
                "runs one key, and the second one is skipped as a repeat"
            ),
        )


#: What ``_key_or_refusal`` answers for an intent that operation_key refused with an error.
_REFUSED = object()


def _key_or_refusal(ns: Namespace, intent: tuple[str, Any, str, int]) -> Any:
    """``operation_key(*intent)``; ``_REFUSED`` when it raises ValueError or TypeError for an
    intent a stricter key may refuse: a part holding the separator ':' (the key could not
    be read back), an empty part, or a version below 1. Any other error is the student's,
    reported."""
    try:
        return ns.operation_key(*intent)
    except StudentRaised as exc:
        strict = intent[3] < 1 or any(":" in str(p) or str(p) == "" for p in intent[:3])
        if strict and (exc.is_a("ValueError") or exc.is_a("TypeError")):
            return _REFUSED
        raise


def _with_part(part: int, value: Any) -> tuple[str, Any, str, int]:
    intent: list[Any] = ["billing", 42, "charge", 1]
    intent[part] = value
    return (intent[0], intent[1], intent[2], intent[3])


#: The same word in upper and in lower case, as the source, the entity id or the action.
CASE_PAIRS = st.tuples(st.integers(0, 2), _WORD.filter(lambda w: w.lower() != w.upper())).map(
    lambda pw: (_with_part(pw[0], pw[1].upper()), _with_part(pw[0], pw[1].lower()))
)


#: Long entity ids that differ only in their last character (a truncated key loses it).
LONG_ID_PAIRS = st.one_of(
    st.tuples(_WORD, _WORD, st.sampled_from("0123456789"), st.sampled_from("abcXYZ")).map(
        lambda t: (
            _with_part(1, f"{t[0]}-{t[1]}-{t[0]}{t[2]}"),
            _with_part(1, f"{t[0]}-{t[1]}-{t[0]}{t[3]}"),
        )
    ),
    st.integers(10**9, 10**15).map(lambda n: (_with_part(1, n), _with_part(1, n + 1))),
    # Longer than any column a key might be cut to (64, 128, 255 characters).
    st.tuples(_WORD, st.integers(300, 600)).map(
        lambda t: (
            _with_part(1, (f"{t[0]}-" * t[1])[: t[1]] + "1"),
            _with_part(1, (f"{t[0]}-" * t[1])[: t[1]] + "2"),
        )
    ),
)


#: Letters an ASCII "slug" of the key folds into others: 'José' and 'Jose' are two customers.
FOLDED = (("é", "e"), ("ç", "c"), ("ã", "a"), ("ñ", "n"), ("ü", "u"), ("ø", "o"))


#: A word with a non-ASCII letter and the same word with the letter folded to ASCII.
FOLDED_PAIRS = st.tuples(st.integers(0, 2), _WORD, st.sampled_from(FOLDED)).map(
    lambda t: (_with_part(t[0], t[1] + t[2][0]), _with_part(t[0], t[1] + t[2][1]))
)


#: A word and the same word with a blank before or after it: ' INV-7' is not 'INV-7' (a
#: strip() of the parts gives both one key).
PADDED_PAIRS = st.tuples(st.integers(0, 2), _WORD, st.sampled_from((" {}", "{} ", "{}\t"))).map(
    lambda t: (_with_part(t[0], t[2].format(t[1])), _with_part(t[0], t[1]))
)


#: Two intents every run compares: a capital lowered, an accent folded away, an id with
#: leading zeros, blanks stripped from an id or an action, a long id cut short (a key
#: truncated to a column's width).
TWINS: list[tuple[tuple[str, Any, str, int], tuple[str, Any, str, int]]] = [
    (("billing", "INV-7", "charge", 1), ("billing", "inv-7", "charge", 1)),
    (("Billing", 42, "Charge", 1), ("billing", 42, "charge", 1)),
    (("billing", "José", "charge", 1), ("billing", "Jose", "charge", 1)),
    (("billing", "ação", "charge", 1), ("billing", "acao", "charge", 1)),
    (("billing", "0042", "charge", 1), ("billing", 42, "charge", 1)),
    # Version 0 is a version: `version or 1` makes it share version 1's key.
    (("billing", 42, "charge", 0), ("billing", 42, "charge", 1)),
    (("billing", " INV-7", "charge", 1), ("billing", "INV-7", "charge", 1)),
    (("billing", "INV-7", "charge ", 1), ("billing", "INV-7", "charge", 1)),
    (("billing", "x" * 300 + "1", "charge", 1), ("billing", "x" * 300 + "2", "charge", 1)),
    # A key "made safe": blanks, dots and ':' replaced, non-ASCII letters replaced or
    # dropped, the version cut to one digit.
    (("billing", "INV 7", "charge", 1), ("billing", "INV_7", "charge", 1)),
    (("billing", "INV 7", "charge", 1), ("billing", "INV-7", "charge", 1)),
    (("billing", 42, "charge card", 1), ("billing", 42, "charge_card", 1)),
    (("billing", "a.b", "charge", 1), ("billing", "a_b", "charge", 1)),
    (("billing", "INV:7", "charge", 1), ("billing", "INV-7", "charge", 1)),
    (("crm", "Müller", "sync", 1), ("crm", "Möller", "sync", 1)),
    (("crm", "北京", "sync", 1), ("crm", "上海", "sync", 1)),
    (("crm", "José", "sync", 1), ("crm", "Jos", "sync", 1)),
    (("billing", 42, "charge", 1), ("billing", 42, "charge", 11)),
    # An int id wrapped to a column's width (% 2**31, ctypes.c_int64): 42 + 2**64 is not 42.
    (("billing", 42 + 2**64, "charge", 1), ("billing", 42, "charge", 1)),
    # A version written as a float ('{:g}' keeps 6 digits: v1234567 and v1234568 alike).
    (("billing", 42, "charge", 1234567), ("billing", 42, "charge", 1234568)),
    # A key "normalised" with NFKC folds compatibility characters into others: the
    # fullwidth 'ＩＮＶ-４２' and 'INV-42', the ligature 'ﬁ' and 'fi' are other ids.
    (("billing", "ＩＮＶ-４２", "charge", 1), ("billing", "INV-42", "charge", 1)),
    (("crm", "Ofﬁce-7", "sync", 1), ("crm", "Office-7", "sync", 1)),
    # A source cut at its first dot (a module-like name), a run of blanks collapsed, a
    # tab made a blank, '/' made '-' (a key used as a file name), quotes dropped (a key
    # "made safe" for SQL), a source or an action cut to a short width.
    (("billing.eu", 42, "charge", 1), ("billing.us", 42, "charge", 1)),
    (("billing", "INV  7", "charge", 1), ("billing", "INV 7", "charge", 1)),
    (("billing", "INV\t7", "charge", 1), ("billing", "INV 7", "charge", 1)),
    (("billing", "INV\t7", "charge", 1), ("billing", "INV    7", "charge", 1)),
    (("shop/eu", 42, "charge", 1), ("shop-eu", 42, "charge", 1)),
    # A source tidied like a path ('/' stripped off its ends): 'shop/' is another source.
    (("shop/", 42, "charge", 1), ("shop", 42, "charge", 1)),
    (("crm", "d'Ávila", "sync", 1), ("crm", "dÁvila", "sync", 1)),
    (("billing-europe-west-1", 42, "charge", 1), ("billing-europe-west-2", 42, "charge", 1)),
    (("billing", 42, "charge-and-capture-part", 1), ("billing", 42, "charge-and-capture-full", 1)),
    # A key stripped whole (a blank before the source), a newline made a blank or cut off
    # the end of an id (a key "made safe" for one-line logs).
    ((" billing", 42, "charge", 1), ("billing", 42, "charge", 1)),
    (("billing", "INV\n7", "charge", 1), ("billing", "INV 7", "charge", 1)),
    (("billing", "INV-7\n", "charge", 1), ("billing", "INV-7", "charge", 1)),
    # A line's end cut off a part (an id read from a CSV written with '\r\n'), a newline
    # escaped as the two characters '\' 'n', blanks percent-encoded (or '%20' decoded), a
    # byte-order mark or a zero-width space dropped: each is another id, as given.
    (("billing", "INV-7\r", "charge", 1), ("billing", "INV-7", "charge", 1)),
    (("billing", 42, "charge\r\n", 1), ("billing", 42, "charge", 1)),
    (("billing", "INV\n7", "charge", 1), ("billing", "INV\\n7", "charge", 1)),
    (("billing", "INV 7", "charge", 1), ("billing", "INV%207", "charge", 1)),
    (("billing", "\ufeffINV-7", "charge", 1), ("billing", "INV-7", "charge", 1)),
    (("billing", "INV\u200b7", "charge", 1), ("billing", "INV7", "charge", 1)),
    # A float id written short ('{:g}' keeps 6 digits, round() or '%.2f' 2 decimals): two
    # ids that differ further down share a key.
    (("billing", 1234567.0, "charge", 1), ("billing", 1234568.0, "charge", 1)),
    (("billing", 0.125, "charge", 1), ("billing", 0.124, "charge", 1)),
    # Each part has its place: a key made of the parts sorted ("canonical", like
    # sort_keys) gives a source and an id swapped one key.
    (("billing", "erp", "charge", 1), ("erp", "billing", "charge", 1)),
    (("crm", "sync-7", "refund", 1), ("crm", "refund", "sync-7", 1)),
    # Dashes are part of an id: 'INV-7-1' and 'INV-71' are two invoices (an id "tidied"
    # with replace('-', '') gives both one key).
    (("billing", "INV-7-1", "charge", 1), ("billing", "INV-71", "charge", 1)),
    # The same letters, decomposed ('c' + U+0327) and composed ('ç'): a key "normalised"
    # with NFC (so a name typed on a Mac and on Linux agrees) gives both one key.
    (("crm", "Conceic\u0327a\u0303o", "sync", 1), ("crm", "Conceição", "sync", 1)),
    # Quotes around an id are part of it: an id "unquoted" (strip('"'), as a CSV field or a
    # quoted header value is) gives '"INV-7"' and 'INV-7' one key.
    (("billing", '"INV-7"', "charge", 1), ("billing", "INV-7", "charge", 1)),
    # A long source or action (a service's full name, an action with its variant) kept
    # whole: a key that cuts them to a column's width (source[:32], action[:64]) gives two
    # of them, apart only past the cut, one key.
    (_with_part(0, "billing-" + "x" * 300 + "1"), _with_part(0, "billing-" + "x" * 300 + "2")),
    (_with_part(2, "charge-" + "x" * 300 + "1"), _with_part(2, "charge-" + "x" * 300 + "2")),
    # A source or an action "slugged" as an id may not be: blanks made '-' or '_', '-'
    # and '_' made one another. And an id's prefix is part of it: '#42' and 'INV-42' (a
    # key that strips '#' or removeprefix('INV-')) are not the invoice 42.
    (_with_part(0, "shop eu"), _with_part(0, "shop-eu")),
    (_with_part(0, "shop eu"), _with_part(0, "shop_eu")),
    (_with_part(0, "shop-eu"), _with_part(0, "shop_eu")),
    (_with_part(2, "charge full"), _with_part(2, "charge-full")),
    (_with_part(2, "charge_full"), _with_part(2, "charge-full")),
    (_with_part(1, "#42"), _with_part(1, 42)),
    (_with_part(1, "INV-42"), _with_part(1, "42")),
    # A float id written to a fixed precision (f'{id:.6f}', round(id, 6), '%.10g'): two
    # ids apart in a later digit share a key. str() writes the float's every digit.
    (_with_part(1, 0.30000000000000004), _with_part(1, 0.3)),
    (_with_part(1, 1234567.1234567), _with_part(1, 1234567.1234568)),
    # Characters an id "tidied" loses: a backslash made '/', quotes of either kind
    # stripped, a run of dashes collapsed. And a negative version is not its positive
    # twin (abs(version)); a key may refuse it, as any version below 1.
    (_with_part(1, "INV\\7"), _with_part(1, "INV/7")),
    (_with_part(1, "'INV-7'"), _with_part(1, "INV-7")),
    (_with_part(1, "INV--7"), _with_part(1, "INV-7")),
    (("billing", 42, "charge", -2), ("billing", 42, "charge", 2)),
    # Typography "normalised" in an id copied from a document: a no-break space made a
    # blank, an en dash made '-', a curly apostrophe made a straight one. Each is another id.
    (_with_part(1, "INV\u00a07"), _with_part(1, "INV 7")),
    (_with_part(1, "INV\u20137"), _with_part(1, "INV-7")),
    (_with_part(1, "d\u2019\u00c1vila"), _with_part(1, "d'\u00c1vila")),
    # An empty part is a part: a key joined from the parts that are not empty
    # (':'.join(filter(None, parts))) gives an empty id and an empty action swapped one key.
    # A key may refuse an empty part instead, loudly.
    (("billing", "", "charge", 1), ("billing", "charge", "", 1)),
    (("", "billing", "charge", 1), ("billing", "", "charge", 1)),
    # A NUL character dropped (PostgreSQL's text refuses it): 'INV\x007' is not 'INV7'.
    (_with_part(1, "INV\x007"), _with_part(1, "INV7")),
    # An id "tidied" as text read from a page or a sentence: HTML entities decoded
    # ('R&amp;D-7' is not 'R&D-7'), a soft hyphen dropped, a trailing dot stripped off
    # ('INV-7.' is not 'INV-7'). Each is another id, as given.
    (_with_part(1, "R&amp;D-7"), _with_part(1, "R&D-7")),
    (_with_part(1, "INV\u00ad7"), _with_part(1, "INV7")),
    (_with_part(1, "INV-7."), _with_part(1, "INV-7")),
]


#: Characters real ids contain (INV-2026-0042, Cus_AbC, billing.eu, shop/eu, 'INV 7'): a
#: key joined with one of them, or with nothing, gives two intents the same key.
JOINED_BY = ("_", "-", "", ".", "/", " ")


#: How a key may "escape" ':' inside a part without escaping the escape itself: an id
#: that already reads 'INV%3A7' (or 'INV\:7') then gets the key of 'INV:7'. '::' is
#: what a key that collapses runs of ':' makes one with 'INV:7'.
ESCAPED_COLONS = ("%3A", "%3a", "\\:", "::")


#: An id, a source and an action holding the separator ':', each against the same part
#: with its ':' replaced by a character ids hold, dropped, or written escaped: a key that
#: "escapes" ':' so (replace(':', '_'), replace(':', ''), replace(':', '%3A')) gives
#: 'INV:7' and 'INV_7' (or 'INV7', 'INV%3A7') one key.
COLON_TWINS = [
    (_with_part(part, value), _with_part(part, value.replace(":", sep)))
    for part, value in ((1, "INV:7"), (0, "shop:eu"), (2, "charge:full"))
    for sep in (*JOINED_BY, *ESCAPED_COLONS)
] + [
    # A ':' at the start or the end of a part is part of it: a key that strips ':' off the
    # parts (strip(':'), so no part "adds" a separator) gives 'INV-7:' and 'INV-7' one key.
    (_with_part(1, "INV-7:"), _with_part(1, "INV-7")),
    (_with_part(0, ":billing"), _with_part(0, "billing")),
    (_with_part(2, "charge:"), _with_part(2, "charge")),
]


def _run_together(rng: random.Random) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """Pairs of intents whose parts a key joined with a ``JOINED_BY`` character runs together."""
    pairs: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    for sep in JOINED_BY:
        a, b, c = ("".join(rng.choices(string.ascii_letters, k=rng.randint(2, 6))) for _n in "abc")
        pairs.append(((f"{a}{sep}{b}", c, "charge", 1), (a, f"{b}{sep}{c}", "charge", 1)))
        pairs.append((("billing", f"{a}{sep}{b}", c, 1), ("billing", a, f"{b}{sep}{c}", 1)))
        # A key that puts the source and the action side by side ('billing.charge:42')
        # runs those two together instead.
        pairs.append(((f"{a}{sep}{b}", 42, c, 1), (a, 42, f"{b}{sep}{c}", 1)))
    return pairs


@CHECKS.add(
    2,
    "ids contain '_' and '-' (INV-2026-0042, Cus_AbC): joined with one of those, or "
    "with nothing, ('billing_eu', 42) and ('billing', 'eu_42') share a key and the "
    "second is skipped as a repeat; join with a character ids never contain, ':'",
    severe=True,
)
def key_parts_do_not_run_together(ns: Namespace) -> None:
    pairs = [
        (("billing_eu", 42, "charge", 1), ("billing", "eu_42", "charge", 1)),
        # The version runs into the action too: 'charge1' at version 1 and 'charge' at
        # version 11 are 'charge11' both, in a key written f'{action}{version}'.
        (("billing", 42, "charge1", 1), ("billing", 42, "charge", 11)),
    ]
    for seed in scene_seeds():
        pairs += _run_together(random.Random(seed))
    for a, b in pairs:
        ka, kb = ns.operation_key(*a), ns.operation_key(*b)
        expect(
            ka != kb,
            _("different keys for the intents {first} and {second}").format(
                first=repr(a), second=repr(b)
            ),
            _("operation_key gave {key} for both").format(key=repr(ka)),
        )


@CHECKS.add(
    2,
    "a key built from the time (time.time(), datetime.now()) changes between a "
    "retry and the first try, so the retry is not recognised; leave the clock out",
    timeout=30.0,
    severe=True,
)
def key_ignores_the_clock(ns: Namespace) -> None:
    before = [ns.operation_key(*args) for args in SAMPLE_CALLS]
    after = ns.harness(HARNESS + "keys_later", SAMPLE_CALLS, 86_400 * 3 + 3_601.5)
    for args, b, a in zip(SAMPLE_CALLS, before, after, strict=True):
        expect(
            b == a,
            _("the same key three days later (a late retry) for {args}").format(args=args),
            _("{before} then {after}").format(before=repr(b), after=repr(a)),
        )
    # A value read from the clock once, at import, is read again by a restarted worker.
    restarted = ns.harness(
        HARNESS + "keys_in_a_worker_started_later", SAMPLE_CALLS, 86_400 * 3 + 3_601.5
    )
    for args, b, a in zip(SAMPLE_CALLS, before, restarted or before, strict=True):
        expect(
            b == a,
            _(
                "the same key for {args} in a worker started three days later (the "
                "notebook's cells run again there, as a restarted worker imports its module)"
            ).format(args=args),
            _("{before} then {after}").format(before=repr(b), after=repr(a)),
            _(
                "nothing read from the clock may go into the key, not even once at import "
                "(a run date, a start time): a worker restarted on another day makes "
                "other keys"
            ),
        )
    # A coarse part of the clock (the month, the ISO week, the year: a "billing period")
    # is the same three days later most of the time; 400 days later it never is.
    much_later = ns.harness(HARNESS + "keys_later", SAMPLE_CALLS, MUCH_LATER)
    started = ns.harness(HARNESS + "keys_in_a_worker_started_later", SAMPLE_CALLS, MUCH_LATER)
    for args, b, a, r in zip(SAMPLE_CALLS, before, much_later, started or much_later, strict=True):
        expect(
            b == a == r,
            _(
                "the same key for {args} 400 days later, called then or in a worker started "
                "then (a retry replayed after a month's, a week's and a year's end)"
            ).format(args=args),
            _("{before} now, {after} 400 days later, {started} in a worker started then").format(
                before=repr(b), after=repr(a), started=repr(r)
            ),
            _(
                "leave the clock out of the key, even a coarse part of it: the month, the week "
                "or the year (a billing period) changes at its end, and a retry that crosses "
                "it runs again. If the period is part of the intent, make it an argument"
            ),
        )


#: A retry replayed more than a year later: past the end of any month, week and year.
MUCH_LATER = 86_400 * 400 + 3_601.5


@CHECKS.add(
    3,
    "hash() of a str is salted per process (PYTHONHASHSEED): two workers, or today's "
    "and tomorrow's cron run, get different keys; build the key from the text itself "
    "(f'{source}:{entity_id}:{action}:v{version}'), or hashlib if it must be short",
    timeout=30.0,
    severe=True,
)
def key_is_the_same_in_another_process(ns: Namespace) -> None:
    ns.operation_key("billing", 42, "charge")  # a stub says "not started yet" here
    got = ns.harness(HARNESS + "keys_in_processes", SAMPLE_CALLS)
    for seed, keys in got["seeds"].items():
        for args, here, there in zip(SAMPLE_CALLS, got["here"], keys, strict=True):
            expect(
                here == there,
                _("the same key for {args} in another Python process ({how}, seed {seed})").format(
                    args=args, how=got["how"], seed=seed
                ),
                _("{here} here, {there} there").format(here=here, there=there),
            )
