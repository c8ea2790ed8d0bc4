"""Hidden checks for exercise 1: run only by ``labkit grade``, never shipped to students."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex01.checks import INTENTS, PAYLOADS, SAMPLE_CALLS
from labkit.grading.exercises.helpers import holds_for
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
    holds_for(PAYLOADS, exact, examples=40)


#: Two keys that are two operations, though a normalised or shortened key makes them one.
TWIN_KEYS = [
    ("billing:1:charge:v1", "billing:2:charge:v1"),
    ("billing:INV-7:charge:v1", "billing:inv-7:charge:v1"),
    ("crm:José:sync:v1", "crm:Jose:sync:v1"),
    ("billing:" + "x" * 300 + "1:charge:v1", "billing:" + "x" * 300 + "2:charge:v1"),
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
    for first, second in TWIN_KEYS:
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


@CHECKS.add(1, "the key must not depend on the process (hash() is salted per process)", severe=True)
def key_is_plain_text(ns: Namespace) -> None:
    key = ns.operation_key("billing", 42, "charge")
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

    holds_for(INTENTS, shown, examples=30)


@CHECKS.add(
    1,
    "the key names the intent, not the machine: no host name, user or working folder in "
    "it, or a retry that lands on another worker is not recognised and runs again",
    severe=True,
)
def key_is_the_same_on_another_machine(ns: Namespace) -> None:
    got = ns.harness("labkit.grading.exercises.ex01.harness:keys_on_another_machine", SAMPLE_CALLS)
    for args, here, there in zip(SAMPLE_CALLS, got["here"], got["there"], strict=True):
        expect(
            here == there,
            _(
                "the same key for {args} on another machine (another host name, user and "
                "working folder)"
            ).format(args=args),
            _("{here} here, {there} there").format(here=repr(here), there=repr(there)),
        )
