"""Harness for exercise 1: keys computed later, in other processes, and ``accept`` runs.

``operation_key`` must not depend on the wall clock nor on the process; ``accept``
mutates the ``seen`` dict it is given, so the harness owns that dict and returns it.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as _dt
import os
from collections.abc import Callable, Iterator, MutableMapping
from functools import partial
from typing import Any
from unittest import mock

from labkit.grading.exercises.common import fresh_state, need, outcome, plain
from labkit.grading.exercises.elsewhere import on_another_machine
from labkit.grading.exercises.replay import CannotShip, call_in_fresh_process, cells_run_again
from labkit.grading.exercises.wallclock import clock_moved, in_time_zone

#: Two hash seeds far apart: a hash()-built key differs between them.
HASH_SEEDS = (1, 4242)


def keys_later(
    values: MutableMapping[str, Any], calls: list[list[Any]], seconds: float
) -> list[Any]:
    """``operation_key(*args)`` for each call while the wall clock reads ``seconds`` later."""
    with fresh_state(values), clock_moved(values, seconds):
        return [plain(need(values, "operation_key")(*args)) for args in calls]


def keys_in_a_worker_started_later(
    values: MutableMapping[str, Any], calls: list[list[Any]], seconds: float
) -> list[Any] | None:
    """The keys from a namespace built again from the cells, the clock ``seconds`` later.

    A worker restarted days later imports its module again: a value computed once at
    import (today's date, a start time) is computed afresh there. The cells that ran
    cleanly run again (``CELLS``), in this check's own copy of the process. None when the
    namespace does not know its cells (``check()`` in Jupyter).
    """
    with fresh_state(values), clock_moved({}, seconds, datetime_module=True):
        return _keys_from_the_cells_run_again(values, calls)


def _keys_from_the_cells_run_again(
    values: MutableMapping[str, Any],
    calls: list[list[Any]],
    around: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    module: str = "__main__",
) -> list[Any] | None:
    """The keys for ``calls`` from a namespace built again from the cells, inside
    ``around()`` (entered once in a scratch folder), as module ``module``; None without
    the cells (``replay.cells_run_again``)."""
    with cells_run_again(values, around, module) as again:
        key = None if again is None else again.get("operation_key")
        if not callable(key):
            return None
        return [plain(key(*args)) for args in calls]


#: The module a worker over there imports the notebook's code as (its ``__name__``).
WORKER_MODULE = "keys"

#: Time zones and languages of a machine over there (a worker in another region), none
#: of them a zone ``labkit grade`` runs student code in; the first unlike this machine's.
ELSEWHERE_TZS = ("<+0545>-5:45", "<-0930>9:30")
ELSEWHERE_LANGS = ("ja_JP.UTF-8", "fi_FI.UTF-8")


@contextlib.contextmanager
def _far_away(values: MutableMapping[str, Any]) -> Iterator[None]:
    """``on_another_machine``, with that machine's own time zone and language settings."""
    tz = next(zone for zone in ELSEWHERE_TZS if zone != os.environ.get("TZ"))
    lang = next(name for name in ELSEWHERE_LANGS if name != os.environ.get("LANG"))
    env = {"LANG": lang, "LC_ALL": lang, "LANGUAGE": lang.split(".")[0]}
    with on_another_machine(values), in_time_zone(tz), mock.patch.dict(os.environ, env):
        yield


def keys_on_another_machine(
    values: MutableMapping[str, Any], calls: list[list[Any]]
) -> dict[str, list[Any] | None]:
    """The keys for ``calls`` here, then as another host, user, folder, process, time zone
    and language would make them: ``{"here", "there", "started"}``, ``started`` from the
    cells run again over there as the module a worker imports (a value read once at
    import, the host name, the process id or ``__name__``, is read anew in each worker),
    None when the namespace does not know its cells."""
    with fresh_state(values):
        here = [plain(need(values, "operation_key")(*args)) for args in calls]
        with _far_away(values):
            there = [plain(need(values, "operation_key")(*args)) for args in calls]
        started = _keys_from_the_cells_run_again(
            values, calls, partial(_far_away, {}), module=WORKER_MODULE
        )
    return {"here": here, "there": there, "started": started}


def keys_after_others_and_in_a_new_worker(
    values: MutableMapping[str, Any], before: list[list[Any]], calls: list[list[Any]]
) -> dict[str, list[Any] | None]:
    """The keys for ``calls`` here after ``before`` was asked for, and in a worker that
    imports the cells afresh and asks for ``calls`` only: ``{"here", "started"}``
    (``started`` None when the namespace does not know its cells). A key remembered from
    an earlier call (an lru_cache: 42 and 42.0 are equal, of one hash) differs."""
    with fresh_state(values):
        key = need(values, "operation_key")
        for args in before:
            key(*args)
        here = [plain(key(*args)) for args in calls]
        started = _keys_from_the_cells_run_again(values, calls, module=WORKER_MODULE)
    return {"here": here, "started": started}


def keys_in_processes(values: MutableMapping[str, Any], calls: list[list[Any]]) -> dict[str, Any]:
    """The keys for ``calls`` here and in one new process per hash seed.

    ``{"how": "processes", "here": [...], "seeds": {seed: [...]}}``, values as reprs. When
    the function cannot be shipped (a closure, an unpicklable global), the harness
    swaps ``hash`` for a salted one in this process instead: ``"how": "salted hash()"``.
    """
    with fresh_state(values):
        here = [repr(need(values, "operation_key")(*args)) for args in calls]
        try:
            seeds = {
                str(seed): [
                    text if how == "returned" else f"raised {text}"
                    for how, text in call_in_fresh_process(
                        values, "operation_key", [(list(a), {}) for a in calls], seed
                    )
                ]
                for seed in HASH_SEEDS
            }
            return {"how": "processes", "here": here, "seeds": seeds}
        except CannotShip as exc:
            salted = {"hash": lambda obj: builtins.hash((0x5EED, obj))}
            with mock.patch.dict(values, salted):
                other = [repr(need(values, "operation_key")(*args)) for args in calls]
            return {"how": f"salted hash() ({exc})", "here": here, "seeds": {"salted": other}}


def accept_changed_in_place(
    values: MutableMapping[str, Any], key: str, payload: dict[str, Any], field: str, value: Any
) -> dict[str, Any]:
    """``accept(seen, key, payload)``, then ``payload[field] = value`` and the same call again.

    The second call gets the very same dict object, changed: a caller that reuses and
    edits its request dict, as a form or a retry loop does.
    """
    seen: dict[str, Any] = {}
    same = dict(payload)
    with fresh_state(values):
        first = outcome(need(values, "accept"), seen, key, same)
        same[field] = value
        second = outcome(need(values, "accept"), seen, key, same)
    return {"results": [first, second], "seen": {str(k): repr(v) for k, v in seen.items()}}


def accept_calls(
    values: MutableMapping[str, Any],
    calls: list[list[Any]],
    seen_before: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``accept(seen, key, payload)`` for each ``[key, payload]`` on one ``seen``.

    ``seen`` starts empty, or as ``seen_before`` (key -> fingerprint, as a store kept it).
    ``{"results": [outcome...], "seen": {...}}``: each outcome is ``{"returned": x}`` or
    ``{"raised": [class names], "message": ...}``; ``seen`` as it was after the last call.
    """
    seen: dict[str, Any] = dict(seen_before or {})
    with fresh_state(values):
        results = [outcome(need(values, "accept"), seen, key, payload) for key, payload in calls]
    return {"results": results, "seen": {str(k): repr(v) for k, v in seen.items()}}


#: What a worker whose locale is C/POSIX (a cron job, a bare container) says its text
#: encoding is: ASCII, so text encoded "the locale's way" loses every other letter.
C_LOCALE_ENCODING = "ANSI_X3.4-1968"


def accept_calls_in_c_locale(
    values: MutableMapping[str, Any], calls: list[list[Any]]
) -> dict[str, Any]:
    """``accept_calls`` on a worker whose locale says its encoding is ASCII (LANG=C)."""
    import locale

    def ascii_locale(*_args: Any, **_kwargs: Any) -> str:
        return C_LOCALE_ENCODING

    with (
        mock.patch.object(locale, "getpreferredencoding", ascii_locale),
        mock.patch.object(locale, "getencoding", ascii_locale),
    ):
        return accept_calls(values, calls)


def accept_in_another_store_and_later(
    values: MutableMapping[str, Any], key: str, payload: dict[str, Any], seconds: float
) -> dict[str, Any]:
    """``accept`` on a store, then on a second, empty store, then on the first one later.

    ``seen`` is the only memory ``accept`` may have: a second store (another tenant's, or
    one restored empty) has never seen the key, and the first store still has it
    ``seconds`` later (a late redelivery). Returns each outcome and both stores.
    """
    first: dict[str, Any] = {}
    other: dict[str, Any] = {}
    with fresh_state(values):
        accept = need(values, "accept")
        results = {"first": outcome(accept, first, key, dict(payload))}
        results["other_store"] = outcome(accept, other, key, dict(payload))
        with clock_moved(values, seconds):
            results["later"] = outcome(accept, first, key, dict(payload))
    return {
        "results": results,
        "seen": {str(k): repr(v) for k, v in first.items()},
        "other_seen": {str(k): repr(v) for k, v in other.items()},
    }


def accept_payload_with_a_datetime(values: MutableMapping[str, Any], key: str) -> dict[str, Any]:
    """``accept`` twice with one payload JSON cannot encode (it holds a datetime)."""
    payload = {"amount_cents": 1990, "due": _dt.datetime(2026, 12, 4, 3, 0, tzinfo=_dt.UTC)}
    return accept_calls(values, [[key, payload], [key, dict(payload)]])


def fingerprints_of_values_and_their_text(values: MutableMapping[str, Any]) -> list[list[Any]]:
    """``payload_fingerprint`` of payloads JSON cannot encode and of the same with text.

    For each pair: a description, the outcome for the payload holding a datetime or a
    Decimal, and the outcome for the same payload with ``str()`` of that value. JSON has
    no such types: ``json.dumps`` raises, it does not turn them into their text.
    """
    import decimal

    pairs = [
        ("datetime", _dt.datetime(2026, 12, 4, 3, 0, tzinfo=_dt.UTC)),
        ("Decimal", decimal.Decimal("19.90")),
    ]
    with fresh_state(values):
        fingerprint = need(values, "payload_fingerprint")
        return [
            [
                what,
                outcome(fingerprint, {"amount": value}),
                outcome(fingerprint, {"amount": str(value)}),
            ]
            for what, value in pairs
        ]


def accept_on_a_long_day(values: MutableMapping[str, Any], count: int) -> dict[str, Any]:
    """``accept`` for ``count`` different keys on one ``seen``, then the first key again:
    with its payload (a repeat) and with another (a conflict).

    ``{"new": how many answered true, "repeat": outcome, "conflict": outcome,
    "kept": len(seen), "first_kept": whether the first key is still in seen}``.
    """
    seen: dict[str, Any] = {}
    first = "billing:0:charge:v1"
    with fresh_state(values):
        accept = need(values, "accept")
        new = 0
        for n in range(count):
            if accept(seen, f"billing:{n}:charge:v1", {"invoice": n, "amount_cents": 1990}):
                new += 1
        repeat = outcome(accept, seen, first, {"invoice": 0, "amount_cents": 1990})
        conflict = outcome(accept, seen, first, {"invoice": 0, "amount_cents": 2990})
    return {
        "new": new,
        "repeat": repeat,
        "conflict": conflict,
        "kept": len(seen),
        "first_kept": first in seen,
    }


def accept_after_an_unencodable_payload(
    values: MutableMapping[str, Any], key: str
) -> dict[str, Any]:
    """``accept`` with a payload JSON cannot encode (a datetime), then with the same
    payload made encodable (the date as ISO text), as the sender fixed and sent it again.

    An entry written into ``seen`` before the fingerprint failed is still there for the
    fixed payload: its every retry is then a conflict, and the work never runs.
    """
    due = _dt.datetime(2026, 12, 4, 3, 0, tzinfo=_dt.UTC)
    broken = {"amount_cents": 1990, "due": due}
    fixed = {"amount_cents": 1990, "due": due.isoformat()}
    return accept_calls(values, [[key, broken], [key, fixed]])


def accept_payloads_holding_two_datetimes(
    values: MutableMapping[str, Any], key: str
) -> dict[str, Any]:
    """``accept`` with a payload holding a datetime, then with the same payload holding
    another datetime: a fingerprint that answers one value for every payload JSON cannot
    encode (``""``, a constant) calls the changed one a repeat."""
    due = _dt.datetime(2026, 12, 4, 3, 0, tzinfo=_dt.UTC)
    first = {"amount_cents": 1990, "due": due}
    then = {"amount_cents": 1990, "due": due + _dt.timedelta(days=1)}
    return accept_calls(values, [[key, first], [key, then]])
