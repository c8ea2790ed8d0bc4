"""Run a script whose clock runs fast while it waits: ``python -m
labkit.grading.exercises.ex09.fastclock SCRIPT [ARGS...]``.

Each ``time.sleep(s)`` moves ``time.time``, ``time.monotonic`` and ``time.perf_counter``
(and their ``_ns`` forms, and ``datetime.datetime.now``, ``utcnow`` and ``today``) ``FAST``
times ``s`` on, all told, and a pause between looks (up
to ``PAUSE_S``) really takes ``s / SHRINK`` seconds (a job's work, longer, its full time:
a check sees who holds the entry meanwhile); so does each ``XREAD``/``XREADGROUP ...
BLOCK n`` (n > 0), sent without its BLOCK after such a pause of ``n`` ms: a consumer that
waits about 50 ms between looks lives a minute of its own clock in a few seconds, and
looks again hundreds of times a second. A consumer that gives up after a time of its own,
or after a count of empty rounds, while another consumer still holds an entry then gives
up within the scene, which lasts seconds; one that waits as the exercise says (about 50
ms, look again, until XPENDING is empty) does the same whatever its clock says and
however often it looks. Redis's own clock (idle times) is not touched, nor is
``BLOCK 0`` (for ever).
"""

from __future__ import annotations

import datetime
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, SupportsIndex

#: How much faster the script's clock runs while it waits.
FAST = 100_000
#: How much shorter a pause of the script's (a sleep, a BLOCK) really is: 50 ms take 50 µs.
SHRINK = 1000
#: The longest sleep taken as a pause between looks: the checks' jobs work longer.
PAUSE_S = 0.25


def _install(fast: int) -> Callable[[float], None]:
    """Patch the clock; the function that waits ``seconds`` of the script's clock."""
    ahead = [0.0]
    real_sleep = time.sleep

    def sleep(seconds: float | SupportsIndex) -> None:
        wait = max(0.0, float(seconds))
        real = wait / SHRINK if wait <= PAUSE_S else wait
        real_sleep(real)
        ahead[0] += wait * fast - real

    def shifted(real: Callable[[], float]) -> Callable[[], float]:
        return lambda: real() + ahead[0]

    def shifted_ns(real: Callable[[], int]) -> Callable[[], int]:
        return lambda: real() + int(ahead[0] * 1e9)

    class FastDatetime(datetime.datetime):
        """``datetime.datetime`` whose ``now``, ``utcnow`` and ``today`` run ahead too."""

        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> FastDatetime:
            return super().now(tz) + datetime.timedelta(seconds=ahead[0])

        @classmethod
        def utcnow(cls) -> FastDatetime:
            return super().utcnow() + datetime.timedelta(seconds=ahead[0])

        @classmethod
        def today(cls) -> FastDatetime:
            return cls.now()

    datetime.datetime = FastDatetime  # type: ignore[misc]
    time.sleep = sleep
    time.time = shifted(time.time)
    time.monotonic = shifted(time.monotonic)
    time.perf_counter = shifted(time.perf_counter)
    time.time_ns = shifted_ns(time.time_ns)
    time.monotonic_ns = shifted_ns(time.monotonic_ns)
    time.perf_counter_ns = shifted_ns(time.perf_counter_ns)
    return sleep


def _unblocked(args: tuple[Any, ...], sleep: Callable[[float], None]) -> tuple[Any, ...]:
    """An XREAD/XREADGROUP's arguments without ``BLOCK n`` (n > 0), once the script's
    clock has waited ``n`` ms (Redis answers a BLOCK in no less than its own tick, 100 ms:
    the read is sent without it). Any other command's, as they are."""
    words = [str(a.decode() if isinstance(a, bytes) else a).upper() for a in args]
    # The options: after the command (and GROUP <group> <consumer>), before STREAMS.
    first = {"XREAD": 1, "XREADGROUP": 4}.get(words[0] if words else "")
    if first is None or "STREAMS" not in words:
        return args
    options = words[first : words.index("STREAMS")]
    if "BLOCK" not in options[:-1]:
        return args
    at = first + options.index("BLOCK")
    try:
        block_ms = int(words[at + 1])
    except ValueError:
        return args
    if block_ms <= 0:
        return args
    sleep(block_ms / 1000)
    return args[:at] + args[at + 2 :]


def _install_redis(sleep: Callable[[float], None]) -> None:
    """Send each blocking stream read of the script's without its BLOCK (``_unblocked``)."""
    try:
        from redis.connection import AbstractConnection
    except ImportError:  # no redis-py: nothing of the script's blocks in it
        return
    send: Callable[..., None] = AbstractConnection.send_command

    def send_command(self: Any, *args: Any, **kwargs: Any) -> None:
        send(self, *_unblocked(args, sleep), **kwargs)

    AbstractConnection.send_command = send_command  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    script, *args = argv
    _install_redis(_install(FAST))
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
