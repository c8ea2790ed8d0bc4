"""What exercise 1's checks share: ``CHECKS``, on which ``key_checks``,
``fingerprint_checks`` and ``accept_checks`` register; the intents, payloads and sample
calls they draw, and how an ``accept`` call's answer is read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.helpers import raised_text
from labkit.lang import _

CHECKS = Checks(
    "ex01",
    "stable keys and payload fingerprints",
    needs=("operation_key", "payload_fingerprint", "accept"),
)

HARNESS = "labkit.grading.exercises.ex01.harness:"

ORDER = {"invoice": 42, "amount_cents": 1990, "currency": "BRL", "lines": [{"sku": "A", "qty": 1}]}
REORDERED = {
    "lines": [{"qty": 1, "sku": "A"}],
    "currency": "BRL",
    "amount_cents": 1990,
    "invoice": 42,
}

_WORD = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"),
    min_size=1,
    max_size=12,
)
#: An intent: (source, entity id, action, version); ids are ints or text of any case.
INTENTS = st.tuples(_WORD, st.one_of(st.integers(0, 10**12), _WORD), _WORD, st.integers(1, 9))
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
#: Payloads with at least two keys, so their order can differ.
PAYLOADS = st.dictionaries(st.text(max_size=5), _JSON, min_size=2, max_size=5)
#: Intents whose keys a hash()-based or clock-based key gets wrong.
SAMPLE_CALLS: list[list[Any]] = [
    ["billing", 42, "charge"],
    ["billing", "INV-2026-0042", "refund", 2],
    ["erp", "Cus_AbC", "sync"],
]


#: The shortest key ``conflict_names_the_key`` names past every width written in accept,
#: and the longest width it goes past (a longer key is no key a message must carry).
LONG_KEY, LONGEST_KEY = 300, 100_000


def _returned(result: dict[str, Any]) -> Any:
    """What one harness call returned; a student exception fails the check, named."""
    expect("raised" not in result, "a return value, no exception", _said(result))
    return result["returned"]


def answered(result: dict[str, Any], new: bool) -> bool:
    """True when one harness call of ``accept`` answered as a caller's ``if accept(...)``
    reads it: something true for a new key, something false for a repeat, no exception."""
    return "raised" not in result and bool(result.get("returned")) is new


def _said(result: dict[str, Any]) -> str:
    if "raised" in result:
        return raised_text(result)
    return _("returned {value}").format(value=repr(result.get("returned")))


def built_key_pairs(
    ns: Namespace, pairs: list[tuple[list[Any], list[Any]]]
) -> Iterator[tuple[int, dict[str, Any], dict[str, Any]]]:
    """``(n, first, second)``: the outcomes of ``operation_key`` for the ``n``-th pair of
    intents, their datetime, date and Decimal ids built beside the student's code
    (``built_ids``), in one harness call. A pair either of whose intents was refused
    loudly (ValueError or TypeError) is left out: no key, so no key shared either."""
    intents = [intent for pair in pairs for intent in pair]
    got = ns.harness(HARNESS + "keys_of_built_intents", intents)
    for n in range(len(pairs)):
        first, second = got[2 * n], got[2 * n + 1]
        if not any({"ValueError", "TypeError"} & set(r.get("raised", ())) for r in (first, second)):
            yield n, first, second
