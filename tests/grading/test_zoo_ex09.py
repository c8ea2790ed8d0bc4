"""Exercise 9's zoo: wrong consumers, each caught by the check named after its mistake.

The consumer is a file (``stream_consumer.py``, written by the solution's %%writefile
cell into the test's folder); each entry rewrites one piece of the reference file and
runs the check named after its mistake against the real Redis, then the other checks
one at a time until one passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gradingkit import HIDDEN, SOLUTIONS, namespace_of, notebook_for
from zoograding import compiles, runs_its_control, skip_unless_drawn

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus, Namespace, run_check
from labkit.grading.exercises.ex09 import consumers as ex09_consumers

pytestmark = [pytest.mark.services, pytest.mark.slow]

#: The cheapest check, tried first as the one a wrong consumer still passes.
ONCE = "applies_each_entry_once"

#: The reference's read of its own pending entries, which skips one deleted from the
#: stream (XDEL, XTRIM): it comes with no fields, and the XAUTOCLAIM after drops it.
_OWN_READ = (
    '{stream: "0"}, count=1)\n        entries = [e for _s, found in rows for e in found if e[1]]\n'
)

#: The reference's apply step: the done record read under WATCH, then record, effect and
#: XACK in the MULTI the WATCH guards.
_APPLY = (
    "            record = f\"{prefix}:done:{fields['key']}\"\n"
    "            try:\n"
    "                with r.pipeline(transaction=True) as pipe:\n"
    "                    pipe.watch(record)\n"
    "                    done_before = pipe.exists(record)\n"
    "                    pipe.multi()\n"
    "                    if not done_before:\n"
    "                        pipe.set(record, entry_id)\n"
    '                        pipe.rpush(effects, fields["key"])\n'
    "                    pipe.xack(stream, GROUP, entry_id)\n"
    "                    pipe.execute()\n"
    "            except redis.WatchError:\n"
    "                continue  # someone applied the key meanwhile: the entry comes round again\n"
)

ZOO: list[tuple[str, str, list[tuple[str, str]]]] = [
    # (name, the check that must fail, [(text in the reference, replacement)])
    (
        "acks before the work (a kill mid-job loses the entry)",
        "recovers_its_own_pending_after_a_kill",
        [
            (
                '                run_job(json.loads(fields["payload"]), deliveries)',
                "                r.xack(stream, GROUP, entry_id)\n"
                '                run_job(json.loads(fields["payload"]), deliveries)',
            )
        ],
    ),
    (
        "never reads its own pending entries (XREADGROUP 0)",
        "recovers_its_own_pending_after_a_kill",
        [('{stream: "0"}, count=1)', '{stream: ">"}, count=1, block=50)')],
    ),
    (
        # Each call looks at the first ten entries of the PEL only: behind ten that a live
        # consumer holds, a dead one's entry is never reached.
        "XAUTOCLAIM from 0-0 every round, the cursor it returned dropped",
        "claims_an_idle_entry_behind_busy_ones",
        [
            (
                "cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]",
                '_next, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, "0-0", 1)[:2]',
            )
        ],
    ),
    (
        # The cursor kept, but a call that found nothing starts again at 0-0: the same
        # ten entries every time.
        "XAUTOCLAIM's cursor kept only while it claims something",
        "claims_an_idle_entry_behind_busy_ones",
        [
            (
                "cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]",
                "found, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n"
                '            cursor = found if claimed else "0-0"',
            )
        ],
    ),
    (
        "no XAUTOCLAIM: a dead consumer's entries wait forever",
        "takes_over_a_dead_consumers_entries",
        [
            (
                "cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]",
                "claimed = []",
            )
        ],
    ),
    (
        "no delivery cap: the poison entry kills every consumer",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [("            if deliveries > max_deliveries:", "            if False:")],
    ),
    (
        "reads ten at a time: the poison's crashes count against its neighbours",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            ('{stream: "0"}, count=1)', '{stream: "0"}, count=10)'),
            ('{stream: ">"}, count=1, block=50)', '{stream: ">"}, count=10, block=50)'),
        ],
    ),
    (
        "no idempotency record: a second copy of a key is applied again",
        "a_second_delivery_of_a_done_key_is_not_applied",
        [
            (
                "                    done_before = pipe.exists(record)",
                "                    done_before = False",
            )
        ],
    ),
    (
        "the dead letter and its XACK sent as two commands",
        "survives_a_kill_after_every_command",
        [
            (
                "                pipe = r.pipeline(transaction=True)\n"
                "                pipe.xadd(dead,",
                "                pipe = r\n                pipe.xadd(dead,",
            ),
            (
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.execute()\n"
                "                continue",
                "                pipe.xack(stream, GROUP, entry_id)\n                continue",
            ),
        ],
    ),
    (
        "the done record claimed with SET NX, then the effect and the XACK",
        "survives_a_kill_after_every_command",
        [
            (
                "                with r.pipeline(transaction=True) as pipe:\n"
                "                    pipe.watch(record)\n"
                "                    done_before = pipe.exists(record)\n"
                "                    pipe.multi()\n"
                "                    if not done_before:\n"
                "                        pipe.set(record, entry_id)\n"
                '                        pipe.rpush(effects, fields["key"])\n'
                "                    pipe.xack(stream, GROUP, entry_id)\n"
                "                    pipe.execute()\n",
                "                done_before = not r.set(record, entry_id, nx=True)\n"
                "                if not done_before:\n"
                '                    r.rpush(effects, fields["key"])\n'
                "                r.xack(stream, GROUP, entry_id)\n",
            )
        ],
    ),
    (
        # The MULTI goes out on a second pipeline, which never WATCHed the record.
        "the done record WATCHed on one pipeline, the MULTI sent on another",
        "two_copies_of_a_key_at_once_apply_once",
        [
            (
                "                    pipe.multi()\n",
                "                    pipe = r.pipeline(transaction=True)\n",
            )
        ],
    ),
    (
        "the done record read outside the WATCH: two copies at once are both applied",
        "two_copies_of_a_key_at_once_apply_once",
        [
            (
                "                with r.pipeline(transaction=True) as pipe:\n"
                "                    pipe.watch(record)\n"
                "                    done_before = pipe.exists(record)\n"
                "                    pipe.multi()\n",
                "                done_before = r.exists(record)\n"
                "                with r.pipeline(transaction=True) as pipe:\n",
            )
        ],
    ),
    (
        # str hashes are salted per process: two consumers (or a consumer and its
        # restart) name one key's done record differently, and both apply it.
        "the done record named by hash(key): another process looks for another record",
        "two_copies_of_a_key_at_once_apply_once",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                "            record = f\"{prefix}:done:{hash(fields['key'])}\"",
            )
        ],
    ),
    (
        "XAUTOCLAIM with min-idle-time 0: it takes a live consumer's entry",
        "leaves_a_live_consumers_entry_alone",
        [
            (
                "r.xautoclaim(stream, GROUP, consumer, idle_ms,",
                "r.xautoclaim(stream, GROUP, consumer, 0,",
            )
        ],
    ),
    (
        "XAUTOCLAIM with a constant 1000 ms instead of idle_ms",
        "leaves_a_live_consumers_entry_alone",
        [
            (
                "r.xautoclaim(stream, GROUP, consumer, idle_ms,",
                "r.xautoclaim(stream, GROUP, consumer, 1000,",
            )
        ],
    ),
    (
        "dead-letters at the first failure instead of after max_deliveries",
        "a_flaky_entry_is_retried_not_dead_lettered",
        [
            (
                "            except Exception:\n                continue",
                "            except Exception as exc:\n"
                "                pipe = r.pipeline(transaction=True)\n"
                '                pipe.xadd(dead, {"key": fields["key"], '
                '"payload": fields["payload"], "reason": str(exc)})\n'
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.execute()\n"
                "                continue",
            )
        ],
    ),
    (
        "the done record SET after the MULTI of the effect and its XACK",
        "survives_a_kill_after_every_command",
        [
            (
                "                        pipe.set(record, entry_id)\n"
                '                        pipe.rpush(effects, fields["key"])\n'
                "                    pipe.xack(stream, GROUP, entry_id)\n"
                "                    pipe.execute()\n",
                '                        pipe.rpush(effects, fields["key"])\n'
                "                    pipe.xack(stream, GROUP, entry_id)\n"
                "                    pipe.execute()\n"
                "                if not done_before:\n"
                "                    r.set(record, entry_id)\n",
            )
        ],
    ),
    (
        "the effect RPUSHed before the MULTI of its done record and XACK",
        "survives_a_kill_after_every_command",
        [
            (
                "                    pipe.multi()\n"
                "                    if not done_before:\n"
                "                        pipe.set(record, entry_id)\n"
                '                        pipe.rpush(effects, fields["key"])\n',
                "                    if not done_before:\n"
                '                        r.rpush(effects, fields["key"])\n'
                "                    pipe.multi()\n"
                "                    if not done_before:\n"
                "                        pipe.set(record, entry_id)\n",
            )
        ],
    ),
    (
        "new entries read before its own pending ones (old work starves)",
        "recovers_its_own_pending_after_a_kill",
        [
            (
                '        rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)\n'
                "        entries = [e for _s, found in rows for e in found if e[1]]\n",
                '        rows = r.xreadgroup(GROUP, consumer, {stream: ">"}, count=1)\n'
                "        entries = [e for _s, found in rows for e in found if e[1]]\n"
                "        if not entries:\n"
                '            rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)\n'
                "            entries = [e for _s, found in rows for e in found if e[1]]\n",
            )
        ],
    ),
    (
        "the delivery count read from the first pending entry, not the one in hand",
        "the_delivery_count_is_the_entrys_own",
        [
            (
                "info = r.xpending_range(stream, GROUP, entry_id, entry_id, 1)",
                'info = r.xpending_range(stream, GROUP, "-", "+", 1)',
            )
        ],
    ),
    (
        "returns how many entries it acknowledged, copies of done keys included",
        "returns_how_many_it_applied",
        [("applied += 0 if done_before else 1", "applied += 1")],
    ),
    (
        # Applied at most once per key for an hour: a late copy of the key applies again.
        "the done record written with a TTL (SET ... EX 3600)",
        "a_second_delivery_of_a_done_key_is_not_applied",
        [
            (
                "                        pipe.set(record, entry_id)\n",
                "                        pipe.set(record, entry_id, ex=3600)\n",
            )
        ],
    ),
    (
        "returns a count that includes the entries it dead-lettered",
        "returns_how_many_it_applied",
        [
            (
                "                pipe.execute()\n                continue\n",
                "                pipe.execute()\n"
                "                applied += 1\n"
                "                continue\n",
            )
        ],
    ),
    (
        # Entries nobody has read yet are trimmed too once more than 100 wait.
        "trims the stream to its last 100 entries after each XACK",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before else 1\n"
                "            r.xtrim(stream, maxlen=100, approximate=False)\n",
            )
        ],
    ),
    (
        # "order:7:1" and "order_7_1" are two orders: the second is only acknowledged.
        "the done record named by the key with ':' turned into '_'",
        "keys_are_compared_exactly",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                '            record = f"{prefix}:done:" + fields["key"].replace(":", "_")',
            )
        ],
    ),
    (
        # Two long keys that differ only in their last character share one record.
        "the done record named by the key cut to 40 characters",
        "keys_are_compared_exactly",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                "            record = f\"{prefix}:done:{fields['key'][:40]}\"",
            )
        ],
    ),
    (
        # A dead consumer's entry that is not idle yet is left pending for ever.
        "returns when nothing is new, ignoring what other consumers still hold",
        "takes_over_a_dead_consumers_entries",
        [
            (
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1):\n'
                "                return applied\n",
                "            return applied\n",
            )
        ],
    ),
    (
        # hash() of a str is salted per process: the second consumer names another record.
        "the done record named by hash(key)",
        "a_second_delivery_of_a_done_key_is_not_applied",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                "            record = f\"{prefix}:done:{hash(fields['key'])}\"",
            )
        ],
    ),
    (
        # A name per process: the restart never reads what the killed one held.
        "the consumer name made unique with the pid",
        "recovers_its_own_pending_after_a_kill",
        [
            (
                # The BEGIN line too: try_it's cell opens a connection the same way.
                "    ### BEGIN SOLUTION\n"
                "    r = redis.Redis.from_url(url, decode_responses=True)\n",
                "    ### BEGIN SOLUTION\n"
                "    r = redis.Redis.from_url(url, decode_responses=True)\n"
                '    consumer = f"{consumer}-{os.getpid()}"\n',
            )
        ],
    ),
    (
        # Each copy starts again at delivery 1: a dependency down twice is never got past.
        "a failed entry re-queued at the end of the stream (XADD + XACK)",
        "a_flaky_entry_is_retried_not_dead_lettered",
        [
            (
                "            except Exception:\n                continue\n",
                "            except Exception:\n"
                "                r.xadd(stream, fields)\n"
                "                r.xack(stream, GROUP, entry_id)\n"
                "                continue\n",
            )
        ],
    ),
    (
        "dead-letters at max_deliveries, one delivery early (>= for >)",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                "            if deliveries > max_deliveries:",
                "            if deliveries >= max_deliveries:",
            )
        ],
    ),
    (
        # 600000 ms read as 600 ms: a live consumer's 2 s job is taken from it.
        "idle_ms divided by 1000 for XAUTOCLAIM",
        "leaves_a_live_consumers_entry_alone",
        [
            (
                'r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)',
                'r.xautoclaim(stream, GROUP, consumer, idle_ms // 1000, cursor, 1)',
            )
        ],
    ),
    (
        "the dead letter's reason under the field 'error'",
        "dead_letters_after_exactly_max_deliveries_with_a_reason",
        [('"reason": f"delivered', '"error": f"delivered')],
    ),
    (
        # The copy comes back until the cap dead-letters a healthy entry.
        "a copy of a done key never XACKed",
        "returns_how_many_it_applied",
        [
            (
                '                        pipe.rpush(effects, fields["key"])\n'
                "                    pipe.xack(stream, GROUP, entry_id)\n",
                '                        pipe.rpush(effects, fields["key"])\n'
                "                        pipe.xack(stream, GROUP, entry_id)\n",
            )
        ],
    ),
    (
        # Past a hundred dead letters the oldest are dropped: entries nobody ran, forgotten.
        "the dead-letter stream capped at 100 entries (XADD MAXLEN)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                '                pipe.xadd(dead, {"key"',
                '                pipe.xadd(dead, maxlen=100, approximate=False, fields={"key"',
            )
        ],
    ),
    (
        # Loses nothing, but a consumer next to a busy one waits ten minutes to return.
        "waits idle_ms, not 50 ms, while another consumer holds an entry",
        "returns_soon_after_the_others_finish",
        [("            time.sleep(0.05)\n", "            time.sleep(idle_ms / 1000)\n")],
    ),
    (
        "the done record named by the key lower-cased and stripped",
        "keys_are_compared_exactly",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                "            record = f\"{prefix}:done:{fields['key'].strip().lower()}\"",
            )
        ],
    ),
    (
        # "Don't leave it hanging": the flaky entry is acknowledged and never runs again.
        "a failed run_job acknowledged (XACK in the except)",
        "a_flaky_entry_is_retried_not_dead_lettered",
        [
            (
                "            except Exception:\n                continue",
                "            except Exception:\n"
                "                r.xack(stream, GROUP, entry_id)\n"
                "                continue",
            )
        ],
    ),
    (
        "the dead letter's reason left empty",
        "dead_letters_after_exactly_max_deliveries_with_a_reason",
        [
            (
                '"reason": f"delivered {deliveries} times, more than "\n'
                '                                           f"{max_deliveries}: the consumer '
                'never finished it"',
                '"reason": ""',
            )
        ],
    ),
    (
        "the dead letter keeps the key but not the payload",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                'pipe.xadd(dead, {"key": fields["key"], "payload": fields["payload"],',
                'pipe.xadd(dead, {"key": fields["key"],',
            )
        ],
    ),
    (
        # Returns while a dead consumer's entry is pending but not idle for idle_ms yet.
        "returns once its own pending entries are done (XPENDING ... consumer)",
        "takes_over_a_dead_consumers_entries",
        [
            (
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1):',
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1, '
                "consumername=consumer):",
            )
        ],
    ),
    (
        # Each entry claimed along with the poison gains a delivery per crash.
        "XAUTOCLAIM ten idle entries at a time",
        "claims_one_idle_entry_at_a_time",
        [
            (
                'r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)',
                'r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 10)',
            )
        ],
    ),
    (
        # The entry is idle when XPENDING lists it, but the claim asks for no idle time:
        # a second rescuer between the two commands has claimed it, this one takes it
        # back, and both run it.
        "XPENDING ... IDLE finds the idle entries, then XCLAIM takes them with min-idle 0",
        "claims_one_idle_entry_at_a_time",
        [
            (
                "cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n"
                "            entries = [e for e in claimed if e[1]]",
                'idle = r.xpending_range(stream, GROUP, "-", "+", 1, idle=idle_ms)\n'
                "            entries = [e for e in r.xclaim(stream, GROUP, consumer, 0, "
                '[p["message_id"] for p in idle]) if e[1]] if idle else []',
            ),
        ],
    ),
    (
        # Right for the first call on a fresh stream; a second call reports the keys that
        # earlier calls applied too.
        "returns the length of the effects list (LLEN), not what this call applied",
        "returns_how_many_it_applied",
        [("                return applied\n", "                return r.llen(effects)\n")],
    ),
    (
        # The usual cap, written as a constant: max_deliveries=4 still dead-letters an
        # entry at its fourth delivery, which would have succeeded.
        "max_deliveries ignored: the cap is a constant 3",
        "a_flaky_entry_is_retried_not_dead_lettered",
        [("            if deliveries > max_deliveries:", "            if deliveries > 3:")],
    ),
    (
        # Trims what it has acknowledged, and with it an older entry a dead consumer held:
        # XAUTOCLAIM then drops it from the PEL and nobody ever applies it.
        "trims the stream up to each entry it acknowledges (XTRIM MINID)",
        "takes_over_a_dead_consumers_entries",
        [
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before else 1\n"
                "            r.xtrim(stream, minid=entry_id, approximate=False)\n",
            )
        ],
    ),
    (
        # A key whose entry died is not done: the producer's later, healthy copy is only
        # acknowledged, and its effect is lost.
        "the done record written when an entry is dead-lettered",
        "a_dead_lettered_key_sent_again_is_applied",
        [
            (
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.execute()\n"
                "                continue\n",
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.set(f\"{prefix}:done:{fields['key']}\", entry_id)\n"
                "                pipe.execute()\n"
                "                continue\n",
            )
        ],
    ),
    (
        # Deliveries counted per key, for ever: a key sent again after its entry was
        # dead-lettered starts above the cap and is dead-lettered unrun.
        "deliveries counted per key in a hash (HINCRBY) instead of read from XPENDING",
        "a_dead_lettered_key_sent_again_is_applied",
        [
            (
                "            info = r.xpending_range(stream, GROUP, entry_id, entry_id, 1)\n"
                '            deliveries = int(info[0]["times_delivered"]) if info else 1\n',
                "            deliveries = r.hincrby(f\"{prefix}:attempts\", fields['key'], 1)\n",
            )
        ],
    ),
    (
        # The poison comes to each new consumer by XAUTOCLAIM: it kills them all.
        "the delivery cap applied to its own pending entries only, not to claimed ones",
        "the_cap_holds_for_claimed_entries",
        [
            (
                "        if not entries:\n            cursor, claimed = r.xautoclaim",
                "        own = bool(entries)\n"
                "        if not entries:\n            cursor, claimed = r.xautoclaim",
            ),
            (
                "            if deliveries > max_deliveries:",
                "            if own and deliveries > max_deliveries:",
            ),
        ],
    ),
    (
        "dead-letters one delivery late (> max_deliveries + 1)",
        "dead_letters_after_exactly_max_deliveries_with_a_reason",
        [
            (
                "            if deliveries > max_deliveries:",
                "            if deliveries > max_deliveries + 1:",
            )
        ],
    ),
    (
        # "pedido:ção-x" and "pedido:cao-x" are two orders: the second is only acknowledged.
        "the done record named by the key with its accents taken off",
        "keys_are_compared_exactly",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                "            import unicodedata\n"
                '            plain = unicodedata.normalize("NFKD", fields["key"])\n'
                '            record = f"{prefix}:done:" + plain.encode("ascii", "ignore").decode()',
            )
        ],
    ),
    (
        # "order:x " and "order:x_" are two orders.
        "the done record named by the key with spaces turned into '_'",
        "keys_are_compared_exactly",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                '            record = f"{prefix}:done:" + fields["key"].replace(" ", "_")',
            )
        ],
    ),
    (
        # A job of 5 minutes is still running: a threshold of 5 s takes it from its holder.
        "XAUTOCLAIM with a constant 5000 ms instead of idle_ms",
        "leaves_a_live_consumers_entry_alone",
        [
            (
                "r.xautoclaim(stream, GROUP, consumer, idle_ms,",
                "r.xautoclaim(stream, GROUP, consumer, 5000,",
            )
        ],
    ),
    (
        # XRANGE adds no delivery: after each crash the poison is delivery 1 again.
        "its own pending entries fetched with XPENDING + XRANGE instead of XREADGROUP 0",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                '        rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)\n'
                "        entries = [e for _s, found in rows for e in found if e[1]]\n",
                '        mine = r.xpending_range(stream, GROUP, "-", "+", 1,\n'
                "                                consumername=consumer)\n"
                '        held = mine[0]["message_id"] if mine else None\n'
                "        entries = r.xrange(stream, held, held) if held else []\n",
            )
        ],
    ),
    (
        # The repr of the parsed dict: single quotes, True, not the JSON that came.
        "the dead letter's payload written as str() of the parsed dict",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                '"payload": fields["payload"],',
                '"payload": str(json.loads(fields["payload"])),',
            )
        ],
    ),
    (
        # "Each key once" by construction: a set cannot show a key applied twice.
        "the effects kept in a set (SADD) instead of a list",
        "applies_each_entry_once",
        [('pipe.rpush(effects, fields["key"])', 'pipe.sadd(effects, fields["key"])')],
    ),
    (
        "the dead letters pushed to a list as JSON instead of XADDed to a stream",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                'pipe.xadd(dead, {"key": fields["key"], "payload": fields["payload"],',
                'pipe.rpush(dead, json.dumps({"key": fields["key"], "payload": fields["payload"],',
            ),
            ('never finished it"})', 'never finished it"}))'),
        ],
    ),
    (
        # Half of idle_ms, "to be safe": the check's live entry looks idle for 500000 ms
        # of idle_ms 600000, not for exactly half of it (a threshold equal to the idle the
        # check set once passed by luck).
        "XAUTOCLAIM at half idle_ms (idle_ms // 2)",
        "leaves_a_live_consumers_entry_alone",
        [
            (
                "r.xautoclaim(stream, GROUP, consumer, idle_ms,",
                "r.xautoclaim(stream, GROUP, consumer, idle_ms // 2,",
            )
        ],
    ),
    (
        # A margin of its own: a live consumer's entry idle for 5/6 of idle_ms is taken.
        "XAUTOCLAIM at three quarters of idle_ms (a margin before the holder's time is up)",
        "leaves_a_live_consumers_entry_alone",
        [
            (
                "r.xautoclaim(stream, GROUP, consumer, idle_ms,",
                "r.xautoclaim(stream, GROUP, consumer, idle_ms * 3 // 4,",
            )
        ],
    ),
    (
        # An entry sent an hour ago and read a second ago looks idle for an hour: taken
        # from the consumer still working on it.
        "idle judged by the age in the entry's ID, then XCLAIM with min-idle-time 0",
        "leaves_a_live_consumers_entry_alone",
        [
            (
                "            cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, "
                "cursor, 1)[:2]\n"
                "            entries = [e for e in claimed if e[1]]\n",
                '            for p in r.xpending_range(stream, GROUP, "-", "+", 10):\n'
                '                age = time.time() * 1000 - int(p["message_id"].split("-")[0])\n'
                "                if age >= idle_ms:\n"
                "                    got = r.xclaim(stream, GROUP, consumer, 0,\n"
                '                                   [p["message_id"]])\n'
                "                    entries = [e for e in got if e[1]]\n"
                "                    break\n",
            )
        ],
    ),
    (
        # Off by one only when two consumers race on one key: the one whose EXEC fails
        # counts an entry it never applied.
        "a WatchError that falls through to the count",
        "returns_how_many_it_applied",
        [
            (
                "            except redis.WatchError:\n                continue",
                "            except redis.WatchError:\n                pass",
            )
        ],
    ),
    (
        # An approximate trim removes whole stream nodes: once more than a node of newer
        # entries is acknowledged, the node holding another consumer's entry goes too.
        "trims the stream approximately up to each entry it acknowledges (XTRIM MINID ~)",
        "the_delivery_count_is_the_entrys_own",
        [
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before else 1\n"
                "            r.xtrim(stream, minid=entry_id, approximate=True)\n",
            )
        ],
    ),
    (
        # Trims only after a dead letter: the node of an entry another consumer holds goes
        # once a dead letter comes more than a node later.
        "trims the stream approximately after each dead letter (XTRIM MINID ~)",
        "the_delivery_count_is_the_entrys_own",
        [
            (
                "                pipe.execute()\n                continue\n",
                "                pipe.execute()\n"
                "                r.xtrim(stream, minid=entry_id, approximate=True)\n"
                "                continue\n",
            )
        ],
    ),
    (
        # Harmless on a quiet stream; on a busy one an entry another consumer still holds
        # falls more than 1000 entries behind and is trimmed away unapplied.
        "trims the stream to about its last 1000 entries after each XACK (MAXLEN ~ 1000)",
        "the_delivery_count_is_the_entrys_own",
        [
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before else 1\n"
                "            r.xtrim(stream, maxlen=1000, approximate=True)\n",
            )
        ],
    ),
    (
        # A dead-letter stream nobody has replayed for a while loses its oldest letters.
        "the dead-letter stream capped at about 1000 entries (XADD MAXLEN ~ 1000)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                '                pipe.xadd(dead, {"key"',
                '                pipe.xadd(dead, maxlen=1000, approximate=True, fields={"key"',
            )
        ],
    ),
    (
        # Keys in another script lose every letter: "заказ:x" and "склад:x" share a record.
        "the done record named by the key with its non-ASCII letters dropped",
        "keys_are_compared_exactly",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                '            record = f"{prefix}:done:" + '
                "fields['key'].encode('ascii', 'ignore').decode()",
            )
        ],
    ),
    (
        # While new entries keep coming, a dead consumer's entry is never taken over.
        "new entries read before a dead consumer's idle ones (XAUTOCLAIM last)",
        "takes_over_a_dead_consumers_entries",
        [
            (
                "        if not entries:\n"
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n"
                "        if not entries:\n"
                "            rows = r.xreadgroup("
                'GROUP, consumer, {stream: ">"}, count=1, block=50)\n'
                "            entries = [e for _s, found in rows for e in found if e[1]]\n",
                "        if not entries:\n"
                "            rows = r.xreadgroup("
                'GROUP, consumer, {stream: ">"}, count=1, block=50)\n'
                "            entries = [e for _s, found in rows for e in found if e[1]]\n"
                "        if not entries:\n"
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n",
            )
        ],
    ),
    (
        # A cap larger than any small scene: harmless until an entry another consumer
        # holds falls ten thousand entries behind on a busy stream.
        "trims the stream to its last 10000 entries after each XACK (MAXLEN 10000)",
        "the_delivery_count_is_the_entrys_own",
        [
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before else 1\n"
                "            r.xtrim(stream, maxlen=10000, approximate=False)\n",
            )
        ],
    ),
    (
        # The same with a cap larger than any small scene's dead letters.
        "the dead-letter stream capped at 10000 entries (XADD MAXLEN 10000)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                '                pipe.xadd(dead, {"key"',
                '                pipe.xadd(dead, maxlen=10000, approximate=False, fields={"key"',
            )
        ],
    ),
    (
        # Idempotent by content: a producer's retry of the key with another payload (its
        # attempt number) has another record, and is applied again.
        "the done record named by a digest of the key and the payload",
        "a_second_delivery_of_a_done_key_is_not_applied",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"\n",
                "            import hashlib\n"
                '            record = f"{prefix}:done:" + hashlib.sha1('
                "(fields['key'] + fields['payload']).encode()).hexdigest()\n",
            )
        ],
    ),
    (
        # A retention by age: an entry sent long ago and still held by another consumer
        # (or never read, after an outage) goes with the acknowledged ones around it.
        "trims the stream to its last week after each XACK (XTRIM MINID ~ of 7 days ago)",
        "the_delivery_count_is_the_entrys_own",
        [
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before else 1\n"
                "            week = 7 * 86_400_000\n"
                '            r.xtrim(stream, minid=f"{int(time.time() * 1000) - week}-0")\n',
            )
        ],
    ),
    (
        # In the MULTI itself, and a cap twice the last one's: still a cap of entries
        # nobody may have read.
        "trims the stream to about 20000 entries in the MULTI of each XACK (MAXLEN ~ 20000)",
        "the_delivery_count_is_the_entrys_own",
        [
            (
                "                    pipe.xack(stream, GROUP, entry_id)\n"
                "                    pipe.execute()\n",
                "                    pipe.xack(stream, GROUP, entry_id)\n"
                "                    pipe.xtrim(stream, maxlen=20000, approximate=True)\n"
                "                    pipe.execute()\n",
            )
        ],
    ),
    (
        # A cap past any scene's length removes nothing here: the command itself (MONITOR)
        # shows a cap that drops unread entries once a backlog that long builds up.
        "trims the stream to about 100000 entries after each XACK (XTRIM MAXLEN ~ 100000)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before else 1\n"
                "            r.xtrim(stream, maxlen=100000, approximate=True)\n",
            )
        ],
    ),
    (
        "the dead-letter stream capped at about 100000 entries (XADD MAXLEN ~ 100000)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                '                pipe.xadd(dead, {"key"',
                '                pipe.xadd(dead, maxlen=100000, approximate=True, fields={"key"',
            )
        ],
    ),
    (
        # A retention by age: the dead letters of earlier runs were written over a year ago.
        "the dead letters trimmed to the last week (XADD MINID ~ of 7 days ago)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                '                pipe.xadd(dead, {"key"',
                "                week_ago = int(time.time() * 1000) - 7 * 86_400_000\n"
                '                pipe.xadd(dead, minid=f"{week_ago}-0", approximate=True, '
                'fields={"key"',
            )
        ],
    ),
    (
        # 'stale' is idle 2.3 s when the rescuer (idle_ms 2000) starts: a floor leaves it.
        "XAUTOCLAIM with idle_ms raised to a floor of 5 s (max(idle_ms, 5000))",
        "takes_over_a_dead_consumers_entries",
        [
            (
                'r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)',
                'r.xautoclaim(stream, GROUP, consumer, max(idle_ms, 5000), cursor, 1)',
            )
        ],
    ),
    (
        # "ção" sent with combining marks is another key than "ção" precomposed.
        "the done record named by the key in Unicode normal form (NFC)",
        "keys_are_compared_exactly",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"\n",
                "            import unicodedata\n"
                '            record = f"{prefix}:done:" + '
                "unicodedata.normalize('NFC', fields['key'])\n",
            )
        ],
    ),
    (
        # One name for every rescuer: what a consumer claimed is not under its own name,
        # and no one can tell who holds it.
        "claims idle entries under a fixed name ('rescuer'), not its own",
        "takes_over_a_dead_consumers_entries",
        [
            (
                "r.xautoclaim(stream, GROUP, consumer, idle_ms,",
                'r.xautoclaim(stream, GROUP, "rescuer", idle_ms,',
            )
        ],
    ),
    (
        # A dead consumer's name reused: its entries read as its own (XREADGROUP ... 0 under
        # its name) stay its own, and the dead one, restarted, runs them again.
        "takes over an idle consumer's entries by reading under its name, no XAUTOCLAIM",
        "takes_over_a_dead_consumers_entries",
        [
            (
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n",
                "            for c in r.xinfo_consumers(stream, GROUP):\n"
                '                name = c["name"]\n'
                '                if name != consumer and c["pending"] and c["idle"] >= idle_ms:\n'
                '                    rows = r.xreadgroup(GROUP, name, {stream: "0"}, count=1)\n'
                "                    entries = [e for _s, found in rows for e in found if e[1]]\n"
                "                    if entries:\n"
                "                        break\n",
            )
        ],
    ),
    (
        # "One recovery consumer for the group": XPENDING ... IDLE finds an idle entry, and
        # XCLAIM (min-idle-time given) takes it under a fixed name. It is 'recovery''s in
        # the PEL: a consumer named so runs it beside the one that claimed it.
        "claims idle entries with XCLAIM under a fixed name ('recovery') after XPENDING IDLE",
        "takes_over_a_dead_consumers_entries",
        [
            (
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n",
                '            idle = r.xpending_range(stream, GROUP, "-", "+", 1, idle=idle_ms)\n'
                "            entries = []\n"
                "            if idle:\n"
                '                taken = r.xclaim(stream, GROUP, "recovery", idle_ms,\n'
                '                                 [idle[0]["message_id"]])\n'
                "                entries = [e for e in taken if e[1]]\n",
            )
        ],
    ),
    (
        # XCLAIM read as "the consumer that holds it": the idle entry claimed under its
        # dead holder's name, which it stays under; the dead one, restarted, reads its own
        # pending first (XREADGROUP ... 0) and runs it beside the one that claimed it.
        "claims an idle entry with XCLAIM under the name of the consumer that held it",
        "takes_over_a_dead_consumers_entries",
        [
            (
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n",
                '            idle = r.xpending_range(stream, GROUP, "-", "+", 1, idle=idle_ms)\n'
                "            entries = []\n"
                "            if idle:\n"
                '                taken = r.xclaim(stream, GROUP, idle[0]["consumer"], idle_ms,\n'
                '                                 [idle[0]["message_id"]])\n'
                "                entries = [e for e in taken if e[1]]\n",
            )
        ],
    ),
    (
        # A name of its own making for what it claims ("to tell claims apart"): the
        # consumer's own restart (XREADGROUP <consumer> 0) never finds them, and a
        # consumer of that name runs them beside it.
        "claims idle entries under a name of its own making (consumer + '-claims')",
        "takes_over_a_dead_consumers_entries",
        [
            (
                "r.xautoclaim(stream, GROUP, consumer, idle_ms,",
                'r.xautoclaim(stream, GROUP, f"{consumer}-claims", idle_ms,',
            )
        ],
    ),
    (
        # "Wait for new entries as long as an idle one needs to be claimable": XREADGROUP
        # ... > BLOCK idle_ms. With idle_ms 600000 and nothing new, it sits ten minutes
        # in that read after the other consumer's entry is done.
        "blocks idle_ms on XREADGROUP ... > instead of about 50 ms",
        "returns_soon_after_the_others_finish",
        [('{stream: ">"}, count=1, block=50)', '{stream: ">"}, count=1, block=idle_ms)')],
    ),
    (
        # XPENDING ... IDLE finds the entry and its count, then XAUTOCLAIM adds a delivery
        # the consumer never reads: one crash more than max_deliveries allows.
        "the delivery count of a claimed entry read before the claim",
        "the_cap_holds_for_claimed_entries",
        [
            (
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n",
                '            idle = r.xpending_range(stream, GROUP, "-", "+", 1, idle=idle_ms)\n'
                '            before = {p["message_id"]: int(p["times_delivered"]) for p in idle}\n'
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n",
            ),
            ("    applied = 0\n", "    applied = 0\n    before = {}\n"),
            (
                "            info = r.xpending_range(stream, GROUP, entry_id, entry_id, 1)\n"
                '            deliveries = int(info[0]["times_delivered"]) if info else 1\n',
                "            info = r.xpending_range(stream, GROUP, entry_id, entry_id, 1)\n"
                '            deliveries = int(info[0]["times_delivered"]) if info else 1\n'
                "            deliveries = before.pop(entry_id, deliveries)\n",
            ),
        ],
    ),
    # An entry deleted from the stream (XDEL, XTRIM) while in the consumer's own PEL:
    # XREADGROUP ... 0 answers with its ID and no fields until it leaves the PEL.
    (
        # Its fields read as if it had some, before the try around run_job: KeyError on
        # fields["payload"], the consumer dies, and its restart dies on it again.
        "reads its own pending entry deleted from the stream as an entry (crashes)",
        "returns_how_many_it_applied",
        [
            (_OWN_READ, _OWN_READ.replace(" if e[1]]", "]")),
            (
                "        for entry_id, fields in entries:\n",
                "        for entry_id, fields in entries:\n"
                '            payload = json.loads(fields["payload"])\n',
            ),
            (
                '                run_job(json.loads(fields["payload"]), deliveries)',
                "                run_job(payload, deliveries)",
            ),
        ],
    ),
    (
        # 'continue' on an empty entry, with no XACK: the next XREADGROUP ... 0 hands it
        # back before any XAUTOCLAIM could drop it, and the consumer spins on it.
        "skips its own pending entry deleted from the stream, no XACK (spins for ever)",
        "returns_how_many_it_applied",
        [
            (
                _OWN_READ,
                _OWN_READ.replace(" if e[1]]", "]"),
            ),
            (
                "        for entry_id, fields in entries:\n",
                "        for entry_id, fields in entries:\n"
                "            if not fields:  # deleted from the stream: nothing to run\n"
                "                continue\n",
            ),
        ],
    ),
    (
        # "Its own pending entries are XREADGROUP ... 0's business": it claims only other
        # consumers' idle entries. Its own deleted entry, skipped, is never dropped: it
        # stays first in its PEL, and hides the entry it failed on behind it.
        "skips its own deleted pending entry and XCLAIMs only others' (pending for ever)",
        "returns_how_many_it_applied",
        [
            (
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n",
                '            idle = [p for p in r.xpending_range(stream, GROUP, "-", "+", 10,\n'
                "                                                idle=idle_ms)\n"
                '                    if p["consumer"] != consumer]\n'
                "            entries = [e for e in r.xclaim(stream, GROUP, consumer, idle_ms,\n"
                '                                           [idle[0]["message_id"]])\n'
                "                       if e[1]] if idle else []\n",
            )
        ],
    ),
    (
        # XACKed at once, and counted as if it had been applied.
        "counts its own pending entry deleted from the stream as applied",
        "returns_how_many_it_applied",
        [
            (
                _OWN_READ,
                _OWN_READ
                + "        gone = [i for _s, found in rows for i, fields in found if not fields]\n"
                "        if gone:\n"
                "            r.xack(stream, GROUP, *gone)\n"
                "            applied += len(gone)\n"
                "            continue\n",
            )
        ],
    ),
    (
        # Killed right after the GETSET, the record says done and the effect never came:
        # the restart only acknowledges the entry, and the key is lost for good.
        "the done record claimed with GETSET, then the MULTI of the effect and the XACK",
        "survives_a_kill_after_every_command",
        [
            (
                _APPLY,
                "            record = f\"{prefix}:done:{fields['key']}\"\n"
                "            done_before = r.getset(record, entry_id) is not None\n"
                "            with r.pipeline(transaction=True) as pipe:\n"
                "                if not done_before:\n"
                '                    pipe.rpush(effects, fields["key"])\n'
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.execute()\n",
            )
        ],
    ),
    (
        # Two copies of a key at once both find no field before either writes one: both
        # apply it.
        "the done records kept in one hash, read with HGET outside a WATCH",
        "two_copies_of_a_key_at_once_apply_once",
        [
            (
                _APPLY,
                '            done = f"{prefix}:done"\n'
                '            done_before = r.hget(done, fields["key"]) is not None\n'
                "            with r.pipeline(transaction=True) as pipe:\n"
                "                if not done_before:\n"
                '                    pipe.hset(done, fields["key"], entry_id)\n'
                '                    pipe.rpush(effects, fields["key"])\n'
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.execute()\n",
            )
        ],
    ),
    (
        # The look before run_job is harmless; the one that decides, after it, is made
        # without WATCH: two copies that both pass it both apply the key.
        "an early EXISTS of the done record before run_job, read again without WATCH",
        "two_copies_of_a_key_at_once_apply_once",
        [
            (
                _APPLY,
                "            done_before = r.exists(record)\n"
                "            with r.pipeline(transaction=True) as pipe:\n"
                "                if not done_before:\n"
                "                    pipe.set(record, entry_id)\n"
                '                    pipe.rpush(effects, fields["key"])\n'
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.execute()\n",
            ),
            (
                "            try:\n"
                '                run_job(json.loads(fields["payload"]), deliveries)\n',
                "            record = f\"{prefix}:done:{fields['key']}\"\n"
                "            if r.exists(record):  # a copy of a done key: only XACK it\n"
                "                r.xack(stream, GROUP, entry_id)\n"
                "                continue\n"
                "            try:\n"
                '                run_job(json.loads(fields["payload"]), deliveries)\n',
            ),
        ],
    ),
    (
        # "Don't run a job whose key is done": one look before run_job, and the WATCH set
        # only afterwards, with no second look. It guards nothing the look decided.
        "the done record looked at before run_job; WATCH set afterwards, with no second look",
        "two_copies_of_a_key_at_once_apply_once",
        [
            (
                "            try:\n"
                '                run_job(json.loads(fields["payload"]), deliveries)\n'
                "            except Exception:\n"
                "                continue\n"
                "            record = f\"{prefix}:done:{fields['key']}\"\n"
                "            try:\n"
                "                with r.pipeline(transaction=True) as pipe:\n"
                "                    pipe.watch(record)\n"
                "                    done_before = pipe.exists(record)\n"
                "                    pipe.multi()\n",
                "            record = f\"{prefix}:done:{fields['key']}\"\n"
                "            done_before = r.exists(record)\n"
                "            if not done_before:\n"
                "                try:\n"
                '                    run_job(json.loads(fields["payload"]), deliveries)\n'
                "                except Exception:\n"
                "                    continue\n"
                "            try:\n"
                "                with r.pipeline(transaction=True) as pipe:\n"
                "                    pipe.watch(record)\n"
                "                    pipe.multi()\n",
            )
        ],
    ),
    (
        # "A record name of fixed length, whatever the key holds": 8 hex digits, as git
        # shows a commit. order:56076 and order:126995 share one.
        "the done record named by sha256(key) cut to 8 hex digits",
        "keys_are_compared_exactly",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"\n",
                '            record = f"{prefix}:done:" + __import__("hashlib").sha256(\n'
                '                fields["key"].encode()).hexdigest()[:8]\n',
            )
        ],
    ),
    (
        # "Don't block the loop": new entries read without BLOCK, and no pause when
        # nothing is its own to run: it looks again at once, thousands of times a second.
        "XREADGROUP > without BLOCK and no 50 ms pause: a hot loop while another works",
        "returns_soon_after_the_others_finish",
        [
            ('{stream: ">"}, count=1, block=50)', '{stream: ">"}, count=1)'),
            ("            time.sleep(0.05)\n            continue\n", "            continue\n"),
        ],
    ),
    (
        # As "skips its own deleted pending entry and XCLAIMs only others'": the entry it
        # holds behind the deleted one is never run, by it or by anyone.
        "skips its own deleted pending entry, XCLAIMs only others': the entry behind it waits",
        "a_deleted_entry_hides_none_of_yours",
        [
            (
                "            cursor, claimed = r.xautoclaim("
                'stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n'
                "            entries = [e for e in claimed if e[1]]\n",
                '            idle = [p for p in r.xpending_range(stream, GROUP, "-", "+", 10,\n'
                "                                                idle=idle_ms)\n"
                '                    if p["consumer"] != consumer]\n'
                "            entries = [e for e in r.xclaim(stream, GROUP, consumer, idle_ms,\n"
                '                                           [idle[0]["message_id"]])\n'
                "                       if e[1]] if idle else []\n",
            )
        ],
    ),
    (
        # Record and effect in one MULTI, the XACK sent after it: a kill between the two
        # leaves an applied entry pending, and its next delivery (one over the cap)
        # dead-letters it: an entry both applied and dead-lettered (_applied_or_dead).
        "the XACK sent after the MULTI of the done record and the effect",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                "                    pipe.xack(stream, GROUP, entry_id)\n"
                "                    pipe.execute()\n",
                "                    pipe.execute()\n"
                "                r.xack(stream, GROUP, entry_id)\n",
            )
        ],
    ),
    (
        # run_job called again in a loop of its own, with a delivery count it makes up:
        # Redis never delivers the entry again, XPENDING shows 1 however often it ran.
        "a failed run_job retried in a loop of its own up to max_deliveries",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                "            try:\n"
                '                run_job(json.loads(fields["payload"]), deliveries)\n'
                "            except Exception:\n"
                "                continue\n",
                "            for attempt in range(deliveries, max_deliveries + 1):\n"
                "                try:\n"
                '                    run_job(json.loads(fields["payload"]), attempt)\n'
                "                    break\n"
                "                except Exception:\n"
                "                    continue\n"
                "            else:\n"
                "                pipe = r.pipeline(transaction=True)\n"
                '                pipe.xadd(dead, {"key": fields["key"],\n'
                '                                 "payload": fields["payload"],\n'
                '                                 "reason": f"failed {max_deliveries} times"})\n'
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.execute()\n"
                "                continue\n",
            )
        ],
    ),
    (
        # Two consumers 'Pod_1' and 'pod_1' share one name, and each reads the other's
        # pending entries (XREADGROUP ... 0) and runs them beside it.
        "the consumer name lower-cased before use",
        "the_cap_holds_for_claimed_entries",
        [("    applied = 0\n", "    applied = 0\n    consumer = consumer.lower()\n")],
    ),
    (
        # The entry it claimed from a dead consumer is applied, but only what it read
        # itself is counted.
        "entries claimed from a dead consumer applied but left out of the count",
        "returns_how_many_it_applied",
        [
            (
                "            entries = [e for e in claimed if e[1]]\n",
                "            entries = [e for e in claimed if e[1]]\n"
                "            from_claim = bool(entries)\n",
            ),
            (
                '        rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)\n',
                "        from_claim = False\n"
                '        rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)\n',
            ),
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before or from_claim else 1\n",
            ),
        ],
    ),
    (
        # Every entry XREADGROUP ... 0 returns gains a delivery: reading them all each
        # round, then running the first, counts each crash on the poison against the others.
        "its own pending entries read all at once (no COUNT), the first one run",
        "claims_one_idle_entry_at_a_time",
        [
            (
                _OWN_READ,
                _OWN_READ.replace(", count=1)", ")").replace("if e[1]]\n", "if e[1]][:1]\n"),
            )
        ],
    ),
    (
        # A cap that removes nothing at a check's scale (a backlog of a few hundred keys)
        # loses every effect past the thousandth: read as sent (MONITOR).
        "the effects list capped at its last 1000 keys (LTRIM after each apply)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                "                    pipe.execute()\n"
                "            except redis.WatchError:",
                "                    pipe.execute()\n"
                "                r.ltrim(effects, -1000, -1)\n"
                "            except redis.WatchError:",
            )
        ],
    ),
    (
        # The exercise's order is own pending, then idle ones, then new ones: claimed
        # first, a dead consumer's idle entry runs before the one 'a' held already (a
        # delay, not a loss: the mild check of its own, not the severe restart check).
        "XAUTOCLAIM before its own pending entries (XREADGROUP ... 0 second)",
        "reads_its_own_pending_before_claiming",
        [
            (
                '        rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)\n'
                "        entries = [e for _s, found in rows for e in found if e[1]]\n"
                "        if not entries:\n"
                "            cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, "
                "cursor, 1)[:2]\n"
                "            entries = [e for e in claimed if e[1]]\n",
                "        cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, "
                "cursor, 1)[:2]\n"
                "        entries = [e for e in claimed if e[1]]\n"
                "        if not entries:\n"
                '            rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)\n'
                "            entries = [e for _s, found in rows for e in found if e[1]]\n",
            )
        ],
    ),
    (
        # One write, no MULTI: the XACK goes through when the XADD fails, and the kill
        # sweep (a kill after a command) never splits one write. Read as sent (MONITOR).
        "the dead letter and its XACK in a pipeline without MULTI (transaction=False)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                "                pipe = r.pipeline(transaction=True)\n"
                "                pipe.xadd(dead,",
                "                pipe = r.pipeline(transaction=False)\n"
                "                pipe.xadd(dead,",
            )
        ],
    ),
    (
        # The apply step outside the else of the cap: a dead-lettered entry is not run,
        # but falls through to the MULTI that applies it, and is both dead and done.
        "a dead-lettered entry falls through to the MULTI that applies it",
        "a_dead_lettered_key_sent_again_is_applied",
        [
            (
                "                pipe.execute()\n"
                "                continue\n"
                "            try:\n"
                '                run_job(json.loads(fields["payload"]), deliveries)\n'
                "            except Exception:\n"
                "                continue\n",
                "                pipe.execute()\n"
                "            else:\n"
                "                try:\n"
                '                    run_job(json.loads(fields["payload"]), deliveries)\n'
                "                except Exception:\n"
                "                    continue\n",
            )
        ],
    ),
    (
        # A page of the PEL searched for the entry in hand: behind a hundred older entries
        # that others hold, the poison is not on it, and a count of 1 by default never
        # stops it.
        "the delivery count looked up in the first 100 pending entries (XPENDING - + 100)",
        "the_delivery_count_is_the_entrys_own",
        [
            (
                "            info = r.xpending_range(stream, GROUP, entry_id, entry_id, 1)\n",
                '            page = r.xpending_range(stream, GROUP, "-", "+", 100)\n'
                '            info = [p for p in page if p["message_id"] == entry_id]\n',
            )
        ],
    ),
    (
        # Read, then WATCHed: another consumer that applies the key between the two leaves
        # the WATCH nothing to notice, and the look is out of date.
        "the done record read just before its WATCH, not under it",
        "two_copies_of_a_key_at_once_apply_once",
        [
            (
                "                    pipe.watch(record)\n"
                "                    done_before = pipe.exists(record)\n",
                "                    done_before = r.exists(record)\n"
                "                    pipe.watch(record)\n",
            )
        ],
    ),
    (
        # A time limit of its own: it gives up while another consumer still holds an
        # entry. The check runs the second consumer with a clock that runs fast while it
        # sleeps (ex09/fastclock.py), so a few seconds of waiting are minutes by its clock.
        "gives up after 3 s of its own clock while another consumer still holds an entry",
        "leaves_a_live_consumers_entry_alone",
        [
            ('    cursor = "0-0"\n', '    cursor = "0-0"\n    give_up = time.time() + 3\n'),
            (
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1):\n',
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1) or (\n'
                "                time.time() > give_up\n"
                "            ):\n",
            ),
        ],
    ),
    (
        "waits at most 60 s (monotonic) for the entries others hold, then returns",
        "leaves_a_live_consumers_entry_alone",
        [
            ('    cursor = "0-0"\n', '    cursor = "0-0"\n    give_up = time.monotonic() + 60\n'),
            (
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1):\n',
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1) or (\n'
                "                time.monotonic() > give_up\n"
                "            ):\n",
            ),
        ],
    ),
    (
        # A count of empty rounds instead of a time (15 s at 50 ms a round and a BLOCK of
        # 50): the fast clock also makes each pause and each BLOCK of 'b' short, so it
        # looks again hundreds of times a second, and the check keeps 'elsewhere' pending
        # until Redis has run checks.LOOKS of its reads (about 200 rounds).
        "gives up after 100 empty rounds while another consumer still holds an entry",
        "leaves_a_live_consumers_entry_alone",
        [
            ('    cursor = "0-0"\n', '    cursor = "0-0"\n    empty_rounds = 0\n'),
            (
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1):\n',
                "            empty_rounds += 1\n"
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1) or (\n'
                "                empty_rounds > 100\n"
                "            ):\n",
            ),
        ],
    ),
    (
        # datetime.now() runs on a clock of its own, not time.time(): the fast clock moves
        # it as well.
        "waits at most 60 s (datetime.now()) for the entries others hold, then returns",
        "leaves_a_live_consumers_entry_alone",
        [
            (
                '    cursor = "0-0"\n',
                '    cursor = "0-0"\n'
                "    import datetime\n"
                "    give_up = datetime.datetime.now() + datetime.timedelta(seconds=60)\n",
            ),
            (
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1):\n',
                '            if not r.xpending_range(stream, GROUP, "-", "+", 1) or (\n'
                "                datetime.datetime.now() > give_up\n"
                "            ):\n",
            ),
        ],
    ),
    (
        # The backlog pattern of the Redis docs: once its own pending read comes back
        # empty, it reads new entries only. An entry whose run_job raised stays its own,
        # pending, and waits for idle_ms (ten minutes in the sweep) until an XAUTOCLAIM.
        "reads its own pending entries only until the first empty read, then new ones only",
        "survives_a_kill_after_every_command",
        [
            ('    cursor = "0-0"\n', '    cursor = "0-0"\n    backlog = True\n'),
            (
                _OWN_READ,
                '{stream: "0"}, count=1) if backlog else []\n'
                "        entries = [e for _s, found in rows for e in found if e[1]]\n"
                "        backlog = backlog and bool(entries)\n",
            ),
        ],
    ),
    (
        # Done records in one sorted set, capped at the last 10000 keys: a cap that removes
        # nothing at a check's scale, and lets a late copy of an old key apply again.
        "the done records kept in a sorted set capped at 10000 (ZREMRANGEBYRANK)",
        "a_backlog_of_hundreds_is_applied_once_each",
        [
            (
                "            record = f\"{prefix}:done:{fields['key']}\"",
                '            record = f"{prefix}:done"',
            ),
            (
                "                    done_before = pipe.exists(record)\n"
                "                    pipe.multi()\n"
                "                    if not done_before:\n"
                "                        pipe.set(record, entry_id)\n",
                '                    done_before = pipe.zscore(record, fields["key"]) is not None\n'
                "                    pipe.multi()\n"
                "                    if not done_before:\n"
                '                        pipe.zadd(record, {fields["key"]: time.time()})\n'
                "                        pipe.zremrangebyrank(record, 0, -10001)\n",
            ),
        ],
    ),
    (
        # NOACK: an entry read is acknowledged at once, so a kill mid-job loses it.
        "new entries read with NOACK: none is ever pending",
        "recovers_its_own_pending_after_a_kill",
        [('{stream: ">"}, count=1, block=50)', '{stream: ">"}, count=1, block=50, noack=True)')],
    ),
    (
        # Its own pending ones one at a time, but every new entry at once: they are all its
        # own, pending, while it works on the first; killed, it leaves them to wait idle_ms
        # for anyone else, and each crash on the first adds a delivery to the others.
        "new entries read with no COUNT: one consumer holds them all while it works",
        "claims_one_idle_entry_at_a_time",
        [('{stream: ">"}, count=1, block=50)', '{stream: ">"}, block=50)')],
    ),
    (
        # Back to the first ten pending entries whenever a round applied something: while
        # new entries keep coming, an idle entry behind ten busy ones is never reached.
        "XAUTOCLAIM's cursor set back to 0-0 after each entry applied",
        "claims_an_idle_entry_behind_busy_ones",
        [
            (
                "            applied += 0 if done_before else 1\n",
                "            applied += 0 if done_before else 1\n"
                '            cursor = "0-0"\n',
            )
        ],
    ),
    (
        # A path of its own for claimed entries: the cap read there, the dead letter and
        # its XACK sent as two commands (the sweep's consumer never claims, the backlog's
        # neither): a kill between them dead-letters the entry twice.
        "a claimed entry over the cap dead-lettered by two commands of its own",
        "the_cap_holds_for_claimed_entries",
        [
            (
                "cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n"
                "            entries = [e for e in claimed if e[1]]",
                "cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n"
                "            entries = []\n"
                "            for eid, f in claimed:\n"
                "                if not f:\n"
                "                    continue\n"
                "                n = r.xpending_range(stream, GROUP, eid, eid, 1)[0]\n"
                "                n = n['times_delivered']\n"
                "                if n > max_deliveries:\n"
                "                    r.xadd(dead, {'key': f['key'], 'payload': f['payload'],\n"
                "                                  'reason': 'too many deliveries'})\n"
                "                    r.xack(stream, GROUP, eid)\n"
                "                else:\n"
                "                    entries.append((eid, f))",
            )
        ],
    ),
    (
        # A path of its own for claimed entries: the record claimed with SET NX, then the
        # effect and the XACK, each a command of its own: a kill between them loses the
        # effect (the record says done) or applies it twice.
        "claimed entries applied by SET NX, RPUSH and XACK sent apart",
        "claims_one_idle_entry_at_a_time",
        [
            (
                "cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n"
                "            entries = [e for e in claimed if e[1]]",
                "cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]\n"
                "            entries = []\n"
                "            for eid, f in claimed:\n"
                "                if not f:\n"
                "                    continue\n"
                "                n = r.xpending_range(stream, GROUP, eid, eid, 1)[0]\n"
                "                n = n['times_delivered']\n"
                "                if n > max_deliveries:\n"
                "                    entries.append((eid, f))\n"
                "                    continue\n"
                "                try:\n"
                "                    run_job(json.loads(f['payload']), n)\n"
                "                except Exception:\n"
                "                    continue\n"
                "                if r.set(f\"{prefix}:done:{f['key']}\", eid, nx=True):\n"
                "                    r.rpush(effects, f['key'])\n"
                "                    applied += 1\n"
                "                r.xack(stream, GROUP, eid)",
            )
        ],
    ),
    (
        # XDEL for XACK: the poison leaves the stream but not the PEL, where it stays, with
        # no fields, until some XAUTOCLAIM drops it (its own next round's, here).
        "dead letters XDELed instead of XACKed: the entry stays pending, a ghost",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                "                pipe.xack(stream, GROUP, entry_id)\n"
                "                pipe.execute()\n"
                "                continue",
                "                pipe.xdel(stream, entry_id)\n"
                "                pipe.execute()\n"
                "                continue",
            )
        ],
    ),
    (
        "applied entries XDELed instead of XACKed: each stays pending, a ghost",
        "dead_letters_a_crashing_entry_after_max_deliveries",
        [
            (
                "                    pipe.xack(stream, GROUP, entry_id)\n"
                "                    pipe.execute()\n"
                "            except redis.WatchError:",
                "                    pipe.xdel(stream, entry_id)\n"
                "                    pipe.execute()\n"
                "            except redis.WatchError:",
            )
        ],
    ),
]


def _edited_consumer(
    name: str, edits: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], str]:
    """The reference's namespace, its ``stream_consumer.py`` rewritten by ``edits``."""
    # A consumer that never returns is as stuck after 10 s as after the 30 s a student's
    # machine is given; the zoo has two of them, and this keeps CI under its budget.
    # Every other check of every entry still has to pass or fail on its merits.
    monkeypatch.setattr(ex09_consumers, "RUN_S", 10.0)
    values, notes = namespace_of(notebook_for(SOLUTIONS, "ex09"))
    assert notes == []
    path = Path("stream_consumer.py")  # the test's own folder (tests/grading/conftest.py)
    source = path.read_text()
    for old, new in edits:
        assert old in source, f"zoo entry {name!r} no longer matches the reference: {old!r}"
        source = source.replace(old, new)
    path.write_text(source)
    return values, source


