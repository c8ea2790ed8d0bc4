"""Exercise 4's zoo: each plausible wrong solution loses the check named after it.

Exercise 4 is about retries: classify, back off, stop. Each entry overrides one or two
functions of the reference solution with a classic mistake; the check named after its
mistake must catch it, in process for every entry and, for a sample, through ``labkit
grade`` in the sandbox (``zoograding``), saying what ``SAYS`` gives. ``test_zoo.py``
checks the zoo as a whole.
"""

from __future__ import annotations

import pytest
from gradingkit import assert_severe
from zoograding import in_process_test, right_test

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        "ex04",
        "backoff without a cap",
        "backoff_is_capped",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return rng.uniform(0, base * 2.0 ** min(n, 1000))
    """,
    ),
    (
        "ex04",
        "exponential backoff without jitter",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return min(cap, base * 2 ** min(n, 64))
    """,
    ),
    (
        "ex04",
        "the draw rounded to the millisecond (a base under 1 ms always waits 0)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return round(rng.uniform(0, ceiling), 3)
    """,
    ),
    (
        "ex04",
        "jitter from the random module",
        "backoff_uses_the_given_rng",
        """
        import random as _random
        def backoff(n, rng, base=1.0, cap=60.0):
            return _random.uniform(0, min(cap, base * 2 ** min(n, 64)))
    """,
    ),
    (
        "ex04",
        "Retry-After ignored",
        "honours_retry_after",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            return None if now + delay > started_at + deadline else delay
    """,
    ),
    (
        "ex04",
        "every error retried",
        "gives_up_on_permanent",
        """
        def classify(error):
            return "never_sent"
    """,
    ),
    (
        "ex04",
        "no deadline",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            return max(backoff(attempt - 1, rng, base, cap), getattr(error, "retry_after", 0) or 0)
    """,
    ),
    (
        "ex04",
        "'<' where the boundary needs '<=' (status > 500)",
        "classify_every_status",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if isinstance(status, int):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 < status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "classify by the exact class, not isinstance",
        "classify_never_sent",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if type(error) in (TransientError, ConnectionRefusedError):
                return "never_sent"
            if type(error) in (TimeoutError, ConnectionError):
                return "maybe_done"
            status = getattr(error, "status", None)
            if isinstance(status, int):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a read timeout retried as if it never reached the server",
        "gives_up_on_maybe_done_without_a_key",
        """
        _reference_classify = classify
        def classify(error):
            if isinstance(error, TimeoutError):
                return "never_sent"
            return _reference_classify(error)
    """,
    ),
    (
        "ex04",
        "TransientError tested before the ambiguous flag (ResponseLost never sent)",
        "classify_maybe_done",
        """
        _reference_classify = classify
        def classify(error):
            if isinstance(error, TransientError):
                return "never_sent"
            return _reference_classify(error)
    """,
    ),
    (
        "ex04",
        "every 5xx called never sent (500 and 502 retried like 503)",
        "classify_every_status",
        """
        _reference_classify = classify
        def classify(error):
            status = getattr(error, "status", None)
            if isinstance(status, int) and 500 <= status <= 599:
                return "never_sent"
            return _reference_classify(error)
    """,
    ),
    (
        "ex04",
        "every connection error called maybe done, a refused one too",
        "classify_never_sent",
        """
        _reference_classify = classify
        def classify(error):
            if isinstance(error, ConnectionError):
                return "maybe_done"
            return _reference_classify(error)
    """,
    ),
    (
        "ex04",
        "next_delay retries a maybe-done failure without a key",
        "gives_up_on_maybe_done_without_a_key",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, *, idempotency_key=None, **kwargs):
            return _reference_next_delay(error, attempt, rng, idempotency_key="k", **kwargs)
    """,
    ),
    (
        "ex04",
        "next_delay never retries a maybe-done failure, key or not",
        "retries_maybe_done_under_a_key",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, *, idempotency_key=None, **kwargs):
            return _reference_next_delay(error, attempt, rng, **kwargs)
    """,
    ),
    (
        "ex04",
        "jitter seeded from hash(key) under an idempotency key (one delay per key)",
        "retries_maybe_done_under_a_key",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, *, idempotency_key=None, **kwargs):
            if idempotency_key is not None:
                rng = random.Random(hash(idempotency_key) ^ attempt)  # spread per key
            return _reference_next_delay(
                error, attempt, rng, idempotency_key=idempotency_key, **kwargs
            )
    """,
    ),
    (
        "ex04",
        "backoff that overflows for a huge n",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return rng.uniform(0, min(cap, base * 2**n))
    """,
    ),
    (
        "ex04",
        "backoff with the base fixed at 1 s",
        "backoff_bounds_hold_for_any_base_and_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return rng.uniform(0, cap if n >= 64 else min(cap, 2**n))
    """,
    ),
    (
        "ex04",
        "Retry-After honoured only when it is a float",
        "honours_retry_after",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, **kwargs):
            if not isinstance(getattr(error, "retry_after", None), float):
                error.retry_after = None
            return _reference_next_delay(error, attempt, rng, **kwargs)
    """,
    ),
    (
        "ex04",
        "one retry too many (attempt > max_attempts)",
        "gives_up_after_max_attempts",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, *, max_attempts=5, **kwargs):
            return _reference_next_delay(error, attempt - 1, rng, max_attempts=max_attempts,
                                         **kwargs)
    """,
    ),
    (
        "ex04",
        "a retry exactly on the deadline refused (>=)",
        "respects_deadline",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, **kwargs):
            delay = _reference_next_delay(error, attempt, rng, started_at=started_at, now=now,
                                          deadline=deadline, **kwargs)
            if delay is not None and now + delay >= started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "cap applied after the draw (delays pile at the cap)",
        "backoff_does_not_pile_at_the_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = base * 2 ** min(n, 64)
            return min(cap, rng.uniform(0, ceiling))
    """,
    ),
    (
        "ex04",
        "next_delay draws from its own rng, not the one given",
        "next_delay_is_the_backoff",
        """
        _own = random.Random()
        def next_delay(
            error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5, base=1.0,
            cap=60.0,
        ):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, _own, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "next_delay calls backoff without its base and cap",
        "next_delay_is_the_backoff",
        """
        def next_delay(
            error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5, base=1.0,
            cap=60.0,
        ):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, rng)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "next_delay with n = attempt - 2 after the first retry",
        "next_delay_is_the_backoff",
        """
        def next_delay(
            error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5, base=1.0,
            cap=60.0,
        ):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            delay = backoff(max(0, attempt - 2), rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "next_delay rounds the delay to whole seconds",
        "next_delay_is_the_backoff",
        """
        def next_delay(
            error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5, base=1.0,
            cap=60.0,
        ):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            delay = round(backoff(attempt - 1, rng, base, cap))
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "Retry-After cut down to the cap",
        "honours_retry_after",
        """
        def next_delay(
            error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5, base=1.0,
            cap=60.0,
        ):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = min(cap, float(retry_after))
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "deadline checked before Retry-After raises the delay",
        "respects_deadline",
        """
        def next_delay(
            error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5, base=1.0,
            cap=60.0,
        ):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            if now + delay > started_at + deadline:
                return None
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            return delay
    """,
    ),
    (
        "ex04",
        "huge-n guard with a fixed threshold (n > 10 means the cap)",
        "backoff_bounds_hold_for_any_base_and_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n > 10 else min(cap, base * 2**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "Retry-After replaces the backoff, a smaller one too",
        "honours_retry_after",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            retry_after = getattr(error, "retry_after", None)
            if retry_after is not None:
                delay = float(retry_after)
            else:
                delay = backoff(attempt - 1, rng, base, cap)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "every status from 500 up called maybe done (600 and 999 too)",
        "classify_every_status",
        """
        _ref_classify = classify
        def classify(error):
            status = getattr(error, "status", None)
            if (isinstance(status, int) and status >= 600 and not getattr(error, "ambiguous", False)
                    and not isinstance(error, (TransientError, PermanentError))):
                return "maybe_done"
            return _ref_classify(error)
    """,
    ),
    (
        "ex04",
        "a Retry-After obeyed before the verdict (a 500 retried without a key)",
        "gives_up_on_maybe_done_without_a_key",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and attempt < max_attempts:
                delay = max(float(retry_after), backoff(attempt - 1, rng, base, cap))
                return None if now + delay > started_at + deadline else delay
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a maybe-done failure refused only after the first attempt",
        "gives_up_on_maybe_done_without_a_key",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None and attempt == 1:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a permanent error retried when it carries a Retry-After",
        "gives_up_on_permanent",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            retry_after = getattr(error, "retry_after", None)
            if attempt >= max_attempts:
                return None
            if not isinstance(retry_after, (int, float)):
                if verdict == "permanent":
                    return None
                if verdict == "maybe_done" and idempotency_key is None:
                    return None
            delay = backoff(attempt - 1, rng, base, cap)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the deadline fixed at 300 s, not the one given",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + 300.0:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After honoured past max_attempts (a 429 retried forever)",
        "gives_up_after_max_attempts",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent":
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            retry_after = getattr(error, "retry_after", None)
            if verdict == "never_sent" and isinstance(retry_after, (int, float)):
                delay = max(float(retry_after), backoff(attempt - 1, rng, base, cap))
                return None if now + delay > started_at + deadline else delay
            if attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a lost answer recognised by its class (ResponseLost), not by the ambiguous flag",
        "gives_up_on_maybe_done_without_a_key",
        """
        from labkit.errors import ResponseLost as _ResponseLost
        def classify(error):
            if isinstance(error, _ResponseLost):
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
    """,
    ),
    (
        "ex04",
        "the ambiguous flag read only on labkit's TransientError family",
        "gives_up_on_maybe_done_without_a_key",
        """
        def classify(error):
            if isinstance(error, TransientError):
                return "maybe_done" if getattr(error, "ambiguous", False) else "never_sent"
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
    """,
    ),
    (
        "ex04",
        "the status read before the PermanentError test (a PermanentError with 503 retried)",
        "classify_permanent",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, PermanentError):
                return "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a huge n answered with the cap itself, no draw (late retries in lockstep)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            if n >= 64:
                return cap
            return rng.uniform(0, min(cap, base * 2**n))
    """,
    ),
    (
        "ex04",
        "Retry-After honoured only for never-sent errors (a 502 under a key comes back early)",
        "honours_retry_after",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            never_sent = verdict == "never_sent"
            if never_sent and isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the connection error's class tested before the status",
        "status_comes_before_the_connection_class",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "equal jitter (the upper half only) from the 7th retry on",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 64 else min(cap, base * 2**n)
            low = ceiling / 2 if n >= 6 else 0.0
            return rng.uniform(low, ceiling)
    """,
    ),
    (
        "ex04",
        "the overflow guard is n > 1024 (backoff(1024) overflows)",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n > 1024 else min(cap, base * 2**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "Retry-After counted from started_at (the time spent taken off it)",
        "honours_retry_after",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                remaining = float(retry_after) - (now - started_at)
                if remaining > delay:
                    delay = remaining
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a maybe-done failure under a key retried before the max_attempts and deadline tests",
        "gives_up_after_max_attempts",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent":
                return None
            if verdict == "maybe_done":
                if idempotency_key is None:
                    return None
                delay = backoff(attempt - 1, rng, base, cap)
                retry_after = getattr(error, "retry_after", None)
                if isinstance(retry_after, (int, float)) and retry_after > delay:
                    delay = float(retry_after)
                return delay
            if attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the first retry waits exactly base, no jitter",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            if n == 0:
                return min(base, cap)
            ceiling = cap if n >= 64 else min(cap, base * 2**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "classify caches verdicts by id(error) (a new error inherits a freed one's verdict)",
        "gives_up_on_maybe_done_without_a_key",
        """
        _VERDICTS = {}


        def classify(error):
            cached = _VERDICTS.get(id(error))
            if cached is not None:
                return cached
            if getattr(error, "ambiguous", False):
                verdict = "maybe_done"
            elif isinstance(error, TransientError):
                verdict = "never_sent"
            elif isinstance(error, PermanentError):
                verdict = "permanent"
            else:
                status = getattr(error, "status", None)
                if isinstance(status, int) and not isinstance(status, bool):
                    if status in (408, 429, 503):
                        verdict = "never_sent"
                    else:
                        verdict = "maybe_done" if 500 <= status <= 599 else "permanent"
                elif isinstance(error, ConnectionRefusedError):
                    verdict = "never_sent"
                elif isinstance(error, (TimeoutError, ConnectionError)):
                    verdict = "maybe_done"
                else:
                    verdict = "permanent"
            _VERDICTS[id(error)] = verdict
            return verdict
    """,
    ),
    (
        "ex04",
        "the deadline compared as utcfromtimestamp() against a local fromtimestamp()",
        "respects_deadline",
        """
        import datetime as _dt


        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            ends = _dt.datetime.utcfromtimestamp(started_at + deadline)
            if _dt.datetime.fromtimestamp(now + delay) > ends:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After above 1000 taken for milliseconds",
        "honours_retry_after",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                if retry_after > 1000:
                    retry_after = retry_after / 1000
                if retry_after > delay:
                    delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the ambiguous flag tested with `is True` (a true value that is not True missed)",
        "gives_up_on_maybe_done_without_a_key",
        """
        def classify(error):
            if getattr(error, "ambiguous", False) is True:
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
    """,
    ),
    (
        "ex04",
        "Retry-After limited to an hour (a day of maintenance answered after an hour)",
        "honours_retry_after",
        """
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
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(min(retry_after, 3600))  # never trust a server beyond an hour
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the status tested with type(status) is int (an http.HTTPStatus member missed)",
        "classify_every_status",
        """
        def classify(error: BaseException) -> str:
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if type(status) is int:  # True is not a status
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "maybe done only for the connection errors listed by name (ConnectionAbortedError "
        "permanent)",
        "classify_maybe_done",
        """
        def classify(error: BaseException) -> str:
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
            listed = (TimeoutError, ConnectionResetError, BrokenPipeError)
            if isinstance(error, listed) or type(error) is ConnectionError:
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "next_delay computes the ceiling again (2.0 ** (attempt - 1) overflows)",
        "next_delay_is_the_backoff",
        """
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
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = rng.uniform(0, min(cap, base * 2.0 ** (attempt - 1)))
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "Retry-After honoured only on a 429",
        "honours_retry_after",
        """
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
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            is_429 = getattr(error, 'status', None) == 429
            if is_429 and isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a retry past the deadline moved onto the deadline instead of given up",
        "respects_deadline",
        """
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
                delay = started_at + deadline - now  # the last chance, right at the deadline
                if delay < 0:
                    return None
            return delay
    """,
    ),
    (
        "ex04",
        "Retry-After added to the backoff, not a floor under it",
        "honours_retry_after",
        """
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
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > 0:
                delay = retry_after + delay  # Retry-After, then the jitter on top
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "every OSError called maybe done (PermissionError, FileNotFoundError retried)",
        "classify_permanent",
        """
        def classify(error: BaseException) -> str:
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
            if isinstance(error, (TimeoutError, ConnectionError, OSError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "the ambiguous flag tested with hasattr (TransientError's ambiguous = False counts)",
        "classify_never_sent",
        """
        def classify(error: BaseException) -> str:
            if hasattr(error, "ambiguous"):
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
    """,
    ),
    (
        "ex04",
        "decorrelated jitter from a module-level last delay",
        "backoff_has_full_jitter",
        """
        _LAST = [1.0]


        def backoff(n, rng, base=1.0, cap=60.0):
            # decorrelated jitter: each delay grows from the last one
            delay = min(cap, rng.uniform(base, _LAST[0] * 3))
            _LAST[0] = delay
            return delay
    """,
    ),
    (
        "ex04",
        "the deadline taken as an instant (now + delay > deadline), not a duration from started_at",
        "retries_happen_at_real_times",
        """
        _ref_next_delay = next_delay


        def next_delay(
            error,
            attempt,
            rng,
            *,
            started_at,
            now,
            deadline=300.0,
            max_attempts=5,
            base=1.0,
            cap=60.0,
            idempotency_key=None,
        ):
            d = _ref_next_delay(
                error,
                attempt,
                rng,
                started_at=started_at,
                now=now,
                deadline=1e18,
                max_attempts=max_attempts,
                base=base,
                cap=cap,
                idempotency_key=idempotency_key,
            )
            if d is None or now + d > deadline:
                return None
            return d
    """,
    ),
    (
        "ex04",
        "whole-second jitter (rng.randint(0, int(ceiling)))",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 64 else min(cap, base * 2**n)
            return float(rng.randint(0, int(ceiling)))
    """,
    ),
    (
        "ex04",
        "jitter drawn from [base, ceiling] (never below base)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 64 else min(cap, base * 2**n)
            return rng.uniform(base, ceiling) if ceiling > base else ceiling
    """,
    ),
    (
        "ex04",
        "huge-n guard at n > 30 (a tiny base still below the cap there)",
        "backoff_bounds_hold_for_any_base_and_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n > 30 else min(cap, base * 2**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "backoff memoised with functools.lru_cache (the same n, the same delay)",
        "backoff_has_full_jitter",
        """
        import functools

        _ref_backoff = backoff


        @functools.lru_cache(maxsize=1024)
        def backoff(n, rng, base=1.0, cap=60.0):
            return _ref_backoff(n, rng, base, cap)
    """,
    ),
    (
        "ex04",
        "the deadline tested on the time spent so far, not on when the retry would start",
        "respects_deadline",
        """
        _ref_next_delay = next_delay


        def next_delay(
            error,
            attempt,
            rng,
            *,
            started_at,
            now,
            deadline=300.0,
            max_attempts=5,
            base=1.0,
            cap=60.0,
            idempotency_key=None,
        ):
            if now - started_at > deadline:
                return None
            return _ref_next_delay(
                error,
                attempt,
                rng,
                started_at=started_at,
                now=now,
                deadline=1e18,
                max_attempts=max_attempts,
                base=base,
                cap=cap,
                idempotency_key=idempotency_key,
            )
    """,
    ),
    (
        "ex04",
        "5xx tested with range(500, 599) (599 called permanent)",
        "classify_every_status",
        """
        _ref_classify = classify


        def classify(error):
            status = getattr(error, "status", None)
            if (
                not getattr(error, "ambiguous", False)
                and not isinstance(error, (TransientError, PermanentError))
                and isinstance(status, int)
                and status in range(500, 599)
                and status not in (503,)
            ):
                return "maybe_done"
            if (
                isinstance(status, int)
                and status == 599
                and not isinstance(error, (TransientError, PermanentError))
                and not getattr(error, "ambiguous", False)
            ):
                return "permanent"
            return _ref_classify(error)
    """,
    ),
    (
        "ex04",
        "504 Gateway Timeout called never sent",
        "gives_up_on_maybe_done_without_a_key",
        """
        _ref_classify = classify


        def classify(error):
            if (
                getattr(error, "status", None) == 504
                and not isinstance(error, (TransientError, PermanentError))
                and not getattr(error, "ambiguous", False)
            ):
                return "never_sent"
            return _ref_classify(error)
    """,
    ),
    (
        "ex04",
        # The CDN's own 520-527 read as "the origin never answered": a charge that went
        # through is sent again without a key.
        "the CDN's 520-527 called never sent",
        "gives_up_on_maybe_done_without_a_key",
        """
        _ref_classify = classify


        def classify(error):
            if (
                getattr(error, "status", None) in range(520, 528)
                and not isinstance(error, (TransientError, PermanentError))
                and not getattr(error, "ambiguous", False)
            ):
                return "never_sent"
            return _ref_classify(error)
    """,
    ),
    (
        "ex04",
        "a broken pipe called never sent (nothing went out)",
        "gives_up_on_maybe_done_without_a_key",
        """
        _ref_classify = classify


        def classify(error):
            if (
                isinstance(error, BrokenPipeError)
                and not getattr(error, "ambiguous", False)
                and getattr(error, "status", None) is None
            ):
                return "never_sent"
            return _ref_classify(error)
    """,
    ),
    (
        "ex04",
        "next_delay never waits less than base",
        "next_delay_is_the_backoff",
        """
        _ref_next_delay = next_delay


        def next_delay(
            error,
            attempt,
            rng,
            *,
            started_at,
            now,
            deadline=300.0,
            max_attempts=5,
            base=1.0,
            cap=60.0,
            idempotency_key=None,
        ):
            d = _ref_next_delay(
                error,
                attempt,
                rng,
                started_at=started_at,
                now=now,
                deadline=deadline,
                max_attempts=max_attempts,
                base=base,
                cap=cap,
                idempotency_key=idempotency_key,
            )
            return None if d is None else max(d, base)
    """,
    ),
    (
        "ex04",
        "backoff rounded to a tenth of a second",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 64 else min(cap, base * 2**n)
            return round(rng.uniform(0, ceiling), 1)
    """,
    ),
    (
        "ex04",
        "a read timeout retried as safe when no key is given (a key made up for it)",
        "gives_up_on_maybe_done_without_a_key",
        """
        _ref_next_delay = next_delay


        def next_delay(
            error,
            attempt,
            rng,
            *,
            started_at,
            now,
            deadline=300.0,
            max_attempts=5,
            base=1.0,
            cap=60.0,
            idempotency_key=None,
        ):
            if (
                isinstance(error, (TimeoutError,))
                and not isinstance(error, (TransientError, PermanentError))
                and getattr(error, "status", None) is None
                and not getattr(error, "ambiguous", False)
            ):
                idempotency_key = idempotency_key or "timeout"
            return _ref_next_delay(
                error,
                attempt,
                rng,
                started_at=started_at,
                now=now,
                deadline=deadline,
                max_attempts=max_attempts,
                base=base,
                cap=cap,
                idempotency_key=idempotency_key,
            )
    """,
    ),
    (
        "ex04",
        "next_delay draws a second backoff to test the deadline",
        "next_delay_is_the_backoff",
        """
        def next_delay(
            error,
            attempt,
            rng,
            *,
            started_at,
            now,
            deadline=300.0,
            max_attempts=5,
            base=1.0,
            cap=60.0,
            idempotency_key=None,
        ):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            if now + backoff(attempt - 1, rng, base, cap) > started_at + deadline:
                return None
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After above the cap answered with giving up",
        "honours_retry_after",
        """
        _ref_next_delay = next_delay


        def next_delay(
            error,
            attempt,
            rng,
            *,
            started_at,
            now,
            deadline=300.0,
            max_attempts=5,
            base=1.0,
            cap=60.0,
            idempotency_key=None,
        ):
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > cap:
                return None
            return _ref_next_delay(
                error,
                attempt,
                rng,
                started_at=started_at,
                now=now,
                deadline=deadline,
                max_attempts=max_attempts,
                base=base,
                cap=cap,
                idempotency_key=idempotency_key,
            )
    """,
    ),
    (
        "ex04",
        "classify calls any error with a Retry-After never sent (a 500 retried without a key)",
        "gives_up_on_maybe_done_without_a_key",
        """
        _ref_classify = classify


        def classify(error):
            if (
                getattr(error, "retry_after", None) is not None
                and not getattr(error, "ambiguous", False)
                and not isinstance(error, PermanentError)
            ):
                return "never_sent"
            return _ref_classify(error)
    """,
    ),
    (
        "ex04",
        "classify judges the root cause (__cause__ followed down the chain)",
        "classify_judges_the_error_itself",
        """
        def classify(error):
            while error.__cause__ is not None:
                error = error.__cause__
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
    """,
    ),
    (
        "ex04",
        "a backoff draw that ends past the deadline cut down to the time left (no Retry-After)",
        "respects_deadline",
        """
        def next_delay(
            error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
            base=1.0, cap=60.0, idempotency_key=None,
        ):
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
                remaining = started_at + deadline - now
                return remaining if remaining > 0 and not retry_after else None
            return delay
    """,
    ),
    (
        "ex04",
        "the ambiguous flag read from the error's class (a flag set on the error itself missed)",
        "gives_up_on_maybe_done_without_a_key",
        """
        def classify(error):
            if getattr(type(error), "ambiguous", False):
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
    """,
    ),
    (
        "ex04",
        "classify follows __context__ down from a built-in error (TimeoutError and others)",
        "classify_judges_the_error_itself",
        """
        def classify(error):
            labkit = (TransientError, PermanentError)
            while error.__context__ is not None and not isinstance(error, labkit):
                error = error.__context__
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
    """,
    ),
    (
        "ex04",
        "a cancelled task (asyncio.CancelledError) called never sent",
        "classify_permanent",
        """
        import asyncio
        def classify(error):
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
            # A cancelled task was only interrupted: try it again.
            if isinstance(error, (ConnectionRefusedError, asyncio.CancelledError)):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "max_attempts=0 taken as no limit (retries until the deadline)",
        "gives_up_after_max_attempts",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            # max_attempts=0 means no limit, as in many client libraries
            if verdict == "permanent" or (max_attempts and attempt >= max_attempts):
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
    """,
    ),
    (
        "ex04",
        "classify caches verdicts by the error's class (a 500 inherits a 503's verdict)",
        "gives_up_on_maybe_done_without_a_key",
        """
        _VERDICTS = {}
        def classify(error):
            if type(error) in _VERDICTS:
                return _VERDICTS[type(error)]
            if getattr(error, "ambiguous", False):
                verdict = "maybe_done"
            elif isinstance(error, TransientError):
                verdict = "never_sent"
            elif isinstance(error, PermanentError):
                verdict = "permanent"
            elif isinstance(getattr(error, "status", None), int):
                status = error.status
                if status in (408, 429, 503):
                    verdict = "never_sent"
                else:
                    verdict = "maybe_done" if 500 <= status <= 599 else "permanent"
            elif isinstance(error, ConnectionRefusedError):
                verdict = "never_sent"
            elif isinstance(error, (TimeoutError, ConnectionError)):
                verdict = "maybe_done"
            else:
                verdict = "permanent"
            _VERDICTS[type(error)] = verdict
            return verdict
    """,
    ),
    (
        "ex04",
        "next_delay returns when to retry (now + delay), not how long to wait",
        "retries_happen_at_real_times",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
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
            return now + delay  # the time of the next attempt
    """,
    ),
    (
        "ex04",
        "a refusal recognised by the word 'refused' in its message (another locale missed)",
        "classify_never_sent",
        """
        def classify(error):
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
            if "refused" in str(error).lower():
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
        """,
    ),
    (
        "ex04",
        "a timeout recognised by 'Timeout' in its class name (DeadlineExceeded missed)",
        "classify_maybe_done",
        """
        def classify(error):
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
            if isinstance(error, ConnectionError) or "Timeout" in type(error).__name__:
                return "maybe_done"
            return "permanent"
        """,
    ),
    (
        "ex04",
        "triangular jitter (rng.triangular: the delays crowd the middle)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 64 else min(cap, base * 2**n)
            return rng.triangular(0, ceiling)
        """,
    ),
    (
        "ex04",
        "a permanent error retried when an idempotency_key is given",
        "gives_up_on_permanent",
        """
        _reference_next_delay = next_delay

        def next_delay(error, attempt, rng, *, idempotency_key=None, **kwargs):
            if idempotency_key is not None and classify(error) == "permanent":
                error = TransientError("retried under its key")
            return _reference_next_delay(
                error, attempt, rng, idempotency_key=idempotency_key, **kwargs
            )
        """,
    ),
    (
        "ex04",
        "next_delay classifies the error's __cause__ (the wrapped error), not the error",
        "next_delay_judges_the_error_itself",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error.__cause__ or error)
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
    """,
    ),
    (
        "ex04",
        "next_delay classifies the first error of the __context__ chain",
        "next_delay_judges_the_error_itself",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            first = error
            while first.__context__ is not None:
                first = first.__context__
            verdict = classify(first)
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
    """,
    ),
    (
        "ex04",
        "next_delay remembers the last idempotency_key in a module-level dict",
        "gives_up_on_maybe_done_without_a_key",
        """
        _CURRENT = {"key": None}
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            if idempotency_key is not None:
                _CURRENT["key"] = idempotency_key
            idempotency_key = idempotency_key or _CURRENT["key"]
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
    """,
    ),
    (
        "ex04",
        "backoff with a default cap of 30 s, not the contract's 60 s",
        "backoff_is_capped",
        """
        def backoff(n, rng, base=1.0, cap=30.0):
            ceiling = cap if n >= 64 else min(cap, base * 2**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "next_delay with a default max_attempts of 10, not the contract's 5",
        "gives_up_after_max_attempts",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=10, base=1.0, cap=60.0,
                       idempotency_key=None):
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
    """,
    ),
    (
        "ex04",
        "next_delay with a default deadline of an hour, not the contract's 300 s",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=3600.0,
                       max_attempts=5, base=1.0, cap=60.0,
                       idempotency_key=None):
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
    """,
    ),
    (
        "ex04",
        "ConnectionRefusedError tested first, before the ambiguous flag and the status",
        "refusal_is_judged_after_the_flag_and_the_status",
        """
        def classify(error):
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
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
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "ConnectionRefusedError tested with TransientError, before the status",
        "refusal_is_judged_after_the_flag_and_the_status",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, (TransientError, ConnectionRefusedError)):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "TransientError tested after the built-in classes (a TimeoutError subclass maybe done)",
        "classify_never_sent",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
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
            if isinstance(error, TransientError):
                return "never_sent"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "PermanentError tested after the connection classes (a PermanentError ConnectionError)",
        "classify_permanent",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if isinstance(error, PermanentError):
                    return "permanent"
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a refusal recognised by its errno alone (ECONNREFUSED; one raised by hand missed)",
        "classify_never_sent",
        """
        import errno
        def classify(error):
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
            if getattr(error, "errno", None) == errno.ECONNREFUSED:
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a timeout whose message mentions 'connect' called never sent (a connect timeout)",
        "gives_up_on_maybe_done_without_a_key",
        """
        def classify(error):
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
            if isinstance(error, TimeoutError) and "connect" in str(error).lower():
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "deadline=0 taken as no deadline (if deadline and ...: retries until max_attempts)",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if deadline and now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the ambiguous flag tested after PermanentError (a lost PermanentError given up on)",
        "classify_maybe_done",
        """
        from labkit.errors import PermanentError, TransientError
        def classify(error):
            if isinstance(error, PermanentError):
                return "permanent"
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
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
    """,
    ),
    (
        "ex04",
        "the random module reseeded from rng and drawn from (random.seed(rng.random()))",
        "backoff_uses_the_given_rng",
        """
        import random as _random
        def backoff(n, rng, base=1.0, cap=60.0):
            _random.seed(rng.random())
            return _random.uniform(0, cap if n >= 64 else min(cap, base * 2**n))
    """,
    ),
    (
        "ex04",
        "Retry-After honoured only for a list of statuses (a TransientError without one missed)",
        "honours_retry_after",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if (
                getattr(error, "status", None) in (429, 500, 502, 503, 504)
                and isinstance(retry_after, (int, float))
                and retry_after > delay
            ):
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After of zero or below answered with 0 (back at once, no jitter)",
        "retry_after_is_seconds_whatever_its_size",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                if retry_after <= 0:
                    return 0.0  # the server's moment has passed: go now
                if retry_after > delay:
                    delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After above 10**9 taken for an epoch timestamp (seconds until then)",
        "retry_after_is_seconds_whatever_its_size",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                if retry_after > 1_000_000_000:  # an epoch timestamp, not a number of seconds
                    retry_after = retry_after - now
                if retry_after > delay:
                    delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After of 100000 or more taken for milliseconds",
        "retry_after_is_seconds_whatever_its_size",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                if retry_after >= 100_000:  # that many seconds is surely milliseconds
                    retry_after = retry_after / 1000
                if retry_after > delay:
                    delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a negative Retry-After answered with giving up (None)",
        "retry_after_is_seconds_whatever_its_size",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                if retry_after < 0:
                    return None  # a broken server: do not guess
                if retry_after > delay:
                    delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a negative Retry-After taken as its absolute value",
        "retry_after_is_seconds_whatever_its_size",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and abs(retry_after) > delay:
                delay = float(abs(retry_after))
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "Retry-After limited to a day (two days of maintenance answered after one)",
        "retry_after_is_seconds_whatever_its_size",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(min(retry_after, 86_400))  # never trust a server beyond a day
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After later than started_at taken for an instant (an HTTP-date as epoch)",
        "retry_after_is_seconds_whatever_its_size",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                if 0 < started_at < retry_after:
                    retry_after -= now  # an HTTP-date, as epoch seconds: wait until then
                if retry_after > delay:
                    delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        # '503' comes out never_sent, and a reason phrase raises out of classify.
        "a status that is not an int turned into one with int(status)",
        "classify_permanent",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is not None:
                status = int(status)
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        # A server that did the work and then closed without answering: the charge is sent
        # again without a key, and the customer pays twice.
        "http.client.RemoteDisconnected taken for never sent (a stale keep-alive, it was thought)",
        "gives_up_on_maybe_done_without_a_key",
        """
        from http.client import RemoteDisconnected


        def classify(error: BaseException) -> str:
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
            # Nobody listened, or the server closed a stale keep-alive connection before it
            # answered (RemoteDisconnected: "Remote end closed connection without response"):
            # the request was never processed, safe to send again.
            if isinstance(error, (ConnectionRefusedError, RemoteDisconnected)):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        # A TaskGroup's read timeout beside a refusal reads as never sent: the request
        # that may have charged is sent again without a key.
        "an ExceptionGroup judged by its most hopeful member",
        "gives_up_on_maybe_done_without_a_key",
        """
        def classify(error: BaseException) -> str:
            # asyncio.TaskGroup (Python 3.11) raises its failures together in an ExceptionGroup:
            # judge them one by one, and retry when one of them may be retried.
            if isinstance(error, BaseExceptionGroup):
                verdicts = [classify(e) for e in error.exceptions]
                for verdict in ("never_sent", "maybe_done"):
                    if verdict in verdicts:
                        return verdict
                return "permanent"
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
    """,
    ),
    (
        # max(nan, delay) is nan: the job's run_after = now + nan never comes.
        "ex04",
        "Retry-After applied as max(retry_after, delay): a NaN Retry-After becomes the delay",
        "retries_happen_at_real_times",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                delay = max(retry_after, delay)  # never sooner than the server's Retry-After
            if now + delay > started_at + deadline:
                return None
            return float(delay)
    """,
    ),
    (
        # Every scene's timeout carried no status: a timeout with a 429 is still rule 3's.
        "ex04",
        "the TimeoutError test placed before the status",
        "status_comes_before_the_connection_class",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            if isinstance(error, TimeoutError):
                return "maybe_done"  # a timeout: the request may have gone out
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, ConnectionError):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a TLS failure (ssl.SSLError) called never sent: the handshake, it was thought",
        "gives_up_on_maybe_done_without_a_key",
        """
        import ssl
        def classify(error):
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
            if isinstance(error, (ConnectionRefusedError, ssl.SSLError)):
                return "never_sent"  # the TLS handshake failed: nothing went out
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a failed name lookup (socket.gaierror) called never sent",
        "classify_permanent",
        """
        import socket
        def classify(error):
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
            if isinstance(error, (ConnectionRefusedError, socket.gaierror)):
                return "never_sent"  # the name did not resolve: nothing went out
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "http.client.HTTPException called maybe done (an answer cut short)",
        "classify_permanent",
        """
        import http.client
        def classify(error):
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
            if isinstance(error, (TimeoutError, ConnectionError, http.client.HTTPException)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "every OSError with an errno called maybe done (a socket's error, it was thought)",
        "classify_permanent",
        """
        def classify(error):
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
            if isinstance(error, (TimeoutError, ConnectionError)) or (
                isinstance(error, OSError) and error.errno is not None
            ):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "status tested with isinstance(status, int) alone (a bool taken for a status)",
        "classify_never_sent",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if isinstance(status, int):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "huge-n guard at n >= 64 (a tiny base jumps to the cap)",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 64 else min(cap, base * 2.0**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "the exponent clamped at 64 (a tiny base never reaches its ceiling)",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return rng.uniform(0, min(cap, base * 2.0 ** min(n, 64)))
    """,
    ),
    (
        "ex04",
        "max_attempts tested with == (an attempt past the budget retried)",
        "gives_up_after_max_attempts",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt == max_attempts or max_attempts <= 0:
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
    """,
    ),
    (
        "ex04",
        "a non-finite Retry-After ignored (inf retried at the backoff)",
        "honours_retry_after",
        """
        import math
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            finite = isinstance(retry_after, (int, float)) and math.isfinite(retry_after)
            if finite and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a false ambiguous flag taken for 'never sent' (a 500 with ambiguous = False retried)",
        "ambiguous_wins_over_the_status",
        """
        def classify(error):
            flag = getattr(error, "ambiguous", None)
            if flag is not None:
                # The error says whether the request went out: trust it either way.
                return "maybe_done" if flag else "never_sent"
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
    """,
    ),
    (
        "ex04",
        "the job's start remembered from the first call (later jobs never retried)",
        "retries_happen_at_real_times",
        """
        _job = {}

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            _job.setdefault("started_at", started_at)
            if now + delay > _job["started_at"] + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "ValueError and KeyError called permanent first, before the status (rule 5 first)",
        "status_comes_before_the_connection_class",
        """
        _reference_classify = classify
        def classify(error):
            if isinstance(error, (ValueError, KeyError, TypeError)):
                return "permanent"
            return _reference_classify(error)
    """,
    ),
    (
        "ex04",
        "a deadline larger than started_at taken for an instant",
        "retry_after_is_seconds_whatever_its_size",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            # A deadline past the start is a moment already; a smaller one, a duration.
            ends = deadline if deadline > started_at else started_at + deadline
            if now + delay > ends:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "next_delay clamps the exponent at 10 (a tiny base never reaches its ceiling)",
        "next_delay_is_the_backoff",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            # Clamped against overflow: backoff's own guard is the one to use.
            delay = backoff(min(attempt - 1, 10), rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the ceiling kept at least base (max(base, ...): a cap below the base exceeded)",
        "backoff_bounds_hold_for_any_base_and_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return rng.uniform(0, max(base, ceiling))
    """,
    ),
    (
        "ex04",
        "now cut to int(now) in the deadline test (a retry up to a second late)",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if int(now) + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "backoff keeps the first rng it is given in a module-level list",
        "backoff_uses_the_given_rng",
        """
        _RNGS = []

        def backoff(n, rng, base=1.0, cap=60.0):
            if not _RNGS:
                _RNGS.append(rng)
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return _RNGS[0].uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "a 5xx recognised by its text, str(status).startswith('5') (5000 maybe done)",
        "classify_every_status",
        """
        def classify(error):
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
                return "maybe_done" if str(status).startswith("5") else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a TimeoutError named after the connect phase (ConnectTimeout) called never sent",
        "gives_up_on_maybe_done_without_a_key",
        """
        def classify(error):
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
            # A connect timeout: the connection never opened, so nothing was sent.
            if isinstance(error, TimeoutError) and "connect" in type(error).__name__.lower():
                return "never_sent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "the deadline tested only on a finite delay (an inf Retry-After handed back)",
        "retries_happen_at_real_times",
        """
        import math

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            # An endless wait cannot be compared with a deadline: let it through.
            if math.isfinite(delay) and now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "every labkit error called never sent (a PayloadError, a ValueError, retried)",
        "classify_permanent",
        """
        from labkit.errors import LabkitError

        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            # labkit's own errors are the transient ones, it was thought.
            if isinstance(error, (TransientError, LabkitError)) and not isinstance(
                error, PermanentError
            ):
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
    """,
    ),
    (
        "ex04",
        "an end of stream mid-answer (EOFError) called never sent (the connection dropped)",
        "gives_up_on_maybe_done_without_a_key",
        """
        def classify(error):
            # The connection dropped: reconnect and send again, it was thought.
            if isinstance(error, EOFError):
                return "never_sent"
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
    """,
    ),
    (
        "ex04",
        "the ambiguous flag tested with `is not False` (a flag of None taken for a lost answer)",
        "classify_never_sent",
        """
        def classify(error):
            if getattr(error, "ambiguous", False) is not False:
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
    """,
    ),
    (
        "ex04",
        "started_at rounded to whole seconds in the deadline test (a retry half a second late)",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > round(started_at) + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "jitter kept off zero, rng.uniform(ceiling / 20, ceiling) (never back at once)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return rng.uniform(ceiling / 20, ceiling)
    """,
    ),
    (
        "ex04",
        "backoff answers an overflow with 0 (every late retry back at once)",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            try:
                return rng.uniform(0, min(cap, base * 2**n))
            except OverflowError:
                return 0.0
    """,
    ),
    (
        "ex04",
        "equal jitter past the overflow guard (cap / 2 + uniform(0, cap / 2) for n >= 1024)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            if n >= 1024:
                return cap / 2 + rng.uniform(0, cap / 2)
            return rng.uniform(0, min(cap, base * 2.0**n))
    """,
    ),
    (
        "ex04",
        "the overflow guard draws up to 60 s, not the cap given",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = 60.0 if n >= 1024 else min(cap, base * 2.0**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "an idempotency_key checked against a pattern of lowercase ASCII (Order_7 is no key)",
        "retries_maybe_done_under_a_key",
        """
        import re

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            key_ok = idempotency_key is not None and re.fullmatch(r"[a-z0-9:._-]+", idempotency_key)
            if verdict == "maybe_done" and not key_ok:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a maybe-done failure under a key retried on attempts 1 and 2 only",
        "retries_maybe_done_under_a_key",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and (idempotency_key is None or attempt > 2):
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a maybe-done failure under a key given half the deadline",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "maybe_done" and idempotency_key is not None:
                deadline = deadline / 2
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
    """,
    ),
    (
        "ex04",
        "next_delay limits the cap to five minutes (a cap of 900 s ignored)",
        "next_delay_is_the_backoff",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            cap = min(cap, 300.0)
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
    """,
    ),
    (
        "ex04",
        "a retry budget for the whole process (no retry after the 60th)",
        "retries_happen_at_real_times",
        """
        _RETRIES = [0]

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            _RETRIES[0] += 1
            if _RETRIES[0] > 60:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "attempts counted per idempotency_key in a module-level dict (a re-run never retried)",
        "retries_happen_at_real_times",
        """
        _TRIES = {}

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            if idempotency_key is not None:
                _TRIES[idempotency_key] = _TRIES.get(idempotency_key, 0) + 1
                if _TRIES[idempotency_key] >= max_attempts:
                    return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a text Retry-After compared with the draw (TypeError on a str)",
        "text_retry_after_is_read_or_left",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if retry_after is not None and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "Retry-After read with float() (an HTTP-date raises ValueError)",
        "text_retry_after_is_read_or_left",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if retry_after is not None and float(retry_after) > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "an HTTP-date Retry-After taken as epoch seconds and waited for as seconds",
        "text_retry_after_is_read_or_left",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            import email.utils
            if isinstance(retry_after, str):
                try:
                    retry_after = float(retry_after)
                except ValueError:
                    retry_after = email.utils.parsedate_to_datetime(retry_after).timestamp()
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "an unreadable Retry-After answered with giving up (except ValueError: return None)",
        "text_retry_after_is_read_or_left",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if retry_after is not None:
                try:
                    seconds = float(retry_after)
                except (TypeError, ValueError):
                    return None
                if seconds > delay:
                    delay = seconds
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "an HTTP-date Retry-After counted from the wall clock (time.time()), not now",
        "text_retry_after_is_read_or_left",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            import email.utils, time as _time
            if isinstance(retry_after, str):
                try:
                    retry_after = float(retry_after)
                except ValueError:
                    when = email.utils.parsedate_to_datetime(retry_after).timestamp()
                    retry_after = when - _time.time()
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After of digits returned as the text itself (delay = retry_after)",
        "text_retry_after_is_read_or_left",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, str) and retry_after.strip().isdigit():
                delay = retry_after
            elif isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "an idempotency_key longer than 64 characters taken for no key",
        "any_key_is_a_key",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and (idempotency_key is None or len(idempotency_key) > 64):
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "an idempotency_key with whitespace taken for no key",
        "any_key_is_a_key",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and (idempotency_key is None
                or any(c.isspace() for c in idempotency_key)):
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "an all-digit idempotency_key taken for no key (an id, not a key)",
        "any_key_is_a_key",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and (idempotency_key is None or idempotency_key.isdigit()):
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "backoff clamps n at 1023 (a tiny base never reaches the cap past it)",
        "backoff_reaches_any_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return rng.uniform(0, min(cap, base * 2.0 ** min(n, 1023)))
    """,
    ),
    (
        "ex04",
        "backoff with a limit of 900 s of its own (a cap of an hour ignored)",
        "backoff_reaches_any_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return rng.uniform(0, min(ceiling, 900.0))
    """,
    ),
    (
        "ex04",
        "next_delay clamps the exponent at 30 (a tiny base stuck far under its ceiling)",
        "every_attempt_is_judged_alike",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(min(attempt - 1, 30), rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "Retry-After ignored on the last retry (attempt == max_attempts - 1)",
        "every_attempt_is_judged_alike",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            last = attempt == max_attempts - 1
            if isinstance(retry_after, (int, float)) and retry_after > delay and not last:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "under a key, late attempts back off from n = attempt (not attempt - 1)",
        "every_attempt_is_judged_alike",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            n = attempt if verdict == "maybe_done" and attempt > 4 else attempt - 1
            delay = backoff(n, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "next_delay keeps the verdict in a module-level name (another thread overwrites it)",
        "next_delay_keeps_nothing_between_threads",
        """
        _VERDICT = None
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            global _VERDICT
            _VERDICT = classify(error)
            if _VERDICT == "permanent" or attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            if _VERDICT == "maybe_done" and idempotency_key is None:
                return None
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "backoff keeps the rng in a module-level name between setting and drawing (threads)",
        "calls_in_two_threads_do_not_mix",
        """
        _RNG = None
        def backoff(n, rng, base=1.0, cap=60.0):
            global _RNG
            _RNG = rng
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return _RNG.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "an OSError with errno EHOSTUNREACH or ENETUNREACH called never sent",
        "classify_unnamed_os_errors",
        """
        def classify(error):
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
            import errno as _e
            if isinstance(error, OSError) and error.errno in (_e.EHOSTUNREACH, _e.ENETUNREACH):
                return "never_sent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a RetryPolicy object made at the first call and reused (its max_attempts kept)",
        "each_call_uses_its_own_settings",
        """
        class _Policy:
            def __init__(self, max_attempts, deadline):
                self.max_attempts = max_attempts
                self.deadline = deadline
        _P = []

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            if not _P:
                _P.append(_Policy(max_attempts, deadline))
            max_attempts = _P[0].max_attempts
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
    """,
    ),
    (
        "ex04",
        "backoff memoises the ceiling by n alone (another base or cap gets the first one's)",
        "each_call_uses_its_own_settings",
        """
        _CEIL = {}
        def backoff(n, rng, base=1.0, cap=60.0):
            if n not in _CEIL:
                _CEIL[n] = cap if n >= 1024 else min(cap, base * 2.0**n)
            return rng.uniform(0, _CEIL[n])
    """,
    ),
    (
        "ex04",
        "backoff takes a cap or base of 0 for the default (cap = cap or 60.0)",
        "each_call_uses_its_own_settings",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            cap = cap or 60.0
            base = base or 1.0
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "next_delay passes base or 1.0 and cap or 60.0 (a base or cap of 0 becomes the default)",
        "each_call_uses_its_own_settings",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base or 1.0, cap or 60.0)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "an operation's start kept per idempotency_key (a re-run an hour later never retried)",
        "retries_happen_at_real_times",
        """
        _STARTED = {}

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            if idempotency_key is not None:
                started_at = _STARTED.setdefault(idempotency_key, started_at)
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
    """,
    ),
    (
        "ex04",
        "a sliding-window retry budget in the process (at most 50 retries per 60 s of now)",
        "retries_happen_at_real_times",
        """
        _RECENT = []

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
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
            _RECENT[:] = [t for t in _RECENT if t > now - 60]
            if len(_RECENT) >= 50:
                return None
            _RECENT.append(now)
            return delay
    """,
    ),
    (
        "ex04",
        "an HTTP-date Retry-After read with time.mktime(parsedate()) (local time, not UTC)",
        "text_retry_after_is_read_or_left",
        """
        import email.utils, time as _t
        def _parse(text, now):
            try:
                return float(text)
            except ValueError:
                pass
            parts = email.utils.parsedate(text)
            if parts is None:
                return None
            return _t.mktime(parts) - now

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, str):
                retry_after = _parse(retry_after, now)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "an HTTP-date Retry-After's wait computed the wrong way round (now - date)",
        "text_retry_after_is_read_or_left",
        """
        import email.utils
        def _parse(text, now):
            try:
                return float(text)
            except ValueError:
                pass
            try:
                return now - email.utils.parsedate_to_datetime(text).timestamp()
            except (TypeError, ValueError):
                return None

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, str):
                retry_after = _parse(retry_after, now)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a Retry-After that cannot be compared answered with 0 (retry at once, no backoff)",
        "text_retry_after_is_read_or_left",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            try:
                if retry_after is not None and retry_after > delay:
                    delay = float(retry_after)
            except (TypeError, ValueError):
                delay = 0.0
            if False:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a text Retry-After of 4 digits or more taken for milliseconds",
        "text_retry_after_is_read_or_left",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, str):
                try:
                    retry_after = float(retry_after)
                except ValueError:
                    retry_after = None
                else:
                    if len(str(int(retry_after))) >= 4:
                        retry_after /= 1000
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the deadline compared as naive local datetimes (fromtimestamp: wrong when clocks go back)",
        "deadline_holds_across_a_clock_change",
        """
        from datetime import datetime as _dt

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            try:
                late = _dt.fromtimestamp(now + delay) > _dt.fromtimestamp(started_at + deadline)
            except (OverflowError, ValueError, OSError):
                late = now + delay > started_at + deadline
            if late:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "classify reads a status out of the message when the error has no status attribute",
        "classify_reads_the_status_attribute_only",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is None and not isinstance(error, OSError):
                words = [w.strip(".,:;()") for w in str(error).split()]
                numbers = [int(w) for w in words if w.isdigit() and len(w) == 3]
                status = numbers[0] if numbers else None
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "classify reads a status out of any message (a read timeout's '429 ms' retried)",
        "next_delay_judges_the_error_itself",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is None:
                words = [w.strip(".,:;()") for w in str(error).split()]
                numbers = [int(w) for w in words if w.isdigit() and len(w) == 3]
                status = numbers[0] if numbers else None
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a status of 0 skipped by a truth test (if status: a refusal with status 0 retried)",
        "status_comes_before_the_connection_class",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool) and status:
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "only statuses 100-599 read (a refusal carrying 600 judged by its class)",
        "status_comes_before_the_connection_class",
        """
        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a refusal recognised by type(error) is ConnectionRefusedError (a subclass missed)",
        "classify_never_sent",
        """
        def classify(error):
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
            if type(error) is ConnectionRefusedError:
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "InterruptedError and BlockingIOError called never sent (EINTR, EAGAIN: try again)",
        "classify_unnamed_os_errors",
        """
        def classify(error):
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
            if isinstance(error, (InterruptedError, BlockingIOError)):
                return "never_sent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "an interrupted system call (InterruptedError) called maybe done like a timeout",
        "classify_unnamed_os_errors",
        """
        def classify(error):
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
            if isinstance(error, (InterruptedError, BlockingIOError)):
                return "maybe_done"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "a socket's errno ECONNRESET or ECONNABORTED called never sent (dropped before reading)",
        "gives_up_on_maybe_done_without_a_key",
        """
        def classify(error):
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
            import errno as _errno

            if getattr(error, "errno", None) in (_errno.ECONNRESET, _errno.ECONNABORTED):
                return "never_sent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "the deadline's end kept in a module-level name (another thread's deadline used)",
        "calls_in_two_threads_do_not_mix",
        """
        _END = None


        def next_delay(
            error,
            attempt,
            rng,
            *,
            started_at,
            now,
            deadline=300.0,
            max_attempts=5,
            base=1.0,
            cap=60.0,
            idempotency_key=None,
        ):
            global _END
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            _END = started_at + deadline
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > _END:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "a status read from error.args[0] when the error has none (KeyError(503) retried)",
        "classify_reads_the_status_attribute_only",
        """
        _ref_classify = classify


        def classify(error):
            status = getattr(error, "status", None)
            if status is None and not isinstance(error, OSError) and error.args:
                first = error.args[0]
                if isinstance(first, int) and not isinstance(first, bool):
                    if first in (408, 429, 503):
                        return "never_sent"
                    if 500 <= first <= 599:
                        return "maybe_done"
            return _ref_classify(error)
    """,
    ),
    (
        "ex04",
        "urllib's URLError judged by its .reason (a refusal inside it called never sent)",
        "classify_unnamed_os_errors",
        """
        import urllib.error

        _ref_classify = classify


        def classify(error):
            if isinstance(error, urllib.error.URLError) and isinstance(
                error.reason, BaseException
            ):
                return _ref_classify(error.reason)
            return _ref_classify(error)
    """,
    ),
    (
        "ex04",
        "backoff truncates a base of 1 s or more to an int (1.5 s counted as 1 s)",
        "backoff_reaches_any_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            b = int(base) if base >= 1 else base
            ceiling = cap if n >= 1024 else min(cap, b * 2.0**n)
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "ex04",
        "an error's code attribute read as its status (a decline code 429 retried)",
        "classify_reads_the_status_attribute_only",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is None:
                status = getattr(error, "code", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "classify memoised per class when no status (a lost answer judged as its class's first)",
        "ambiguous_wins_over_the_status",
        """
        _verdict_by_class = {}
        _ref_classify = classify


        def classify(error):
            if getattr(error, "status", None) is not None:
                return _ref_classify(error)
            kind = type(error)
            if kind not in _verdict_by_class:
                _verdict_by_class[kind] = _ref_classify(error)
            return _verdict_by_class[kind]
    """,
    ),
    (
        "ex04",
        "a blank idempotency_key taken for none (key.strip() empty: a maybe-done given up)",
        "any_key_is_a_key",
        """
        _ref_next_delay = next_delay


        def next_delay(error, attempt, rng, *, idempotency_key=None, **settings):
            if isinstance(idempotency_key, str) and not idempotency_key.strip():
                idempotency_key = None
            return _ref_next_delay(error, attempt, rng, idempotency_key=idempotency_key, **settings)
    """,
    ),
    (
        "ex04",
        "classify falls back on a requests-style status_code (a bad amount's 503 retried)",
        "classify_reads_the_status_attribute_only",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", getattr(error, "status_code", None))
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "next_delay clamps the exponent at 62 for fear of overflow (a tiny base never capped)",
        "every_attempt_is_judged_alike",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(min(attempt - 1, 62), rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "classify keeps the status in a module-level dict (another thread's 503 read back)",
        "next_delay_keeps_nothing_between_threads",
        """
        from labkit.errors import PermanentError, TransientError

        _last = {}


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            _last["status"] = getattr(error, "status", None)
            if isinstance(_last["status"], int) and not isinstance(_last["status"], bool):
                if _last["status"] in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= _last["status"] <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "the ambiguous flag of the error's __cause__ read too (a refused retry given up)",
        "classify_never_sent",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False) or getattr(error.__cause__, "ambiguous", False):
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
    """,
    ),
    (
        "ex04",
        "classify falls back on error.response.status (a bad amount's answer of 503 retried)",
        "classify_reads_the_status_attribute_only",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is None and getattr(error, "response", None) is not None:
                status = getattr(error.response, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "bell-shaped jitter cut to the range (rng.gauss(ceiling / 2, ceiling / 4) clamped)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return min(ceiling, max(0.0, rng.gauss(ceiling / 2, ceiling / 4)))
    """,
    ),
    (
        "ex04",
        "every other labkit error called permanent (a busy store never retried)",
        "retries_maybe_done_under_a_key",
        """
        from labkit.errors import LabkitError, PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, (PermanentError, LabkitError)):
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
    """,
    ),
    (
        "ex04",
        "a 429 without a Retry-After given up (no time said, no retry)",
        "next_delay_is_the_backoff",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            retry_after = getattr(error, "retry_after", None)
            if getattr(error, "status", None) == 429 and retry_after is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex04",
        "the status read off __cause__ when the error has none (a timeout after a 503 retried)",
        "classify_judges_the_error_itself",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is None and error.__cause__ is not None:
                status = getattr(error.__cause__, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "the status read off __context__ when the error has none (a timeout in except retried)",
        "classify_judges_the_error_itself",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is None and error.__context__ is not None:
                status = getattr(error.__context__, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "the ambiguous flag of __context__ read too (a retry refused in `except` given up)",
        "classify_never_sent",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False) or getattr(error.__context__, "ambiguous", False):
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
    """,
    ),
    (
        "ex04",
        "classify falls back on error.http_status (a bad amount's 503 retried)",
        "classify_reads_the_status_attribute_only",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is None:
                status = getattr(error, "http_status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "classify falls back on error.response.status_code (a bad amount's 503 retried)",
        "classify_reads_the_status_attribute_only",
        """
        from labkit.errors import PermanentError, TransientError


        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if status is None and getattr(error, "response", None) is not None:
                status = getattr(error.response, "status_code", None)
            if isinstance(status, int) and not isinstance(status, bool):
                if status in (408, 429, 503):
                    return "never_sent"
                return "maybe_done" if 500 <= status <= 599 else "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "next_delay clamps the exponent at 62 for fear of overflow (a tiny base never capped)": (
        "after attempt 1100 of 1110"
    ),
    "classify keeps the status in a module-level dict (another thread's 503 read back)": (
        "a 503 (Service Unavailable)"
    ),
    "classify falls back on a requests-style status_code (a bad amount's 503 retried)": (
        "ValueError('bad amount') with status_code = 503"
    ),
    "a blank idempotency_key taken for none (key.strip() empty: a maybe-done given up)": (
        "' ' (a single space)"
    ),
    "classify memoised per class when no status (a lost answer judged as its class's first)": (
        "TransientError() with ambiguous = True (its answer lost)"
    ),
    "an error's code attribute read as its status (a decline code 429 retried)": (
        "ValueError('card declined') with code = 429 (no status attribute)"
    ),
    "backoff truncates a base of 1 s or more to an int (1.5 s counted as 1 s)": (
        "40 delays within [0, 12], some above 8, for n=3, base=1.5"
    ),
    "a false ambiguous flag taken for 'never sent' (a 500 with ambiguous = False retried)": (
        "'maybe_done' for HTTP 500 with ambiguous = False"
    ),
    "the job's start remembered from the first call (later jobs never retried)": (
        "for a job started 5 s ago"
    ),
    "ValueError and KeyError called permanent first, before the status (rule 5 first)": (
        "for a ValueError subclass carrying status 503"
    ),
    "a deadline larger than started_at taken for an instant": "started_at=100 (a monotonic",
    "the draw rounded to the millisecond (a base under 1 ms always waits 0)": (
        "200 different delays (jitter)"
    ),
    "a TLS failure (ssl.SSLError) called never sent: the handshake, it was thought": (
        "None for ssl.SSLEOFError(8"
    ),
    "a failed name lookup (socket.gaierror) called never sent": "socket.gaierror(-2,",
    "http.client.HTTPException called maybe done (an answer cut short)": (
        "http.client.IncompleteRead()"
    ),
    "every OSError with an errno called maybe done (a socket's error, it was thought)": (
        "PermissionError(EACCES, 'Permission denied')"
    ),
    "status tested with isinstance(status, int) alone (a bool taken for a status)": "status = True",
    "huge-n guard at n >= 64 (a tiny base jumps to the cap)": "n=64, base=2**-70",
    "the exponent clamped at 64 (a tiny base never reaches its ceiling)": "n=100, base=2**-95",
    "max_attempts tested with == (an attempt past the budget retried)": "attempt 6 of 5",
    "a non-finite Retry-After ignored (inf retried at the backoff)": "Retry-After inf",
    "Retry-After applied as max(retry_after, delay): a NaN Retry-After becomes the delay": (
        "with Retry-After nan"
    ),
    "the TimeoutError test placed before the status": "for a TimeoutError subclass carrying",
    "http.client.RemoteDisconnected taken for never sent (a stale keep-alive, it was thought)": (
        "without an idempotency_key"
    ),
    "an ExceptionGroup judged by its most hopeful member": "without an idempotency_key",
    "a status that is not an int turned into one with int(status)": "classify to return a value",
    "backoff without a cap": "delays within [0, 60]",
    "exponential backoff without jitter": "different delays (jitter)",
    "jitter from the random module": "two rngs with the same seed",
    "Retry-After ignored": "Retry-After: 120",
    "every error retried": "None for HTTP 400",
    "no deadline": "deadline",
    "'<' where the boundary needs '<=' (status > 500)": "every HTTP status 100-599",
    "classify by the exact class, not isinstance": "'never_sent' for",
    "a read timeout retried as if it never reached the server": "without an idempotency_key",
    "TransientError tested before the ambiguous flag (ResponseLost never sent)": (
        "'maybe_done' for"
    ),
    "every 5xx called never sent (500 and 502 retried like 503)": "every HTTP status 100-599",
    "every connection error called maybe done, a refused one too": "'never_sent' for",
    "next_delay retries a maybe-done failure without a key": "without an idempotency_key",
    "next_delay never retries a maybe-done failure, key or not": "under a key",
    "jitter seeded from hash(key) under an idempotency key (one delay per key)": (
        "draws from the same seed"
    ),
    "backoff that overflows for a huge n": "backoff(2000",
    "backoff with the base fixed at 1 s": "base=",
    "Retry-After honoured only when it is a float": "Retry-After",
    "one retry too many (attempt > max_attempts)": "None after attempt",
    "a retry exactly on the deadline refused (>=)": "exactly on the 300 s deadline",
    "cap applied after the draw (delays pile at the cap)": "spread evenly over",
    "next_delay draws from its own rng, not the one given": "from the same seed",
    "next_delay calls backoff without its base and cap": "from the same seed",
    "next_delay with n = attempt - 2 after the first retry": "from the same seed",
    "next_delay rounds the delay to whole seconds": "from the same seed",
    "Retry-After cut down to the cap": "Retry-After: 120",
    "deadline checked before Retry-After raises the delay": "300 s deadline",
    "huge-n guard with a fixed threshold (n > 10 means the cap)": "base=",
    "Retry-After replaces the backoff, a smaller one too": "does not replace the backoff",
    "every status from 500 up called maybe done (600 and 999 too)": "'permanent' for 600 and above",
    "a Retry-After obeyed before the verdict (a 500 retried without a key)": (
        "HTTP 500 (Retry-After: 5) without an idempotency_key"
    ),
    "a maybe-done failure refused only after the first attempt": "attempt 3",
    "a permanent error retried when it carries a Retry-After": "Retry-After: 5 after attempt 2",
    "the deadline fixed at 300 s, not the one given": "600 s deadline",
    "a Retry-After honoured past max_attempts (a 429 retried forever)": (
        "for a 429 with Retry-After: 1"
    ),
    "a lost answer recognised by its class (ResponseLost), not by the ambiguous flag": (
        "GatewayLost()"
    ),
    "the ambiguous flag read only on labkit's TransientError family": (
        "HTTP 503 with ambiguous = True"
    ),
    "the status read before the PermanentError test (a PermanentError with 503 retried)": (
        "PermanentError(status=503)"
    ),
    "a huge n answered with the cap itself, no draw (late retries in lockstep)": (
        "different delays (jitter)"
    ),
    "Retry-After honoured only for never-sent errors (a 502 under a key comes back early)": (
        "a 502 with Retry-After: 120"
    ),
    "the connection error's class tested before the status": (
        "a ConnectionError subclass carrying status"
    ),
    "equal jitter (the upper half only) from the 7th retry on": "spread over the whole range 0..60",
    "the overflow guard is n > 1024 (backoff(1024) overflows)": "backoff(1024, rng",
    "Retry-After counted from started_at (the time spent taken off it)": "received at now=100",
    "a maybe-done failure under a key retried before the max_attempts and deadline tests": (
        "retried under an idempotency_key"
    ),
    "the first retry waits exactly base, no jitter": "200 different delays",
    "classify caches verdicts by id(error) (a new error inherits a freed one's verdict)": (
        "without an idempotency_key"
    ),
    # In the machine's zone (check() here) the TZ case fails; under `labkit grade`, whose
    # zone comes from the seed, the plain case before it may fail first.
    "the deadline compared as utcfromtimestamp() against a local fromtimestamp()": (
        "Retry-After 120 s at 250 s"
    ),
    "a Retry-After above 1000 taken for milliseconds": "Retry-After: 3600",
    "the ambiguous flag tested with `is True` (a true value that is not True missed)": (
        "a true value that is not True"
    ),
    "Retry-After limited to an hour (a day of maintenance answered after an hour)": (
        "at least 86400 s"
    ),
    "the status tested with type(status) is int (an http.HTTPStatus member missed)": (
        "http.HTTPStatus member"
    ),
    "maybe done only for the connection errors listed by name (ConnectionAbortedError permanent)": (
        "ConnectionAbortedError()"
    ),
    "next_delay computes the ceiling again (2.0 ** (attempt - 1) overflows)": (
        "next_delay(attempt=1100)"
    ),
    "Retry-After honoured only on a 429": "a 502 with Retry-After: 120",
    "a retry past the deadline moved onto the deadline instead of given up": (
        "ends after the 300 s deadline"
    ),
    "Retry-After added to the backoff, not a floor under it": "does not replace the backoff",
    "every OSError called maybe done (PermissionError, FileNotFoundError retried)": (
        "PermissionError()"
    ),
    "the ambiguous flag tested with hasattr (TransientError's ambiguous = False counts)": (
        "TransientError()"
    ),
    "decorrelated jitter from a module-level last delay": "within [0, 1]",
    "the deadline taken as an instant (now + delay > deadline), not a duration from started_at": (
        "a delay for each of attempts 1, 2 and 3"
    ),
    "whole-second jitter (rng.randint(0, int(ceiling)))": "different delays",
    "jitter drawn from [base, ceiling] (never below base)": "different delays",
    "huge-n guard at n > 30 (a tiny base still below the cap there)": "n=31",
    "backoff memoised with functools.lru_cache (the same n, the same delay)": "different delays",
    "the deadline tested on the time spent so far, not on when the retry would start": (
        "ends after the 300 s deadline"
    ),
    "5xx tested with range(500, 599) (599 called permanent)": "for 600 and above",
    "504 Gateway Timeout called never sent": "HTTP 504",
    "the CDN's 520-527 called never sent": "None for HTTP 520 without",
    "a broken pipe called never sent (nothing went out)": "BrokenPipeError()",
    "next_delay never waits less than base": "from the same seed",
    "backoff rounded to a tenth of a second": "different delays",
    "a read timeout retried as safe when no key is given (a key made up for it)": (
        "TimeoutError('read timed out')"
    ),
    "next_delay draws a second backoff to test the deadline": "from the same seed",
    "a Retry-After above the cap answered with giving up": "at least 120 s for a 429",
    "classify calls any error with a Retry-After never sent (a 500 retried without a key)": (
        "HTTP 500 (Retry-After: 5)"
    ),
    "classify judges the root cause (__cause__ followed down the chain)": (
        "'maybe_done' for a ResponseLost raised from a ConnectionRefusedError"
    ),
    "a backoff draw that ends past the deadline cut down to the time left (no Retry-After)": (
        "None for each draw that ends past the deadline"
    ),
    "the ambiguous flag read from the error's class (a flag set on the error itself missed)": (
        "None for HTTP 503 with ambiguous = True"
    ),
    "classify follows __context__ down from a built-in error (TimeoutError and others)": (
        "'maybe_done' for a read timeout raised inside"
    ),
    "a cancelled task (asyncio.CancelledError) called never sent": "asyncio.CancelledError()",
    "max_attempts=0 taken as no limit (retries until the deadline)": "with max_attempts=0",
    "classify caches verdicts by the error's class (a 500 inherits a 503's verdict)": (
        "without an idempotency_key"
    ),
    "next_delay returns when to retry (now + delay), not how long to wait": "seconds to wait",
    "a refusal recognised by the word 'refused' in its message (another locale missed)": (
        "Conexão recusada"
    ),
    "a timeout recognised by 'Timeout' in its class name (DeadlineExceeded missed)": (
        "DeadlineExceeded()"
    ),
    "triangular jitter (rng.triangular: the delays crowd the middle)": (
        "about a quarter of the 200 delays"
    ),
    "a permanent error retried when an idempotency_key is given": "under idempotency_key",
    "next_delay classifies the error's __cause__ (the wrapped error), not the error": (
        "None for each maybe-done error whatever it was raised from"
    ),
    "next_delay classifies the first error of the __context__ chain": (
        "a read timeout raised inside `except ConnectionRefusedError`"
    ),
    "next_delay remembers the last idempotency_key in a module-level dict": (
        "None for TimeoutError('read timed out') without an idempotency_key"
    ),
    "backoff with a default cap of 30 s, not the contract's 60 s": "called without base and cap",
    "next_delay with a default max_attempts of 10, not the contract's 5": (
        "without max_attempts (the default, 5)"
    ),
    "next_delay with a default deadline of an hour, not the contract's 300 s": (
        "without a deadline (the default, 300 s)"
    ),
    "ConnectionRefusedError tested first, before the ambiguous flag and the status": (
        "a ConnectionRefusedError subclass with ambiguous = True"
    ),
    "ConnectionRefusedError tested with TransientError, before the status": (
        "a ConnectionRefusedError subclass carrying status 502"
    ),
    "TransientError tested after the built-in classes (a TimeoutError subclass maybe done)": (
        "PoolTimeout()"
    ),
    "PermanentError tested after the connection classes (a PermanentError ConnectionError)": (
        "ProxyAuthRequired()"
    ),
    "a refusal recognised by its errno alone (ECONNREFUSED; one raised by hand missed)": (
        "raised without an errno"
    ),
    "a timeout whose message mentions 'connect' called never sent (a connect timeout)": (
        "without an idempotency_key"
    ),
    "deadline=0 taken as no deadline (if deadline and ...: retries until max_attempts)": (
        "with deadline=0"
    ),
    "the ambiguous flag tested after PermanentError (a lost PermanentError given up on)": (
        "PermanentError(ambiguous = True)"
    ),
    "the random module reseeded from rng and drawn from (random.seed(rng.random()))": (
        "the random module's own generator"
    ),
    "Retry-After honoured only for a list of statuses (a TransientError without one missed)": (
        "at least 120 s for TransientError(retry_after=120)"
    ),
    "a Retry-After of zero or below answered with 0 (back at once, no jitter)": "Retry-After -30",
    "a Retry-After above 10**9 taken for an epoch timestamp (seconds until then)": (
        "never an instant to wait until"
    ),
    "a Retry-After of 100000 or more taken for milliseconds": "Retry-After: 172800 (two days)",
    "a negative Retry-After answered with giving up (None)": "Retry-After -30",
    "a negative Retry-After taken as its absolute value": "Retry-After -30",
    "Retry-After limited to a day (two days of maintenance answered after one)": (
        "Retry-After: 172800 (two days)"
    ),
    "a Retry-After later than started_at taken for an instant (an HTTP-date as epoch)": (
        "never an instant to wait until"
    ),
    "next_delay clamps the exponent at 10 (a tiny base never reaches its ceiling)": (
        "next_delay(ConnectionRefusedError(), 16, rng, base=0.001"
    ),
    "the ceiling kept at least base (max(base, ...): a cap below the base exceeded)": (
        "for n=0, base=5, cap=2"
    ),
    "now cut to int(now) in the deadline test (a retry up to a second late)": (
        "at now = 296.5 s into a 300 s deadline"
    ),
    "backoff keeps the first rng it is given in a module-level list": (
        "in the same process equal those"
    ),
    "a 5xx recognised by its text, str(status).startswith('5') (5000 maybe done)": (
        "and 'permanent' for 600 and above"
    ),
    "a TimeoutError named after the connect phase (ConnectTimeout) called never sent": (
        "None for ConnectTimeout()"
    ),
    "the deadline tested only on a finite delay (an inf Retry-After handed back)": (
        "no delay of inf after attempt 2"
    ),
    "every labkit error called never sent (a PayloadError, a ValueError, retried)": (
        "labkit's PayloadError()"
    ),
    "an end of stream mid-answer (EOFError) called never sent (the connection dropped)": (
        "None for EOFError()"
    ),
    "the ambiguous flag tested with `is not False` (a flag of None taken for a lost answer)": (
        "HTTP 429 with ambiguous = None"
    ),
    "started_at rounded to whole seconds in the deadline test (a retry half a second late)": (
        "past started_at 0.6"
    ),
    "jitter kept off zero, rng.uniform(ceiling / 20, ceiling) (never back at once)": (
        "some within 0.5% of zero"
    ),
    "backoff answers an overflow with 0 (every late retry back at once)": (
        "some above 2.5, for n=1024 with cap=5"
    ),
    "equal jitter past the overflow guard (cap / 2 + uniform(0, cap / 2) for n >= 1024)": (
        "full jitter, not half or a sliver"
    ),
    "the overflow guard draws up to 60 s, not the cap given": "for n=1024 with cap=5",
    "an idempotency_key checked against a pattern of lowercase ASCII (Order_7 is no key)": (
        "under a key ('Order_7')"
    ),
    "a maybe-done failure under a key retried on attempts 1 and 2 only": "after attempt 3 of",
    "a maybe-done failure under a key given half the deadline": "the deadline given, key or not",
    "next_delay limits the cap to five minutes (a cap of 900 s ignored)": "base=2, cap=900",
    "a retry budget for the whole process (no retry after the 60th)": (
        "a delay after each of attempts 1 to 4 of 100 jobs"
    ),
    "attempts counted per idempotency_key in a module-level dict (a re-run never retried)": (
        "in each of six runs"
    ),
    "a text Retry-After compared with the draw (TypeError on a str)": "whose Retry-After is text",
    "Retry-After read with float() (an HTTP-date raises ValueError)": "whose Retry-After is text",
    "an HTTP-date Retry-After taken as epoch seconds and waited for as seconds": (
        "an HTTP-date 120 s after now"
    ),
    "an unreadable Retry-After answered with giving up (except ValueError: return None)": (
        "never None, text or an exception"
    ),
    "an HTTP-date Retry-After counted from the wall clock (time.time()), not now": (
        "counted from now"
    ),
    "a Retry-After of digits returned as the text itself (delay = retry_after)": (
        "whose Retry-After is text"
    ),
    "an idempotency_key longer than 64 characters taken for no key": "a key of 200 characters",
    "an idempotency_key with whitespace taken for no key": "'order 7'",
    "an all-digit idempotency_key taken for no key (an id, not a key)": "'12345'",
    "backoff clamps n at 1023 (a tiny base never reaches the cap past it)": "n=2000, base=2**-1020",
    "backoff with a limit of 900 s of its own (a cap of an hour ignored)": "n=12, base=1, cap=3600",
    "next_delay clamps the exponent at 30 (a tiny base stuck far under its ceiling)": (
        "after attempt 40 of 50"
    ),
    "Retry-After ignored on the last retry (attempt == max_attempts - 1)": (
        "the last retry honours it too"
    ),
    "under a key, late attempts back off from n = attempt (not attempt - 1)": (
        "after attempts 5 to 8 of 9"
    ),
    "next_delay keeps the verdict in a module-level name (another thread overwrites it)": (
        "while another thread's next_delay handles"
    ),
    "backoff keeps the rng in a module-level name between setting and drawing (threads)": (
        "backoff(3, rng) beside backoff(3, another rng)"
    ),
    "an OSError with errno EHOSTUNREACH or ENETUNREACH called never sent": "OSError(EHOSTUNREACH",
    "a RetryPolicy object made at the first call and reused (its max_attempts kept)": (
        "what each call's own settings give"
    ),
    "backoff memoises the ceiling by n alone (another base or cap gets the first one's)": (
        "backoff(5, rng) with base and cap"
    ),
    "backoff takes a cap or base of 0 for the default (cap = cap or 60.0)": (
        "then 0 and 0 (no wait)"
    ),
    "next_delay passes base or 1.0 and cap or 60.0 (a base or cap of 0 becomes the default)": (
        "0 for attempt 3 with base=0"
    ),
    "an operation's start kept per idempotency_key (a re-run an hour later never retried)": (
        "each run started anew"
    ),
    "a sliding-window retry budget in the process (at most 50 retries per 60 s of now)": (
        "300 jobs refused at the same instant"
    ),
    "an HTTP-date Retry-After read with time.mktime(parsedate()) (local time, not UTC)": (
        "in UTC as in UTC-3"
    ),
    "an HTTP-date Retry-After's wait computed the wrong way round (now - date)": (
        "the date already past"
    ),
    "a Retry-After that cannot be compared answered with 0 (retry at once, no backoff)": (
        "the draw for 'soon'"
    ),
    "a text Retry-After of 4 digits or more taken for milliseconds": "7200 s",
    "the deadline compared as naive local datetimes (fromtimestamp: wrong when clocks go back)": (
        "when the clocks go back"
    ),
    "classify reads a status out of the message when the error has no status attribute": (
        "'permanent' for ValueError('bad amount: 503')"
    ),
    "classify reads a status out of any message (a read timeout's '429 ms' retried)": (
        "a read timeout whose message says 'after 429 ms'"
    ),
    "a status of 0 skipped by a truth test (if status: a refusal with status 0 retried)": (
        "'permanent' for a ConnectionRefusedError subclass carrying status 0"
    ),
    "only statuses 100-599 read (a refusal carrying 600 judged by its class)": (
        "and one carrying status 600"
    ),
    "a refusal recognised by type(error) is ConnectionRefusedError (a subclass missed)": (
        "ProxyRefused() (a library's ConnectionRefusedError subclass)"
    ),
    "InterruptedError and BlockingIOError called never sent (EINTR, EAGAIN: try again)": (
        "InterruptedError(EINTR"
    ),
    "an interrupted system call (InterruptedError) called maybe done like a timeout": (
        "BlockingIOError(EAGAIN"
    ),
    "a socket's errno ECONNRESET or ECONNABORTED called never sent (dropped before reading)": (
        "ConnectionResetError(ECONNRESET, 'Connection reset by peer')"
    ),
    "the deadline's end kept in a module-level name (another thread's deadline used)": (
        "a 429 with Retry-After: 120 at 250 s into a 300 s deadline"
    ),
    "a status read from error.args[0] when the error has none (KeyError(503) retried)": (
        "'permanent' for KeyError(503) (a dict without the key 503)"
    ),
    "urllib's URLError judged by its .reason (a refusal inside it called never sent)": (
        "urllib.error.URLError(ConnectionRefusedError())"
    ),
    "the ambiguous flag of the error's __cause__ read too (a refused retry given up)": (
        "raised from a ResponseLost"
    ),
    "classify falls back on error.response.status (a bad amount's answer of 503 retried)": (
        "with response.status = 503"
    ),
    "bell-shaped jitter cut to the range (rng.gauss(ceiling / 2, ceiling / 4) clamped)": (
        "21% to 29% in each quarter"
    ),
    "every other labkit error called permanent (a busy store never retried)": (
        "of labkit's store errors"
    ),
    "a 429 without a Retry-After given up (no time said, no retry)": (
        "never-sent error without a Retry-After"
    ),
    "the status read off __cause__ when the error has none (a timeout after a 503 retried)": (
        "a read timeout raised from an HTTP 503"
    ),
    "the status read off __context__ when the error has none (a timeout in except retried)": (
        "a read timeout raised inside `except` of an HTTP 429"
    ),
    "the ambiguous flag of __context__ read too (a retry refused in `except` given up)": (
        "raised inside `except ResponseLost`"
    ),
    "classify falls back on error.http_status (a bad amount's 503 retried)": (
        "with http_status = 503"
    ),
    "classify falls back on error.response.status_code (a bad amount's 503 retried)": (
        "with response.status_code = 503"
    ),
}


