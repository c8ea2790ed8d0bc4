"""Hidden checks for exercise 8: dedup per key, duplicate messages, one transaction.

``two_deliveries_at_once_charge_once`` runs two pool children and holds both copies of
one message inside their transactions at the same time (the check locks ``charges``
until both wait): a dedup that reads ``processed`` and inserts it later, after the
charge, lets both copies through, which one child taking messages in turn never shows.
``two_workers_at_once_charge_once`` does the same on two workers, which share nothing:
not a lock made at import, not the str hash salt (each worker has its own), not the
local date (their time zones are 26 hours apart, ``workers.WEST`` and ``EAST``).
``two_invoices_two_charges`` sends keys that differ only in case, in a trailing space,
in the first or the last of 300 characters or in a character beyond ASCII, one with a
quote and accents, and two that NFKC makes one: each is its own charge; a task that
records a digest of the key cut short (``md5(key)[:4]``, a crc32, perhaps of
``"charge:" + key``, perhaps inside a word: ``"h" + md5[:6]``, base64) is sent two keys
that share it (``records.short_digest_of``, ``records.colliding_keys``), and one whose
digest is too wide to find two such keys in time but under 64 bits fails all the same.
``dedup_commits_with_the_charge`` also sends a key the database refused again, and a
new key, to the pool child that ran the refusal: nothing of it may stay behind there;
and the killed key once more after its redelivery charged (a redelivery must leave its
record too); the refused charge must end after a few runs (``_refused_charge_ends``: a
task that gives it back to the queue on a database error runs it forever), and a record
with the queue's name in it (``_not_scoped_by_the_queue``) fails there, severe: workers
on another queue that share the database charge the key again. The killed key's
redeliveries are killed too as each waits for it, ten more times
(``_killed_again_and_again``): a "poison message" limit that counts deliveries (in a
table, in Redis) and rejects the message after a few loses a charge whose worker was
killed that often.
It holds the task's key in ``processed``; a task that records the key under a name of
its own ("charge:" + key, a digest) is sent the key again with that name held instead,
and one that keeps its dedup in ``charges`` (a unique key, a lock) is held at its
COMMIT: the dedup still holds, and only ``a_copy_alongside_the_first_says_already_charged``
(1 point, not severe) says the record is not the key itself. A record with the time in it
(the date, a bucket of hours since the epoch, the hour of the day, the minute, the week,
the month's name: ``records.clock_fields_in``; or hidden in a digest of the key and the
date, ``dated.dated_digest_in``), the host's name (``records.host_in``), the worker's
start time or pid (``started.started_in``: two workers started in one second, or with
alike pids in namespaces of their own, share it), or
one that differs between deliveries fails there, severe: a late copy, or one another
machine runs, charges again.
``duplicate_message_charges_once`` sends one key with two customers and amounts too.
``charges_after_its_database_session_ended`` ends the worker's sessions between two
tasks, as a restart or a failover does; a deadlock there rolls back one attempt, then
five in a row (a retry loop of the task's own that runs out must fail, not return),
and every charge made there, a credit note's too, must commit in the transaction that
wrote a record in processed (``_charged_apart``: a retry or a credit on a path of its
own, in two transactions, is never killed between them).
``two_deliveries_at_once_charge_once``'s second copy names its customer otherwise (a
lock per customer does not order them); ``replies_charged_or_already_charged`` reads
what each run returned (a refused charge must end the run in FAILURE, not be returned;
a run whose session the server ends mid-charge must not say "already charged").
``charge_may_wait_without_a_time_limit`` also reads the module for a timer of its own
that interrupts the wait (``timers.self_timers_in``: ``signal.alarm``, ``setitimer``,
``threading.Timer(..., conn.cancel)``), which fires after more seconds than a check
waits; ``charges_after_its_database_session_ended`` names a retry whose countdown
outlasts its wait.
``late_copies_after_many_charges_charge_once`` sends 20 keys again once they, and
10,000 older keys, are recorded (a dedup table trimmed to its last keys forgets them),
and reads the module for a DELETE that runs too seldom to be seen, or a DROP TABLE as it
is imported (``records.deletes_in``);
``a_copy_during_the_commit_charges_once`` holds the first copy at its COMMIT (a deferred
trigger waits on the check's lock) while the second runs (a lock released just before
the COMMIT lets it through); ``two_keys_at_once_both_charge`` holds two runs of two keys
right after their claims, so a table lock taken after the claim deadlocks.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import subprocess
import sys
import unicodedata
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random
from typing import Any

from labkit.clock import SystemClock
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex08.checks import (
    TIMEOUT,
    Ex08Run,
    redelivery_killed_after_each_commit,
)
from labkit.grading.exercises.ex08.dated import dated_digest_in
from labkit.grading.exercises.ex08.records import (
    SAFE_BITS,
    SEARCHED_BITS,
    affixes_in,
    clock_fields_in,
    colliding_keys,
    deletes_in,
    digest_with,
    host_in,
    record_bits,
    short_digest_of,
)
from labkit.grading.exercises.ex08.started import Started, started_in
from labkit.grading.exercises.ex08.timers import self_timers_in
from labkit.grading.exercises.ex08.workers import EAST, WEST, scene_randoms
from labkit.grading.stub import stub_error
from labkit.integrations.celery import commits, harness, points, returns
from labkit.integrations.celery.app import pg
from labkit.lang import _

CHECKS = Checks("ex08", hidden=True)


def odd_keys(rng: Random) -> list[tuple[str, str]]:
    """``(key, customer)`` pairs a dedup must tell apart: two keys that differ only in
    case, one more that differs from the first only by a trailing space (its customer
    id too: an opaque string, not to be stripped), one more
    that differs from it only by an underscore (which LIKE reads as any character, so
    a dedup by ``key LIKE %s`` takes it for the first), two long ones (300
    characters, past any column width a dedup might cut them to) that differ only in
    their last character and two that differ only in their first (a dedup that keeps
    the key's end), two that differ only in a character beyond ASCII (``€`` and ``£``,
    which ``encode("ascii", "ignore"/"replace")`` makes one), two that differ only in a
    character beyond Latin-1 and Windows-1252 too (``₹`` and ``₽``, which
    ``encode("latin-1"/"cp1252", "replace")`` makes one), two that differ only in a
    quote (which a "sanitised" key loses), one with a quote, an
    underscore, a percent sign and accents (its customer has a quote and an accent
    too), its twin without the accents
    (what an "accent-stripping" normalisation makes of it), two that NFKC makes one
    (a ligature and a full-width digit against their plain letters), two that NFC (and
    NFD) makes one (an ``é`` composed and one made of ``e`` and a combining accent), and
    the first key's twins with a space and a tab before it (a ``lstrip()`` makes them
    one; the space's twin has a customer with a space before it, which an ``lstrip()``
    loses), the underscore's twin with a space (``replace(" ", "_")`` makes them one),
    the percent sign's key without it (``replace("%", "")``), and a key with a
    backslash and its twin ("inv-x\\101" and "inv-xA": a key pasted into an E'...'
    string with only its quotes escaped reads \\101 as "A"). The ligature's key and the combining
    accent's have customers of the same make: a customer id normalised (NFKC, NFC) is
    another customer's."""
    word = "".join(rng.choice("abcdefghjkmn") for _ in range(6))
    stem = "ord-" + "".join(rng.choice("0123456789abcdef") for _ in range(294))
    return [
        (f"inv-{word}", "cus_same"),
        (f"INV-{word.upper()}", "cus_same"),
        (f"inv-{word} ", "cus_same "),
        (f"inv_{word}", "cus_same"),
        (f"{stem}-1", "cus_same"),
        (f"{stem}-2", "cus_same"),
        (f"A-{stem}", "cus_same"),
        (f"B-{stem}", "cus_same"),
        (f"inv-{word}-\u20ac", "cus_same"),
        (f"inv-{word}-\u00a3", "cus_same"),
        (f"inv-{word}-\u20b9", "cus_same"),
        (f"inv-{word}-\u20bd", "cus_same"),
        (f"inv-{word}-o'neil", "cus_same"),
        (f"inv-{word}-oneil", "cus_same"),
        (f"inv-d'arc_50%-ção-{word}", "cus_joão_o'hara"),
        (f"inv-d'arc_50%-cao-{word}", "cus_joão_o'hara"),
        (f"inv-{word}-fi1", "cus_same"),
        (f"inv-{word}-\ufb01\uff11", "cus_\ufb01\uff11"),
        (f"inv-{word}-caf\u00e9", "cus_same"),
        (f"inv-{word}-cafe\u0301", "cus_cafe\u0301"),
        (f" inv-{word}", " cus_same"),
        (f"\tinv-{word}", "cus_same"),
        (f"inv {word}", "cus_same"),
        (f"inv-d'arc_50-ção-{word}", "cus_joão_o'hara"),
        (f"inv-{word}\\101", "cus_same"),
        (f"inv-{word}A", "cus_same"),
    ]


def _cut(key: str) -> str:
    """A key as feedback shows it: a long one by its ends and its length; one with a
    combining accent escaped (``'cafe\\u0301'``), which would look like its composed twin."""
    if any(unicodedata.combining(c) for c in key):
        return ascii(key)
    return repr(key) if len(key) <= 40 else f"{key[:12]!r}...{key[-8:]!r} ({len(key)} chars)"


@CHECKS.add(
    2,
    "dedup by the task's key, exactly as it came: two invoices are two charges, even "
    "for one customer, for keys that differ only in case or in their last character, "
    "and for a key with a quote and accents",
    timeout=TIMEOUT,
    severe=True,
)
def two_invoices_two_charges(ns: Namespace) -> None:
    odd = [pair for rng in scene_randoms("keys") for pair in odd_keys(rng)]
    with Ex08Run(ns) as run:
        run.worker()
        run.send("inv-a", "cus_same", 500)
        run.send("inv-b", "cus_same", 500)
        for key, customer in odd:
            run.send(key, customer, 700)
        run.settle()
        got = (run.charges("inv-a"), run.charges("inv-b"))
        expect(
            got == (1, 1),
            "1 charge row for each of two keys",
            _("{first} and {second}").format(first=got[0], second=got[1]),
        )
        counts = {key: run.charges(key) for key, _customer in odd}
        wrong = {key: n for key, n in counts.items() if n != 1}
        expect(
            not wrong,
            _("1 charge row for each of the keys {keys}").format(
                keys="[" + ", ".join(_cut(key) for key in counts) + "]"
            ),
            ", ".join(
                _("{key}: {count} rows").format(key=_cut(key), count=n) for key, n in wrong.items()
            ),
            _(
                "a key is an opaque string: record it in processed exactly as it came (no "
                "lower(), strip(), slicing, Unicode normalisation, accent stripping, ASCII "
                "encoding or quotes taken out), compare it with = (in LIKE, _ and % match "
                "other characters), and pass it to the SQL as a parameter (%s), never inside "
                "the query's text"
            ),
        )
        # The customer, too, as it came: a charge to another customer id is a charge to
        # someone else.
        for key, customer in odd:
            [row] = run.rows(key)
            expect(
                row == (customer, 700),
                _(
                    "the charge row for {key} to hold the message's customer and amount: {wanted}"
                ).format(key=_cut(key), wanted=f"({_cut(customer)}, 700)"),
                # A combining accent escaped, as in the key: 'cafe\u0301' looks like 'café'.
                _("it holds {row}").format(row=f"({_cut(row[0])}, {row[1]})"),
                _(
                    "insert (key, customer, amount) as the task received them: the amount is "
                    "already in cents, and a customer id is an opaque, case-sensitive string "
                    "(no lower(), no strip(), no Unicode normalisation)"
                ),
            )
        _digests_do_not_collide(run, ["inv-a", "inv-b"], [key for key, _c in odd if len(key) > 64])