@pytest.mark.parametrize(("name", "must_fail", "edits"), ZOO, ids=[z[0] for z in ZOO])
def test_ex09_wrong_consumer_is_caught_by_its_check(name, must_fail, edits, monkeypatch):
    values, source = _edited_consumer(name, edits, monkeypatch)
    compiles(source, name)
    skip_unless_drawn(name)
    # The named check, then (for the entries drawn, ``runs_its_control``) the others one
    # at a time until one passes (the feedback points at the one mistake): every check of
    # every entry took minutes of CI.
    checks = {c.name: c for c in catalog.all_checks("ex09", HIDDEN)}
    caught = run_check(checks[must_fail], Namespace(values, Path.cwd()))
    assert caught.status != CheckStatus.PASSED, (name, caught)
    if not runs_its_control(name):
        return
    others = [ONCE, *sorted(set(checks) - {must_fail, ONCE})]
    kept = None
    for other in others:
        if other != must_fail:
            kept = run_check(checks[other], Namespace(values, Path.cwd()))
            if kept.status == CheckStatus.PASSED:
                break
    assert kept is not None and kept.status == CheckStatus.PASSED, f"{name}: every check failed"


#: The prefix tidied before use: every check's prefix has a capital and a '_'
#: (checks.PREFIX), so such a consumer reads a stream with no group and crashes in every
#: check. Not a zoo entry: the zoo asks each entry to keep one check passing (feedback that
#: points at one mistake), and this mistake rightly fails them all.
PREFIX_TIDIED = [
    (
        "    r = redis.Redis.from_url(url, decode_responses=True)\n    stream, dead,",
        "    r = redis.Redis.from_url(url, decode_responses=True)\n"
        "    prefix = prefix.lower()\n    stream, dead,",
    )
]


