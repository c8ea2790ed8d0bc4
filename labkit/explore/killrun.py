"""Run someone's script killed right after its n-th write: ``python -m labkit.explore.killrun``.

``labkit.explore.boundaries`` kills a function in a forked child. A script that another
process starts (exercise 9's consumer, run by the check as its own process) is killed
the same way from inside: this runner puts the script in a process group of its own,
watches its SQLite connections and its Redis commands, and runs it as ``__main__``::

    python -m labkit.explore.killrun LOG KILL_AFTER [--meet FOLDER PREFIX PARTIES] SCRIPT [ARGS...]

Each boundary is appended to ``LOG`` as a JSON line; ``KILL_AFTER`` (0: never) is the
boundary after which the whole group is SIGKILLed, announced in ``LOG`` just before.
``read_log(LOG)`` gives the boundaries and where the kill fell. With ``--meet``, the
script stops right after its first Redis read of a key starting with ``PREFIX`` until
``PARTIES`` processes have got that far (``labkit.explore.rendezvous``): two consumers
that read a done record and write it later both read before either writes.

A Redis command that can change the server is a boundary once its reply has come back
(the server has done it, whatever the client does next): XADD, XACK, XREADGROUP (it
hands an entry to a consumer), XAUTOCLAIM, SET, RPUSH, ..., unless its reply says it
did nothing (an XREADGROUP that found no entry, a SET NX that lost). A pipeline is one boundary
when it executes: a transaction (MULTI/EXEC) is applied whole, and an unwrapped
pipeline's commands have all been sent by then.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.explore.boundaries import Boundary, Tracer, parse_lines, student_code
from labkit.explore.rendezvous import Rendezvous

#: Redis commands that only read: never a boundary.
REDIS_READS = frozenset(
    """GET MGET EXISTS TYPE TTL PTTL KEYS SCAN STRLEN LRANGE LLEN LINDEX HGET HGETALL HMGET
    HKEYS HLEN SMEMBERS SISMEMBER SCARD ZRANGE ZSCORE ZCARD XRANGE XREVRANGE XLEN XPENDING
    XINFO PING ECHO INFO WATCH UNWATCH MULTI CLIENT SELECT AUTH HELLO DBSIZE TIME""".split()
)


def _changed(name: str, reply: Any) -> bool:
    """False for a reply that says the command did nothing: no boundary to kill after.

    An XREADGROUP that handed out no entry, an XAUTOCLAIM that claimed none, an XACK or a
    DEL of nothing, a SET NX that lost: the server is as it was.
    """
    if name == "XREADGROUP":
        return any(found for _stream, found in (reply or []))
    if name == "XAUTOCLAIM":
        return bool(reply and reply[1])
    return reply not in (None, 0, False, [], b"", "")


#: Reads that fetch no data: two copies meet where they read the record itself (an
#: EXISTS or GET), not at the WATCH before it, so a write sent outside that WATCH's
#: transaction races every time rather than when the scheduler happens to let it.
NOT_A_LOOK = frozenset({"WATCH", "UNWATCH", "MULTI"})


def _reads_prefix(args: tuple[Any, ...], prefix: str) -> bool:
    name = str(args[0]).split()[0].upper() if args else ""
    return name in REDIS_READS - NOT_A_LOOK and any(
        (a.decode(errors="replace") if isinstance(a, bytes) else str(a)).startswith(prefix)
        for a in args[1:]
    )


def _watch_redis(tracer: Tracer, meet: tuple[Rendezvous, str] | None = None) -> None:
    try:
        from redis.client import Pipeline, Redis
    except ImportError:  # the script uses no Redis
        return
    plain: Callable[..., Any] = Redis.execute_command
    execute: Callable[..., Any] = Pipeline.execute
    immediate: Callable[..., Any] = Pipeline.immediate_execute_command

    def execute_command(self: Any, *args: Any, **options: Any) -> Any:
        reply = plain(self, *args, **options)
        name = str(args[0]).split()[0].upper() if args else ""
        if name not in REDIS_READS and _changed(name, reply):
            tracer.mark(name)
        if meet is not None and _reads_prefix(args, meet[1]):
            meet[0].arrive()
        return reply

    def immediate_execute_command(self: Any, *args: Any, **options: Any) -> Any:
        # A pipeline after WATCH sends each command at once (WATCH, then the reads).
        reply = immediate(self, *args, **options)
        if meet is not None and _reads_prefix(args, meet[1]):
            meet[0].arrive()
        return reply

    def pipeline_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        names = [str(c[0][0]).split()[0].upper() for c in self.command_stack]
        reply = execute(self, *args, **kwargs)
        if any(n not in REDIS_READS for n in names):
            wrapped = "MULTI/EXEC" if self.transaction else "pipeline"
            tracer.mark(f"{wrapped} ({', '.join(names)})")
        return reply

    Redis.execute_command = execute_command  # type: ignore[method-assign]
    Pipeline.execute = pipeline_execute  # type: ignore[method-assign]
    Pipeline.immediate_execute_command = immediate_execute_command  # type: ignore[method-assign]


def read_log(path: str | Path) -> tuple[list[Boundary], int | None]:
    """The boundaries a killrun logged, and the one the kill fell after (None: no kill)."""
    try:
        lines = parse_lines(Path(path).read_bytes())
    except FileNotFoundError:
        return [], None
    kills = [int(m["kill"]) for m in lines if "kill" in m]
    found = [Boundary(*m["boundary"]) for m in lines if "boundary" in m]
    return found, (kills[0] if kills else None)


def main(argv: list[str]) -> None:
    log, kill_after, *rest = argv
    meet = None
    if rest[:1] == ["--meet"]:
        folder, prefix, parties, *rest = rest[1:]
        meet = (Rendezvous(folder, int(parties)), prefix)
    script, *args = rest
    if os.getpgrp() != os.getpid():  # a session leader already leads its own group
        os.setpgrp()  # the kill takes this group: the script and what it starts, nobody else
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    tracer = Tracer(out, int(kill_after) or None, student_code)
    tracer.watch_sqlite()
    _watch_redis(tracer, meet)
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        tracer.finish()


if __name__ == "__main__":
    main(sys.argv[1:])
