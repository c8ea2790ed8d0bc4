"""Exercise 1's checks of ``accept``: a new key, then its repeat; a conflict that names
the key and keeps the payload out; ``seen`` mapping keys to fingerprints."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex01.edges import past_every_cut
from labkit.grading.exercises.ex01.intents import (
    _WORD,
    CHECKS,
    HARNESS,
    LONG_KEY,
    LONGEST_KEY,
    ORDER,
    PAYLOADS,
    REORDERED,
    _returned,
    _said,
    answered,
)
from labkit.grading.exercises.helpers import because_of, holds_for
from labkit.lang import _


@CHECKS.add(
    1,
    "a key not in `seen` is new: store its fingerprint and return True; "
    "a repeat with the same payload returns False",
    severe=True,
)
def accept_new_then_repeat(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    run = ns.harness(HARNESS + "accept_calls", [[key, ORDER], [key, REORDERED]])
    first, again = (_returned(r) for r in run["results"])
    # Judged as a caller's `if accept(...)` reads them: a repeat answered None, not False,
    # breaks the letter of the docstring only (seen_maps_keys_to_fingerprints says so).
    expect(bool(first), "True for a key seen for the first time", first)
    expect(not again, "False for the same key and the same payload (reordered)", again)
    expect(list(run["seen"]) == [key], "one entry in `seen`, under the key", run["seen"])
    # An empty payload is an operation too (a reminder with nothing to say): its repeat is
    # a repeat, not new work every time.
    run = ns.harness(HARNESS + "accept_calls", [[key, {}], [key, {}]])
    first, again = (_returned(r) for r in run["results"])
    expect(
        bool(first) and not again,
        _("True, then False, for the same key with an empty payload twice"),
        _("{first}, then {again}").format(first=repr(first), again=repr(again)),
    )
    # A key is any text: operation_key("billing", "INV:7", "charge") holds five ':'-parts,
    # and keys made elsewhere (a client's Idempotency-Key header) hold none. An accept
    # that splits the key into four parts (to check or to log it) raises on them, before
    # or after storing them: the work never runs, or its retry is skipped as a repeat.
    for odd in OTHER_SHAPED_KEYS:
        run = ns.harness(HARNESS + "accept_calls", [[odd, ORDER], [odd, REORDERED]])
        first, again = run["results"]
        expect(
            answered(first, new=True) and answered(again, new=False),
            _("True, then False, for the key {key} sent twice with one payload").format(
                key=repr(odd)
            ),
            _("{first}, then {again}; `seen` holds {seen}").format(
                first=_said(first), again=_said(again), seen=repr(list(run["seen"]))
            ),
            _(
                "take the key as any text, never split it into its parts: an id may hold "
                "':' (operation_key('billing', 'INV:7', 'charge')) and a client's own key "
                "may hold none"
            ),
        )


#: Keys not of the shape source:id:action:vN, which accept must take all the same.
OTHER_SHAPED_KEYS = (
    "billing:INV:7:charge:v1",
    "7f3a9c2e-4b1d-4e8a-9f00-42c0ffee0042",
    "billing:42:charge",
)


@CHECKS.add(
    2,
    "same key with another fingerprint is a bug upstream: raise IdempotencyConflict "
    "and leave `seen` as it was (never overwrite the first payload)",
    severe=True,
)
def accept_conflict(ns: Namespace) -> None:
    key = "billing:42:charge:v1"
    once = ns.harness(HARNESS + "accept_calls", [[key, ORDER]])
    run = ns.harness(
        HARNESS + "accept_calls", [[key, ORDER], [key, {**ORDER, "amount_cents": 99_000}]]
    )
    conflict = run["results"][1]
    expect(
        "IdempotencyConflict" in conflict.get("raised", ()),
        "IdempotencyConflict for the same key with another amount",
        _said(conflict),
    )
    expect(
        run["seen"] == once["seen"],
        "`seen` unchanged after a conflict",
        _("{seen} (was {before})").format(seen=repr(run["seen"]), before=repr(once["seen"])),
    )

    def any_change(case: tuple[dict[str, Any], str]) -> None:
        payload, field = case
        changed = {**payload, field: [payload.get(field), "changed"]}
        if ns.payload_fingerprint(payload) == ns.payload_fingerprint(changed):
            return  # fingerprint_tells_payloads_apart's business
        got = ns.harness(HARNESS + "accept_calls", [[key, payload], [key, changed]])["results"]
        expect(
            "IdempotencyConflict" in got[1].get("raised", ()),
            _("IdempotencyConflict for the same key with {payload}, then {changed}").format(
                payload=repr(payload), changed=repr(changed)
            ),
            _said(got[1]),
        )

    cases = PAYLOADS.flatmap(lambda p: st.tuples(st.just(p), st.sampled_from(sorted(p))))
    holds_for(cases, any_change, examples=15)

    # A field dropped, or added, is another payload too; so is a full order after an
    # empty one (an empty first payload is no placeholder to fill in later).
    fuller = {**ORDER, "note": "gift"}
    for first, then, what in (
        (fuller, ORDER, _("the field 'note' dropped")),
        (ORDER, fuller, _("a field 'note' added")),
        ({}, ORDER, _("an empty payload, then a full order")),
    ):
        got = ns.harness(HARNESS + "accept_calls", [[key, first], [key, then]])["results"]
        expect(
            "IdempotencyConflict" in got[1].get("raised", ()),
            _("IdempotencyConflict for the same key with {what}").format(what=what),
            _said(got[1]),
        )
    # The caller's own dict, changed in place and sent again under the same key.
    run = ns.harness(HARNESS + "accept_changed_in_place", key, ORDER, "amount_cents", 99_000)
    expect(
        "IdempotencyConflict" in run["results"][1].get("raised", ()),
        "IdempotencyConflict when the same dict comes back with amount_cents changed in "
        "place (fingerprint the payload as it is now, at every call: no cache by id())",
        _said(run["results"][1]),
    )


_KEYS = st.tuples(_WORD, _WORD, _WORD, st.integers(1, 9)).map(
    lambda t: f"{t[0]}:{t[1]}:{t[2]}:v{t[3]}"
)


@CHECKS.add(
    1,
    "name the key in the IdempotencyConflict message (f'key {key!r} ...'): the "
    "operator reading the log must find which operation came back with another payload",
)
def conflict_names_the_key(ns: Namespace) -> None:
    def named(key: str) -> None:
        run = ns.harness(HARNESS + "accept_calls", [[key, ORDER], [key, {**ORDER, "invoice": 7}]])
        said = run["results"][1]
        if "IdempotencyConflict" not in said.get("raised", ()):
            expect(False, "IdempotencyConflict" + because_of("accept_conflict"), _said(said))
        expect(
            key in said.get("message", ""),
            _("an IdempotencyConflict message naming the key {key}").format(key=repr(key)),
            _said(said),
        )

    holds_for(_KEYS, named, examples=10)
    # Keys as real ids make them: braces, '%', quotes. A message made with .format() or
    # % on text that already holds the key breaks on them and raises something else.
    for key in ODD_KEYS:
        run = ns.harness(HARNESS + "accept_calls", [[key, ORDER], [key, {**ORDER, "invoice": 7}]])
        said = run["results"][1]
        expect(
            "IdempotencyConflict" in said.get("raised", ()) and key in said.get("message", ""),
            _("an IdempotencyConflict message naming the key {key}").format(key=repr(key)),
            _said(said),
            _(
                "build the message with one f-string (f'key {key!r} ...'): .format() or % "
                "applied to text that already holds the key breaks on a key with '{' or '%'"
            ),
        )
    # A key longer than any width written in accept (a message cut to 200 characters, a
    # key shown as key[:100] + '...'): the operator searches the log for the whole key.
    written = ns.harness(HARNESS + "ints_written_in", ["accept"])
    length = past_every_cut(written, floor=LONG_KEY, ceiling=LONGEST_KEY)
    run = ns.harness(HARNESS + "conflict_on_a_long_key", length)
    if "IdempotencyConflict" in run["second"].get("raised", ()):
        expect(
            run["whole"],
            _(
                "an IdempotencyConflict message naming the whole key, {length} characters "
                "long (longer than any width written in accept)"
            ).format(length=run["key_length"]),
            _("a message of {shown} characters that does not hold the whole key").format(
                shown=run["shown"]
            ),
            _(
                "put the key in the message whole, never cut to a width: a key cut short "
                "matches no key in the log or the table the operator searches"
            ),
        )


#: Keys with the characters a message template trips on.
ODD_KEYS = [
    "tpl:{name}:render:v1",
    "promo:50%d:apply:v1",
    "promo:100%s:apply:v1",
    "crm:d'Ávila:sync:v1",
    # Blanks as given: a message "tidied" to one line (' '.join(key.split())) names
    # another key.
    "crm:Ana  Maria:sync:v1",
    # Blanks at the ends too (a source given as '  billing'): a message with the key
    # stripped names another one.
    "  billing:7:charge:v1  ",
    # A long key, as real ids and actions make them: a message that shows only its first
    # characters does not name it.
    "billing:INV-2026-000000042:charge-and-capture:v12",
    # Longer than the 60, 64, 80 or 100 characters a message cut with '...' keeps.
    "erp:order-2026-12-04-" + "0" * 120 + "42:sync-with-warehouse:v3",
]


@CHECKS.add(
    1,
    "`seen` maps key -> payload_fingerprint(payload), not the payload: it is kept "
    "in a store between runs, and a repeat is told by comparing fingerprints",
)
def seen_maps_keys_to_fingerprints(ns: Namespace) -> None:
    key, other = "billing:42:charge:v1", "billing:43:charge:v1"
    fp = ns.payload_fingerprint(ORDER)
    # A payload with empty fields and its own key in it: accept stores the fingerprint of
    # the payload as given, not of a copy "cleaned" of None, blanks or the key.
    third = "billing:44:charge:v1"
    sparse = {"invoice": 44, "note": None, "coupon": "", "idempotency_key": third}
    # And the empty payload: its fingerprint is the one of '{}', not a '' stored for it.
    fourth = "billing:45:charge:v1"
    run = ns.harness(
        HARNESS + "accept_calls",
        [[key, REORDERED], [other, ORDER], [third, dict(sparse)], [fourth, {}]],
        {key: fp},
    )
    first, new = (r.get("returned", _said(r)) for r in run["results"][:2])
    expect(
        first is False,
        _(
            "False for {key} when `seen` already maps it to payload_fingerprint(payload) "
            "(a repeat after a restart)"
        ).format(key=repr(key)),
        first,
    )
    expect(new is True, _("True for the new key {key}").format(key=repr(other)), new)
    expect(
        run["seen"].get(other) == repr(fp),
        _("seen[{key}] == payload_fingerprint(payload), {fingerprint}...").format(
            key=repr(other), fingerprint=fp[:16]
        ),
        run["seen"].get(other, _("nothing stored")),
    )
    sparse_fp = ns.payload_fingerprint(sparse)
    expect(
        run["seen"].get(third) == repr(sparse_fp),
        _(
            "seen[{key}] == payload_fingerprint(payload) for {payload}, {fingerprint}... "
            "(the payload as given: None, blank fields and all)"
        ).format(key=repr(third), payload=repr(sparse), fingerprint=sparse_fp[:16]),
        run["seen"].get(third, _("nothing stored")),
        _(
            "store payload_fingerprint(payload) itself: a fingerprint of a copy without "
            "its None or blank fields, or without its key, is not what the store compares "
            "with after a restart"
        ),
    )
    empty_fp = ns.payload_fingerprint({})
    expect(
        run["seen"].get(fourth) == repr(empty_fp),
        _("seen[{key}] == payload_fingerprint(payload), {fingerprint}...").format(
            key=repr(fourth), fingerprint=empty_fp[:16]
        ),
        run["seen"].get(fourth, _("nothing stored")),
        _(
            "store payload_fingerprint(payload) for every payload, the empty one too: a '' "
            "or None stored for {} is not the fingerprint a worker compares with after a "
            "restart, and it calls the same empty payload a conflict"
        ),
    )