def test_a_prefix_lower_cased_before_use_fails_and_is_told_to_keep_it_unchanged(monkeypatch):
    values, _ = _edited_consumer("the prefix lower-cased", PREFIX_TIDIED, monkeypatch)
    checks = {c.name: c for c in catalog.all_checks("ex09", HIDDEN)}
    caught = run_check(checks["applies_each_entry_once"], Namespace(values, Path.cwd()))
    assert caught.status == CheckStatus.FAILED, caught
    assert "unchanged" in caught.hint + caught.got + caught.expected, caught


def test_a_consumer_that_ignores_its_url_fails_in_check_as_it_does_when_graded(monkeypatch):
    # Under labkit grade each check's Redis is a private one on a unix socket, so a
    # consumer that connects to the machine's default Redis instead of the url it is
    # given reaches nothing. check() must not pass it: its Redis is the lab's, but in a
    # database other than the default one a hard-coded client lands in.
    monkeypatch.delenv("LABKIT_REDIS_URL", raising=False)
    values, notes = namespace_of(notebook_for(SOLUTIONS, "ex09"))
    assert notes == []
    path = Path("stream_consumer.py")
    given = "    r = redis.Redis.from_url(url, decode_responses=True)\n"
    source = path.read_text()
    assert given in source, "the reference no longer connects this way"
    path.write_text(source.replace(given, "    r = redis.Redis(decode_responses=True)\n"))
    [once] = [c for c in catalog.all_checks("ex09", HIDDEN) if c.name == ONCE]
    outcome = run_check(once, Namespace(values, Path.cwd()))
    assert outcome.status == CheckStatus.FAILED, outcome


