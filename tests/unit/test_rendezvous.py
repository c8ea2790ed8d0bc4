"""The meeting point: processes wait there for each other, and never forever."""

from __future__ import annotations

import os
import time
from pathlib import Path

from labkit.clock import FakeClock
from labkit.explore.rendezvous import Rendezvous, arrived


def test_two_processes_leave_only_once_both_have_arrived(tmp_path: Path) -> None:
    meet, stamps = tmp_path / "meet", tmp_path / "stamps"
    stamps.mkdir()
    pid = os.fork()
    if pid == 0:  # the late party: arrives a moment after the first
        code = 1
        try:
            time.sleep(0.3)
            arrival = time.monotonic()
            Rendezvous(meet, 2, timeout=10).arrive()
            (stamps / "late").write_text(str(arrival))
            code = 0
        finally:
            os._exit(code)
    here = Rendezvous(meet, 2, timeout=10).arrive()
    left = time.monotonic()
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert here == 2 and arrived(meet) == 2
    # The first party left after the late one arrived: it waited for it.
    assert left >= float((stamps / "late").read_text())


def test_two_parties_with_one_pid_each_in_its_own_sandbox_still_meet(
    tmp_path: Path, monkeypatch
) -> None:
    # Two bubblewrap sandboxes have a pid namespace each: both consumers may be pid 2.
    monkeypatch.setattr(os, "getpid", lambda: 2)
    clock = FakeClock()
    first = Rendezvous(tmp_path / "meet", 2, timeout=5, clock=clock)
    (tmp_path / "meet").mkdir()
    assert arrived(tmp_path / "meet") == 0
    second = Rendezvous(tmp_path / "meet", 2, timeout=5, clock=clock)
    assert second.arrive() == 1  # alone: waited its timeout
    start = clock.now()
    assert first.arrive() == 2 and clock.now() == start  # the other was there: no wait
    assert arrived(tmp_path / "meet") == 2


def test_a_party_that_never_comes_costs_the_timeout_not_a_hang(tmp_path: Path) -> None:
    clock = FakeClock()
    start = clock.now()
    here = Rendezvous(tmp_path / "meet", 2, timeout=5, clock=clock).arrive()
    assert here == 1 and clock.now() - start >= 5


def test_each_process_meets_once(tmp_path: Path) -> None:
    clock = FakeClock()
    meeting = Rendezvous(tmp_path / "meet", 2, timeout=5, clock=clock)
    meeting.arrive()
    waited = clock.now()
    assert meeting.arrive() == 2 and clock.now() == waited  # straight through
