"""Harness for exercise 1: inputs longer than every cut the code writes, and a store that fails.

A key or a payload cut to a width (``key[:1024]``, the first 65,536 characters of the
JSON, a list's first 1000 items) keeps two operations apart only while they differ
before the cut: the checks ask ``ints_written_in`` for the numbers in the student's
code and build inputs just past the largest (``past_every_cut``), differing at their
end and in their middle (a cut that keeps a head and a tail loses the middle). The
long inputs are made here, in the student's process, and only short answers go back.

A ``seen`` that is a real store fails now and then (a dropped connection): an
``accept`` that takes any error of the store for "the key is not there" answers True,
and the work runs again at every redelivery (``accept_on_a_failing_store``).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, NoReturn, Self

from labkit.errors import ConnectionLost
from labkit.grading.exercises.common import fresh_state, need, outcome

#: Longer than the widths a key or a payload is cut to (a 64 KiB column or buffer).
LONG_TEXT = 70_000
#: The largest number read as a cut to go past: a longer cut (four million characters)
#: is no plausible width, and the inputs would cost more than the check may.
LONGEST_CUT = 2**22
#: More items than a list is plausibly cut to, and the most a list is made of here.
MANY_ITEMS, MOST_ITEMS = 1_100, 100_000


def past_every_cut(written: list[int], floor: int = LONG_TEXT, ceiling: int = LONGEST_CUT) -> int:
    """A length past ``floor`` and past every number of ``written`` up to ``ceiling``."""
    return max([floor, *(n for n in written if n <= ceiling)]) + 2


def _long(length: int, mark: str, middle: bool) -> str:
    """``length`` characters of filler with ``mark`` at the end, or in the middle."""
    filler = "x" * (length - 1)
    half = len(filler) // 2
    return filler[:half] + mark + filler[half:] if middle else filler + mark


def _short(result: dict[str, Any]) -> dict[str, Any]:
    """An outcome with a long returned value cut for the channel (the long value is no
    part of the verdict, which is computed here)."""
    if isinstance(result.get("returned"), str) and len(result["returned"]) > 80:
        return {"returned": result["returned"][:60] + "..."}
    return result


def keys_of_long_intents(values: MutableMapping[str, Any], length: int) -> list[dict[str, Any]]:
    """``operation_key`` for two intents whose entity ids are ``length`` characters long
    and differ in one character only, at the end or in the middle. One row per pair:
    ``{"middle": bool, "same": whether the two keys are equal, "first", "second": the
    outcomes, long keys cut}``."""
    rows = []
    with fresh_state(values):
        key = need(values, "operation_key")
        for middle in (False, True):
            first, second = (
                outcome(key, "billing", _long(length, mark, middle), "charge") for mark in "12"
            )
            same = "returned" in first and first == second
            rows.append(
                {"middle": middle, "same": same, "first": _short(first), "second": _short(second)}
            )
    return rows


def accept_long_keys(values: MutableMapping[str, Any], length: int) -> list[dict[str, Any]]:
    """``accept`` on one empty ``seen`` for two keys with one payload, each key about
    ``length`` characters long, the two differing in one character, near the end or in
    the middle, in both orders. One row per pair: ``{"middle", "results", "kept"}``."""
    rows = []
    payload = {"amount_cents": 500}
    with fresh_state(values):
        accept = need(values, "accept")
        for middle in (False, True):
            a, b = (f"billing:{_long(length, mark, middle)}:charge:v1" for mark in "12")
            for first, second in ((a, b), (b, a)):
                seen: dict[str, Any] = {}
                results = [outcome(accept, seen, k, dict(payload)) for k in (first, second)]
                rows.append(
                    {"middle": middle, "results": [_short(r) for r in results], "kept": len(seen)}
                )
    return rows


def conflict_on_a_long_key(values: MutableMapping[str, Any], length: int) -> dict[str, Any]:
    """``accept`` for a key about ``length`` characters long, then for the same key with
    another payload. Whether the IdempotencyConflict's message (its first line, as a log
    shows it) holds the whole key is judged here: the channel carries 200 characters of
    a message. ``{"second": the second call's outcome, "whole": bool, "shown": the
    message's length, "key_length"}``."""
    key = f"erp:{_long(length, '7', False)}:sync-with-warehouse:v3"
    caught: list[Exception] = []
    with fresh_state(values):
        accept = need(values, "accept")
        seen: dict[str, Any] = {}
        outcome(accept, seen, key, {"amount_cents": 500})

        def conflicting() -> Any:
            try:
                return accept(seen, key, {"amount_cents": 600})
            except Exception as exc:
                caught.append(exc)
                raise

        second = outcome(conflicting)
    lines = str(caught[0]).strip().splitlines() if caught else []
    message = lines[0] if lines else ""
    return {
        "second": _short(second),
        "whole": key in message,
        "shown": len(message),
        "key_length": len(key),
    }


def accept_long_payloads(
    values: MutableMapping[str, Any], length: int, items: int
) -> list[dict[str, Any]]:
    """``accept`` for one key with a long payload, then with the same payload changed in
    one place: a text field of ``length`` characters changed at its end or in its middle,
    or a list of ``items`` numbers changed in its last item. One row per change:
    ``{"what": "end", "middle" or "last item", "first", "second": outcomes}``."""
    key = "billing:42:charge:v1"
    changes: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
        ("end", lambda mark: {"note": _long(length, mark, False), "amount_cents": 500}),
        ("middle", lambda mark: {"note": _long(length, mark, True), "amount_cents": 500}),
        ("last item", lambda mark: {"lines": [*range(items - 1), int(mark)], "amount_cents": 500}),
    ]
    rows = []
    with fresh_state(values):
        accept = need(values, "accept")
        for what, make in changes:
            seen: dict[str, Any] = {}
            first = outcome(accept, seen, key, make("1"))
            second = outcome(accept, seen, key, make("2"))
            rows.append({"what": what, "first": _short(first), "second": _short(second)})
    return rows


