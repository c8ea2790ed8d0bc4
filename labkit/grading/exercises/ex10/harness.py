"""What exercise 10's app installs in itself so the checks can test it from outside.

``install(app)`` is called at the top of the student's ``ex10_app.py`` (outside the
solution regions, so the stub has it too). It adds these to the app:

- a handler that turns the stub's ``NotImplementedError("Exercise 10")`` into a ``501``
  whose body says so, so the checks report "not started" instead of a failure;
- the test point ``EX10_CRASH_AT_202=1``: the process SIGKILLs itself the moment the
  app starts a ``202`` answer, before any byte of it is sent. Background tasks run only
  after the answer is sent, so a job enqueued there does not exist at this point: the
  check reads the database after the kill to see whether the job was durable first.
  The line ``FAULT fired kill at 202`` goes to stderr first, as proof.
- the test point ``EX10_CRASH_AFTER_ENQUEUE=1``: the process SIGKILLs itself as the first
  ``store.enqueue`` that created a job returns, before the handler does anything else
  (``FAULT fired kill after enqueue``): whatever the app records after the job (a side
  table of keys) is missing then, as it is after a crash there.
- ``EX10_SLOW_ENQUEUE=<seconds>``: every ``store.enqueue`` waits that long before it
  writes, so requests sent together are all inside their handlers at once, whatever a
  handler reads before it enqueues.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from labkit.grading.stub import is_stub

CRASH_ENV = "EX10_CRASH_AT_202"
CRASH_AFTER_ENQUEUE_ENV = "EX10_CRASH_AFTER_ENQUEUE"
SLOW_ENQUEUE_ENV = "EX10_SLOW_ENQUEUE"
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
    slow_s = float(os.environ.get(SLOW_ENQUEUE_ENV) or 0)
    if slow_s > 0 or os.environ.get(CRASH_AFTER_ENQUEUE_ENV) == "1":
        _watch_enqueue(slow_s, os.environ.get(CRASH_AFTER_ENQUEUE_ENV) == "1")
    return app


def _watch_enqueue(slow_s: float, crash: bool) -> None:
    """Wrap every store's ``enqueue`` in this process: wait first, die after it created a job."""
    from labkit.store.base import StoreBase

    original = StoreBase.enqueue
    if getattr(original, "ex10_watched", False):
        return

    @functools.wraps(original)
    def enqueue(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(slow_s)
        job, created = original(self, *args, **kwargs)
        if crash and created:
            sys.stderr.write("FAULT fired kill after enqueue\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return job, created

    enqueue.ex10_watched = True  # type: ignore[attr-defined]
    StoreBase.enqueue = enqueue  # type: ignore[method-assign]


class _CrashAt202:
    """ASGI middleware: SIGKILL this process when a 202 answer starts."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def watch(message: Any) -> None:
            if message.get("type") == "http.response.start" and message.get("status") == 202:
                sys.stderr.write("FAULT fired kill at 202\n")
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            await send(message)

        await self.app(scope, receive, watch)
