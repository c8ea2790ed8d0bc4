"""What a consumer sends to Redis, read back with ``MONITOR`` while it runs.

Some mistakes leave no trace at a check's scale: ``XTRIM <stream> MAXLEN ~ 100000`` after
each XACK removes nothing from a stream of a few hundred entries, yet drops unread
entries once a backlog of a hundred thousand builds up (an outage of the consumers). The
command says what the state cannot: any trim of the stream by length, any trim of the
dead-letter stream, any removal of a done record (a sorted set of them cut to its last
10000 keys). So with a claim under a name other than the consumer's own (a fixed
one, a dead consumer's): the PEL then names someone else, and whoever runs under that
name runs the entry beside the one that took it.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from labkit.clock import SystemClock

#: A MONITOR line's arguments: each one in double quotes, with ``\"`` and ``\\`` escaped.
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: Seconds to wait for the marker the check sends once the consumer is done.
_DRAIN_S = 10.0


@contextmanager
def _monitored(
    url: str, prefix: str, bare: list[list[str]] | None = None
) -> Iterator[Callable[[], list[list[str]]]]:
    """Every command naming a key under ``prefix`` (scripts' own commands too), sent while
    the block runs: call what this yields once the consumers are done. Yields a function
    that returns [] when the Redis refuses MONITOR (then nothing is judged from it).
    ``bare``, when given, also gets those of them sent outside any MULTI/EXEC and any
    script (MONITOR names a script's commands' client ``lua``)."""
    import redis

    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=_DRAIN_S)
    monitor = None
    with contextlib.suppress(redis.RedisError):
        monitor = client.monitor()  # type: ignore[no-untyped-call]
        monitor.__enter__()

    def sent() -> list[list[str]]:
        if monitor is None:
            return []
        marker = f"{prefix}:monitor-done:{uuid.uuid4().hex}"
        client.echo(marker)
        found: list[list[str]] = []
        # The clients (as MONITOR names them) between their MULTI and its EXEC.
        in_multi: set[str] = set()
        clock = SystemClock()
        deadline = clock.now() + _DRAIN_S
        with contextlib.suppress(redis.RedisError):
            while clock.now() < deadline:
                line = str(monitor.connection.read_response())
                if marker in line:
                    break
                head, _sep, rest = line.partition("]")
                who = head.rpartition(" ")[2]
                word = rest.strip().upper()
                if word == '"MULTI"':
                    in_multi.add(who)
                elif word in ('"EXEC"', '"DISCARD"'):
                    in_multi.discard(who)
                if prefix not in line:
                    continue
                args = [a.replace('\\"', '"') for a in _ARG.findall(rest)]
                # XREADGROUP names its stream after STREAMS, not first: kept whole.
                if any(a.startswith(f"{prefix}:") for a in args[1:2]) or (
                    args[:1] and args[0].upper() == "XREADGROUP"
                ):
                    found.append(args)
                    if bare is not None and who != "lua" and who not in in_multi:
                        bare.append(args)
        return found

    try:
        yield sent
    finally:
        if monitor is not None:
            with contextlib.suppress(redis.RedisError):
                monitor.__exit__(None, None, None)
        client.close()


def _trim_of(args: list[str]) -> str | None:
    """MAXLEN or MINID when the command (XTRIM or XADD) trims its stream, else None."""
    name = args[0].upper() if args else ""
    words = [a.upper() for a in args[2:]]
    if name == "XTRIM":
        return words[0] if words else "MAXLEN"
    if name != "XADD":
        return None
    for word in words[:2]:  # [NOMKSTREAM] [MAXLEN|MINID ...] before the ID
        if word in ("MAXLEN", "MINID"):
            return word
    return None


def _trims(commands: list[list[str]], stream: str, dead: str) -> list[str]:
    """The commands that trim ``stream`` by length or ``dead`` at all, as sent."""
    bad = []
    for args in commands:
        how = _trim_of(args)
        if how is not None and (args[1] == dead or (args[1] == stream and how == "MAXLEN")):
            bad.append(" ".join(args[:6]))
    return list(dict.fromkeys(bad))


#: Commands that take something out of a list (or the whole key): on the effects list,
#: each one loses an effect. ``LMOVE``/``RPOPLPUSH``/``BLMOVE`` take from their first key.
_LIST_REMOVALS = ("LTRIM", "LPOP", "RPOP", "BLPOP", "BRPOP", "LREM", "LMPOP", "LMOVE",
                  "BLMOVE", "RPOPLPUSH", "BRPOPLPUSH", "LSET", "DEL", "UNLINK", "EXPIRE",
                  "PEXPIRE", "EXPIREAT", "PEXPIREAT", "RENAME")  # fmt: skip


def _effect_removals(commands: list[list[str]], effects: str) -> list[str]:
    """The commands that remove from ``effects`` (a cap of the list, LTRIM 0 999, a pop,
    its deletion or expiry), as sent: a cap that removes nothing at a check's scale loses
    effects once the list is longer, and every applied key must stay in it."""
    bad = []
    for args in commands:
        name = args[0].upper() if args else ""
        if name in _LIST_REMOVALS and effects in args[1:]:
            bad.append(" ".join(args[:5]))
    return list(dict.fromkeys(bad))


#: Commands that take a member, a field or a whole key away, or give a key a TTL: on the
#: done records, each one lets a late copy of a key done long ago apply again.
_RECORD_REMOVALS = frozenset(
    {*_LIST_REMOVALS, "GETDEL", "SREM", "SPOP", "SMOVE", "HDEL", "HGETDEL",
     "HEXPIRE", "HPEXPIRE", "HEXPIREAT", "HPEXPIREAT", "ZREM", "ZREMRANGEBYRANK",
     "ZREMRANGEBYSCORE", "ZREMRANGEBYLEX", "ZPOPMIN", "ZPOPMAX", "BZPOPMIN", "BZPOPMAX",
     "ZMPOP", "BZMPOP", "RENAMENX"}
)  # fmt: skip


def _record_removals(commands: list[list[str]], done: str) -> list[str]:
    """The commands that remove a done record (a key ``done`` or ``done:<key>``, a member
    or a field of one) or set a TTL on it, as sent: a cap of the records (the last 10000
    keys of a sorted set) removes nothing at a check's scale, and a copy of a key whose
    record went is applied a second time."""
    bad = []
    for args in commands:
        name = args[0].upper() if args else ""
        options = {a.upper() for a in args[3 if name == "SET" else 2 :]}  # SET's after its value
        expires = name in ("SET", "GETEX") and bool({"EX", "PX", "EXAT", "PXAT"} & options)
        if not (name in _RECORD_REMOVALS or expires):
            continue
        keys = args[1:] if name in ("DEL", "UNLINK") else args[1:2]
        if any(k == done or k.startswith(f"{done}:") for k in keys):
            bad.append(" ".join(args[:5]))
    return list(dict.fromkeys(bad))


def _bare_dead_letters(bare: list[list[str]], dead: str) -> list[str]:
    """The XADDs to ``dead`` among ``bare`` (commands sent outside MULTI/EXEC and any
    script), as sent: a dead letter and its XACK sent apart (a pipeline without MULTI,
    two calls) can be split, and the entry is dead-lettered twice or lost."""
    found = [
        " ".join(args[:3]) for args in bare if args[0].upper() == "XADD" and args[1:2] == [dead]
    ]
    return list(dict.fromkeys(found))


#: Commands that push onto a list: on the effects list, each one is an effect.
_LIST_PUSHES = ("RPUSH", "LPUSH", "RPUSHX", "LPUSHX")


def _bare_effects(bare: list[list[str]], effects: str) -> list[str]:
    """The pushes to ``effects`` among ``bare`` (commands sent outside MULTI/EXEC and any
    script), as sent: an effect sent apart from its done record and its XACK (a path of
    its own for claimed entries, say) is split from them by a kill, and the entry is
    applied twice or acknowledged unapplied."""
    found = [
        " ".join(args[:3])
        for args in bare
        if args and args[0].upper() in _LIST_PUSHES and args[1:2] == [effects]
    ]
    return list(dict.fromkeys(found))


def _unacked(commands: list[list[str]], stream: str, ids: dict[str, str]) -> list[str]:
    """The keys in ``ids`` (key -> entry ID) whose entry no command among ``commands``
    acknowledges (XACK, or XACKDEL, naming the ID on ``stream``); [] when MONITOR said
    nothing. An XDEL alone takes the entry out of the stream, not out of the PEL: it stays
    pending, with no fields, until an XAUTOCLAIM drops it."""
    if not commands:
        return []
    acked = {
        arg
        for args in commands
        if args[0].upper().startswith("XACK") and args[1:2] == [stream]
        for arg in args[3:]
    }
    return [key for key, entry_id in ids.items() if entry_id not in acked]


def _hasty_claims(commands: list[list[str]], stream: str, idle_ms: int) -> list[str]:
    """The XCLAIM and XAUTOCLAIM commands on ``stream`` whose min-idle-time is below
    ``idle_ms``, as sent: Redis checks the idle time at the claim itself, so a claim with
    a smaller one (XPENDING ... IDLE first, then XCLAIM ... 0) also takes an entry another
    rescuer claimed between the two commands, and both run it."""
    hasty = []
    for args in commands:
        if len(args) > 4 and args[0].upper() in ("XCLAIM", "XAUTOCLAIM") and args[1] == stream:
            try:
                if float(args[4]) < idle_ms:
                    hasty.append(" ".join(args[:6]))
            except ValueError:
                continue
    return list(dict.fromkeys(hasty))


def _foreign_names(commands: list[list[str]], stream: str, consumer: str) -> list[str]:
    """The XREADGROUP, XCLAIM and XAUTOCLAIM commands on ``stream`` sent under a consumer
    name other than ``consumer``, as sent: an entry read or claimed under another name
    (a fixed one, a dead consumer's) is that name's in the PEL, so whoever runs under that
    name (the dead one restarted, XREADGROUP ... 0) runs it beside the one that took it."""
    foreign = []
    for args in commands:
        name = args[0].upper() if args else ""
        if name == "XREADGROUP":
            words = [a.upper() for a in args]
            if len(args) < 4 or words[1] != "GROUP" or "STREAMS" not in words:
                continue
            on_stream = stream in args[words.index("STREAMS") + 1 :]
        elif name in ("XCLAIM", "XAUTOCLAIM"):
            on_stream = len(args) > 3 and args[1] == stream
        else:
            continue
        if on_stream and args[3] != consumer:
            foreign.append(" ".join(args[:4]))
    return list(dict.fromkeys(foreign))


def calls_so_far(r: Any, *commands: str) -> int | None:
    """How many of ``commands`` (``"xreadgroup"``, ``"xinfo|consumers"``) the Redis has
    run since it started (INFO commandstats), or None when it will not say. Other
    clients' calls count too: only ever more."""
    with contextlib.suppress(Exception):
        stats = r.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in commands)
    return None


def _until_under_way(r: Any, proc: subprocess.Popen[str], prefix: str, dead_before: int) -> None:
    """Return once the consumer has applied 40 entries and dead-lettered 10 (a trim after
    each XACK or dead letter has been sent by then), or has ended: MONITOR's lines cost the
    check, and the rest of the run would only repeat them."""
    clock = SystemClock()
    deadline = clock.now() + 30.0
    while proc.poll() is None and clock.now() < deadline:
        with contextlib.suppress(Exception):  # a key of another type: judged afterwards
            if r.llen(f"{prefix}:effects") >= 40 and r.xlen(f"{prefix}:dead") >= dead_before + 10:
                return
        clock.sleep(0.02)