def _digests_do_not_collide(run: Ex08Run, keys: list[str], long: list[str]) -> None:
    """When the task records ``keys`` under a digest cut short (``md5(key)[:4]``, a
    crc32), send two keys whose digests are the same: each is its own charge; a digest of
    another form, of the keys of ``long`` too, is judged by its width alone."""
    records = _processed_keys(run)
    if set(keys) <= records:
        return
    source = (Path(run.ns.workdir) / "ex08_tasks.py").read_text(encoding="utf-8")
    found = short_digest_of(
        records, keys, affixes_in(source, (run.config.schema, run.config.queue))
    )
    if found is None:
        _records_hold_enough_bits(records, long)
        return
    name, bits, form = found
    if bits > SEARCHED_BITS:
        # Too wide to find two keys that share it in the check's time, too narrow to be
        # safe: two keys among some millions (2**24 for 48 bits) do.
        expect(
            False,
            _(
                "the dedup record of each key to tell it from every other key: the key "
                "itself, or a digest of it of {safe} bits or more"
            ).format(safe=SAFE_BITS),
            _("it recorded {record} for {key}: the {digest}, {bits:g} bits").format(
                record=repr(form(keys[0])), key=repr(keys[0]), digest=name, bits=round(bits)
            ),
            _(
                "a digest of {bits:g} bits is shared by two keys among about {keys:,}: the "
                "second key of the two reads 'already charged' and is never charged. Record "
                "the key itself in processed, whole"
            ).format(bits=round(bits), keys=round(2 ** (bits / 2))),
        )
    pair = colliding_keys(form, "inv-col-")
    if pair is None:
        return
    for key in pair:
        run.send(key, "cus_same", 700)
    run.settle()
    got = [run.charges(key) for key in pair]
    expect(
        got == [1, 1],
        _(
            "1 charge row for each of {first} and {second}, two keys whose {digest} is the same"
        ).format(first=repr(pair[0]), second=repr(pair[1]), digest=name),
        _("{first} and {second}").format(first=got[0], second=got[1]),
        _(
            "a digest of {bits:g} bits is shared by two keys among about {keys:,}: the second "
            "key of the two reads 'already charged' and is never charged. Record the key "
            "itself in processed, whole"
        ).format(bits=round(bits), keys=round(2 ** (bits / 2))),
    )


def _records_hold_enough_bits(records: set[str], long: list[str]) -> None:
    """Fail when no record holds a key of ``long`` (300 characters: its record is made
    of it) and none has room for about ``SAFE_BITS`` bits, whatever digest it is."""
    # A digest no list of forms knows (hashtext(key) in SQL, a sha256 modulo 2**32): the
    # widest record is too short to hold 64 bits (4 bits of slack: a signed 64-bit
    # number in decimal is 19 digits and a sign).
    widest = max((record_bits(record) for record in records), default=0.0)
    if long and not any(key in record for key in long for record in records):
        expect(
            widest + 4 >= SAFE_BITS,
            _(
                "the dedup record of each key to tell it from every other key: the key "
                "itself, or a digest of it of {safe} bits or more"
            ).format(safe=SAFE_BITS),
            _("it recorded keys as {records}: at most {bits:g} bits in each").format(
                records=", ".join(repr(record) for record in sorted(records)[:3]),
                bits=round(widest),
            ),
            _(
                "a digest of {bits:g} bits is shared by two keys among about {keys:,}: the "
                "second key of the two reads 'already charged' and is never charged. Record "
                "the key itself in processed, whole"
            ).format(bits=round(widest), keys=round(2 ** (widest / 2))),
        )


@CHECKS.add(
    1,
    "the same message published twice (a producer retry) must charge once",
    timeout=TIMEOUT,
    severe=True,
)
def duplicate_message_charges_once(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        run.worker()
        run.send("inv-dup")
        run.send("inv-dup")
        # The same key once more with another customer and amount: once per key, whatever
        # the message carries (a dedup record of the key with its customer or its amount
        # charges it again).
        other = {
            run.send("inv-dup-other", "cus_8", 800): ("cus_8", 800),
            run.send("inv-dup-other", "cus_9", 900): ("cus_9", 900),
        }
        run.settle()
        n = run.charges("inv-dup")
        expect(
            n == 1, "1 charge row for a key sent twice", _("{count} charge rows").format(count=n)
        )
        # A third copy, once the second said "already charged": a duplicate that deletes
        # the key's record ("done with it") lets the next copy charge again.
        run.send("inv-dup")
        run.settle()
        n = run.charges("inv-dup")
        expect(
            n == 1,
            _("1 charge row for a key sent a third time, after its second copy changed nothing"),
            _("{count} charge rows").format(count=n),
            _(
                "a duplicate changes nothing: return 'already charged' and keep the key's "
                "record in processed for good (no DELETE), or every later copy charges again"
            ),
        )
        n = run.charges("inv-dup-other")
        expect(
            n == 1,
            _(
                "1 charge row for a key sent twice, the second time with another customer "
                "and amount"
            ),
            _("{count} charge rows").format(count=n),
            _(
                "a key charges once, whatever customer or amount its message carries: record "
                "the key alone in processed, not the key with its customer or its amount"
            ),
        )
        # ... and the copy that came second changes nothing: the charge keeps the customer
        # and amount of the copy that ran first (an UPDATE of the charge "to the latest
        # message" rewrites what was charged).
        started = [t for e, t, *_rest in points.runs(run.folder) if e == "start" and t in other]
        first = other[started[0]] if started else SENT
        later = next(sent for sent in other.values() if sent != first)
        # Judged by the later copy's customer or amount in the row, not by the first's:
        # how the task stores a message (the amount in whole units) is
        # worker_starts_and_charges_once's to name.
        rows = run.rows("inv-dup-other")
        expect(
            len(rows) == 1 and rows[0][0] != later[0] and rows[0][1] != later[1],
            _(
                "the charge row for {key} to keep the customer and amount of the copy that "
                "ran first: {wanted}"
            ).format(key=repr("inv-dup-other"), wanted=first),
            _("it holds {row}").format(row=rows[0] if len(rows) == 1 else rows),
            _(
                "a second delivery of a key changes nothing: return 'already charged' "
                "without touching the charge the first made (no UPDATE of charges)"
            ),
        )


def _waiting_on_a_lock(app_name: str, run: Ex08Run) -> list[int]:
    """Backend pids of the worker's sessions waiting for a lock: by application name
    (the workers' PGAPPNAME), or, for a task that names its connections itself
    (``application_name=...``, which beats PGAPPNAME), by a lock the session holds or
    wants on a table of the run's schema (the check's own sessions never wait)."""
    with pg(run.config) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity a "
            "WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() "
            "AND (application_name = %s OR EXISTS (SELECT 1 FROM pg_locks l "
            "JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE l.pid = a.pid AND n.nspname = %s))",
            (app_name, run.config.schema),
        ).fetchall()
    return [int(row["pid"]) for row in rows]


#: What a run that stopped waiting for a lock raised: lock_timeout or NOWAIT, and
#: statement_timeout.
GAVE_UP_ERRORS = ("LockNotAvailable", "QueryCanceled")

#: Seconds the check keeps holding the task's key once the task waits for it: a task
#: that gives up on the wait (a lock_timeout, NOWAIT) has given up by then.
GAVE_UP_AFTER_S = 0.5


def _processed_keys(run: Ex08Run) -> set[str]:
    """The keys committed in ``processed`` (the check's own uncommitted row is not seen)."""
    with pg(run.config) as conn:
        return {str(row["key"]) for row in conn.execute("SELECT key FROM processed")}


def _watch_claim_settings(run: Ex08Run) -> None:
    """Have every insert into ``processed`` (the claim) and ``charges`` (the charge) note,
    in the inserting session, the table and the timeouts it runs under, and at its COMMIT
    the synchronous_commit it commits under (rows committed with the task's transaction,
    or not at all)."""
    from psycopg import sql

    schema = sql.Identifier(run.config.schema)
    with pg(run.config) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {s}.labkit_claim_settings "
                "(tbl TEXT, lock_timeout TEXT, statement_timeout TEXT, synchronous_commit TEXT, "
                "idle_timeout TEXT)"
            ).format(s=schema)
        )
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.labkit_note_claim() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN INSERT INTO {s}.labkit_claim_settings VALUES (TG_TABLE_NAME, "
                "current_setting('lock_timeout'), current_setting('statement_timeout'), "
                "current_setting('synchronous_commit'), "
                "current_setting('idle_in_transaction_session_timeout')); "
                "RETURN NEW; END $$"
            ).format(s=schema)
        )
        # Deferred: it runs at the COMMIT, under the settings the COMMIT runs under.
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.labkit_note_commit() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN INSERT INTO {s}.labkit_claim_settings VALUES (TG_TABLE_NAME || "
                "'@commit', '0', '0', current_setting('synchronous_commit'), "
                "current_setting('idle_in_transaction_session_timeout')); RETURN NULL; END $$"
            ).format(s=schema)
        )
        for table in ("processed", "charges"):
            conn.execute(
                sql.SQL(
                    "CREATE TRIGGER labkit_note_claim BEFORE INSERT ON {s}.{t} "
                    "FOR EACH ROW EXECUTE FUNCTION {s}.labkit_note_claim()"
                ).format(s=schema, t=sql.Identifier(table))
            )
            conn.execute(
                sql.SQL(
                    "CREATE CONSTRAINT TRIGGER labkit_note_commit AFTER INSERT ON {s}.{t} "
                    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                    "EXECUTE FUNCTION {s}.labkit_note_commit()"
                ).format(s=schema, t=sql.Identifier(table))
            )


def _claim_timeouts(run: Ex08Run, table: str = "processed") -> list[str]:
    """The timeouts (``lock_timeout = 5s``) a committed insert of the task into ``table``
    (``processed``: the claim; ``charges``: the charge) ran under."""
    with pg(run.config) as conn:
        rows = conn.execute(
            "SELECT DISTINCT lock_timeout, statement_timeout FROM labkit_claim_settings "
            "WHERE tbl = %s",
            (table,),
        ).fetchall()
    found = []
    for row in rows:
        for name in ("lock_timeout", "statement_timeout"):
            if str(row[name]) != "0" and f"{name} = {row[name]}" not in found:
                found.append(f"{name} = {row[name]}")
    return found


def _idle_timeouts(run: Ex08Run) -> list[str]:
    """The idle_in_transaction_session_timeout values (``5s``) the task's transaction ran
    under, at its claim, its charge or its COMMIT, where the server's own setting differs:
    a transaction idle that long between two statements (a worker descheduled, swapped
    out, paused) is ended by PostgreSQL, and the task that held it fails."""
    with pg(run.config) as conn:
        server = conn.execute(
            "SELECT current_setting('idle_in_transaction_session_timeout') AS t"
        ).fetchone()
        rows = conn.execute(
            "SELECT DISTINCT idle_timeout FROM labkit_claim_settings ORDER BY 1"
        ).fetchall()
    own = str(server["t"]) if server is not None else "0"
    return [str(row["idle_timeout"]) for row in rows if str(row["idle_timeout"]) not in ("0", own)]


def _commits_not_durable(run: Ex08Run) -> list[str]:
    """The tables (``processed``, ``charges``) whose inserts the task committed under
    ``synchronous_commit = off`` where the server's own setting is not off: its COMMIT
    returns, and the task is acknowledged, before the rows are on disk."""
    with pg(run.config) as conn:
        server = conn.execute("SELECT current_setting('synchronous_commit') AS sc").fetchone()
        rows = conn.execute(
            "SELECT DISTINCT split_part(tbl, '@', 1) AS tbl FROM labkit_claim_settings "
            "WHERE tbl LIKE '%@commit' AND synchronous_commit = 'off' ORDER BY 1"
        ).fetchall()
    if server is None or server["sc"] == "off":
        return []
    return [str(row["tbl"]) for row in rows]


def _unlogged_tables(run: Ex08Run) -> list[str]:
    """The tables of the run's schema (``processed``, ``charges``, a dedup table of the
    task's own) that are UNLOGGED."""
    with pg(run.config) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relpersistence = 'u' "
            "ORDER BY 1",
            (run.config.schema,),
        ).fetchall()
    return [str(row["relname"]) for row in rows]


def _terminate(backends: list[int], run: Ex08Run) -> None:
    with pg(run.config) as conn:
        for pid in backends:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


#: The customer and amount ``Ex08Run.send`` sends by default.
SENT = ("cus_8", 800)


def _waits_for_its_record(run: Ex08Run, key: str) -> bool:
    """Send ``key``'s charge; True once its run waits on a lock (the record the check
    holds), False once it ended without waiting (30 s at most)."""
    ended_before = sum(1 for event, *_rest in points.runs(run.folder) if event == "end")

    def ended() -> bool:
        return sum(1 for event, *_rest in points.runs(run.folder) if event == "end") > ended_before

    run.send(key)
    # A task that ends without waiting never wrote the record held: no need to wait out
    # the 30 s to say so.
    with contextlib.suppress(TimeoutError):
        harness.wait_until(
            lambda: bool(_waiting_on_a_lock(run.config.tag, run)) or ended(),
            30,
            "the task to wait for its dedup record",
        )
    return bool(_waiting_on_a_lock(run.config.tag, run))


#: Units a number in a dedup record may count the time in since the epoch:
#: milliseconds, seconds, buckets of 10 s to 30 min, hours, 2 to 12 hours, days, weeks.
TIME_UNITS_S = (
    0.001,
    1,
    10,
    60,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    14400,
    21600,
    43200,
    86400,
    604800,
)
#: More units, for a number that stands on its own in a record (``time.time() // 1000``,
#: ``int(time.time()) >> 12``): round numbers of seconds and powers of two.
ROUND_UNITS_S = (100, 120, 1000, 1200, 5000, 10_000, 50_000, 100_000, 1_000_000) + tuple(
    2**k for k in range(6, 21)
)
#: Dates a record may hold without the year's four digits (``strftime`` formats): the
#: year in two digits before or after the month and day, the day of the year, the week.
SHORT_DATES = ("%y%m%d", "%d%m%y", "%m%d%y", "%y%m", "%m%y", "%Y%j", "%y%j", "%y%W", "%y%V")
#: How far from the check's own time a number may be and still read as the time the
#: task ran (the run took place moments ago; a clock off by some minutes).
TIME_SLACK_S = 3600


