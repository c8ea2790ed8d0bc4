"""Exercise 1: a stable operation key, a canonical payload fingerprint, and conflict detection.

The student writes ``operation_key``, ``payload_fingerprint`` and ``accept``.
"""

from __future__ import annotations

from labkit.grading.checks._helpers import clock_moved
from labkit.grading.core import Checks, Namespace, StudentRaised, expect

CHECKS = Checks(
    "ex01",
    "stable keys and payload fingerprints",
    needs=("operation_key", "payload_fingerprint", "accept"),
)

ORDER = {"invoice": 42, "amount_cents": 1990, "currency": "BRL", "lines": [{"sku": "A", "qty": 1}]}
REORDERED = {
    "lines": [{"qty": 1, "sku": "A"}],
    "currency": "BRL",
    "amount_cents": 1990,
    "invoice": 42,
}


@CHECKS.add(
    2,
    "build the key only from the arguments (source, entity, action, version): "
    "no uuid4(), no random, nothing that changes per call",
)
def key_is_stable(ns: Namespace) -> None:
    first = ns.operation_key("billing", 42, "charge")
    again = ns.operation_key("billing", 42, "charge")
    expect(isinstance(first, str), "a str", type(first).__name__)
    expect(
        first == again,
        "the same key for the same intent, call after call",
        f"{first!r}, then {again!r}",
    )
    explicit = ns.operation_key("billing", 42, "charge", version=1)
    expect(
        explicit == first,
        "version=1 to be the default",
        f"{first!r} without version, {explicit!r} with version=1",
    )


@CHECKS.add(1, "put every part of the intent into the key: source, entity id, action and version")
def key_names_the_intent(ns: Namespace) -> None:
    base = ns.operation_key("billing", 42, "charge")
    variants = {
        "another entity (43)": ns.operation_key("billing", 43, "charge"),
        "another action (refund)": ns.operation_key("billing", 42, "refund"),
        "another source (erp)": ns.operation_key("erp", 42, "charge"),
        "version 2": ns.operation_key("billing", 42, "charge", version=2),
    }
    for what, key in variants.items():
        expect(key != base, f"a different key for {what}", f"{key!r} for both")


@CHECKS.add(
    2,
    "a key built from the time (time.time(), datetime.now()) changes between a "
    "retry and the first try, so the retry is not recognised; leave the clock out",
)
def key_ignores_the_clock(ns: Namespace) -> None:
    before = ns.operation_key("billing", 42, "charge")
    with clock_moved(ns._values, 86_400 * 3 + 3_601.5):  # type: ignore[arg-type]
        after = ns.operation_key("billing", 42, "charge")
    expect(
        before == after,
        "the same key three days later (a late retry)",
        f"{before!r} then {after!r}",
    )


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
        f"{a!r} and {b!r}",
    )


@CHECKS.add(1, "hash the whole payload (hashlib.sha256(...).hexdigest()), types included")
def fingerprint_tells_payloads_apart(ns: Namespace) -> None:
    base = ns.payload_fingerprint(ORDER)
    expect(
        isinstance(base, str) and len(base) == 64 and all(c in "0123456789abcdef" for c in base),
        "a SHA-256 hex digest (64 characters 0-9a-f)",
        repr(base),
    )
    for what, other in {
        "another amount": {**ORDER, "amount_cents": 1991},
        "the amount as a string": {**ORDER, "amount_cents": "1990"},
        "another line": {**ORDER, "lines": [{"sku": "B", "qty": 1}]},
    }.items():
        fp = ns.payload_fingerprint(other)
        expect(fp != base, f"a different fingerprint for {what}", "the same fingerprint")


@CHECKS.add(
    1,
    "a key not in `seen` is new: store its fingerprint and return True; "
    "a repeat with the same payload returns False",
)
def accept_new_then_repeat(ns: Namespace) -> None:
    seen: dict[str, str] = {}
    key = "billing:42:charge:v1"
    first = ns.accept(seen, key, ORDER)
    expect(first is True, "True for a key seen for the first time", repr(first))
    expect(key in seen, "the key remembered in `seen`", f"seen = {seen!r}")
    again = ns.accept(seen, key, REORDERED)
    expect(again is False, "False for the same key and the same payload (reordered)", repr(again))
    expect(len(seen) == 1, "one entry in `seen`", f"{len(seen)} entries")


@CHECKS.add(
    2,
    "same key with another fingerprint is a bug upstream: raise IdempotencyConflict "
    "and leave `seen` as it was (never overwrite the first payload)",
)
def accept_conflict(ns: Namespace) -> None:
    seen: dict[str, str] = {}
    key = "billing:42:charge:v1"
    ns.accept(seen, key, ORDER)
    before = dict(seen)
    try:
        result = ns.accept(seen, key, {**ORDER, "amount_cents": 99_000})
    except StudentRaised as exc:
        if not exc.is_a("IdempotencyConflict"):
            raise
        result = "raised"
    expect(
        result == "raised",
        "IdempotencyConflict for the same key with another amount",
        f"returned {result!r}",
    )
    expect(seen == before, "`seen` unchanged after a conflict", f"{seen!r} (was {before!r})")
