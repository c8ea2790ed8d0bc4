"""Exercise 1's checks of ``payload_fingerprint``: canonical whatever the order of
the keys, and telling payloads apart, types included."""

from __future__ import annotations

from typing import Any

from labkit.grading.checks import Namespace, StudentRaised, expect
from labkit.grading.exercises.ex01.intents import (
    CHECKS,
    HARNESS,
    ORDER,
    PAYLOADS,
    REORDERED,
)
from labkit.grading.exercises.helpers import holds_for
from labkit.lang import _


@CHECKS.add(
    2,
    "dict order is not meaning: serialise with json.dumps(payload, sort_keys=True, "
    "separators=(',', ':'), ensure_ascii=False) before hashing",
)
def fingerprint_is_canonical(ns: Namespace) -> None:
    a, b = ns.payload_fingerprint(ORDER), ns.payload_fingerprint(REORDERED)
    expect(
        a == b,
        "equal fingerprints for the same payload with keys in another order",
        _("{first} and {second}").format(first=repr(a), second=repr(b)),
    )

    def any_order(payload: dict[str, Any]) -> None:
        flipped = _reversed_keys(payload)
        fa, fb = ns.payload_fingerprint(payload), ns.payload_fingerprint(flipped)
        expect(
            fa == fb,
            _("equal fingerprints for {payload} and {flipped} (keys in another order)").format(
                payload=repr(payload), flipped=repr(flipped)
            ),
            _("{first} and {second}").format(first=repr(fa), second=repr(fb)),
        )

    holds_for(PAYLOADS, any_order, examples=30)
    # Field names of two types, an int and a text: the contract's json.dumps cannot sort
    # them and raises TypeError. A fingerprint that falls back to the order given (the
    # same dumps without sort_keys) gives the two orders of one payload two fingerprints.
    mixed: dict[Any, str] = {7: "gift", "note": "x"}
    flipped: dict[Any, str] = {"note": "x", 7: "gift"}
    try:
        fa, fb = ns.payload_fingerprint(mixed), ns.payload_fingerprint(flipped)
    except StudentRaised:
        return  # what the contract's json.dumps(sort_keys=True) does
    expect(
        fa == fb,
        _(
            "a TypeError (json.dumps cannot sort an int and a text field name), or at least "
            "equal fingerprints for {payload} and {flipped}"
        ).format(payload=repr(mixed), flipped=repr(flipped)),
        _("{first} and {second}").format(first=repr(fa), second=repr(fb)),
        _(
            "let json.dumps(..., sort_keys=True) raise when it cannot sort the field names: "
            "a fallback without sort_keys makes the fingerprint depend on the order again"
        ),
    )


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


@CHECKS.add(1, "hash the whole payload (hashlib.sha256(...).hexdigest()), types included")
def fingerprint_tells_payloads_apart(ns: Namespace) -> None:
    base = ns.payload_fingerprint(ORDER)
    expect(
        isinstance(base, str) and len(base) == 64 and all(c in "0123456789abcdef" for c in base),
        "a SHA-256 hex digest (64 characters 0-9a-f)",
        repr(base),
    )
    for what, other in {
        _("another amount"): {**ORDER, "amount_cents": 1991},
        _("the amount as a string"): {**ORDER, "amount_cents": "1990"},
        _("another line"): {**ORDER, "lines": [{"sku": "B", "qty": 1}]},
        _("the amount as a float (1990.0)"): {**ORDER, "amount_cents": 1990.0},
        _("a flag True instead of 1"): {**ORDER, "invoice": True},
        _("the currency in lower case"): {**ORDER, "currency": "brl"},
    }.items():
        fp = ns.payload_fingerprint(other)
        expect(
            fp != base,
            _("a different fingerprint for {what}").format(what=what),
            _("the same fingerprint"),
        )
    named = {
        "datetime": _("a datetime"),
        "Decimal": _("a Decimal"),
        "set": _("a set"),
        "bytes": _("bytes"),
        "UUID": _("a uuid.UUID"),
        "Enum": _("an Enum member"),
        "dataclass": _("a dataclass instance"),
    }
    rows = ns.harness(HARNESS + "fingerprints_of_values_and_their_text")
    for kind, as_value, as_other, how in rows:
        what = named.get(kind, kind)
        if how == "text":
            expected = _(
                "a TypeError (json.dumps cannot encode it) for a payload holding {what}, or "
                "at least another fingerprint than for the same payload holding its text"
            ).format(what=what)
            got = _(
                "the same fingerprint for {what} and for its text (json.dumps(..., default=str)?)"
            ).format(what=what)
        else:
            # An encoder's default= that writes a datetime as its ISO text, or a Decimal
            # as a float, makes it the same payload as one that held that text or float.
            other = {
                "isoformat": _("its ISO text (isoformat())"),
                "float": _("the float 19.9 (for Decimal('19.90'))"),
                "list": _("the list of its items, sorted"),
                "reversed": _("the list of its items, in reverse order"),
                "repr": _("its repr() as text (\"Decimal('19.90')\")"),
                "cents": _("the int 1990, its cents (for Decimal('19.90'))"),
                "timestamp": _("its Unix time as a float (timestamp())"),
                "epoch": _("its Unix time as an int (int(timestamp()))"),
                "naive": _("its ISO text without its time zone"),
                "decoded": _("their text, decoded ('INV-7' for b'INV-7')"),
                "hex": _("their hex digits as text ('494e562d37' for b'INV-7')"),
                "base64": _("their base64 text ('SU5WLTc=' for b'INV-7')"),
                "value": _("its value as text ('gold' for _Tier.GOLD)"),
                "name": _("its name as text ('GOLD' for _Tier.GOLD)"),
                "fields": _("the dict of its fields (vars(), dataclasses.asdict())"),
            }.get(how, how)
            expected = _(
                "a TypeError (json.dumps cannot encode it) for a payload holding {what}, or "
                "at least another fingerprint than for the same payload holding {other}: "
                "another type is another payload"
            ).format(what=what, other=other)
            got = _(
                "the same fingerprint for {what} and for {other} (json.dumps(..., default=...) "
                "turned one into the other)"
            ).format(what=what, other=other)
        expect(
            "returned" not in as_value or as_value["returned"] != as_other.get("returned"),
            expected,
            got,
        )