def _with_consume(reference: str, consume: str) -> str:
    """The reference file with everything from ``def consume(`` to ``__main__`` replaced."""
    start = reference.index("def consume(")
    end = reference.index('\n\nif __name__ == "__main__":')
    return reference[:start] + consume.lstrip("\n") + "\n" + reference[end:]


#: Right consumers written otherwise, ``(way, check, source)``: the source replaces the
#: reference's ``consume`` (and may add module-level helpers before it); each must keep
#: the check most likely to trip on it.
RIGHT: list[tuple[str, str, str]] = [
    (
        "a class with Lua scripts for the apply and the dead letter",
        "survives_a_kill_after_every_command",
        r'''
# A class, Lua scripts for both atomic steps, a dataclass for the entry.
from dataclasses import dataclass

APPLY_LUA = """
local done = redis.call('EXISTS', KEYS[1])
if done == 0 then
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call('RPUSH', KEYS[2], ARGV[1])
end
redis.call('XACK', KEYS[3], ARGV[3], ARGV[2])
return 1 - done
"""

DEAD_LUA = """
redis.call('XADD', KEYS[2], '*', 'key', ARGV[1], 'payload', ARGV[2], 'reason', ARGV[3])
return redis.call('XACK', KEYS[1], ARGV[4], ARGV[5])
"""


@dataclass
class Entry:
    entry_id: str
    key: str
    payload: str


class Consumer:
    def __init__(self, url: str, prefix: str, name: str, max_deliveries: int, idle_ms: int):
        self.r = redis.Redis.from_url(url, decode_responses=True)
        self.prefix = prefix
        self.name = name
        self.max_deliveries = max_deliveries
        self.idle_ms = idle_ms
        self.stream = f"{prefix}:stream"
        self.apply_script = self.r.register_script(APPLY_LUA)
        self.dead_script = self.r.register_script(DEAD_LUA)
        self.cursor = "0-0"  # XAUTOCLAIM goes on where it stopped

    @staticmethod
    def _first(rows):
        for _stream, found in rows or []:
            for entry_id, fields in found:
                if fields:
                    return Entry(entry_id, fields["key"], fields["payload"])
        return None

    def next_entry(self):
        own = self._first(self.r.xreadgroup(GROUP, self.name, {self.stream: "0"}, count=1))
        if own:
            return own
        self.cursor, claimed, *_ = self.r.xautoclaim(self.stream, GROUP, self.name,
                                                     self.idle_ms, self.cursor, 1)
        claimed = [(i, f) for i, f in claimed if f]
        if claimed:
            entry_id, fields = claimed[0]
            return Entry(entry_id, fields["key"], fields["payload"])
        return self._first(self.r.xreadgroup(GROUP, self.name, {self.stream: ">"},
                                             count=1, block=50))

    def deliveries(self, entry_id: str) -> int:
        info = self.r.xpending_range(self.stream, GROUP, entry_id, entry_id, 1)
        return int(info[0]["times_delivered"]) if info else 1

    def anything_pending(self) -> bool:
        return int(self.r.xpending(self.stream, GROUP)["pending"]) > 0

    def run(self) -> int:
        applied = 0
        while True:
            entry = self.next_entry()
            if entry is None:
                if not self.anything_pending():
                    return applied
                time.sleep(0.05)
                continue
            n = self.deliveries(entry.entry_id)
            if n > self.max_deliveries:
                self.dead_script(
                    keys=[self.stream, f"{self.prefix}:dead"],
                    args=[entry.key, entry.payload,
                          f"too many deliveries ({n} > {self.max_deliveries})",
                          GROUP, entry.entry_id])
                continue
            try:
                run_job(json.loads(entry.payload), n)
            except Exception as exc:  # leave it pending: it comes back
                print(f"job {entry.key} failed: {exc!r}", file=sys.stderr)
                continue
            applied += int(self.apply_script(
                keys=[f"{self.prefix}:done:{entry.key}", f"{self.prefix}:effects", self.stream],
                args=[entry.key, entry.entry_id, GROUP]))


def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    """Run the entries of the stream (see the exercise)."""
    return Consumer(url, prefix, consumer, max_deliveries, idle_ms).run()
''',
    ),
    (
        "XPENDING IDLE and XCLAIM instead of XAUTOCLAIM; r.transaction for the apply",
        "claims_one_idle_entry_at_a_time",
        r"""
# Functions and helpers; XPENDING IDLE + XCLAIM instead of XAUTOCLAIM; r.transaction().
import logging

log = logging.getLogger("consumer")
POLL_S = 0.05


def _one(rows):
    return next(((i, f) for _s, found in (rows or []) for i, f in found if f), None)


def _claim_idle(r, stream, consumer, idle_ms):
    for p in r.xpending_range(stream, GROUP, "-", "+", 10, idle=idle_ms):
        got = r.xclaim(stream, GROUP, consumer, idle_ms, [p["message_id"]])
        got = [(i, f) for i, f in got if f]
        if got:
            return got[0]
    return None


def consume(url: str, prefix: str, consumer: str, max_deliveries: int = 3,
            idle_ms: int = 1000) -> int:
    r = redis.Redis.from_url(url, decode_responses=True)
    stream = f"{prefix}:stream"
    applied = 0
    while True:
        entry = (_one(r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1))
                 or _claim_idle(r, stream, consumer, idle_ms)
                 or _one(r.xreadgroup(GROUP, consumer, {stream: ">"}, count=1, block=50)))
        if entry is None:
            if r.xpending(stream, GROUP)["pending"] == 0:
                break
            time.sleep(POLL_S)
            continue
        entry_id, fields = entry
        key, payload = fields["key"], fields["payload"]
        [info] = r.xpending_range(stream, GROUP, entry_id, entry_id, 1) or [
            {"times_delivered": 1}]
        deliveries = int(info["times_delivered"])
        if deliveries > max_deliveries:
            log.warning("dead-lettering %s after %d deliveries", key, deliveries)
            with r.pipeline() as p:
                p.multi()
                p.xadd(f"{prefix}:dead", {"key": key, "payload": payload,
                                          "reason": "max deliveries exceeded"})
                p.xack(stream, GROUP, entry_id)
                p.execute()
            continue
        try:
            run_job(json.loads(payload), deliveries)
        except Exception:
            log.exception("job %s failed; left pending", key)
            continue
        record = f"{prefix}:done:{key}"

        def apply(pipe):
            fresh = not pipe.exists(record)
            pipe.multi()
            if fresh:
                pipe.set(record, "1")
                pipe.rpush(f"{prefix}:effects", key)
            pipe.xack(stream, GROUP, entry_id)
            return fresh

        fresh = r.transaction(apply, record, value_from_callable=True)
        applied += 1 if fresh else 0
    return applied
""",
    ),
    (
        "a bytes client (no decode_responses); a WATCH conflict retried at once",
        "keys_are_compared_exactly",
        r"""
# bytes client (no decode_responses); Lua apply; reason with an f-string; WATCH retried at once.
from typing import Optional

STREAM_FMT = "{}:stream"


def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    r = redis.Redis.from_url(url)
    stream = STREAM_FMT.format(prefix)
    count = 0
    cursor = "0-0"

    def pick() -> Optional[tuple]:
        nonlocal cursor
        for start in ("0",):
            got = r.xreadgroup(GROUP, consumer, {stream: start}, count=1)
            if got and got[0][1] and got[0][1][0][1]:
                return got[0][1][0]
        res = r.xautoclaim(stream, GROUP, consumer, min_idle_time=idle_ms, start_id=cursor,
                           count=1)
        cursor = res[0]
        live = [e for e in res[1] if e[1]]
        if live:
            return live[0]
        got = r.xreadgroup(GROUP, consumer, {stream: ">"}, count=1, block=50)
        if got and got[0][1] and got[0][1][0][1]:
            return got[0][1][0]
        return None

    while True:
        e = pick()
        if e is None:
            summary = r.xpending(stream, GROUP)
            if not summary["pending"]:
                return count
            time.sleep(0.05)
            continue
        entry_id = e[0].decode()
        key = e[1][b"key"].decode()
        payload = e[1][b"payload"].decode()
        pend = r.xpending_range(stream, GROUP, min=entry_id, max=entry_id, count=1)
        times = pend[0]["times_delivered"] if pend else 1
        if times > max_deliveries:
            tx = r.pipeline(transaction=True)
            tx.xadd(f"{prefix}:dead", {"key": key, "payload": payload,
                                       "reason": f"crashed {times - 1} times"})
            tx.xack(stream, GROUP, entry_id)
            tx.execute()
            continue
        try:
            run_job(json.loads(payload), times)
        except Exception:
            continue
        record = f"{prefix}:done:{key}"
        while True:
            try:
                with r.pipeline() as pipe:
                    pipe.watch(record)
                    already = bool(pipe.get(record))
                    pipe.multi()
                    if not already:
                        pipe.set(record, entry_id)
                        pipe.rpush(f"{prefix}:effects", key)
                    pipe.xack(stream, GROUP, entry_id)
                    pipe.execute()
                break
            except redis.WatchError:
                continue
        if not already:
            count += 1
""",
    ),
    (
        "SET NX inside a Lua script; the XAUTOCLAIM cursor kept between rounds",
        "takes_over_a_dead_consumers_entries",
        r'''
# Lua SET NX inside the script; XAUTOCLAIM cursor kept between rounds; narrow except;
# a generator of rounds; the dead letter as a Lua script as well.
APPLY = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('XACK', KEYS[3], ARGV[3], ARGV[1])
  return 1
end
redis.call('XACK', KEYS[3], ARGV[3], ARGV[1])
return 0
"""


def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    client = redis.Redis.from_url(url, decode_responses=True)
    stream = prefix + ":stream"
    apply_once = client.register_script(APPLY)
    cursor = "0-0"
    total = 0

    def entries():
        nonlocal cursor
        while True:
            [[_, mine]] = client.xreadgroup(GROUP, consumer, {stream: 0}, count=1) or [[stream, []]]
            mine = [m for m in mine if m[1]]
            if mine:
                yield mine[0]
                continue
            cursor, claimed, *_rest = client.xautoclaim(stream, GROUP, consumer, idle_ms,
                                                       cursor, count=1)
            claimed = [c for c in claimed if c[1]]
            if claimed:
                yield claimed[0]
                continue
            fresh = client.xreadgroup(GROUP, consumer, {stream: ">"}, count=1, block=50)
            fresh = [f for _s, found in fresh for f in found if f[1]]
            if fresh:
                yield fresh[0]
                continue
            yield None

    for item in entries():
        if item is None:
            if client.xpending(stream, GROUP)["pending"] == 0:
                return total
            time.sleep(0.05)
            continue
        entry_id, fields = item
        pel = client.xpending_range(stream, GROUP, min=entry_id, max=entry_id, count=1)
        deliveries = pel[0]["times_delivered"] if pel else 1
        if deliveries > max_deliveries:
            with client.pipeline(transaction=True) as tx:
                tx.xadd(f"{prefix}:dead", {"key": fields["key"],
                                           "payload": fields["payload"],
                                           "reason": "poison: exceeded max deliveries"})
                tx.xack(stream, GROUP, entry_id)
                tx.execute()
            continue
        try:
            run_job(json.loads(fields["payload"]), deliveries)
        except (ConnectionError, OSError, RuntimeError, ValueError):
            continue
        total += apply_once(keys=[f"{prefix}:done:{fields['key']}", f"{prefix}:effects",
                                  stream], args=[entry_id, fields["key"], GROUP])
    return total
''',
    ),
]

