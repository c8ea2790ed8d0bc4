"""Run a script whose clock runs fast while it sleeps: ``python -m
labkit.grading.exercises.ex09.fastclock SCRIPT [ARGS...]``.

Each ``time.sleep(s)`` sleeps ``s`` seconds and moves ``time.time``, ``time.monotonic``
and ``time.perf_counter`` (and their ``_ns`` forms) ``FAST - 1`` times ``s`` further on:
a consumer that waits about 50 ms between looks lives a minute of its own clock in a
few seconds. A consumer that gives up after a time of its own while another consumer
still holds an entry then gives up within the scene, which lasts seconds; one that
waits as the exercise says (about 50 ms, look again, until XPENDING is empty) does the
same whatever its clock says. Redis's own clock (idle times) is not touched.
"""

from __future__ import annotations

import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import SupportsIndex

#: How much faster the script's clock runs while it sleeps.
FAST = 100_000


def _install(fast: int) -> None:
    ahead = [0.0]
    real_sleep = time.sleep

    def sleep(seconds: float | SupportsIndex) -> None:
        real_sleep(seconds)
        ahead[0] += max(0.0, float(seconds)) * (fast - 1)

    def shifted(real: Callable[[], float]) -> Callable[[], float]:
        return lambda: real() + ahead[0]

    def shifted_ns(real: Callable[[], int]) -> Callable[[], int]:
        return lambda: real() + int(ahead[0] * 1e9)

    time.sleep = sleep
    time.time = shifted(time.time)
    time.monotonic = shifted(time.monotonic)
    time.perf_counter = shifted(time.perf_counter)
    time.time_ns = shifted_ns(time.time_ns)
    time.monotonic_ns = shifted_ns(time.monotonic_ns)
    time.perf_counter_ns = shifted_ns(time.perf_counter_ns)


def main(argv: list[str]) -> None:
    script, *args = argv
    _install(FAST)
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
