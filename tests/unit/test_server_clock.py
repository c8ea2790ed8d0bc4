"""ServerClock: the server's time, read seldom and carried forward by the monotonic clock."""

from __future__ import annotations

import time

import pytest

from labkit.clock import FakeClock, ServerClock, SystemClock, is_simulated


def test_server_clock_reads_the_server_once_per_interval_and_follows_its_time() -> None:
    reads: list[float] = []

    def read() -> float:
        reads.append(time.monotonic())
        return 5_000.0  # the server's clock, far from this machine's

    clock = ServerClock(read, every_s=60.0)
    first = clock.now()
    second = clock.now()
    assert len(reads) == 1, "a second call within every_s must not ask the server again"
    assert first == pytest.approx(5_000.0, abs=0.5)
    assert first <= second < first + 0.5  # carried forward, never backwards


def test_server_clock_reads_again_after_the_interval_and_after_forget() -> None:
    values = iter([100.0, 200.0, 300.0])
    clock = ServerClock(lambda: next(values), every_s=0.0)
    assert clock.now() == pytest.approx(100.0, abs=0.5)
    assert clock.now() == pytest.approx(200.0, abs=0.5)
    clock.every_s = 3600.0
    clock.forget()
    assert clock.now() == pytest.approx(300.0, abs=0.5)


def test_a_skewed_system_clock_is_off_by_its_skew() -> None:
    ahead = SystemClock(skew_s=30.0)
    assert ahead.now() - time.time() == pytest.approx(30.0, abs=1.0)
    assert repr(ahead) == "SystemClock(skew_s=30)"


def test_only_a_fake_clock_is_simulated() -> None:
    assert is_simulated(FakeClock())
    assert not is_simulated(SystemClock())
    assert not is_simulated(SystemClock(skew_s=-30))
    assert not is_simulated(ServerClock(time.time))
