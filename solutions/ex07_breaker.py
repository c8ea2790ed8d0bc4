# %% [markdown]
# # Exercise 7 (extra): a circuit breaker
#
# When the ERP is down, every job that calls it fails after a long timeout, retries,
# and fails again: the workers are busy hammering a service that cannot answer. A
# circuit breaker notices the failures in a row and **opens**: calls are refused at
# once for a cooldown. Then it lets **one** trial call through (**half open**): if it
# works, the breaker **closes**; if not, it opens for another full cooldown.
#
# Write the `Breaker` class. Time comes only from the `clock` you are given
# (`clock.now()`), so the check can move time by 30 seconds in a microsecond.

# %%
import threading

from labkit.clock import FakeClock


# %%
class Breaker:
    """A circuit breaker with three states: ``"closed"``, ``"open"`` and ``"half_open"``.

    - ``Breaker(threshold, cooldown_s, clock)``: starts ``closed``. Each breaker keeps
      its own counts and times (one per dependency: two breakers share nothing).
    - ``allow() -> bool``: may a call go out now? Closed: True. Open: False until
      ``cooldown_s`` seconds have passed since it opened (by ``clock.now()``); then it
      becomes ``half_open`` and returns True for ONE trial call, and False for every
      other caller until that trial's result is recorded.
    - ``record_failure()``: closed: count failures in a row and open (remember
      ``clock.now()``) when the count reaches ``threshold``. Half open: the trial
      failed, open again with a fresh cooldown from now.
    - ``record_success()``: resets the count of failures in a row; half open: close.
    - ``state``: the current state's name.
    - One breaker is shared by every worker thread of a process: ``allow`` and the
      ``record_*`` methods may be called from several threads at once, and two callers
      racing at the end of the cooldown get ONE trial between them (read the clock and
      change the state under a ``threading.Lock`` kept on ``self``).
    """

    def __init__(self, threshold: int, cooldown_s: float, clock) -> None:
        ### BEGIN SOLUTION
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.state = "closed"
        self.failures = 0
        self.opened_at = 0.0
        self.trial_out = False
        self._lock = threading.Lock()
        ### END SOLUTION

    def allow(self) -> bool:
        ### BEGIN SOLUTION
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
        ### END SOLUTION

    def record_failure(self) -> None:
        ### BEGIN SOLUTION
        with self._lock:
            self.failures += 1
            if self.state == "half_open" or self.failures >= self.threshold:
                self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
        ### END SOLUTION

    def record_success(self) -> None:
        ### BEGIN SOLUTION
        with self._lock:
            self.failures = 0
            self.state, self.trial_out = "closed", False
        ### END SOLUTION


# %% [markdown]
# Try it: three failures open it; thirty seconds later one trial goes through.

# %%
def demo(breaker_class=Breaker):
    clock = FakeClock()
    breaker = breaker_class(threshold=3, cooldown_s=30.0, clock=clock)
    for _ in range(3):
        breaker.record_failure()
    clock.advance(30.0)
    return breaker.state, [breaker.allow() for _ in range(3)], breaker.state

# %% [markdown]
# ## Check your work
#
# No check of this exercise is marked *severe* below, but some hidden ones the grader
# runs are: a breaker that stops letting calls out for good (half open, its one trial
# spent, never to send another) leaves the jobs behind it never to run again. Failing a
# severe check caps the exercise's score at half.

# %%
from labkit.grading import check

check("ex07")
