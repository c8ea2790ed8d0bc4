"""What every ``labkit`` command shares: the usage error, safe printing, argument types.

The argument types check a value the way ``labkit.jobargs`` checks it for the store, and
turn a refusal into argparse's one-line usage error.
"""

from __future__ import annotations

import argparse
import unicodedata

from labkit import jobargs
from labkit.clock import from_isoformat
from labkit.lang import _


class CliError(Exception):
    """A usage problem, reported as one line on stderr with exit code 2."""


def safe(value: object) -> str:
    """``value`` as text a terminal shows as is: control characters escaped.

    A key or kind comes from whoever enqueued the job; printed raw, a newline in it
    forges a table row and an escape sequence repaints the operator's terminal.
    """
    text = "-" if value is None else str(value)
    return "".join(
        ch if ch == " " or unicodedata.category(ch)[0] not in "CZ" else _escape(ch) for ch in text
    )


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def utc_time(text: str) -> float:
    """``--as-of`` as epoch seconds: ISO 8601, read as UTC when it names no zone."""
    try:
        return from_isoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("--as-of wants a time like 2026-01-01T08:00:00Z, not {text!r}").format(text=text)
        ) from None


def count(text: str) -> int:
    """An argparse type: a whole number of jobs, 1 or more."""
    try:
        return jobargs.count("the value", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("must be a whole number, 1 or more, not {text!r}").format(text=text)
        ) from None


def count_or_zero(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        return jobargs.count("the value", int(text), minimum=0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("must be a whole number, 0 or more, not {text!r}").format(text=text)
        ) from None


def job_id(text: str) -> int:
    """An argparse type: a job id."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("a job id is a whole number, not {text!r}").format(text=text)
        ) from None
    if not jobargs.in_id_range(value):
        raise argparse.ArgumentTypeError(_("a job id is 1 or more, not {text!r}").format(text=text))
    return value


def seconds(text: str) -> float:
    """An argparse type: a finite, positive number of seconds."""
    try:
        return jobargs.seconds("the value", float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            _(
                "must be a positive, finite number of seconds (ten years at most), not {text!r}"
            ).format(text=text)
        ) from None


def name(text: str) -> str:
    """An argparse type: a kind, queue, worker or error class, as the store checks names."""
    try:
        return str(jobargs.name("the value", text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(safe(str(exc).removeprefix("the value "))) from None
