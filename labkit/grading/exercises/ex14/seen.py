"""Exercise 14's world as the student's job sees it: the real services, each moment named.

``Seen`` passes every call to the real world (``labkit.world.World``) and names the
moments around each effect: right before it (the job got there) and right after it
returned or committed (the effect is done, its checkpoint not yet written). In a kill
sweep those are boundaries of their own beside the student's writes; ``Moments`` can
raise ``SimulatedCrash`` right after a named effect, and the fault scenes
(``faults``) fail an effect before it starts. The world's own SQL statements are not
boundaries: a kill inside one of the world's transactions would test SQLite, not the job.
``job_once`` runs the student's ``run_order`` once on its own connection and world.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import IdempotencyConflict, PermanentError, SimulatedCrash
from labkit.explore.boundaries import Tracer
from labkit.grading.exercises.common import need
from labkit.grading.exercises.labdb import connect
from labkit.world import World
from labkit.world.services import IdempotencyKeyReused

#: The real ``sqlite3.connect``, taken when this module is imported (before a sweep's
#: child wraps it to watch every connection): the world's file is opened with it.
_CONNECT = sqlite3.connect


class Moments:
    """Where ``Seen`` reports a moment: a sweep's tracer, a crash after one effect, both."""

    def __init__(self, tracer: Tracer | None = None, crash_after: str | None = None) -> None:
        # "ledger.transaction()#2": right after the second one (the release's, after the
        # reserve's); without "#n", after the first.
        what, _sep, nth = (crash_after or "").partition("#")
        self.tracer, self.crash_after = tracer, what or None
        self.nth, self.seen = int(nth or 1), 0
        self.crashed = False

    def before(self, what: str) -> None:
        if self.tracer is not None:
            self.tracer.mark(f"{what} (before it ran)")

    def after(self, what: str) -> None:
        if self.tracer is not None:
            self.tracer.mark(f"{what} (after it returned)")
        if what == self.crash_after and not self.crashed:
            self.seen += 1
            if self.seen < self.nth:
                return
            self.crashed = True
            raise SimulatedCrash(f"crashed right after {what}, before its checkpoint")

    def read_alone(self, what: str) -> None:
        """A ledger read in a transaction of its own (``ledger.status``, ``ledger.find``)
        returned: no kill here, a moment only for a copy that overtakes (``run_overtaken``)."""


class _Service:
    def __init__(self, service: Any, moments: Moments, name: str, action: str) -> None:
        self._service, self._moments = service, moments
        self._what = f"{name}.{action}"
        setattr(self, action, self._call)

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        self._moments.before(self._what)
        reply = getattr(self._service, self._what.partition(".")[2])(*args, **kwargs)
        self._moments.after(self._what)
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)


class _Ledger:
    def __init__(self, ledger: Any, moments: Moments) -> None:
        self._ledger, self._moments = ledger, moments

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        self._moments.before("ledger.transaction()")
        with self._ledger.transaction() as tx:
            yield tx
        self._moments.after("ledger.transaction()")

    def post(self, *args: Any, **kwargs: Any) -> Any:
        self._moments.before("ledger.post")
        reply = self._ledger.post(*args, **kwargs)
        self._moments.after("ledger.post")
        return reply

    def mark(self, *args: Any, **kwargs: Any) -> Any:
        self._moments.before("ledger.mark")
        reply = self._ledger.mark(*args, **kwargs)
        self._moments.after("ledger.mark")
        return reply

    def status(self, *args: Any, **kwargs: Any) -> Any:
        reply = self._ledger.status(*args, **kwargs)
        self._moments.read_alone("ledger.status")
        return reply

    def find(self, *args: Any, **kwargs: Any) -> Any:
        reply = self._ledger.find(*args, **kwargs)
        self._moments.read_alone("ledger.find")
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


class CardDeclined(PermanentError):
    """A card declined, as a payment library raises it: a subclass of ``PermanentError``
    (Stripe's ``CardError``), no ``IdempotencyConflict``."""


class InsufficientFunds(PermanentError):
    """A card declined in a payment library's own words: a ``PermanentError`` whose class
    and message say ``insufficient_funds`` (a decline code), never 'declined' or
    'rejected'."""


class RequestMismatch(IdempotencyKeyReused):
    """A key conflict as a payment library words it: an ``IdempotencyKeyReused`` (so an
    ``IdempotencyConflict``) whose message names neither idempotency nor parameters."""


class _Restated:
    """The payment API whose refusals for good (``PermanentError``) come with another
    status, text and class: a card declined (402, ``CardDeclined``), as Stripe says it,
    not the world's 400, its message naming the request's Idempotency-Key; a key
    conflict (``RequestMismatch``) in words of its own. Only the class tells them apart.
    ``plain``: the decline is an ``InsufficientFunds`` whose message is its decline code
    alone (no 'declined', no 'rejected', no key)."""

    def __init__(self, payments: Any, status: int, plain: bool = False) -> None:
        self._payments, self._status, self._plain = payments, status, plain

    def charge(self, *args: Any, **kwargs: Any) -> Any:
        key = kwargs.get("idempotency_key", kwargs.get("key"))
        try:
            return self._payments.charge(*args, **kwargs)
        except IdempotencyConflict:
            raise RequestMismatch(
                f"400 from payments: this request does not match the first one sent under "
                f"{key!r}; nothing charged",
                status=400,
            ) from None
        except PermanentError as exc:
            if type(exc) is not PermanentError:
                raise
            if self._plain:
                raise InsufficientFunds(
                    f"{self._status}: insufficient_funds", status=self._status
                ) from None
            raise CardDeclined(
                f"{self._status} from payments: card_declined (insufficient funds) for the "
                f"request with Idempotency-Key {key!r}; nothing charged",
                status=self._status,
            ) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._payments, name)


class Seen:
    """The world as the student's job sees it: the real services, each moment named.

    ``declined_as``: the payment API's refusals for good carry that status (``_Restated``;
    ``plain``: worded with a decline code alone).
    """

    def __init__(
        self,
        world: World,
        moments: Moments,
        declined_as: int | None = None,
        plain: bool = False,
    ) -> None:
        self._world = world
        self.payments: Any = _Service(world.payments, moments, "payments", "charge")
        if declined_as is not None:
            self.payments = _Restated(self.payments, declined_as, plain)
        self.mail = _Service(world.mail, moments, "mail", "send")
        self.ledger = _Ledger(world.ledger, moments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)


def open_world(path: Path, later_s: float = 0.0) -> World:
    """The world on ``path``, its own statements unwatched (see ``_CONNECT``); its clock
    ``later_s`` past the lab's epoch."""
    watching, sqlite3.connect = sqlite3.connect, _CONNECT
    try:
        return World(path, FakeClock(LAB_EPOCH + later_s))
    finally:
        sqlite3.connect = watching


def job_once(
    values: MutableMapping[str, Any],
    folder: Path,
    order: dict[str, Any],
    version: int,
    moments: Moments,
    later_s: float = 0.0,
    declined_as: int | None = None,
    wrap: Callable[[sqlite3.Connection], Any] | None = None,
    plain: bool = False,
) -> Any:
    """The student's ``run_order`` once, on its own connection (``wrap(conn)`` when
    given) and world (its clock ``later_s`` on), both closed after."""
    conn, world = connect(folder / "steps.db"), open_world(folder / "world.db", later_s)
    try:
        return need(values, "run_order")(
            conn if wrap is None else wrap(conn),
            Seen(world, moments, declined_as, plain),
            dict(order),
            policy_version=version,
        )
    finally:
        conn.close()
        world.close()
