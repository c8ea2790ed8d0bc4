"""Exercise 7's zoo: each plausible wrong solution loses the check named after it.

Exercise 7 is about a circuit breaker. Each entry overrides one or two functions of the
reference solution with a classic mistake; the check named after its mistake must catch
it, in process for every entry and, for a sample, through ``labkit grade`` in the
sandbox (``zoograding``), saying what ``SAYS`` gives. ``test_zoo.py`` checks the zoo as
a whole.
"""

from __future__ import annotations

from zoograding import in_process_test, right_test

#: The reference written with ``__slots__`` (no ``__dict__``, no ``vars()``): an entry
#: adds its wrong method after it, in the class body.
SLOTTED = """
        import threading

        class Breaker:
            __slots__ = ("threshold", "cooldown_s", "clock", "state", "failures", "opened_at",
                         "trial_out", "_lock")

            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at = "closed", 0, 0.0
                self.trial_out = False
                self._lock = threading.Lock()

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
"""

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        "ex07",
        "failures counted in total, not in a row",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "half open lets everyone through",
        "half_open_allows_one_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "open" and self.clock.now() >= self.opened_at + self.cooldown_s:
                    self.state = "half_open"
                return self.state != "open"
    """,
    ),
    (
        "ex07",
        "a failed trial keeps the old cooldown",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                self.failures += 1
                if self.state == "half_open":
                    self.state, self.trial_out = "open", False
                elif self.failures >= self.threshold:
                    self.state, self.opened_at = "open", self.clock.now()
    """,
    ),
    (
        "ex07",
        "cooldown timed with the wall clock",
        "ignores_the_wall_clock",
        """
        import time
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                super().record_failure()
                if self.state == "open":
                    self.opened_wall = time.time()
            def allow(self):
                if self.state == "open" and time.time() >= self.opened_wall + self.cooldown_s:
                    self.state, self.trial_out = "half_open", False
                return super().allow() if self.state != "open" else False
    """,
    ),
    (
        "ex07",
        "cooldown timed with monotonic(), imported by name",
        "ignores_the_wall_clock",
        """
        from time import monotonic
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                super().record_failure()
                if self.state == "open":
                    self.opened_mono = monotonic()
            def allow(self):
                if self.state == "open" and monotonic() >= self.opened_mono + self.cooldown_s:
                    self.state, self.trial_out = "half_open", False
                return super().allow() if self.state != "open" else False
    """,
    ),
    (
        "ex07",
        "failures forgotten after a minute (a window, not failures in a row)",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                now = self.clock.now()
                if now - getattr(self, "last_failure", now) > 60:
                    self.failures = 0
                self.last_failure = now
                super().record_failure()
    """,
    ),
    (
        "ex07",
        "failure count kept on the class, shared by every breaker",
        "two_breakers_side_by_side",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            failures_everywhere = 0
            def record_failure(self):
                Breaker.failures_everywhere += 1
                self.failures = Breaker.failures_everywhere - 1
                super().record_failure()
            def record_success(self):
                Breaker.failures_everywhere = 0
                super().record_success()
    """,
    ),
    (
        "ex07",
        "'<=' at the end of the cooldown (exactly 30 s still refused)",
        "half_open_allows_one_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "open" and self.clock.now() <= self.opened_at + self.cooldown_s:
                    return False
                return super().allow()
    """,
    ),
    (
        "ex07",
        "opens one failure late (failures > threshold)",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures > self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "a breaker that records failures but never refuses a call",
        "outage_spares_the_dependency",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                super().allow()
                return True
    """,
    ),
    (
        "ex07",
        "cooldown fixed at 30 s in the code",
        "cooldown_is_the_one_given",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + 30:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "elapsed time truncated with int()",
        "cooldown_is_the_one_given",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if int(self.clock.now() - self.opened_at) < self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "cooldown counted from the first failure of the streak",
        "cooldown_counts_from_the_opening",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                if self.failures == 0 or self.state == "half_open":
                    self.first_failure_at = self.clock.now()
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.trial_out = "open", False
                    self.opened_at = self.first_failure_at

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "cooldown doubled after each failed trial",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open":
                    self.cooldown_s *= 2
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "trial flag never cleared on reopening",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state = "half_open"
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at = "open", self.clock.now()

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "a failed trial's new cooldown counted from the trial's start",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                ok = super().allow()
                if ok and self.state == "half_open":
                    self.trial_started = self.clock.now()
                return ok
            def record_failure(self):
                if self.state == "half_open":
                    self.failures += 1
                    self.state, self.opened_at, self.trial_out = "open", self.trial_started, False
                    return
                super().record_failure()
    """,
    ),
    (
        "ex07",
        "a failed trial's new cooldown counted from the end of the old one",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                if self.state == "half_open":
                    self.failures += 1
                    self.state, self.trial_out = "open", False
                    self.opened_at += self.cooldown_s
                    return
                super().record_failure()
    """,
    ),
    (
        "ex07",
        "a trial with no result for a cooldown is given up: a second trial goes out",
        "half_open_allows_one_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if (self.state == "half_open" and self.trial_out
                        and self.clock.now() >= self.trial_at + self.cooldown_s):
                    self.trial_out = False
                ok = super().allow()
                if ok and self.state == "half_open":
                    self.trial_at = self.clock.now()
                return ok
    """,
    ),
    (
        # A timeout of minutes on the trial: the old scene waited 90 s only.
        "ex07",
        "a trial with no result for five minutes is given up (a fixed trial timeout)",
        "half_open_allows_one_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            TRIAL_TIMEOUT_S = 300.0
            def allow(self):
                if (self.state == "half_open" and self.trial_out
                        and self.clock.now() >= self.trial_at + self.TRIAL_TIMEOUT_S):
                    self.trial_out = False
                ok = super().allow()
                if ok and self.state == "half_open":
                    self.trial_at = self.clock.now()
                return ok
    """,
    ),
    (
        "ex07",
        "the opening time kept on the class, shared by every breaker",
        "breakers_keep_their_own_times",
        """
        class Breaker(Breaker):
            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < type(self).opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    type(self).opened_at = self.clock.now()
                    self.state, self.trial_out = "open", False
    """,
    ),
    (
        "ex07",
        "the trial flag kept on the class, one trial for every breaker",
        "breakers_keep_their_own_times",
        """
        class Breaker(Breaker):
            trial_out = False

            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at = "closed", 0, 0.0

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state = "half_open"
                if Breaker.trial_out:
                    return False
                Breaker.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    if self.state == "half_open":
                        Breaker.trial_out = False
                    self.state, self.opened_at = "open", self.clock.now()

            def record_success(self):
                if self.state == "half_open":
                    Breaker.trial_out = False
                self.failures, self.state = 0, "closed"
    """,
    ),
    (
        "ex07",
        "the cooldown measured between local datetimes (fromtimestamp)",
        "cooldown_across_a_clock_change",
        """
        from datetime import datetime, timedelta


        class Breaker(Breaker):
            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    now = datetime.fromtimestamp(self.clock.now())
                    if now - self.opened_dt < timedelta(seconds=self.cooldown_s):
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.opened_dt = datetime.fromtimestamp(self.clock.now())
                    self.state, self.trial_out = "open", False
    """,
    ),
    (
        "ex07",
        "the first breaker's clock kept on the class",
        "each_breaker_reads_its_own_clock",
        """
        class Breaker(Breaker):
            clock = None

            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                del self.clock
                if Breaker.clock is None:
                    Breaker.clock = clock
    """,
    ),
    (
        "ex07",
        "a cooldown spread by id(self) (jitter per breaker)",
        "no_jitter_on_the_cooldown",
        """
        class Breaker(Breaker):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                # spread the breakers' trials so they do not all retry at once
                self.cooldown_s = cooldown_s * (1 + ((id(self) >> 4) % 21 - 10) / 100)
    """,
    ),
    (
        "ex07",
        "a random jitter added to the opening time",
        "no_jitter_on_the_cooldown",
        """
        import random
        class Breaker(Breaker):
            def record_failure(self):
                super().record_failure()
                if self.state == "open":
                    # spread the trials of many workers a little
                    self.opened_at += random.uniform(-1.0, 1.0)
    """,
    ),
    (
        "ex07",
        "a cooldown spread by hash(self)",
        "no_jitter_on_the_cooldown",
        """
        class Breaker(Breaker):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.cooldown_s = cooldown_s + (hash(self) % 5) / 10
    """,
    ),
    (
        "ex07",
        "failures kept in a deque(maxlen=10)",
        "no_cap_on_the_threshold",
        """
        from collections import deque
        class Breaker(Breaker):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.recent = deque(maxlen=10)  # the last few failures are enough
            def record_failure(self):
                self.recent.append(self.clock.now())
                if self.state == "half_open" or len(self.recent) >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
            def record_success(self):
                self.recent.clear()
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "the failure count kept modulo 256",
        "no_cap_on_the_threshold",
        """
        class Breaker(Breaker):
            def record_failure(self):
                # a byte is plenty for a failure count
                self.failures = (self.failures + 1) % 256
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "the cooldown capped at 10 minutes",
        "no_cap_on_the_cooldown",
        """
        class Breaker(Breaker):
            def __init__(self, threshold, cooldown_s, clock):
                # never keep a dependency shut out for more than 10 minutes
                super().__init__(threshold, min(cooldown_s, 600.0), clock)
    """,
    ),
    (
        "ex07",
        "a refused call restarts the cooldown (never half-opens under load)",
        "outage_spares_the_dependency",
        """
        class Breaker(Breaker):
            def allow(self):
                ok = super().allow()
                if not ok and self.state == "open":
                    # a refused call is one more failure: keep it open
                    self.opened_at = self.clock.now()
                return ok
    """,
    ),
    (
        "ex07",
        "the opening time truncated with int()",
        "cooldown_counts_from_the_opening",
        """
        class Breaker(Breaker):
            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.trial_out = "open", False
                    self.opened_at = int(self.clock.now())
    """,
    ),
    (
        "ex07",
        "the failure count reset on opening (a failed trial leaves it half open)",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        class Breaker(Breaker):
            def record_failure(self):
                self.failures += 1
                if self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
                    self.failures = 0
    """,
    ),
    (
        "ex07",
        "the elapsed time rounded to a tenth of a second",
        "cooldown_is_the_one_given",
        """
        class Breaker(Breaker):
            def allow(self):
                elapsed = round(self.clock.now() - self.opened_at, 1)
                if self.state == "open" and elapsed >= self.cooldown_s:
                    self.state, self.trial_out = "half_open", False
                if self.state == "closed":
                    return True
                if self.state == "open":
                    return False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True
    """,
    ),
    (
        "ex07",
        "a successful trial closes without resetting the count",
        "trial_success_closes",
        """
        class Breaker(Breaker):
            def record_success(self):
                if self.state == "half_open":
                    self.state, self.trial_out = "closed", False
                else:
                    self.failures = 0
    """,
    ),
    (
        "ex07",
        "the opening time taken at the first refused call",
        "cooldown_counts_from_the_opening",
        """
        class Breaker(Breaker):
            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.trial_out = "open", False
                    self.opened_at = None  # set by the first call it refuses

            def allow(self):
                if self.state == "open" and self.opened_at is None:
                    self.opened_at = self.clock.now()
                return super().allow()
    """,
    ),
    (
        "ex07",
        "reading state starts the trial (the caller who asks is the trial)",
        "half_open_allows_one_trial",
        """
        class Breaker(Breaker):
            @property
            def state(self):
                if self._state == "open" and self.clock.now() >= self.opened_at + self.cooldown_s:
                    self._state, self.trial_out = "half_open", True  # the trial is whoever asked
                return self._state

            @state.setter
            def state(self, value):
                self._state = value
    """,
    ),
    (
        "ex07",
        "the state spelled 'half-open' (pybreaker's spelling)",
        "half_open_allows_one_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                ok = super().allow()
                if self.state == "half_open":
                    self.state = "half-open"
                return ok
            def record_failure(self):
                if self.state == "half-open":
                    self.state = "half_open"
                super().record_failure()
            def record_success(self):
                super().record_success()
    """,
    ),
    (
        "ex07",
        "a success forgives one failure (count - 1, not reset)",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                self.failures = max(0, self.failures - 1)
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "breakers cached in __new__ by (threshold, cooldown_s, clock)",
        "two_breakers_side_by_side",
        """
        _Reference = Breaker
        _made = {}
        class Breaker(_Reference):
            def __new__(cls, threshold, cooldown_s, clock):
                key = (threshold, cooldown_s, id(clock))
                if key not in _made:
                    _made[key] = super().__new__(cls)
                return _made[key]
            def __init__(self, threshold, cooldown_s, clock):
                if getattr(self, "_ready", False):
                    return
                super().__init__(threshold, cooldown_s, clock)
                self._ready = True
    """,
    ),
    (
        "ex07",
        "a floor of half a second on the cooldown (max(cooldown_s, 0.5))",
        "cooldown_is_the_one_given",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, max(cooldown_s, 0.5), clock)
    """,
    ),
    (
        "ex07",
        "two successful trials needed to close (a success threshold)",
        "trial_success_closes",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.successes = 0
            def record_success(self):
                self.failures = 0
                if self.state == "half_open":
                    self.successes += 1
                    self.trial_out = False
                    if self.successes >= 2:
                        self.state, self.successes = "closed", 0
                else:
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "failures counted only while closed (a failed trial ignored)",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                if self.state != "closed":
                    return
                super().record_failure()
    """,
    ),
    (
        "ex07",
        "the streak of failure times kept in a class-level list",
        "two_breakers_side_by_side",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            streak = []
            def record_failure(self):
                self.streak.append(self.clock.now())
                self.failures = len(self.streak)
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
            def record_success(self):
                self.streak.clear()
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "cooldown_s or 30 (a cooldown of zero taken as missing)",
        "a_cooldown_of_zero",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.cooldown_s = cooldown_s or 30.0
    """,
    ),
    (
        "ex07",
        "opened_at tested for truth (a clock at 0.0 never opened)",
        "a_clock_that_starts_at_zero",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.opened_at = None
            def allow(self):
                if (self.state == "open" and self.opened_at
                        and self.clock.now() < self.opened_at + self.cooldown_s):
                    return False
                if self.state == "open":
                    self.state, self.trial_out = "half_open", False
                return super().allow()
    """,
    ),
    (
        "ex07",
        "the breaker opened lazily, in allow() (state 'closed' after the failures)",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                self.failures += 1
                if self.state == "half_open":
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
            def allow(self):
                if self.state == "closed" and self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
                return super().allow()
    """,
    ),
    (
        "ex07",
        "failures counted in a threading.local (per worker thread)",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self._local = threading.local()
                super().__init__(threshold, cooldown_s, clock)
            @property
            def failures(self):
                return getattr(self._local, "failures", 0)
            @failures.setter
            def failures(self, value):
                self._local.failures = value
    """,
    ),
    (
        "ex07",
        "the trial flag kept in a threading.local (a trial per thread)",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self._local = threading.local()
                super().__init__(threshold, cooldown_s, clock)
            @property
            def trial_out(self):
                return getattr(self._local, "trial_out", False)
            @trial_out.setter
            def trial_out(self, value):
                self._local.trial_out = value
    """,
    ),
    (
        "ex07",
        "the opening time set only at the first opening (opened_at is None)",
        "a_second_outage_waits_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.opened_at = None
            def record_failure(self):
                self.failures += 1
                if self.state == "half_open":
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
                elif self.failures >= self.threshold:
                    if self.opened_at is None:
                        self.opened_at = self.clock.now()
                    self.state, self.trial_out = "open", False
    """,
    ),
    (
        "ex07",
        "record_success() raises while open (a slow call's late success)",
        "a_late_result_while_open_is_no_error",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                if self.state == "open":
                    raise RuntimeError("record_success() while open: no call was let through")
                super().record_success()
    """,
    ),
    (
        "ex07",
        "the counts kept in a module dict keyed by id(self) (a new breaker inherits a dead one's)",
        "a_new_breaker_starts_afresh",
        """
        _BREAKERS = {}
        def _field(name):
            return property(
                lambda self: _BREAKERS[id(self)][name],
                lambda self, value: _BREAKERS[id(self)].__setitem__(name, value),
            )
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self._lock = threading.Lock()
                fields = {"state": "closed", "failures": 0, "opened_at": 0.0, "trial_out": False}
                _BREAKERS.setdefault(id(self), fields)
            state = _field("state")
            failures = _field("failures")
            opened_at = _field("opened_at")
            trial_out = _field("trial_out")
    """,
    ),
    (
        "ex07",
        "the trial flag kept on the clock object (shared by the breakers on one clock)",
        "breakers_keep_their_own_times",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            @property
            def trial_out(self):
                return getattr(self.clock, "_trial_out", False)
            @trial_out.setter
            def trial_out(self, value):
                self.clock._trial_out = value
    """,
    ),
    (
        "ex07",
        "the cooldown doubled from the third opening on (a backoff after two failed trials)",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
                    self.openings = getattr(self, "openings", 0) + 1
                    if self.openings >= 3:
                        self.cooldown_s *= 2

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "failures forgotten after a day without one (a window of a day)",
        "opens_after_consecutive_failures",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                now = self.clock.now()
                if now - getattr(self, "last_failure", now) > 86400:
                    self.failures = 0  # a failure a day ago is not part of this outage
                self.last_failure = now
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "failures forgotten in allow() an hour after the last one",
        "opens_after_consecutive_failures",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                if self.state == "closed":
                    if self.clock.now() - getattr(self, "last_fail", self.clock.now()) > 3600:
                        self.failures = 0
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                self.last_fail = self.clock.now()
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "the opening time taken when the failing call was let out (in allow()), not as it failed",
        "cooldown_counts_from_the_opening",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False
                self.sent_at = None  # when the last call went out

            def allow(self):
                if self.state == "closed":
                    self.sent_at = self.clock.now()
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open":
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
                elif self.failures >= self.threshold:
                    # the outage began when the call that failed went out
                    sent = self.clock.now() if self.sent_at is None else self.sent_at
                    self.state, self.opened_at, self.trial_out = "open", sent, False

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "the opening time kept in a threading.local (the other threads skip the cooldown)",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.trial_out = False
                self.local = threading.local()  # thread-safe: each worker its own time

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    opened_at = getattr(self.local, "opened_at", 0.0)
                    if self.clock.now() < opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.trial_out = "open", False
                    self.local.opened_at = self.clock.now()

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "the opening time kept in a dict keyed by threading.get_ident()",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self._opened = {}  # thread id -> when that worker saw it open
                super().__init__(threshold, cooldown_s, clock)
            @property
            def opened_at(self):
                return self._opened.get(threading.get_ident(), 0.0)
            @opened_at.setter
            def opened_at(self, value):
                self._opened[threading.get_ident()] = value
    """,
    ),
    (
        "ex07",
        "the trial flag kept in a dict keyed by threading.get_ident() (a trial per worker)",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trials = {}  # thread id -> that worker's trial is out

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state = "half_open"
                    self.trials.clear()
                me = threading.get_ident()
                if self.trials.get(me):
                    return False
                self.trials[me] = True
                return True

            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at = "open", self.clock.now()
                    self.trials.clear()

            def record_success(self):
                self.failures = 0
                self.state = "closed"
                self.trials.clear()
    """,
    ),
    (
        "ex07",
        "failures counted in a dict keyed by threading.get_ident() (a count per worker)",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self._counts = {}  # thread id -> that worker's failures in a row
                super().__init__(threshold, cooldown_s, clock)
            @property
            def failures(self):
                return self._counts.get(threading.get_ident(), 0)
            @failures.setter
            def failures(self, value):
                self._counts[threading.get_ident()] = value
    """,
    ),
    (
        "ex07",
        "the state kept in a threading.local (each worker sees 'closed' until it fails)",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self._local = threading.local()
                super().__init__(threshold, cooldown_s, clock)
            @property
            def state(self):
                return getattr(self._local, "state", "closed")
            @state.setter
            def state(self, value):
                self._local.state = value
    """,
    ),
    (
        "ex07",
        "a millisecond of slack on the cooldown for float error (>= cooldown_s - 1e-3)",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    # a little slack: opened_at + cooldown_s may be off by a float error
                    if self.clock.now() - self.opened_at < self.cooldown_s - 1e-3:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True
    """,
    ),
    (
        "ex07",
        "nobody asking for two cooldowns starts a fresh cooldown (a quiet spell keeps it open)",
        "the_first_caller_after_a_quiet_spell_gets_the_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    elapsed = self.clock.now() - self.opened_at
                    if self.cooldown_s and elapsed >= 2 * self.cooldown_s:
                        # nobody tried in the trial window: the outage is stale, start over
                        self.opened_at = self.clock.now()
                        return False
                    if elapsed < self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True
    """,
    ),
    (
        "ex07",
        "trials only in the 5 s after each multiple of cooldown_s (elapsed % cooldown_s < 5)",
        "the_first_caller_after_a_quiet_spell_gets_the_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    elapsed = self.clock.now() - self.opened_at
                    # one trial every cooldown_s: at 30 s, 60 s, 90 s...
                    late = self.cooldown_s and elapsed % self.cooldown_s >= 5.0
                    if elapsed < self.cooldown_s or late:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True
    """,
    ),
    (
        "ex07",
        "the trial only in the cooldown after the cooldown (a later first caller refused for good)",
        "the_first_caller_after_a_quiet_spell_gets_the_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    elapsed = self.clock.now() - self.opened_at
                    window = self.cooldown_s <= elapsed < 2 * self.cooldown_s
                    if not (window or self.cooldown_s == 0):
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True
    """,
    ),
    (
        "ex07",
        "the trial's result taken only from the thread that let it out (threading.get_ident())",
        "a_trial_result_from_another_thread_ends_the_trial",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                allowed = super().allow()
                if allowed and self.state == "half_open":
                    self.trial_thread = threading.get_ident()  # whose result ends the trial
                return allowed

            def record_failure(self):
                if self.state == "half_open" and threading.get_ident() != self.trial_thread:
                    return  # not the trial's result: a late call's
                super().record_failure()

            def record_success(self):
                if self.state == "half_open" and threading.get_ident() != self.trial_thread:
                    return  # not the trial's result: a late call's
                super().record_success()
    """,
    ),
    (
        "ex07",
        "the trial marked in a threading.local (a result a callback thread records is dropped)",
        "a_trial_result_from_another_thread_ends_the_trial",
        """
        import threading

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False
                self.mine = threading.local()  # is this thread's call the trial?

            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = self.mine.trial = True
                return True

            def record_failure(self):
                if self.state == "half_open" and not getattr(self.mine, "trial", False):
                    return  # a late result, not the trial's
                self.mine.trial = False
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                if self.state == "half_open" and not getattr(self.mine, "trial", False):
                    return  # a late result, not the trial's
                self.mine.trial = False
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "no lock: two threads at the end of the cooldown both send a trial",
        "one_trial_when_two_threads_ask_at_once",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True
    """,
    ),
    (
        "ex07",
        "a lock made inside allow() (with threading.Lock(): a new lock on every call)",
        "one_trial_when_two_threads_ask_at_once",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with threading.Lock():
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
    """,
    ),
    (
        "ex07",
        "the lock held only around the trial flag (the cooldown test and half open outside it)",
        "one_trial_when_two_threads_ask_at_once",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                with self._lock:
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
    """,
    ),
    (
        "ex07",
        # A late success while open sets the count to 0 (and leaves it open, as only the
        # trial's success closes it); the trial after the cooldown fails and the count (1)
        # stays below threshold: half open with its trial spent, forever.
        "a failed trial reopens the breaker only through the count of failures",
        "a_late_result_leaves_the_next_trial_decisive",
        """
        _Reference = Breaker

        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()
                        self.trial_out = False

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    if self.state == "half_open":
                        self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        # The next outage half-opens with the flag still set: allow() is False for good.
        "the trial flag cleared only when a trial fails (a successful trial leaves it set)",
        "the_next_outage_gets_its_own_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state = "half_open"
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open":  # the trial failed: it is over
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
                    elif self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state = "closed"
    """,
    ),
    (
        "ex07",
        # A thread asking halfway through the failed trial's record_failure() sees the
        # breaker open with the old opening time, and sends a second trial at once.
        "record_failure and record_success write the state without the lock (only allow())",
        "one_trial_when_two_threads_ask_at_once",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):  # only allow() races: it reads and takes the trial
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.trial_out = False
                    self.state = "open"
                    self.opened_at = self.clock.now()

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "record_failure writes the state without the lock, the clock read first",
        "one_trial_when_two_threads_ask_at_once",
        """
        _Reference = Breaker


        class Breaker(_Reference):
            # only allow() takes the lock: it is the one that races; the clock read first
            def record_failure(self):
                now = self.clock.now()
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state = "open"
                    self.opened_at = now
                    self.trial_out = False

            def record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "record_success() and record_failure() give up when the lock is busy (blocking=False)",
        "a_result_waits_for_a_busy_lock",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                if not self._lock.acquire(blocking=False):
                    return  # busy: another thread is in there, skip rather than wait
                try:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()
                        self.trial_out = False
                finally:
                    self._lock.release()

            def record_success(self):
                if not self._lock.acquire(blocking=False):
                    return
                try:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
                finally:
                    self._lock.release()
    """,
    ),
    (
        # The scripted races let B in at A's clock reading, under the lock: A always won
        # the step between the release and the flag.
        "ex07",
        "allow() marks the trial taken after releasing the lock",
        "one_trial_whatever_step_the_other_asks_at",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                self.trial_out = True
                return True
    """,
    ),
    (
        "ex07",
        "record_failure() counts the failure before taking the lock",
        "failures_from_two_threads_both_count",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                self.failures += 1
                with self._lock:
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "record_failure() reads the count under the lock and writes it back after",
        "failures_from_two_threads_both_count",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    failures = self.failures + 1
                self.failures = failures
                with self._lock:
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        # Every breaker of a run had the same settings: one set kept for all passed.
        "ex07",
        "threshold and cooldown_s set on the class in __init__ (the last breaker's for all)",
        "breakers_keep_their_own_times",
        """
        import threading

        class Breaker:
            threshold = 3
            cooldown_s = 30.0

            def __init__(self, threshold, cooldown_s, clock):
                Breaker.threshold = threshold
                Breaker.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False
                self._lock = threading.Lock()

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "the cooldown in a module global set by the first breaker made",
        "breakers_keep_their_own_times",
        """
        COOLDOWN_S = None
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                global COOLDOWN_S
                super().__init__(threshold, cooldown_s, clock)
                if COOLDOWN_S is None:
                    COOLDOWN_S = cooldown_s

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + COOLDOWN_S:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
    """,
    ),
    (
        # Every failed trial the checks made was on a 30 s cooldown.
        "ex07",
        "a failed trial opens it again for a hard-coded 30 s (the public checks' cooldown)",
        "breakers_keep_their_own_times",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.retry_at:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    now = self.clock.now()
                    if self.state == "half_open":
                        self.state, self.retry_at, self.trial_out = "open", now + 30.0, False
                    elif self.failures >= self.threshold:
                        self.state, self.retry_at = "open", now + self.cooldown_s
                        self.trial_out = False
    """,
    ),
    (
        "ex07",
        "an _open() helper whose cooldown defaults to 30 s, called bare for a failed trial",
        "breakers_keep_their_own_times",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def _open(self, cooldown=30.0):
                self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
                self.wait_s = cooldown

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.wait_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open":
                        self._open()
                    elif self.failures >= self.threshold:
                        self._open(self.cooldown_s)
    """,
    ),
    (
        "ex07",
        "allow() gives up when the lock is busy (blocking=False), refusing calls while closed",
        "one_trial_whatever_step_the_other_asks_at",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if not self._lock.acquire(blocking=False):
                    return False  # busy: another thread is deciding, so refuse
                try:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
                finally:
                    self._lock.release()
    """,
    ),
    (
        "ex07",
        "allow() waits at most 10 ms for the lock, then refuses the call",
        "one_trial_whatever_step_the_other_asks_at",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if not self._lock.acquire(timeout=0.01):
                    return False
                try:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
                finally:
                    self._lock.release()
    """,
    ),
    (
        "ex07",
        "a count of calls in flight holds the trial back (calls let out while closed never report)",
        "the_next_outage_gets_its_own_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.in_flight = 0

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        self.in_flight += 1
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state = "half_open"
                    if self.in_flight > 0:
                        return False
                    self.in_flight += 1
                    return True

            def record_failure(self):
                with self._lock:
                    self.in_flight = max(0, self.in_flight - 1)
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()

            def record_success(self):
                with self._lock:
                    self.in_flight = max(0, self.in_flight - 1)
                    self.failures = 0
                    self.state = "closed"
    """,
    ),
    (
        "ex07",
        "a second trial after 100 refusals (a guard against a trial that never reports)",
        "the_first_caller_after_a_quiet_spell_gets_the_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.refused = 0

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out, self.refused = "half_open", False, 0
                    if self.trial_out:
                        self.refused += 1
                        if self.refused < 100:
                            return False
                        self.refused = 0
                    self.trial_out = True
                    return True
    """,
    ),
    (
        "ex07",
        "the trial given up after a week without its result (a second trial goes out)",
        "the_first_caller_after_a_quiet_spell_gets_the_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    now = self.clock.now()
                    if self.state == "open":
                        if now < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out and now < self.trial_at + 7 * 86400:
                        return False
                    self.trial_out, self.trial_at = True, now
                    return True
    """,
    ),
    (
        "ex07",
        "the failure count capped at 1000",
        "no_cap_on_the_threshold",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures = min(self.failures + 1, 1000)
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    # Round 15 (red team): breakers that give up for good after many failed trials, many
    # outages or a slow trial; backoffs that start late; times kept to the millisecond;
    # caps above the checks' old numbers; and __slots__ breakers, which the step races
    # could not hook before (a right one lost two checks, a wrong one was never judged).
    (
        "ex07",
        "the breaker gives up after 10 failed trials in a row (stays open for good)",
        "the_breaker_never_gives_up",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.failed_trials = 0
            def allow(self):
                if self.failed_trials >= 10:
                    return False  # the dependency is gone: stop trying
                return super().allow()
            def record_failure(self):
                with self._lock:
                    if self.state == "half_open":
                        self.failed_trials += 1
                super().record_failure()
            def record_success(self):
                with self._lock:
                    self.failed_trials = 0
                super().record_success()
    """,
    ),
    (
        "ex07",
        "the breaker locks out after 3 outages (stays open for good, like a tripped fuse)",
        "the_breaker_never_gives_up",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.trips = 0
            def record_failure(self):
                with self._lock:
                    was = self.state
                super().record_failure()
                with self._lock:
                    if was == "closed" and self.state == "open":
                        self.trips += 1
            def allow(self):
                if self.trips >= 3 and self.state != "closed":
                    return False
                return super().allow()
    """,
    ),
    (
        "ex07",
        "a trial's failure dropped when it took longer than the cooldown (stuck half open)",
        "the_breaker_never_gives_up",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                allowed = super().allow()
                if allowed and self.state == "half_open":
                    self.trial_at = self.clock.now()
                return allowed
            def record_failure(self):
                with self._lock:
                    took = self.clock.now() - getattr(self, "trial_at", 0.0)
                    if self.state == "half_open" and took > self.cooldown_s:
                        return  # too late: a stale result
                super().record_failure()
    """,
    ),
    (
        "ex07",
        "the cooldown doubled from the 10th failed trial in a row on (a late backoff)",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.failed_trials, self.base = 0, self.cooldown_s
            def record_failure(self):
                with self._lock:
                    if self.state == "half_open":
                        self.failed_trials += 1
                        if self.failed_trials > 9:
                            self.cooldown_s = self.base * 2
                super().record_failure()
            def record_success(self):
                with self._lock:
                    self.failed_trials, self.cooldown_s = 0, self.base
                super().record_success()
    """,
    ),
    (
        "ex07",
        "the cooldown doubled from the 3rd outage on (openings counted for good)",
        "a_second_outage_waits_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.trips, self.base = 0, self.cooldown_s
            def record_failure(self):
                with self._lock:
                    was = self.state
                super().record_failure()
                with self._lock:
                    if was == "closed" and self.state == "open":
                        self.trips += 1
                        if self.trips >= 3:
                            self.cooldown_s = self.base * 2
    """,
    ),
    (
        "ex07",
        "times kept in whole milliseconds (int(clock.now() * 1000))",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        now_ms = int(self.clock.now() * 1000)
                        if now_ms - self.opened_ms < int(self.cooldown_s * 1000):
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
            def record_failure(self):
                super().record_failure()
                with self._lock:
                    if self.state == "open":
                        self.opened_ms = int(self.opened_at * 1000)
    """,
    ),
    (
        "ex07",
        "the opening time rounded to the millisecond (round(now, 3))",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                super().record_failure()
                with self._lock:
                    self.opened_at = round(self.opened_at, 3)
    """,
    ),
    (
        "ex07",
        "the elapsed time rounded to the millisecond (round(now - opened_at, 3))",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if round(self.clock.now() - self.opened_at, 3) < self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
    """,
    ),
    (
        "ex07",
        "the cooldown capped at a day (min(cooldown_s, 86400))",
        "no_cap_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, min(cooldown_s, 86400.0), clock)
    """,
    ),
    (
        "ex07",
        "a second trial after 1000 refusals (a guard against a trial that never reports)",
        "the_first_caller_after_a_quiet_spell_gets_the_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "half_open" and self.trial_out:
                        self.refused = getattr(self, "refused", 0) + 1
                        if self.refused > 1000:
                            self.refused = 0
                            return True
                        return False
                return super().allow()
    """,
    ),
    (
        "ex07",
        "the failure count capped at 2000",
        "no_cap_on_the_threshold",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures = min(self.failures + 1, 2000)
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "__slots__, and allow() marks the trial taken after releasing the lock",
        "one_trial_whatever_step_the_other_asks_at",
        SLOTTED
        + """
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    taken = self.trial_out
                if taken:
                    return False
                self.trial_out = True
                return True
    """,
    ),
    (
        "ex07",
        "__slots__, and record_failure() counts the failure before taking the lock",
        "failures_from_two_threads_both_count",
        SLOTTED
        + """
            def record_failure(self):
                self.failures += 1
                with self._lock:
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "record_success() resets the count outside the lock (a success racing a failure is lost)",
        "a_success_and_a_failure_at_once_both_count",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                self.failures = 0
                with self._lock:
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "record_success() closes under the lock, then resets the count under it again",
        "a_success_and_a_failure_at_once_both_count",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                with self._lock:
                    self.state, self.trial_out = "closed", False
                with self._lock:
                    self.failures = 0
    """,
    ),
    (
        "ex07",
        "record_success() resets the count after releasing the lock",
        "a_success_and_a_failure_at_once_both_count",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                with self._lock:
                    self.state, self.trial_out = "closed", False
                self.failures = 0
    """,
    ),
    (
        "ex07",
        "record_failure() reads the state before taking the lock (a trial's success undone)",
        "a_success_and_a_failure_at_once_both_count",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                trial_failed = self.state == "half_open"
                with self._lock:
                    self.failures += 1
                    if trial_failed or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "a late success while open closes the breaker but keeps the count of failures",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                with self._lock:
                    if self.state != "open":
                        self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "opened_at the last of the failure times kept as text ('10.0' sorts before '5.0')",
        "cooldown_counts_from_the_opening",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.times = []

            def record_failure(self):
                with self._lock:
                    self.times = sorted([*self.times, str(self.clock.now())])
                    self.failures = len(self.times)
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.trial_out = "open", False
                        self.opened_at = float(self.times[-1])

            def record_success(self):
                with self._lock:
                    self.times, self.failures = [], 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "a lock made on first use (None in __init__, made by the first call)",
        "the_lock_is_made_before_the_first_call",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self._lock = None
            def _guard(self):
                if self._lock is None:
                    self._lock = threading.Lock()
                return self._lock
            def allow(self):
                with self._guard():
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
            def record_failure(self):
                with self._guard():
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
            def record_success(self):
                with self._guard():
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "a lock made on first use (if not hasattr(self, '_lock'))",
        "the_lock_is_made_before_the_first_call",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
            def _guard(self):
                if not hasattr(self, "_lock"):
                    self._lock = threading.Lock()
                return self._lock
            def allow(self):
                with self._guard():
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
            def record_failure(self):
                with self._guard():
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
            def record_success(self):
                with self._guard():
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "a lock made on first use by __getattr__",
        "the_lock_is_made_before_the_first_call",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
            def __getattr__(self, name):
                if name == "_lock":
                    self._lock = threading.Lock()
                    return self._lock
                raise AttributeError(name)
    """,
    ),
    (
        "ex07",
        "a lock property made on first use over a class attribute None",
        "the_lock_is_made_before_the_first_call",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            _mutex = None
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
            @property
            def _lock(self):
                if self._mutex is None:
                    self._mutex = threading.Lock()
                return self._mutex
    """,
    ),
    (
        "ex07",
        "a count of trials out lowered by every result (late failures free more trials)",
        "a_late_result_frees_no_second_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.out = 0
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state = "half_open"
                    if self.out >= 1:
                        return False
                    self.out += 1
                    return True
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state != "closed":
                        self.out -= 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()
            def record_success(self):
                with self._lock:
                    self.failures = 0
                    if self.state != "closed":
                        self.out -= 1
                    self.state = "closed"
    """,
    ),
    (
        "ex07",
        "a semaphore for the trial released by results while open (late results free more trials)",
        "a_late_result_frees_no_second_trial",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self._trial = threading.Semaphore(1)
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state = "half_open"
                    return self._trial.acquire(blocking=False)
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    was = self.state
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()
                    if was != "closed":
                        self._trial.release()
            def record_success(self):
                with self._lock:
                    self.failures = 0
                    if self.state != "closed":
                        self._trial.release()
                    self.state = "closed"
    """,
    ),
    (
        "ex07",
        "the breaker stays open for good once an outage lasted a day",
        "the_breaker_never_gives_up",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    now = self.clock.now()
                    if self.state == "closed" and self.failures >= self.threshold:
                        self.outage_start = now
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", now, False
                        if now - self.outage_start >= 86400:
                            self.opened_at = float("inf")
    """,
    ),
    (
        "ex07",
        "the cooldown doubled (up to 10 min) once an outage lasted an hour",
        "a_long_outage_keeps_its_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    now = self.clock.now()
                    if self.state == "closed" and self.failures >= self.threshold:
                        self.outage_start, self.cool = now, self.cooldown_s
                    if self.state == "half_open" or self.failures >= self.threshold:
                        if self.state == "half_open" and now - self.outage_start >= 3600:
                            self.cool = min(self.cool * 2, 600)
                        self.state, self.trial_out = "open", False
                        self.opened_at = now - self.cooldown_s + self.cool
    """,
    ),
    (
        "ex07",
        "a microsecond of slack on the cooldown (now + 1e-6)",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() + 1e-6 < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
    """,
    ),
    (
        "ex07",
        "a state property that half-opens (and frees the trial) without the lock",
        "reading_the_state_frees_no_second_trial",
        """
        import threading
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self._state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
                self._lock = threading.Lock()
            @property
            def state(self):
                if self._state == "open" and self.clock.now() >= self.opened_at + self.cooldown_s:
                    self._state, self.trial_out = "half_open", False
                return self._state
            def allow(self):
                with self._lock:
                    state = self.state
                    if state == "closed":
                        return True
                    if state == "open" or self.trial_out:
                        return False
                    self.trial_out = True
                    return True
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self._state == "half_open" or self.failures >= self.threshold:
                        self._state, self.opened_at = "open", self.clock.now()
                        self.trial_out = False
            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self._state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "a breaker with metrics: the trial flag set after the lock, late in a long allow()",
        "one_trial_whatever_step_the_other_asks_at",
        """
        import threading
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
                self.calls = self.refused = self.allowed = self.trials = 0
                self.last_call = self.last_refusal = self.last_trial = None
                self._lock = threading.Lock()
            def allow(self):
                with self._lock:
                    now = self.clock.now()
                    self.calls += 1
                    self.last_call = now
                    if self.state == "closed":
                        self.allowed += 1
                        return True
                    if self.state == "open":
                        if now < self.opened_at + self.cooldown_s:
                            self.refused += 1
                            self.last_refusal = now
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        self.refused += 1
                        self.last_refusal = now
                        return False
                    self.trials += 1
                    self.allowed += 1
                    self.last_trial = now
                self.trial_out = True
                return True
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "state in an inner object with its own lock; the trial flag set after the with",
        "one_trial_whatever_step_the_other_asks_at",
        """
        import threading
        class _Inner:
            def __init__(self):
                self.lock = threading.Lock()
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self._s = _Inner()
            @property
            def state(self):
                return self._s.state
            def allow(self):
                s = self._s
                with s.lock:
                    if s.state == "closed":
                        return True
                    if s.state == "open":
                        if self.clock.now() < s.opened_at + self.cooldown_s:
                            return False
                        s.state, s.trial_out = "half_open", False
                    if s.trial_out:
                        return False
                s.trial_out = True
                return True
            def record_failure(self):
                s = self._s
                with s.lock:
                    s.failures += 1
                    if s.state == "half_open" or s.failures >= self.threshold:
                        s.state, s.opened_at, s.trial_out = "open", self.clock.now(), False
            def record_success(self):
                s = self._s
                with s.lock:
                    s.failures = 0
                    s.state, s.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "a second trial after 10000 refusals (a guard against a trial that never reports)",
        "the_first_caller_after_a_quiet_spell_gets_the_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.refusals = 0
            def allow(self):
                with self._lock:
                    if self.state == "half_open" and self.trial_out:
                        self.refusals += 1
                        if self.refusals >= 10000:
                            self.refusals = 0
                            return True
                        return False
                    if self.state != "half_open":
                        self.refusals = 0
                return super().allow()
    """,
    ),
    (
        "ex07",
        "the breaker locks out after 20 outages (stays open for good)",
        "the_breaker_never_gives_up",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.trips = 0
            def record_failure(self):
                was = self.state
                super().record_failure()
                if was == "closed" and self.state == "open":
                    self.trips += 1
            def allow(self):
                if self.trips >= 20 and self.state != "closed":
                    return False
                return super().allow()
    """,
    ),
    (
        "ex07",
        "the breaker gives up after 5000 failed trials in a row",
        "the_breaker_never_gives_up",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.failed_trials = 0
            def record_failure(self):
                if self.state == "half_open":
                    self.failed_trials += 1
                super().record_failure()
            def record_success(self):
                self.failed_trials = 0
                super().record_success()
            def allow(self):
                if self.failed_trials >= 5000:
                    return self.state == "closed"
                return super().allow()
    """,
    ),
    (
        "ex07",
        "the failure count capped at 10000 (min(failures + 1, 10000))",
        "no_cap_on_the_threshold",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures = min(self.failures + 1, 10000)
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "the cooldown capped at a year (min(cooldown_s, 365 days))",
        "no_cap_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, min(cooldown_s, 365 * 86400.0), clock)
    """,
    ),
    (
        "ex07",
        "the cooldown doubled from the 20th outage on",
        "a_second_outage_waits_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.base, self.trips = cooldown_s, 0
            def record_failure(self):
                was = self.state
                super().record_failure()
                if was == "closed" and self.state == "open":
                    self.trips += 1
                    if self.trips >= 20:
                        self.cooldown_s = self.base * 2
    """,
    ),
    (
        "ex07",
        "the trial given up after two years without its result",
        "the_first_caller_after_a_quiet_spell_gets_the_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if (
                        self.state == "half_open" and self.trial_out
                        and self.clock.now() >= self.trial_at + 2 * 365 * 86400.0
                    ):
                        self.trial_out = False
                ok = super().allow()
                if ok and self.state == "half_open":
                    self.trial_at = self.clock.now()
                return ok
    """,
    ),
    (
        "ex07",
        "record_failure() opens under the lock, then sets the opening time under it again",
        "one_trial_when_two_threads_ask_at_once",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    opening = self.state == "half_open" or self.failures >= self.threshold
                    if opening:
                        self.state, self.trial_out = "open", False
                if opening:
                    with self._lock:
                        self.opened_at = self.clock.now()
    """,
    ),
    (
        "ex07",
        "record_failure() stamps the opening time in a helper that takes the lock again",
        "one_trial_when_two_threads_ask_at_once",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def _stamp(self):
                with self._lock:
                    self.opened_at = self.clock.now()

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    opened = self.state == "half_open" or self.failures >= self.threshold
                    if opened:
                        self.state, self.trial_out = "open", False
                if opened:
                    self._stamp()
    """,
    ),
    (
        "ex07",
        "a failed trial's new cooldown counted from the last call refused during it",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                ok = super().allow()
                if not ok and self.state == "half_open":
                    self.last_refused = self.clock.now()
                return ok

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open":
                        self.state, self.trial_out = "open", False
                        self.opened_at = getattr(self, "last_refused", self.clock.now())
                    elif self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()
                        self.trial_out = False
    """,
    ),
    (
        "ex07",
        "record_failure() reads the clock before taking the lock",
        "failure_time_read_once_the_lock_is_held",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                now = self.clock.now()
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", now, False
    """,
    ),
    (
        "ex07",
        "a count of trials out lowered by every result, successes while closed too",
        "a_late_result_frees_no_second_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.trials = 0

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state = "half_open"
                    if self.trials >= 1:
                        return False
                    self.trials += 1
                    return True

            def record_failure(self):
                with self._lock:
                    if self.state == "half_open":
                        self.trials -= 1
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()

            def record_success(self):
                with self._lock:
                    self.trials -= 1
                    self.failures = 0
                    self.state = "closed"
    """,
    ),
    (
        "ex07",
        "a failed trial's record_failure() reads the clock before taking the lock",
        "failure_time_read_once_the_lock_is_held",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                # The trial's failure: the new cooldown starts now, read first.
                now = self.clock.now() if self.state == "half_open" else None
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.opened_at = now if now is not None else self.clock.now()
                        self.state, self.trial_out = "open", False
    """,
    ),
    (
        "ex07",
        "a failure while open restamps the opening time without the lock",
        "failure_time_read_once_the_lock_is_held",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                if self.state == "open":  # already open: only the time to move on
                    self.failures += 1
                    self.opened_at = self.clock.now()
                    return
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "closed lets at most 50 calls out at once (a bulkhead cap)",
        "starts_closed",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.in_flight = 0

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        if self.in_flight >= 50:
                            return False
                        self.in_flight += 1
                        return True
                return super().allow()

            def record_failure(self):
                with self._lock:
                    self.in_flight = max(0, self.in_flight - 1)
                super().record_failure()

            def record_success(self):
                with self._lock:
                    self.in_flight = max(0, self.in_flight - 1)
                super().record_success()
    """,
    ),
    (
        "ex07",
        "__init__(self, clock, threshold=5, cooldown_s=30.0): Breaker(3, 30.0, clock) misread",
        "arguments_in_the_order_given",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, clock, threshold=5, cooldown_s=30.0):
                super().__init__(threshold, cooldown_s, clock)
    """,
    ),
    (
        "ex07",
        "__init__(self, cooldown_s, threshold, clock): positional threshold and cooldown swapped",
        "arguments_in_the_order_given",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, cooldown_s, threshold, clock):
                super().__init__(threshold, cooldown_s, clock)
    """,
    ),
    (
        "ex07",
        "record_success() resets by calling self.__init__() (a new lock while one is waited on)",
        "no_call_swaps_the_lock",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                with self._lock:
                    self.__init__(self.threshold, self.cooldown_s, self.clock)
    """,
    ),
    (
        "ex07",
        "a new lock made at each opening (a waiter on the old one runs beside the new one's)",
        "no_call_swaps_the_lock",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
                        self._lock = threading.Lock()
    """,
    ),
    (
        "ex07",
        "a _reset() helper that closes and makes a fresh lock, called by a trial's success",
        "no_call_swaps_the_lock",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def _reset(self):
                self.failures, self.state, self.trial_out = 0, "closed", False
                self._lock = threading.Lock()

            def record_success(self):
                with self._lock:
                    if self.state == "half_open":
                        self._reset()
                    else:
                        self.failures = 0
                        self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "a @dataclass with clock as its first field (Breaker(3, 30.0, clock) misread)",
        "arguments_in_the_order_given",
        """
        import threading
        from dataclasses import dataclass, field

        @dataclass
        class Breaker:
            clock: object
            threshold: int = 5
            cooldown_s: float = 30.0
            state: str = "closed"
            failures: int = 0
            opened_at: float = 0.0
            trial_out: bool = False
            _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "a failed trial's new cooldown capped at 10 minutes (a trial every 600 s, not cooldown_s)",
        "no_cap_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    now = self.clock.now()
                    if self.state == "half_open":
                        self.state, self.trial_out = "open", False
                        self.opened_at = now - max(0.0, self.cooldown_s - 600.0)
                    elif self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", now, False
    """,
    ),
    (
        "ex07",
        "a failed trial's new cooldown capped at a year (min(cooldown_s, 365 days))",
        "no_cap_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    now = self.clock.now()
                    if self.state == "half_open":
                        self.state, self.trial_out = "open", False
                        self.opened_at = now - max(0.0, self.cooldown_s - 365 * 86400.0)
                    elif self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", now, False
    """,
    ),
    (
        "ex07",
        "a failed trial's new opening time rounded to the millisecond (round(now, 3))",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    now = self.clock.now()
                    if self.state == "half_open":
                        self.state, self.opened_at, self.trial_out = "open", round(now, 3), False
                    elif self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", now, False
    """,
    ),
    (
        "ex07",
        # A lock on the class made again by each __init__: making a breaker for another
        # dependency swaps the lock under the threads inside an older one (two trials).
        "a class-level lock made again in __init__ (Breaker._lock = threading.Lock())",
        "making_a_breaker_swaps_no_lock",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                del self._lock
                Breaker._lock = threading.Lock()
    """,
    ),
    (
        "ex07",
        # The same with a module variable: `global _LOCK; _LOCK = threading.Lock()`.
        "a module-level lock made again in __init__ (global _LOCK)",
        "making_a_breaker_swaps_no_lock",
        """
        _LOCK = threading.Lock()
        _Reference = Breaker
        class Breaker(_Reference):
            _lock = property(lambda self: _LOCK, lambda self, value: None)

            def __init__(self, threshold, cooldown_s, clock):
                global _LOCK
                super().__init__(threshold, cooldown_s, clock)
                _LOCK = threading.Lock()
    """,
    ),
    (
        "ex07",
        # A cooldown of 62.5 ms kept as 62 ms: the trial goes out half a millisecond early.
        "the cooldown kept in whole milliseconds (int(cooldown_s * 1000) / 1000)",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, int(cooldown_s * 1000) / 1000, clock)
    """,
    ),
    (
        "ex07",
        # round(cooldown_s, 2) "to tidy it": 62.5 ms becomes 60 ms.
        "the cooldown rounded to the hundredth of a second in __init__ (round(cooldown_s, 2))",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, round(cooldown_s, 2), clock)
    """,
    ),
    (
        "ex07",
        # The clock read under one lock, the trial taken under a second: another thread's
        # trial that fails in between opens the breaker again, and this caller half-opens
        # it anyway and sends a second trial in the fresh cooldown.
        "allow() finds the cooldown over under one lock and takes the trial under a second",
        "a_trial_failed_meanwhile_frees_no_second_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    ready = self.state == "half_open" or (
                        self.clock.now() >= self.opened_at + self.cooldown_s
                    )
                if not ready:
                    return False
                with self._lock:
                    if self.state == "open":
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
    """,
    ),
    (
        "ex07",
        # A late success taken as "the breaker was touched": the cooldown starts again, and
        # slow calls that keep succeeding keep the trial from ever going out.
        "a late success while open starts the cooldown again (opened_at = now)",
        "a_late_success_keeps_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                with self._lock:
                    if self.state == "open":
                        self.opened_at = self.clock.now()
                        return
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "allow() finds the cooldown over under one lock and takes the trial under a second": (
        "B recording its call's failure at once"
    ),
    "a class-level lock made again in __init__ (Breaker._lock = threading.Lock())": (
        "a second breaker made for another dependency"
    ),
    "a module-level lock made again in __init__ (global _LOCK)": (
        "a second breaker made for another dependency"
    ),
    "record_success() resets the count outside the lock (a success racing a failure is lost)": (
        "thread A records a failure and thread B a success"
    ),
    "record_success() closes under the lock, then resets the count under it again": (
        "thread A records a success and thread B a failure"
    ),
    "record_success() resets the count after releasing the lock": (
        "thread A records a success and thread B a failure"
    ),
    "record_failure() reads the state before taking the lock (a trial's success undone)": (
        "its trial let out 30 s later"
    ),
    "a late success while open closes the breaker but keeps the count of failures": (
        "a success recorded while open that closed the breaker"
    ),
    "opened_at the last of the failure times kept as text ('10.0' sorts before '5.0')": (
        "a clock that starts at 0.0"
    ),
    "threshold and cooldown_s set on the class in __init__ (the last breaker's for all)": (
        "A open after 1 failure"
    ),
    "the cooldown in a module global set by the first breaker made": (
        "B refuses at 10 s and at 74.75 s"
    ),
    "a failed trial opens it again for a hard-coded 30 s (the public checks' cooldown)": (
        "A's trial fails at 10 s"
    ),
    "an _open() helper whose cooldown defaults to 30 s, called bare for a failed trial": (
        "A's trial fails at 10 s"
    ),
    "record_success() and record_failure() give up when the lock is busy (blocking=False)": (
        "thread B calls record_success()"
    ),
    "record_failure writes the state without the lock, the clock read first": (
        "right after write 2 of the trial's record_failure()"
    ),
    "a failed trial reopens the breaker only through the count of failures": (
        "a trial that fails: open again"
    ),
    "no lock: two threads at the end of the cooldown both send a trial": "True for one of them",
    "a lock made inside allow() (with threading.Lock(): a new lock on every call)": (
        "True for one of them"
    ),
    "the lock held only around the trial flag (the cooldown test and half open outside it)": (
        "True for one of them"
    ),
    "failures counted in total, not in a row": "never 3 failures in a row",
    "half open lets everyone through": "the callers behind the trial",
    "a failed trial keeps the old cooldown": "10 s after the failed trial",
    "cooldown timed with the wall clock": "the fake clock did not move",
    "cooldown timed with monotonic(), imported by name": "the fake clock did not move",
    "failures forgotten after a minute (a window, not failures in a row)": "one failure every",
    "failure count kept on the class, shared by every breaker": "breaker B closed",
    "'<=' at the end of the cooldown (exactly 30 s still refused)": "exactly 30 s",
    "opens one failure late (failures > threshold)": "open at the 3rd failure",
    "a breaker that records failures but never refuses a call": "at most 7 calls",
    "cooldown fixed at 30 s in the code": "with cooldown_s=",
    "elapsed time truncated with int()": "with cooldown_s=",
    "cooldown counted from the first failure of the streak": "it opened the breaker",
    "cooldown doubled after each failed trial": "30 s after the failed trial",
    "trial flag never cleared on reopening": "30 s after the failed trial",
    "a failed trial's new cooldown counted from the trial's start": "after its failure",
    "a failed trial's new cooldown counted from the end of the old one": "after its failure",
    "a trial with no result for a cooldown is given up: a second trial goes out": (
        "its result is not recorded yet"
    ),
    "a trial with no result for five minutes is given up (a fixed trial timeout)": (
        "a day into the trial still"
    ),
    "the opening time kept on the class, shared by every breaker": "still refuses",
    "the trial flag kept on the class, one trial for every breaker": "its own trial",
    "the cooldown measured between local datetimes (fromtimestamp)": (
        "the local clock changes there"
    ),
    "the first breaker's clock kept on the class": "two breakers on two clocks",
    "a cooldown spread by id(self) (jitter per breaker)": "lets its trial through at 30 s",
    "a random jitter added to the opening time": "every one refuses a millisecond before 30 s",
    "a cooldown spread by hash(self)": "breakers opened at the same moment",
    "failures kept in a deque(maxlen=10)": "with threshold=12000",
    "the failure count kept modulo 256": "open at failure 12000",
    "the cooldown capped at 10 minutes": "with cooldown_s=7200.25",
    "a refused call restarts the cooldown (never half-opens under load)": (
        "once the dependency is back"
    ),
    "the opening time truncated with int()": "it opened the breaker",
    "the failure count reset on opening (a failed trial leaves it half open)": (
        "after a failed trial"
    ),
    "the elapsed time rounded to a tenth of a second": "with cooldown_s=",
    "a successful trial closes without resetting the count": "count was reset",
    "the opening time taken at the first refused call": "it opened the breaker",
    "reading state starts the trial (the caller who asks is the trial)": (
        "once the 30 s cooldown passed"
    ),
    "the state spelled 'half-open' (pybreaker's spelling)": "state 'half_open' during the trial",
    "a success forgives one failure (count - 1, not reset)": "never 3 failures in a row",
    "breakers cached in __new__ by (threshold, cooldown_s, clock)": (
        "breaker B closed and letting calls through"
    ),
    "a floor of half a second on the cooldown (max(cooldown_s, 0.5))": "with cooldown_s=",
    "two successful trials needed to close (a success threshold)": (
        "state 'closed' after a successful trial"
    ),
    "failures counted only while closed (a failed trial ignored)": (
        "state 'open' after a failed trial"
    ),
    "the streak of failure times kept in a class-level list": (
        "breaker B closed after its own first failure"
    ),
    "cooldown_s or 30 (a cooldown of zero taken as missing)": "with cooldown_s=0",
    "opened_at tested for truth (a clock at 0.0 never opened)": "opened at the clock's 0.0",
    "the breaker opened lazily, in allow() (state 'closed' after the failures)": (
        "open at the 3rd failure in a row"
    ),
    "failures counted in a threading.local (per worker thread)": "one from each of 3 threads",
    "the trial flag kept in a threading.local (a trial per thread)": (
        "True for the first (the one trial)"
    ),
    "the opening time set only at the first opening (opened_at is None)": (
        "opened a second time 600 s after"
    ),
    "record_success() raises while open (a slow call's late success)": (
        "of a slow call that ends while the breaker is open"
    ),
    "the counts kept in a module dict keyed by id(self) (a new breaker inherits a dead one's)": (
        "each built when an open one was dropped"
    ),
    "the trial flag kept on the clock object (shared by the breakers on one clock)": (
        "once B's trial succeeded, A still refuses"
    ),
    "the cooldown doubled from the third opening on (a backoff after two failed trials)": (
        "after 40 failed trials in a row"
    ),
    "failures forgotten after a day without one (a window of a day)": (
        "one failure every 2.592e+06 s"
    ),
    "failures forgotten in allow() an hour after the last one": "open at failure 3",
    "the opening time taken when the failing call was let out (in allow()), not as it failed": (
        "calls let through (allow() True) that each fail"
    ),
    "the opening time kept in a threading.local (the other threads skip the cooldown)": (
        "at once on thread 3"
    ),
    "the opening time kept in a dict keyed by threading.get_ident()": "at once on thread 3",
    "the trial flag kept in a dict keyed by threading.get_ident() (a trial per worker)": (
        "True for the first (the one trial)"
    ),
    "failures counted in a dict keyed by threading.get_ident() (a count per worker)": (
        "one from each of 3 threads"
    ),
    "the state kept in a threading.local (each worker sees 'closed' until it fails)": (
        "one from each of 3 threads"
    ),
    "a millisecond of slack on the cooldown for float error (>= cooldown_s - 1e-3)": (
        "refuses a millisecond before 30 s"
    ),
    "nobody asking for two cooldowns starts a fresh cooldown (a quiet spell keeps it open)": (
        "nobody asking for"
    ),
    "trials only in the 5 s after each multiple of cooldown_s (elapsed % cooldown_s < 5)": (
        "nobody asking for"
    ),
    "the trial only in the cooldown after the cooldown (a later first caller refused for good)": (
        "nobody asking for"
    ),
    "the trial's result taken only from the thread that let it out (threading.get_ident())": (
        "recorded on another thread than the one"
    ),
    "the trial marked in a threading.local (a result a callback thread records is dropped)": (
        "recorded on another thread than the one"
    ),
    "the trial flag cleared only when a trial fails (a successful trial leaves it set)": (
        "the new outage's trial"
    ),
    "record_failure and record_success write the state without the lock (only allow())": (
        "while the trial's record_failure()"
    ),
    "allow() marks the trial taken after releasing the lock": "(self._lock.release())",
    "record_failure() counts the failure before taking the lock": "(self.failures)",
    "record_failure() reads the count under the lock and writes it back after": (
        "(self._lock.release())"
    ),
    "allow() gives up when the lock is busy (blocking=False), refusing calls while closed": (
        "a new breaker (closed): thread A asks allow()"
    ),
    "allow() waits at most 10 ms for the lock, then refuses the call": (
        "a new breaker (closed): thread A asks allow()"
    ),
    "a count of calls in flight holds the trial back (calls let out while closed never report)": (
        "calls let out while closed whose results never come"
    ),
    "a second trial after 100 refusals (a guard against a trial that never reports)": (
        "False for the 12000 callers after it"
    ),
    "the trial given up after a week without its result (a second trial goes out)": (
        "allow() False 36500 days later still"
    ),
    "the failure count capped at 1000": "with threshold=12000",
    "the breaker gives up after 10 failed trials in a row (stays open for good)": (
        "for 1000 trials that all fail"
    ),
    "the breaker locks out after 3 outages (stays open for good, like a tripped fuse)": (
        "25 outages one after the other"
    ),
    "a trial's failure dropped when it took longer than the cooldown (stuck half open)": (
        "a trial let out that takes 45 s and then fails"
    ),
    "the cooldown doubled from the 10th failed trial in a row on (a late backoff)": (
        "after 40 failed trials in a row"
    ),
    "the cooldown doubled from the 3rd outage on (openings counted for good)": (
        "25 outages 600 s apart"
    ),
    "times kept in whole milliseconds (int(clock.now() * 1000))": "a quarter of a millisecond",
    "the opening time rounded to the millisecond (round(now, 3))": "a quarter of a millisecond",
    "the elapsed time rounded to the millisecond (round(now - opened_at, 3))": (
        "a quarter of a millisecond"
    ),
    "the cooldown capped at a day (min(cooldown_s, 86400))": "(30 days)",
    "a second trial after 1000 refusals (a guard against a trial that never reports)": (
        "False for the 12000 callers after it"
    ),
    "the failure count capped at 2000": "with threshold=12000",
    "__slots__, and allow() marks the trial taken after releasing the lock": (
        "(self._lock.release())"
    ),
    "__slots__, and record_failure() counts the failure before taking the lock": (
        "(self.failures)"
    ),
    "a lock made on first use (None in __init__, made by the first call)": (
        "a new breaker whose lock is made on its first call"
    ),
    "a lock made on first use (if not hasattr(self, '_lock'))": (
        "a new breaker whose lock is made on its first call"
    ),
    "a lock made on first use by __getattr__": (
        "a new breaker whose lock is made on its first call"
    ),
    "a lock property made on first use over a class attribute None": (
        "a new breaker whose lock is made on its first call"
    ),
    "a count of trials out lowered by every result (late failures free more trials)": (
        "False for the next two"
    ),
    "a semaphore for the trial released by results while open (late results free more trials)": (
        "False for the next two"
    ),
    "the breaker stays open for good once an outage lasted a day": ("an outage of 180 days"),
    "the cooldown doubled (up to 10 min) once an outage lasted an hour": (
        "a trial that fails every 30 s"
    ),
    "a microsecond of slack on the cooldown (now + 1e-6)": ("microseconds before 30 s"),
    "a state property that half-opens (and frees the trial) without the lock": (
        "thread A reads state and thread B asks allow()"
    ),
    "a breaker with metrics: the trial flag set after the lock, late in a long allow()": (
        "(self._lock.release())"
    ),
    "state in an inner object with its own lock; the trial flag set after the with": (
        "(self._s.lock.release())"
    ),
    "a second trial after 10000 refusals (a guard against a trial that never reports)": (
        "False for the 12000 callers after it"
    ),
    "the breaker locks out after 20 outages (stays open for good)": (
        "25 outages one after the other"
    ),
    "the breaker gives up after 5000 failed trials in a row": ("for 12000 trials that all fail"),
    "the failure count capped at 10000 (min(failures + 1, 10000))": ("with threshold=12000"),
    "the cooldown capped at a year (min(cooldown_s, 365 days))": ("(3650 days)"),
    "the cooldown doubled from the 20th outage on": ("25 outages 600 s apart"),
    "the trial given up after two years without its result": (
        "allow() False 36500 days later still"
    ),
    "record_failure() opens under the lock, then sets the opening time under it again": (
        "its trial fails: thread B asks allow() right after"
    ),
    "record_failure() stamps the opening time in a helper that takes the lock again": (
        "its trial fails: thread B asks allow() right after"
    ),
    "a failed trial's new cooldown counted from the last call refused during it": (
        "another caller refused halfway through it"
    ),
    "record_failure() reads the clock before taking the lock": (
        "right after A reads the clock, 40 s pass and thread B records a failure"
    ),
    "a count of trials out lowered by every result, successes while closed too": (
        "calls' record_success() while closed, then 3 failures (open)"
    ),
    "a failed trial's record_failure() reads the clock before taking the lock": (
        "the trial (thread A) fails and, right after A reads the clock"
    ),
    "a failure while open restamps the opening time without the lock": (
        "opened by two failures: thread A records a third and, right after A reads"
    ),
    "closed lets at most 50 calls out at once (a bulkhead cap)": (
        "calls while closed, none of them back yet"
    ),
    "__init__(self, clock, threshold=5, cooldown_s=30.0): Breaker(3, 30.0, clock) misread": (
        "Breaker(2, 7.75, clock): closed after one failure and open after two"
    ),
    "__init__(self, cooldown_s, threshold, clock): positional threshold and cooldown swapped": (
        "Breaker(2, 7.75, clock): closed after one failure and open after two"
    ),
    "record_success() resets by calling self.__init__() (a new lock while one is waited on)": (
        "the lock on the breaker stays the same object"
    ),
    "a new lock made at each opening (a waiter on the old one runs beside the new one's)": (
        "the lock on the breaker stays the same object"
    ),
    "a _reset() helper that closes and makes a fresh lock, called by a trial's success": (
        "the lock on the breaker stays the same object"
    ),
    "a @dataclass with clock as its first field (Breaker(3, 30.0, clock) misread)": (
        "Breaker(2, 7.75, clock): closed after one failure and open after two"
    ),
    "a failed trial's new cooldown capped at 10 minutes (a trial every 600 s, not cooldown_s)": (
        "after a failed trial"
    ),
    "a failed trial's new cooldown capped at a year (min(cooldown_s, 365 days))": (
        "after a failed trial"
    ),
    "a failed trial's new opening time rounded to the millisecond (round(now, 3))": (
        "a trial failed"
    ),
    "the cooldown kept in whole milliseconds (int(cooldown_s * 1000) / 1000)": (
        "(62.5 ms): allow() False a quarter"
    ),
    "the cooldown rounded to the hundredth of a second in __init__ (round(cooldown_s, 2))": (
        "(62.5 ms): allow() False a quarter"
    ),
    "a late success while open starts the cooldown again (opened_at = now)": (
        "30 s after the opening) allow() True"
    ),
}


