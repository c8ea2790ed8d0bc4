"""Exercise 5: the student's ``charge_handler`` meeting a 400 from the payment API.

The worker buries a ``PermanentError`` as dead and retries a ``TransientError``; what the
handler lets out decides which. A fake API (nothing is charged) refuses every charge, and
the check reads what came out, without a worker: a few milliseconds instead of a run.
``handled_once`` is that one call against any fake API (``harness.key_in_progress``'s too).
"""

from __future__ import annotations

import types
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import PermanentError, TransientError
from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.stub import is_stub
from labkit.store import JobStore


class _RefusingPayments:
    """A payment API that answers every charge with a 400 (the card declined)."""

    def __init__(self) -> None:
        self.calls = 0

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        raise PermanentError("400 from payments.charge: card declined; nothing done", status=400)

    def find(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []


def refused_charge(values: MutableMapping[str, Any], folder: str, job: list[Any]) -> dict[str, Any]:
    """Call the student's ``charge_handler`` once for ``job`` against ``_RefusingPayments``.

    ``{"calls": charges made, "raised": "ErrorClass: message" or "", "transient": whether
    what came out is a TransientError (the worker would retry it), "returned": repr}``.
    """
    payments = _RefusingPayments()
    got, error = handled_once(values, folder, job, payments)
    got.setdefault("raised", "")
    got["transient"] = isinstance(error, TransientError)
    got["calls"] = payments.calls
    return got


def handled_once(
    values: MutableMapping[str, Any], folder: str, job: list[Any], payments: Any
) -> tuple[dict[str, Any], Exception | None]:
    """The student's ``charge_handler`` called once for ``job`` (enqueued in a new store in
    ``folder``) with ``payments`` as the world's payment API: ``{"returned": repr}`` or
    ``{"raised": "ErrorClass: message"}``, and the error itself (None when it returned)."""
    kind, payload, key = job
    with JobStore(Path(folder) / "jobs.db", FakeClock(LAB_EPOCH)) as store:
        store.enqueue(kind, payload, key=key)
        the_job = store.get_by_key(key)
    ctx = types.SimpleNamespace(
        world=types.SimpleNamespace(payments=payments), point=lambda *a, **k: None
    )
    with fresh_state(values):
        try:
            return {"returned": repr(need(values, "charge_handler")(the_job, ctx))}, None
        except NotImplementedError as exc:
            if is_stub(exc):
                raise
            return {"raised": f"NotImplementedError: {str(exc)[:160]}"}, exc
        except Exception as exc:  # noqa: BLE001 - what came out is the evidence
            return {"raised": f"{type(exc).__name__}: {str(exc)[:160]}"}, exc
