# %% [markdown]
# # Exercise 4: a retry policy
#
# A good retry policy answers two questions after each failure: **should we try
# again?** (is the error transient, are attempts and time left?) and **when?**
# (exponential backoff with full jitter, capped, and never sooner than the server's
# `Retry-After`). A bad one hammers a struggling service in lockstep, retries a bug
# forever, or waits for years.
#
# Write the three functions. Randomness comes only from the `rng` argument, so a run
# with `random.Random(seed)` replays exactly.

# %%
import random

from labkit.errors import PermanentError, TransientError


# %%
def classify(error: BaseException) -> str:
    """Return ``"transient"`` or ``"permanent"``.

    Transient (may succeed later): ``TimeoutError``, ``ConnectionError``, labkit's
    ``TransientError``, and any error whose ``status`` attribute is 408, 429 or 500 and
    above. Everything else is permanent: ``PermanentError``, ``ValueError``, ``KeyError``,
    other 4xx (400, 401, 403, 404, 409, 422...) and anything unknown.
    """
    ### BEGIN SOLUTION
    if isinstance(error, (TimeoutError, ConnectionError, TransientError)):
        return "transient"
    if isinstance(error, PermanentError):
        return "permanent"
    status = getattr(error, "status", None)
    if isinstance(status, int) and (status in (408, 429) or status >= 500):
        return "transient"
    return "permanent"
    ### END SOLUTION


# %%
def backoff(n: int, rng: random.Random, base: float = 1.0, cap: float = 60.0) -> float:
    """Full jitter: ``rng.uniform(0, min(cap, base * 2**n))`` seconds.

    ``n`` counts retries from 0. Cap the ceiling *before* drawing, and compute it so
    that a huge ``n`` (2000) neither overflows nor exceeds ``cap``. Use only ``rng``.
    """
    ### BEGIN SOLUTION
    ceiling = cap if n >= 64 else min(cap, base * 2**n)
    return rng.uniform(0, ceiling)
    ### END SOLUTION


# %%
def next_delay(
    error: BaseException,
    attempt: int,
    rng: random.Random,
    *,
    started_at: float,
    now: float,
    deadline: float = 300.0,
    max_attempts: int = 5,
    base: float = 1.0,
    cap: float = 60.0,
) -> float | None:
    """Seconds to wait before the next attempt, or None to give up.

    ``attempt`` is the number of the run that just failed (1 for the first). Give up
    (None) when the error is permanent, when ``attempt >= max_attempts``, or when the
    retry would start after ``started_at + deadline``. Otherwise the delay is
    ``backoff(attempt - 1, rng, base, cap)``, raised to ``error.retry_after`` when the
    error carries a larger one (a 429's Retry-After).
    """
    ### BEGIN SOLUTION
    if classify(error) == "permanent" or attempt >= max_attempts:
        return None
    delay = backoff(attempt - 1, rng, base, cap)
    retry_after = getattr(error, "retry_after", None)
    if isinstance(retry_after, (int, float)) and retry_after > delay:
        delay = float(retry_after)
    if now + delay > started_at + deadline:
        return None
    return delay
    ### END SOLUTION


# %% [markdown]
# ## Check your work
#
# No check of this exercise is marked *severe*: elsewhere, a mistake that loses or
# duplicates an effect, lets two holders run or shows one owner's data to another caps
# the score at half.

# %%
from labkit.grading import check

check("ex04")
