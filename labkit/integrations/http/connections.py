"""What one HTTP connection may cost the server: deadlines for its request, a cap on them all.

A server that waits for a client as long as the client likes can be held by anyone:
open a connection and send nothing, or a header a byte a second (slowloris), or a body
a byte a second, and each connection keeps a file descriptor and a slot for as long as
the client wants. ``ConnectionLimits`` bounds it, and ``uvicorn_settings()`` turns it
into the keyword arguments of ``uvicorn.Config``:

- ``head_s``: the request head (request line and headers) must arrive whole within this
  many seconds of the connection's start, or of the answer before it on a keep-alive
  connection. Otherwise the connection is closed, with a ``408 Request Timeout`` if part
  of a head had come.
- ``body_s``: the body must arrive whole within this many seconds of the end of its
  head. Otherwise ``408`` (unless the app has answered already, as it does with a ``401``
  before reading any body) and the connection is closed.
- ``keep_alive_s`` (uvicorn's ``timeout_keep_alive``): an idle keep-alive connection is
  closed after this long.
- ``max_connections`` (uvicorn's ``limit_concurrency``): a request that arrives while
  this many connections are open, or this many requests are in flight, is answered
  ``503`` and its connection closed. A connection that never sends a head is closed at
  ``head_s``, so idle ones cannot hold the server at the limit for long.
- ``max_head_bytes`` (uvicorn's ``h11_max_incomplete_event_size``): a longer head is a
  ``400``.
- ``shutdown_s`` (uvicorn's ``timeout_graceful_shutdown``): how long a SIGTERM waits for
  the requests in flight.

uvicorn documents the last four (its "Settings" page, sections Resource Limits and
Timeouts; its "Server Behavior" page names keep-alive as its only timeout). It has no
deadline for a head or a body, so ``DeadlineProtocol`` adds them: uvicorn's h11 protocol
with one timer for whatever the connection waits for now, read from h11's state of the
client (``IDLE``: a head; ``SEND_BODY``: a body). Its keep-alive timer alone would not
do: uvicorn arms it only after an answer, and any byte that arrives disarms it.

In production a proxy in front does this (nginx's ``client_header_timeout`` and
``client_body_timeout``, Apache's ``mod_reqtimeout``) and the server behind keeps its
own limits as the second line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

Phase = Literal["head", "body"]


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a request may take to arrive, and how many connections are served at once."""

    head_s: float = 10.0
    body_s: float = 30.0
    keep_alive_s: int = 5
    max_connections: int = 200
    max_head_bytes: int = 16 * 1024
    shutdown_s: int = 3

    def __post_init__(self) -> None:
        for name, value in dataclasses.asdict(self).items():
            if not value > 0:
                raise ValueError(f"ConnectionLimits.{name} must be positive, not {value!r}")

    def argv(self) -> list[str]:
        """The command-line form ``add_arguments`` reads back (``--head-s 10.0`` ...)."""
        argv: list[str] = []
        for name, value in dataclasses.asdict(self).items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        return argv

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        for f in dataclasses.fields(cls):
            kind = float if f.type in (float, "float") else int
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ConnectionLimits:
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})

    def uvicorn_settings(self) -> dict[str, Any]:
        """The keyword arguments of ``uvicorn.Config`` that enforce these limits."""
        return {
            "http": DeadlineProtocol.bound(self),
            "timeout_keep_alive": self.keep_alive_s,
            "limit_concurrency": self.max_connections,
            "h11_max_incomplete_event_size": self.max_head_bytes,
            "timeout_graceful_shutdown": self.shutdown_s,
        }


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's head and body."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()

    @classmethod
    def bound(cls, limits: ConnectionLimits) -> type[DeadlineProtocol]:
        """This protocol with ``limits`` (uvicorn builds a protocol from a class alone)."""
        return cast(type[DeadlineProtocol], type(cls.__name__, (cls,), {"limits": limits}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: Phase | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Time whatever the connection waits for now: a head, a body, or nothing."""
        if self.transport.is_closing():
            self._disarm()
            return
        state = self.conn.their_state
        phase: Phase | None = (
            "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        )
        if phase == self._phase:
            return
        self._disarm()
        self._phase = phase
        if phase is not None:
            seconds = self.limits.head_s if phase == "head" else self.limits.body_s
            self._deadline = self.loop.call_later(seconds, self._late, phase)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._phase = None, None

    def _late(self, phase: Phase) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if phase == "head" and self.conn.trailing_data[0]:
            self._write_408(
                f"the request head did not arrive whole within {self.limits.head_s:g} s; "
                "send the request line and all headers at once"
            )
        elif phase == "body" and self.cycle is not None and not self.cycle.response_started:
            self._write_408(
                f"the request body did not arrive whole within {self.limits.body_s:g} s "
                "of its head; send the whole body at once, and nothing was done with it"
            )
        if self.cycle is not None and not self.cycle.response_complete:
            # The app stops waiting for the body: its next receive() is a disconnect,
            # and whatever it answers now is dropped (the 408 is the answer).
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()

    def _write_408(self, message: str) -> None:
        # Written raw, not through h11: before a whole head h11 cannot send an answer.
        body = json.dumps({"detail": message}).encode()
        head = (
            "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
