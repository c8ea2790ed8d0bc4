"""A dedup record salted with something of the worker that wrote it: its start, its pid.

A module may take, as it is imported, the time (``STARTED = int(time.time())``), its
process id, or the host's name and the time, and record each key with it
(``sha256(f"{key}:{STARTED}")``): every copy of a message this worker runs finds the
record, but a copy that another worker runs, or this one after a restart (a deploy, a
crash), finds none and charges again. ``two_workers_at_once_charge_once`` sees two such
records only when its two workers' salts differ: two workers started within one second
share ``int(time.time())``, and two in pid namespaces of their own (``labkit grade``
starts each so) may share their pids. ``started_in`` tries the seconds the worker was
starting in (buckets of them, and dates to the second in any zone the run knows), the
pids its task ran under, and the host's name next to each, beside the key or inside
the module's f-strings (``dated.salted_digest_in``), and says which text the record is.
"""

from __future__ import annotations

import ast
import contextlib
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from labkit.grading.exercises.ex08.dated import (
    DATED_SEPARATORS,
    _preimages,
    salted_digest_in,
    templates_in,
)
from labkit.integrations.celery import points

#: Seconds before the worker's start and after it was ready whose clock counts.
START_SLACK_S = 1
#: Buckets of seconds a start time may be rounded to (a minute and more: ``dated``'s).
START_BUCKETS_S = (1, 2, 3, 5, 10, 15, 20, 30)
#: Dates to the second a start time may be written as (``str(datetime.now())`` without
#: its microseconds, ``isoformat(timespec="seconds")``, ``time.ctime()``...).
SECOND_FORMATS = (
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%dT%H:%M:%SZ",
    "%Y-%m-%dT%H:%M:%S+00:00",
    "%Y%m%d%H%M%S",
    "%Y%m%d-%H%M%S",
    "%Y%m%dT%H%M%S",
    "%Y-%m-%d_%H-%M-%S",
    "%H:%M:%S",
    "%H%M%S",
)


@dataclass(frozen=True)
class Started:
    """A worker's start, as the check saw it: the clock before it was started and once
    it was ready, and the run's folder (whose runs log has the pids its tasks ran under)."""

    began: float
    ready: float
    folder: Path


def _pids(folder: Path) -> set[int]:
    """The pids (and parent pids) the runs log has, as the worker saw them and as the
    check does."""
    found: set[int] = set()
    with contextlib.suppress(OSError, ValueError):
        for _event, _task, pid, ppid in points.runs(folder):
            found |= {pid, ppid}
    with contextlib.suppress(OSError):
        for line in (folder / points.RUNS).read_text(encoding="utf-8").splitlines():
            fields = line.split()
            found |= {int(f) for f in (fields[2:3] + fields[-1:]) if f.isdigit()}
    # Pid 1 is an init, never the worker; 0 is none.
    return {pid for pid in found if pid > 1}


def _literals(source: str) -> set[str]:
    """The numbers and strings written in ``source``: a salt that is one of them (a
    version ``2``) is the module's own constant, not the worker's pid."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {
        str(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, str))
    }


def _hosts() -> set[str]:
    fqdn = socket.getfqdn()
    name = socket.gethostname()
    return {h for h in (name, name.split(".")[0], fqdn, fqdn.split(".")[0]) if h}


def start_salts(started: Started, offsets: tuple[float, ...] = ()) -> set[str]:
    """The texts of ``started`` a module may salt its keys with: the seconds the worker
    was starting in (whole, in buckets, counted from the bucket's start too), those
    seconds as dates in UTC, the local zone and at ``offsets``; the pids its tasks ran
    under; and the host's name next to each second and pid."""
    seconds = range(int(started.began) - START_SLACK_S, int(started.ready) + START_SLACK_S + 1)
    salts: set[str] = set()
    for second in seconds:
        for bucket in START_BUCKETS_S:
            salts |= {str(second // bucket), str(second // bucket * bucket)}
        moments = [datetime.fromtimestamp(second, UTC), datetime.fromtimestamp(second)]
        moments += [datetime.fromtimestamp(second + offset, UTC) for offset in offsets]
        salts |= {when.strftime(fmt) for when in moments for fmt in SECOND_FORMATS}
        salts |= {when.ctime() for when in moments}  # time.ctime(): "Sun Dec  6 00:31:02 2026"
    pids = {str(pid) for pid in _pids(started.folder)}
    with_host = {str(second) for second in seconds} | pids
    for host in _hosts():
        for sep in DATED_SEPARATORS[:8]:
            salts |= {host + sep + text for text in with_host}
            salts |= {text + sep + host for text in with_host}
    return salts | pids


def started_in(
    record: str,
    key: str,
    source: str,
    names: tuple[str, ...],
    started: Started,
    offsets: tuple[float, ...] = (),
    carried: tuple[str, ...] = (),
) -> str | None:
    """How ``record`` (a dedup record that is not ``key``) holds ``key`` next to the
    worker's start time, its pid or the host and either (``start_salts``), as a digest
    (``sha256('inv-1:1765000000')``) or as it is (``'inv-1:4242'``); None if it does not.
    A salt written in the module itself (a version number), or one the message gives
    (``carried``: its customer, its amount; the key's length), does not count: a pid in
    a namespace of its own is a small number, which those may be too."""
    given = _literals(source) | set(carried) | {str(len(key))}
    salts = start_salts(started, offsets) - given
    for text in _preimages(key, salts, templates_in(source), names):
        if text == record:
            return repr(text)
    return salted_digest_in(record, key, source, names, salts)
