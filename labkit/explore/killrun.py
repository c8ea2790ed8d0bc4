"""Run someone's script killed right after its n-th write: ``python -m labkit.explore.killrun``.

``labkit.explore.boundaries`` kills a function in a forked child. A script that another
process starts (exercise 9's consumer, run by the check as its own process) is killed
the same way from inside: this runner puts the script in a process group of its own,
watches its SQLite connections and its Redis commands, and runs it as ``__main__``::

    python -m labkit.explore.killrun LOG KILL_AFTER [MEET] SCRIPT [ARGS...]
    MEET: --meet FOLDER PARTIES [--skip KEY,KEY,...]

Each boundary is appended to ``LOG`` as a JSON line; ``KILL_AFTER`` (0: never) is the
boundary after which the whole group is SIGKILLed, announced in ``LOG`` just before.
``read_log(LOG)`` gives the boundaries and where the kill fell.

A Redis command that writes is a boundary once its reply has come back (the server has
done it, whatever the client does next): XADD, XACK, XREADGROUP (it hands an entry to a
consumer), SET, GETSET, HSET, RPUSH, EVAL, ..., whatever it replies (GETSET of a new key
replies nil, an HSET that updates a field 0: both wrote), unless its reply says for sure
that it did nothing (an XREADGROUP that found no entry, an XACK of nothing, a SET NX or
a SETNX that lost). A pipeline is one boundary when it executes: a transaction
(MULTI/EXEC) is applied whole, and an unwrapped pipeline's commands have all been sent
by then.

With ``--meet``, two consumers that read a record and write it later are made to race
(``labkit.explore.rendezvous``): each stops right after every Redis read of a key (any
key but those listed after ``--skip``: the stream, say) and right before every write of
one, every pipeline that writes and every script, until all ``PARTIES`` processes have
stopped as often, and stops no more once it has sent its first pipeline that writes
(a MULTI/EXEC) or script. An early "already done?" look
and the look that decides are both made by every consumer before any of them writes.
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

#: Redis commands that change no data: never a boundary. Any other command may write.
REDIS_READS = frozenset(
    """GET MGET EXISTS TYPE TTL PTTL EXPIRETIME PEXPIRETIME KEYS SCAN STRLEN GETRANGE
    SUBSTR GETBIT BITCOUNT BITPOS LCS LRANGE LLEN LINDEX LPOS HGET HGETALL HMGET HKEYS
    HVALS HLEN HEXISTS HSTRLEN HRANDFIELD HSCAN SMEMBERS SISMEMBER SMISMEMBER SCARD
    SRANDMEMBER SINTER SUNION SDIFF SINTERCARD SSCAN ZRANGE ZRANGEBYSCORE ZRANGEBYLEX
    ZREVRANGE ZREVRANGEBYSCORE ZREVRANGEBYLEX ZSCORE ZMSCORE ZRANK ZREVRANK ZCARD ZCOUNT
    ZLEXCOUNT ZRANDMEMBER ZSCAN XRANGE XREVRANGE XLEN XPENDING XREAD XINFO OBJECT MEMORY
    DUMP PING ECHO INFO WATCH UNWATCH MULTI CLIENT SELECT AUTH HELLO DBSIZE TIME SCRIPT
    COMMAND""".split()
)

#: Writes whose empty reply (0, nil, an empty list) says they changed nothing: an XACK
#: or a DEL of nothing, a SETNX that lost, a pop from an empty list.
NOTHING_WHEN_EMPTY = frozenset(
    """XACK XDEL XCLAIM DEL UNLINK SETNX HSETNX MSETNX RENAMENX SADD SREM SMOVE HDEL ZREM
    LREM LPUSHX RPUSHX LPOP RPOP SPOP ZPOPMIN ZPOPMAX LMOVE RPOPLPUSH GETDEL EXPIRE
    PEXPIRE EXPIREAT PEXPIREAT PERSIST""".split()
)

#: Commands that name no key (a meeting is at a read of a key).
KEYLESS = frozenset(
    "KEYS SCAN PING ECHO INFO WATCH UNWATCH MULTI CLIENT SELECT AUTH HELLO DBSIZE TIME "
    "SCRIPT COMMAND".split()
)

#: A transaction or a script: atomic, and the end of a consumer's meetings.
SCRIPTS = frozenset({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})


def _word(arg: Any) -> str:
    return arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)


def _split(args: tuple[Any, ...]) -> tuple[str, list[str]]:
    """The command's name and its other words ("XINFO STREAM" is sent as one argument)."""
    words = [*_word(args[0]).split(), *(_word(a) for a in args[1:])] if args else [""]
    return words[0].upper(), words[1:]


