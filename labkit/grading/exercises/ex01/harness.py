"""Harness for exercise 1: keys computed later, in other processes, and ``accept`` runs.

``operation_key`` must not depend on the wall clock nor on the process; ``accept``
mutates the ``seen`` dict it is given, so the harness owns that dict and returns it.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import dataclasses
import datetime as _dt
import enum
import sys
import uuid
from collections.abc import Callable, MutableMapping
from functools import partial
from typing import Any
from unittest import mock

from labkit.grading.exercises.common import fresh_state, need, outcome, plain
from labkit.grading.exercises.elsewhere import on_another_machine

# A bound on `seen` counted in calls, met cheaply (``caps``): harness functions, named here.
from labkit.grading.exercises.ex01.built_ids import built
from labkit.grading.exercises.ex01.caps import accept_past_calls as accept_past_calls
from labkit.grading.exercises.ex01.caps import ints_written_in as ints_written_in
from labkit.grading.exercises.ex01.edges import (
    accept_after_the_store_changed as accept_after_the_store_changed,
)
from labkit.grading.exercises.ex01.edges import (
    accept_between_two_workers as accept_between_two_workers,
)
from labkit.grading.exercises.ex01.edges import (
    accept_in_a_store_that_knows_better as accept_in_a_store_that_knows_better,
)

# Inputs past every cut the code writes, and a store that fails (``edges``).
from labkit.grading.exercises.ex01.edges import accept_long_keys as accept_long_keys
from labkit.grading.exercises.ex01.edges import accept_long_payloads as accept_long_payloads
from labkit.grading.exercises.ex01.edges import (
    accept_on_a_failing_store as accept_on_a_failing_store,
)
from labkit.grading.exercises.ex01.edges import (
    accept_on_a_watched_store as accept_on_a_watched_store,
)
from labkit.grading.exercises.ex01.edges import (
    accept_the_same_dict_again as accept_the_same_dict_again,
)
from labkit.grading.exercises.ex01.edges import (
    accept_what_the_fingerprint_refuses as accept_what_the_fingerprint_refuses,
)
from labkit.grading.exercises.ex01.edges import conflict_on_a_long_key as conflict_on_a_long_key
from labkit.grading.exercises.ex01.edges import held
from labkit.grading.exercises.ex01.edges import keys_of_long_intents as keys_of_long_intents
from labkit.grading.exercises.ex01.edges import (
    long_inputs_in_another_process as long_inputs_in_another_process,
)
from labkit.grading.exercises.replay import CannotShip, call_in_fresh_process, cells_run_again
from labkit.grading.exercises.wallclock import clock_moved

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
        return [plain(key(*map(built, args))) for args in calls]


#: The module a worker over there imports the notebook's code as (its ``__name__``).
WORKER_MODULE = "keys"
#: How a worker over there was started: its program (``sys.argv``), not the notebook's.
WORKER_ARGV = ["/srv/other/bin/worker", "--queue", "billing"]


@contextlib.contextmanager
def _as_a_worker_over_there(values: MutableMapping[str, Any]) -> Any:
    """``on_another_machine``, started as a worker program there (``sys.argv``): a key
    with the program's name in it (``sys.argv[0]``) differs from one worker to another."""
    with on_another_machine(values), mock.patch.object(sys, "argv", list(WORKER_ARGV)):
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
        here = [plain(need(values, "operation_key")(*map(built, args))) for args in calls]
        with _as_a_worker_over_there(values):
            there = [plain(need(values, "operation_key")(*map(built, args))) for args in calls]
        started = _keys_from_the_cells_run_again(
            values, calls, partial(_as_a_worker_over_there, {}), module=WORKER_MODULE
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
    return {"results": [first, second], "seen": held(seen)}


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
        # A copy of the calls, as the sandbox's channel hands them over (all alive at once):
        # an accept that writes into the caller's dict must not rewrite the checks' own
        # constants.
        results = [
            outcome(need(values, "accept"), seen, key, payload)
            for key, payload in copy.deepcopy(calls)
        ]
    return {"results": results, "seen": held(seen)}


def accept_calls_logged(values: MutableMapping[str, Any], calls: list[list[Any]]) -> dict[str, Any]:
    """``accept_calls``, each error also as a logger writes it (``logging.exception``):
    under ``"logged"``, ``traceback.format_exception`` of it, which holds its whole
    message, its notes (``add_note``) and the errors chained to it (``raise ... from``,
    or raised while handling another), where a card number may hide as well. Under
    ``"printed"``, what the call itself wrote to stdout or stderr or logged (any logger
    that reaches the root one, from DEBUG up): a log line is as lasting as a message."""
    import io
    import logging
    import traceback

    class Kept(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(self.format(record))

    seen: dict[str, Any] = {}
    caught: list[BaseException] = []
    with fresh_state(values):
        accept = need(values, "accept")

        def logged(*args: Any) -> Any:
            try:
                return accept(*args)
            except BaseException as exc:
                caught.append(exc)
                raise

        results = []
        root = logging.getLogger()
        for key, payload in copy.deepcopy(calls):
            kept, written, level = Kept(), io.StringIO(), root.level
            root.addHandler(kept)
            root.setLevel(logging.DEBUG)
            try:
                with (
                    contextlib.redirect_stdout(written),
                    contextlib.redirect_stderr(written),
                    _every_record_and_file_kept(kept.lines),
                ):
                    result = outcome(logged, seen, key, payload)
            finally:
                root.removeHandler(kept)
                root.setLevel(level)
            result["printed"] = written.getvalue() + "\n".join(kept.lines)
            if "raised" in result and caught:
                result["logged"] = "".join(traceback.format_exception(caught[-1]))
            results.append(result)
    return {"results": results, "seen": held(seen)}


@contextlib.contextmanager
def _every_record_and_file_kept(lines: list[str]) -> Any:
    """Keep in ``lines`` what no redirect of stdout sees: every log record any logger
    handles (one that does not propagate to the root, with a handler of its own made at
    import on the real stderr), with the fields it was given through ``extra=``, and the
    text written to any file opened for writing (an audit file)."""
    import io
    import logging

    handle, real_open = logging.Logger.handle, builtins.open

    # What every record holds; anything else came in through ``extra=``, which a
    # structured (JSON) formatter writes into the log line beside the message.
    standard = {*vars(logging.LogRecord("", 0, "", 0, "", (), None)), "message", "asctime"}

    def kept_handle(self: logging.Logger, record: logging.LogRecord) -> Any:
        with contextlib.suppress(Exception):
            lines.append(record.getMessage())
            extra = {k: v for k, v in vars(record).items() if k not in standard}
            if extra:
                lines.append(" ".join(f"{k}={v!r}" for k, v in extra.items()))
        return handle(self, record)

    class Copied:
        def __init__(self, file: Any) -> None:
            self._file = file

        def write(self, text: Any) -> Any:
            with contextlib.suppress(Exception):
                lines.append(
                    text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
                )
            return self._file.write(text)

        def writelines(self, texts: Any) -> None:
            for text in texts:
                self.write(text)

        def __enter__(self) -> Copied:
            self._file.__enter__()
            return self

        def __exit__(self, *exc: Any) -> Any:
            return self._file.__exit__(*exc)

        def __iter__(self) -> Any:
            return iter(self._file)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._file, name)

    def kept_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        opened = real_open(file, mode, *args, **kwargs)
        return Copied(opened) if set(str(mode)) & set("wax+") else opened

    with (
        mock.patch.object(logging.Logger, "handle", kept_handle),
        mock.patch.object(builtins, "open", kept_open),
        mock.patch.object(io, "open", kept_open),
    ):
        yield


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


#: What another tenant's order under the same key holds besides the payload.
ANOTHER_TENANT = {"tenant": "acme-br", "amount_cents": 4_990}


def accept_in_another_store_and_later(
    values: MutableMapping[str, Any], key: str, payload: dict[str, Any], seconds: float
) -> dict[str, Any]:
    """``accept`` on a store, then on a second, empty store, then on the first one later.

    ``seen`` is the only memory ``accept`` may have: a second store (another tenant's, or
    one restored empty) has never seen the key, and the first store still has it
    ``seconds`` later (a late redelivery). A third, empty store then gets the key with
    another payload (another tenant's order): only a conflict kept outside ``seen``
    refuses it. Returns each outcome and the first two stores.
    """
    first: dict[str, Any] = {}
    other: dict[str, Any] = {}
    with fresh_state(values):
        accept = need(values, "accept")
        results = {"first": outcome(accept, first, key, dict(payload))}
        results["other_store"] = outcome(accept, other, key, dict(payload))
        results["other_payload"] = outcome(accept, {}, key, {**payload, **ANOTHER_TENANT})
        with clock_moved(values, seconds):
            results["later"] = outcome(accept, first, key, dict(payload))
    return {
        "results": results,
        "seen": held(first),
        "other_seen": held(other),
    }


def accept_in_a_restarted_worker(
    values: MutableMapping[str, Any], key: str, payload: dict[str, Any]
) -> dict[str, Any]:
    """``accept`` on a store, then the same call on the same store in a worker started
    afresh: the notebook's cells run again (``cells_run_again``), so nothing the first
    worker kept outside ``seen`` (a module-level set of the keys it stored, their first-seen
    times) is there. ``{"first": outcome, "restarted": outcome or None}``, None when the
    namespace does not know its cells (``check()`` in Jupyter)."""
    store: dict[str, Any] = {}
    with fresh_state(values):
        first = outcome(need(values, "accept"), store, key, dict(payload))
        with cells_run_again(values) as again:
            accept = None if again is None else again.get("accept")
            restarted = outcome(accept, store, key, dict(payload)) if callable(accept) else None
    return {"first": first, "restarted": restarted}


def accept_payload_with_a_datetime(values: MutableMapping[str, Any], key: str) -> dict[str, Any]:
    """``accept`` twice with one payload JSON cannot encode (it holds a datetime)."""
    payload = {"amount_cents": 1990, "due": _dt.datetime(2026, 12, 4, 3, 0, tzinfo=_dt.UTC)}
    return accept_calls(values, [[key, payload], [key, dict(payload)]])


def keys_of_ids_equal_to_an_int(values: MutableMapping[str, Any]) -> list[list[Any]]:
    """``operation_key('billing', id, 'charge')`` for the id 42 as an int, then as other
    number types equal to it that ``str()`` writes as ``42``: an int subclass, an IntEnum
    member and, where numpy is installed, ``numpy.int64`` (an id read through pandas).
    Each row: what the id was (``int``, ``subclass``, ``IntEnum``, ``numpy``), and the
    call's outcome."""

    class InvoiceId(int):
        """An id type of the caller's own, as an ORM or a typed codebase hands over."""

    class Known(enum.IntEnum):
        INVOICE = 42

    ids: list[tuple[str, Any]] = [("int", 42), ("subclass", InvoiceId(42))]
    ids.append(("IntEnum", Known.INVOICE))
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy comes with pandas in the lab
        pass
    else:
        ids.append(("numpy", numpy.int64(42)))
    with fresh_state(values):
        key = need(values, "operation_key")
        return [[what, outcome(key, "billing", value, "charge")] for what, value in ids]


def keys_of_built_intents(values: MutableMapping[str, Any], intents: list[list[Any]]) -> list[Any]:
    """The outcome of ``operation_key(*intent)`` for each intent, its datetime, date and
    Decimal ids built here from their descriptions (``built_ids``)."""
    with fresh_state(values):
        key = need(values, "operation_key")
        return [outcome(key, *map(built, intent)) for intent in intents]


def keys_of_a_uuid_id(values: MutableMapping[str, Any], text: str) -> list[Any]:
    """``operation_key('billing', id, 'charge')`` for the id ``uuid.UUID(text)`` (as an
    ORM hands it), then for ``text``, its ``str()`` (as a message or a URL carries it):
    the outcome of each call."""
    with fresh_state(values):
        key = need(values, "operation_key")
        return [
            outcome(key, "billing", uuid.UUID(text), "charge"),
            outcome(key, "billing", text, "charge"),
        ]


class _Tier(enum.Enum):
    """A plain Enum (not a str or int one): json.dumps cannot encode its members."""

    GOLD = "gold"


@dataclasses.dataclass
class _Address:
    """A dataclass, which json.dumps cannot encode."""

    street: str


#: An order's id as a UUID, which json.dumps cannot encode either.
_ORDER_UUID = uuid.UUID("0f8e4c2a-7b1d-4e9a-9c3f-5a6b7c8d9e0f")


def fingerprints_of_values_and_their_text(values: MutableMapping[str, Any]) -> list[list[Any]]:
    """``payload_fingerprint`` of payloads JSON cannot encode and of the same with what
    an encoder's ``default=`` would write for the value.

    For each pair: a description, the outcome for the payload holding a datetime or a
    Decimal (or a set), the outcome for the same payload holding the value's stand-in,
    and which stand-in: ``"text"`` (``str()``), ``"isoformat"`` (the datetime's ISO
    text), ``"float"`` (the Decimal as a float), ``"repr"`` (the Decimal's ``repr()``),
    ``"cents"`` (the Decimal times 100, an int), ``"timestamp"`` and ``"epoch"`` (the
    datetime's Unix time, as a float and as an int), ``"naive"`` (its ISO text without the
    zone), ``"decoded"`` (bytes as their UTF-8 text), ``"hex"`` and ``"base64"``
    (bytes as their hex digits or their base64 text), ``"list"`` (the set's items, sorted)
    or ``"reversed"`` (the same, in the other order).
    JSON has no such types: ``json.dumps`` raises, it does not turn them into others.
    """
    import decimal

    due, price = _dt.datetime(2026, 12, 4, 3, 0, tzinfo=_dt.UTC), decimal.Decimal("19.90")
    pairs: list[tuple[str, Any, Any, str]] = [
        ("datetime", due, str(due), "text"),
        ("Decimal", price, str(price), "text"),
        ("datetime", due, due.isoformat(), "isoformat"),
        ("Decimal", price, float(price), "float"),
        ("set", {"gift", "express"}, ["express", "gift"], "list"),
        # default=list writes a set's items in the order the set holds them, which follows
        # the process's hash seed: one of the two orders is what it writes, on any seed.
        ("set", {"gift", "express"}, ["gift", "express"], "reversed"),
        # default=repr writes a Decimal as the text "Decimal('19.90')".
        ("Decimal", price, repr(price), "repr"),
        # An encoder that writes money as its cents (int(d * 100)), an instant as its Unix
        # time (timestamp(), or its int) or as its ISO text with the zone dropped, and bytes
        # as their decoded text: each another payload that holds that stand-in.
        ("Decimal", price, int(price * 100), "cents"),
        ("datetime", due, due.timestamp(), "timestamp"),
        ("datetime", due, int(due.timestamp()), "epoch"),
        ("datetime", due, due.replace(tzinfo=None).isoformat(), "naive"),
        ("bytes", b"INV-7", "INV-7", "decoded"),
        # And bytes written as their hex digits or their base64 text, the usual ways to put
        # bytes in JSON: another payload than one that holds that text.
        ("bytes", b"INV-7", b"INV-7".hex(), "hex"),
        ("bytes", b"INV-7", "SU5WLTc=", "base64"),
        # A UUID written as its text (default=str), and a plain Enum member written as its
        # value or its name: JSON has neither, so each is another payload than the text.
        ("UUID", _ORDER_UUID, str(_ORDER_UUID), "text"),
        ("Enum", _Tier.GOLD, _Tier.GOLD.value, "value"),
        ("Enum", _Tier.GOLD, _Tier.GOLD.name, "name"),
        # A dataclass written as its fields (default=vars, or dataclasses.asdict).
        ("dataclass", _Address("Rua A, 42"), {"street": "Rua A, 42"}, "fields"),
    ]
    with fresh_state(values):
        fingerprint = need(values, "payload_fingerprint")
        return [
            [
                what,
                outcome(fingerprint, {"amount": value}),
                outcome(fingerprint, {"amount": stand_in}),
                how,
            ]
            for what, value, stand_in, how in pairs
        ]


def accept_on_a_long_day(
    values: MutableMapping[str, Any], count: int, months: int = 0
) -> dict[str, Any]:
    """``accept`` for ``count`` different keys on one ``seen``, then the first key again:
    with its payload (a repeat) and with another (a conflict). Then, when ``months`` is
    more than ``count`` and the store kept all ``count`` keys, the same store as it
    stands after months of work: filled with other keys (as a store restored from disk
    is) up to ``months`` entries, given one more new key, then the first key's repeat.

    ``{"new": how many answered true, "repeat": outcome, "conflict": outcome,
    "kept": len(seen), "first_kept": whether the first key is still in seen,
    "crowded": {"new": outcome, "repeat": outcome, "kept": len(seen)} or None}``.
    """
    seen: dict[str, Any] = {}
    first = "billing:0:charge:v1"
    crowded = None
    with fresh_state(values):
        accept = need(values, "accept")
        new = 0
        for n in range(count):
            if accept(seen, f"billing:{n}:charge:v1", {"invoice": n, "amount_cents": 1990}):
                new += 1
        repeat = outcome(accept, seen, first, {"invoice": 0, "amount_cents": 1990})
        conflict = outcome(accept, seen, first, {"invoice": 0, "amount_cents": 2990})
        kept, first_kept = len(seen), first in seen
        # Only a store that kept the whole day: one that lost keys already fails on that
        # (and a cap met by 100,000 fillers can take a student's loop minutes to enforce).
        if months > kept == count and first_kept:
            # Written straight into the store, as loading it from disk would: cheap, and
            # a bound on len(seen) (a cap of 100,000 keys) meets it at the next new key.
            filler = "0" * 64
            seen.update((f"archive:{n}:charge:v1", filler) for n in range(months - len(seen)))
            crowded = {
                "new": outcome(accept, seen, "billing:new:charge:v1", {"amount_cents": 1}),
                "repeat": outcome(accept, seen, first, {"invoice": 0, "amount_cents": 1990}),
                "kept": len(seen),
            }
    return {
        "new": new,
        "repeat": repeat,
        "conflict": conflict,
        "kept": kept,
        "first_kept": first_kept,
        "crowded": crowded,
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


#: What ``sys.getsizeof`` counts for each key of a dict's table (its hash, key and value
#: pointers and its index slot), for the keys a ``VastStore`` keeps on disk.
_TABLE_BYTES_PER_KEY = 40


class VastStore(dict):  # type: ignore[type-arg]
    """A ``seen`` that holds years of keys: the ones this run wrote are in memory (the
    dict itself), ``archived`` older ones on disk, counted by ``len()`` and by
    ``sys.getsizeof`` as the store's size. ``clear()`` empties both.

    No copy of a billion keys is made: a bound on the store's size (``len(seen)``, its
    memory) meets it at once, however large the bound."""

    archived = 0

    def __len__(self) -> int:
        return dict.__len__(self) + self.archived

    def __sizeof__(self) -> int:
        return dict.__sizeof__(self) + self.archived * _TABLE_BYTES_PER_KEY

    def clear(self) -> None:
        self.archived = 0
        dict.clear(self)


def accept_in_a_vast_store(values: MutableMapping[str, Any], archived: int) -> dict[str, Any]:
    """``accept`` for a first key on a ``VastStore``; then, once the store counts
    ``archived`` keys more (years of work, loaded from disk), a new key, then the first
    key's repeat. ``{"results": {"first", "new", "repeat"}, "kept": len(store),
    "first_kept": whether the first key is still in it}``: a bound on the store's size,
    of any size, drops keys there (or clears it)."""
    store = VastStore()
    first, payload = "billing:0:charge:v1", {"invoice": 0, "amount_cents": 1990}
    with fresh_state(values):
        accept = need(values, "accept")
        results = {"first": outcome(accept, store, first, dict(payload))}
        store.archived = archived
        results["new"] = outcome(accept, store, "billing:new:charge:v1", {"amount_cents": 1})
        results["repeat"] = outcome(accept, store, first, dict(payload))
    return {"results": results, "kept": len(store), "first_kept": dict.__contains__(store, first)}


class _FingerprintedMeanwhile(dict):  # type: ignore[type-arg]
    """A nested dict of a payload that, when the fingerprint reads its items, lets another
    thread fingerprint another payload first (a thread switch in the middle of the JSON):
    ``run()`` in a thread of its own, waited for ``PATIENCE`` seconds (a lock held across
    the fingerprint keeps it waiting: it then runs after the first call).

    A copy (``copy.deepcopy(payload)`` first, so the caller's dict is never touched) is
    one of these too and shares the pending run: the switch comes when the copy's JSON is
    written, and copying never starts it (nor trips on the thread's lock)."""

    def __init__(self, data: dict[str, Any], run: Callable[[], None]) -> None:
        super().__init__(data)
        self._shared: dict[str, Any] = {"run": run, "thread": None}

    @property
    def thread(self) -> Any:
        return self._shared["thread"]

    def _copied(self, data: dict[str, Any]) -> _FingerprintedMeanwhile:
        twin = type(self).__new__(type(self))
        dict.__init__(twin, data)
        twin._shared = self._shared
        return twin

    def __copy__(self) -> _FingerprintedMeanwhile:
        return self._copied(dict.copy(self))

    def __deepcopy__(self, memo: dict[int, Any]) -> _FingerprintedMeanwhile:
        return self._copied(copy.deepcopy(dict.copy(self), memo))

    def items(self) -> Any:
        import threading

        from labkit.grading.exercises.ex01.edges import PATIENCE

        run, self._shared["run"] = self._shared["run"], None
        if run is not None:
            self._shared["thread"] = threading.Thread(target=run, daemon=True)
            self._shared["thread"].start()
            self._shared["thread"].join(PATIENCE)
        return super().items()


def fingerprint_between_two_threads(
    values: MutableMapping[str, Any],
    payload: dict[str, Any],
    nested: str,
    other_payload: dict[str, Any],
) -> dict[str, Any]:
    """``payload_fingerprint(payload)`` alone, then with another thread fingerprinting
    ``other_payload`` while the JSON of ``payload[nested]`` is being written:
    ``{"alone", "result", "other_alone", "other"}`` (outcomes). A buffer, an encoder's
    state or a hash object kept at module level is rewritten by the other call in
    between, and one payload gets a fingerprint of the other's text mixed in."""
    with fresh_state(values):
        fingerprint = need(values, "payload_fingerprint")
        alone = outcome(fingerprint, copy.deepcopy(payload))
        other_alone = outcome(fingerprint, copy.deepcopy(other_payload))
        other: dict[str, Any] = {}

        def run() -> None:
            other.update(outcome(fingerprint, copy.deepcopy(other_payload)))

        sent = copy.deepcopy(payload)
        meanwhile = _FingerprintedMeanwhile(sent[nested], run)
        sent[nested] = meanwhile
        result = outcome(fingerprint, sent)
        if meanwhile.thread is not None:
            meanwhile.thread.join(5.0)
    return {
        "alone": alone,
        "result": result,
        "other_alone": other_alone,
        "other": dict(other) or {"returned": "(still running)"},
    }