# An entry deleted from the stream while pending (XDEL, XTRIM): XACKed where it is met
# (any read may hand it over with no fields), or dropped by an XCLAIM once idle_ms has
# passed, as XPENDING IDLE finds it (the one before, written otherwise).
RIGHT += [
    (
        "an entry deleted from the stream XACKed where it is met; the apply in a Lua script",
        "returns_how_many_it_applied",
        r'''
APPLY = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('XACK', KEYS[3], ARGV[1], ARGV[2])
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('XACK', KEYS[3], ARGV[1], ARGV[2])
return 1
"""


_CURSORS = {}  # stream -> where its next XAUTOCLAIM starts


def _next_entry(r, stream, consumer, idle_ms):
    """(id, fields) of the next entry, fields {} for one deleted from the stream; or None."""
    for start in ("0", ">"):
        if start == ">":
            claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms,
                                   _CURSORS.get(stream, "0-0"), 1)
            _CURSORS[stream] = claimed[0]
            if claimed[1]:
                return claimed[1][0]
        rows = r.xreadgroup(GROUP, consumer, {stream: start}, count=1,
                            block=50 if start == ">" else None)
        for _name, found in rows:
            for entry_id, fields in found:
                return entry_id, fields or {}
    return None


def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    r = redis.Redis.from_url(url, decode_responses=True)
    stream = f"{prefix}:stream"
    apply = r.register_script(APPLY)
    done = 0
    while True:
        entry = _next_entry(r, stream, consumer, idle_ms)
        if entry is None:
            if not r.xpending(stream, GROUP)["pending"]:
                return done
            time.sleep(0.05)
            continue
        entry_id, fields = entry
        if not fields:  # deleted from the stream while pending: nothing to run
            r.xack(stream, GROUP, entry_id)
            continue
        held = r.xpending_range(stream, GROUP, entry_id, entry_id, 1)
        times = int(held[0]["times_delivered"]) if held else 1
        if times > max_deliveries:
            pipe = r.pipeline()  # MULTI/EXEC
            pipe.xadd(f"{prefix}:dead", {"key": fields["key"], "payload": fields["payload"],
                                         "reason": f"{times} deliveries"})
            pipe.xack(stream, GROUP, entry_id)
            pipe.execute()
            continue
        try:
            run_job(json.loads(fields["payload"]), times)
        except Exception as exc:
            print(f"{entry_id}: {exc!r}", file=sys.stderr)
            continue
        done += apply(keys=[f"{prefix}:done:{fields['key']}", f"{prefix}:effects", stream],
                      args=[GROUP, entry_id, fields["key"]])
''',
    ),
    (
        # Every consumer is a process of its own (the kill and meet runners too): a
        # module-level lock or client is never shared with a second consumer.
        "a module-level cached client and threading.Lock; deleted entries XACKed as read",
        "two_copies_of_a_key_at_once_apply_once",
        r'''
# Module-level state: a cached client per url, and a threading.Lock held around each
# entry's work (one entry at a time in this process); the loop in a function of its own.
import threading

_CLIENTS: dict = {}
_CLIENTS_LOCK = threading.Lock()
_WORKING = threading.Lock()


def _client(url):
    with _CLIENTS_LOCK:
        if url not in _CLIENTS:
            _CLIENTS[url] = redis.Redis.from_url(url, decode_responses=True)
        return _CLIENTS[url]


_NEXT_CLAIM = {}  # stream -> the cursor the last XAUTOCLAIM returned


def _take(r, stream, consumer, idle_ms):
    rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)
    for _s, found in rows:
        for entry_id, fields in found:
            if not fields:  # deleted from the stream while ours: nothing to run
                r.xack(stream, GROUP, entry_id)
                return None, True
            return (entry_id, fields), False
    cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms,
                                   _NEXT_CLAIM.get(stream, "0-0"), 1)[:2]
    _NEXT_CLAIM[stream] = cursor
    if claimed:
        return claimed[0], False
    rows = r.xreadgroup(GROUP, consumer, {stream: ">"}, count=1, block=50)
    for _s, found in rows:
        for entry in found:
            return entry, False
    return None, False


def _work(r, prefix, entry, max_deliveries):
    """1 if this applied the entry's key, else 0."""
    stream = f"{prefix}:stream"
    entry_id, fields = entry
    [info] = r.xpending_range(stream, GROUP, entry_id, entry_id, 1) or [{"times_delivered": 1}]
    deliveries = int(info["times_delivered"])
    if deliveries > max_deliveries:
        with r.pipeline() as tx:
            tx.xadd(f"{prefix}:dead", {"key": fields["key"], "payload": fields["payload"],
                                       "reason": f"{deliveries} deliveries"})
            tx.xack(stream, GROUP, entry_id)
            tx.execute()
        return 0
    try:
        run_job(json.loads(fields["payload"]), deliveries)
    except Exception:
        return 0
    record = f"{prefix}:done:{fields['key']}"
    with r.pipeline() as tx:
        try:
            tx.watch(record)
            fresh = not tx.get(record)
            tx.multi()
            if fresh:
                tx.set(record, entry_id)
                tx.rpush(f"{prefix}:effects", fields["key"])
            tx.xack(stream, GROUP, entry_id)
            tx.execute()
        except redis.WatchError:
            return 0  # the entry stays pending and comes round again
    return int(fresh)


def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    r = _client(url)
    stream = f"{prefix}:stream"
    applied = 0
    while True:
        entry, acked = _take(r, stream, consumer, idle_ms)
        if acked:
            continue
        if entry is None:
            if r.xpending(stream, GROUP)["pending"] == 0:
                return applied
            time.sleep(0.05)
            continue
        with _WORKING:
            applied += _work(r, prefix, entry, max_deliveries)
''',
    ),
    (
        "XPENDING IDLE and XCLAIM: its own deleted entry dropped by XCLAIM once idle_ms passed",
        "returns_how_many_it_applied",
        RIGHT[1][2],
    ),
]

