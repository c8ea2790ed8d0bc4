"""Harness for exercise 5: the student's handler run by a real worker, crashed on purpose.

``run`` builds the scenario (the student's ``choose_ack`` and handler, one job), runs it
with ``labkit.explore.matrix.run_scenario`` in a folder the check names, crashing once where
the check says, and returns what fired and what the handler raised. The verdict is
not returned: the check opens the job store and the world's database in that folder
and judges them itself.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.explore.matrix import Scenario, run_scenario
from labkit.faults import FaultPlan
from labkit.grading.checks import StudentRaised
from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.stub import is_stub
from labkit.store import JobStore
from labkit.world import World

#: Fired by the check each time the student's ledger work commits (see ``_Ledger``).
LEDGER_COMMIT = "ledger_commit"


class _Ledger:
    """The world's ledger, firing ``ledger_commit`` after each commit it makes.

    The worker's own points sit around the whole handler; a crash *between* two ledger
    writes of one handler needs a point there, and this is it.
    """

    def __init__(self, ledger: Any, ctx: Any, pause: float = 0.0) -> None:
        self._ledger, self._ctx, self._pause = ledger, ctx, pause

    def status(self, *args: Any, **kwargs: Any) -> Any:
        # A read in its own transaction: another delivery can act before the next step.
        reply = self._ledger.status(*args, **kwargs)
        if self._pause:
            threading.Event().wait(self._pause)
        return reply

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._ledger.transaction() as tx:
            yield tx
        self._ctx.point(LEDGER_COMMIT)

    def post(self, *args: Any, **kwargs: Any) -> Any:
        reply = self._ledger.post(*args, **kwargs)
        self._ctx.point(LEDGER_COMMIT)
        return reply

    def mark(self, *args: Any, **kwargs: Any) -> Any:
        reply = self._ledger.mark(*args, **kwargs)
        self._ctx.point(LEDGER_COMMIT)
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


class _World:
    def __init__(self, ctx: Any, pause: float = 0.0) -> None:
        self._world, self.ledger = ctx.world, _Ledger(ctx.world.ledger, ctx, pause)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)


class _Ctx:
    def __init__(self, ctx: Any, pause: float = 0.0) -> None:
        self._ctx, self.world = ctx, _World(ctx, pause)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _observed(
    handler: Callable[[Any, Any], Any], errors: list[str], pause: float = 0.0
) -> Callable[[Any, Any], Any]:
    """The student's handler seeing ``_Ctx``; what it raises is noted, then re-raised.

    The worker treats a handler's exception as a failed attempt and retries, so without
    the note an AttributeError in the handler would only show up as "the crash never
    fired". Simulated crashes (BaseException) pass unnoted.
    """

    def run(job: Any, ctx: Any) -> Any:
        try:
            return handler(job, _Ctx(ctx, pause))
        except Exception as exc:
            # labkit's own classes are the world answering (a lost reply, a 409): not bugs.
            if not type(exc).__module__.startswith("labkit."):
                errors.append(StudentRaised.from_exception(exc).describe())
            raise

    return run


def run(
    values: MutableMapping[str, Any],
    which: str,
    folder: str,
    faults: list[list[Any]],
    seed: int,
    jobs: list[list[Any]],
) -> dict[str, Any]:
    """Run ``jobs`` through the student's ``which`` handler ("charge" or "post") in ``folder``.

    ``faults`` are ``[point, action, nth]`` rules. Returns ``{"ack", "fired", "replay",
    "handler_errors"}``; the job store is ``folder/jobs.db``, the world ``folder/world.db``.
    """
    errors: list[str] = []
    with fresh_state(values):
        ack = need(values, "choose_ack")()
        if ack not in ("late", "first"):
            return {"ack": repr(ack)}
        handler = need(values, "charge_handler" if which == "charge" else "post_handler")
        scenario = Scenario(
            f"your {which}_handler",
            {which: _observed(handler, errors)},
            ack=ack,
            service="payments" if which == "charge" else "ledger",
            jobs=tuple((kind, payload, key) for kind, payload, key in jobs),
        )
        plan = FaultPlan(seed)
        for point, action, nth in faults:
            plan = plan.at(point, action, nth=nth)
        row = run_scenario(scenario, plan, point=faults[0][0] if faults else "-", workdir=folder)
    return {
        "ack": ack,
        "fired": list(row.fired),
        "replay": row.replay,
        "handler_errors": errors[:3],
    }


#: How long a ledger read made in its own transaction pauses in ``two_deliveries``.
DELIVERY_PAUSE_S = 0.3


def two_deliveries(
    values: MutableMapping[str, Any], which: str, folder: str, job: list[Any]
) -> dict[str, Any]:
    """Deliver one job to two workers at the same moment (a redelivery racing the first).

    Each delivery has its own connection to the world's file (``folder/world.db``) and
    starts at a barrier; a ledger read made in its own transaction pauses, so a
    check-then-act across transactions is caught every time. Returns what each
    delivery's handler raised (the world answering, a 409, is fine); the check counts
    the effects in the world file itself.
    """
    kind, payload, key = job
    clock = FakeClock(LAB_EPOCH)
    with JobStore(Path(folder) / "jobs.db", clock) as store:
        store.enqueue(kind, payload, key=key)
        the_job = store.get_by_key(key)
    World(Path(folder) / "world.db", clock).close()
    handler = need(values, "charge_handler" if which == "charge" else "post_handler")
    start = threading.Barrier(2)
    said: list[str] = ["", ""]
    errors: list[str] = []
    stub: list[NotImplementedError] = []

    def deliver(i: int) -> None:
        world = World(Path(folder) / "world.db", clock)
        try:
            ctx = types.SimpleNamespace(world=world, point=lambda *a, **k: None)
            start.wait()
            _observed(handler, errors, DELIVERY_PAUSE_S)(the_job, ctx)
            said[i] = "ok"
        except NotImplementedError as exc:
            said[i] = f"NotImplementedError: {exc}"
            if is_stub(exc):
                stub.append(exc)
        except Exception as exc:  # noqa: BLE001 - each delivery's end is the evidence
            said[i] = f"{type(exc).__name__}: {str(exc)[:120]}"
        finally:
            world.close()

    with fresh_state(values):
        threads = [threading.Thread(target=deliver, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if stub:
        raise stub[0]  # the exercise stub: the check reads "not started yet"
    return {"deliveries": said, "handler_errors": errors[:3]}