#: A digest in hex (md5, sha1, sha224, sha256, sha384, sha512 and blake2 lengths) or a
#: UUID, standing alone in a record: what ``_time_stamps_in`` does not read as a date.
DIGESTS = re.compile(
    r"(?<![0-9A-Za-z])(?:[0-9a-f]{128}|[0-9a-f]{96}|[0-9a-f]{64}|[0-9a-f]{56}|[0-9a-f]{40}"
    r"|[0-9a-f]{32}|[0-9A-F]{128}|[0-9A-F]{96}|[0-9A-F]{64}|[0-9A-F]{56}|[0-9A-F]{40}"
    r"|[0-9A-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"(?![0-9A-Za-z])"
)


def _time_stamps_in(
    record: str, key: str, names: tuple[str, ...] = (), offsets: tuple[float, ...] = ()
) -> list[str]:
    """The numbers of ``record`` outside ``key`` that read as the time it was written: a
    count of milliseconds to weeks since the epoch, or a date with this year in it
    (``2026``, ``20261205``, ``05122026``; ``2026-12-05`` gives ``2026``, ``261205``,
    ``2612``, ``2026339``) or the day's ordinal (``739955``), in any time zone. Not in
    ``names`` either: the run's schema and queue, which a record may hold. ``offsets``:
    seconds from UTC of the zone the student's code runs in (``labkit grade`` draws one
    per run)."""
    now = SystemClock().now()
    years = {
        str(when.year)
        for shift in (-86400, 0, 86400)
        for when in (
            datetime.fromtimestamp(now + shift, UTC),
            datetime.fromtimestamp(now + shift),
            *(datetime.fromtimestamp(now + shift + offset, UTC) for offset in offsets),
        )
    }
    # Dates with the year in two digits, or the day of the year (261205, 2612, 2026339):
    # a standalone run of digits that is one, or starts with one of 5 digits or more.
    short_dates = {
        f"{when:{fmt}}"
        for shift in (-86400, 0, 86400)
        for when in (
            datetime.fromtimestamp(now + shift, UTC),
            datetime.fromtimestamp(now + shift),
            *(datetime.fromtimestamp(now + shift + offset, UTC) for offset in offsets),
        )
        for fmt in SHORT_DATES
    }
    # The day's ordinal (date.toordinal(): 739955 for 2026-12-05), a day number as the
    # date is.
    ordinals = {
        str(when.toordinal())
        for shift in (-86400, 0, 86400)
        for when in (
            datetime.fromtimestamp(now + shift, UTC),
            datetime.fromtimestamp(now + shift),
            *(datetime.fromtimestamp(now + shift + offset, UTC) for offset in offsets),
        )
    }
    found = []
    for name in sorted((key, *names), key=len, reverse=True):
        record = record.replace(name, " ")
    # A whole digest or UUID is no date, whatever digits it happens to hold: about one
    # sha256 hex in 170 has this year in a run of digits, and a correct record (the
    # key's digest) lost the check on those keys. A date glued to one makes it longer.
    record = DIGESTS.sub(" ", record)
    for digits in re.findall(r"(?<![0-9A-Za-z])\d{4,14}(?![0-9A-Za-z])", record):
        value = int(digits)
        if (
            digits in ordinals
            or any(digits == d or (len(d) >= 5 and digits.startswith(d)) for d in short_dates)
            or any(abs(value - now / unit) <= max(TIME_SLACK_S / unit, 2) for unit in ROUND_UNITS_S)
        ):
            found.append(digits)
    for digits in re.findall(r"\d{4,}", record):
        if digits in found:
            continue
        value = int(digits)
        counted = any(
            abs(value - now / unit) <= max(TIME_SLACK_S / unit, 2) for unit in TIME_UNITS_S
        )
        # 2026, 202612, 20261205, 05122026, 2026120513...
        dated = digits in years or (
            len(digits) in (6, 8, 10, 12, 14) and any(year in digits for year in years)
        )
        if counted or dated:
            found.append(digits)
    return found + [d for d in clock_fields_in(record, now, offsets) if d not in found]


