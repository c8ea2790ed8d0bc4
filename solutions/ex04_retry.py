# %% [markdown]
# # Exercise 4: a retry policy
#
# A good retry policy answers two questions after each failure: **should we try
# again?** (did the call reach the server, could it have taken effect, are attempts and
# time left?) and **when?**
# (exponential backoff with full jitter, capped, and never sooner than the server's
# `Retry-After`). A bad one hammers a struggling service in lockstep, retries a bug
# forever, waits for years, or charges a customer twice because a read timed out after
# the charge was made.
#
# Write the three functions. Randomness comes only from the `rng` argument, so a run
# with `random.Random(seed)` replays exactly.

# %%
import random

from labkit.errors import PermanentError, TransientError


# %%
def classify(error: BaseException) -> str:
    """Return ``"never_sent"``, ``"maybe_done"`` or ``"permanent"``, in this order:

    1. ``"maybe_done"`` (the request was sent, the answer was lost: the effect may have
       happened) for an error whose ``ambiguous`` attribute is true, such as labkit's
       ``ResponseLost`` (a ``TransientError`` subclass, so test this first).
    2. ``"never_sent"`` (nothing happened, safe to retry) for labkit's
       ``TransientError`` and its subclasses; ``"permanent"`` for ``PermanentError``.
    3. By the ``status`` attribute, when it is an int: 408, 429 and 503 are
       ``"never_sent"``; every other status from 500 to 599 is ``"maybe_done"``; any
       other status is ``"permanent"``.
    4. ``ConnectionRefusedError`` (nobody listened) is ``"never_sent"``; any other
       ``TimeoutError`` or ``ConnectionError`` (a read timeout, a reset, a broken pipe)
       is ``"maybe_done"``.
    5. Everything else is ``"permanent"``: ``ValueError``, ``KeyError``, unknown errors.
    """
    ### BEGIN SOLUTION
    if getattr(error, "ambiguous", False):
        return "maybe_done"
    if isinstance(error, TransientError):
        return "never_sent"
    if isinstance(error, PermanentError):
        return "permanent"
    status = getattr(error, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        if status in (408, 429, 503):
            return "never_sent"
        return "maybe_done" if 500 <= status <= 599 else "permanent"
    if isinstance(error, ConnectionRefusedError):
        return "never_sent"
    if isinstance(error, (TimeoutError, ConnectionError)):
        return "maybe_done"
    return "permanent"
    ### END SOLUTION


# %%
def backoff(n: int, rng: random.Random, base: float = 1.0, cap: float = 60.0) -> float:
    """Full jitter: ``rng.uniform(0, min(cap, base * 2**n))`` seconds.

    ``n`` counts retries from 0. Cap the ceiling *before* drawing, and compute it so
    that a huge ``n`` (2000) neither overflows nor exceeds ``cap``. Use only ``rng``.
    """
    ### BEGIN SOLUTION
    # 2.0**n is a float up to n = 1023 (a product past the largest float is inf, and
    # min() gives cap); a tiny base still counts up to there, not cut off at 64.
    ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
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
    idempotency_key: str | None = None,
) -> float | None:
    """Seconds to wait before the next attempt, or None to give up.

    ``attempt`` is the number of the run that just failed (1 for the first). Give up
    (None) when the error is permanent, when it is maybe-done and no ``idempotency_key``
    is given (the call may have taken effect: someone checks the destination first),
    when ``attempt >= max_attempts``, or when the retry would start after
    ``started_at + deadline``. Otherwise the delay is
    ``backoff(attempt - 1, rng, base, cap)``, raised to ``error.retry_after`` when the
    error carries a larger one (a 429's Retry-After).
    """
    ### BEGIN SOLUTION
    verdict = classify(error)
    if verdict == "permanent" or attempt >= max_attempts:
        return None
    if verdict == "maybe_done" and idempotency_key is None:
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
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here:
# `gives_up_on_maybe_done_without_a_key` (a retry without a key can repeat a charge
# that already happened), and hidden ones the grader runs.

# %%
from labkit.grading import check

check("ex04")
