"""Hidden checks for exercise 9: a key delivered twice (one after the other, to two
consumers at once, and to one while another is slow on its copy) and a done record that
never expires, named by the key itself, a dependency down for a while (with a
max_deliveries other than the usual 3), the delivery count of the entry in hand while
another consumer holds an older one (kept in the stream while more than a stream node of
newer entries is acknowledged), what ``consume`` returns (on a second call, by two
consumers racing on one key, too, and with entries deleted from the stream while
pending), an entry deleted while pending with another behind it, how often a waiting
consumer looks again, a backlog of hundreds of entries (no done record ever removed),
keys that differ only in case, in a trailing space, in accents or in characters a pattern
would read, a key sent again after its entry was dead-lettered, a poison entry that
reaches each new consumer by XAUTOCLAIM (dead-lettered in a MULTI there too), entries
claimed one at a time and applied in a MULTI, a dead consumer's entry behind busy
ones claimed while new entries keep coming, and a poison entry dead-lettered after exactly
max_deliveries runs with a reason."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import uuid

from labkit.clock import SystemClock
from labkit.explore.rendezvous import arrived
from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.exercises.ex09.commands import (
    _bare_dead_letters,
    _bare_effects,
    _effect_removals,
    _hasty_claims,
    _monitored,
    _record_removals,
    _trims,
    _until_under_way,
    calls_so_far,
)
from labkit.grading.exercises.ex09.consumers import GROUP, RUN_S, Stream, expect_once_each, stream
from labkit.grading.exercises.ex09.delivery_checks import HELD_JOB, HELD_WORK_S
from labkit.grading.exercises.ex09.heldjob import gate_in
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.lang import _

CHECKS = Checks("ex09", hidden=True)


@CHECKS.add(
    2,
    "a producer may XADD the same key twice (at-least-once publishing): the record "
    "<prefix>:done:<key> must stop the second effect, and the entry is still XACKed",
    90,
    severe=True,
)
def a_second_delivery_of_a_done_key_is_not_applied(ns: Namespace) -> None:
    with stream(ns) as s:
        s.add("order:7", cents=700, attempt=1)
        s.finish(s.start("a"), _("the first copy"))
        # The producer's retry carries its own attempt number (fields in another order):
        # the same key, another payload text. The key alone says it is done.
        s.add("order:7", attempt=2, cents=700)
        s.add("order:8", cents=800)
        s.finish(s.start("b"), _("a second copy of the same key"))
        expect_once_each(
            s,
            ["order:7", "order:8"],
            _(
                "name the record <prefix>:done:<key> by the entry's key alone (a producer's "
                "retry may carry another payload, another entry ID), and read it in the step "
                "that applies the key"
            ),
        )
        expect_nothing_expires(s)


def expect_nothing_expires(s: Stream) -> None:
    """No key under the stream's prefix has a TTL: a done record that expires lets a late
    copy of its key (a producer's retry an hour on) apply again."""
    expiring = sorted(
        key.removeprefix(f"{s.prefix}:")
        for key in s.r.scan_iter(match=f"{s.prefix}:*")
        if s.r.ttl(key) >= 0
    )
    expect(
        not expiring,
        _("the done records kept for good (no TTL): a key is applied at most once, ever"),
        _("keys under the prefix that expire: {keys}").format(keys=expiring),
        _(
            "write <prefix>:done:<key> without EX, PX or EXPIRE: once it has expired, a "
            "late copy of the key (a producer's retry) is applied again"
        ),
    )


@CHECKS.add(
    2,
    "an entry that fails while a dependency is down stays pending and succeeds on a "
    "later delivery; only the delivery cap (max_deliveries, as given) dead-letters",
    90,
    severe=True,
)
def a_flaky_entry_is_retried_not_dead_lettered(ns: Namespace) -> None:
    with stream(ns) as s:
        # Fails 3 times and max_deliveries is 4, not the usual 3: a cap of your own (3)
        # instead of the argument dead-letters it before its fourth, good delivery.
        s.add("flaky", cents=100, flaky=3)
        s.finish(s.start("a", max_deliveries=4), _("an entry that fails three times"))
        expect(
            s.dead() == [],
            _("no dead letters: max_deliveries is 4 and it succeeded on delivery 4"),
            _("dead letters {dead}").format(dead=[d.get("key") for d in s.dead()]),
            _(
                "compare the delivery count with the max_deliveries consume was given, not "
                "with a constant of yours"
            ),
        )
        expect_once_each(s, ["flaky"], _("leave a failed entry pending; it comes back"))


@CHECKS.add(
    2,
    "two consumers holding copies of one key at once: both may read the done record "
    "before either writes it, so read it under WATCH (or in a Lua script) and write it, "
    "the effect and the XACK in the MULTI that WATCH guards",
    90,
    severe=True,
)
def two_copies_of_a_key_at_once_apply_once(ns: Namespace) -> None:
    tag = uuid.uuid4().hex[:8]
    meet, log = ns.workdir / f".labkit-meet-{tag}", ns.workdir / f".killrun-{tag}.log"
    try:
        with stream(ns) as s:
            s.add("order:5", cents=500)
            s.add("order:5", cents=500)  # a producer's retry: the same key, a second entry
            # Each consumer stops right after each read of a record (a done record, a
            # hash of them: any key but the stream's, the effects' and the dead letters')
            # until the other has made as many: both make their last read before either
            # writes, however early they looked first.
            runner = s.racing(log, meet)
            a = s.start("a", idle_ms=600_000, runner=runner)
            b = s.start("b", idle_ms=600_000, runner=runner)
            s.finish(a, _("the first of two consumers"))
            s.finish(b, _("the second of two consumers"))
            both = arrived(meet) if meet.exists() else 0
            fix = _(
                "read <prefix>:done:<key> under WATCH (or in a Lua script), then write "
                "it, the effect and the XACK in the MULTI the WATCH guards"
            )
            expect_once_each(
                s,
                ["order:5"],
                _("both consumers read the done record before either wrote it: {fix}").format(
                    fix=fix
                )
                if both == 2
                else fix,
            )
            # Staggered: 'c' alone under the meeting runner, the check its other party.
            # 'c' stops right after its first read of a record (or before its first write
            # of one, or its script) while 'd' applies the other copy of 'order:6'; then
            # the check leaves and 'c' goes on. A look made before the WATCH is set (before
            # run_job, or just before the WATCH itself) is out of date when 'c' writes: in
            # the meetings above both consumers WATCH before either writes, which hides it.
            s.add("order:6", cents=600)
            s.add("order:6", cents=600)
            alone = ns.workdir / f".labkit-meet-{tag}-c"
            slow = s.start("c", idle_ms=600_000, runner=s.racing(log, alone))
            clock = SystemClock()
            deadline = clock.now() + RUN_S
            while slow.poll() is None and not (alone.exists() and arrived(alone)):
                if clock.now() > deadline:
                    break
                clock.sleep(0.02)
            other = s.start("d", idle_ms=600_000)
            while other.poll() is None and slow.poll() is None and clock.now() < deadline:
                if "order:6" in s.applied():
                    break
                clock.sleep(0.02)
            alone.mkdir(parents=True, exist_ok=True)
            (alone / "check.gone").touch()  # the check meets no more: 'c' goes on
            s.finish(other, _("a consumer started while another holds its copy"))
            s.finish(slow, _("the consumer stopped right after its look at the record"))
            expect_once_each(
                s,
                ["order:5", "order:6"],
                _(
                    "one consumer looked at the done record, and another applied the key "
                    "before the first set its WATCH: {fix}; a look made before the WATCH "
                    "(before run_job, or just before the WATCH itself) is out of date by the "
                    "time the MULTI runs"
                ).format(fix=fix),
            )
    finally:
        shutil.rmtree(meet, ignore_errors=True)
        shutil.rmtree(ns.workdir / f".labkit-meet-{tag}-c", ignore_errors=True)
        log.unlink(missing_ok=True)


def _read_by(s: Stream, key: str, consumer: str, idle_ms: int | None = None) -> str:
    """A new entry for ``key``, read (and left pending) by ``consumer``; with ``idle_ms``,
    idle that long, as if its reader had died then. Its ID."""
    entry = s.add(key, cents=100)
    s.r.xreadgroup(GROUP, consumer, {s.stream: ">"}, count=1)
    if idle_ms is not None:
        s.r.xclaim(s.stream, GROUP, consumer, 0, [entry], idle=idle_ms, justid=True)
    return entry


def deleted_while_pending(s: Stream) -> list[str]:
    """Two entries deleted from the stream (XDEL: an operator's cleanup, an XTRIM) while
    pending: one that consumer 'a' read in an earlier life, one that a dead consumer 'z'
    holds, idle 700 s. Their IDs. Redis 7 answers an XREADGROUP ... 0 by 'a' with the
    first one's ID and no fields until it is XACKed; an XAUTOCLAIM drops either from the
    PEL, whatever its idle time. Skipped with no XACK and no XAUTOCLAIM, the first stays
    pending."""
    mine = _read_by(s, "deleted:a", "a")
    theirs = _read_by(s, "deleted:z", "z", idle_ms=700_000)
    s.r.xdel(s.stream, mine, theirs)
    return [mine, theirs]


def _still_pending(s: Stream, ids: list[str]) -> list[str]:
    return [str(p["message_id"]) for p in s.pending() if str(p["message_id"]) in ids]


def _gone_hint() -> str:
    return _(
        "an entry deleted from the stream (XDEL, XTRIM) while pending comes back from "
        "XREADGROUP ... 0 with its ID and no fields (an empty dict in redis-py) until it "
        "leaves the PEL: nothing is left to run, so XACK it (or let an XAUTOCLAIM drop it: "
        "it drops such entries whatever their idle time) and look again. Read as an entry "
        "it crashes the consumer; skipped and never XACKed, it stays pending, first in "
        "line, and hides your other pending entries"
    )


@CHECKS.add(
    1,
    "return how many entries THIS call applied: an entry whose key was done already is "
    "only acknowledged, and an entry deleted from the stream while pending has nothing to "
    "run and leaves the PEL: neither counts",
    60,
)
def returns_how_many_it_applied(ns: Namespace) -> None:
    with stream(ns) as s:
        gone = deleted_while_pending(s)
        # One more that the dead consumer 'z' holds, idle 700 s: 'a' claims it (XAUTOCLAIM)
        # and applies it, which counts as much as an entry it read itself.
        _read_by(s, "order:0", "z", idle_ms=700_000)
        for key in ("order:1", "order:2", "order:1"):  # the producer sent order:1 twice
            s.add(key, cents=100)
        s.add("flaky", cents=100, flaky=99)  # fails every time: dead-lettered after 2
        try:
            s.finish(
                s.start("a", max_deliveries=2),
                _(
                    "four entries for three keys (one a dead consumer held), and one that "
                    "fails until it is dead-lettered"
                ),
            )
        except CheckFailed as failed:
            if _still_pending(s, gone[:1]):
                failed.hint = _gone_hint()
            raise
        left = _still_pending(s, gone)
        expect(
            not left,
            _(
                "the entry 'a' held before it started and one a dead consumer held, both "
                "deleted from the stream since (XDEL), gone from the PEL"
            ),
            _("still pending: {ids}").format(ids=left),
            _gone_hint(),
        )
        expect_once_each(
            s, ["order:0", "order:1", "order:2"], _("check the done record atomically")
        )
        dead = [d.get("key") for d in s.dead()]
        expect(
            dead == ["flaky"],
            _(
                "only 'flaky' dead-lettered: the second copy of 'order:1', whose key was done, "
                "acknowledged at once"
            ),
            _("dead letters {dead}").format(dead=dead),
            _(
                "XACK a copy of a done key in the same MULTI, whatever the record says: left "
                "pending, it comes back until the delivery cap dead-letters a healthy entry"
            ),
        )
        last = s.printed.strip().splitlines()[-1:]
        expect(
            last == ["3"],
            _(
                "consume to return 3 (printed by the file's __main__): three keys applied, "
                "'order:0' claimed from a dead consumer among them; a copy of a done key "
                "(only acknowledged), a failed run, a dead letter and an entry deleted from "
                "the stream while pending do not count"
            ),
            _("it printed {printed}").format(printed=last[0] if last else _("nothing")),
            _(
                "add 1 whenever the MULTI that pushed the key to the effects list has run, "
                "whether you read the entry or claimed it (XAUTOCLAIM), and only then: not "
                "for a copy of a done key, a run_job that raised, a dead letter or the XACK "
                "of an entry deleted from the stream"
            ),
        )
        # A second call on the same stream, by two consumers at once: what each applied,
        # not what the list holds. Both hold a copy of 'order:3' and read its done record
        # before either writes it: one MULTI applies it, the other fails (WatchError) and
        # applied nothing.
        s.add("order:3", cents=100)
        s.add("order:3", cents=100)  # the producer sent it twice
        s.add("order:2", cents=100)  # a copy of a key the first call applied
        tag = uuid.uuid4().hex[:8]
        meet, log = ns.workdir / f".labkit-meet-{tag}", ns.workdir / f".killrun-{tag}.log"
        runner = s.racing(log, meet)
        try:
            b = s.start("b", runner=runner)
            c = s.start("c", runner=runner)
            printed = []
            for proc, name in ((b, "b"), (c, "c")):
                s.finish(proc, _("a second call by consumer {name}").format(name=repr(name)))
                printed.append((s.printed.strip().splitlines()[-1:] or [_("nothing")])[0])
        finally:
            shutil.rmtree(meet, ignore_errors=True)
            log.unlink(missing_ok=True)
        expect_once_each(
            s, ["order:0", "order:1", "order:2", "order:3"], _("check the done record atomically")
        )
        expect(
            sorted(printed) == ["0", "1"],
            _(
                "a second call, by two consumers at once after the first call had applied 3 "
                "keys, to return 1 in one of them and 0 in the other: one applied 'order:3' "
                "(sent twice); the other copy of 'order:3' and the copy of 'order:2' were "
                "done already"
            ),
            _("'b' printed {b}, 'c' printed {c}").format(b=printed[0], c=printed[1]),
            _(
                "count in a local variable what this call applied, and add 1 only once the "
                "MULTI has run: the length of the effects list (LLEN) also counts what earlier "
                "calls and other consumers applied, and a MULTI that raised WatchError "
                "(another consumer applied the key first) applied nothing"
            ),
        )


@CHECKS.add(
    1,
    "an entry of yours deleted from the stream while pending leaves the PEL (XACK or "
    "XAUTOCLAIM) and hides none of your other pending entries: the one behind it is run",
    60,
    severe=True,
)
def a_deleted_entry_hides_none_of_yours(ns: Namespace) -> None:
    with stream(ns) as s:
        # 'a' held two entries when it died: the first deleted from the stream since (an
        # operator's cleanup), idle 700 s; 'order:1', behind it, never finished. Skipped
        # and never dropped from the PEL, the first is what XREADGROUP ... 0 returns for
        # ever, and 'order:1' waits behind it: nobody else takes an entry of 'a's.
        gone = s.add("deleted:a", cents=100)
        s.add("order:1", cents=100)
        s.r.xreadgroup(GROUP, "a", {s.stream: ">"}, count=2)
        s.r.xclaim(s.stream, GROUP, "a", 0, [gone], idle=700_000, justid=True)
        s.r.xdel(s.stream, gone)
        try:
            s.finish(
                s.start("a"),
                _(
                    "a restart of 'a', which holds an entry deleted from the stream and one "
                    "behind it"
                ),
            )
        except CheckFailed as failed:
            if _still_pending(s, [gone]):
                failed.hint = _gone_hint()
            raise
        expect_once_each(s, ["order:1"], _gone_hint())


#: Newer entries behind the one another consumer holds: past the 100 entries of a stream
#: node (Redis's stream-node-max-entries), all that an approximate trim removes at once.
BEHIND = 120
#: Acknowledged entries between 'held' and the poison: past the round caps a consumer
#: might trim its stream to (1000, 10000 or 20000 entries, ~ or not). Written by a Lua
#: script in Redis itself: twenty-five thousand XADDs cost a few hundredths of a second.
HISTORY = 25_000
#: Entries another consumer holds between 'held' and the poison: past a page of the
#: PEL (XPENDING ... - + 10, 100 or 1000) a delivery count might be looked up in.
AHEAD = 1_100
#: XADD ARGV[1] entries to KEYS[1], with keys ARGV[3]..1 to ARGV[3]..n and the fields and
#: values ARGV[4..] besides; the last entry's ID. ARGV[2]: "*" (IDs of now), or the
#: millisecond all the entries' IDs are in (<ms>-1 to <ms>-n).
FILL = """
local last, id
for n = 1, tonumber(ARGV[1]) do
  id = ARGV[2] == '*' and '*' or (ARGV[2] .. '-' .. n)
  last = redis.call('XADD', KEYS[1], id, 'key', ARGV[3] .. n, unpack(ARGV, 4))
end
return last
"""


@CHECKS.add(
    2,
    "read the delivery count of the entry you are about to run (XPENDING <stream> "
    "workers <id> <id> 1), not of the first pending entry: while another consumer holds "
    "an older entry, the poison entry must still stop after max_deliveries",
    90,
    severe=True,
)
def the_delivery_count_is_the_entrys_own(ns: Namespace) -> None:
    with stream(ns) as s:
        # Older, held by 'b'; sent over a year ago (its ID says so), read only now, as
        # the history after it: a trim by age (XTRIM MINID of a day or a week ago, ~ or
        # not) reaches it as a trim by length does.
        sent = int(s.r.time()[0]) * 1000 - 400 * 86_400_000
        held = s.add("held", at=f"{sent}-0", cents=100, work_s=60, slow_deliveries=1)
        holder = s.start("b", idle_ms=600_000)
        s.wait_held(holder, "b", "held")
        # A busy stream: HISTORY entries since 'held', read and acknowledged by consumers
        # long gone (the group's last-delivered ID moved past them, none pending), so a
        # length cap (XTRIM MAXLEN 1000, 10000 or 20000, ~ or not) reaches 'held' itself.
        payload = json.dumps({"cents": 100})
        last = s.r.eval(FILL, 1, s.stream, HISTORY, sent, "old:", "payload", payload)
        s.r.xgroup_setid(s.stream, GROUP, last)
        # Older than the poison too: AHEAD entries a live consumer holds and works on. A
        # delivery count looked up in a page of the PEL (XPENDING <stream> workers - + 10,
        # 100 or 1000) never finds the poison behind them, and a default of 1 runs it for
        # ever. Acknowledged by the check once the poison is judged.
        s.r.eval(FILL, 1, s.stream, AHEAD, "*", "busy:", "payload", payload)
        busy = [
            entry_id
            for _name, found in s.r.xreadgroup(GROUP, "at-work", {s.stream: ">"}, count=AHEAD)
            for entry_id, _fields in found
        ]
        s.add("poison", cents=100, crash=True)
        # Newer entries 'a' applies while 'b' still holds 'held': more than a stream node
        # holds (100 entries), so an approximate trim after an XACK (XTRIM MINID ~, MAXLEN
        # ~) drops the whole node 'held' is in, which an exact trim of what is acked keeps.
        # The last one always fails: its dead letter comes after them all (a trim after a
        # dead letter only).
        newer = [f"order:{n}" for n in range(BEHIND)]
        pipe = s.r.pipeline(transaction=False)
        for key in newer:
            pipe.xadd(s.stream, {"key": key, "payload": json.dumps({"cents": 100})})
        pipe.xadd(s.stream, {"key": "broken", "payload": json.dumps({"cents": 100, "flaky": 99})})
        pipe.execute()
        # How many runs exactly is dead_letters_after_exactly_max_deliveries_with_a_reason's
        # business (a cap off by one is not severe): here, whether the cap stops it at all.
        crashes, clock = 0, SystemClock()
        while crashes <= 5:
            proc = s.start("a", max_deliveries=3, idle_ms=600_000)
            deadline = clock.now() + RUN_S
            while proc.poll() is None and not s.dead() and clock.now() < deadline:
                clock.sleep(0.02)
            if s.dead() or proc.poll() is None:
                break  # 'a' dead-lettered the poison and waits for 'held'
            crashes += 1
        expect(
            [d.get("key") for d in s.dead()][:1] == ["poison"],
            _(
                "the poison entry dead-lettered once delivered more than max_deliveries (3) "
                "times, while 'b' holds the older entry 'held' and 'at-work' {count} more"
            ).format(count=AHEAD),
            _("{count} crashes; dead letters {dead}").format(
                count=crashes, dead=[d.get("key") for d in s.dead()]
            ),
            _(
                "ask XPENDING for the entry in hand itself (XPENDING <stream> workers <id> <id> "
                "1): a page of the PEL (the first 10, 100 or 1000 entries) searched for it misses "
                "an entry behind as many older ones, and a count of 1 by default never stops it"
            ),
        )
        # 'a' applies the newer entries and dead-letters 'broken', then waits for 'held'.
        deadline = clock.now() + RUN_S
        while proc.poll() is None and len(s.dead()) < 2 and clock.now() < deadline:
            clock.sleep(0.02)
        expect(
            bool(s.r.xrange(s.stream, held, held)),
            _(
                "'held', which 'b' still works on, kept in the stream while 'a' applies "
                "{count} newer entries and dead-letters one"
            ).format(count=BEHIND),
            _("it was removed from the stream before anyone applied it"),
            _(
                "never remove an entry nobody has acknowledged: an XTRIM after your own "
                "XACK or dead letter, MINID or MAXLEN, approximate (~) or not, also removes "
                "older entries that another consumer still holds, whole stream nodes of them "
                "with ~"
            ),
        )
        s.r.xack(s.stream, GROUP, *busy)  # 'at-work' is done with its entries
        ns.kill(holder)  # 'b' restarts and finishes 'held' quickly (its second delivery)
        holder.communicate()
        s.finish(s.start("b", idle_ms=600_000), _("a restart of 'b'"))
        s.finish(proc, _("'a' once the poison was dead-lettered"), late_ok=True)
        expect_once_each(s, ["held", *newer], _("apply the healthy entry once"))


@CHECKS.add(
    1,
    "a poison entry (max_deliveries 1) runs exactly max_deliveries times, then its dead "
    "letter in <prefix>:dead says why in a non-empty field 'reason'",
    60,
)
def dead_letters_after_exactly_max_deliveries_with_a_reason(ns: Namespace) -> None:
    # Not severe: one crash more than max_deliveries (an off-by-one of the count) or a
    # dead letter with no reason loses nothing. Whether the cap stops the poison at all,
    # and keeps its payload, is dead_letters_a_crashing_entry_after_max_deliveries's
    # (severe). max_deliveries 1: the fewest consumer starts (a crash, then the dead letter).
    with stream(ns) as s:
        s.add("poison", cents=100, crash=True)
        crashes = 0
        for _n in range(4):
            if s.finish(s.start("a", max_deliveries=1), _("the poison entry")) == 0:
                break
            crashes += 1
        expect(
            crashes == 1,
            _("exactly 1 delivery of the poison entry (max_deliveries 1: 1 crash), then its "
              "dead letter"),
            _("{count} crashes").format(count=crashes),
            _("dead-letter an entry once XPENDING shows it delivered more than max_deliveries "
              "times (deliveries > max_deliveries): it ran max_deliveries times already"),
        )  # fmt: skip
        dead = s.dead()
        expect(
            [d.get("key") for d in dead] == ["poison"] and bool(dead[0].get("reason")),
            _("one dead letter with key 'poison' and a non-empty field 'reason'"),
            dead,
            _("XADD <prefix>:dead with the fields key, payload and reason (a text that says "
              "why, e.g. how many deliveries): whoever reads the dead letters needs it"),
        )  # fmt: skip


#: Dead letters already in <prefix>:dead when the backlog check starts: past the round
#: caps a dead-letter stream might be given (1000, 10000 or 20000 entries, ~ or not).
EARLIER_DEAD = 25_000


@CHECKS.add(
    1,
    "a backlog of hundreds of entries waiting when the consumer starts: each is applied "
    "once, none is trimmed away or skipped, no done record is ever removed, and each of "
    "more than a hundred that always fail is kept as a dead letter",
    90,
    severe=True,
)
def a_backlog_of_hundreds_is_applied_once_each(ns: Namespace) -> None:
    rng = random.Random(f"ex09 backlog {scene_seeds()[-1]}")
    keys = [f"order:{n}" for n in range(250 + rng.randrange(100))]
    # Among them, more than a hundred that fail every time: each must end as a dead letter.
    failing = [f"broken:{n}" for n in range(110 + rng.randrange(40))]
    with stream(ns) as s:
        entries = [(key, {"cents": 100}) for key in keys]
        entries += [(key, {"cents": 100, "flaky": 99}) for key in failing]
        rng.shuffle(entries)
        pipe = s.r.pipeline(transaction=False)
        for key, payload in entries:
            pipe.xadd(s.stream, {"key": key, "payload": json.dumps(payload)})
        pipe.execute()
        # Dead letters of earlier runs nobody has replayed yet: with the new ones, past a
        # cap of 1000, 10000 or 20000 (XADD MAXLEN 10000, ~ or not); all but the last one
        # written over a year ago (their IDs say so), past a trim by age (MINID).
        dead_key = f"{s.prefix}:dead"
        year_ago = int(s.r.time()[0]) * 1000 - 400 * 86_400_000
        for count, at in ((EARLIER_DEAD - 1, year_ago), (1, "*")):
            last_earlier = s.r.eval(
                FILL,
                1,
                dead_key,
                count,
                at,
                "earlier:",
                "payload",
                "{}",
                "reason",
                "an earlier run",
            )
        bare: list[list[str]] = []  # what was sent outside MULTI/EXEC and scripts
        with _monitored(s.url, s.prefix, bare) as sent:
            proc = s.start("a", max_deliveries=1)
            _until_under_way(s.r, proc, s.prefix, EARLIER_DEAD)
            commands = sent()
            trims = _trims(commands, s.stream, dead_key)
            removals = _effect_removals(commands, f"{s.prefix}:effects")
            forgotten = _record_removals(commands, f"{s.prefix}:done")
            unguarded = _bare_dead_letters(bare, dead_key)
        s.finish(proc, _("a backlog of {count} entries").format(count=len(keys) + len(failing)))
        effects = s.effects()
        missing = [key for key in keys if key not in effects]
        twice = [key for key in keys if effects.get(key, 0) > 1]
        left = len(s.pending())
        expect(
            not missing and not twice and left == 0,
            _(
                "each of the {count} entries ({first} to {last}) applied exactly once, "
                "nothing pending"
            ).format(count=len(keys), first=keys[0], last=keys[-1]),
            _(
                "{missing} never applied (first ones: {some}), {twice} applied more than "
                "once, {pending} pending"
            ).format(missing=len(missing), some=missing[:5], twice=len(twice), pending=left),
            _(
                "keep reading new entries (XREADGROUP ... >) until none is left, and never "
                "remove an entry nobody has acknowledged (no XTRIM, no MAXLEN, no XDEL of "
                "unread entries)"
            ),
        )
        # This run's dead letters: those after the earlier ones (too many to read back).
        s.expect_kind("dead", "stream", "XADD")
        dead = [
            str(fields.get("key"))
            for entry_id, fields in s.r.xrange(dead_key, last_earlier, "+")
            if entry_id != last_earlier
        ]
        lost = [key for key in failing if key not in dead]
        earlier = int(s.r.xlen(dead_key)) - len(dead)
        expect(
            not lost and len(dead) == len(failing) and earlier == EARLIER_DEAD,
            _(
                "each of the {count} entries that fail every time ({first} to {last}) in the "
                "dead-letter stream, once"
            ).format(count=len(failing), first=failing[0], last=failing[-1]),
            _(
                "{dead} dead letters; {lost} of them missing (first ones: {some}); "
                "{earlier} of the {count} dead letters of earlier runs kept"
            ).format(
                dead=len(dead),
                lost=len(lost),
                some=lost[:5],
                earlier=earlier,
                count=EARLIER_DEAD,
            ),
            _(
                "keep every dead letter: no MAXLEN on the XADD to <prefix>:dead and no XTRIM "
                "of it. A dead letter is the only record of an entry nobody ran; dropping the "
                "oldest loses them"
            ),
        )
        expect(
            not trims,
            _("no trim of <prefix>:stream by length and none of <prefix>:dead, whatever the cap"),
            _("the consumer sent {commands}").format(commands=trims[:3]),
            _(
                "a cap that removes nothing here (MAXLEN ~ 100000) removes unread entries and "
                "dead letters once a backlog that long builds up: while the consumers are "
                "down, say. Trim nothing; acknowledged entries may go with XDEL of their own ID"
            ),
        )
        expect(
            not removals,
            _(
                "nothing ever taken out of <prefix>:effects: every applied key stays in the "
                "list, whatever its length"
            ),
            _("the consumer sent {commands}").format(commands=removals[:3]),
            _(
                "never trim, pop or delete the effects list (LTRIM 0 999 keeps the list "
                "bounded, and loses every effect past the thousandth): the list is the record "
                "of what was applied, and a key cut from it is an effect lost"
            ),
        )
        expect(
            not forgotten,
            _(
                "every done record kept for good: nothing ever taken out of <prefix>:done:<key> "
                "(or of a set or hash of the records), whatever their number"
            ),
            _("the consumer sent {commands}").format(commands=forgotten[:3]),
            _(
                "never cap, trim, pop, expire or delete the done records (a sorted set cut to "
                "its last 10000 keys removes nothing here, and every record past that later): "
                "a key whose record went is applied again when a late copy of it comes (a "
                "producer's retry)"
            ),
        )
        expect(
            not unguarded,
            _("each dead letter XADDed in a MULTI/EXEC (or a script) with its entry's XACK"),
            _("the consumer sent {commands} outside any MULTI").format(commands=unguarded[:2]),
            _(
                "send the XADD to <prefix>:dead and the XACK in one MULTI/EXEC "
                "(r.pipeline(transaction=True)): sent apart (two calls, or a pipeline with "
                "transaction=False) they are two steps, so the XACK goes through when the XADD "
                "fails, and a consumer killed between two calls dead-letters the entry twice"
            ),
        )


def odd_keys(rng: random.Random) -> list[str]:
    """Keys a done record must tell apart: case, a trailing space (and '_' in its place),
    one key the prefix of another, ':' where another has '_', characters that a glob
    (KEYS, SCAN MATCH) reads as a pattern, accents (and the same word without them, and
    with them as combining marks: alike once normalized, NFC or NFKC), two
    Cyrillic words of as many letters (alike once made ASCII, the letters dropped or each
    one a '?') and quotes."""
    word = "".join(rng.choice("abcdefghjkmn") for _ in range(5))
    return [
        f"Order:{word}",
        f"order:{word}",
        f"order:{word} ",
        f"order:{word}_",
        f"order:{word}:1",
        f"order:{word}:10",
        f"order_{word}_1",
        f"order:{word}*",
        f"order:[{word}]?",
        f"pedido:ção-{word}",
        f"pedido:cao-{word}",
        f"pedido:c\u0327a\u0303o-{word}",  # 'ção' again, its accents as combining marks
        f"заказ:{word}",
        f"склад:{word}",
        f'o\'brien "{word}"',
    ]


def long_keys(rng: random.Random) -> list[str]:
    """Two keys of 300 characters that differ only in their last one: past any length a
    record name might be cut to."""
    stem = "order:" + "".join(rng.choice("0123456789abcdef") for _ in range(292))
    return [f"{stem}-a", f"{stem}-b"]


def _cut(key: str) -> str:
    """A key as feedback shows it: a long one by its ends and its length."""
    return repr(key) if len(key) <= 40 else f"{key[:12]!r}...{key[-8:]!r} ({len(key)} chars)"


@CHECKS.add(
    1,
    "keys are compared exactly as they came: keys that differ only in case, in a trailing "
    "space, in an extra character, or hold *, ?, [ ], accents or quotes are each applied "
    "once",
    90,
    severe=True,
)
def keys_are_compared_exactly(ns: Namespace) -> None:
    rng = random.Random(f"ex09 keys {scene_seeds()[-1]}")
    keys, long = odd_keys(rng), long_keys(rng)
    with stream(ns) as s:
        for key in keys + long:
            s.add(key, cents=100)
        s.finish(
            s.start("a"), _("{count} entries with keys alike").format(count=len(keys) + len(long))
        )
        effects = s.effects()
        wrong = {key: effects.get(key, 0) for key in long if effects.get(key, 0) != 1}
        expect(
            not wrong,
            _(
                "each of two keys of {length} characters that differ only in their last one "
                "applied once"
            ).format(length=len(long[0])),
            ", ".join(
                _("{key}: applied {count} times").format(key=_cut(key), count=n)
                for key, n in wrong.items()
            ),
            _(
                "name the done record with the whole key, however long: a record name cut "
                "short gives two keys one record"
            ),
        )
        # The long keys are judged: out of the list, so the feedback below lists the rest.
        for key in long:
            s.r.lrem(f"{s.prefix}:effects", 0, key)
        expect_once_each(
            s,
            keys,
            _(
                "a key is an opaque string: name its record <prefix>:done:<key> with the key "
                "exactly as it came (no lower(), strip(), replace(), Unicode normalization, "
                "accents taken off or cutting) and look it up with EXISTS or GET, never with "
                "a pattern (KEYS, SCAN MATCH)"
            ),
        )
        # Applied once each here, yet a record named by a digest of the key cut short (8
        # hex digits, as git shows a commit) gives two keys in about a hundred thousand
        # one record: the contract names it by the key itself.
        missing = _unrecorded(s, keys + long)
        expect(
            not missing,
            _("a done record named by each applied key exactly as it came: <prefix>:done:<key>"),
            _("no record named by {keys}; what the prefix holds besides: {names}").format(
                keys=", ".join(_cut(key) for key in missing[:3]),
                names=", ".join(_cut(name) for name in _record_names_in(s)[:3]),
            ),
            _(
                "name the record <prefix>:done:<key> with the whole key, not a digest of it: a "
                "digest cut short (8 hex digits) gives two keys in about a hundred thousand one "
                "record, and the second is never applied"
            ),
        )


def _record_names_in(s: Stream) -> list[str]:
    """The keys under the stream's prefix, the prefix taken off, but for the stream, the
    effects and the dead letters."""
    ours = {s.stream, f"{s.prefix}:effects", f"{s.prefix}:dead"}
    return sorted(
        name.removeprefix(f"{s.prefix}:")
        for name in s.r.scan_iter(match=f"{s.prefix}:*", count=1000)
        if name not in ours
    )


def _unrecorded(s: Stream, keys: list[str]) -> list[str]:
    """The ``keys`` with no done record named by the key itself: neither a key
    <prefix>:done:<key> nor a field or member (the key as it came) of a hash or a set
    under the prefix, which do as well."""
    found: set[str] = set()
    for name in _record_names_in(s):
        if name.startswith("done:"):
            found.add(name.removeprefix("done:"))
        kind, whole = str(s.r.type(f"{s.prefix}:{name}")), f"{s.prefix}:{name}"
        if kind == "hash":
            found.update(s.r.hkeys(whole))
        elif kind in ("set", "zset"):
            found.update(s.r.smembers(whole) if kind == "set" else s.r.zrange(whole, 0, -1))
    return [key for key in keys if key not in found]


@CHECKS.add(
    2,
    "XAUTOCLAIM one entry at a time (COUNT 1): entries claimed together each gain a "
    "delivery, and a crash on one of them counts against the others",
    90,
    severe=True,
)
def claims_one_idle_entry_at_a_time(ns: Namespace) -> None:
    with stream(ns) as s:
        s.add("poison", cents=100, crash=True)
        for key in ("left:1", "left:2"):
            s.add(key, cents=100, work_s=30, slow_deliveries=1)
        # Three consumers die, each holding one entry: 'poison' crashes its own, the check
        # kills the two others mid-job. Their entries are idle, one delivery each.
        s.finish(s.start("gone-0", idle_ms=600_000), _("the poison entry"))
        for n, key in enumerate(("left:1", "left:2"), start=1):
            s.kill_when_holding(s.start(f"gone-{n}", idle_ms=600_000), f"gone-{n}", key)
        # A rescuer with max_deliveries 2, restarted after each crash: the poison has its
        # second delivery (a crash) and is dead-lettered at its third; 'left:1' and
        # 'left:2' each get their second delivery, and run. Its claims are read as sent,
        # and so is what it sends outside MULTI/EXEC: everything it runs here it claimed,
        # so a path of its own for claimed entries writes its effects and dead letters.
        bare: list[list[str]] = []
        with _monitored(s.url, s.prefix, bare) as sent:
            for _n in range(6):
                if s.finish(s.start("rescuer", max_deliveries=2, idle_ms=100),
                            _("the rescuer")) == 0:  # fmt: skip
                    break
            hasty = _hasty_claims(sent(), s.stream, 100)
            unguarded = _bare_dead_letters(bare, f"{s.prefix}:dead")
            unguarded += _bare_effects(bare, f"{s.prefix}:effects")
        dead = [d.get("key") for d in s.dead()]
        expect(
            dead == ["poison"],
            _(
                "only 'poison' dead-lettered: the rescuer claims the idle entries of three "
                "dead consumers one at a time (max_deliveries 2)"
            ),
            _("dead letters {dead}").format(dead=dead),
            _(
                "XAUTOCLAIM ... COUNT 1 and run what you claimed before claiming more: an "
                "entry claimed along with the poison gains a delivery each time the poison "
                "kills you, and reaches max_deliveries without ever running"
            ),
        )
        expect_once_each(s, ["left:1", "left:2"], _("claim one entry at a time"))
        expect(
            not hasty,
            _(
                "every claim of the rescuer (idle_ms 100) asks Redis for an idle time of at "
                "least 100 ms in the claim itself (XAUTOCLAIM or XCLAIM min-idle-time)"
            ),
            "; ".join(hasty[:3]),
            _(
                "pass idle_ms to XAUTOCLAIM (or XCLAIM) itself: an entry found idle by "
                "XPENDING and then claimed with min-idle-time 0 may have been claimed by "
                "another rescuer in between, and both of you run it"
            ),
        )
        expect(
            not unguarded,
            _(
                "each effect of an entry the rescuer claimed sent in one MULTI/EXEC (or a "
                "script) with its done record and its XACK, and each dead letter with its XACK"
            ),
            _("the rescuer sent {commands} outside any MULTI").format(
                commands="; ".join(unguarded[:2])
            ),
            _(
                "an entry you claimed (XAUTOCLAIM) is applied and dead-lettered like one you "
                "read: in the same MULTI/EXEC as the rest (r.pipeline(transaction=True)). Sent "
                "as commands of their own, a kill between them applies it twice, dead-letters "
                "it twice or acknowledges it unapplied"
            ),
        )
    _reads_its_own_pending_one_at_a_time(ns)


def _reads_its_own_pending_one_at_a_time(ns: Namespace) -> None:
    """'a' held three entries when it died, the poison first (an earlier version of it
    read three at a time): restarted with max_deliveries 2, it reads its own pending ones
    one at a time (XREADGROUP ... 0 COUNT 1), so the poison's crash adds a delivery to
    the poison alone, and the two others run on their second delivery."""
    with stream(ns) as s:
        s.add("poison", cents=100, crash=True)
        for key in ("mine:1", "mine:2"):
            s.add(key, cents=100)
        s.r.xreadgroup(GROUP, "a", {s.stream: ">"}, count=3)
        for _n in range(6):
            if s.finish(s.start("a", max_deliveries=2, idle_ms=600_000),
                        _("a restart of 'a', which held three entries")) == 0:  # fmt: skip
                break
        dead = [d.get("key") for d in s.dead()]
        expect(
            dead == ["poison"],
            _(
                "only 'poison' dead-lettered: 'a', restarted with three entries of its own "
                "(max_deliveries 2), reads them one at a time"
            ),
            _("dead letters {dead}").format(dead=dead),
            _(
                "read your own pending entries with XREADGROUP ... 0 COUNT 1 as well: every "
                "entry such a read returns gains a delivery, so one that returns them all adds "
                "a delivery to each every round, and each crash on the poison counts against "
                "the others until they are dead-lettered unrun"
            ),
        )
        expect_once_each(s, ["mine:1", "mine:2"], _("read your own pending entries one at a time"))


#: Entries a live consumer holds ahead of a dead one's in the PEL: more than one
#: XAUTOCLAIM ... COUNT 1 looks at (ten), or one of COUNT 2 or 3.
BUSY = 40
#: Seconds a rescuer has to reach the dead one's entry once it has sent its first
#: command: by the cursor, four XAUTOCLAIMs about 50 ms apart.
AFTER_FIRST_LOOK_S = 5.0
#: New entries waiting behind the dead one's when the rescuer starts: a flow of new work.
#: Each round reads one of them after its XAUTOCLAIM; by the cursor, the fifth round's
#: XAUTOCLAIM (after four that looked at ten busy entries each) claims 'stale'.
NEW_BEHIND = 20
#: At most this many of them applied before 'stale': a cursor that starts again at 0-0
#: whenever the round found other work never gets past the first ten busy entries
#: while new entries keep coming.
NEW_FIRST = 10


def _group_members(s: Stream) -> set[str]:
    return {str(c["name"]) for c in s.r.xinfo_consumers(s.stream, GROUP)}


@CHECKS.add(
    1,
    "a dead consumer's entry behind 40 that a live consumer holds is claimed: one "
    "XAUTOCLAIM looks at ten pending entries for each it may claim, so each call starts "
    "at the cursor the last one returned",
    60,
    severe=True,
)
def claims_an_idle_entry_behind_busy_ones(ns: Namespace) -> None:
    with stream(ns) as s:
        pipe = s.r.pipeline(transaction=False)
        for n in range(BUSY):
            pipe.xadd(s.stream, {"key": f"busy:{n}", "payload": json.dumps({"cents": 100})})
        pipe.execute()
        stale = s.add("stale", cents=100)
        # All read just now by a consumer at work on them (idle for milliseconds); the
        # last one then held by a consumer long gone: idle for ten minutes.
        s.r.xreadgroup(GROUP, "at-work", {s.stream: ">"}, count=BUSY + 1)
        s.r.xclaim(s.stream, GROUP, "long-gone", 0, [stale], idle=600_000, justid=True)
        fresh = [f"new:{n}" for n in range(NEW_BEHIND)]
        pipe = s.r.pipeline(transaction=False)
        for key in fresh:
            pipe.xadd(s.stream, {"key": key, "payload": json.dumps({"cents": 100})})
        pipe.execute()
        rescuer = s.start("rescuer", idle_ms=60_000)
        # Its first command on the group makes it one of the group's consumers; from then
        # on, a few rounds of about 50 ms reach 'stale' by the cursor.
        clock = SystemClock()
        deadline, looked = clock.now() + RUN_S, False
        while rescuer.poll() is None and "stale" not in s.applied() and clock.now() < deadline:
            if not looked and "rescuer" in _group_members(s):
                deadline, looked = clock.now() + AFTER_FIRST_LOOK_S, True
            clock.sleep(0.05)
        if rescuer.poll() is not None:  # a stub, a crash: said as such
            s.finish(rescuer, _("an idle entry behind {count} busy ones").format(count=BUSY))
        ns.kill(rescuer)
        rescuer.communicate()
        holder = [str(p["consumer"]) for p in s.pending() if p["message_id"] == stale]
        expect(
            "stale" in s.applied(),
            _(
                "'stale', idle for ten minutes (idle_ms 60000) behind {count} entries "
                "another consumer holds and works on, claimed and applied"
            ).format(count=BUSY),
            _(
                "not applied {seconds:g}s after the rescuer's first command; it is still held "
                "by {holder}"
            ).format(seconds=AFTER_FIRST_LOOK_S, holder=holder[0] if holder else _("nobody")),
            _(
                "one XAUTOCLAIM looks at no more than ten pending entries for each it may "
                "claim (COUNT 1: ten): keep the cursor it returns (the reply's first "
                "element) and start the next call there; it returns 0-0 once it went round"
            ),
        )
        first = _new_before(s, "stale", fresh)
        expect(
            first <= NEW_FIRST,
            _(
                "'stale' claimed while {count} new entries wait behind it: at most {most} of "
                "them applied before it (each round's XAUTOCLAIM goes on at the cursor the "
                "last one returned, so the fifth reaches it)"
            ).format(count=len(fresh), most=NEW_FIRST),
            _("{first} of them applied before it").format(first=first),
            _(
                "start every XAUTOCLAIM at the cursor the last one returned, whatever the "
                "round did after it: a cursor set back to 0-0 once you applied an entry looks "
                "at the same ten busy entries each round while new entries keep coming, and "
                "a dead consumer's entry behind them waits as long as the flow lasts"
            ),
        )


def _new_before(s: Stream, key: str, fresh: list[str]) -> int:
    """How many of ``fresh`` (applied in their order) the effects list holds before
    ``key``, read either way (RPUSH, LPUSH); 0 when it is no list (another check's
    business)."""
    if str(s.r.type(f"{s.prefix}:effects")) != "list":
        return 0
    order = [str(k) for k in s.r.lrange(f"{s.prefix}:effects", 0, -1)]
    news = [k for k in order if k in fresh]
    if len(news) > 1 and fresh.index(news[0]) > fresh.index(news[-1]):
        order.reverse()  # pushed on the left
    if key not in order:
        return 0
    return len([k for k in order[: order.index(key)] if k in fresh])


@CHECKS.add(
    1,
    "the done record lives under the stream's own prefix (<prefix>:done:<key>): another "
    "stream in the same Redis with a key of the same name is applied too",
    60,
    severe=True,
)
def done_records_belong_to_their_stream(ns: Namespace) -> None:
    with stream(ns) as first, stream(ns) as second:
        for s in (first, second):
            s.add("order:1", cents=100)
            s.finish(s.start("a"), _("an entry with key 'order:1'"))
        applied = [first.effects(), second.effects()]
        expect(
            applied == [{"order:1": 1}, {"order:1": 1}],
            _("'order:1' applied once in each of two streams with their own prefixes"),
            _("effects of the first stream {first}, of the second {second}").format(
                first=applied[0], second=applied[1]
            ),
            _(
                "name the done record <prefix>:done:<key>: a record outside the prefix "
                "(done:<key>) is shared by every stream in the Redis, and one stream's key "
                "stops another's"
            ),
        )


#: Seconds a consumer may take to notice that the entry another consumer held is done.
SOON_S = 5.0
#: Commands per second the two consumers may send while one waits for the other: a look
#: about every 50 ms costs a few dozen; a look again at once, thousands.
BUSY_PER_S = 150


#: How long after 'b' joined the group returns_soon_after_the_others_finish waits for it
#: to read the PEL (XPENDING, XINFO) before 'a' ends its job all the same.
PEL_READ_S = 5.0
#: How long 'b' goes on after that read before 'a' ends its job: its decision is made.
AFTER_READ_S = 0.2


#: The commands that read the PEL or the group's consumers.
PEL_READS = ("xpending", "xinfo|consumers", "xinfo|groups", "xinfo|stream")


def _until_it_read_the_pel(s: Stream, other: subprocess.Popen[str]) -> None:
    """Return once ``other`` is a member of the group and has read the PEL since (or
    ``PEL_READ_S`` passed, or it ended), and ``AFTER_READ_S`` more: by then it has seen
    'slow' pending, held by 'a', and chosen how long to wait."""
    clock = SystemClock()
    deadline, joined, before = clock.now() + RUN_S, None, None
    while clock.now() < deadline and other.poll() is None:
        if joined is None and any(c["name"] != "a" for c in s.r.xinfo_consumers(s.stream, GROUP)):
            joined, before = clock.now(), calls_so_far(s.r, *PEL_READS)
        if joined is not None:
            now = calls_so_far(s.r, *PEL_READS)
            # The check's own XINFO CONSUMERS above counts once, before the baseline.
            if before is None or now is None or now > before or clock.now() - joined >= PEL_READ_S:
                clock.sleep(AFTER_READ_S)
                return
        clock.sleep(0.02)


@CHECKS.add(
    1,
    "while another consumer holds an entry, look again about every 50 ms: return soon "
    "after the last entry is done, not idle_ms later",
    60,
)
def returns_soon_after_the_others_finish(ns: Namespace) -> None:
    with stream(ns) as s, gate_in(ns.workdir) as gate:
        s.add("slow", cents=100, work_s=HELD_WORK_S)
        # 'a' works on 'slow' until 'b' has looked at the PEL (ex09/heldjob.py), however
        # long a loaded machine takes to start 'b': a job of a fixed second once ended
        # first, and a 'b' that waits idle_ms found nothing pending and passed.
        worker = s.start("a", idle_ms=600_000, runner=(*HELD_JOB, str(gate), str(HELD_WORK_S)))
        s.wait_held(worker, "a", "slow")
        # What is sent while 'b' waits, read as sent ('a' sends nothing while it works):
        # a look again at once, with no pause and no BLOCK, is thousands a second.
        clock = SystemClock()
        with _monitored(s.url, s.prefix) as sent:
            began = clock.now()
            other = s.start("b", idle_ms=600_000)  # finds 'slow' pending, held by 'a'
            try:
                _until_it_read_the_pel(s, other)
            finally:
                gate.touch()
            s.finish(worker, _("the consumer working on the slow entry"))
            try:
                other.communicate(timeout=SOON_S)
            except subprocess.TimeoutExpired:
                ns.kill(other)
                other.communicate()
                late = True
            else:
                late = False
            waited = clock.now() - began
            commands = len(sent())
        if late:
            expect(
                False,
                _(
                    "the second consumer to return within {seconds:g} s once the first had "
                    "finished the entry it held (idle_ms is 600000)"
                ).format(seconds=SOON_S),
                _("it was still waiting {seconds:g} s later; pending: {pending}").format(
                    seconds=SOON_S, pending=len(s.pending())
                ),
                _(
                    "when nothing is yours to run but XPENDING lists entries, sleep about "
                    "50 ms and look again: a wait of idle_ms keeps the consumer (and any new "
                    "entry) waiting that long"
                ),
            )
        limit = int(BUSY_PER_S * max(waited, 1.0))
        expect(
            commands <= limit,
            _(
                "the consumers to send at most {limit} commands in the {seconds:.1f} s the "
                "second one waited for the first (a look about every 50 ms)"
            ).format(limit=limit, seconds=waited),
            _("{count} commands").format(count=commands),
            _(
                "when nothing is yours to run but XPENDING lists entries, sleep about 50 ms "
                "(or read new entries with BLOCK 50) before you look again: a loop that looks "
                "again at once sends thousands of commands a second, and keeps Redis busy for "
                "every other client"
            ),
        )
        expect_once_each(s, ["slow"], _("apply it once"))


@CHECKS.add(
    1,
    "a dead letter is not a done key: when the producer sends a key again after its entry "
    "was dead-lettered (the dependency is back), the new entry runs and is applied",
    60,
    severe=True,
)
def a_dead_lettered_key_sent_again_is_applied(ns: Namespace) -> None:
    with stream(ns) as s:
        # The dependency is down for two deliveries (max_deliveries 2): dead-lettered at
        # the third, unrun; run then anyway, it would succeed and be applied as well.
        s.add("order:9", cents=900, flaky=2)
        s.finish(s.start("a", max_deliveries=2), _("an entry that fails until dead-lettered"))
        dead = [d.get("key") for d in s.dead()]
        expect(dead == ["order:9"], "'order:9' dead-lettered after 2 failed deliveries",
               _("dead letters {dead}").format(dead=dead))  # fmt: skip
        expect(
            not s.applied(),
            _(
                "'order:9', dead-lettered at its third delivery (max_deliveries 2), not run "
                "and not applied"
            ),
            _("effects {effects}, dead letters {dead}").format(effects=s.applied(), dead=dead),
            _(
                "an entry you dead-letter is finished: after the MULTI of the dead letter and "
                "its XACK, go on to the next round (continue) without run_job and without "
                "the MULTI that applies it; applied as well, it is both done and dead, and a "
                "replay of the dead letters applies it twice"
            ),
        )
        s.add("order:9", cents=900)  # the producer sends it again, healthy this time
        s.finish(s.start("b", max_deliveries=2), _("a new entry for the dead-lettered key"))
        dead = [d.get("key") for d in s.dead()]
        expect(
            s.effects() == {"order:9": 1} and dead == ["order:9"],
            _(
                "the new entry for 'order:9' applied once (its earlier entry was "
                "dead-lettered, never applied), and no second dead letter"
            ),
            _("effects {effects}, dead letters {dead}").format(effects=s.effects(), dead=dead),
            _(
                "write <prefix>:done:<key> only in the MULTI that applies the key, not when "
                "you dead-letter it, and count deliveries per entry (XPENDING), not per key: "
                "a key whose entry died is not done"
            ),
        )
        expect_once_each(s, ["order:9"], _("apply the new entry once"))


#: The consumers' names in the_cap_holds_for_claimed_entries: a capital and a '_', so a
#: consumer that lower-cases or tidies the name it was given (two consumers 'Pod_1' and
#: 'pod-1' would then share one PEL, each running the other's entries) shows.
POD = "Pod_{n}"


@CHECKS.add(
    1,
    "the delivery cap holds for an entry taken over from a dead consumer (XAUTOCLAIM) as "
    "for your own pending ones: a poison entry that kills each new consumer in turn is "
    "still dead-lettered after max_deliveries",
    90,
    severe=True,
)
def the_cap_holds_for_claimed_entries(ns: Namespace) -> None:
    with stream(ns) as s:
        poison = s.add("poison", cents=100, crash=True)
        # A new name each time (a fresh container, a new pod): the poison is never this
        # consumer's own pending entry, it comes to each one through XAUTOCLAIM. Names
        # with a capital and a '_' (POD): the PEL must show each one exactly as given.
        crashes, early, orders, holders = 0, [], [], []
        # What the pods send outside MULTI/EXEC and scripts: the poison reaches the
        # third one by XAUTOCLAIM, and it dead-letters an entry it claimed.
        bare: list[list[str]] = []
        with _monitored(s.url, s.prefix, bare) as sent:
            for n in range(5):
                # Before each pod: a new entry behind the poison, and the poison idle 150 ms
                # (idle_ms is 100): claimed at the pod's first look, before the new entry,
                # unless the consumer raises idle_ms to a floor of its own (1 s, 5 s).
                orders.append(f"order:{n}")
                s.add(orders[-1], cents=100)
                for held in s.r.xpending_range(s.stream, GROUP, poison, poison, 1):
                    # The pod that crashed on it holds it: it claimed it under its own name.
                    holders.append(str(held["consumer"]))
                    s.r.xclaim(
                        s.stream, GROUP, held["consumer"], 0, [poison], idle=150, justid=True
                    )
                code = s.finish(
                    s.start(POD.format(n=n), max_deliveries=2, idle_ms=100),
                    _("a consumer under a new name"),
                )
                if code == 0:
                    break
                crashes += 1
                early += list(s.applied())
            sent()
        unguarded = _bare_dead_letters(bare, f"{s.prefix}:dead")
        dead = [d.get("key") for d in s.dead()]
        expect(
            crashes == 2 and dead == ["poison"],
            _(
                "the poison entry run twice (2 crashes, max_deliveries 2), then dead-lettered "
                "by the third consumer, which claimed it from the second"
            ),
            _("{count} crashes; dead letters {dead}").format(count=crashes, dead=dead),
            _(
                "read the delivery count (XPENDING) of every entry before you run it, the "
                "ones XAUTOCLAIM hands you too: a claim adds a delivery like a read does"
            ),
        )
        expect(
            not early,
            _(
                "each consumer to claim the poison (idle 150 ms, idle_ms 100) at its first "
                "look, before it reads the new entry behind it"
            ),
            _("new entries applied before the poison's claim: {keys}").format(keys=early),
            _(
                "pass idle_ms to XAUTOCLAIM as it is, with no floor of your own (max(idle_ms, "
                "1000) or 5000): a dead consumer's entry then waits longer than it should"
            ),
        )
        pods = [POD.format(n=n) for n in range(len(holders))]
        expect(
            holders == pods,
            _(
                "the poison held, after each crash, by the consumer that crashed on it, under "
                "the name it was given: {pods}"
            ).format(pods=pods),
            _("it was held by {holders}").format(holders=holders),
            _(
                "XAUTOCLAIM under the consumer name consume was given, exactly (no lower() or "
                "replace()): an entry read under another name (a fixed one, a tidied one, or a "
                "dead consumer's, with XREADGROUP ... 0) stays that name's, so the consumer that "
                "really holds it is unknown, and the one of that name runs it a second time "
                "beside you"
            ),
        )
        left = len(s.pending())
        expect(left == 0, "nothing left pending (the dead letter XACKed)",
               _("{count} pending").format(count=left))  # fmt: skip
        expect(
            not unguarded,
            _(
                "the poison, claimed from a dead consumer, dead-lettered in one MULTI/EXEC "
                "(or a script) with its XACK"
            ),
            _("the consumer sent {commands} outside any MULTI").format(
                commands="; ".join(unguarded[:2])
            ),
            _(
                "dead-letter an entry you claimed (XAUTOCLAIM) as one you read: the XADD to "
                "<prefix>:dead and the XACK in one MULTI/EXEC (r.pipeline(transaction=True)). "
                "Sent apart, a kill between them leaves the entry pending with its dead letter "
                "written, and the next consumer dead-letters it again"
            ),
        )
        expect_once_each(s, orders, _("apply each new entry once"), strict=False)


@CHECKS.add(
    1,
    "each round, your own pending entries first (XREADGROUP ... 0), then idle ones taken "
    "over (XAUTOCLAIM), then new ones (>): a claim first makes yours wait behind another "
    "consumer's",
    60,
)
def reads_its_own_pending_before_claiming(ns: Namespace) -> None:
    with stream(ns) as s:
        # 'a' read 'mine' in an earlier life and never acknowledged it; 'stale' a dead
        # consumer holds, idle 700 s (claimable at idle_ms 600000); then two new ones.
        _read_by(s, "mine", "a")
        _read_by(s, "stale", "long-gone", idle_ms=700_000)
        s.add("order:1", cents=100)
        s.add("order:2", cents=100)
        s.finish(s.start("a", idle_ms=600_000), _("a consumer with an entry of its own pending"))
        want = ["mine", "stale", "order:1", "order:2"]
        expect_once_each(s, want, _("apply each entry once"))
        order = s.r.lrange(f"{s.prefix}:effects", 0, -1)
        # Pushed on the left (LPUSH), the list runs the other way: the same order.
        expect(
            order in (want, want[::-1]),
            _(
                "'mine' (held by 'a' since an earlier life) applied before 'stale' (a dead "
                "consumer's, idle for 700 s: claimable), then 'order:1' and 'order:2' (new)"
            ),
            _("applied in the order {order}").format(order=order),
            _(
                "each round, take your own pending entries (XREADGROUP ... 0) first, then "
                "XAUTOCLAIM idle ones, then read new ones (>): claimed first, other consumers' "
                "entries keep yours waiting, and each claim is one more entry you hold"
            ),
        )