def _zone_offsets(ns: Namespace) -> tuple[float, ...]:
    """Seconds from UTC of the time zone the student's code runs in (``labkit grade``
    draws one per run, and the check's own may differ), as ``date +%z`` there says; none
    if it says nothing."""
    with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError):
        proc = ns.spawn(
            ["date", "+%z"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        try:
            out, _err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            ns.kill(proc)
            return ()
        zone = (out or "").strip()
        if re.fullmatch(r"[+-]\d{4}", zone):
            sign = -1 if zone[0] == "-" else 1
            return (sign * (int(zone[1:3]) * 3600 + int(zone[3:5]) * 60),)
    return ()


def _one_record_per_key(
    key: str,
    records: list[str],
    sent: tuple[str, int],
    names: tuple[str, ...],
    source: str = "",
    offsets: tuple[float, ...] = (),
    started: Started | None = None,
) -> None:
    """Fail unless the task recorded ``key`` as one record of its own that does not
    change with the time (``"charge:" + key``, a digest of it, not a digest of the key
    and the date), and is not just the message's customer or amount (``sent``).
    ``source``: the module's, whose f-strings may put the key next to the date;
    ``offsets``: seconds from UTC of the zone the student's code runs in; ``started``:
    the worker's start, whose time or pid a record may hide in a digest."""
    # What the message itself carries (its customer ``cus_8``, its amount) is no clock
    # field, whatever the hour: such a record is judged as not the task's key below.
    carried = (*names, *map(str, sent))
    stamps = _time_stamps_in(records[0], key, carried, offsets) if len(records) == 1 else []
    host = host_in(records[0].replace(key, " ")) if len(records) == 1 else None
    # A digest hides the date it was salted with: sha256(f"{key}:{date.today()}") is
    # the same for every copy of today, and a copy redelivered tomorrow charges again.
    dated = (
        dated_digest_in(records[0], key, source, names, SystemClock().now())
        if len(records) == 1 and not stamps and not host
        else None
    )
    expect(
        not dated,
        _("the task to insert its key {key} into processed").format(key=repr(key)),
        _(
            "it recorded {records} in processed, the {digest}: the date or the hour it "
            "ran is in the digest, so a copy of the key sent on another day finds no record "
            "and charges again"
        ).format(records=records, digest=dated),
        _(
            "record the key itself, as the contract asks: a digest salted with the "
            "date, the hour or the day since the epoch changes with the clock, and a copy of "
            "the message that comes on another day finds no record of the first"
        ),
    )
    # A digest salted with the worker's start (its time, its pid): two workers started
    # in one second, or with alike pids in namespaces of their own, share it.
    begun = (
        started_in(records[0], key, source, names, started, offsets, tuple(map(str, sent)))
        if started is not None and len(records) == 1 and not stamps and not host
        else None
    )
    expect(
        not begun,
        _("the task to insert its key {key} into processed").format(key=repr(key)),
        _(
            "it recorded {records} in processed, made of {salted}: the time its worker "
            "started or its process id is in it, so a copy of the key that another "
            "worker runs, or this one after a restart, finds no record and charges again"
        ).format(records=records, salted=begun),
        _(
            "record the key itself, as the contract asks: anything of the worker "
            "process in the record (the time it started, its pid, a uuid made as the "
            "module is imported) differs on every other worker and after every restart"
        ),
    )
    if len(records) == 1 and not stamps and not host and records[0] not in map(str, sent):
        return
    expect(
        not host,
        _("the task to insert its key {key} into processed").format(key=repr(key)),
        _(
            "it recorded {records} in processed: {host} in it is the machine it ran on, so "
            "a copy of the key that another worker's machine runs finds no record and "
            "charges again"
        ).format(records=records, host=host),
        _(
            "record the key itself: a record with the host name (or the process id) in it "
            "differs on every machine the message may be delivered to"
        ),
    )
    expect(
        False,
        _("the task to insert its key {key} into processed").format(key=repr(key)),
        _(
            "it recorded {records} in processed: {stamps} in it is the time it ran, so a "
            "copy of the key sent later finds no record and charges again"
        ).format(records=records, stamps=", ".join(stamps))
        if stamps
        else _("it recorded {keys} in processed, not the task's key").format(keys=records)
        if records
        else _("it never touched processed while the check held that key"),
        _(
            "record the key itself: a record with the hour or the date in it no longer "
            "matches a copy of the message that comes later"
        )
        if stamps
        else "record the task's key with INSERT INTO processed ... in the charge's transaction",
    )


@CHECKS.add(
    3,
    "the dedup record and the charge commit together: with them in two transactions, "
    "a kill between the two commits charges twice",
    timeout=TIMEOUT,
    severe=True,
)
def dedup_commits_with_the_charge(ns: Namespace) -> None:
    key = "inv-tx"
    with Ex08Run(ns) as run:
        began = SystemClock().now()
        worker = run.worker()
        started = Started(began, SystemClock().now(), run.folder)
        _watch_claim_settings(run)
        # The check holds the key in `processed` (uncommitted): the task's own insert of
        # that key must wait, so the kill lands while the task is writing its dedup record.
        # A task that records the key under a name of its own ("charge:" + key, a digest)
        # charges without waiting; the check then takes that name back (the record and
        # the charge deleted), holds it, and sends the key again. One that records nothing
        # in processed (a unique key on charges, a lock and a look at charges) is held at
        # its COMMIT instead.
        held, table = key, "processed"
        with pg(run.config) as blocker:
            for attempt in (1, 2):
                if table == "processed":
                    blocker.execute("INSERT INTO processed (key) VALUES (%s)", (held,))
                else:
                    # Whatever it dedups by (a unique key on charges, a lock of its own),
                    # the run holds it until its COMMIT: held there, it is killed with
                    # everything written and nothing committed.
                    _gate(run, "charges", at_commit=True)
                    blocker.execute("LOCK TABLE labkit_gate IN EXCLUSIVE MODE")
                if _waits_for_its_record(run, key):
                    break
                run.check_not_stub()
                # A wait that gives up within a few milliseconds (lock_timeout = 100ms,
                # NOWAIT) may end before the check looks: its error says it waited.
                gave_up = [
                    r
                    for runs in run.returned().values()
                    for r in runs
                    if r.state != "SUCCESS" and r.value in GAVE_UP_ERRORS
                ]
                expect(
                    not gave_up,
                    _(
                        "the task to wait while another transaction holds its key in "
                        "processed (that transaction may still roll back)"
                    ),
                    _("it gave up waiting for the lock; it ended with {reply}").format(
                        reply=_reply_of(gave_up[-1] if gave_up else None)
                    ),
                    _(
                        "no lock_timeout, NOWAIT or try-lock on the claim: a copy that gives up "
                        "fails and is acknowledged, and if the transaction it waited for rolls "
                        "back, the charge is lost. Let the INSERT ... ON CONFLICT wait"
                    ),
                )
                others = sorted(_processed_keys(run) - {key})
                if attempt == 2:
                    expect(
                        False,
                        _("the task to insert its key {key} into processed").format(key=repr(key)),
                        _(
                            "its first delivery recorded {first} in processed, the second "
                            "{second}: a copy of the key finds no record of the first"
                        ).format(first=repr(held), second=others)
                        if table == "processed"
                        else _("it never touched processed while the check held that key"),
                        _(
                            "record the same text for a key every time it comes (the key "
                            "itself): a record that differs between deliveries (a random "
                            "id, the time) lets every copy charge again"
                        )
                        if table == "processed"
                        else "record the task's key with INSERT INTO processed ... in the "
                        "charge's transaction",
                    )
                if others:
                    _not_scoped_by_the_queue(run, key, others)
                    source = (Path(run.ns.workdir) / "ex08_tasks.py").read_text(encoding="utf-8")
                    _one_record_per_key(
                        key,
                        others,
                        SENT,
                        (run.config.schema, run.config.queue),
                        source,
                        _zone_offsets(run.ns),
                        started,
                    )
                    held = others[0]
                else:
                    table = "charges"
                blocker.rollback()
                with pg(run.config) as conn:
                    conn.execute("DELETE FROM processed WHERE key = %s", (held,))
                    conn.execute("DELETE FROM charges WHERE key = %s", (key,))
            # A task that gives up on the wait (lock_timeout, NOWAIT, a try-lock) fails, and
            # a failed task is acknowledged: when the transaction it waited for rolls back
            # (a killed copy), nobody charges. Held a moment longer, a task that waits
            # for its key is still waiting.
            SystemClock().sleep(GAVE_UP_AFTER_S)
            if not _waiting_on_a_lock(run.config.tag, run):
                run.check_not_stub()
                ended = [r for runs in run.returned().values() for r in runs]
                expect(
                    False,
                    _(
                        "the task to wait while another transaction holds its key in "
                        "processed (that transaction may still roll back)"
                    ),
                    _("it stopped waiting within {seconds:g} s; it ended with {reply}").format(
                        seconds=GAVE_UP_AFTER_S, reply=_reply_of(ended[-1] if ended else None)
                    ),
                    _(
                        "no lock_timeout, NOWAIT or try-lock on the claim: a copy that gives up "
                        "fails and is acknowledged, and if the transaction it waited for rolls "
                        "back, the charge is lost. Let the INSERT ... ON CONFLICT wait"
                    ),
                )
            waiting = _waiting_on_a_lock(run.config.tag, run)  # the task about to die
            children = worker.pool_children()
            harness.wait_until(lambda: bool(points.runs(run.folder)), 10, "the task's start record")
            _event, task_id, _pid, _parent = points.runs(run.folder)[-1]
            run.kills.record(task_id, run.procs)
            run.kill_children(worker, children)
            # The dead task's session would finish its statement once the lock is free
            # (PostgreSQL notices a dead client only when it next writes to it); end that
            # session, as PostgreSQL eventually would, so nothing the killed task began
            # commits. Only that one: the redelivery may already be waiting too.
            _terminate(waiting, run)
            _killed_again_and_again(run, worker, key, task_id, waiting)
            blocker.rollback()
        run.settle()
        n = run.charges(key)
        expect(
            n == 1,
            "1 charge row after a kill while the task wrote its dedup record",
            _("{count} charge rows").format(count=n),
            "commit the charge and the dedup record in ONE transaction",
        )
        # The run that charged was the redelivery: a copy of the message sent later (a
        # producer's retry) must find the record it left, as after any first run.
        run.send(key)
        run.settle()
        n = run.charges(key)
        expect(
            n == 1,
            _(
                "1 charge row for {key} after the redelivery of its killed run charged and a "
                "copy of the message came later"
            ).format(key=repr(key)),
            _("{count} charge rows").format(count=n),
            _(
                "a redelivered message is charged as any other: claim its key in processed "
                "in the charge's transaction. A redelivery that charges without recording "
                "its key (it only looks in charges) lets every later copy charge again"
            ),
        )
        # A timeout longer than the check's wait gives up all the same, only later: when
        # the transaction holding the key outlasts it (a killed copy's session waiting on a
        # lock, a slow commit), the copy fails, is acknowledged, and the charge is lost.
        timeouts = _claim_timeouts(run)
        expect(
            not timeouts,
            _(
                "the task to wait while another transaction holds its key in "
                "processed (that transaction may still roll back)"
            ),
            _("its claim runs under {settings}: it stops waiting after that long").format(
                settings=", ".join(timeouts)
            ),
            _(
                "no lock_timeout or statement_timeout around the claim, however long: a copy "
                "whose wait outlasts it fails and is acknowledged, and if the transaction it "
                "waited for rolls back, the charge is lost. Let the INSERT ... ON CONFLICT "
                "wait as long as it takes"
            ),
        )
        # The same after the claim: a charge that waits on a lock (a busy table, a slow
        # index) and gives up fails, is acknowledged, and its claim rolls back with it:
        # nobody charges that key.
        charge_timeouts = _claim_timeouts(run, "charges")
        expect(
            not charge_timeouts,
            _("the charge's INSERT to wait for a lock as long as it takes, as the claim does"),
            _("the charge runs under {settings}: it stops waiting after that long").format(
                settings=", ".join(charge_timeouts)
            ),
            _(
                "no lock_timeout or statement_timeout anywhere in the task's transaction, "
                "even after the claim: a charge whose wait outlasts it fails and is "
                "acknowledged, its claim rolls back with it, and nobody charges that key"
            ),
        )
        # The same for the task's own transaction: PostgreSQL ends a session idle in its
        # transaction that long (the worker descheduled or paused between two statements),
        # the transaction rolls back, the task fails and is acknowledged: nobody charges.
        idle = _idle_timeouts(run)
        expect(
            not idle,
            _("the task's transaction to live as long as it takes, as its statements do"),
            _("it runs under idle_in_transaction_session_timeout = {value}").format(
                value=", ".join(idle)
            ),
            _(
                "no idle_in_transaction_session_timeout on the task's connection: a worker "
                "paused that long between two statements of the charge's transaction (swapped "
                "out, descheduled, stopped) finds its session ended, the claim and the charge "
                "roll back, the task fails and is acknowledged, and nobody charges that key"
            ),
        )
        # A COMMIT that returns before its rows reach the disk: when PostgreSQL crashes
        # a moment later, the charge is gone, and the task was acknowledged already.
        lazy = _commits_not_durable(run)
        expect(
            not lazy,
            _("the charge and its dedup record on disk when the task's COMMIT returns"),
            _("the task committed {tables} under synchronous_commit = off").format(
                tables=", ".join(lazy)
            ),
            _(
                "no synchronous_commit = off for the charge: its COMMIT returns before the "
                "rows are on disk, the task is acknowledged, and a PostgreSQL crash a moment "
                "later loses the charge for good"
            ),
        )
        # An UNLOGGED table (no WAL, "only a lookup") is emptied when PostgreSQL restarts
        # after a crash: every record in it is gone, and a late copy charges again.
        unlogged = _unlogged_tables(run)
        expect(
            not unlogged,
            _("the dedup records and the charges to survive a PostgreSQL crash"),
            _("it made {tables} UNLOGGED").format(tables=", ".join(unlogged)),
            _(
                "no ALTER TABLE ... SET UNLOGGED: PostgreSQL empties an unlogged table when "
                "it restarts after a crash, every key in it is forgotten, and a late copy of "
                "any message charges again"
            ),
        )
        # The other way round: a charge the database refuses (beyond INTEGER) must take
        # its dedup record with it, or the key reads "already charged" for good.
        refused = "inv-tx-refused"
        # Any record the refused run left, under whatever name the task records a key.
        before = _processed_keys(run)
        _refused_charge_ends(run, run.send(refused, "cus_8", 2**40), refused)
        run.settle()
        recorded = bool(_processed_keys(run) - before)
        expect(
            not recorded and run.charges(refused) == 0,
            _(
                "no dedup record for a key whose charge the database refused (an amount "
                "beyond INTEGER): both rows commit together or not at all"
            ),
            _("{key} is in processed with {count} charge rows").format(
                key=repr(refused), count=run.charges(refused)
            )
            if recorded
            else _("{count} charge rows").format(count=run.charges(refused)),
            _(
                "a charge error caught inside the transaction (try/except around the INSERT, "
                "a nested conn.transaction()) or a dedup record committed on its own keeps the "
                "key in processed with no charge: its next delivery is skipped for good. Let "
                "the error roll back the whole transaction and leave the task"
            ),
        )
        # Then the same key again with an amount that fits (the producer retries the
        # failed charge), and a new key: both on the pool child that ran the refused
        # charge. Nothing of the refusal may stay behind in that child: a key remembered
        # in Python before its charge committed skips the retry, and a kept connection
        # not rolled back after the error fails every later task ("current transaction
        # is aborted"); a failed task is acknowledged, so each such charge is lost.
        after = "inv-tx-after"
        retried = {refused: run.send(refused, "cus_8", 800), after: run.send(after, "cus_8", 800)}
        run.settle()
        counts = {key: run.charges(key) for key in retried}
        said = {task: runs[-1] for task, runs in run.returned().items()}
        expect(
            all(n == 1 for n in counts.values()),
            _(
                "1 charge row for {key} sent again with an amount that fits, once the "
                "database had refused its first charge, and 1 for the next key {after}"
            ).format(key=repr(refused), after=repr(after)),
            "; ".join(
                _("{key}: {count} rows, it ended with {reply}").format(
                    key=repr(key), count=counts[key], reply=_reply_of(said.get(task))
                )
                for key, task in retried.items()
            ),
            _(
                "a refused charge must leave nothing behind in the worker: remember no key "
                "in Python before its charge commits, and roll a kept connection back after "
                "an error (open one per task, with connect() as conn, conn.transaction(): "
                "does both), or every later task on it fails with 'current transaction is "
                "aborted', is acknowledged, and its charge is lost"
            ),
        )
        # A redelivery that runs a path of its own and commits more often than a first
        # delivery (the one of the next key): killed right after each of its commits too.
        made = commits.made(run.folder)
        redelivery_killed_after_each_commit(
            run, worker, made.get(task_id, []), len(made.get(retried[after], []))
        )


#: Times the check kills one message's runs while each waits for its key: a task that
#: counts its deliveries (in a table of its own, in Redis) and drops the message after
#: a few (a "poison message" limit, Reject(requeue=False)) loses the charge of a message
#: killed that often; each delivery must come back to the claim until one charges. Ten
#: kills after the first: the usual limits (3, 5, 10) all drop it, for some 2 s more.
KILLED_TIMES = 11


def _killed_again_and_again(
    run: Ex08Run, worker: harness.CeleryWorker, key: str, task_id: str, killed: list[int]
) -> None:
    """Kill the redeliveries of ``task_id``, ``key``'s charge, as each waits for its key
    (the check still holds it), up to ``KILLED_TIMES`` runs killed in all; fail when one
    ends instead of waiting, the key still uncharged (from the second redelivery on: what
    the first does, and a run that charged, the rest of the check judges). ``killed``:
    the sessions of the run killed first, ended."""
    gone = set(killed)
    for nth in range(2, KILLED_TIMES + 1):
        ended_before = len(run.returned().get(task_id, []))
        with contextlib.suppress(TimeoutError):
            harness.wait_until(
                functools.partial(_back_or_ended, run, task_id, gone, ended_before),
                30,
                "the redelivery to wait for its key",
            )
        ends = run.returned().get(task_id, [])
        if (nth == 2 and len(ends) > ended_before) or run.charges(key):
            # The first redelivery ended, or a run charged (without its record, or in
            # a transaction of its own): the rest of the check judges that.
            return
        expect(
            len(ends) <= ended_before,
            _(
                "a message whose runs were SIGKILLed {count} times to come back each time "
                "and wait for its key {key}, until a run charges it"
            ).format(count=nth - 1, key=repr(key)),
            _("its delivery {nth} ended with {reply} instead").format(
                nth=nth, reply=_reply_of(ends[-1] if ends else None)
            ),
            _(
                "count no deliveries to give up on a message (a 'poison message' limit "
                "that rejects it, a delivery counter in a table or in Redis): a charge "
                "whose worker was killed some times, by a deploy, an OOM kill or a "
                "failover, is then never made. Every delivery claims the key, as the "
                "first did"
            ),
        )
        sessions = [p for p in _waiting_on_a_lock(run.config.tag, run) if p not in gone]
        if not sessions:
            return  # it never came back: the count of charge rows says so
        run.kills.record(task_id, run.procs)
        run.kill_children(worker, worker.pool_children())
        _terminate(sessions, run)
        gone |= set(sessions)


def _back_or_ended(run: Ex08Run, task_id: str, gone: set[int], ended_before: int) -> bool:
    """True once a session not in ``gone`` waits on a lock, or a run of ``task_id``
    ended after the ``ended_before`` that had."""
    if any(pid not in gone for pid in _waiting_on_a_lock(run.config.tag, run)):
        return True
    return len(run.returned().get(task_id, [])) > ended_before


#: Runs of one charge the database refuses that a task may make (a bounded retry), and
#: seconds the check watches for more once the first run ended: a task that gives the
#: message back on a database error (Reject(requeue=True), a retry without end) runs it
#: again and again, some twenty times a second, and never lets go of its pool slot; a
#: second shows it as well as 2.5 did, 1.5 s sooner for every notebook.
REFUSED_RUNS = 5
REFUSED_WATCH_S = 1.0


def _refused_charge_ends(run: Ex08Run, task: str, key: str) -> None:
    """Fail unless the run of ``task`` (a charge the database refuses) ends after a few
    runs: failed and acknowledged, or dead-lettered, not given back to the queue forever."""

    def starts() -> int:
        return sum(
            1 for event, t, *_rest in points.runs(run.folder) if event == "start" and t == task
        )

    with contextlib.suppress(TimeoutError):
        harness.wait_until(
            lambda: bool(run.returned().get(task)) or starts() > REFUSED_RUNS,
            30,
            "the refused charge's first run to end",
        )
    with contextlib.suppress(TimeoutError):
        harness.wait_until(
            lambda: starts() > REFUSED_RUNS, REFUSED_WATCH_S, "the refused charge to run again"
        )
    n = starts()
    expect(
        n <= REFUSED_RUNS,
        _(
            "a charge the database refused (an amount beyond INTEGER) for {key} to end after "
            "at most {limit} runs: failed, or rejected without requeue"
        ).format(key=repr(key), limit=REFUSED_RUNS),
        _("it ran {count} times within {seconds:g} s, the message given back each time").format(
            count=n, seconds=REFUSED_WATCH_S
        ),
        _(
            "let the database's error fail the task: a failed task is acknowledged. A "
            "Reject(requeue=True), or a retry with no max_retries, on a database error gives "
            "the message back again and again: the same error every time, forever, and a "
            "pool slot taken for good"
        ),
    )


def _not_scoped_by_the_queue(run: Ex08Run, key: str, records: list[str]) -> None:
    """Fail when a record the task left for ``key`` holds the name of the queue it
    consumes (EX08_QUEUE), as it is or inside a digest: two worker pools on one database
    with different queues (a queue moved) each find no record of the other's, and charge
    one key twice."""
    scoped = [record for record in records if run.config.queue in record]
    if not scoped:
        source = (Path(run.ns.workdir) / "ex08_tasks.py").read_text(encoding="utf-8")
        affixes = affixes_in(source, (run.config.queue,)) + (run.config.queue,)
        hidden = digest_with(records, key, run.config.queue, affixes)
        scoped = [] if hidden is None else [hidden]
    expect(
        not scoped,
        _("the task to insert its key {key} into processed").format(key=repr(key)),
        _(
            "it recorded {records} in processed, made with the name of the queue it "
            "consumes, {queue} (EX08_QUEUE), as it is or inside a digest"
        ).format(records=scoped, queue=repr(run.config.queue)),
        _(
            "record the key itself: workers on another queue that share the database (a "
            "queue moved, a second pool) record the key under another name, and a copy of "
            "the message they run charges again"
        ),
    )


def _both_copies_inside(
    run: Ex08Run, key: str, waited_for: str, customers: tuple[str, str] = ("cus_8", "cus_8")
) -> None:
    """Send ``key`` twice (for ``customers``) and hold both copies inside their
    transactions at once.

    Until both copies wait on a lock, no charge row can be written (the check holds
    ``charges``): each copy gets as far as it can in its transaction, and they are
    inside it together. Then the lock goes and the workers finish."""
    with pg(run.config) as blocker:
        blocker.execute("LOCK TABLE charges IN EXCLUSIVE MODE")
        sent = {run.send(key, customers[0]), run.send(key, customers[1])}

        def waiting() -> int:
            return len(_waiting_on_a_lock(run.config.tag, run))

        def ended() -> int:
            # No copy can write its charge while the check holds the table: a copy that
            # ended meanwhile never waited for the other, and the wait can stop.
            return sum(len(runs) for task, runs in run.returned().items() if task in sent)

        with contextlib.suppress(TimeoutError):
            harness.wait_until(
                lambda: waiting() + ended() >= 2,
                30,
                "both copies of the message to wait inside their transactions",
            )
        if (found := waiting()) < 2:
            run.check_not_stub()
            expect(
                False,
                waited_for,
                _("{waiting} of them waited in the database while the check held charges").format(
                    waiting=found
                ),
                "insert into processed and charges in the task, in one transaction",
            )
        blocker.rollback()
    run.settle()


#: The hint when two copies at once both charged.
CLAIM_FIRST = _(
    "claim the key first with INSERT INTO processed ... ON CONFLICT (key) DO NOTHING "
    "RETURNING key in the charge's transaction: the second copy's INSERT waits for "
    "the first to commit, then finds the key taken"
)


@CHECKS.add(
    2,
    "two copies of one message at once, on two pool children (a producer retry while "
    "the first copy runs): the dedup record must be claimed by an INSERT that waits for "
    "the other transaction, not read with a SELECT and written after the charge",
    timeout=TIMEOUT,
    severe=True,
)
def two_deliveries_at_once_charge_once(ns: Namespace) -> None:
    key = "inv-twice"
    with Ex08Run(ns) as run:
        run.worker(concurrency=2)
        # The second copy names the customer otherwise (a producer that corrected it):
        # still one key, one charge, and a lock per customer does not order the two.
        _both_copies_inside(
            run,
            key,
            _("two copies of one message to run at once on two pool children"),
            ("cus_8", "cus_8b"),
        )
        n = run.charges(key)
        expect(
            n == 1,
            "1 charge row after two copies of one message ran at the same time",
            _("{count} charge rows").format(count=n),
            CLAIM_FIRST,
        )


@CHECKS.add(
    2,
    "two copies of one message at once on two workers, which share nothing (no lock "
    "made at import, not even hash()'s salt): only the database can tell them apart",
    timeout=TIMEOUT,
    severe=True,
)
def two_workers_at_once_charge_once(ns: Namespace) -> None:
    key = "inv-two-workers"
    with Ex08Run(ns) as run:
        # One message at a time each: the second copy goes to the other worker. Two
        # machines in time zones 26 hours apart: their local dates always differ.
        run.worker("w1", prefetch=1, tz=WEST)
        run.worker("w2", prefetch=1, tz=EAST)
        _both_copies_inside(run, key, _("two copies of one message to run at once on two workers"))
        n = run.charges(key)
        records = sorted(_processed_keys(run))
        expect(
            n == 1,
            _("1 charge row after two copies of one message ran at the same time on two workers"),
            _("{count} charge rows").format(count=n)
            if len(records) < 2
            else _("{count} charge rows; the two workers recorded {records} in processed").format(
                count=n, records=records
            ),
            _(
                "two workers share no Python object and no hash() salt: a lock made in "
                "Python, or keyed by hash(), guards nothing between them. Claim the key "
                "with INSERT INTO processed ... ON CONFLICT (key) DO NOTHING RETURNING key "
                "in the charge's transaction"
            )
            if len(records) < 2
            else _(
                "each worker recorded the key under a record of its own: record the key "
                "itself, with nothing of the machine in it (its local date or time zone, "
                "its name, hash()'s salt), so a copy on any worker finds the first one's"
            ),
        )


def _note_sessions(run: Ex08Run) -> None:
    """Have every charge note the session that wrote it (its backend pid and start), so
    the check finds a worker's sessions even when the task names its connections itself
    (``application_name=...`` beats the workers' PGAPPNAME)."""
    from psycopg import sql

    schema = sql.Identifier(run.config.schema)
    with pg(run.config) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {s}.labkit_sessions (pid INT, started TIMESTAMPTZ)").format(
                s=schema
            )
        )
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.labkit_note_session() RETURNS trigger LANGUAGE plpgsql "
                "AS $$ BEGIN INSERT INTO {s}.labkit_sessions SELECT pid, backend_start "
                "FROM pg_stat_activity WHERE pid = pg_backend_pid(); RETURN NULL; END $$"
            ).format(s=schema)
        )
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER labkit_note_session AFTER INSERT ON {s}.charges "
                "FOR EACH ROW EXECUTE FUNCTION {s}.labkit_note_session()"
            ).format(s=schema)
        )


