"""The exercise stub, defined once: what ``labkit release`` writes and how everyone knows it.

A released exercise's function body is ``raise NotImplementedError("Exercise N")``
(``stub_line``). A check, a harness or the grader that meets that error reports the
exercise as not started instead of as a mistake (``is_stub`` for the exception,
``is_stub_text`` for its message once it crossed a process or HTTP boundary as text).
nbgrader defines its stub once in the same way (``clearsolutions.py``).
"""

from __future__ import annotations

#: How every stub's message begins.
PREFIX = "Exercise"


def stub_message(number: int, detail: str = "") -> str:
    """``"Exercise 3"``, or ``"Exercise 9 is still a stub"`` with a detail."""
    return f"{PREFIX} {number}" + (f" {detail}" if detail else "")


def stub_line(number: int) -> str:
    """The line ``labkit release`` writes in place of a solution region."""
    return f'raise NotImplementedError("{stub_message(number)}")'


def stub_error(number: int, detail: str = "") -> NotImplementedError:
    """The error a stub raises, for a check that must act as the untouched stub would."""
    return NotImplementedError(stub_message(number, detail))


def is_stub_text(message: str) -> bool:
    """True when an error's message is a stub's."""
    return message.startswith(PREFIX)


def is_stub(exc: BaseException) -> bool:
    """True when ``exc`` is an exercise stub's ``NotImplementedError``."""
    return isinstance(exc, NotImplementedError) and is_stub_text(str(exc))