test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS)


#: Right solutions written otherwise, each with a check that once took (or might take) its
#: points.
#: A right breaker in ``__slots__``, its lock name-mangled (``self.__lock``): the step races
#: once raised on it (no ``vars()``) and took two checks' points.
SLOTTED_RIGHT = """
        import threading

        class Breaker:
            __slots__ = ("threshold", "cooldown_s", "clock", "state", "failures", "opened_at",
                         "trial_out", "__lock")

            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at = "closed", 0, 0.0
                self.trial_out = False
                self.__lock = threading.Lock()

            def allow(self):
                with self.__lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self.__lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self.__lock:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
"""

RIGHT: list[tuple[str, str, str]] = [
    (
        "a failure while open leaves the opening time alone (no restarted cooldown)",
        "failure_time_read_once_the_lock_is_held",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "open":
                        return
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "the clock read before the lock is taken (the state read and changed under it)",
        "one_trial_when_two_threads_ask_at_once",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                now = self.clock.now()
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if now < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
    """,
    ),
    (
        "the states as a StrEnum (State.CLOSED == 'closed')",
        "starts_closed",
        """
        import threading
        from enum import StrEnum
        class State(StrEnum):
            CLOSED = "closed"
            OPEN = "open"
            HALF_OPEN = "half_open"

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self._lock = threading.Lock()  # one breaker, shared by worker threads
                self.state = State.CLOSED
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                with self._lock:
                    return self._allow()

            def _allow(self):
                if self.state == State.CLOSED:
                    return True
                if self.state == State.OPEN:
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = State.HALF_OPEN, False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                with self._lock:
                    self._record_failure()

            def _record_failure(self):
                self.failures += 1
                if self.state == State.HALF_OPEN or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = State.OPEN, self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self._record_success()

            def _record_success(self):
                self.failures = 0
                self.state, self.trial_out = State.CLOSED, False
    """,
    ),
    (
        "the states as a (str, Enum)",
        "a_new_breaker_starts_afresh",
        """
        import threading
        import enum
        class State(str, enum.Enum):
            CLOSED = "closed"
            OPEN = "open"
            HALF_OPEN = "half_open"

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self._lock = threading.Lock()  # one breaker, shared by worker threads
                self.state = State.CLOSED
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                with self._lock:
                    return self._allow()

            def _allow(self):
                if self.state == State.CLOSED:
                    return True
                if self.state == State.OPEN:
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = State.HALF_OPEN, False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                with self._lock:
                    self._record_failure()

            def _record_failure(self):
                self.failures += 1
                if self.state == State.HALF_OPEN or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = State.OPEN, self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self._record_success()

            def _record_success(self):
                self.failures = 0
                self.state, self.trial_out = State.CLOSED, False
    """,
    ),
    (
        "a state property that reads half_open from the clock (pybreaker's way)",
        "half_open_allows_one_trial",
        """
        import threading
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self._lock = threading.Lock()  # one breaker, shared by worker threads
                self._state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            @property
            def state(self):
                if self._state == "open" and self.clock.now() >= self.opened_at + self.cooldown_s:
                    return "half_open"
                return self._state

            def allow(self):
                with self._lock:
                    return self._allow()

            def _allow(self):
                if self._state == "closed":
                    return True
                if self._state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self._state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                with self._lock:
                    self._record_failure()

            def _record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self._state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self._record_success()

            def _record_success(self):
                self.failures = 0
                self._state, self.trial_out = "closed", False
    """,
    ),
    (
        "a late failure while open ignored (the cooldown left as it was)",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        import threading
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self._lock = threading.Lock()  # one breaker, shared by worker threads
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                with self._lock:
                    return self._allow()

            def _allow(self):
                if self.state == "closed":
                    return True
                if self.state == "open":
                    if self.clock.now() < self.opened_at + self.cooldown_s:
                        return False
                    self.state, self.trial_out = "half_open", False
                if self.trial_out:
                    return False
                self.trial_out = True
                return True

            def record_failure(self):
                with self._lock:
                    self._record_failure()

            def _record_failure(self):
                if self.state == "open":
                    return  # a late failure: the breaker is already open
                self.failures += 1
                if self.state == "half_open" or self.failures >= self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self._record_success()

            def _record_success(self):
                self.failures = 0
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "every method under an RLock kept on self (callers on several threads)",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading

        _Reference = Breaker

        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self._lock = threading.RLock()

            def allow(self):
                with self._lock:
                    return super().allow()

            def record_failure(self):
                with self._lock:
                    super().record_failure()

            def record_success(self):
                with self._lock:
                    super().record_success()
    """,
    ),
    (
        "the failure count kept in a WeakKeyDictionary keyed by the breaker (it dies with it)",
        "a_new_breaker_starts_afresh",
        """
        import weakref

        _FAILURES = weakref.WeakKeyDictionary()

        _Reference = Breaker

        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                _FAILURES[self] = 0

            def record_failure(self):
                with self._lock:
                    _FAILURES[self] += 1
                    if self.state == "half_open" or _FAILURES[self] >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()
                        self.trial_out = False

            def record_success(self):
                with self._lock:
                    _FAILURES[self] = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "the opening kept as the time the trial may go out (now + cooldown_s)",
        "cooldown_is_the_one_given",
        """
        import threading

        class Breaker:
            CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

            def __init__(self, threshold, cooldown_s, clock):
                self._threshold = threshold
                self._cooldown = cooldown_s
                self._clock = clock
                self._state = self.CLOSED
                self._streak = 0
                self._retry_at = None   # when the trial may go out
                self._trial_in_flight = False
                self._guard = threading.Lock()

            @property
            def state(self):
                return self._state

            def allow(self):
                with self._guard:
                    if self._state == self.OPEN:
                        if self._clock.now() < self._retry_at:
                            return False
                        self._state = self.HALF_OPEN
                        self._trial_in_flight = False
                    if self._state == self.HALF_OPEN:
                        if self._trial_in_flight:
                            return False
                        self._trial_in_flight = True
                    return True

            def record_failure(self):
                with self._guard:
                    self._streak += 1
                    if self._state == self.HALF_OPEN or (
                        self._state == self.CLOSED and self._streak >= self._threshold
                    ):
                        self._state = self.OPEN
                        self._retry_at = self._clock.now() + self._cooldown
                        self._trial_in_flight = False

            def record_success(self):
                with self._guard:
                    self._streak = 0
                    if self._state == self.HALF_OPEN:
                        self._state = self.CLOSED
    """,
    ),
    (
        "a lock-free fast path while closed, a plain Enum of states and a count of trials",
        "one_trial_when_two_threads_ask_at_once",
        """
        import enum
        import threading

        class State(enum.Enum):
            CLOSED = "closed"
            OPEN = "open"
            HALF_OPEN = "half_open"

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = State.CLOSED
                self.failures = 0
                self.opened_at = 0.0
                self.trials_out = 0
                self._lock = threading.Lock()

            def allow(self):
                if self.state is State.CLOSED:   # the common case needs no lock
                    return True
                with self._lock:
                    if self.state is State.CLOSED:
                        return True
                    if self.state is State.OPEN:
                        if self.clock.now() - self.opened_at < self.cooldown_s:
                            return False
                        self.state = State.HALF_OPEN
                        self.trials_out = 0
                    if self.trials_out >= 1:
                        return False
                    self.trials_out += 1
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state is State.HALF_OPEN or (
                        self.state is State.CLOSED and self.failures >= self.threshold
                    ):
                        self.state = State.OPEN
                        self.opened_at = self.clock.now()
                        self.trials_out = 0

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    if self.state is State.HALF_OPEN:
                        self.state = State.CLOSED
                        self.trials_out = 0
    """,
    ),
    (
        "a dataclass with its lock from field(default_factory=threading.Lock)",
        "breakers_keep_their_own_times",
        """
        import threading
        from dataclasses import dataclass, field
        from typing import Any

        @dataclass
        class Breaker:
            threshold: int
            cooldown_s: float
            clock: Any
            state: str = "closed"
            failures: int = 0
            opened_at: float = 0.0
            trial_out: bool = False
            _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

            def allow(self) -> bool:
                with self._lock:
                    now = self.clock.now()
                    if self.state == "open" and now >= self.opened_at + self.cooldown_s:
                        self.state = "half_open"
                        self.trial_out = False
                    if self.state == "closed":
                        return True
                    if self.state == "half_open" and not self.trial_out:
                        self.trial_out = True
                        return True
                    return False

            def record_failure(self) -> None:
                with self._lock:
                    if self.state == "half_open":
                        self._open()
                        return
                    self.failures += 1
                    if self.state == "closed" and self.failures >= self.threshold:
                        self._open()

            def _open(self):
                self.state = "open"
                self.opened_at = self.clock.now()
                self.trial_out = False

            def record_success(self) -> None:
                with self._lock:
                    self.failures = 0
                    if self.state == "half_open":
                        self.state = "closed"
                        self.trial_out = False
    """,
    ),
    (
        "the failures in a row as a list of their times, in __slots__",
        "no_cap_on_the_threshold",
        """
        import threading

        class Breaker:
            __slots__ = ("threshold", "cooldown_s", "clock", "state", "_failed_at", "_opened",
                         "_trial", "_mutex")

            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = int(threshold)
                self.cooldown_s = float(cooldown_s)
                self.clock = clock
                self.state = "closed"
                self._failed_at = []  # times of the failures in a row
                self._opened = 0.0
                self._trial = False
                self._mutex = threading.Lock()

            def allow(self):
                self._mutex.acquire()
                try:
                    if self.state == "closed":
                        return True
                    now = self.clock.now()
                    if self.state == "open" and now - self._opened >= self.cooldown_s:
                        self.state = "half_open"
                        self._trial = False
                    if self.state == "half_open" and not self._trial:
                        self._trial = True
                        return True
                    return False
                finally:
                    self._mutex.release()

            def record_failure(self):
                with self._mutex:
                    now = self.clock.now()
                    if self.state == "half_open":
                        self._failed_at = [now]
                        self.state, self._opened, self._trial = "open", now, False
                    elif self.state == "closed":
                        self._failed_at.append(now)
                        if len(self._failed_at) >= self.threshold:
                            self.state, self._opened = "open", now
                            self._failed_at.clear()

            def record_success(self):
                with self._mutex:
                    self._failed_at.clear()
                    if self.state == "half_open":
                        self.state = "closed"
                    self._trial = False
    """,
    ),
    # Round 14: locks other than the reference's: one lock for every breaker of the
    # module, a reentrant one taken again by a helper, a Condition. A harness that runs a
    # second caller in the same thread while the first holds the lock deadlocks them.
    (
        "one module-level threading.Lock for every breaker",
        "one_trial_when_two_threads_ask_at_once",
        """
        import threading
        _LOCK = threading.Lock()

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False

            def allow(self):
                with _LOCK:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with _LOCK:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with _LOCK:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "an RLock per breaker, taken again by a helper that opens it",
        "callers_on_several_threads_share_the_breaker",
        """
        import threading

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False
                self._lock = threading.RLock()

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self._open()

            def _open(self):
                with self._lock:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "a threading.Condition per breaker",
        "one_trial_when_two_threads_ask_at_once",
        """
        import threading

        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold = threshold
                self.cooldown_s = cooldown_s
                self.clock = clock
                self.state = "closed"
                self.failures = 0
                self.opened_at = 0.0
                self.trial_out = False
                self._cond = threading.Condition()

            def allow(self):
                with self._cond:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._cond:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self._open()

            def _open(self):
                with self._cond:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self._cond:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "default settings as class attributes, each breaker's own set on self",
        "breakers_keep_their_own_times",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            threshold = 5
            cooldown_s = 60.0

            def __init__(self, threshold=None, cooldown_s=None, clock=None):
                super().__init__(self.threshold, self.cooldown_s, clock)
                if threshold is not None:
                    self.threshold = threshold
                if cooldown_s is not None:
                    self.cooldown_s = cooldown_s
    """,
    ),
    (
        "__slots__ with a name-mangled lock (self.__lock), the step races' breaker",
        "one_trial_whatever_step_the_other_asks_at",
        SLOTTED_RIGHT,
    ),
    (
        "__slots__ with a name-mangled lock (self.__lock), two failures at once",
        "failures_from_two_threads_both_count",
        SLOTTED_RIGHT,
    ),
    (
        "a late success while open leaves the breaker open, under the lock",
        "a_success_and_a_failure_at_once_both_count",
        """
        _Reference = Breaker

        class Breaker(_Reference):
            def record_success(self):
                with self._lock:
                    self.failures = 0
                    if self.state != "open":
                        self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "the failure times kept as floats, opened_at the latest of them (max)",
        "cooldown_counts_from_the_opening",
        """
        _Reference = Breaker

        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self.times = []

            def record_failure(self):
                with self._lock:
                    self.times.append(self.clock.now())
                    self.failures = len(self.times)
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", max(self.times), False

            def record_success(self):
                with self._lock:
                    self.times, self.failures = [], 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "lazy lock via __dict__.setdefault (atomic)",
        "the_lock_is_made_before_the_first_call",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
            @property
            def _lock(self):
                return self.__dict__.setdefault("_the_lock", threading.Lock())
    """,
    ),
    (
        "lazy lock, double-checked under a module lock",
        "the_lock_is_made_before_the_first_call",
        """
        import threading
        _MAKE = threading.Lock()
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
                self._mutex = None
            @property
            def _lock(self):
                if self._mutex is None:
                    with _MAKE:
                        if self._mutex is None:
                            self._mutex = threading.Lock()
                return self._mutex
    """,
    ),
    (
        "the state in a helper object holding its own lock (self._s.lock)",
        "one_trial_whatever_step_the_other_asks_at",
        """
        import threading
        class _Inner:
            def __init__(self):
                self.lock = threading.Lock()
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self._s = _Inner()
            @property
            def state(self):
                return self._s.state
            def allow(self):
                s = self._s
                with s.lock:
                    if s.state == "closed":
                        return True
                    if s.state == "open":
                        if self.clock.now() < s.opened_at + self.cooldown_s:
                            return False
                        s.state, s.trial_out = "half_open", False
                    if s.trial_out:
                        return False
                    s.trial_out = True
                    return True
            def record_failure(self):
                s = self._s
                with s.lock:
                    s.failures += 1
                    if s.state == "half_open" or s.failures >= self.threshold:
                        s.state, s.opened_at, s.trial_out = "open", self.clock.now(), False
            def record_success(self):
                s = self._s
                with s.lock:
                    s.failures = 0
                    s.state, s.trial_out = "closed", False
    """,
    ),
    (
        "a state property that half-opens under the lock (an RLock, allow() reads it)",
        "reading_the_state_frees_no_second_trial",
        """
        import threading
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self._state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
                self._lock = threading.RLock()
            @property
            def state(self):
                with self._lock:
                    over = self.clock.now() >= self.opened_at + self.cooldown_s
                    if self._state == "open" and over:
                        self._state, self.trial_out = "half_open", False
                    return self._state
            def allow(self):
                with self._lock:
                    state = self.state
                    if state == "closed":
                        return True
                    if state == "open" or self.trial_out:
                        return False
                    self.trial_out = True
                    return True
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self._state == "half_open" or self.failures >= self.threshold:
                        self._state, self.opened_at = "open", self.clock.now()
                        self.trial_out = False
            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self._state, self.trial_out = "closed", False
    """,
    ),
    (
        "a breaker keeping metrics, everything under the lock (a long allow())",
        "one_trial_whatever_step_the_other_asks_at",
        """
        import threading
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self.failures, self.opened_at, self.trial_out = "closed", 0, 0.0, False
                self.calls = self.refused = self.allowed = self.trials = 0
                self.last_call = self.last_refusal = self.last_trial = None
                self._lock = threading.Lock()
            def allow(self):
                with self._lock:
                    now = self.clock.now()
                    self.calls += 1
                    self.last_call = now
                    if self.state == "closed":
                        self.allowed += 1
                        return True
                    if self.state == "open":
                        if now < self.opened_at + self.cooldown_s:
                            self.refused += 1
                            self.last_refusal = now
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        self.refused += 1
                        self.last_refusal = now
                        return False
                    self.trials += 1
                    self.allowed += 1
                    self.last_trial = now
                    self.trial_out = True
                    return True
            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "a lock-free refusal while open, the cooldown checked again under the lock",
        "one_trial_when_two_threads_ask_at_once",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                # Quick refusal without the lock; anything that may let a call out is
                # decided again under it.
                if self.state == "open" and self.clock.now() < self.opened_at + self.cooldown_s:
                    return False
                return super().allow()

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.opened_at = self.clock.now()
                        self.trial_out = False
                        self.state = "open"
    """,
    ),
    (
        "keyword-only arguments (def __init__(self, *, threshold, cooldown_s, clock))",
        "arguments_in_the_order_given",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def __init__(self, *, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
    """,
    ),
    (
        "one lock on the class for every breaker (a class attribute, no lock in __init__)",
        "one_trial_when_two_threads_ask_at_once",
        """
        import threading
        _Reference = Breaker
        class Breaker(_Reference):
            _lock = threading.Lock()

            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                del self._lock
    """,
    ),
    (
        "a @dataclass with the contract's fields in order, the lock a default_factory",
        "arguments_in_the_order_given",
        """
        import threading
        from dataclasses import dataclass, field

        @dataclass
        class Breaker:
            threshold: int
            cooldown_s: float
            clock: object
            state: str = "closed"
            failures: int = 0
            opened_at: float = 0.0
            trial_out: bool = False
            _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "one lock for every breaker, made once in the class body (not in __init__)",
        "making_a_breaker_swaps_no_lock",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            _lock = threading.Lock()

            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                del self._lock
    """,
    ),
    (
        "the cooldown compared as elapsed time (now - opened_at < cooldown_s)",
        "no_jitter_on_the_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() - self.opened_at < self.cooldown_s:
                            return False
                        self.state, self.trial_out = "half_open", False
                    if self.trial_out:
                        return False
                    self.trial_out = True
                    return True
    """,
    ),
    (
        "the trial a threading.Semaphore(1) made at half-opening, taken under the lock",
        "a_late_result_frees_no_second_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):

            def __init__(self, threshold, cooldown_s, clock):
                super().__init__(threshold, cooldown_s, clock)
                self._token = threading.Semaphore(0)

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    if self.state == "open":
                        if self.clock.now() < self.opened_at + self.cooldown_s:
                            return False
                        self.state = "half_open"
                        self._token = threading.Semaphore(1)
                    return self._token.acquire(blocking=False)

            def record_failure(self):
                with self._lock:
                    self.failures += 1
                    if self.state == "half_open" or self.failures >= self.threshold:
                        self.state, self.opened_at = "open", self.clock.now()

            def record_success(self):
                with self._lock:
                    self.failures = 0
                    self.state = "closed"
    """,
    ),
    (
        "allow() as one boolean expression under the lock (let = closed or free half open)",
        "half_open_allows_one_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):

            def allow(self):
                with self._lock:
                    now = self.clock.now()
                    if self.state == "open" and now - self.opened_at >= self.cooldown_s:
                        self.state, self.trial_out = "half_open", False
                    free = self.state == "half_open" and not self.trial_out
                    let = self.state == "closed" or free
                    if let and self.state == "half_open":
                        self.trial_out = True
                    return let
    """,
    ),
    (
        "a match statement over the state, the cooldown's end kept, the trial as an object",
        "cooldown_is_the_one_given",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self.state, self._fails, self._until, self._trial = "closed", 0, None, None
                self._guard = threading.Lock()

            def allow(self):
                with self._guard:
                    match self.state:
                        case "closed":
                            return True
                        case "open" if self.clock.now() >= self._until:
                            self.state, self._trial = "half_open", object()
                            return True
                        case _:
                            return False

            def record_failure(self):
                with self._guard:
                    self._fails += 1
                    match self.state:
                        case "half_open":
                            self._open()
                        case "closed" if self._fails >= self.threshold:
                            self._open()
                        case "open":
                            self._open()

            def _open(self):
                self.state, self._trial = "open", None
                self._until = self.clock.now() + self.cooldown_s

            def record_success(self):
                with self._guard:
                    self._fails, self.state, self._trial = 0, "closed", None
    """,
    ),
    (
        "allow() in two locked blocks, the second deciding again from what it reads",
        "a_trial_failed_meanwhile_frees_no_second_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):

            def allow(self):
                with self._lock:
                    if self.state == "closed":
                        return True
                    over = self.clock.now() >= self.opened_at + self.cooldown_s
                    maybe = self.state == "open" and over
                if not maybe:
                    with self._lock:
                        if self.state == "closed":
                            return True
                        if self.state == "half_open" and not self.trial_out:
                            self.trial_out = True
                            return True
                        return False
                return _Reference.allow(self)
    """,
    ),
    (
        "the state as one tuple replaced under the lock, state a read-only property",
        "one_trial_whatever_step_the_other_asks_at",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
                self._s = ("closed", 0, 0.0, False)  # state, failures, opened_at, trial out
                self._lock = threading.Lock()

            @property
            def state(self):
                return self._s[0]

            def allow(self):
                with self._lock:
                    state, fails, opened, trial = self._s
                    if state == "closed":
                        return True
                    if state == "open" and self.clock.now() - opened >= self.cooldown_s:
                        state, trial = "half_open", False
                    if state == "half_open" and not trial:
                        self._s = (state, fails, opened, True)
                        return True
                    self._s = (state, fails, opened, trial)
                    return False

            def record_failure(self):
                with self._lock:
                    state, fails, opened, trial = self._s
                    fails += 1
                    if state == "half_open" or fails >= self.threshold:
                        self._s = ("open", fails, self.clock.now(), False)
                    else:
                        self._s = (state, fails, opened, trial)

            def record_success(self):
                with self._lock:
                    self._s = ("closed", 0, self._s[2], False)
    """,
    ),
]


test_a_right_solution_written_otherwise_keeps_the_points = right_test("ex07", RIGHT)