def _note_transactions(run: Ex08Run) -> None:
    """Have every insert into ``processed`` and ``charges`` note the key it wrote and the
    transaction that wrote it; a note goes with its transaction when that rolls back."""
    from psycopg import sql

    schema = sql.Identifier(run.config.schema)
    with pg(run.config) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {s}.labkit_writes (tbl TEXT, key TEXT, xid BIGINT)").format(
                s=schema
            )
        )
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.labkit_note_write() RETURNS trigger LANGUAGE plpgsql "
                "AS $$ BEGIN INSERT INTO {s}.labkit_writes VALUES (TG_TABLE_NAME, NEW.key, "
                "txid_current()); RETURN NULL; END $$"
            ).format(s=schema)
        )
        for table in ("processed", "charges"):
            conn.execute(
                sql.SQL(
                    "CREATE TRIGGER labkit_note_write AFTER INSERT ON {s}.{t} "
                    "FOR EACH ROW EXECUTE FUNCTION {s}.labkit_note_write()"
                ).format(s=schema, t=sql.Identifier(table))
            )


def _charged_apart(run: Ex08Run) -> list[str]:
    """The keys whose charge committed in a transaction that wrote nothing to
    ``processed``, when the task records its keys there (``_note_transactions``): a path
    that charges and records in two transactions. A task that keeps no record in
    ``processed`` (a unique key on charges) is another check's to name."""
    with pg(run.config) as conn:
        rows = conn.execute(
            "SELECT DISTINCT c.key FROM labkit_writes c WHERE c.tbl = 'charges' "
            "AND NOT EXISTS (SELECT 1 FROM labkit_writes p WHERE p.tbl = 'processed' "
            "AND p.xid = c.xid) "
            "AND EXISTS (SELECT 1 FROM labkit_writes p WHERE p.tbl = 'processed') ORDER BY 1"
        ).fetchall()
    return [str(row["key"]) for row in rows]


def _worker_sessions(run: Ex08Run) -> list[int]:
    """Backend pids of the database sessions the workers hold: by application name, or
    noted by a charge they wrote (``_note_sessions``)."""
    with pg(run.config) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity a WHERE pid <> pg_backend_pid() "
            "AND (application_name = %s OR EXISTS (SELECT 1 FROM labkit_sessions s "
            "WHERE s.pid = a.pid AND s.started = a.backend_start))",
            (run.config.tag,),
        ).fetchall()
    return [int(row["pid"]) for row in rows]


def _end_sessions(run: Ex08Run) -> None:
    """End every database session the workers hold, as a restart or a failover does, and
    wait until PostgreSQL has closed them (the next task must find them closed)."""
    _terminate(_worker_sessions(run), run)
    harness.wait_until(lambda: not _worker_sessions(run), 10, "the ended sessions to close")


#: Seconds the check waits for the charge sent after the sessions ended: the reference
#: charges it in well under one.
SESSION_SETTLE_S = 30.0