def _changed(name: str, reply: Any, args: list[str] | tuple[str, ...] = ()) -> bool:
    """False for a write whose reply says for sure that it did nothing: no boundary.

    An XREADGROUP that handed out no entry, an XAUTOCLAIM that claimed and dropped none,
    an XACK or a DEL of nothing, a SET NX or XX that lost (``args``: what follows the
    command's name). Any other write changed the server, whatever it replied: GETSET
    and SET ... GET reply nil for a new key, HSET 0 when it updated a field.
    """
    if name == "XREADGROUP":
        return any(found for _stream, found in (reply or []))
    if name == "XAUTOCLAIM":
        return bool(reply and (reply[1] or (len(reply) > 2 and reply[2])))
    if name == "SET":
        options = {a.upper() for a in args[2:]}
        if "GET" not in options:
            return reply not in (None, False)  # OK, or nil: an NX or XX that lost
        if "NX" in options:
            return reply is None  # the old value came back: it existed, nothing set
        return reply is not None or "XX" not in options
    if name in NOTHING_WHEN_EMPTY:
        return reply not in (None, 0, False, [], b"", "")
    return True


def _keys(name: str, words: list[str]) -> list[str]:
    """The keys a command names (its first one, for most)."""
    if name in KEYLESS or not words:
        return []
    if name in ("MGET", "EXISTS", "TOUCH", "DEL", "UNLINK", "SINTER", "SUNION", "SDIFF"):
        return words
    if name in ("MSET", "MSETNX"):
        return words[::2]
    if name in ("XINFO", "OBJECT", "MEMORY", "XGROUP"):
        return words[1:2]
    if name in SCRIPTS:
        return words[2 : 2 + int(words[1])] if len(words) > 1 and words[1].isdigit() else []
    if name in ("XREAD", "XREADGROUP"):
        upper = [w.upper() for w in words]
        after = words[upper.index("STREAMS") + 1 :] if "STREAMS" in upper else []
        return after[: len(after) // 2]
    return words[:1]


class Meeting:
    """Where a consumer run with ``--meet`` stops for the others (see the module)."""

    def __init__(self, rendezvous: Rendezvous, skip: frozenset[str]) -> None:
        self.rendezvous, self.skip = rendezvous, skip

    def _names_a_key(self, name: str, words: list[str]) -> bool:
        return any(k not in self.skip for k in _keys(name, words))

    def after(self, name: str, words: list[str]) -> None:
        """Right after a read (the read has been made): meet."""
        if name in REDIS_READS and self._names_a_key(name, words):
            self.rendezvous.meet()

    def before(self, name: str, words: list[str]) -> None:
        """Right before a write of a key it does not skip, a script or a transaction."""
        if name not in REDIS_READS and (name in SCRIPTS or self._names_a_key(name, words)):
            self.rendezvous.meet()

    def pipeline(self, commands: list[tuple[str, list[str]]], done: bool) -> None:
        """Before a pipeline that writes (``done`` False), after one that only reads."""
        writes = any(n not in REDIS_READS for n, _words in commands)
        if writes != done and (writes or any(self._names_a_key(*c) for c in commands)):
            self.rendezvous.meet()

    def leave(self) -> None:
        self.rendezvous.leave()


def _watch_redis(tracer: Tracer, meet: Meeting | None = None) -> None:
    try:
        from redis.client import Pipeline, Redis
    except ImportError:  # the script uses no Redis
        return
    plain: Callable[..., Any] = Redis.execute_command
    execute: Callable[..., Any] = Pipeline.execute
    immediate: Callable[..., Any] = Pipeline.immediate_execute_command

    def sent(send: Callable[..., Any], self: Any, args: tuple[Any, ...], options: Any) -> Any:
        name, words = _split(args)
        if meet is not None:
            meet.before(name, words)
        try:
            reply = send(self, *args, **options)
        finally:
            if meet is not None and name in SCRIPTS:
                meet.leave()
        if name not in REDIS_READS and _changed(name, reply, words):
            tracer.mark(name)
        if meet is not None:
            meet.after(name, words)
        return reply

    def execute_command(self: Any, *args: Any, **options: Any) -> Any:
        return sent(plain, self, args, options)

    def immediate_execute_command(self: Any, *args: Any, **options: Any) -> Any:
        # A pipeline after WATCH sends each command at once (WATCH, then the reads).
        return sent(immediate, self, args, options)

    def pipeline_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        commands = [_split(c[0]) for c in self.command_stack]
        names = [name for name, _words in commands]
        writes = any(n not in REDIS_READS for n in names)
        if meet is not None:
            meet.pipeline(commands, done=False)
        try:
            reply = execute(self, *args, **kwargs)
        finally:
            if meet is not None and writes:
                meet.leave()  # sent (a WatchError too): the race is decided
        if meet is not None:
            meet.pipeline(commands, done=True)
        if writes:
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
        folder, parties, *rest = rest[1:]
        skip: frozenset[str] = frozenset()
        if rest[:1] == ["--skip"]:
            skip, rest = frozenset(rest[1].split(",")), rest[2:]
        meet = Meeting(Rendezvous(folder, int(parties)), skip)
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
        if meet is not None:
            meet.leave()  # ended: the others wait for it no more
        tracer.finish()


if __name__ == "__main__":
    main(sys.argv[1:])