# The same consumers, held to the checks of an entry deleted behind which another waits,
# and of a second consumer applying a key while the first is slow on its copy.
RIGHT += [
    (
        "XPENDING IDLE and XCLAIM: the entry behind its own deleted one run once that is dropped",
        "a_deleted_entry_hides_none_of_yours",
        RIGHT[1][2],
    ),
    (
        "an entry deleted from the stream XACKed where it is met: the entry behind it run",
        "a_deleted_entry_hides_none_of_yours",
        RIGHT[4][2],
    ),
    (
        "a class with Lua scripts: the done record read in the script, after a slow run_job",
        "two_copies_of_a_key_at_once_apply_once",
        RIGHT[0][2],
    ),
]

RIGHT += [
    (
        "BLOCK 1000 on new reads and a 1 s sleep between empty rounds: slow, not wrong",
        "returns_soon_after_the_others_finish",
        r'''
# Slow but right: BLOCK 1000 on new reads, 1 s between empty rounds.
def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    """Run the entries of stream ``<prefix>:stream`` as ``consumer`` of group ``workers``.

    Return how many entries this call applied, once no entry is pending for anyone
    (``XPENDING`` empty) and no new entry waits. The group exists already.

    - Each entry has fields ``key`` and ``payload`` (JSON text). **Applying** it means
      ``RPUSH <prefix>:effects <key>``, at most once per key, ever: keep a record
      ``<prefix>:done:<key>`` and make record, effect and ``XACK`` one atomic step
      (``WATCH`` + ``MULTI``, or a Lua script), so a kill can never split them. An entry
      whose key is already done is only acknowledged.
    - Each round takes ONE entry (``COUNT 1``), from the first of: your own pending
      entries (``XREADGROUP ... 0``, what you held before a restart), entries of any
      consumer idle at least ``idle_ms`` (``XAUTOCLAIM``), new entries (``XREADGROUP ...
      >``). One at a time, because an entry you hold and have not started still gains a
      delivery each time you crash on another. If there is none but something is still
      pending, wait about 50 ms and look again.
    - One ``XAUTOCLAIM`` looks at no more than ten pending entries for each one it may
      claim (https://redis.io/docs/latest/commands/xautoclaim/: ten times ``COUNT``): start
      each call at the cursor the last one returned (its reply's first element), or an
      idle entry behind ten busy ones is never reached.
    - Before running an entry, read its delivery count (``XPENDING``). Above
      ``max_deliveries``: add it to ``<prefix>:dead`` with fields ``key``, ``payload`` and
      a non-empty ``reason``, and ``XACK`` it in the same ``MULTI``; do not run it.
    - Otherwise call ``run_job(payload, deliveries)``; if it raises, leave the entry
      pending (no ``XACK``): it comes back with one more delivery.
    - An entry of yours that ``XREADGROUP ... 0`` returns with no fields (``{}``) was
      deleted from the stream (``XDEL``, ``XTRIM``) while pending: nothing is left to run
      or count, but it stays pending until you ``XACK`` it, or until an ``XAUTOCLAIM``
      drops it from the PEL (it drops such entries whatever their idle time, and lists
      them in its reply's third element).
    """
    r = redis.Redis.from_url(url, decode_responses=True)
    stream, dead, effects = f"{prefix}:stream", f"{prefix}:dead", f"{prefix}:effects"
    applied = 0
    # Where the next XAUTOCLAIM looks from: one call looks at no more than ten pending
    # entries (COUNT 1), so each goes on where the last one stopped, and the scan starts
    # again at "0-0" once a call returns "0-0" (it went round the whole PEL).
    cursor = "0-0"
    while True:
        # An entry of ours deleted from the stream comes with no fields: skipped here,
        # the XAUTOCLAIM below drops it from the PEL (whatever its idle time).
        rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)
        entries = [e for _s, found in rows for e in found if e[1]]
        if not entries:
            cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]
            entries = [e for e in claimed if e[1]]
        if not entries:
            rows = r.xreadgroup(GROUP, consumer, {stream: ">"}, count=1, block=1000)
            entries = [e for _s, found in rows for e in found if e[1]]
        if not entries:
            if not r.xpending_range(stream, GROUP, "-", "+", 1):
                return applied
            time.sleep(1)  # slower than the 50 ms asked for, but it waits
            continue
        for entry_id, fields in entries:
            info = r.xpending_range(stream, GROUP, entry_id, entry_id, 1)
            deliveries = int(info[0]["times_delivered"]) if info else 1
            if deliveries > max_deliveries:
                pipe = r.pipeline(transaction=True)
                pipe.xadd(dead, {"key": fields["key"], "payload": fields["payload"],
                                 "reason": f"delivered {deliveries} times, more than "
                                           f"{max_deliveries}: the consumer never finished it"})
                pipe.xack(stream, GROUP, entry_id)
                pipe.execute()
                continue
            try:
                run_job(json.loads(fields["payload"]), deliveries)
            except Exception:
                continue
            record = f"{prefix}:done:{fields['key']}"
            try:
                with r.pipeline(transaction=True) as pipe:
                    pipe.watch(record)
                    done_before = pipe.exists(record)
                    pipe.multi()
                    if not done_before:
                        pipe.set(record, entry_id)
                        pipe.rpush(effects, fields["key"])
                    pipe.xack(stream, GROUP, entry_id)
                    pipe.execute()
            except redis.WatchError:
                continue  # someone applied the key meanwhile: the entry comes round again
            applied += 0 if done_before else 1
''',
    ),
]