@CHECKS.add(
    2,
    "the database ends the worker's session between two tasks (a restart, a failover, "
    "an idle timeout): the next task still charges, on a connection of its own",
    timeout=TIMEOUT,
    severe=True,
)
def charges_after_its_database_session_ended(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        run.worker()
        _note_sessions(run)
        _note_transactions(run)
        run.send("inv-s1")
        run.settle()
        _end_sessions(run)
        second = run.send("inv-s2")
        try:
            run.settle(SESSION_SETTLE_S)
        except TimeoutError:
            # The worker holds a retry whose countdown has not run out (self.retry after
            # the error, countdown=600): the charge is not made while the check waits.
            ends = run.returned().get(second, [])
            expect(
                False,
                _(
                    "1 charge row for a task that ran after the database ended the worker's "
                    "sessions"
                ),
                _(
                    "no charge row within {seconds:g} s: its run ended with {reply}, and the "
                    "worker still held the message"
                ).format(seconds=SESSION_SETTLE_S, reply=_reply_of(ends[-1] if ends else None)),
                _(
                    "open the connection in the task (with connect() as conn): a kept "
                    "connection whose session the server ended fails the task, and a retry "
                    "of it with a countdown charges only once the countdown ran out, long "
                    "after the charge was due, if its worker lives that long"
                ),
            )
        n = run.charges("inv-s2")
        expect(
            n == 1,
            _("1 charge row for a task that ran after the database ended the worker's sessions"),
            _("{count} charge rows").format(count=n),
            _(
                "open the connection in the task (with connect() as conn): a kept connection "
                "whose session the server ended fails every task that uses it, and a failed "
                "task is acknowledged, so its charge is lost"
            ),
        )
        _rolled_back_by_the_database_is_not_a_duplicate(run)
        # A path of its own (a retry after a rollback above, a credit note, a charge of
        # nothing) must claim and charge in one transaction too: no kill ever lands
        # between its two commits here, and the other checks never take that path.
        apart = _charged_apart(run)  # a credit note's path too, sent with the scenes
        expect(
            not apart,
            _(
                "every charge committed in the same transaction as its key's record in "
                "processed, on every path of the task"
            ),
            _(
                "the charge of {keys} committed in a transaction that wrote nothing to processed"
            ).format(keys=", ".join(repr(key) for key in apart)),
            _(
                "a path that charges and records the key in two transactions (an autocommit "
                "connection, two commits: a retry after a deadlock, a credit note handled "
                "apart) charges twice or loses the charge when the worker dies between them. "
                "Every path claims the key and charges in one `with connect() as conn, "
                "conn.transaction():`"
            ),
        )


#: Errors the database rolls a transaction back with, each made by the check (a trigger
#: that raises its SQLSTATE): ``(key, table whose INSERT raises, SQLSTATE, what the
#: feedback calls it, attempts in a row it rolls back)``. The serialization failure on
#: the claim's INSERT, the deadlock on the charge's: a task that reads either as a
#: duplicate, wherever its ``except`` sits, says "already charged" for a key nobody
#: charged. A deadlock that rolls back one attempt: the retry after it charges, in one
#: transaction too (``_charged_apart``: not a fallback on an autocommit connection); one
#: that rolls back ``ROLLED_BACK_TIMES`` attempts in a row: a retry loop of the task's
#: own (``for attempt in range(3)``, or 5) runs out, and must then fail, not end the run
#: as a value ("failed", or None when the loop falls through); a longer loop, or a Celery
#: retry, charges on its next attempt.
ROLLED_BACK_TIMES = 5
ROLLED_BACK = (
    (
        "inv-serialization",
        "processed",
        "40001",
        "a serialization failure (SerializationFailure)",
        1,
    ),
    ("inv-deadlock", "charges", "40P01", "a deadlock (DeadlockDetected)", 1),
    (
        "inv-deadlocks",
        "charges",
        "40P01",
        "a deadlock, attempt after attempt (DeadlockDetected)",
        ROLLED_BACK_TIMES,
    ),
)


def _rolled_back_by_the_database_is_not_a_duplicate(run: Ex08Run) -> None:
    """Have the database roll back runs' transactions as ``ROLLED_BACK`` says (a trigger
    raises the SQLSTATE at the INSERT, as many attempts in a row as the scene says), as
    PostgreSQL does when two transactions wait for each other or conflict under
    SERIALIZABLE; one settle for all, and a credit note sent last (``_charged_apart``).
    Nothing committed: each run must fail (its message is acknowledged, the producer
    retries) or charge on a retry; a run that ends in SUCCESS with the key uncharged
    ("already charged", an ``except psycopg.errors.DeadlockDetected`` or
    ``SerializationFailure`` taken for a duplicate, a retry loop that runs out and
    returns) has lost the charge for good."""
    from psycopg import sql

    schema = sql.Identifier(run.config.schema)
    with pg(run.config) as conn:
        for nth, (key, table, code, what, times) in enumerate(ROLLED_BACK, start=1):
            name = sql.Identifier(f"labkit_rollback_{nth}")
            # A charge row holds its key: the trigger picks its scene's run by it. A
            # record in processed may not (a digest): the first claim made, the run sent
            # first's, is the one rolled back.
            armed = sql.SQL("nextval('{s}.{q}') <= {times}").format(
                s=schema, q=name, times=sql.Literal(times)
            )
            if table == "charges":
                armed = sql.SQL("NEW.key = {key} THEN IF {armed}").format(
                    key=sql.Literal(key), armed=armed
                )
            conn.execute(sql.SQL("CREATE SEQUENCE {s}.{q}").format(s=schema, q=name))
            conn.execute(
                sql.SQL(
                    "CREATE FUNCTION {s}.{f}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "IF {armed} THEN RAISE EXCEPTION 'labkit: % (%)', {what}, {code} USING "
                    "ERRCODE = {code}; END IF; {closed}RETURN NEW; END $$"
                ).format(
                    s=schema,
                    f=name,
                    armed=armed,
                    what=sql.Literal(what),
                    code=sql.Literal(code),
                    closed=sql.SQL("END IF; " if table == "charges" else ""),
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE TRIGGER {f} BEFORE INSERT ON {s}.{t} "
                    "FOR EACH ROW EXECUTE FUNCTION {s}.{f}()"
                ).format(s=schema, t=sql.Identifier(table), f=name)
            )
    sent = {key: run.send(key) for key, *_rest in ROLLED_BACK}
    # A credit note, which may take a path of its own (``_charged_apart``).
    run.send(CREDIT_KEY, "cus_8", CREDIT_CENTS)
    run.settle()
    for key, _table, _code, what, _times in ROLLED_BACK:
        ends = run.returned().get(sent[key], [])
        n = run.charges(key)
        lost = n == 0 and any(r.state == "SUCCESS" for r in ends)
        expect(
            not lost,
            _(
                "a run whose transaction the database rolled back with {error} while it "
                "charged {key} to fail (or to charge on a retry), not to end as if charged"
            ).format(error=what, key=repr(key)),
            _("it returned {reply} and {key} has {count} charge rows").format(
                reply=_reply_of(ends[-1]), key=repr(key), count=n
            )
            if ends
            else _("{count} charge rows").format(count=n),
            _(
                "a deadlock or a serialization failure (psycopg.errors.DeadlockDetected, "
                "SerializationFailure) means PostgreSQL rolled your transaction back: nothing "
                "was charged, so it is no duplicate. Let the error fail the task, or retry "
                "it, and when the retries run out raise the last error (a loop that ends and "
                "returns acknowledges the message with nothing charged); only an INSERT into "
                "processed that gives no row back means the key was charged"
            ),
        )


#: A key beyond ASCII and an amount in cents that a trip through a float in euros does
#: not bring back, which ``replies_charged_or_already_charged`` sends.
ODD_KEY = "inv-r-ção"
ODD_CENTS = 1003
#: A credit note's key: a long customer id in mixed case (a column width, a ``lower()``
#: or ``[:32]`` makes it another customer's; 319 characters, past a ``[:100]`` or a
#: ``[:255]`` too) and a negative amount (``abs()`` turns the credit into a charge;
#: ``if amount <= 0: return ...`` drops it). Stored as they came.
CREDIT_KEY = "inv-r-credit"
CREDIT_CUSTOMER = "cus_Acme-Holdings-GmbH_EU-West_" + "Q7xK2mPz9RtV4wYb" * 18
CREDIT_CENTS = -2500
#: A charge of 0 cents (a free item's invoice): a row all the same, as any other amount.
ZERO_KEY = "inv-r-zero"


def _reply_of(run: returns.Returned | None) -> str:
    if run is None:
        return _("nothing (it never finished)")
    if run.state == "SUCCESS":
        return repr(run.value)
    return _("{state}: {error}").format(state=run.state, error=run.value)


@CHECKS.add(
    1,
    "a charge the database refuses, or whose session the server ends, fails the task "
    "(never 'charged' or 'already charged' with no charge row), and every charge row holds "
    "the message's customer and amount as they came, an amount of 0 too",
    timeout=TIMEOUT,
    severe=True,
)
def replies_charged_or_already_charged(ns: Namespace) -> None:
    # Severe: each expectation here is a failed charge answered as a success, or a charge
    # row that is not the one asked for. The reply texts and the record's shape (not
    # severe) are a_copy_alongside_the_first_says_already_charged's, whose scene runs
    # anyway.
    with Ex08Run(ns) as run:
        run.worker()
        # Beyond PostgreSQL's INTEGER: the charge's INSERT fails, nothing is charged.
        refused = run.send("inv-too-big", "cus_8", 2**40)
        # No customer: NULL in a NOT NULL column, an IntegrityError, which an `except
        # psycopg.IntegrityError` meant for a duplicate's UniqueViolation reads as one.
        nulled = run.send("inv-no-customer", None, 700)
        # A key beyond ASCII, and an amount a trip through euros in floating point does
        # not bring back (10.03 * 100 is 1002.9999999999999): both as they came.
        run.send(ODD_KEY, "cus_8", ODD_CENTS)
        run.send(CREDIT_KEY, CREDIT_CUSTOMER, CREDIT_CENTS)
        run.send(ZERO_KEY, "cus_8", 0)
        run.settle()
        rows = run.rows(ODD_KEY)
        expect(
            rows == [("cus_8", ODD_CENTS)],
            _(
                "the charge row for {key} to hold the message's customer and amount: {wanted}"
            ).format(key=repr(ODD_KEY), wanted=("cus_8", ODD_CENTS)),
            _("it holds {row}").format(row=rows[0] if len(rows) == 1 else rows),
            _(
                "insert the amount as the task received it, an int of cents: through a "
                "float (amount / 100 * 100, round(amount / 100, 2)) 1003 cents come back as "
                "1002. Keep money in integer cents"
            ),
        )
        credit = run.rows(CREDIT_KEY)
        expect(
            credit == [(CREDIT_CUSTOMER, CREDIT_CENTS)],
            _(
                "the charge row for {key} (a credit: a negative amount, for a long customer "
                "id in mixed case) to hold the message's customer and amount as they came: "
                "{wanted}"
            ).format(key=repr(CREDIT_KEY), wanted=f"({_cut(CREDIT_CUSTOMER)}, {CREDIT_CENTS})"),
            _("it holds {row}").format(
                row=f"({_cut(credit[0][0])}, {credit[0][1]})" if len(credit) == 1 else credit
            ),
            _(
                "insert the customer and the amount exactly as the task received them: no "
                "abs(), no cap, no skipped zero or negative amount, and the customer id "
                "neither cut to a width nor changed in case (another customer's id may be "
                "what is left)"
            ),
        )
        zero = run.rows(ZERO_KEY)
        expect(
            zero == [("cus_8", 0)],
            _(
                "the charge row for {key} (an amount of 0 cents) to hold the message's "
                "customer and amount: {wanted}"
            ).format(key=repr(ZERO_KEY), wanted=("cus_8", 0)),
            _("it holds {row}").format(row=zero[0])
            if len(zero) == 1
            else _("{count} charge rows").format(count=len(zero)),
            _(
                "an amount of 0 is a charge like any other: claim the key and insert its "
                "row (no skipped zero amount)"
            ),
        )
        said = {task: runs[-1] for task, runs in run.returned().items()}
        big = said.get(refused)
        # A run that returned at all is SUCCESS to Celery: the error must leave the task.
        reported = big is not None and big.value in ("charged", "already charged")
        expect(
            big is not None and big.state != "SUCCESS",
            _(
                "a charge the database refused (an amount beyond INTEGER) to fail the task, "
                "not to be reported as charged"
            ),
            _("it returned {reply}").format(reply=_reply_of(big)),
            _(
                "catch no database error to return 'already charged': only an INSERT into "
                "processed that gives no row back means the key was charged"
            )
            if reported or big is None
            else _(
                "let the database's error leave the task (no try/except that returns a "
                "value): a task that returns ends in SUCCESS, and nobody learns the charge "
                "failed"
            ),
        )
        null = said.get(nulled)
        expect(
            null is not None and null.state != "SUCCESS",
            _(
                "a charge the database refused (no customer: NULL in a NOT NULL column, an "
                "IntegrityError) to fail the task, not to be reported as charged"
            ),
            _("it returned {reply}").format(reply=_reply_of(null)),
            _(
                "catch no database error to return 'already charged': only an INSERT into "
                "processed that gives no row back means the key was charged"
            )
            if null is None or null.value in ("charged", "already charged")
            else _(
                "let the database's error leave the task (no try/except that returns a "
                "value): a task that returns ends in SUCCESS, and nobody learns the charge "
                "failed"
            ),
        )
        _cut_off_mid_charge_is_not_a_duplicate(run)


def _cut_off_mid_charge_is_not_a_duplicate(run: Ex08Run) -> None:
    """The server ends a run's session while it inserts the charge (a failover, a
    ``pg_terminate_backend``): an ``OperationalError`` that the run must not read as a
    duplicate. It fails, or a retry charges; never "already charged" for a key with no
    charge (an ``except psycopg.OperationalError``, or ``psycopg.Error``, taken for one)."""
    key = "inv-cut-off"
    _gate(run, "charges", at_commit=False)
    with pg(run.config) as gate:
        gate.execute("LOCK TABLE labkit_gate IN EXCLUSIVE MODE")
        sent = run.send(key)
        _inside_together(run, [sent])
        _terminate(_waiting_on_a_lock(run.config.tag, run), run)
        gate.rollback()
    run.settle()
    ends = run.returned().get(sent, [])
    n = run.charges(key)
    duplicate = any(r.state == "SUCCESS" and r.value == "already charged" for r in ends)
    expect(
        n == 1 or not duplicate,
        _(
            "a run whose database session the server ended while it charged {key} to fail "
            "(or to charge on a retry), not to say 'already charged'"
        ).format(key=repr(key)),
        _("it returned {reply} and {key} has {count} charge rows").format(
            reply=_reply_of(ends[-1]), key=repr(key), count=n
        ),
        _(
            "catch no database error to return 'already charged': a lost connection, a "
            "deadlock or a serialization failure (psycopg.OperationalError) means the "
            "charge did not commit; only an INSERT into processed that gives no row back "
            "means the key was charged"
        ),
    )


@CHECKS.add(
    1,
    "the task records the key itself in processed, and a copy of a message, sent once the "
    "first copy ended or running while it is still in its transaction, ends as a "
    "duplicate: 'already charged', not an error, the first 'charged'",
    timeout=TIMEOUT,
)
def a_copy_alongside_the_first_says_already_charged(ns: Namespace) -> None:
    # Not severe: the reply texts and the record's shape lose no charge (the dedup still
    # holds). Whether a failed charge is ever answered as a success is
    # replies_charged_or_already_charged's (severe).
    key = "inv-alongside"
    with Ex08Run(ns) as run:
        run.worker(concurrency=2)
        first = run.send("inv-r")
        run.send(ODD_KEY, "cus_8", ODD_CENTS)
        run.settle()
        # The record as the docstring says: the key itself. Under a name of its own
        # ("charge:" + key, a digest) the dedup still holds (the severe checks learn that
        # name), but whoever looks a key up in processed does not find it.
        recorded = sorted(_processed_keys(run))
        expect(
            "inv-r" in recorded,
            _("the task's key {key} recorded in processed as it came").format(key=repr("inv-r")),
            _("it recorded {keys} in processed, not the task's key").format(keys=recorded)
            if recorded
            else _("processed is empty"),
            _(
                "insert the key itself into processed, with no prefix, digest or other "
                "change: whoever looks a key up there (a report, a support tool) reads it by "
                "the key's own text"
            ),
        )
        expect(
            ODD_KEY in recorded,
            _("the task's key {key} recorded in processed as it came").format(key=repr(ODD_KEY)),
            _("it recorded {keys} in processed, not the task's key").format(
                keys=[k for k in recorded if k.startswith("inv-r-")] or recorded[:5]
            ),
            _(
                "insert the key itself into processed, with no escaping, encoding or other "
                "change: whoever looks a key up there (a report, a support tool) reads it by "
                "the key's own text, accents and all"
            ),
        )
        _sent_in_a_row_says_already_charged(run, "inv-r", first)
        before = set(run.returned())  # the runs of the keys above
        _both_copies_inside(
            run, key, _("two copies of one message to run at once on two pool children")
        )
        ended = [runs[-1] for task, runs in run.returned().items() if task not in before]
        said = sorted((r.state, r.value) for r in ended if r.state == "SUCCESS")
        expect(
            said == [("SUCCESS", "already charged"), ("SUCCESS", "charged")],
            _(
                "of two copies of one message running at once, one to return 'charged' and "
                "the other, once the first committed, 'already charged'"
            ),
            _("they ended with {replies}").format(
                replies=", ".join(_reply_of(r) for r in ended) or _("nothing (it never finished)")
            ),
            _(
                "claim the key with INSERT INTO processed ... ON CONFLICT (key) DO NOTHING "
                "RETURNING key: the second copy's INSERT waits for the first to commit, then "
                "gives no row back. A plain INSERT fails with UniqueViolation there, and "
                "SELECT ... FOR UPDATE locks no row that does not exist yet"
            ),
        )


def _sent_in_a_row_says_already_charged(run: Ex08Run, key: str, first: str) -> None:
    """``key`` sent again once its first copy (the task ``first``) ended: a producer's
    retry that comes after the first run finished. The first run returned 'charged', the
    copy 'already charged' (not an error, not another text), and nothing more is charged."""
    again = run.send(key)
    run.settle()
    ended = run.returned()
    replies = [runs[-1] if (runs := ended.get(task)) else None for task in (first, again)]
    said = [None if r is None else (r.state, r.value) for r in replies]
    n = run.charges(key)
    expect(
        said == [("SUCCESS", "charged"), ("SUCCESS", "already charged")] and n == 1,
        _(
            "of two copies of one message sent in a row (the second once the first had "
            "ended), the first to return 'charged' and the second 'already charged', with "
            "1 charge row for {key}"
        ).format(key=repr(key)),
        _("they ended with {replies}, and {key} has {count} charge rows").format(
            replies=", ".join(_reply_of(r) for r in replies), key=repr(key), count=n
        ),
        _(
            "a copy that finds its key already in processed (the INSERT ... ON CONFLICT "
            "(key) DO NOTHING RETURNING key gives no row back) returns exactly 'already "
            "charged', as a copy that waited for the first does: a first look of its own "
            "(in charges, in memory) must answer the same, not raise or return another text"
        ),
    )


#: What the charge task runs under, printed by a Python that imports the student's module.
_LIMITS_PROBE = (
    "import json, os, ex08_tasks as m\n"
    "t = m.app.tasks['ex08.charge']\n"
    "q = m.app.amqp.router.route(dict(t._get_exec_options()), t.name, (), {}, t)['queue']\n"
    "print(json.dumps({'task_time_limit': t.time_limit or m.app.conf.task_time_limit,\n"
    "  'task_soft_time_limit': t.soft_time_limit or m.app.conf.task_soft_time_limit,\n"
    "  'expires': str(t.expires) if t.expires is not None else None,\n"
    "  'delivery_mode': str(getattr(t, 'delivery_mode', None) or\n"
    "    m.app.conf.task_default_delivery_mode),\n"
    "  'queue': getattr(q, 'name', q), 'given_queue': os.environ.get('EX08_QUEUE')}))\n"
)


def _charge_time_limits(ns: Namespace) -> dict[str, object]:
    """The time limits the worker would put on ex08.charge, read by a Python that imports
    the student's module (as the worker does): under a worker's environment (a run's
    broker, queue, database and schema, no worker started), so a module that uses them
    as it is imported (CREATE TABLE IF NOT EXISTS, a connection) imports as in a worker."""
    with Ex08Run(ns) as run:
        return _limits_under(ns, {**os.environ, **run.env})


def _limits_under(ns: Namespace, env: dict[str, str]) -> dict[str, object]:
    proc = ns.spawn(
        [sys.executable, "-c", _LIMITS_PROBE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        ns.kill(proc)
        out, err = proc.communicate()
    if "NotImplementedError: Exercise 8" in (err or ""):
        raise stub_error(8)
    found: object = None
    with contextlib.suppress(ValueError, IndexError):
        found = json.loads((out or "").strip().splitlines()[-1])
    if not isinstance(found, dict):
        lines = [line for line in (err or "").splitlines() if line.strip()]
        # The exception's own line, not the caret under the source line that follows it.
        last = [line for line in lines if re.match(r"[\w.]+(Error|Exception)\b", line)][-1:]
        last = last or lines[-1:]
        expect(
            False,
            _("`import ex08_tasks` to work in your folder"),
            last[0][:200] if last else _("(empty log)"),
            "run `celery -A ex08_tasks worker` in your folder to see the whole error",
        )
    assert isinstance(found, dict)
    return found


@CHECKS.add(
    1,
    "no time limit and no expiry on the charge (task_time_limit, task_soft_time_limit, "
    "@app.task(expires=...)): a copy waiting for its key is stopped, fails and is "
    "acknowledged, and if the copy it waited for rolls back, nobody charges; a charge "
    "sent through your task with an expiry and delivered after an outage is dropped unrun",
    timeout=TIMEOUT,
    severe=True,
)
def charge_may_wait_without_a_time_limit(ns: Namespace) -> None:
    limits = _charge_time_limits(ns)
    expires = limits.pop("expires", None)
    delivery = limits.pop("delivery_mode", None)
    queue, given = limits.pop("queue", None), limits.pop("given_queue", None)
    set_ = {name: value for name, value in limits.items() if value}
    expect(
        expires is None,
        _("the charge to never expire, so a copy delivered days late still runs"),
        _("the task is declared with expires = {expires}").format(expires=expires),
        _(
            "drop expires from @app.task: a worker drops a message whose expiry has passed "
            "without running it (it marks it revoked), and a charge sent before an outage "
            "longer than that is never made; the dedup record already makes a late copy safe"
        ),
    )
    expect(
        not set_,
        _("the charge to run without a time limit, so a copy may wait for its key"),
        _("it runs under {settings}").format(
            settings=", ".join(f"{name} = {value}" for name, value in sorted(set_.items()))
        ),
        _(
            "drop the time limit: Celery stops a task that outlasts it and acknowledges the "
            "failure, so a copy waiting at the INSERT into processed while the first copy's "
            "transaction rolls back (its worker was killed) is lost, and so is the charge"
        ),
    )
    # Messages sent through the module's app (charge.delay) that RabbitMQ keeps in memory
    # only: a broker restart loses every charge still queued.
    expect(
        str(delivery).lower() not in TRANSIENT,
        _("the charges sent through your app to be persistent messages, kept on disk"),
        _("it sends them with delivery_mode = {mode}").format(mode=delivery),
        _(
            "drop task_default_delivery_mode = 'transient' (and delivery_mode=1 on the "
            "task): RabbitMQ keeps a transient message in memory only, so a broker restart "
            "loses every charge still in the queue, before any worker ran it"
        ),
    )
    # Charges sent through the module's app (charge.delay) routed to a queue of the task's
    # own (@app.task(queue=...), task_routes): the workers consume the queue they were
    # given, so those charges wait in a queue nobody reads and are never made.
    expect(
        given is None or queue == given,
        _("the charges sent through your app to go to the queue the workers read ({queue})").format(
            queue=repr(given)
        ),
        _("they go to the queue {queue}").format(queue=repr(queue)),
        _(
            "drop queue= from @app.task (and any task_routes for ex08.charge): the module "
            "reads its queue from EX08_QUEUE into task_default_queue, which is the queue "
            "its workers consume; a charge sent to another queue is never run"
        ),
    )
    # A timer the task arms itself (a SIGALRM whose handler raises, a timer that cancels
    # the query) shows in no setting, and fires after more seconds than the check waits.
    source = (Path(ns.workdir) / "ex08_tasks.py").read_text(encoding="utf-8")
    timers = self_timers_in(source)
    expect(
        not timers,
        _("the charge to run without a timer of its own, so a copy may wait for its key"),
        _("your module arms one: {code}").format(code=repr(timers[0][:160]) if timers else ""),
        _(
            "no signal.alarm, setitimer or timer that cancels the query (threading.Timer("
            "..., conn.cancel)): whatever its seconds, a copy still waiting for its key "
            "when it fires fails and is acknowledged, and if the copy it waited for rolls "
            "back (its worker was killed), nobody charges. Let the INSERT ... ON CONFLICT "
            "wait as long as it takes"
        ),
    )


#: How Celery and kombu name a delivery mode that RabbitMQ does not write to disk.
TRANSIENT = ("transient", "1", "deliverymode.transient")


#: Keys charged, then sent again late. Numbered, so their text order (inv-late-9 after
#: inv-late-20) is not the order they came in.
LATE_AFTER = 20
#: Keys of earlier charges the check puts in ``processed`` (no charge rows of this run),
#: before and after this run's keys in text order and newer than them: a table trimmed
#: to its last N keys, N up to thousands, by text or by age, loses this run's keys. Rows
#: written in SQL cost the check little; charges through the worker, each a task, do.
OLD_KEYS = 10_000


#: How far back the check moves the dates the task keeps in processed before the late
#: copies come: longer than any cleanup window (a day, a week, 90 days).
AGED_DAYS = 400


def _age_records(run: Ex08Run) -> None:
    """Move every date and time column the task added to ``processed`` or ``charges``
    (``created_at``) ``AGED_DAYS`` back, as if the late copies came that much later; and
    the numbers of a column the task added to ``processed`` that hold the time it wrote
    them, in seconds or milliseconds since the epoch (``extract(epoch FROM now())``); and
    the dates and epoch times a text column the task added holds (``to_char(now(),
    'YYYY-MM-DD')``, ISO text that sorts as dates do)."""
    from psycopg import sql

    with pg(run.config) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND (table_name IN ('processed', 'charges') "
            "AND (data_type LIKE 'timestamp%%' OR data_type = 'date') OR table_name = "
            "'processed' AND data_type IN ('integer', 'bigint', 'numeric', 'real', "
            "'double precision') OR table_name IN ('processed', 'charges') AND data_type IN "
            "('text', 'character varying', 'character') AND column_name NOT IN ('key', "
            "'customer'))",
            (run.config.schema,),
        ).fetchall()
        now = SystemClock().now()
        for column in columns:
            table = sql.Identifier(str(column["table_name"]))
            name = sql.Identifier(str(column["column_name"]))
            if column["data_type"] in ("text", "character varying", "character"):
                _age_text(conn, table, name, now)
                continue
            if "time" in str(column["data_type"]) or column["data_type"] == "date":
                conn.execute(
                    sql.SQL("UPDATE {t} SET {c} = {c} - make_interval(days => %s)").format(
                        t=table, c=name
                    ),
                    (AGED_DAYS,),
                )
                continue
            # Seconds, then milliseconds: only the numbers within two days of now.
            for scale in (1, 1000):
                conn.execute(
                    sql.SQL("UPDATE {t} SET {c} = {c} - %s WHERE {c} BETWEEN %s AND %s").format(
                        t=table, c=name
                    ),
                    (
                        AGED_DAYS * 86400 * scale,
                        int((now - 2 * 86400) * scale),
                        int((now + 2 * 86400) * scale),
                    ),
                )


#: How a text column may hold the date (an ISO timestamp starts with the first).
TEXT_DATES = ("%Y-%m-%d", "%Y%m%d", "%Y/%m/%d")


def _age_text(conn: Any, table: Any, name: Any, now: float) -> None:
    """Move the dates (``TEXT_DATES``, of the days around ``now`` in any zone) and the
    epoch times in seconds or milliseconds that the text column ``name`` holds
    ``AGED_DAYS`` back."""
    from psycopg import sql

    today = datetime.fromtimestamp(now, UTC).date()
    for shift in (-2, -1, 0, 1, 2):
        day = today + timedelta(days=shift)
        for fmt in TEXT_DATES:
            conn.execute(
                sql.SQL(
                    "UPDATE {t} SET {c} = replace({c}, %s, %s) WHERE strpos({c}, %s) > 0"
                ).format(t=table, c=name),
                (f"{day:{fmt}}", f"{day - timedelta(days=AGED_DAYS):{fmt}}", f"{day:{fmt}}"),
            )
    for scale in (1, 1000):
        conn.execute(
            sql.SQL(
                "UPDATE {t} SET {c} = ({c}::numeric - %s)::text WHERE CASE WHEN {c} ~ "
                "'^[0-9]+([.][0-9]+)?$' THEN {c}::numeric BETWEEN %s AND %s ELSE false END"
            ).format(t=table, c=name),
            (
                AGED_DAYS * 86400 * scale,
                int((now - 2 * 86400) * scale),
                int((now + 2 * 86400) * scale),
            ),
        )


def _charge_counts(run: Ex08Run, keys: list[str]) -> dict[str, int]:
    """Charge rows per key, for each of ``keys``, in one query."""
    with pg(run.config) as conn:
        rows = conn.execute(
            "SELECT key, count(*) AS n FROM charges WHERE key = ANY(%s) GROUP BY key", (keys,)
        ).fetchall()
    found = {str(row["key"]): int(row["n"]) for row in rows}
    return {key: found.get(key, 0) for key in keys}


@CHECKS.add(
    1,
    "every one of 20 keys sent again once all were charged and 10 000 more recorded (a "
    "producer that retries late) charges nothing more: the dedup record is kept, not "
    "trimmed to the last keys",
    timeout=TIMEOUT,
    severe=True,
)
def late_copies_after_many_charges_charge_once(ns: Namespace) -> None:
    keys = [f"inv-late-{n}" for n in range(1, LATE_AFTER + 1)]
    with Ex08Run(ns) as run:
        run.worker(concurrency=2)
        for key in keys:
            run.send(key)
        run.settle()
        # Earlier days' keys, before and after these in text order; then one more charge,
        # which is when a dedup that trims the table (to its last N keys by text order,
        # or its newest N rows) runs, before the late copies come.
        with pg(run.config) as conn:
            conn.execute(
                "INSERT INTO processed (key) SELECT prefix || n FROM generate_series(1, %s) "
                "AS n, unnest(ARRAY['inv-a-', 'inv-z-']) AS prefix",
                (OLD_KEYS // 2,),
            )
        # A record the task dates (a created_at column of its own) is a year old by the
        # time its late copy comes: a cleanup by age deletes it.
        _age_records(run)
        run.send("inv-late-0")
        run.settle()
        for key in keys:
            run.send(key)
        run.settle()
        counts = _charge_counts(run, keys)
        wrong = {key: n for key, n in counts.items() if n != 1}
        shown = ", ".join(
            _("{key}: {count} rows").format(key=repr(key), count=n)
            for key, n in list(wrong.items())[:5]
        ) + (", ..." if len(wrong) > 5 else "")
        expect(
            not wrong,
            _(
                "1 charge row for each of {count} keys, each sent again once all of them "
                "were charged (and {old} earlier keys were in processed)"
            ).format(count=len(keys), old=OLD_KEYS),
            _("{wrong} of the {count} keys do not have 1 row: {shown}").format(
                wrong=len(wrong), count=len(keys), shown=shown
            ),
            _(
                "a key with 0 rows: its runs failed, and a failed task is acknowledged, so "
                "its charge is lost. Two charges of different keys at once must not fail "
                "each other: no LOCK TABLE after the claim (it deadlocks with the other "
                "run's claim), no lock or timeout shared by all keys"
            )
            if 0 in wrong.values()
            else _(
                "keep every key in processed for good: a dedup record deleted to keep the "
                "table small (the last N keys, the ones older than some days, a cleanup "
                "after the charge), or one the claim takes over once it is old (ON "
                "CONFLICT DO UPDATE ... WHERE it is older than some days), lets that key's "
                "late copy charge again"
            ),
        )
        # A cleanup that runs now and then (at random, every Nth charge, in a task of its
        # own) may not run while the check looks: the module's SQL says it is there.
        source = (Path(run.ns.workdir) / "ex08_tasks.py").read_text(encoding="utf-8")
        deletes = deletes_in(source)
        expect(
            not deletes,
            _("every key's dedup record kept in processed for good"),
            _("your module deletes rows: {sql}").format(
                sql=repr(deletes[0][:160]) if deletes else ""
            ),
            _(
                "keep every key in processed for good, however rarely a cleanup runs (at "
                "random, every Nth charge, at night): a dedup record deleted lets that key's "
                "late copy charge again. Delete no record from processed"
            ),
        )


def _gate(run: Ex08Run, table: str, at_commit: bool) -> None:
    """Make every insert into ``table`` wait while the check holds the table
    ``labkit_gate``: right after the row is written (the run holds its row and its table
    lock), or, ``at_commit``, at the COMMIT of the run's transaction (a deferred
    constraint trigger fires there), once the run has done everything it does."""
    from psycopg import sql

    schema = sql.Identifier(run.config.schema)
    with pg(run.config) as conn:
        conn.execute(sql.SQL("CREATE TABLE {s}.labkit_gate (x INT)").format(s=schema))
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.labkit_wait_gate() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN LOCK TABLE {s}.labkit_gate IN SHARE MODE; RETURN NULL; END $$"
            ).format(s=schema)
        )
        when = "DEFERRABLE INITIALLY DEFERRED" if at_commit else ""
        conn.execute(
            sql.SQL(
                "CREATE CONSTRAINT TRIGGER labkit_wait_gate AFTER INSERT ON {s}.{t} "
                + when
                + " FOR EACH ROW EXECUTE FUNCTION {s}.labkit_wait_gate()"
            ).format(s=schema, t=sql.Identifier(table))
        )


def _inside_together(run: Ex08Run, sent: list[str]) -> None:
    """Wait until the runs of ``sent`` each wait on a lock or ended (30 s at most)."""

    def settled() -> bool:
        waiting = len(_waiting_on_a_lock(run.config.tag, run))
        ended = sum(1 for task, runs in run.returned().items() if task in sent and runs)
        return waiting + ended >= len(sent)

    with contextlib.suppress(TimeoutError):
        harness.wait_until(settled, 30, "the runs to wait inside their transactions")


@CHECKS.add(
    2,
    "a copy of a message that arrives while the first copy commits charges nothing: the "
    "key stays held until the COMMIT, not released (an advisory unlock) just before it",
    timeout=TIMEOUT,
    severe=True,
)
def a_copy_during_the_commit_charges_once(ns: Namespace) -> None:
    key = "inv-commit"
    with Ex08Run(ns) as run:
        worker = run.worker(concurrency=2)
        _gate(run, "charges", at_commit=True)
        with pg(run.config) as gate:
            gate.execute("LOCK TABLE labkit_gate IN EXCLUSIVE MODE")
            first = run.send(key)

            def waiting() -> int:
                return len(_waiting_on_a_lock(run.config.tag, run))

            def ended(task: str) -> bool:
                return bool(run.returned().get(task))

            # The first copy has done its writes and waits at its COMMIT.
            with contextlib.suppress(TimeoutError):
                harness.wait_until(
                    lambda: waiting() >= 1 or ended(first), 30, "the first copy to commit"
                )
            second = run.send(key)
            # The second copy goes as far as it can while the first has not committed.
            with contextlib.suppress(TimeoutError):
                harness.wait_until(
                    lambda: waiting() >= 2 or ended(second) or ended(first),
                    30,
                    "the second copy to wait",
                )
            gate.rollback()
        run.settle()
        n = run.charges(key)
        expect(
            n == 1,
            _(
                "1 charge row after a second copy of one message ran while the first copy "
                "was committing"
            ),
            _("{count} charge rows").format(count=n),
            _(
                "hold the key until your transaction commits: claim it with INSERT INTO "
                "processed ... ON CONFLICT (key) DO NOTHING RETURNING key, or lock it with "
                "pg_advisory_xact_lock (the COMMIT releases it); a lock you release "
                "yourself (pg_advisory_unlock, in a finally) frees the key before the "
                "COMMIT, and a copy that reads processed then sees no record yet"
            ),
        )
        _a_redelivery_during_the_commit_charges_once(run, worker)


def _a_redelivery_during_the_commit_charges_once(
    run: Ex08Run, worker: harness.CeleryWorker
) -> None:
    """The same with the second copy a redelivery: its first run killed before it began,
    it runs while a producer's copy waits at its COMMIT. A redelivery that looks in
    charges (which shows no row the other copy has not committed) and charges, its key
    recorded after, charges twice."""
    key = "inv-commit-redelivered"
    with pg(run.config) as gate:
        gate.execute("LOCK TABLE labkit_gate IN EXCLUSIVE MODE")
        child = run.hold("task_start", key)
        redelivered = run.held[-1]
        producer = run.send(key)

        def waiting() -> int:
            return len(_waiting_on_a_lock(run.config.tag, run))

        def ended(task: str) -> bool:
            return bool(run.returned().get(task))

        # The producer's copy has done its writes and waits at its COMMIT.
        with contextlib.suppress(TimeoutError):
            harness.wait_until(
                lambda: waiting() >= 1 or ended(producer), 30, "the producer's copy to commit"
            )
        run.kill_children(worker, [child])
        # The redelivery goes as far as it can while the producer's copy has not committed.
        with contextlib.suppress(TimeoutError):
            harness.wait_until(
                lambda: waiting() >= 2 or ended(redelivered) or ended(producer),
                30,
                "the redelivery to wait",
            )
        gate.rollback()
    run.settle()
    n = run.charges(key)
    expect(
        n == 1,
        _(
            "1 charge row after a redelivered copy of one message ran while another copy "
            "was committing"
        ),
        _("{count} charge rows").format(count=n),
        _(
            "claim a redelivered message's key as any other's, first, with INSERT INTO "
            "processed ... ON CONFLICT (key) DO NOTHING RETURNING key: it waits for the "
            "other copy's COMMIT. A look in charges shows no row another transaction has "
            "not committed yet, so a redelivery that looks there charges too"
        ),
    )


@CHECKS.add(
    1,
    "two different keys charged at the same time on two pool children are both charged: "
    "one run's locks must not make the other fail (a LOCK TABLE after the claim deadlocks)",
    timeout=TIMEOUT,
    severe=True,
)
def two_keys_at_once_both_charge(ns: Namespace) -> None:
    keys = ["inv-k1", "inv-k2"]
    with Ex08Run(ns) as run:
        run.worker(concurrency=2)
        # Both runs claim their key, then wait, each holding its claim, until both have.
        _gate(run, "processed", at_commit=False)
        with pg(run.config) as gate:
            gate.execute("LOCK TABLE labkit_gate IN EXCLUSIVE MODE")
            _inside_together(run, [run.send(key) for key in keys])
            gate.rollback()
        run.settle()
        _both_keys_charged(
            run,
            keys,
            _(
                "a run that fails is acknowledged and its charge is lost: lock only the "
                "key's own row (the claim's INSERT does), no LOCK TABLE after the claim "
                "(two runs then wait for each other: a deadlock) and no lock shared by "
                "every key that a busy run reads as 'already charged'"
            ),
        )
        # Two more keys, each run held back at its table lock by the check's ROW EXCLUSIVE
        # locks on processed and charges (the lock every INSERT takes, so the reference's
        # INSERTs never wait for them), then both let go at once: two runs that each took
        # a lock on a whole table that others may share (LOCK TABLE ... IN SHARE MODE,
        # on processed before the claim or on charges after it) both hold it, and each
        # one's INSERT waits for the other's: a deadlock.
        keys = ["inv-k3", "inv-k4"]
        with pg(run.config) as held:
            held.execute("LOCK TABLE processed, charges IN ROW EXCLUSIVE MODE")
            _inside_together(run, [run.send(key) for key in keys])
            held.rollback()
        run.settle()
        _both_keys_charged(
            run,
            keys,
            _(
                "a run that fails is acknowledged and its charge is lost: a table lock that "
                "two runs may hold at once (LOCK TABLE ... IN SHARE MODE, on processed or on "
                "charges) makes each one's INSERT wait for the other's (a deadlock); lock only "
                "the key's own row (the claim's INSERT does), or a lock one run holds at a time"
            ),
        )


def _both_keys_charged(run: Ex08Run, keys: list[str], hint: str) -> None:
    """One charge row for each of ``keys``, charged at the same time; ``hint`` if not."""
    said = {task: runs[-1] for task, runs in run.returned().items()}
    failed = [r for r in said.values() if r.state != "SUCCESS"]
    got = [run.charges(key) for key in keys]
    expect(
        got == [1, 1],
        _("1 charge row for each of two keys charged at the same time"),
        _("{first} and {second} charge rows{failure}").format(
            first=got[0],
            second=got[1],
            failure=_("; a run ended with {reply}").format(reply=_reply_of(failed[0]))
            if failed
            else "",
        ),
        hint,
    )
