"""What exercise 10's app installs in itself so the checks can test it from outside.

``install(app)`` is called at the top of the student's ``ex10_app.py`` (outside the
solution regions, so the stub has it too). It adds two things to the app:

- a handler that turns the stub's ``NotImplementedError("Exercise 10")`` into a ``501``
  whose body says so, so the checks report "not started" instead of a failure;
- the test point ``EX10_CRASH_AT_202=1``: the process SIGKILLs itself the moment the
  app starts a ``202`` answer, before any byte of it is sent. Background tasks run only
  after the answer is sent, so a job enqueued there does not exist at this point: the
  check reads the database after the kill to see whether the job was durable first.
  The line ``FAULT fired kill at 202`` goes to stderr first, as proof.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from labkit.grading.stub import is_stub

CRASH_ENV = "EX10_CRASH_AT_202"
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
    return app


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
