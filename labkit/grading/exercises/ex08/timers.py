"""Timers a task module arms on itself: a way to give up on a wait that no setting shows.

A charge that waits for its key (another copy holds it, uncommitted) must wait as long
as it takes: the copy it waits for may still roll back. ``lock_timeout`` and Celery's
time limits show in the session and the app; a timer the task arms itself does not: a
``signal.alarm`` (or ``setitimer``) whose handler raises, or a ``threading.Timer`` that
cancels the running query (``conn.cancel``, ``conn.cancel_safe``). It fires after its
seconds, whatever they are, and the check cannot wait that long to see it: it reads the
module's code instead (names only: a comment or a string that mentions an alarm is
no timer).
"""

from __future__ import annotations

import io
import tokenize

#: Names that arm a timer which interrupts the process, wherever they appear as code.
ALARMS = frozenset({"alarm", "setitimer", "SIGALRM", "ITIMER_REAL", "cancel_safe"})
#: Names of a cancel that, passed along uncalled (``Timer(5, conn.cancel)``), a timer or a
#: thread runs later on the task's connection.
CANCELS = frozenset({"cancel", "cancel_safe"})


def self_timers_in(source: str) -> list[str]:
    """The lines of ``source`` that arm a timer to interrupt the task: a ``SIGALRM``
    (``signal.alarm``, ``setitimer``), or a query cancel handed to a timer or a thread
    (``threading.Timer(5, conn.cancel)``). Empty for code that does neither, and for a
    module that does not tokenize (the worker's own error says more)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    found: list[str] = []
    for nth, token in enumerate(tokens):
        if token.type != tokenize.NAME:
            continue
        after = tokens[nth + 1].string if nth + 1 < len(tokens) else ""
        before = tokens[nth - 1].string if nth else ""
        alarm = token.string in ALARMS
        # conn.cancel handed over, not called: a timer or a thread calls it later.
        handed = token.string in CANCELS and before == "." and after != "("
        if (alarm or handed) and token.line.strip() not in found:
            found.append(token.line.strip())
    return found
