"""Exercise 5: a handler that survives a crash after its effect.

The student writes ``choose_ack``, ``charge_handler`` (a payment through the world's
payment API, which honours an Idempotency-Key) and ``post_handler`` (an entry in the
application's own ledger). Each check runs the job with ``labkit.explore.run_scenario``,
crashing the worker once at one point (a fixed seed, a fresh worker after the crash),
asserts that the crash really fired, and reads the verdict from the world: exactly one
effect is ``ok``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from labkit.explore import Row, Scenario, run_scenario
from labkit.faults import LOST_RESPONSE, POINTS, FaultPlan
from labkit.grading.core import CheckFailed, Checks, Namespace, StudentRaised, expect

CHECKS = Checks(
    "ex05",
    "a handler safe against a crash after the effect",
    needs=("choose_ack", "charge_handler", "post_handler"),
)

SEED = 5
CHARGE = (("charge", {"customer": "cus_42", "amount": 4200}, "billing:42:charge:v1"),)
POST = (("post", {"customer": "cus_42", "amount": 4200}, "ledger:42:post:v1"),)


#: Fired by the check each time the student's ledger work commits (see ``_Ledger``).
LEDGER_COMMIT = "ledger_commit"


class _Ledger:
    """The world's ledger, firing ``ledger_commit`` after each commit it makes.

    The worker's own points sit around the whole handler; a crash *between* two ledger
    writes of one handler needs a point there, and this is it.
    """

    def __init__(self, ledger: Any, ctx: Any) -> None:
        self._ledger, self._ctx = ledger, ctx

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
    def __init__(self, ctx: Any) -> None:
        self._world, self.ledger = ctx.world, _Ledger(ctx.world.ledger, ctx)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)


class _Ctx:
    def __init__(self, ctx: Any) -> None:
        self._ctx, self.world = ctx, _World(ctx)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _observed(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    # The worker must see the faults it injects as they are, not as StudentRaised.
    handler = getattr(handler, "__wrapped__", handler)

    def run(job: Any, ctx: Any) -> Any:
        return handler(job, _Ctx(ctx))

    return run


def _scenario(ns: Namespace, which: str) -> Scenario:
    ack = ns.choose_ack()
    expect(ack in ("late", "first"), "choose_ack() to return 'late' or 'first'", repr(ack))
    if which == "charge":
        return Scenario(
            "your charge_handler",
            {"charge": _observed(ns.charge_handler)},
            ack=ack,
            service="payments",
            jobs=CHARGE,
        )
    return Scenario(
        "your post_handler",
        {"post": _observed(ns.post_handler)},
        ack=ack,
        service="ledger",
        jobs=POST,
    )


def _run(ns: Namespace, which: str, fault: tuple[str, str] | None) -> Row:
    plan = FaultPlan(SEED)
    if fault is not None:
        plan = plan.at(fault[0], fault[1], nth=1)
    try:
        return run_scenario(_scenario(ns, which), plan, point=fault[0] if fault else "-")
    except (CheckFailed, StudentRaised):
        raise
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - the student's handler broke the run itself
        raise CheckFailed(
            "the job to run to the end", f"the run stopped: {type(exc).__name__}: {str(exc)[:160]}"
        ) from None


def _judge(ns: Namespace, which: str, points: tuple[str, ...], action: str = "crash") -> None:
    for point in points:
        row = _run(ns, which, (point, action))
        what = "a lost reply" if action == "lose_response" else "a crash"
        where = {
            LOST_RESPONSE: "right after the payment API charged",
            LEDGER_COMMIT: "right after the first ledger commit",
        }.get(point, f"at {point}")
        expect(
            bool(row.fired),
            f"{what} {where} to fire",
            "it never fired: the run never got there "
            + {
                LOST_RESPONSE: "(does the handler call ctx.world.payments.charge?)",
                LEDGER_COMMIT: "(does the handler write through ctx.world.ledger?)",
            }.get(point, ""),
        )
        expect(
            row.outcome == "ok",
            f"exactly one {'charge' if which == 'charge' else 'ledger entry'} after {what} {where}",
            f"{row.outcome}: {row.effects} effect(s) (seed {row.seed}, replay: {row.replay})",
        )


@CHECKS.add(1, "the job runs once and succeeds when nothing goes wrong", timeout=30.0)
def charge_runs_once_without_faults(ns: Namespace) -> None:
    row = _run(ns, "charge", None)
    expect(
        row.outcome == "ok" and row.effects == 1,
        "one charge, job succeeded",
        f"{row.outcome} with {row.effects} charge(s)",
    )


@CHECKS.add(1, "a crash before the effect is easy: the job is redelivered and runs", timeout=30.0)
def charge_survives_crash_before_effect(ns: Namespace) -> None:
    _judge(ns, "charge", ("after_claim", "before_effect"))


@CHECKS.add(
    3,
    "after the charge, before the job is recorded, the worker dies and the job runs "
    "again: send idempotency_key=job.key so the payment API answers the second "
    "call with the first reply instead of charging twice (a ledger check in "
    "another transaction does not help: the crash falls between the two)",
    timeout=30.0,
)
def charge_survives_crash_after_effect(ns: Namespace) -> None:
    _judge(ns, "charge", (LOST_RESPONSE, "after_effect", "before_commit"))


@CHECKS.add(
    2,
    "acknowledge after the handler (ack 'late'): acknowledging first marks the job "
    "done before the charge, and a crash in between loses it",
    timeout=30.0,
)
def charge_survives_crash_after_commit(ns: Namespace) -> None:
    _judge(ns, "charge", ("after_commit", "after_ack"))


@CHECKS.add(
    2,
    "the API charged and the reply was lost (a timeout): the retry must carry the "
    "same Idempotency-Key, the job's key, never a new one per attempt",
    timeout=30.0,
)
def charge_survives_lost_response(ns: Namespace) -> None:
    _judge(ns, "charge", (LOST_RESPONSE,), action="lose_response")


@CHECKS.add(
    3,
    "the ledger is our own database: check, post and mark 'done' inside one "
    "`with ctx.world.ledger.transaction() as tx:` so they commit together",
    timeout=30.0,
)
def post_survives_every_crash(ns: Namespace) -> None:
    _judge(ns, "post", (LEDGER_COMMIT, *POINTS))
