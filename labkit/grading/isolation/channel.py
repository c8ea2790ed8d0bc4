"""The narrow channel between the trusted grader and a student's process: JSON lines.

Under ``labkit grade`` a check never touches a student's object: it sends a request
(call ``NAME(*args)``, run a harness function, read a value) and gets plain data back.
Data is JSON with a few tags for what JSON lacks, so nothing from the untrusted side is
ever unpickled or evaluated:

- ``{"$tuple": [...]}`` a tuple, ``{"$bytes": "<base64>"}`` bytes,
  ``{"$float": "nan" | "inf" | "-inf"}`` a non-finite float,
  ``{"$dict": [[key, value], ...]}`` a dict whose keys are not all plain strings.

Anything else (a live object, a class, a set) is refused with ``NotData`` naming its
type. One message is one line; a line longer than the reader's cap is refused, so a
student's process cannot make the grader hold gigabytes.

The same job in production is done by JSON-RPC or gRPC between processes; the point
here is the one-way trust, not the wire format.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import select
from enum import StrEnum
from typing import Any

from labkit.clock import SystemClock

_CLOCK = SystemClock()

#: Largest message the grader accepts from a student's process.
MAX_MESSAGE = 8 * 1024 * 1024
_TAGS = ("$tuple", "$bytes", "$float", "$dict")
_PLAIN = "None, bool, int, float, str, bytes, list, tuple or dict"


class Op(StrEnum):
    """What the grader asks of the student's process: a request's ``op``."""

    #: Fork a child from the state the cells left; the check's requests go to it.
    CHECK = "check"
    #: End the check's child; the parent answers ``ended`` with its exit code.
    END = "end"
    #: Read ``name`` (``value``, or ``callable`` for a function).
    GET = "get"
    #: Call ``name(*args, **kwargs)``.
    CALL = "call"
    #: Run the harness function ``name`` beside the student's definitions.
    HARNESS = "harness"


class Reply(StrEnum):
    """What happened, as the one key a reply carries (with its data as the value)."""

    READY = "ready"
    ENDED = "ended"
    VALUE = "value"
    CALLABLE = "callable"
    MISSING = "missing"
    RAISED = "raised"
    #: A harness's own verdict: ``{"expected", "got", "hint"}``.
    FAILED = "failed"
    NOT_DATA = "not_data"
    REFUSED = "refused"


def request(op: Op, name: str = "", args: Any = None, kwargs: Any = None) -> dict[str, Any]:
    """A request message; ``args`` and ``kwargs`` must already be encoded."""
    message: dict[str, Any] = {"op": op, "name": name}
    if args is not None:
        message["args"] = args
    if kwargs is not None:
        message["kwargs"] = kwargs
    return message


def reply(kind: Reply, data: Any = True, **extra: Any) -> dict[str, Any]:
    """A reply message: ``{kind: data}`` and any extra fields (``name``, ``notes``...)."""
    return {kind: data, **extra}


#: The only modules a harness request may name: labkit's own harness, one per exercise.
HARNESS_MODULE = re.compile(r"labkit\.grading\.exercises\.ex\d\d\.harness")


def harness_target(target: str) -> tuple[str, str]:
    """``(module, function)`` of a harness target ``"labkit.grading.exercises.exNN.harness:FN"``.

    Anything else (another module, no function, a private name) is a ValueError: a
    harness request never makes the student's process import a module it names.
    """
    module_name, _, func_name = target.partition(":")
    if not HARNESS_MODULE.fullmatch(module_name) or not func_name.isidentifier():
        raise ValueError(
            f"{target!r} is not a harness function: name one as "
            "'labkit.grading.exercises.exNN.harness:FUNCTION'"
        )
    if func_name.startswith("_"):
        raise ValueError(f"{target!r} names a private function; harness functions are public")
    return module_name, func_name


class NotData(TypeError):
    """A value that cannot cross the channel: only plain data can."""


class ChannelClosed(EOFError):
    """The other side of the channel went away (its process ended or was killed)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-ready data, tagged where JSON has no form for it."""
    if depth > 64:
        raise NotData("data nested more than 64 levels deep")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v, depth + 1) for k, v in value.items()}
        return {"$dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise NotData(f"a {type(value).__name__} object is not plain data ({_PLAIN})")


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        raise NotData("a list cannot be a dict key")
    return value


def decode(value: Any) -> Any:
    """The inverse of ``encode``; raises ``NotData`` for a malformed tag."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((tag, body),) = value.items()
        if tag == "$tuple" and isinstance(body, list):
            return tuple(decode(v) for v in body)
        if tag == "$bytes" and isinstance(body, str):
            return base64.b64decode(body, validate=True)
        if tag == "$float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "$dict" and isinstance(body, list):
            pairs = [p for p in body if isinstance(p, list) and len(p) == 2]
            if len(pairs) != len(body):
                raise NotData("a $dict tag holds [key, value] pairs")
            return {_hashable(decode(k)): decode(v) for k, v in pairs}
    if any(k in _TAGS for k in value):
        raise NotData(f"malformed tagged value with keys {sorted(value)[:4]}")
    return {k: decode(v) for k, v in value.items()}


def dumps(message: dict[str, Any]) -> bytes:
    """One message as one line of bytes (values must already be encoded)."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def write(fd: int, message: dict[str, Any]) -> None:
    """Write one message to ``fd`` (blocking until all of it is written)."""
    data = memoryview(dumps(message))
    while data:
        data = data[os.write(fd, data) :]


class LineReader:
    """Reads one message at a time from ``fd``, with a deadline and a size cap."""

    def __init__(self, fd: int, cap: int = MAX_MESSAGE) -> None:
        self.fd = fd
        self.cap = cap
        self._buffer = b""

    def discard(self) -> None:
        """Forget anything buffered (it was handed to a forked child)."""
        self._buffer = b""

    def read(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message; ``ChannelTimeout``, ``ChannelClosed`` or ``ValueError`` if none.

        The wait is cut into short slices, so a thread stopped from outside (a check's
        timeout) notices within a fraction of a second.
        """
        deadline = None if timeout is None else _CLOCK.now() + timeout
        while b"\n" not in self._buffer:
            if len(self._buffer) > self.cap:
                raise ValueError(f"a message longer than {self.cap} bytes")
            left = 0.1 if deadline is None else min(0.1, deadline - _CLOCK.now())
            if left <= 0:
                raise ChannelTimeout("no answer in time")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise ChannelClosed("the other side closed the channel")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        if len(line) > self.cap:
            raise ValueError(f"a message longer than {self.cap} bytes")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError("a message is a JSON object")
        return message