def _down(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise ConnectionLost("the connection to the store was lost (a test of accept)")


class UnreadableStore(dict):  # type: ignore[type-arg]
    """A ``seen`` whose reads fail (the read timed out, the connection dropped) while its
    writes go through: every read raises ``ConnectionLost``. It holds the key already
    (the work ran), which an ``accept`` that writes anyway overwrites."""

    __getitem__ = __contains__ = get = keys = items = values = __iter__ = __len__ = _down
    setdefault = pop = copy = _down


class UnwritableStore(dict):  # type: ignore[type-arg]
    """A ``seen`` that answers reads (it is empty) but whose writes raise ``ConnectionLost``:
    the connection dropped between the read and the write."""

    __setitem__ = setdefault = update = __ior__ = _down


def accept_on_a_failing_store(values: MutableMapping[str, Any], key: str) -> dict[str, Any]:
    """``accept`` for ``key`` on a store that cannot be read, then on one that cannot be
    written: ``{"unreadable": outcome, "unwritable": outcome}``."""
    payload = {"amount_cents": 1990}
    with fresh_state(values):
        accept = need(values, "accept")
        return {
            "unreadable": outcome(accept, UnreadableStore({key: "0" * 64}), key, dict(payload)),
            "unwritable": outcome(accept, UnwritableStore(), key, dict(payload)),
        }


def held(store: dict[Any, Any]) -> dict[str, str]:
    """What ``store`` holds, as plain data a check can compare: each key as text, each
    value as its ``repr`` (read with ``dict.items``, past any hook of a watched store)."""
    return {str(k): repr(v) for k, v in dict.items(store)}


class WatchedStore(dict[Any, Any]):
    """A ``seen`` that another worker reads between any two writes: after each write
    (an item set or deleted, ``setdefault``, ``update``, ``pop``, ``popitem``, ``|=``,
    ``clear``) it notes what it holds right then, in ``states``. A crash right after a
    write leaves the store so, too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.states: list[dict[str, str]] = []

    def _note(self) -> None:
        self.states.append(held(self))

    def __setitem__(self, key: Any, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self._note()

    def __delitem__(self, key: Any) -> None:
        dict.__delitem__(self, key)
        self._note()

    # typeshed overloads dict.__or__; one in-place signature cannot match both overloads.
    def __ior__(self, other: dict[Any, Any]) -> Self:  # type: ignore[override,misc]
        dict.update(self, other)
        self._note()
        return self

    def setdefault(self, key: Any, default: Any = None) -> Any:
        value = dict.setdefault(self, key, default)
        self._note()
        return value

    def update(self, *args: Any, **kwargs: Any) -> None:
        dict.update(self, *args, **kwargs)
        self._note()

    def pop(self, *args: Any) -> Any:
        value = dict.pop(self, *args)
        self._note()
        return value

    def popitem(self) -> Any:
        item = dict.popitem(self)
        self._note()
        return item

    def clear(self) -> None:
        dict.clear(self)
        self._note()


#: A key the watched store holds already, another operation's: no call may touch it.
OTHER_KEY = "billing:41:charge:v1"


def accept_on_a_watched_store(
    values: MutableMapping[str, Any], key: str, payload: dict[str, Any], other: dict[str, Any]
) -> list[dict[str, Any]]:
    """``accept`` on a ``WatchedStore`` holding another key: ``key`` with ``payload`` (new),
    again (a repeat), then with ``other`` (a conflict). One row per call: ``{"what": "new",
    "repeat" or "conflict", "result": outcome, "before", "after": what the store held
    around the call, "between": the first state noted after a write in the call that is
    neither, or None}``: what another worker reading the store then would find."""
    store = WatchedStore({OTHER_KEY: "0" * 64})
    rows = []
    with fresh_state(values):
        accept = need(values, "accept")
        for what, sent in (("new", payload), ("repeat", payload), ("conflict", other)):
            before = held(store)
            store.states.clear()
            result = outcome(accept, store, key, dict(sent))
            after = held(store)
            between = next((s for s in store.states if s not in (before, after)), None)
            row = {"what": what, "result": result, "before": before, "after": after}
            rows.append({**row, "between": between})
    return rows


def accept_the_same_dict_again(
    values: MutableMapping[str, Any], key: str, payload: dict[str, Any]
) -> dict[str, Any]:
    """``accept`` with a copy of ``payload``, then with that very dict again (a retry loop
    that sends its request object once more): ``{"results": [outcome, outcome],
    "changed": the fields accept added, removed or rewrote in the caller's dict}``."""
    import copy

    sent = copy.deepcopy(payload)
    with fresh_state(values):
        accept = need(values, "accept")
        seen: dict[str, Any] = {}
        first = outcome(accept, seen, key, sent)
        after_first = copy.deepcopy(sent)
        second = outcome(accept, seen, key, sent)
    changed = sorted(
        str(name)
        for name in set(payload) | set(after_first)
        if name not in payload or name not in after_first or payload[name] != after_first[name]
    )
    return {"results": [first, second], "changed": changed}


def accept_in_a_store_that_knows_better(
    values: MutableMapping[str, Any], key: str, payload: dict[str, Any], stored: str
) -> dict[str, Any]:
    """``accept`` for ``key`` on an empty store, then with the same payload on a second
    store that holds ``key`` with the fingerprint ``stored`` (another payload's): a memory
    kept outside ``seen`` (the last key and fingerprint, a module-level cache) answers the
    second from the first. ``{"first": outcome, "second": outcome}``."""
    with fresh_state(values):
        accept = need(values, "accept")
        first = outcome(accept, {}, key, dict(payload))
        second = outcome(accept, {key: stored}, key, dict(payload))
    return {"first": first, "second": second}


def accept_after_the_store_changed(
    values: MutableMapping[str, Any], key: str, payload: dict[str, Any], stored: str
) -> dict[str, Any]:
    """``accept`` for ``key`` on a store; then the store loses the key (an operator deletes
    it so the work may run again, or the store expired it) and the same call comes again;
    then the store holds ``stored`` (another payload's fingerprint) under the key, and the
    same call comes once more. A memory kept outside ``seen`` for this store (a cache keyed
    by the store or by id(seen)) answers both from what it saw before.
    ``{"first", "after_delete", "after_replace": outcome, "kept": key in the store after
    the second call}``."""
    store: dict[str, Any] = {}
    with fresh_state(values):
        accept = need(values, "accept")
        first = outcome(accept, store, key, dict(payload))
        store.pop(key, None)
        after_delete = outcome(accept, store, key, dict(payload))
        kept = key in store
        store[key] = stored
        after_replace = outcome(accept, store, key, dict(payload))
    return {
        "first": first,
        "after_delete": after_delete,
        "kept": kept,
        "after_replace": after_replace,
    }


class InterruptedStore(dict):  # type: ignore[type-arg]
    """A ``seen`` that, at accept's first read of it, lets another worker's call run
    before it answers (a thread switch at the worst instant): ``interrupt()`` runs in a
    thread of its own, waited for ``PATIENCE`` seconds (a lock held across accept keeps
    it waiting: it then runs after the first call)."""

    def __init__(
        self,
        data: dict[str, Any],
        interrupt: Callable[[], None],
        patience: float | None = None,
    ) -> None:
        super().__init__(data)
        self._interrupt: Callable[[], None] | None = interrupt
        self.thread: Any = None
        self.patience = PATIENCE if patience is None else patience

    def _once(self) -> None:
        import threading

        run, self._interrupt = self._interrupt, None
        if run is not None:
            self.thread = threading.Thread(target=run, daemon=True)
            self.thread.start()
            self.thread.join(self.patience)

    def get(self, key: Any, default: Any = None) -> Any:
        self._once()
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        self._once()
        return dict.__contains__(self, key)

    def __getitem__(self, key: Any) -> Any:
        self._once()
        return dict.__getitem__(self, key)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._once()
        return dict.setdefault(self, key, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._once()
        dict.__setitem__(self, key, value)


#: How long an interrupted store waits for the other worker's call (then goes on).
PATIENCE = 0.2
#: How long it waits in the one scene that outlasts a lock waited for with a timeout
#: (``acquire(timeout=1)``, then an answer given without reading ``seen``).
LONG_PATIENCE = 3.0


def accept_between_two_workers(
    values: MutableMapping[str, Any],
    key: str,
    payload: dict[str, Any],
    changed: dict[str, Any],
    other_key: str,
    other_payload: dict[str, Any],
    only: list[str] | None = None,
    patience: float | None = None,
) -> list[dict[str, Any]]:
    """``accept`` for ``key`` (new, a repeat, a conflict with ``changed``), each call
    first alone on a plain dict, then interrupted at its first read of ``seen`` by another
    worker's call for ``other_key`` with ``other_payload`` on a store of its own. One row
    per call: ``{"what", "alone", "result": the outcome alone and interrupted, "seen_alone",
    "seen": the store after each, "other_alone", "other": the other call's outcome alone
    and when it interrupted, "other_seen_alone", "other_seen": its store after each}``.
    ``only`` names the calls to make (``["new"]``), all three when None: ``other_key`` may
    be ``key`` itself, sent to another tenant's store (an in-flight guard kept beside the
    stores answers it from the first call). ``patience``: how long the interrupted call
    waits for the other (``PATIENCE`` when None)."""

    rows = []
    with fresh_state(values):
        accept, fingerprint = need(values, "accept"), need(values, "payload_fingerprint")
        fp = fingerprint(dict(payload))
        other_alone_seen: dict[str, Any] = {}
        other_alone = outcome(accept, other_alone_seen, other_key, dict(other_payload))
        for what, before, sent in (
            ("new", {}, payload),
            ("repeat", {key: fp}, payload),
            ("conflict", {key: fp}, changed),
        ):
            if only is not None and what not in only:
                continue
            alone_seen = dict(before)
            alone = outcome(accept, alone_seen, key, dict(sent))
            other_seen: dict[str, Any] = {}
            other: dict[str, Any] = {}

            def interrupt(
                other_seen: dict[str, Any] = other_seen, other: dict[str, Any] = other
            ) -> None:
                other.update(outcome(accept, other_seen, other_key, dict(other_payload)))

            store = InterruptedStore(before, interrupt, patience)
            result = outcome(accept, store, key, dict(sent))
            if store.thread is not None:
                store.thread.join(5.0)
            rows.append(
                {
                    "what": what,
                    "alone": alone,
                    "result": result,
                    "seen_alone": held(alone_seen),
                    "seen": held(store),
                    "other_alone": other_alone,
                    "other": dict(other) or {"returned": "(still running)"},
                    "other_seen_alone": held(other_alone_seen),
                    "other_seen": held(other_seen),
                }
            )
    return rows


#: Payloads the canonical JSON cannot encode (or UTF-8 cannot): a datetime, a set, a
#: Decimal, bytes, a payload holding itself, a lone surrogate.
def _unencodable() -> list[dict[str, Any]]:
    import datetime as dt
    from decimal import Decimal

    return [
        {"amount_cents": 1990, "due": dt.datetime(2026, 12, 4, 3, 0, tzinfo=dt.UTC)},
        {"amount_cents": 1990, "tags": {"gift"}},
        {"amount": Decimal("19.90")},
        {"amount_cents": 1990, "ref": b"INV-7"},
        _circular(),
        # A lone surrogate (a file name os.listdir could not decode): the JSON holds it,
        # encode("utf-8") raises UnicodeEncodeError.
        {"amount_cents": 1990, "file": "report-\udce9.pdf"},
    ]


def _circular() -> dict[str, Any]:
    """A payload that holds itself (json.dumps raises ValueError: Circular reference)."""
    payload: dict[str, Any] = {"amount_cents": 1990}
    payload["parent"] = payload
    return payload


def _kind(payload: dict[str, Any]) -> str:
    if any(v is payload for v in payload.values()):
        return "a reference to itself"
    texts = [v for v in payload.values() if isinstance(v, str)]
    if any("\ud800" <= c <= "\udfff" for text in texts for c in text):
        return "a lone surrogate ('report-\\udce9.pdf')"
    return next(type(v).__name__ for v in payload.values() if type(v) is not int)


def accept_what_the_fingerprint_refuses(
    values: MutableMapping[str, Any], key: str
) -> list[dict[str, Any]]:
    """For each payload json.dumps cannot encode: ``payload_fingerprint``'s outcome, then
    ``accept``'s for ``key`` on an empty store, and what the store held after it:
    ``{"kind", "fingerprint", "accept", "seen"}``."""
    rows = []
    with fresh_state(values):
        accept, fingerprint = need(values, "accept"), need(values, "payload_fingerprint")
        for payload in _unencodable():
            kind = _kind(payload)
            seen: dict[str, Any] = {}
            rows.append(
                {
                    "kind": kind,
                    "fingerprint": _short(outcome(fingerprint, dict(payload))),
                    "accept": _short(outcome(accept, seen, key, dict(payload))),
                    "seen": held(seen),
                }
            )
    return rows


#: The hash seed of the new process ``long_inputs_in_another_process`` asks.
OTHER_SEED = 4242


def _same_elsewhere(
    values: MutableMapping[str, Any], name: str, args: list[Any], here: dict[str, Any]
) -> dict[str, Any] | None:
    """``name(*args)`` in a new Python process (another hash seed) against ``here``, the
    outcome in this one: ``{"same": bool, "here", "there": short texts}``, or None when
    the call cannot be made there (a function that cannot be shipped)."""
    from labkit.grading.exercises.replay import CannotShip, call_in_fresh_process

    try:
        [(how, text)] = call_in_fresh_process(values, name, [(args, {})], OTHER_SEED)
    except CannotShip:
        return None
    mine = repr(here["returned"]) if "returned" in here else None
    same = how == "returned" and mine is not None and text == mine

    def shown(value: str) -> str:
        """A long text as its head and its tail (where a suffix differs)."""
        return value if len(value) <= 80 else f"{value[:30]}...{value[-40:]}"

    return {
        "same": same,
        "here": shown(mine) if mine is not None else "raised " + ", ".join(here["raised"]),
        "there": shown(text) if how == "returned" else "raised " + text[:80],
    }


def long_inputs_in_another_process(values: MutableMapping[str, Any], length: int) -> dict[str, Any]:
    """Long inputs (``length`` characters, past every cut) asked here and in a new Python
    process with another hash seed, as a worker restarted after a deploy asks them: a
    key (an entity id that long), a payload's fingerprint (a note that long), and
    ``accept``'s answer for a key that long on the store it filled here (a repeat). A
    long input "shortened" with hash() (salted per process) or a random suffix differs
    there. ``{"key", "fingerprint", "repeat": row or None}``, each row as
    ``_same_elsewhere`` gives it."""
    intent = ["billing", _long(length, "7", middle=False), "charge"]
    payload = {"note": _long(length, "7", middle=False), "amount_cents": 1990}
    key = "billing:" + _long(length, "7", middle=False) + ":charge:v1"
    with fresh_state(values):
        here_key = outcome(need(values, "operation_key"), *intent)
        here_fp = outcome(need(values, "payload_fingerprint"), dict(payload))
        seen: dict[str, Any] = {}
        first = outcome(need(values, "accept"), seen, key, dict(payload))
        stored = dict(seen)
        repeat = outcome(need(values, "accept"), dict(stored), key, dict(payload))
    rows: dict[str, Any] = {
        "key": _same_elsewhere(values, "operation_key", intent, here_key),
        "fingerprint": _same_elsewhere(values, "payload_fingerprint", [payload], here_fp),
        "repeat": None,
    }
    if "returned" in first and "returned" in repeat:
        rows["repeat"] = _same_elsewhere(values, "accept", [stored, key, payload], repeat)
    return rows