# The same consumers beside a live one, the second run with a clock that runs fast and
# looks again hundreds of times a second (ex09/fastclock.py): they wait, however often.
RIGHT += [
    (
        "BLOCK 1000 and a 1 s sleep, beside a live consumer under a fast clock: it waits",
        "leaves_a_live_consumers_entry_alone",
        RIGHT[10][2],
    ),
    (
        "a module-level cached client and threading.Lock, beside a live consumer: it waits",
        "leaves_a_live_consumers_entry_alone",
        RIGHT[5][2],
    ),
    (
        "XPENDING IDLE and XCLAIM, beside a live consumer under a fast clock: it waits",
        "leaves_a_live_consumers_entry_alone",
        RIGHT[1][2],
    ),
]

# Records written in Lua scripts (SET, SET NX): the backlog check reads every command on
# the done records, and a script's are among them; none removes one.
RIGHT += [
    (
        "a class with Lua scripts, a backlog of hundreds: no done record removed",
        "a_backlog_of_hundreds_is_applied_once_each",
        RIGHT[0][2],
    ),
    (
        "SET NX inside a Lua script, a backlog of hundreds: no done record removed",
        "a_backlog_of_hundreds_is_applied_once_each",
        RIGHT[3][2],
    ),
]


# Claims sent as a raw XAUTOCLAIM ... JUSTID (redis-py's justid=True drops the cursor): a
# claim adds no delivery, and the entry claimed is taken at the next round's own read
# (XREADGROUP ... 0), which does. The done record read on the client after the pipeline
# set its WATCH (the WATCH guards it all the same); a copy whose WATCH fired is XACKed at
# once: the record changed, so its key is done.
JUSTID_CLAIMS = r'''
def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    r = redis.Redis.from_url(url, decode_responses=True)
    stream = prefix + ":stream"
    applied, cursor = 0, "0-0"
    while True:
        rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)
        mine = [e for _s, found in rows for e in found if e[1]]
        if not mine:
            cursor, ids = r.execute_command(
                "XAUTOCLAIM", stream, GROUP, consumer, idle_ms, cursor, "COUNT", 1, "JUSTID"
            )[:2]
            if ids:
                continue  # ours now: the next own read hands it over, one delivery more
            rows = r.xreadgroup(GROUP, consumer, {stream: ">"}, count=1, block=50)
            mine = [e for _s, found in rows for e in found if e[1]]
        if not mine:
            if r.xpending(stream, GROUP)["pending"] == 0:
                return applied
            time.sleep(0.05)
            continue
        entry_id, fields = mine[0]
        [row] = r.xpending_range(stream, GROUP, entry_id, entry_id, 1) or [None]
        deliveries = row["times_delivered"] if row else 1
        if deliveries > max_deliveries:
            reason = "gave up after %d deliveries" % (deliveries - 1)
            with r.pipeline() as tx:
                tx.xadd(prefix + ":dead", {"key": fields["key"], "payload": fields["payload"],
                                           "reason": reason})
                tx.xack(stream, GROUP, entry_id)
                tx.execute()
            continue
        try:
            run_job(json.loads(fields["payload"]), deliveries)
        except Exception as error:
            print("will retry", entry_id, error, file=sys.stderr)
            continue
        record = prefix + ":done:" + fields["key"]
        with r.pipeline() as tx:
            tx.watch(record)
            fresh = not r.exists(record)
            tx.multi()
            if fresh:
                tx.set(record, "1")
                tx.rpush(prefix + ":effects", fields["key"])
            tx.xack(stream, GROUP, entry_id)
            try:
                tx.execute()
            except redis.WatchError:
                r.xack(stream, GROUP, entry_id)  # another copy applied the key meanwhile
                continue
        applied += int(fresh)
'''

