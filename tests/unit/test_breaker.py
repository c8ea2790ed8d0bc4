"""CircuitBreaker: transitions, the half-open trial limit, listeners, state shared by processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from labkit.clock import FakeClock
from labkit.errors import CircuitOpen, PermanentError, TransientError
from labkit.patterns.breaker import CircuitBreaker, Transition

START = 1_767_225_600.0


def make(tmp_path, clock, **kw):
    opts = {"threshold": 3, "cooldown": 30, "half_open_max": 1, **kw}
    return CircuitBreaker("erp", clock=clock, store_path=tmp_path / "breakers.db", **opts)


def boom():
    raise TransientError("ERP answered 503", status=503)


def test_threshold_consecutive_failures_open_it(tmp_path):
    clock = FakeClock(START)
    breaker = make(tmp_path, clock)
    for _ in range(2):
        breaker.record_failure()
    breaker.record_success()  # a success resets the count: failures must be consecutive
    for _ in range(2):
        breaker.record_failure()
    assert breaker.state == "closed" and breaker.allow()
    breaker.record_failure()
    assert breaker.state == "open"
    assert not breaker.allow()
    assert breaker.retry_at == START + 30


def test_call_raises_circuit_open_with_retry_at_and_does_not_call(tmp_path):
    clock = FakeClock(START)
    breaker = make(tmp_path, clock, threshold=2)
    for _ in range(2):
        with pytest.raises(TransientError):
            breaker.call(boom)
    called = []
    with pytest.raises(CircuitOpen) as info:
        breaker.call(lambda: called.append(1))
    assert called == []
    assert info.value.retry_at == START + 30
    assert "'erp'" in str(info.value)


def test_permanent_errors_do_not_trip_it(tmp_path):
    breaker = make(tmp_path, FakeClock(START), threshold=1)

    def not_found():
        raise PermanentError("invoice 9 not found", status=404)

    with pytest.raises(PermanentError):
        breaker.call(not_found)
    assert breaker.state == "closed"


def test_half_open_admits_at_most_half_open_max_trials_then_closes_on_success(tmp_path):
    clock = FakeClock(START)
    breaker = make(tmp_path, clock, threshold=1, half_open_max=2)
    breaker.record_failure()
    clock.advance(29.9)
    assert not breaker.allow()
    clock.advance(0.1)
    assert [breaker.allow() for _ in range(3)] == [True, True, False]
    assert breaker.state == "half_open"
    breaker.record_success()
    assert breaker.state == "closed" and breaker.allow()


def test_a_failed_trial_opens_it_for_another_cooldown(tmp_path):
    clock = FakeClock(START)
    breaker = make(tmp_path, clock, threshold=1)
    breaker.record_failure()
    clock.advance(30)
    with pytest.raises(TransientError):
        breaker.call(boom)
    assert breaker.state == "open"
    assert breaker.retry_at == START + 60


def test_a_trial_whose_caller_died_is_forgotten_after_a_cooldown(tmp_path):
    clock = FakeClock(START)
    breaker = make(tmp_path, clock, threshold=1)
    breaker.record_failure()
    clock.advance(30)
    assert breaker.allow()  # the trial's caller never reports back
    assert not breaker.allow()
    clock.advance(30)
    assert breaker.allow()


def test_listeners_see_each_transition(tmp_path):
    clock = FakeClock(START)
    breaker = make(tmp_path, clock, threshold=1)
    seen: list[Transition] = []
    breaker.on_transition(seen.append)
    breaker.record_failure()
    clock.advance(30)
    breaker.allow()
    breaker.record_success()
    assert [(t.from_state, t.to_state) for t in seen] == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]
    assert seen[0].at == START and seen[1].at == START + 30
    assert breaker.history() == seen


def test_two_connections_share_one_breaker(tmp_path):
    clock = FakeClock(START)
    a = make(tmp_path, clock, threshold=2)
    b = make(tmp_path, clock, threshold=2)
    a.record_failure()
    b.record_failure()  # consecutive across connections: together they reach the threshold
    assert a.state == "open" and not b.allow()
    clock.advance(30)
    assert b.allow()  # b takes the only trial slot...
    assert not a.allow()  # ...so a is refused while the trial runs
    b.record_success()
    assert a.state == "closed"


# A separate Python process opens the same breaker file with its own FakeClock, does one
# action and prints what it sees.
CHILD = textwrap.dedent(
    """
    import sys
    from labkit.patterns.breaker import CircuitBreaker
    from labkit.clock import FakeClock
    path, now, action = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    b = CircuitBreaker("erp", threshold=3, cooldown=30, clock=FakeClock(now), store_path=path)
    if action == "fail3":
        for _ in range(3):
            b.record_failure()
    elif action == "allow":
        print("allowed" if b.allow() else "refused")
    print(b.state.value)
    """
)


def in_child(path, now, action):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), repr(now), action],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.split()


def test_transitions_are_visible_across_processes(tmp_path):
    path = tmp_path / "breakers.db"
    clock = FakeClock(START)
    here = CircuitBreaker("erp", threshold=3, cooldown=30, clock=clock, store_path=path)
    assert here.state == "closed"
    assert in_child(path, START, "fail3") == ["open"]  # the child opens it...
    assert here.state == "open" and not here.allow()  # ...and this process sees it
    clock.advance(30)
    assert here.allow() and here.state == "half_open"  # this process takes the trial
    assert in_child(path, START + 31, "allow") == ["refused", "half_open"]
    here.record_success()
    assert in_child(path, START + 32, "allow") == ["allowed", "closed"]
    assert [(t.from_state, t.to_state) for t in here.history()] == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]


def test_bad_settings_are_refused_with_a_reason(tmp_path):
    with pytest.raises(ValueError, match="threshold"):
        make(tmp_path, FakeClock(START), threshold=0)
    with pytest.raises(ValueError, match="cooldown"):
        make(tmp_path, FakeClock(START), cooldown=0)


# Each racer opens the breaker file with its own FakeClock, waits for "go" on stdin so
# both start together, asks allow() many times and prints how many calls it admitted.
RACER = textwrap.dedent(
    """
    import sys
    from labkit.patterns.breaker import CircuitBreaker
    from labkit.clock import FakeClock
    path, now = sys.argv[1], float(sys.argv[2])
    b = CircuitBreaker("erp", threshold=1, cooldown=30, clock=FakeClock(now),
                       store_path=path, half_open_max=2)
    print("ready", flush=True)
    sys.stdin.readline()
    print(sum(b.allow() for _ in range(50)), flush=True)
    """
)


def test_half_open_admits_half_open_max_trials_across_two_racing_processes(tmp_path):
    path = tmp_path / "breakers.db"
    clock = FakeClock(START)
    here = CircuitBreaker(
        "erp", threshold=1, cooldown=30, clock=clock, store_path=path, half_open_max=2
    )
    here.record_failure()
    assert here.state == "open"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(path), repr(START + 30)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for racer in racers:
        assert racer.stdout.readline().strip() == "ready"
    for racer in racers:  # release both at once
        racer.stdin.write("go\n")
        racer.stdin.flush()
    admitted = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        admitted.append(int(out))
    print("admitted per process:", admitted)
    assert sum(admitted) == 2  # 100 concurrent asks, exactly half_open_max trials
    assert here.state == "half_open"
    moves = [(t.from_state, t.to_state) for t in here.history()]
    assert moves == [("closed", "open"), ("open", "half_open")]  # one process turned it