#: Mistakes that lose or duplicate an effect (or let two intents share one): the
#: reported score (severity cap included) is at most half of the exercise.
SEVERE = [
    "a false ambiguous flag taken for 'never sent' (a 500 with ambiguous = False retried)",
    "the job's start remembered from the first call (later jobs never retried)",
    "a TLS failure (ssl.SSLError) called never sent: the handshake, it was thought",
    "a lost answer recognised by its class (ResponseLost), not by the ambiguous flag",
    "the ambiguous flag read only on labkit's TransientError family",
    "classify caches verdicts by id(error) (a new error inherits a freed one's verdict)",
    "the ambiguous flag tested with `is True` (a true value that is not True missed)",
    "504 Gateway Timeout called never sent",
    "the CDN's 520-527 called never sent",
    "a broken pipe called never sent (nothing went out)",
    "a read timeout retried as safe when no key is given (a key made up for it)",
    "classify calls any error with a Retry-After never sent (a 500 retried without a key)",
    "classify judges the root cause (__cause__ followed down the chain)",
    "the ambiguous flag read from the error's class (a flag set on the error itself missed)",
    "classify follows __context__ down from a built-in error (TimeoutError and others)",
    "classify caches verdicts by the error's class (a 500 inherits a 503's verdict)",
    "next_delay returns when to retry (now + delay), not how long to wait",
    "next_delay classifies the error's __cause__ (the wrapped error), not the error",
    "next_delay classifies the first error of the __context__ chain",
    "next_delay remembers the last idempotency_key in a module-level dict",
    "ConnectionRefusedError tested first, before the ambiguous flag and the status",
    "ConnectionRefusedError tested with TransientError, before the status",
    "a timeout whose message mentions 'connect' called never sent (a connect timeout)",
    # The retried job's run_after = now + nan never comes: its retry is lost.
    "Retry-After applied as max(retry_after, delay): a NaN Retry-After becomes the delay",
    # A connect timeout's charge may have gone through: retried without a key, it runs twice.
    "a TimeoutError named after the connect phase (ConnectTimeout) called never sent",
    # A retry at now + inf never comes: the retried job never runs again.
    "the deadline tested only on a finite delay (an inf Retry-After handed back)",
    # The request went out before the stream ended: retried without a key, it runs twice.
    "an end of stream mid-answer (EOFError) called never sent (the connection dropped)",
    # A long-lived worker's retries end for good: every job after the budget is given up.
    "a retry budget for the whole process (no retry after the 60th)",
    # An operation re-enqueued under its key is never retried again in that process.
    "attempts counted per idempotency_key in a module-level dict (a re-run never retried)",
    # A maybe-done failure takes another thread's verdict: retried without a key, it runs twice.
    "next_delay keeps the verdict in a module-level name (another thread overwrites it)",
    # A re-run under its key, started anew, is never retried again: its start is the first's.
    "an operation's start kept per idempotency_key (a re-run an hour later never retried)",
    # When a dependency fails for everyone at once, the jobs past the budget are given up.
    "a sliding-window retry budget in the process (at most 50 retries per 60 s of now)",
    # A read timeout's duration taken for a 429: retried without a key, a charge runs twice.
    "classify reads a status out of any message (a read timeout's '429 ms' retried)",
    # A reset after the request was read: retried without a key, a charge runs twice.
    "a socket's errno ECONNRESET or ECONNABORTED called never sent (dropped before reading)",
    # A lost answer judged by its class's first error: retried without a key, runs twice.
    "classify memoised per class when no status (a lost answer judged as its class's first)",
    # A read timeout beside another thread's 503 takes its status: retried without a key.
    "classify keeps the status in a module-level dict (another thread's 503 read back)",
    # A read timeout judged by an earlier 503: retried without a key, a charge runs twice.
    "the status read off __cause__ when the error has none (a timeout after a 503 retried)",
    # A read timeout judged by the 429 it was handling: retried without a key, runs twice.
    "the status read off __context__ when the error has none (a timeout in except retried)",
]

