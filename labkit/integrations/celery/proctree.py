"""Look at and wait on processes through Linux's /proc: children, groups, liveness.

The lab's harnesses use these to prove what they claim: that a killed process is gone,
that a worker's pool child was replaced, that no process of a run outlived it. ``psutil``
is the library a production tool would use for the same questions.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

from labkit.clock import Clock, SystemClock


def wait_until(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    *,
    clock: Clock | None = None,
    every: float = 0.05,
) -> None:
    """Poll ``predicate`` until it is true; ``TimeoutError`` naming ``what`` after ``timeout``."""
    clock = clock or SystemClock()
    deadline = clock.now() + timeout
    while not predicate():
        if clock.now() > deadline:
            raise TimeoutError(f"still waiting after {timeout:g}s for {what}")
        clock.sleep(every)


def _stat(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` after the command name: state, ppid, pgrp, ...; None if gone."""
    # A plain read, not Path.read_text: the checks scan every process of the machine
    # for a worker's pool children many times a check, and the text layer tripled it.
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.read(fd, 4096).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    if ")" not in stat:
        return None  # gone as it was read
    # The command name in parentheses may hold spaces; the fields after it do not.
    return stat.rsplit(")", 1)[1].split()


def _ppid(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields and fields[0] != "Z" else None


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and fields[0] != "Z" and int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found


def pid_namespace(pid: int | str = "self") -> str:
    """The pid namespace ``pid`` is in (``pid:[4026531836]``), or "" where it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def host_pids(wanted: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The pids, as this process sees them, of processes known as ``(namespace, pid in it)``.

    A process in a pid namespace of its own (the grader starts each spawned worker in
    one) knows only its number inside it, which the lab writes into its markers; this
    finds the live process that number means. Missing from the answer: gone (or never).
    """
    namespaces = {ns for ns, _ in wanted}
    found: dict[tuple[str, int], int] = {}
    if not namespaces:
        return found
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or pid_namespace(entry.name) not in namespaces:
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            status = (entry / "status").read_text()
            line = next(ln for ln in status.splitlines() if ln.startswith("NSpid:"))
            inner = int(line.split()[-1])  # the innermost namespace's number comes last
            key = (pid_namespace(entry.name), inner)
            if key in wanted:
                found[key] = int(entry.name)
    return found


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead and not yet reaped, is not alive)."""
    return _ppid(pid) is not None


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux /proc), oldest first."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _ppid(int(entry.name)) == pid:
            found.append(int(entry.name))
    return sorted(found)


def leftovers(tag: str) -> list[int]:
    """Pids of live processes whose command line contains ``tag`` (should be [] after a run)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if tag in cmdline and _ppid(int(entry.name)) is not None:
            found.append(int(entry.name))
    return sorted(found)


def descendants_of(pid: int) -> list[int]:
    """Live descendants of ``pid`` (children, their children, ...), nearest first.

    Follows the parent pids in /proc, so it finds a process whatever session or group it
    moved to (bubblewrap's ``--new-session`` puts the command in a session of its own).
    """
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _ppid(int(entry.name))
            if parent is not None:
                kids.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    level = [pid]
    while level:
        level = sorted(child for p in level for child in kids.get(p, []) if child not in found)
        found += level
    return found


def argv_of(pid: int) -> list[str]:
    """The command line of ``pid`` as a list ([] if it is gone or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]


def kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid`` and every descendant; the pids that were signalled.

    The tree is stopped first (SIGSTOP: a stopped process cannot fork a child that
    would escape the count), looked at again until it stops growing, then killed
    (children first is not needed: SIGKILL on a stopped process is acted on at once).
    """
    tree: list[int] = []
    for _ in range(20):
        now = [p for p in [pid, *descendants_of(pid)] if p not in tree]
        if not now:
            break
        for p in now:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGSTOP)
        tree += now
    for p in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
    return tree