RIGHT += [
    (
        "a raw XAUTOCLAIM ... JUSTID, the claimed entry taken by the next own read",
        "the_cap_holds_for_claimed_entries",
        JUSTID_CLAIMS,
    ),
    (
        "a raw XAUTOCLAIM ... JUSTID, its cursor kept while new entries keep coming",
        "claims_an_idle_entry_behind_busy_ones",
        JUSTID_CLAIMS,
    ),
    (
        "the done record read on the client after WATCH; a WatchError's copy XACKed at once",
        "two_copies_of_a_key_at_once_apply_once",
        JUSTID_CLAIMS,
    ),
]


RIGHT += [
    (
        "the done records fields of one hash, WATCHed whole; r.transaction for both steps",
        "keys_are_compared_exactly",
        r'''
def _next_entry(r, stream, consumer, idle_ms, state):
    """One entry: mine first, then an idle one, then a new one; None when there is none."""
    for _s, found in r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1):
        for entry_id, fields in found:
            if fields:
                return entry_id, fields
    state["cursor"], claimed, _gone = r.xautoclaim(
        stream, GROUP, consumer, min_idle_time=idle_ms, start_id=state["cursor"], count=1
    )
    for entry_id, fields in claimed:
        if fields:
            return entry_id, fields
    for _s, found in r.xreadgroup(GROUP, consumer, {stream: ">"}, count=1, block=50):
        for entry_id, fields in found:
            return entry_id, fields
    return None


def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    # The done records are fields of one hash, <prefix>:done, WATCHed whole.
    r = redis.Redis.from_url(url, decode_responses=True)
    stream, done = f"{prefix}:stream", f"{prefix}:done"
    state = {"cursor": "0-0"}
    applied = 0
    while True:
        found = _next_entry(r, stream, consumer, idle_ms, state)
        if found is None:
            if r.xpending(stream, GROUP)["pending"] == 0:
                return applied
            time.sleep(0.05)
            continue
        entry_id, fields = found
        [row] = r.xpending_range(stream, GROUP, entry_id, entry_id, 1) or [{"times_delivered": 1}]
        if row["times_delivered"] > max_deliveries:
            r.transaction(
                lambda p: (p.multi(), p.xadd(f"{prefix}:dead", {
                    "key": fields["key"], "payload": fields["payload"],
                    "reason": "too many deliveries"}), p.xack(stream, GROUP, entry_id)))
            continue
        try:
            run_job(json.loads(fields["payload"]), row["times_delivered"])
        except ConnectionError:
            continue
        outcome = {}

        def apply(p):
            outcome["new"] = not p.hexists(done, fields["key"])
            p.multi()
            if outcome["new"]:
                p.hset(done, fields["key"], entry_id)
                p.rpush(f"{prefix}:effects", fields["key"])
            p.xack(stream, GROUP, entry_id)

        r.transaction(apply, done)
        applied += outcome["new"]
''',
    ),
    (
        "a set of done keys, SISMEMBER under WATCH; a WATCH conflict retried without running again",
        "two_copies_of_a_key_at_once_apply_once",
        r'''
def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    # A set of done keys, SISMEMBER under WATCH; a class-free loop with explicit phases.
    r = redis.Redis.from_url(url, decode_responses=True)
    keys = {"stream": f"{prefix}:stream", "dead": f"{prefix}:dead",
            "effects": f"{prefix}:effects", "done": f"{prefix}:done"}
    cursor, applied = "0-0", 0
    while True:
        batch = []
        mine = r.xreadgroup(GROUP, consumer, {keys["stream"]: "0-0"}, count=1)
        batch = [e for e in (mine[0][1] if mine else []) if e[1]]
        if not batch:
            reply = r.xautoclaim(keys["stream"], GROUP, consumer, idle_ms, cursor, count=1)
            cursor = reply[0]
            batch = [e for e in reply[1] if e[1]]
        if not batch:
            new = r.xreadgroup(GROUP, consumer, {keys["stream"]: ">"}, count=1, block=50)
            batch = new[0][1] if new else []
        if not batch:
            if r.xpending(keys["stream"], GROUP)["pending"]:
                time.sleep(0.05)
                continue
            return applied
        entry_id, fields = batch[0]
        pending = r.xpending_range(keys["stream"], GROUP, entry_id, entry_id, 1)
        times = pending[0]["times_delivered"] if pending else 1
        if times > max_deliveries:
            with r.pipeline() as p:
                p.xadd(keys["dead"], {"key": fields["key"], "payload": fields["payload"],
                                      "reason": f"{times} deliveries"})
                p.xack(keys["stream"], GROUP, entry_id)
                p.execute()
            continue
        try:
            run_job(json.loads(fields["payload"]), times)
        except Exception:
            continue
        while True:
            with r.pipeline() as p:
                try:
                    p.watch(keys["done"])
                    fresh = not p.sismember(keys["done"], fields["key"])
                    p.multi()
                    if fresh:
                        p.sadd(keys["done"], fields["key"])
                        p.rpush(keys["effects"], fields["key"])
                    p.xack(keys["stream"], GROUP, entry_id)
                    p.execute()
                    applied += int(fresh)
                    break
                except redis.WatchError:
                    continue
''',
    ),
]


@pytest.mark.parametrize(("way", "check", "source"), RIGHT, ids=[r[0] for r in RIGHT])
def test_a_right_consumer_written_otherwise_keeps_the_points(way, check, source, monkeypatch):
    skip_unless_drawn(way)  # a tenth per run, as the entries: each starts real consumers
    monkeypatch.setattr(ex09_consumers, "RUN_S", 10.0)
    values, notes = namespace_of(notebook_for(SOLUTIONS, "ex09"))
    assert notes == []
    path = Path("stream_consumer.py")  # the test's own folder (tests/grading/conftest.py)
    edited = _with_consume(path.read_text(), source)
    compiles(edited, way)
    path.write_text(edited)
    [named] = [c for c in catalog.all_checks("ex09", HIDDEN) if c.name == check]
    got = run_check(named, Namespace(values, Path.cwd()))
    assert got.status == CheckStatus.PASSED, (way, got.expected, got.got)
