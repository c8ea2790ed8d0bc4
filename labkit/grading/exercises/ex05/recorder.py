"""A stand-in context for exercise 5's handlers that writes down every call they make.

``RecordingCtx(path)`` looks like the worker's ``ctx`` to ``charge_handler`` and
``post_handler``: ``ctx.world.payments.charge/find(...)``, ``ctx.world.ledger.status/post/
mark`` and ``ctx.world.ledger.transaction()``. Nothing is charged or posted; each call
is appended to ``path`` as one JSON line. It pickles (plain attributes, a module-level
class), so a handler called in a brand-new process (``replay.call_in_fresh_process``)
records there what it would have sent, and the check compares the two processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock


class _Notes:
    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, call: str, *args: Any, **kwargs: Any) -> None:
        line = {"call": call, "args": [repr(a) for a in args]}
        line |= {k: repr(v) for k, v in sorted(kwargs.items())}
        with Path(self.path).open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


class _Payments:
    def __init__(self, notes: _Notes) -> None:
        self._notes = notes

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self._notes.write("charge", *args, **kwargs)
        return {"charge_id": "ch_recorded"}

    def find(self, *args: Any, **kwargs: Any) -> list[Any]:
        self._notes.write("find", *args, **kwargs)
        return []  # never charged: the handler goes on to charge


class _Tx:
    def __init__(self, notes: _Notes) -> None:
        self._notes = notes

    def status(self, *args: Any, **kwargs: Any) -> None:
        self._notes.write("status", *args, **kwargs)
        return None  # never posted: the handler goes on to post

    def post(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self._notes.write("post", *args, **kwargs)
        return {"entry_id": 1}

    def mark(self, *args: Any, **kwargs: Any) -> None:
        self._notes.write("mark", *args, **kwargs)


class _Ledger(_Tx):
    def find(self, *args: Any, **kwargs: Any) -> list[Any]:
        self._notes.write("find", *args, **kwargs)
        return []  # never posted: the handler goes on to post

    @contextmanager
    def transaction(self) -> Iterator[_Tx]:
        yield _Tx(self._notes)


class _World:
    def __init__(self, notes: _Notes) -> None:
        self.payments, self.ledger = _Payments(notes), _Ledger(notes)


class RecordingCtx:
    """``ctx`` for one handler call; what the handler sent is in ``path``, a line a call."""

    def __init__(self, path: str) -> None:
        self._notes = _Notes(path)
        self.world = _World(self._notes)

    def record_to(self, path: str) -> RecordingCtx:
        """This ``ctx``, its world now writing to ``path``: one worker's world for each of
        its jobs in turn, so a handler that kept ``ctx.world`` (or its payment API) from
        an earlier job records the next job's calls where they belong."""
        self._notes.path = path
        return self

    def point(self, *args: Any, **kwargs: Any) -> None:
        """The worker's fault points: nothing fires here."""

    def heartbeat(self, lease_s: float | None = None) -> None:
        """The worker's lease renewal: nothing to renew here."""

    @property
    def clock(self) -> FakeClock:
        """The worker's clock, as a ``FakeClock`` made on first use (left out of a pickle:
        the fresh process makes its own)."""
        if "_clock" not in self.__dict__:
            self.__dict__["_clock"] = FakeClock(LAB_EPOCH)
        clock: FakeClock = self.__dict__["_clock"]
        return clock

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_clock"}


class SceneCtx:
    """What the worker's ``Context`` (``labkit.worker``) offers a handler, for a call a
    scene makes itself: ``world``, ``clock`` (a ``FakeClock`` unless given), ``job``, and
    ``point`` and ``heartbeat``, which do nothing. A right handler that reads the clock or
    renews its lease on its way finds them, as under a worker."""

    def __init__(self, world: Any, job: Any = None, clock: Any = None) -> None:
        self.world, self.job = world, job
        self.clock = FakeClock(LAB_EPOCH) if clock is None else clock

    def point(self, *args: Any, **kwargs: Any) -> None:
        """The worker's fault points: nothing fires here."""

    def heartbeat(self, lease_s: float | None = None) -> Any:
        """The worker's lease renewal: nothing to renew; the job, as the worker's does."""
        return self.job


def calls_in(path: str | Path) -> list[dict[str, Any]]:
    """What a recorded handler sent, in order (none when it sent nothing)."""
    file = Path(path)
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
