"""What exercise 10's app installs in itself so the checks can test it from outside.

``install(app)`` is called at the top of the student's ``ex10_app.py`` (outside the
solution regions, so the stub has it too). It adds these to the app:

- a handler that turns the stub's ``NotImplementedError("Exercise 10")`` into a ``501``
  whose body says so, so the checks report "not started" instead of a failure;
- the test point ``EX10_CRASH_AT_202=1``: the process SIGKILLs itself the moment the
  app starts a ``202`` answer (or any success answer to a POST), before any byte of it
  is sent. Background tasks run only after the answer is sent, so a job enqueued there
  does not exist at this point: the check reads the database after the kill to see
  whether the job was durable first.
  The line ``FAULT fired kill at 202`` goes to stderr first, as proof.
- the test point ``EX10_CRASH_AFTER_ENQUEUE=1``: the process SIGKILLs itself as the first
  ``store.enqueue`` that created a job returns, before the handler does anything else
  (``FAULT fired kill after enqueue``): whatever the app records after the job (a side
  table of keys) is missing then, as it is after a crash there.
- ``EX10_RENEWED_TOKENS=<token>=<owner>,...``: more bearer tokens ``caller_of`` knows, as
  a caller gets a new token when the old one expires: the same owner, another token.
- ``EX10_CLOCK_SHIFT_S=<seconds>``: every wall clock of the process reads that much later
  (``time.time``, ``datetime``'s ``now``, ``utcnow`` and ``today``, ``date.today``, also as
  names the app imported before calling ``install``), as on a server whose clock is
  then: a check can put a crash just before midnight and the restart just after. The
  monotonic clocks are left alone.
- ``EX10_CLOCK_STOPPED=1``: every wall clock of the process (and the monotonic ones with
  them) reads its first reading at every call, as a coarse clock does for requests that
  follow each other fast (15 ms on some hosts; or one NTP stepped back): a value made
  of the time repeats, one drawn from randomness (``uuid4``) does not.
- ``EX10_CLOCK_JUMP_S=<seconds>``: the wall clocks jump that much later (as
  ``EX10_CLOCK_SHIFT_S`` moves them) once the first POST has been answered, as the next
  request comes long after: a time read once, at import or at the first request (a
  module constant, a default argument), is that much older than the clock then.
- ``EX10_SLOW_ENQUEUE=<seconds>``: every ``store.enqueue`` waits that long before it
  writes, so requests sent together are all inside their handlers at once, whatever a
  handler reads before it enqueues.
- ``EX10_HOLD_AFTER_ENQUEUE=<seconds>:<mark>``: a ``store.enqueue`` that created a job whose
  payload holds the text ``<mark>`` waits that long before it returns (``FAULT fired hold
  after enqueue`` on stderr first), its job written (and, on the app's own connection,
  ``conn=``, not yet committed by the app): a request handled meanwhile must leave that
  job alone.
- ``EX10_STORE_DOWN=<file>``: while that file exists, every ``store.enqueue`` raises,
  writing nothing, the ``StoreBusy`` the store raises for a database another connection
  keeps locked (``FAULT fired store down at enqueue`` on stderr first), and so does every
  ``store.get`` (``FAULT fired store down at get``). A check turns it on and off while its
  server runs: an app must not answer a request it could not store with a success, nor
  a poll it could not read with a 404 (the job is there).
- ``EX10_LOG_RECORDS=<file>``: the process logs as a server configured to log everything
  does: every logger from ``DEBUG`` up (Python's last-resort handler too, which writes
  what an app without a logging setup logs), and a ``print`` reaches its output at the
  end of its line, not when a buffer fills (a server killed afterwards loses no line).
  What every logging handler writes, formatted by its formatter after its filters, is
  appended to that file as well, so a handler that writes to a file of its own is read
  too: a check looks there, and in the server's stdout and stderr, for the secrets it
  sent.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from labkit.grading.exercises.wallclock import clock_moved
from labkit.grading.stub import is_stub

CRASH_ENV = "EX10_CRASH_AT_202"
CRASH_AFTER_ENQUEUE_ENV = "EX10_CRASH_AFTER_ENQUEUE"
SLOW_ENQUEUE_ENV = "EX10_SLOW_ENQUEUE"
HOLD_ENV = "EX10_HOLD_AFTER_ENQUEUE"
STORE_DOWN_ENV = "EX10_STORE_DOWN"
RENEWED_TOKENS_ENV = "EX10_RENEWED_TOKENS"
CLOCK_SHIFT_ENV = "EX10_CLOCK_SHIFT_S"
CLOCK_JUMP_ENV = "EX10_CLOCK_JUMP_S"
CLOCK_STOPPED_ENV = "EX10_CLOCK_STOPPED"
LOG_RECORDS_ENV = "EX10_LOG_RECORDS"
NOT_STARTED_STATUS = 501


def install(app: FastAPI) -> FastAPI:
    """Add the not-started handler and the crash-at-202 point to ``app``; return it."""

    async def not_started(request: Request, exc: Exception) -> JSONResponse:
        text = str(exc)
        if not is_stub(exc):
            raise exc
        return JSONResponse({"not_started": text}, status_code=NOT_STARTED_STATUS)

    app.add_exception_handler(NotImplementedError, not_started)
    if os.environ.get(CRASH_ENV) == "1":
        app.add_middleware(_CrashAt202)
    shift_s = float(os.environ.get(CLOCK_SHIFT_ENV) or 0)
    stopped = os.environ.get(CLOCK_STOPPED_ENV) == "1"
    if shift_s or stopped:
        # The app's module, half run: the names it bound before this call.
        _shift_clock(shift_s, sys._getframe(1).f_globals, stopped)
    jump_s = float(os.environ.get(CLOCK_JUMP_ENV) or 0)
    if jump_s:
        app.add_middleware(_ClockJump, jump_s=jump_s, names=sys._getframe(1).f_globals)
    renewed = os.environ.get(RENEWED_TOKENS_ENV)
    if renewed:
        _add_tokens(renewed)
    slow_s = float(os.environ.get(SLOW_ENQUEUE_ENV) or 0)
    crash = os.environ.get(CRASH_AFTER_ENQUEUE_ENV) == "1"
    down = os.environ.get(STORE_DOWN_ENV) or None
    hold_s, _, mark = (os.environ.get(HOLD_ENV) or "").partition(":")
    hold = (float(hold_s), mark) if mark else None
    if slow_s > 0 or crash or down or hold:
        _watch_enqueue(slow_s, crash, down, hold)
    records = os.environ.get(LOG_RECORDS_ENV)
    if records:
        _log_everything(records)
    return app


#: The moved clock of ``EX10_CLOCK_SHIFT_S``, entered for the life of the process: kept
#: here, since a context manager collected as garbage would put the clocks back.
_MOVED = contextlib.ExitStack()


def _shift_clock(shift_s: float, names: dict[str, Any], stopped: bool = False) -> None:
    """Make the process's wall clocks read ``shift_s`` seconds later, in the ``time`` and
    ``datetime`` modules and among ``names`` (the app's globals), for good; the monotonic
    clocks, which uvicorn's event loop times itself with, run on, unless ``stopped``: then
    every clock reads its first reading again at every call (the loop's timers never come
    due, which a server answering requests does not need)."""
    _MOVED.enter_context(
        clock_moved(names, shift_s, datetime_module=True, steady=False, stopped=stopped)
    )


def _add_tokens(spec: str) -> None:
    """Teach ``caller_of`` (its default table, the lab's tokens) the ``token=owner`` pairs
    of ``spec``, comma-separated."""
    from labkit.integrations.http.refusals import LAB_TOKENS

    tokens: dict[str, str] = LAB_TOKENS  # type: ignore[assignment]  # a dict underneath
    for pair in spec.split(","):
        token, _, owner = pair.partition("=")
        tokens[token] = owner


def _watch_enqueue(
    slow_s: float,
    crash: bool,
    down: str | None = None,
    hold: tuple[float, str] | None = None,
) -> None:
    """Wrap every store's ``enqueue`` in this process: wait first, fail while the file
    ``down`` exists, die after it created a job, wait ``hold[0]`` seconds after it created
    one whose payload holds the text ``hold[1]``; and its ``get``: fail while ``down``
    exists."""
    import sqlite3

    from labkit.dbfile import explain
    from labkit.store.base import StoreBase

    original = StoreBase.enqueue
    if getattr(original, "ex10_watched", False):
        return

    @functools.wraps(original)
    def enqueue(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(slow_s)
        if down is not None and os.path.exists(down):
            sys.stderr.write("FAULT fired store down at enqueue\n")
            sys.stderr.flush()
            locked = sqlite3.OperationalError("database is locked")
            raise explain(Path(getattr(self, "path", "jobs.db")), locked)
        job, created = original(self, *args, **kwargs)
        if crash and created:
            sys.stderr.write("FAULT fired kill after enqueue\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if hold is not None and created and hold[1] in str(job.payload):
            sys.stderr.write("FAULT fired hold after enqueue\n")
            sys.stderr.flush()
            time.sleep(hold[0])
        return job, created

    enqueue.ex10_watched = True  # type: ignore[attr-defined]
    StoreBase.enqueue = enqueue  # type: ignore[method-assign]
    if down is None:
        return
    read = StoreBase.get

    @functools.wraps(read)
    def get(self: Any, *args: Any, **kwargs: Any) -> Any:
        if os.path.exists(down):
            sys.stderr.write("FAULT fired store down at get\n")
            sys.stderr.flush()
            locked = sqlite3.OperationalError("database is locked")
            raise explain(Path(getattr(self, "path", "jobs.db")), locked)
        return read(self, *args, **kwargs)

    StoreBase.get = get  # type: ignore[method-assign]


def _log_everything(path: str) -> None:
    """Every logger enabled from DEBUG up, stdout flushed at each line, and each record a
    handler writes appended, as that handler formats it, to the file ``path``."""
    import logging

    if getattr(logging.Logger.isEnabledFor, "ex10_watched", False):
        return
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    # Open for the life of the process (the server is killed, never stopped); each line
    # written through at once.
    out = open(path, "a", encoding="utf-8", errors="backslashreplace", buffering=1)  # noqa: SIM115
    writing = threading.Lock()  # sync handlers log from the threadpool's threads

    def is_enabled_for(self: logging.Logger, level: int) -> bool:
        # A logger switched off, or logging.disable(), is the app's own choice; a level
        # is only a setting of this deployment.
        if self.disabled or self.manager.disable >= level:
            return False
        return level >= logging.DEBUG

    def handle(self: logging.Handler, record: logging.LogRecord) -> Any:
        passed = self.filter(record)
        if passed:
            if isinstance(passed, logging.LogRecord):  # Python 3.12: a filter's new record
                record = passed
            with writing, contextlib.suppress(Exception):
                out.write(f"{type(self).__name__}: {self.format(record)}\n")
            self.acquire()
            try:
                self.emit(record)
            finally:
                self.release()
        return passed

    is_enabled_for.ex10_watched = True  # type: ignore[attr-defined]
    logging.Logger.isEnabledFor = is_enabled_for  # type: ignore[method-assign]
    logging.Handler.handle = handle  # type: ignore[method-assign]
    if logging.lastResort is not None:
        logging.lastResort.setLevel(logging.DEBUG)


class _CrashAt202:
    """ASGI middleware: SIGKILL this process when a success answer to a POST starts."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def watch(message: Any) -> None:
            # Any success to a POST, not only the contract's 202: a job answered 200 or 201
            # must be as durable as one answered 202.
            if (
                message.get("type") == "http.response.start"
                and scope.get("method") == "POST"
                and 200 <= message.get("status", 0) < 300
            ):
                sys.stderr.write("FAULT fired kill at 202\n")
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            await send(message)

        await self.app(scope, receive, watch)


class _ClockJump:
    """ASGI middleware: move the wall clocks ``jump_s`` later as the answer to the first
    POST starts (before any byte of it is sent: the next request comes after the jump)."""

    def __init__(self, app: Any, jump_s: float, names: dict[str, Any]) -> None:
        self.app, self.jump_s, self.names = app, jump_s, names

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def watch(message: Any) -> None:
            if self.jump_s and message.get("type") == "http.response.start":
                # The module has run to its end by now: every name it bound is moved too.
                jump_s, self.jump_s = self.jump_s, 0.0
                _shift_clock(jump_s, self.names)
            await send(message)

        posted = scope.get("type") == "http" and scope.get("method") == "POST"
        await self.app(scope, receive, watch if posted else send)