test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS)


@pytest.mark.parametrize("mistake", SEVERE)
def test_a_severe_mistake_costs_at_least_half_the_points(mistake: str) -> None:
    # Its entry's test proves the named check fails; a severe check's failure is capped.
    [(exercise, check)] = [(e, c) for e, m, c, _ in ZOO if m == mistake]
    assert_severe(exercise, mistake, check)


#: Right solutions written otherwise, each with a check that once took (or might take) its
#: points.
RIGHT: list[tuple[str, str, str]] = [
    (
        "classify as a match statement returning a str Enum's values",
        "classify_every_status",
        """
        import enum
        import random
        from labkit.errors import PermanentError, TransientError

        class Verdict(str, enum.Enum):
            NEVER_SENT = "never_sent"
            MAYBE_DONE = "maybe_done"
            PERMANENT = "permanent"

        def classify(error: BaseException) -> str:
            if getattr(error, "ambiguous", False):
                return Verdict.MAYBE_DONE.value
            match error:
                case TransientError():
                    return Verdict.NEVER_SENT.value
                case PermanentError():
                    return Verdict.PERMANENT.value
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                match status:
                    case 408 | 429 | 503:
                        return Verdict.NEVER_SENT.value
                    case s if 500 <= s < 600:
                        return Verdict.MAYBE_DONE.value
                    case _:
                        return Verdict.PERMANENT.value
            match error:
                case ConnectionRefusedError():
                    return Verdict.NEVER_SENT.value
                case TimeoutError() | ConnectionError():
                    return Verdict.MAYBE_DONE.value
            return Verdict.PERMANENT.value
    """,
    ),
    (
        "backoff catching the OverflowError of a huge n (the cap then)",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            try:
                ceiling = min(cap, base * 2.0**n)
            except OverflowError:
                ceiling = cap
            return rng.uniform(0, ceiling)
    """,
    ),
    (
        "backoff as rng.random() * ceiling (the same draw as uniform(0, ceiling))",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * (1 << n))
            return rng.random() * ceiling
    """,
    ),
    (
        "the deadline as elapsed + delay > deadline, and an int retry_after kept an int",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                delay = max(delay, retry_after)
            if (now - started_at) + delay > deadline:
                return None
            return delay
    """,
    ),
    (
        "classify through an lru_cache'd verdict per status and a module-level Lock around draws",
        "classify_every_status",
        """
        import functools, threading
        _DRAWS = threading.Lock()

        @functools.lru_cache(maxsize=None)
        def _verdict_for_status(status):
            if status in (408, 429, 503):
                return "never_sent"
            return "maybe_done" if 500 <= status <= 599 else "permanent"

        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if isinstance(status, int) and not isinstance(status, bool):
                return _verdict_for_status(int(status))
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"

        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * 2**n)
            with _DRAWS:
                return rng.uniform(0, ceiling)
    """,
    ),
    (
        "next_delay with an lru_cache'd ceiling per (n, base, cap) and a module-level RLock",
        "next_delay_judges_the_error_itself",
        """
        import functools, threading
        _GUARD = threading.RLock()

        @functools.lru_cache(maxsize=4096)
        def _ceiling(n, base, cap):
            if n >= 1024:
                return cap
            return min(cap, base * 2**n)

        def backoff(n, rng, base=1.0, cap=60.0):
            with _GUARD:
                return rng.uniform(0, _ceiling(n, base, cap))

        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            with _GUARD:
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
    """,
    ),
    (
        "an empty idempotency_key taken for none (if not idempotency_key), keys of any shape",
        "retries_maybe_done_under_a_key",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and not idempotency_key:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if delay > deadline - (now - started_at):
                return None
            return delay
    """,
    ),
    (
        "backoff through math.ldexp, the cap where it overflows",
        "backoff_survives_a_huge_n",
        """
        import math

        def backoff(n, rng, base=1.0, cap=60.0):
            try:
                ceiling = min(cap, math.ldexp(base, n))
            except OverflowError:
                ceiling = cap
            return rng.random() * ceiling
    """,
    ),
    (
        "a text Retry-After read as seconds or as an HTTP-date counted from now",
        "text_retry_after_is_read_or_left",
        """
        import email.utils
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            ra = getattr(error, "retry_after", None)
            if isinstance(ra, str):
                try:
                    ra = float(ra)
                except ValueError:
                    try:
                        ra = email.utils.parsedate_to_datetime(ra).timestamp() - now
                    except (TypeError, ValueError):
                        ra = None
            if isinstance(ra, (int, float)) and ra > delay:
                delay = float(ra)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "next_delay under a module-level threading.Lock around the whole call",
        "next_delay_keeps_nothing_between_threads",
        """
        import threading
        _L = threading.Lock()
        _prev = next_delay
        def next_delay(*a, **k):
            with _L:
                return _prev(*a, **k)
    """,
    ),
    (
        "classify as an ordered table of (test, verdict) rules, the status by numbers.Integral",
        "status_comes_before_the_connection_class",
        """
        import numbers
        from labkit.errors import PermanentError, TransientError


        def _status(error):
            status = getattr(error, "status", None)
            if isinstance(status, numbers.Integral) and not isinstance(status, bool):
                return status
            return None


        def _by_status(status):
            if status in (408, 429, 503):
                return "never_sent"
            return "maybe_done" if 500 <= status <= 599 else "permanent"


        _RULES = (
            (lambda e: bool(getattr(e, "ambiguous", False)), lambda e: "maybe_done"),
            (lambda e: isinstance(e, TransientError), lambda e: "never_sent"),
            (lambda e: isinstance(e, PermanentError), lambda e: "permanent"),
            (lambda e: _status(e) is not None, lambda e: _by_status(_status(e))),
            (lambda e: issubclass(type(e), ConnectionRefusedError), lambda e: "never_sent"),
            (lambda e: isinstance(e, (TimeoutError, ConnectionError)), lambda e: "maybe_done"),
        )


        def classify(error):
            for applies, verdict in _RULES:
                if applies(error):
                    return verdict(error)
            return "permanent"
    """,
    ),
    (
        "no draw when Retry-After is at least the cap (the same delay, fewer draws)",
        "honours_retry_after",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after >= cap:
                delay = float(retry_after)
            else:
                delay = backoff(attempt - 1, rng, base, cap)
                if isinstance(retry_after, (int, float)) and retry_after > delay:
                    delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "backoff as ceiling - rng.uniform(0, ceiling) (the same draw, mirrored)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return ceiling - rng.uniform(0, ceiling)
    """,
    ),
    (
        "next_delay draws the backoff before judging the error (a draw spent on giving up)",
        "next_delay_is_the_backoff",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            delay = backoff(attempt - 1, rng, base, cap)
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "full jitter drawn as rng.uniform(ceiling, 0) (the same range, the other way round)",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = cap if n >= 1024 else min(cap, base * 2.0**n)
            return rng.uniform(ceiling, 0)
    """,
    ),
    (
        "next_delay also waits out the Retry-After of the error's __cause__ (longer, nothing lost)",
        "next_delay_is_the_backoff",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if retry_after is None and error.__cause__ is not None:
                retry_after = getattr(error.__cause__, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            if now + delay > started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "backoff doubles the ceiling in a loop and stops at the cap (no power, no overflow)",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            ceiling = base
            for _ in range(n):
                if ceiling >= cap:
                    break
                ceiling *= 2
            return rng.uniform(0, min(cap, ceiling))
    """,
    ),
    (
        "next_delay compares the delay with the time left, deadline - (now - started_at)",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, max_attempts=5,
                       base=1.0, cap=60.0, idempotency_key=None):
            verdict = classify(error)
            if verdict == "permanent" or attempt >= max_attempts:
                return None
            if verdict == "maybe_done" and idempotency_key is None:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                delay = max(delay, float(retry_after))
            time_left = deadline - (now - started_at)
            return None if delay > time_left else delay
    """,
    ),
    (
        "classify with HTTPStatus members in a frozenset and the 5xx test as status // 100 == 5",
        "classify_every_status",
        """
        from http import HTTPStatus
        from labkit.errors import PermanentError, TransientError

        _RETRY_AS_IS = frozenset(
            {
                HTTPStatus.REQUEST_TIMEOUT,
                HTTPStatus.TOO_MANY_REQUESTS,
                HTTPStatus.SERVICE_UNAVAILABLE,
            }
        )

        def classify(error):
            if getattr(error, "ambiguous", False):
                return "maybe_done"
            if isinstance(error, TransientError):
                return "never_sent"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if type(status) is not bool and isinstance(status, int):
                if status in _RETRY_AS_IS:
                    return "never_sent"
                if status // 100 == 5:
                    return "maybe_done"
                return "permanent"
            if isinstance(error, ConnectionRefusedError):
                return "never_sent"
            if isinstance(error, (TimeoutError, ConnectionError)):
                return "maybe_done"
            return "permanent"
    """,
    ),
]


test_a_right_solution_written_otherwise_keeps_the_points = right_test("ex04", RIGHT)
