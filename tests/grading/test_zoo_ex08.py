"""Exercise 8's zoo: each plausible wrong task module is caught by the check named after it.

The student's code is a file (``ex08_tasks.py``, written by the notebook's
``%%writefile`` cell), so each entry rewrites a part of the reference file, then runs
the named check (real workers, real kills) and one check the variant still passes, so
the feedback points at the one mistake.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from gradingkit import HIDDEN, SOLUTIONS, namespace_of, notebook_for
from zoograding import compiles, runs_its_control, skip_unless_drawn

from labkit.grading import catalog
from labkit.grading.checks import Check, CheckStatus, Namespace, run_check
from labkit.grading.exercises.ex08.checks import SKIPPED_REDELIVERY

pytestmark = [pytest.mark.services, pytest.mark.slow]

REFERENCE_SETTINGS = """\
    app.conf.task_acks_late = True
    app.conf.task_reject_on_worker_lost = True
"""
REFERENCE_BODY_START = "    with connect() as conn, conn.transaction():\n"

NO_DEDUP = """\
    with connect() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

TWO_TRANSACTIONS = """\
    with psycopg.connect(DSN, options=f"-c search_path={SCHEMA}", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
    return "charged"
"""

#: One transaction, but the dedup record is read with a SELECT and written after the
#: charge: two copies running at once both read "not processed" and both charge.
SELECT_THEN_INSERT = """\
    with connect() as conn, conn.transaction():
        if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
    return "charged"
"""

#: The dedup record commits on its own, first: a kill between the two commits leaves
#: the key "processed" with no charge, and the redelivery skips it (the charge is lost).
DEDUP_COMMITTED_FIRST = """\
    with connect() as conn:
        with conn.transaction():
            first = conn.execute(
                "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                "RETURNING key",
                (key,),
            ).fetchone()
        if first is None:
            return "already charged"
        with conn.transaction():
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    return "charged"
"""

#: The same split with an autocommit connection: each INSERT commits by itself.
DEDUP_AUTOCOMMITTED_FIRST = """\
    with psycopg.connect(DSN, options=f"-c search_path={SCHEMA}", autocommit=True) as conn:
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

DEDUP_BY_CUSTOMER = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (customer,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: The settings are right, but the task throws every redelivered message away before
#: the reference's body runs.
SKIPS_REDELIVERIES = """\
    from celery import current_task

    if (current_task.request.delivery_info or {}).get("redelivered"):
        return "skipped: looks like a duplicate"
"""


#: The same, only when the customer was charged before ("looks like a duplicate"): a
#: redelivery whose first run never charged is thrown away all the same.
SKIPS_REDELIVERIES_OF_KNOWN_CUSTOMERS = """\
    if (charge.request.delivery_info or {}).get("redelivered"):
        with connect() as seen:
            if seen.execute(
                "SELECT 1 FROM charges WHERE customer = %s", (customer,)
            ).fetchone():
                return "already charged"
"""

#: A transaction-scoped advisory lock keyed by hash(key): str hashes are salted per
#: interpreter, so two workers take two different locks for one key.
HASH_ADVISORY_LOCK = """\
    with connect() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (hash(key) % 2**63,))
        if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
    return "charged"
"""

#: A multiprocessing lock made at import: one worker's pool children share it, two
#: workers do not (and a child killed holding it stops its worker's other children).
MP_LOCK_BODY = """\
    with LOCK, connect() as conn, conn.transaction():
        if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
    return "charged"
"""

#: SQL built with f-strings: a key (or customer) with a quote breaks the statement, the
#: task fails, and a failed task is acknowledged: that charge is lost.
F_STRING_SQL = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            f"INSERT INTO processed (key) VALUES ('{key}') ON CONFLICT (key) DO NOTHING "
            "RETURNING key"
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            f"INSERT INTO charges (key, customer, amount) VALUES ('{key}', '{customer}', {amount})"
        )
    return "charged"
"""

#: One connection per pool child, opened on first use and kept: once the server ends
#: its session, every later task in that child fails (and is acknowledged).
CACHED_CONNECTION = """\
_conn = None


def shared():
    global _conn
    if _conn is None:
        _conn = connect()
    return _conn


@app.task("""

#: No ON CONFLICT: a duplicate fails with UniqueViolation instead of saying so.
PLAIN_INSERT = """\
    with connect() as conn, conn.transaction():
        conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: The same, with every database error read as "already charged".
BROAD_EXCEPT = """\
    try:
        with connect() as conn, conn.transaction():
            conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    except psycopg.Error:
        return "already charged"
    return "charged"
"""

#: The reference's body, but a lost connection (or a deadlock, a serialization failure:
#: psycopg.OperationalError) read as "already charged": a failover mid-charge ends the
#: task in SUCCESS with nothing charged, and the message is acknowledged.
OPERATIONAL_ERROR_READ_AS_DUPLICATE = """\
    try:
        with connect() as conn, conn.transaction():
            first = conn.execute(
                "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                "RETURNING key",
                (key,),
            ).fetchone()
            if first is None:
                return "already charged"
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    except psycopg.OperationalError:
        return "already charged"
    return "charged"
"""

#: The charge first, then the claim: "already charged" returns from inside the
#: transaction block, which commits the charge just made.
CHARGE_THEN_CLAIM = """\
    with connect() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
    return "charged"
"""

#: A Redis SET NX "fast path" before the transaction: a kill between the two loses the
#: charge (the redelivery finds the Redis key and skips).
REDIS_FAST_PATH = """\
    import redis

    if not redis.Redis(db=3).set(f"ex08:{SCHEMA}:{key}", 1, nx=True):
        return "already charged"
"""

#: A try-lock on a bucket of keys: a busy bucket (another copy, or another key) is read
#: as "already charged".
TRY_LOCK_SKIPS = """\
    with connect() as conn, conn.transaction():
        got = conn.execute(
            "SELECT pg_try_advisory_xact_lock(hashtext(%s) %% 64)", (key,)
        ).fetchone()[0]
        if not got:
            return "already charged"
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: Every database error turned into a return value: the task ends in SUCCESS, and a
#: charge the database refused is reported as done ("failed: ...") to nobody.
SWALLOWED_ERROR = """\
    try:
        with connect() as conn, conn.transaction():
            first = conn.execute(
                "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                "RETURNING key",
                (key,),
            ).fetchone()
            if first is None:
                return "already charged"
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    except psycopg.Error as exc:
        return f"failed: {exc}"
    return "charged"
"""

#: The charge's error caught in a nested transaction (a savepoint): the claim commits
#: alone, and the key reads "already charged" for good although nothing was charged.
SAVEPOINT_SWALLOWS_CHARGE = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
        try:
            with conn.transaction():
                conn.execute(
                    "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                    (key, customer, amount),
                )
        except psycopg.Error:
            pass
    return "charged"
"""

#: A lock_timeout "so a worker never hangs": a copy whose claim waits for another copy's
#: transaction fails and is acknowledged; if that transaction rolls back, nobody charges.
LOCK_TIMEOUT_GIVES_UP = """\
    with connect() as conn, conn.transaction():
        conn.execute("SET LOCAL lock_timeout = '100ms'")
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: SELECT ... FOR UPDATE locks no row that is not there yet: a second copy running next
#: to the first misses it too, and its plain INSERT fails with UniqueViolation once the
#: first commits (charged once, but the duplicate ends in FAILURE).
FOR_UPDATE_THEN_INSERT = """\
    with connect() as conn, conn.transaction():
        if conn.execute("SELECT 1 FROM processed WHERE key = %s FOR UPDATE", (key,)).fetchone():
            return "already charged"
        conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: Serialised by a per-key advisory lock, but the dedup record is looked up with LIKE:
#: "inv_x" (an underscore matches any character) reads "inv-x" as itself, never charged.
LIKE_UNDER_A_LOCK = """\
    with connect() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
        if conn.execute("SELECT 1 FROM processed WHERE key LIKE %s", (key,)).fetchone():
            return "already charged"
        conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: The table "kept small": only the last 1000 keys by text order stay recorded, so a late
#: copy of a key that sorts before them charges again.
TRIMMED_TO_1000_KEYS = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        conn.execute(
            "DELETE FROM processed WHERE key NOT IN "
            "(SELECT key FROM processed ORDER BY key DESC LIMIT 1000)"
        )
    return "charged"
"""

#: A session advisory lock released in a finally, before the COMMIT: a copy that comes
#: while the first commits takes the lock, reads no record yet and charges again.
UNLOCKED_BEFORE_THE_COMMIT = """\
    with connect() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
        try:
            if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
                return "already charged"
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
            conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
    return "charged"
"""

#: The charge made on a second connection, inside the claim's transaction: it commits
#: first, and a kill before the claim's COMMIT lets the redelivery charge again.
CHARGE_ON_ANOTHER_CONNECTION = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
        with connect() as other, other.transaction():
            other.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    return "charged"
"""

#: The claim deduplicated by Celery's task id: a producer's second message has an id of
#: its own, and charges again.
BY_TASK_ID = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (charge.request.id,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: One connection per pool child, opened again when the server ended its session, with
#: commit() by hand and no rollback: once the database refuses a charge, the connection
#: stays in the failed transaction and every later task of that child fails.
KEPT_CONNECTION_NO_ROLLBACK = """\
_conn = None


def shared():
    global _conn
    if _conn is None or _conn.closed:
        _conn = connect()
    return _conn


@app.task("""

KEPT_CONNECTION_NO_ROLLBACK_BODY = """\
    global _conn
    for attempt in range(2):
        conn = shared()
        try:
            first = conn.execute(
                "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                "RETURNING key",
                (key,),
            ).fetchone()
            if first is None:
                conn.commit()
                return "already charged"
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
            conn.commit()
            break
        except psycopg.OperationalError:
            _conn = None
            if attempt:
                raise
    return "charged"
"""

#: A "fast path" in memory: the key is remembered before the charge, so a key whose
#: charge the database refused reads "already charged" in that pool child for good.
SEEN_BEFORE_THE_CHARGE = """\
    if key in SEEN:
        return "already charged"
    SEEN.add(key)
"""

CONNECT_OPTIONS = 'options=f"-c search_path={SCHEMA}")'
#: The task's connections named by the task itself, which beats the workers' PGAPPNAME.
NAMED_CONNECT_OPTIONS = 'options=f"-c search_path={SCHEMA}", application_name="ex08-charges")'

#: The dedup kept in charges itself, by a unique index the module creates as it is
#: imported: no record in processed (the stated detail), but one charge per key all the
#: same.
UNIQUE_CHARGES_INDEX = """\
with connect() as _conn:
    _conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS charges_key_once ON charges (key)")


@app.task("""

UNIQUE_CHARGES_BODY = """\
    with connect() as conn, conn.transaction():
        row = conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s) "
            "ON CONFLICT (key) DO NOTHING RETURNING id",
            (key, customer, amount),
        ).fetchone()
    return "charged" if row else "already charged"
"""

#: One charge per key by a per-key lock and a look at charges, no record in processed: a
#: design of its own, held at its COMMIT by the severe check, not a duplicate.
LOCK_AND_LOOK_AT_CHARGES = """\
    with connect() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
        if conn.execute("SELECT 1 FROM charges WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: A created_at column added to processed as the module is imported, and a "retention"
#: cleanup after each charge: a copy that comes more than a week later charges again.
DATED_RECORDS = """\
with connect() as _conn:
    _conn.execute(
        "ALTER TABLE processed ADD COLUMN IF NOT EXISTS created_at TIMESTAMPTZ NOT NULL "
        "DEFAULT now()"
    )


@app.task("""

DATED_CLEANUP = """(key, customer, amount),
        )
        conn.execute("DELETE FROM processed WHERE created_at < now() - interval '7 days'")
"""

#: The same cleanup, after one charge in a hundred, at random ("it need not run often").
RANDOM_CLEANUP = """(key, customer, amount),
        )
        if random.random() < 0.01:
            conn.execute("DELETE FROM processed WHERE created_at < now() - interval '30 days'")
"""

#: processed trimmed to its newest 1000 keys (by text order), one key's DELETE at a time,
#: after one charge in a hundred: each DELETE takes one key by a parameter, the loop takes
#: every older key's record all the same.
PER_KEY_TRIM = """(key, customer, amount),
        )
        if random.random() < 0.01:
            stale = conn.execute(
                "SELECT key FROM processed ORDER BY key DESC OFFSET 1000"
            ).fetchall()
            for (old,) in stale:
                conn.execute("DELETE FROM processed WHERE key = %s", (old,))
"""

#: A duplicate "done with" its key: it deletes the key's record, so the next copy finds
#: none and charges again.
DUPLICATE_DELETES_ITS_RECORD = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            conn.execute("DELETE FROM processed WHERE key = %s", (key,))
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: A redelivered message handled on its own: charged unless charges has the key, with
#: no record in processed, so the next copy of the message charges again.
REDELIVERY_LOOKS_AT_CHARGES = """\
    if (charge.request.delivery_info or {}).get("redelivered"):
        with connect() as conn, conn.transaction():
            if conn.execute("SELECT 1 FROM charges WHERE key = %s", (key,)).fetchone():
                return "already charged"
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
        return "charged"
"""

#: A column of seconds since the epoch added to processed as the module is imported...
EPOCH_RECORDS = """\
with connect() as _conn:
    _conn.execute(
        "ALTER TABLE processed ADD COLUMN IF NOT EXISTS seen_at BIGINT NOT NULL "
        "DEFAULT extract(epoch FROM now())::bigint"
    )


@app.task("""

REFERENCE_CLAIM_SQL = (
    '"INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key"'
)
#: ... and a claim that takes a key over once its record is 30 days old ("it expires").
EXPIRING_CLAIM_SQL = """"INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO UPDATE "
            "SET seen_at = extract(epoch FROM now())::bigint WHERE processed.seen_at < "
            "extract(epoch FROM now())::bigint - 30 * 86400 RETURNING key\""""

#: The same redelivered path, which records the key, in a transaction of its own after
#: the charge's.
REDELIVERY_RECORDS_AFTER = REDELIVERY_LOOKS_AT_CHARGES.replace(
    '        return "charged"\n',
    "        with connect() as conn, conn.transaction():\n"
    '            conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", '
    "(key,))\n"
    '        return "charged"\n',
)

#: The same redelivered path, the key recorded in the charge's transaction: a redelivery
#: running while another copy waits at its COMMIT sees no charge (not committed yet),
#: charges, and its ON CONFLICT DO NOTHING then finds the key taken: charged twice.
REDELIVERY_RECORDS_WITH_THE_CHARGE = REDELIVERY_LOOKS_AT_CHARGES.replace(
    '        return "charged"\n',
    '            conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", '
    "(key,))\n"
    '        return "charged"\n',
)

#: A duplicate that rewrites the charge with its own customer and amount.
DUPLICATE_UPDATES = """\
            conn.execute(
                "UPDATE charges SET customer = %s, amount = %s WHERE key = %s",
                (customer, amount, key),
            )
            return "already charged"
"""

#: processed made UNLOGGED as the module is imported ("only a lookup, no WAL needed"):
#: PostgreSQL empties it when it restarts after a crash.
UNLOGGED_AT_IMPORT = """\
with connect() as _conn:
    _conn.execute("ALTER TABLE processed SET UNLOGGED")


@app.task("""

#: Only a unique violation was meant, but every IntegrityError (a NOT NULL refused) reads
#: as a duplicate: the task says "already charged" for a charge never made.
INTEGRITY_ERROR_AS_DUPLICATE = """\
    try:
        with connect() as conn, conn.transaction():
            conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    except psycopg.IntegrityError:
        return "already charged"
    return "charged"
"""

#: A text column with the day each record was written, ISO text that sorts as dates do...
TEXT_DAY_RECORDS = """\
with connect() as _conn:
    _conn.execute(
        "ALTER TABLE processed ADD COLUMN IF NOT EXISTS day TEXT NOT NULL "
        "DEFAULT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
    )


@app.task("""

#: ... and a claim that takes a key over once that day is 90 days past.
TEXT_DAY_CLAIM_SQL = """"INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO UPDATE "
            "SET day = EXCLUDED.day WHERE processed.day < to_char((now() - interval "
            "'90 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD') RETURNING key\""""

#: The record PostgreSQL's hashtext of the key: 32 bits, a form no list of digests has.
HASHTEXT_CLAIM_SQL = (
    '"INSERT INTO processed (key) VALUES (hashtext(%s)::text) '
    'ON CONFLICT (key) DO NOTHING RETURNING key"'
)

#: The tables created as the module is imported, as a careful student does.
TABLES_AT_IMPORT = """\
with connect() as _conn:
    _conn.execute("CREATE TABLE IF NOT EXISTS processed (key TEXT PRIMARY KEY)")
    _conn.execute(
        "CREATE TABLE IF NOT EXISTS charges (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, "
        "customer TEXT NOT NULL, amount INTEGER NOT NULL)"
    )


@app.task("""

#: The tables dropped and created again as the module is imported, "to start clean":
#: every worker's start (a deploy, a restart) forgets every key charged before it.
TABLES_RESET_AT_IMPORT = """\
with connect() as _conn:
    _conn.execute("DROP TABLE IF EXISTS processed")
    _conn.execute("CREATE TABLE processed (key TEXT PRIMARY KEY)")


@app.task("""

#: The claim's SQL with the record an md5 of the key and the database's date.
SQL_DATED_CLAIM_SQL = (
    '"INSERT INTO processed (key) VALUES (md5(%s::text || current_date)) '
    'ON CONFLICT (key) DO NOTHING RETURNING key"'
)

#: ... and with the session's local day and month's name, which libpq takes from the
#: worker's machine (PGTZ): two workers a day apart in time zones record two digests.
SQL_LOCAL_DAY_CLAIM_SQL = (
    "\"INSERT INTO processed (key) VALUES (md5(%s::text || to_char(now(), 'DDMonYY'))) "
    'ON CONFLICT (key) DO NOTHING RETURNING key"'
)

REFERENCE_CLAIM = """\
        if first is None:
            return "already charged"
"""

#: The reference's body, a database error turned into Reject(requeue=True): "a failed
#: task is acknowledged and its charge lost", so it is given back to the broker instead.
REJECT_REQUEUED = """\
    try:
        with connect() as conn, conn.transaction():
            first = conn.execute(
                "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                "RETURNING key",
                (key,),
            ).fetchone()
            if first is None:
                return "already charged"
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    except psycopg.Error as exc:
        raise Reject(exc, requeue=True)
    return "charged"
"""

#: A "poison message" limit: the deliveries of each key counted in a table of its own
#: (autocommitted, created as the module is imported), the message rejected without
#: requeue past a few. A charge whose runs were killed that often is never made.
DELIVERIES_TABLE = """\
with psycopg.connect(DSN, options=f"-c search_path={SCHEMA}", autocommit=True) as _c:
    _c.execute("CREATE TABLE IF NOT EXISTS deliveries (key TEXT PRIMARY KEY, n INT NOT NULL)")


@app.task("""
POISON_LIMIT = """\
    from celery.exceptions import Reject

    with psycopg.connect(DSN, options=f"-c search_path={SCHEMA}", autocommit=True) as c:
        (n,) = c.execute(
            "INSERT INTO deliveries VALUES (%s, 1) ON CONFLICT (key) "
            "DO UPDATE SET n = deliveries.n + 1 RETURNING n",
            (key,),
        ).fetchone()
    if n > LIMIT:
        raise Reject(f"poison message {key}: delivered {n} times", requeue=False)
"""

#: "A charge must not hang": a SIGALRM whose handler raises, armed around the charge.
#: A copy still waiting for its key when it fires fails and is acknowledged.
ALARM_AROUND_THE_CHARGE = """\
    import signal

    def _give_up(signum, frame):
        raise TimeoutError("the charge took too long")

    old = signal.signal(signal.SIGALRM, _give_up)
    signal.alarm(30)
    try:
        return _charge(key, customer, amount)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _charge(key, customer, amount):
"""

#: The same with a timer thread that cancels the running query (QueryCanceled).
TIMER_CANCELS_THE_QUERY = """\
    import threading

    with connect() as conn:
        timer = threading.Timer(30.0, conn.cancel_safe)
        timer.start()
        try:
            with conn.transaction():
                first = conn.execute(
                    "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                    "RETURNING key",
                    (key,),
                ).fetchone()
                if first is None:
                    return "already charged"
                conn.execute(
                    "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                    (key, customer, amount),
                )
        finally:
            timer.cancel()
    return "charged"
"""

#: One connection per pool child, kept; when the server ended its session the task drops
#: it and retries ten minutes later: the charge is not made while anyone waits for it.
RETRIED_LATER_BODY = """\
    global _conn
    try:
        if _conn is None or _conn.closed:
            _conn = connect()
        with _conn.transaction():
            first = _conn.execute(
                "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                "RETURNING key",
                (key,),
            ).fetchone()
            if first is None:
                return "already charged"
            _conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    except psycopg.OperationalError as exc:
        _conn = None
        raise charge.retry(exc=exc, countdown=600, max_retries=3) from exc
    return "charged"
"""

REFERENCE_CLAIM_ARGS = "            (key,),\n        ).fetchone()"
REFERENCE_CHARGE_ARGS = "(key, customer, amount),"


def _replace(old: str, new: str) -> Callable[[str], str]:
    """Replace the first ``old`` of the reference file by ``new``."""
    return lambda source: source.replace(old, new, 1)


def _both(*changes: Callable[[str], str]) -> Callable[[str], str]:
    """Each change in turn."""

    def apply(source: str) -> str:
        for change in changes:
            source = change(source)
        return source

    return apply


def _settings(text: str) -> Callable[[str], str]:
    """Replace the two settings in configure(app) by ``text``."""
    return lambda source: source.replace(REFERENCE_SETTINGS, text)


def _before_body(text: str) -> Callable[[str], str]:
    """Put ``text`` at the top of the charge task's body, before the reference's."""
    return lambda source: source.replace(REFERENCE_BODY_START, text + REFERENCE_BODY_START, 1)


def _body(text: str) -> Callable[[str], str]:
    """Replace the body of the charge task by ``text``."""

    def swap(source: str) -> str:
        start = source.index(REFERENCE_BODY_START)
        end = source.index('    return "charged"\n', start) + len('    return "charged"\n')
        return source[:start] + text + source[end:]

    return swap


def _salted(imports: str, record: str, top: str = "") -> Callable[[str], str]:
    """Record ``record`` (an expression of ``key``) in processed instead of the key, with
    ``imports`` added and ``top`` run as the module is imported (a worker's start)."""
    changes = [
        _replace("import os\n", "import os\n" + imports),
        _replace(REFERENCE_CLAIM_ARGS, REFERENCE_CLAIM_ARGS.replace("(key,)", f"({record},)")),
    ]
    if top:
        changes.append(_replace("@app.task(", top + "\n\n\n@app.task("))
    return _both(*changes)


#: Round 16: a plain INSERT whose UniqueViolation means "a duplicate", and a deadlock
#: ("another copy holds it") read the same way: a deadlock rolled the charge back, and
#: the message is acknowledged with nothing charged.
DEADLOCK_READ_AS_DUPLICATE = """\
    try:
        with connect() as conn, conn.transaction():
            conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
        return "already charged"
    return "charged"
"""

#: Round 16: SERIALIZABLE, a look in processed, then the inserts; "the other copy won"
#: read from any serialization failure, which also comes from a conflict with another key.
SERIALIZATION_FAILURE_READ_AS_DUPLICATE = """\
    try:
        with connect() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
                return "already charged"
            conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
    except psycopg.errors.SerializationFailure:
        return "already charged"
    return "charged"
"""


#: Round 29: a retry loop of the task's own on a rollback by the database that, once its
#: attempts run out, falls through: the run returns None, ends in SUCCESS, and its
#: message is acknowledged with nothing charged.
RETRY_LOOP_FALLS_THROUGH = """\
    for _attempt in range(3):
        try:
            with connect() as conn, conn.transaction():
                first = conn.execute(
                    "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING "
                    "RETURNING key",
                    (key,),
                ).fetchone()
                if first is None:
                    return "already charged"
                conn.execute(
                    "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                    (key, customer, amount),
                )
            return "charged"
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
            continue  # rolled back by PostgreSQL: try again
"""

#: Round 29: the same on any OperationalError, logged, and "failed" returned at the end.
RETRY_LOOP_RETURNS_FAILED = RETRY_LOOP_FALLS_THROUGH.replace(
    "        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):\n"
    "            continue  # rolled back by PostgreSQL: try again\n",
    "        except psycopg.OperationalError as exc:\n"
    '            print(f"charge {key} failed: {exc}")\n'
    '    return "failed"\n',
)

#: Round 29: the claim and the charge as one helper; after a rollback by the database the
#: helper runs once more on a fresh autocommit connection, where each INSERT commits by
#: itself: a kill between the two loses the charge (or, the other way round, doubles it).
CLAIM_AND_CHARGE_HELPER = """\
def _claim_and_charge(conn, key, customer, amount):
    first = conn.execute(
        "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
        (key,),
    ).fetchone()
    if first is None:
        return "already charged"
    conn.execute(
        "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
        (key, customer, amount),
    )
    return "charged"


@app.task("""
RETRIED_ON_AN_AUTOCOMMIT_CONNECTION = """\
    try:
        with connect() as conn, conn.transaction():
            return _claim_and_charge(conn, key, customer, amount)
    except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
        # Rolled back by PostgreSQL: once more, on a fresh connection.
        with psycopg.connect(DSN, options=f"-c search_path={SCHEMA}", autocommit=True) as conn:
            return _claim_and_charge(conn, key, customer, amount)
    return "charged"
"""

#: Round 29: the same on a deadlock alone (the error a READ COMMITTED task expects).
DEADLOCK_RETRIED_ON_AN_AUTOCOMMIT_CONNECTION = RETRIED_ON_AN_AUTOCOMMIT_CONNECTION.replace(
    "    except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):\n",
    "    except psycopg.errors.DeadlockDetected:\n",
)

#: Round 29: a credit note (a negative amount) on a path of its own: a look in
#: processed, the refund, then the record, each autocommitted. The charges the checks
#: kill are never credits.
CREDIT_ON_A_PATH_OF_ITS_OWN = """\
    if amount < 0:
        # A credit note: refund first, then remember it.
        with psycopg.connect(DSN, options=f"-c search_path={SCHEMA}", autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
                return "already charged"
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
            conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
        return "charged"
"""

#: Round 29: a lock per customer ("never charge one customer twice at once"), then a look
#: in processed and the record written after the charge: two copies of one key that
#: name the customer differently take two locks, and both charge.
LOCK_PER_CUSTOMER = """\
    with connect() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (customer,))
        if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
        conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
    return "charged"
"""


#: Round 30: the claim as an INSERT ... SELECT guarded by NOT EXISTS, no ON CONFLICT.
INSERT_WHERE_NOT_EXISTS = """\
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) SELECT %(k)s "
            "WHERE NOT EXISTS (SELECT 1 FROM processed WHERE key = %(k)s) RETURNING key",
            {"k": key},
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""

#: Round 30: the whole of processed locked in a table lock mode, then a look for the key
#: and a plain INSERT: SHARE ROW EXCLUSIVE conflicts with itself, one copy at a time looks.
TABLE_LOCK_THEN_INSERT = """\
    with connect() as conn, conn.transaction():
        conn.execute("LOCK TABLE processed IN {mode} MODE")
        if conn.execute("SELECT 1 FROM processed WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute("INSERT INTO processed (key) VALUES (%s)", (key,))
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""


#: A right claim told otherwise: the key inserted with ON CONFLICT DO NOTHING (a copy
#: waits at it while the first holds the key), the duplicate told by a committed charge.
CLAIM_THEN_LOOK_AT_CHARGES = """\
    with connect() as conn, conn.transaction():
        conn.execute("INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
        if conn.execute("SELECT 1 FROM charges WHERE key = %s", (key,)).fetchone():
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
"""


ZOO = [
    # (name, how the reference file is changed, the check that must fail, what its
    # feedback must say, a check the mistake does not touch, which must pass)
    (
        "acks_late without reject_on_worker_lost",
        _settings("    app.conf.task_acks_late = True\n"),
        "worker_killed_before_the_charge",
        "SIGKILLed before charging",
        "worker_killed_after_the_commit",
    ),
    (
        "Celery's defaults (acknowledged before the task runs)",
        _settings("    pass\n"),
        "whole_worker_killed_before_the_charge",
        "whole worker was SIGKILLed",
        "worker_starts_and_charges_once",
    ),
    (
        "no dedup record",
        _body(NO_DEDUP),
        "worker_killed_after_the_commit",
        "once the charge had committed",
        "worker_killed_before_the_charge",
    ),
    (
        "dedup record in its own transaction, after the charge",
        _body(TWO_TRANSACTIONS),
        "dedup_commits_with_the_charge",
        "while the task wrote its dedup record",
        "worker_killed_after_the_commit",
    ),
    (
        # The hint must blame the task, not the ack settings, which are right here.
        "skips every redelivered message",
        _before_body(SKIPS_REDELIVERIES),
        "worker_killed_before_the_charge",
        "SIGKILLed before charging",
        "worker_starts_and_charges_once",
    ),
    (
        "dedup record committed first, in a transaction of its own",
        _body(DEDUP_COMMITTED_FIRST),
        "killed_right_after_each_commit",
        "right after your COMMIT at line",
        "worker_killed_after_the_commit",
    ),
    (
        "dedup record autocommitted before the charge",
        _body(DEDUP_AUTOCOMMITTED_FIRST),
        "killed_right_after_each_commit",
        "right after your autocommitted INSERT at line",
        "worker_killed_after_the_commit",
    ),
    (
        "dedup read with a SELECT, written after the charge (two copies at once)",
        _body(SELECT_THEN_INSERT),
        "two_deliveries_at_once_charge_once",
        "two copies of one message ran at the same time",
        "duplicate_message_charges_once",
    ),
    (
        "dedup by customer instead of by key",
        _body(DEDUP_BY_CUSTOMER),
        "two_invoices_two_charges",
        "each of two keys",
        "worker_killed_after_the_commit",
    ),
    (
        "advisory lock keyed by hash(key), SELECT then insert (two workers at once)",
        _body(HASH_ADVISORY_LOCK),
        "two_workers_at_once_charge_once",
        "at the same time on two workers",
        "two_deliveries_at_once_charge_once",
    ),
    (
        "a multiprocessing lock made at import, SELECT then insert",
        _both(
            _replace("import os\n", "import multiprocessing\nimport os\n"),
            _replace("@app.task(", "LOCK = multiprocessing.Lock()\n\n\n@app.task("),
            _body(MP_LOCK_BODY),
        ),
        "two_workers_at_once_charge_once",
        "at the same time on two workers",
        "worker_starts_and_charges_once",
    ),
    (
        "SQL built with f-strings (a key with a quote)",
        _body(F_STRING_SQL),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record lowercased",
        _replace(REFERENCE_CLAIM_ARGS, REFERENCE_CLAIM_ARGS.replace("(key,)", "(key.lower(),)")),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "duplicate_message_charges_once",
    ),
    (
        "the dedup record cut to 12 characters",
        _replace(REFERENCE_CLAIM_ARGS, REFERENCE_CLAIM_ARGS.replace("(key,)", "(key[:12],)")),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # "inv-x" and "inv-x " are two invoices: the second is never charged.
        "the dedup record stripped of surrounding spaces",
        _replace(REFERENCE_CLAIM_ARGS, REFERENCE_CLAIM_ARGS.replace("(key,)", "(key.strip(),)")),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # Two 300-character keys that differ only in their last character meet.
        "the dedup record cut to 64 characters",
        _replace(REFERENCE_CLAIM_ARGS, REFERENCE_CLAIM_ARGS.replace("(key,)", "(key[:64],)")),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "duplicate_message_charges_once",
    ),
    (
        "the amount stored in whole units, not cents",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer, amount // 100),"),
        "worker_starts_and_charges_once",
        "customer and amount",
        "duplicate_message_charges_once",
    ),
    (
        "the key stored as the customer",
        _replace(REFERENCE_CHARGE_ARGS, "(key, key, amount),"),
        "worker_starts_and_charges_once",
        "customer and amount",
        "duplicate_message_charges_once",
    ),
    (
        "one connection per pool child, kept across tasks",
        _both(
            _replace("@app.task(", CACHED_CONNECTION),
            _replace(REFERENCE_BODY_START, "    conn = shared()\n    with conn.transaction():\n"),
        ),
        "charges_after_its_database_session_ended",
        "ended the worker's sessions",
        "worker_killed_after_the_commit",
    ),
    (
        "one connection opened at import, shared by the pool children",
        _both(
            _replace("@app.task(", "CONN = connect()\n\n\n@app.task("),
            _replace(REFERENCE_BODY_START, "    conn = CONN\n    with conn.transaction():\n"),
        ),
        "charges_after_its_database_session_ended",
        "ended the worker's sessions",
        "worker_starts_and_charges_once",
    ),
    (
        "no ON CONFLICT: a duplicate fails with UniqueViolation",
        _body(PLAIN_INSERT),
        "a_copy_alongside_the_first_says_already_charged",
        "'already charged'",
        "duplicate_message_charges_once",
    ),
    (
        "always returns 'charged'",
        _replace('            return "already charged"\n', '            return "charged"\n'),
        "a_copy_alongside_the_first_says_already_charged",
        "'already charged'",
        "worker_killed_after_the_commit",
    ),
    (
        "every database error read as 'already charged'",
        _body(BROAD_EXCEPT),
        "replies_charged_or_already_charged",
        "a charge the database refused",
        "duplicate_message_charges_once",
    ),
    (
        "a lost connection (psycopg.OperationalError) read as 'already charged'",
        _body(OPERATIONAL_ERROR_READ_AS_DUPLICATE),
        "replies_charged_or_already_charged",
        "whose database session the server ended",
        "duplicate_message_charges_once",
    ),
    (
        "every database error returned as a value: the task ends in SUCCESS",
        _body(SWALLOWED_ERROR),
        "replies_charged_or_already_charged",
        "a charge the database refused",
        "duplicate_message_charges_once",
    ),
    (
        "the charge before the claim; 'already charged' commits it",
        _body(CHARGE_THEN_CLAIM),
        "duplicate_message_charges_once",
        "a key sent twice",
        "worker_starts_and_charges_once",
    ),
    (
        "the dedup record keyed by the hour",
        _both(
            _replace("import os\n", "import os\nimport time\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}@{int(time.time()) // 3600}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        "a Redis SET NX before the transaction",
        _before_body(REDIS_FAST_PATH),
        "dedup_commits_with_the_charge",
        "while the task wrote its dedup record",
        "worker_killed_after_the_commit",
    ),
    (
        # A refused charge (or any error on its INSERT) leaves the key recorded, uncharged.
        "the charge's error caught in a savepoint: the claim commits alone",
        _body(SAVEPOINT_SWALLOWS_CHARGE),
        "dedup_commits_with_the_charge",
        "no dedup record for a key whose charge the database refused",
        "worker_killed_after_the_commit",
    ),
    (
        "a lock_timeout on the claim: a copy that waits gives up and is acknowledged",
        _body(LOCK_TIMEOUT_GIVES_UP),
        "dedup_commits_with_the_charge",
        "to wait while another transaction holds its key",
        "worker_killed_after_the_commit",
    ),
    (
        # Customer ids are case-sensitive: "cus_Q123456x" is not "cus_q123456x".
        "the customer id lower-cased in the charge row",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer.strip().lower(), amount),"),
        "worker_starts_and_charges_once",
        "customer and amount",
        "duplicate_message_charges_once",
    ),
    (
        # Longer than the check's half-second hold, so the task still waits then: the
        # trigger the check puts on processed reads the setting the claim ran under.
        "a lock_timeout of 5 s on the claim",
        _replace(
            REFERENCE_BODY_START,
            REFERENCE_BODY_START + "        conn.execute(\"SET LOCAL lock_timeout = '5s'\")\n",
        ),
        "dedup_commits_with_the_charge",
        "to wait while another transaction holds its key",
        "worker_killed_after_the_commit",
    ),
    (
        "a statement_timeout on every connection, so a worker never hangs",
        _replace(
            'options=f"-c search_path={SCHEMA}")',
            'options=f"-c search_path={SCHEMA} -c statement_timeout=10s")',
        ),
        "dedup_commits_with_the_charge",
        "to wait while another transaction holds its key",
        "worker_killed_after_the_commit",
    ),
    (
        # Celery ignores a setting it does not know, without a word.
        "acks_late set under a name Celery does not read (app.conf.acks_late)",
        _settings(
            "    app.conf.acks_late = True\n    app.conf.task_reject_on_worker_lost = True\n"
        ),
        "worker_killed_before_the_charge",
        "SIGKILLed before charging",
        "worker_starts_and_charges_once",
    ),
    (
        # "Faster commits": COMMIT returns before the WAL is on disk, the task is
        # acknowledged, and a PostgreSQL crash a moment later loses the charge.
        "SET LOCAL synchronous_commit = off in the charge's transaction",
        _replace(
            REFERENCE_BODY_START,
            REFERENCE_BODY_START + '        conn.execute("SET LOCAL synchronous_commit = off")\n',
        ),
        "dedup_commits_with_the_charge",
        "on disk when the task's COMMIT returns",
        "worker_killed_after_the_commit",
    ),
    (
        # The same, set after the inserts: what matters is the setting the COMMIT runs under.
        "synchronous_commit = off set just before the COMMIT",
        _replace(
            REFERENCE_CHARGE_ARGS + "\n        )\n",
            REFERENCE_CHARGE_ARGS
            + "\n        )\n"
            + '        conn.execute("SET LOCAL synchronous_commit = off")\n',
        ),
        "dedup_commits_with_the_charge",
        "on disk when the task's COMMIT returns",
        "worker_killed_after_the_commit",
    ),
    (
        # The same key with another customer charges again.
        "the dedup record is customer:key, not the key",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{customer}:{key}",)'),
        ),
        "duplicate_message_charges_once",
        "with another customer and amount",
        "dedup_commits_with_the_charge",
    ),
    (
        # The same key with another amount charges again.
        "the dedup record is key:amount, not the key",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}:{amount}",)'),
        ),
        "duplicate_message_charges_once",
        "with another customer and amount",
        "worker_killed_after_the_commit",
    ),
    (
        # One record per key all the same, claimed by the same INSERT: the dedup holds (the
        # severe checks take the record's name from the task), and only the stated detail
        # is wrong: whoever looks the key up in processed does not find it.
        "the dedup record prefixed 'charge:'",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace("(key,)", '("charge:" + key,)'),
        ),
        "a_copy_alongside_the_first_says_already_charged",
        "recorded in processed as it came",
        "dedup_commits_with_the_charge",
    ),
    (
        "the dedup record a SHA-256 digest of the key",
        _both(
            _replace("import os\n", "import hashlib\nimport os\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)", "(hashlib.sha256(key.encode()).hexdigest(),)"
                ),
            ),
        ),
        "a_copy_alongside_the_first_says_already_charged",
        "recorded in processed as it came",
        "dedup_commits_with_the_charge",
    ),
    (
        "processed cleaned of records older than 7 days (a created_at column of its own)",
        _both(
            _replace("@app.task(", DATED_RECORDS),
            _replace(REFERENCE_CHARGE_ARGS + "\n        )\n", DATED_CLEANUP),
        ),
        "late_copies_after_many_charges_charge_once",
        "each sent again once all of them were charged",
        "worker_killed_after_the_commit",
    ),
    (
        # The same: one charge per key, only not recorded where the docstring says.
        "a unique index on charges instead of a record in processed",
        _both(_replace("@app.task(", UNIQUE_CHARGES_INDEX), _body(UNIQUE_CHARGES_BODY)),
        "a_copy_alongside_the_first_says_already_charged",
        "recorded in processed as it came",
        "dedup_commits_with_the_charge",
    ),
    (
        "a per-key advisory lock and a look at charges instead of a record in processed",
        _body(LOCK_AND_LOOK_AT_CHARGES),
        "a_copy_alongside_the_first_says_already_charged",
        "recorded in processed as it came",
        "dedup_commits_with_the_charge",
    ),
    (
        # A copy sent the next day finds no record: the date is the time the task ran.
        "the dedup record keyed by the day (date.today())",
        _both(
            _replace("import os\n", "import os\nfrom datetime import date\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}/{date.today().isoformat()}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        "SELECT ... FOR UPDATE, then a plain INSERT into processed",
        _body(FOR_UPDATE_THEN_INSERT),
        "a_copy_alongside_the_first_says_already_charged",
        "'already charged'",
        "two_deliveries_at_once_charge_once",
    ),
    (
        "a duplicate raises celery's Ignore instead of returning 'already charged'",
        _replace(
            '            return "already charged"\n',
            "            from celery.exceptions import Ignore\n\n            raise Ignore()\n",
        ),
        "a_copy_alongside_the_first_says_already_charged",
        "'already charged'",
        "duplicate_message_charges_once",
    ),
    (
        # 2**40 cents charged as 2**31 - 1: a charge nobody asked for, reported as done.
        "an amount beyond INTEGER clamped to its maximum",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer, min(amount, 2**31 - 1)),"),
        "replies_charged_or_already_charged",
        "a charge the database refused",
        "duplicate_message_charges_once",
    ),
    (
        "a busy try-lock read as 'already charged'",
        _body(TRY_LOCK_SKIPS),
        "two_deliveries_at_once_charge_once",
        "on two pool children",
        "worker_starts_and_charges_once",
    ),
    (
        # Stack Overflow's "make RETURNING return the row on a conflict": it always does,
        # so a duplicate reads as a first delivery and charges again.
        "ON CONFLICT DO UPDATE SET key = EXCLUDED.key RETURNING key",
        _replace(
            '"INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key"',
            '"INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO UPDATE SET key = '
            'EXCLUDED.key RETURNING key"',
        ),
        "duplicate_message_charges_once",
        "1 charge row for a key sent twice",
        "worker_killed_before_the_charge",
    ),
    (
        # The task options' names (acks_late=...) given to app.conf, which takes any name
        # and ignores the ones it does not know.
        "app.conf.update(acks_late=True, reject_on_worker_lost=True)",
        _settings("    app.conf.update(acks_late=True, reject_on_worker_lost=True)\n"),
        "worker_killed_before_the_charge",
        "SIGKILLed before charging",
        "worker_starts_and_charges_once",
    ),
    (
        # "A stuck charge must not hold the worker for ever": Celery stops a copy that
        # waits for its key, and acknowledges the failure.
        "a task_time_limit on the charge",
        _settings(
            "    app.conf.task_acks_late = True\n"
            "    app.conf.task_reject_on_worker_lost = True\n"
            "    app.conf.task_time_limit = 5\n"
        ),
        "charge_may_wait_without_a_time_limit",
        "without a time limit",
        "worker_starts_and_charges_once",
    ),
    (
        # "A charge not started within 10 minutes is stale": the worker drops a late
        # message unrun (revoked), and a charge sent before an outage is never made.
        "the charge declared with expires=600",
        _replace('@app.task(name="ex08.charge")', '@app.task(name="ex08.charge", expires=600)'),
        "charge_may_wait_without_a_time_limit",
        "to never expire",
        "worker_starts_and_charges_once",
    ),
    (
        # "inv_x" after "inv-x": LIKE's underscore matches the hyphen.
        "the dedup record looked up with LIKE (under a per-key lock)",
        _body(LIKE_UNDER_A_LOCK),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # "ção" and "cao" become one key: the second invoice is never charged.
        "the dedup record stripped of its accents (NFKD, then ASCII)",
        _both(
            _replace("import os\n", "import os\nimport unicodedata\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)",
                    "(unicodedata.normalize('NFKD', key).encode('ascii', 'ignore').decode(),)",
                ),
            ),
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "duplicate_message_charges_once",
    ),
    (
        # The claim waits as long as it takes; the charge after it gives up after 5 s.
        "a lock_timeout set after the claim, around the charge",
        _replace(
            REFERENCE_CLAIM,
            REFERENCE_CLAIM + "        conn.execute(\"SET LOCAL lock_timeout = '5s'\")\n",
        ),
        "dedup_commits_with_the_charge",
        "the charge's INSERT to wait for a lock",
        "worker_killed_after_the_commit",
    ),
    (
        "a session statement_timeout set after the claim",
        _replace(
            REFERENCE_CLAIM,
            REFERENCE_CLAIM + "        conn.execute(\"SET statement_timeout = '5s'\")\n",
        ),
        "dedup_commits_with_the_charge",
        "the charge's INSERT to wait for a lock",
        "duplicate_message_charges_once",
    ),
    (
        "processed trimmed to the last 1000 keys (by text order)",
        _body(TRIMMED_TO_1000_KEYS),
        "late_copies_after_many_charges_charge_once",
        "each sent again once all of them were charged",
        "worker_killed_after_the_commit",
    ),
    (
        "a session advisory lock released in a finally, before the COMMIT",
        _body(UNLOCKED_BEFORE_THE_COMMIT),
        "a_copy_during_the_commit_charges_once",
        "while the first copy was committing",
        "worker_starts_and_charges_once",
    ),
    (
        # Two runs of different keys, each holding its claim, wait for each other's.
        "LOCK TABLE processed IN SHARE MODE after the claim",
        _replace(
            REFERENCE_CLAIM,
            REFERENCE_CLAIM + '        conn.execute("LOCK TABLE processed IN SHARE MODE")\n',
        ),
        "two_keys_at_once_both_charge",
        "each of two keys charged at the same time",
        "duplicate_message_charges_once",
    ),
    (
        # Two runs that both took the SHARE lock before either claims: each one's INSERT
        # waits for the other's lock, a deadlock, and the failed run's charge is lost.
        "LOCK TABLE processed IN SHARE MODE before the claim",
        _replace(
            REFERENCE_BODY_START,
            REFERENCE_BODY_START + '        conn.execute("LOCK TABLE processed IN SHARE MODE")\n',
        ),
        "two_keys_at_once_both_charge",
        "each of two keys charged at the same time",
        "duplicate_message_charges_once",
    ),
    (
        # The same deadlock on the other table: both runs share the lock on charges,
        # then each one's INSERT into charges waits for the other's.
        "LOCK TABLE charges IN SHARE MODE after the claim",
        _replace(
            REFERENCE_CLAIM,
            REFERENCE_CLAIM + '        conn.execute("LOCK TABLE charges IN SHARE MODE")\n',
        ),
        "two_keys_at_once_both_charge",
        "each of two keys charged at the same time",
        "duplicate_message_charges_once",
    ),
    (
        "LOCK TABLE processed IN SHARE MODE, then a look and a plain INSERT",
        _body(TABLE_LOCK_THEN_INSERT.format(mode="SHARE")),
        "two_keys_at_once_both_charge",
        "each of two keys charged at the same time",
        "duplicate_message_charges_once",
    ),
    (
        "the charge on a second connection, committed before the claim",
        _body(CHARGE_ON_ANOTHER_CONNECTION),
        "killed_right_after_each_commit",
        "right after your COMMIT at line",
        "duplicate_message_charges_once",
    ),
    (
        # A raw COMMIT ends the transaction the claim is in; the charge commits on its own.
        "a raw COMMIT statement after the claim",
        _replace(REFERENCE_CLAIM, REFERENCE_CLAIM + '        conn.execute("COMMIT")\n'),
        "killed_right_after_each_commit",
        "right after your COMMIT at line",
        "worker_starts_and_charges_once",
    ),
    (
        "the dedup record keyed by Celery's task id (a producer retry has a new one)",
        _body(BY_TASK_ID),
        "duplicate_message_charges_once",
        "1 charge row for a key sent twice",
        "worker_killed_after_the_commit",
    ),
    (
        # "cus_joão_o'hara" charged as "cus_joao_o'hara": someone else's customer id.
        "the customer id stripped of its accents (NFKD, then ASCII)",
        _both(
            _replace("import os\n", "import os\nimport unicodedata\n"),
            _replace(
                REFERENCE_CHARGE_ARGS,
                "(key, unicodedata.normalize('NFKD', customer).encode('ascii', 'ignore')"
                ".decode(), amount),",
            ),
        ),
        "two_invoices_two_charges",
        "to hold the message's customer and amount",
        "worker_killed_after_the_commit",
    ),
    (
        # A failed task is not acknowledged... but a dead pool child's is thrown away.
        "task_acks_on_failure_or_timeout = False instead of task_reject_on_worker_lost",
        _settings(
            "    app.conf.task_acks_late = True\n"
            "    app.conf.task_acks_on_failure_or_timeout = False\n"
        ),
        "worker_killed_before_the_charge",
        "SIGKILLed before charging",
        "worker_starts_and_charges_once",
    ),
    (
        # "ﬁ１" and "fi1" are two invoices: the second is never charged.
        "the dedup record NFKC-normalised",
        _both(
            _replace("import os\n", "import os\nimport unicodedata\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", "(unicodedata.normalize('NFKC', key),)"),
            ),
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # "cus_same " is not "cus_same": a customer id is an opaque string.
        "the customer id stripped of surrounding spaces",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer.strip(), amount),"),
        "two_invoices_two_charges",
        "to hold the message's customer and amount",
        "worker_killed_after_the_commit",
    ),
    (
        # "cus_\ufb01\uff11" (a ligature, a full-width digit) is not "cus_fi1".
        "the customer id NFKC-normalised",
        _both(
            _replace("import os\n", "import os\nimport unicodedata\n"),
            _replace(
                REFERENCE_CHARGE_ARGS, "(key, unicodedata.normalize('NFKC', customer), amount),"
            ),
        ),
        "two_invoices_two_charges",
        "to hold the message's customer and amount",
        "worker_killed_after_the_commit",
    ),
    (
        # "cus_cafe\u0301" (e and a combining accent) is not "cus_caf\u00e9".
        "the customer id NFC-normalised",
        _both(
            _replace("import os\n", "import os\nimport unicodedata\n"),
            _replace(
                REFERENCE_CHARGE_ARGS, "(key, unicodedata.normalize('NFC', customer), amount),"
            ),
        ),
        "two_invoices_two_charges",
        "to hold the message's customer and amount",
        "worker_killed_after_the_commit",
    ),
    (
        "a kept connection, reconnected when closed, committed by hand, never rolled back",
        _both(
            _replace("@app.task(", KEPT_CONNECTION_NO_ROLLBACK),
            _body(KEPT_CONNECTION_NO_ROLLBACK_BODY),
        ),
        "dedup_commits_with_the_charge",
        "sent again with an amount that fits",
        "worker_killed_after_the_commit",
    ),
    (
        "the key remembered in memory before the charge",
        _both(
            _replace("@app.task(", "SEEN = set()\n\n\n@app.task("),
            _before_body(SEEN_BEFORE_THE_CHARGE),
        ),
        "dedup_commits_with_the_charge",
        "sent again with an amount that fits",
        "worker_killed_after_the_commit",
    ),
    (
        # application_name beats the workers' PGAPPNAME: the check finds the session by
        # the charge it wrote.
        "one connection per pool child, kept, under an application_name of its own",
        _both(
            _replace(CONNECT_OPTIONS, NAMED_CONNECT_OPTIONS),
            _replace("@app.task(", CACHED_CONNECTION),
            _replace(REFERENCE_BODY_START, "    conn = shared()\n    with conn.transaction():\n"),
        ),
        "charges_after_its_database_session_ended",
        "ended the worker's sessions",
        "worker_killed_after_the_commit",
    ),
    (
        # Two digits, not a date: a copy redelivered in another hour charges again.
        "the dedup record keyed by the hour of the day (UTC)",
        _both(
            _replace("import os\n", "import os\nimport time\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}-{time.gmtime().tm_hour:02d}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # A copy redelivered the next day charges again.
        "the dedup record keyed by the day of the month",
        _both(
            _replace("import os\n", "import os\nfrom datetime import datetime\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}:{datetime.now().day}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # A copy that another machine's worker runs finds no record.
        "the dedup record prefixed with the host name",
        _both(
            _replace("import os\n", "import os\nimport socket\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{socket.gethostname()}:{key}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # 16 bits: two keys among a few hundred share a record, and the second is never
        # charged.
        "the dedup record a 4-character md5 digest of the key",
        _both(
            _replace("import os\n", "import hashlib\nimport os\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)", "(hashlib.md5(key.encode()).hexdigest()[:4],)"
                ),
            ),
        ),
        "two_invoices_two_charges",
        "two keys whose",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record a crc32 of the key",
        _both(
            _replace("import os\n", "import os\nimport zlib\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", "(str(zlib.crc32(key.encode())),)"),
            ),
        ),
        "two_invoices_two_charges",
        "two keys whose",
        "duplicate_message_charges_once",
    ),
    (
        # 24 bits of a digest of the key behind the schema's name: a few thousand keys
        # share one.
        "the dedup record 6 characters of an md5 of schema:key",
        _both(
            _replace("import os\n", "import hashlib\nimport os\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)", '(hashlib.md5(f"{SCHEMA}:{key}".encode()).hexdigest()[:6],)'
                ),
            ),
        ),
        "two_invoices_two_charges",
        "two keys whose",
        "worker_killed_after_the_commit",
    ),
    (
        # A bucket of 6 hours since the epoch: a copy redelivered in the next one charges.
        "the dedup record keyed by a 6-hour bucket of time.time()",
        _both(
            _replace("import os\n", "import os\nimport time\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}:{int(time.time()) // 21600}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record keyed by the month's name",
        _both(
            _replace("import os\n", "import os\nfrom datetime import date\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}-{date.today():%b}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "duplicate_message_charges_once",
    ),
    (
        "skips a redelivered message when its customer was charged before",
        _before_body(SKIPS_REDELIVERIES_OF_KNOWN_CUSTOMERS),
        "worker_killed_before_the_charge",
        "SIGKILLed before charging",
        "worker_starts_and_charges_once",
    ),
    (
        # 48 bits: too wide for the check to find two keys that share it, too narrow for
        # the millions of invoices a shop charges over the years.
        "the dedup record a 12-character md5 digest of the key",
        _both(
            _replace("import os\n", "import hashlib\nimport os\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)", "(hashlib.md5(key.encode()).hexdigest()[:12],)"
                ),
            ),
        ),
        "two_invoices_two_charges",
        "a digest of it of 64 bits or more",
        "worker_killed_after_the_commit",
    ),
    (
        # The digest inside a word of the record, not between separators.
        "the dedup record 'h' and 6 characters of an md5 of the key",
        _both(
            _replace("import os\n", "import hashlib\nimport os\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)", '("h" + hashlib.md5(key.encode()).hexdigest()[:6],)'
                ),
            ),
        ),
        "two_invoices_two_charges",
        "two keys whose",
        "duplicate_message_charges_once",
    ),
    (
        "the dedup record a crc32 of the key in hex after '0x'",
        _both(
            _replace("import os\n", "import os\nimport zlib\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"0x{zlib.crc32(key.encode()):08x}",)'),
            ),
        ),
        "two_invoices_two_charges",
        "two keys whose",
        "worker_killed_after_the_commit",
    ),
    (
        # 48 bits in base64, whose letters' case counts.
        "the dedup record 8 base64 characters of a sha256 of the key",
        _both(
            _replace("import os\n", "import base64\nimport hashlib\nimport os\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)",
                    "(base64.urlsafe_b64encode(hashlib.sha256(key.encode()).digest())[:8]"
                    ".decode(),)",
                ),
            ),
        ),
        "two_invoices_two_charges",
        "a digest of it of 64 bits or more",
        "worker_killed_after_the_commit",
    ),
    (
        # One charge in a hundred cleans up: the check's few charges seldom meet it.
        "processed cleaned of records older than 30 days, at random after 1 charge in 100",
        _both(
            _replace("import os\n", "import os\nimport random\n"),
            _replace("@app.task(", DATED_RECORDS),
            _replace(REFERENCE_CHARGE_ARGS + "\n        )\n", RANDOM_CLEANUP),
        ),
        "late_copies_after_many_charges_charge_once",
        # The cleanup runs at random in the worker (its own unseeded random): when it
        # runs while the check looks, the late copies charge again and say it first.
        ("kept in processed for good", "each sent again once all of them were charged"),
        "worker_killed_after_the_commit",
    ),
    (
        # Round 15: the third copy of a key charges again (a per-key DELETE, which the
        # module's SQL check let through as one key's record).
        "a duplicate deletes its key's record from processed",
        _body(DUPLICATE_DELETES_ITS_RECORD),
        "duplicate_message_charges_once",
        "sent a third time",
        "worker_killed_before_the_charge",
    ),
    (
        # Round 15: one DELETE per key, by a parameter, over every key but the newest
        # 1000, after one charge in a hundred: a trim all the same.
        "processed trimmed to its newest 1000 keys one DELETE at a time, after 1 charge in 100",
        _both(
            _replace("import os\n", "import os\nimport random\n"),
            _replace(REFERENCE_CHARGE_ARGS + "\n        )\n", PER_KEY_TRIM),
        ),
        "late_copies_after_many_charges_charge_once",
        ("kept in processed for good", "each sent again once all of them were charged"),
        "worker_killed_after_the_commit",
    ),
    (
        # 261205: the date with a two-digit year; the copy sent tomorrow charges again.
        "the dedup record keyed by the date as %y%m%d",
        _both(
            _replace("import os\n", "import os\nfrom datetime import date\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}:{date.today():%y%m%d}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record keyed by the year and month as %y%m",
        _both(
            _replace("import os\n", "import os\nfrom datetime import date\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}@{date.today():%y%m}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "duplicate_message_charges_once",
    ),
    (
        "the dedup record keyed by the year and the day of the year (%Y%j)",
        _both(
            _replace("import os\n", "import os\nimport time\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", "(key + '-' + time.strftime('%Y%j'),)"),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # "inv-x-€" and "inv-x-£" both become "inv-x-?": the second is never charged.
        "the dedup record encoded to ASCII, non-ASCII characters replaced",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace("(key,)", "(key.encode('ascii', 'replace').decode(),)"),
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # Round 15: "inv-x-€", "inv-x-₹" and "inv-x-₽" all become "inv-x-?": two of the
        # three invoices are never charged.
        "the dedup record encoded to Latin-1, other characters replaced",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace(
                "(key,)", "(key.encode('latin-1', 'replace').decode('latin-1'),)"
            ),
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # Round 15: Windows-1252 has "€", not "₹" or "₽": those two meet as "inv-x-?".
        "the dedup record encoded to Windows-1252, other characters replaced",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace(
                "(key,)", "(key.encode('cp1252', 'replace').decode('cp1252'),)"
            ),
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # Two long keys that differ only in their first character meet.
        "the dedup record the key's last 64 characters",
        _replace(REFERENCE_CLAIM_ARGS, REFERENCE_CLAIM_ARGS.replace("(key,)", "(key[-64:],)")),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "duplicate_message_charges_once",
    ),
    (
        # Buckets of 1000 s (about 17 minutes) since the epoch: a copy redelivered in the
        # next one charges again.
        "the dedup record keyed by time.time() // 1000",
        _both(
            _replace("import os\n", "import os\nimport time\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}:{int(time.time() // 1000)}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # "A redelivery may have been charged by the run that died": it looks in charges
        # instead of claiming its key, so a copy sent after it charges again.
        "a redelivered message checked against charges, its key never recorded",
        _before_body(REDELIVERY_LOOKS_AT_CHARGES),
        "dedup_commits_with_the_charge",
        "a copy of the message came later",
        "worker_killed_after_the_commit",
    ),
    (
        # The record's age kept as a number of seconds, not a timestamp: a claim that
        # takes over a record older than 30 days lets a late copy charge again.
        "a claim that takes over records older than 30 days, kept as epoch seconds",
        _both(
            _replace("@app.task(", EPOCH_RECORDS), _replace(REFERENCE_CLAIM_SQL, EXPIRING_CLAIM_SQL)
        ),
        "late_copies_after_many_charges_charge_once",
        "each sent again once all of them were charged",
        "worker_killed_after_the_commit",
    ),
    (
        # "Sanitised" against SQL injection: "inv-x-o'neil" and "inv-x-oneil" meet.
        "the dedup record with its quotes taken out",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace("(key,)", '(key.replace("\'", ""),)'),
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # Its own path again, now recording the key, but in a transaction after the
        # charge's: a redelivery killed between the two leaves the key unrecorded.
        "a redelivered message checked against charges, its key recorded after the charge",
        _before_body(REDELIVERY_RECORDS_AFTER),
        "dedup_commits_with_the_charge",
        "of its redelivery",
        "worker_killed_after_the_commit",
    ),
    (
        # socket.getfqdn() is not gethostname(): "localhost" in a container, a domain
        # name elsewhere; a copy that another machine runs finds no record all the same.
        "the dedup record prefixed with the host's fully qualified name",
        _both(
            _replace("import os\n", "import os\nimport socket\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{socket.getfqdn()}:{key}",)'),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # "Idempotency keys last a day": the date hides in the digest, and a copy
        # redelivered tomorrow (a producer's retry, a worker down overnight) charges again.
        "the dedup record a sha256 of the key salted with today's date",
        _both(
            _replace("import os\n", "import hashlib\nimport os\nfrom datetime import date\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)", '(hashlib.sha256(f"{key}:{date.today()}".encode()).hexdigest(),)'
                ),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record an md5 of the UTC date (%Y%m%d) and the key",
        _both(
            _replace("import os\n", "import hashlib\nimport os\nimport time\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)",
                    "(hashlib.md5((time.strftime('%Y%m%d', time.gmtime()) + key).encode())"
                    ".hexdigest(),)",
                ),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "duplicate_message_charges_once",
    ),
    (
        "the dedup record a uuid5 of the key and the date",
        _both(
            _replace("import os\n", "import os\nimport uuid\nfrom datetime import date\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)",
                    '(str(uuid.uuid5(uuid.NAMESPACE_URL, f"{key}@{date.today().isoformat()}")),)',
                ),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # The date taken in SQL, where the module's Python shows none.
        "the dedup record md5(key || current_date) computed in SQL",
        _replace(REFERENCE_CLAIM_SQL, SQL_DATED_CLAIM_SQL),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # A day bucket since the epoch, in UTC: the same on every machine, and still a new
        # record for a copy that comes after midnight.
        "the dedup record a sha1 of the key and the day number time.time() // 86400",
        _both(
            _replace("import os\n", "import hashlib\nimport os\nimport time\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)",
                    '(hashlib.sha1(f"{key}|{int(time.time() // 86400)}".encode()).hexdigest(),)',
                ),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # The key between a prefix of the module's and the date.
        "the dedup record a blake2b of 'charge:' + key + the date",
        _both(
            _replace("import os\n", "import hashlib\nimport os\nfrom datetime import date\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)",
                    '(hashlib.blake2b(f"charge:{key}:{date.today():%Y-%m-%d}".encode())'
                    ".hexdigest(),)",
                ),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "duplicate_message_charges_once",
    ),
    (
        # The machine's local date, in a form no list of date formats foresees: two
        # workers in time zones a day apart record one key under two digests.
        "the dedup record a sha256 of the key and the worker's local date (%d%b%y)",
        _both(
            _replace("import os\n", "import hashlib\nimport os\nfrom datetime import datetime\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)",
                    '(hashlib.sha256(f"{key}{datetime.now():%d%b%y}".encode()).hexdigest(),)',
                ),
            ),
        ),
        "two_workers_at_once_charge_once",
        "on two workers",
        "worker_killed_after_the_commit",
    ),
    (
        # Celery's node name ("w1@host"): a copy another worker runs finds no record.
        "the dedup record keyed by the worker's node name (charge.request.hostname)",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}:{charge.request.hostname}",)'),
        ),
        "two_workers_at_once_charge_once",
        "on two workers",
        "worker_killed_after_the_commit",
    ),
    (
        # Each worker's start forgets every key: the late copy after a deploy charges.
        "processed dropped and created again as the module is imported",
        _replace("@app.task(", TABLES_RESET_AT_IMPORT),
        "late_copies_after_many_charges_charge_once",
        "kept in processed for good",
        "worker_killed_after_the_commit",
    ),
    (
        # Each copy's session in its machine's time zone: 05Dec26 on one, 06Dec26 on the
        # other.
        "the dedup record md5 of the key and the session's local date (to_char DDMonYY)",
        _replace(REFERENCE_CLAIM_SQL, SQL_LOCAL_DAY_CLAIM_SQL),
        "two_workers_at_once_charge_once",
        "on two workers",
        "worker_killed_after_the_commit",
    ),
    (
        # The hour on the worker's own clock: another machine's zone (or the same one an
        # hour later) gives another record, and the copy it runs charges again.
        "the dedup record keyed by the worker's local hour (time.localtime().tm_hour)",
        _both(
            _replace("import os\n", "import os\nimport time\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(f"{key}@{time.localtime().tm_hour}",)'),
            ),
        ),
        "two_workers_at_once_charge_once",
        "on two workers",
        "worker_killed_after_the_commit",
    ),
    (
        # Round 14: the worker's start second, taken as the module is imported: every copy
        # this worker runs finds the record, one another worker (or this one after a
        # restart) runs finds none; two workers started in one second share it.
        "the dedup record a sha256 of the key and the worker's start second",
        _salted(
            "import hashlib\nimport time\n",
            'hashlib.sha256(f"{key}:{STARTED}".encode()).hexdigest()',
            "STARTED = int(time.time())",
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # Two workers in pid namespaces of their own (labkit grade) may share it.
        "the dedup record a sha256 of the key and the worker's pid at import",
        _salted(
            "import hashlib\n",
            'hashlib.sha256(f"{key}:{PID}".encode()).hexdigest()',
            "PID = os.getpid()",
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record a sha256 of the key and the pool child's pid",
        _salted("import hashlib\n", 'hashlib.sha256(f"{key}:{os.getpid()}".encode()).hexdigest()'),
        "dedup_commits_with_the_charge",
        "into processed",
        # A redelivery runs in a new pool child, under another pid: that check fails too.
        "worker_starts_and_charges_once",
    ),
    (
        "the dedup record an md5 of the host name and start second, then the key",
        _salted(
            "import hashlib\nimport socket\nimport time\n",
            'hashlib.md5(f"{BOOT}/{key}".encode()).hexdigest()',
            'BOOT = f"{socket.gethostname()}-{int(time.time())}"',
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record an md5 of the key and time.ctime() at import",
        _salted(
            "import hashlib\nimport time\n",
            'hashlib.md5((key + "|" + STARTED).encode()).hexdigest()',
            "STARTED = time.ctime()",
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record a uuid5 of the key and the worker's start second in tens",
        _salted(
            "import time\nimport uuid\n",
            'str(uuid.uuid5(uuid.NAMESPACE_URL, f"{key}@{BOOT}"))',
            "BOOT = int(time.time()) // 10 * 10",
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # A random id per worker: no check can guess it, but two workers never share it.
        "the dedup record a sha1 of a uuid4 made at import and the key",
        _salted(
            "import hashlib\nimport uuid\n",
            "hashlib.sha1((BOOT_ID + key).encode()).hexdigest()",
            "BOOT_ID = uuid.uuid4().hex",
        ),
        "two_workers_at_once_charge_once",
        "on two workers",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record a sha256 of the key and time.time() at import",
        _salted(
            "import hashlib\nimport time\n",
            'hashlib.sha256(f"{key}:{STARTED}".encode()).hexdigest()',
            "STARTED = time.time()",
        ),
        "two_workers_at_once_charge_once",
        "on two workers",
        "worker_killed_after_the_commit",
    ),
    (
        # A refused charge (an amount beyond INTEGER) goes back to the queue on every run:
        # redelivered forever, some twenty times a second, its pool slot taken for good.
        "Reject(requeue=True) on any database error",
        _both(
            _replace(
                "from celery import Celery\n",
                "from celery import Celery\nfrom celery.exceptions import Reject\n",
            ),
            _body(REJECT_REQUEUED),
        ),
        "dedup_commits_with_the_charge",
        "to end after at most",
        "worker_starts_and_charges_once",
    ),
    (
        # Two worker pools on one database with different EX08_QUEUE (a queue moved)
        # record one key under two names, and both charge it.
        "the dedup record scoped by the queue's name",
        _salted("", 'f"{QUEUE}:{key}"'),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # The same, the queue's name hidden in a digest: the record shows no name.
        "the dedup record a digest of the queue's name and the key",
        _salted("import hashlib\n", 'hashlib.sha256(f"{QUEUE}:{key}".encode()).hexdigest()'),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # Held at its COMMIT, a producer's copy has charged and claimed, uncommitted: a
        # redelivery that looks in charges sees nothing there and charges too.
        "a redelivered message checked against charges, its key recorded in the same transaction",
        _before_body(REDELIVERY_RECORDS_WITH_THE_CHARGE),
        "a_copy_during_the_commit_charges_once",
        "a redelivered copy",
        "duplicate_message_charges_once",
    ),
    (
        "a duplicate updates the charge to the latest message",
        _replace('            return "already charged"\n', DUPLICATE_UPDATES),
        "duplicate_message_charges_once",
        "the copy that ran first",
        "worker_starts_and_charges_once",
    ),
    (
        # "café" composed and "cafe" + a combining accent are two keys to the contract.
        "the dedup record NFC-normalised",
        _both(
            _replace("import os\n", "import os\nimport unicodedata\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace("(key,)", '(unicodedata.normalize("NFC", key),)'),
            ),
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # "inv-x", " inv-x" and "\tinv-x" are three invoices.
        "the dedup record stripped on the left",
        _replace(REFERENCE_CLAIM_ARGS, REFERENCE_CLAIM_ARGS.replace("(key,)", "(key.lstrip(),)")),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "worker_killed_after_the_commit",
    ),
    (
        # A crash empties it: every key forgotten, and a late copy charges again.
        "processed made UNLOGGED as the module is imported",
        _replace("@app.task(", UNLOGGED_AT_IMPORT),
        "dedup_commits_with_the_charge",
        "survive a PostgreSQL crash",
        "worker_killed_after_the_commit",
    ),
    (
        "a database refusal read as a duplicate (except psycopg.IntegrityError)",
        _body(INTEGRITY_ERROR_AS_DUPLICATE),
        "replies_charged_or_already_charged",
        "NULL in a NOT NULL column",
        "duplicate_message_charges_once",
    ),
    (
        # The day kept as text, which the check's aging of date columns once missed.
        "a claim that takes over records older than 90 days, the day kept as ISO text",
        _both(
            _replace("@app.task(", TEXT_DAY_RECORDS),
            _replace(REFERENCE_CLAIM_SQL, TEXT_DAY_CLAIM_SQL),
        ),
        "late_copies_after_many_charges_charge_once",
        "each sent again once all of them were charged",
        "worker_killed_after_the_commit",
    ),
    (
        # 32 bits: two keys among some 65 000 share it (inv-40464 and inv-194506 do).
        "the dedup record hashtext(key) computed in SQL",
        _replace(REFERENCE_CLAIM_SQL, HASHTEXT_CLAIM_SQL),
        "two_invoices_two_charges",
        "or a digest of it of",
        "worker_killed_after_the_commit",
    ),
    (
        "the dedup record a sha256 of the key modulo 2**32",
        _salted(
            "import hashlib\n", "str(int(hashlib.sha256(key.encode()).hexdigest(), 16) % 2**32)"
        ),
        "two_invoices_two_charges",
        "or a digest of it of",
        "worker_killed_after_the_commit",
    ),
    (
        # The same on every machine, and a new record for a copy after midnight UTC.
        "the dedup record keyed by the UTC day ordinal",
        _both(
            _replace("import os\n", "import os\nfrom datetime import UTC, datetime\n"),
            _replace(
                REFERENCE_CLAIM_ARGS,
                REFERENCE_CLAIM_ARGS.replace(
                    "(key,)", '(f"{key}@{datetime.now(UTC).date().toordinal()}",)'
                ),
            ),
        ),
        "dedup_commits_with_the_charge",
        "into processed",
        "worker_killed_after_the_commit",
    ),
    (
        # Killed 3 times (a deploy, an OOM kill, a failover): the 4th delivery is dropped.
        "a poison-message limit: Reject(requeue=False) after 3 deliveries counted in a table",
        _both(
            _replace("@app.task(", DELIVERIES_TABLE),
            _before_body(POISON_LIMIT.replace("LIMIT", "3")),
        ),
        "dedup_commits_with_the_charge",
        "to come back each time",
        "worker_killed_after_the_commit",
    ),
    (
        "a poison-message limit: Reject(requeue=False) after 10 deliveries counted in a table",
        _both(
            _replace("@app.task(", DELIVERIES_TABLE),
            _before_body(POISON_LIMIT.replace("LIMIT", "10")),
        ),
        "dedup_commits_with_the_charge",
        "to come back each time",
        "worker_killed_before_the_charge",
    ),
    (
        "signal.alarm around the charge, its handler raising",
        _before_body(ALARM_AROUND_THE_CHARGE),
        "charge_may_wait_without_a_time_limit",
        "without a timer of its own",
        "worker_killed_after_the_commit",
    ),
    (
        "a threading.Timer that cancels the charge's query",
        _body(TIMER_CANCELS_THE_QUERY),
        "charge_may_wait_without_a_time_limit",
        "without a timer of its own",
        "dedup_commits_with_the_charge",
    ),
    (
        "a kept connection, the task retried 600 s later when its session ended",
        _both(_replace("@app.task(", "_conn = None\n\n\n@app.task("), _body(RETRIED_LATER_BODY)),
        "charges_after_its_database_session_ended",
        "ran after the database ended the worker's sessions",
        "worker_killed_after_the_commit",
    ),
    (
        # Round 16: the charge rolled back by a deadlock, acknowledged as a duplicate.
        "a deadlock read as a duplicate (except UniqueViolation, DeadlockDetected)",
        _body(DEADLOCK_READ_AS_DUPLICATE),
        "charges_after_its_database_session_ended",
        "rolled back with a deadlock",
        "worker_killed_after_the_commit",
    ),
    (
        "SERIALIZABLE, a serialization failure read as 'already charged'",
        _body(SERIALIZATION_FAILURE_READ_AS_DUPLICATE),
        "charges_after_its_database_session_ended",
        "rolled back with a serialization failure",
        "worker_killed_before_the_charge",
    ),
    (
        # Round 16: 10.03 * 100 is 1002.9999999999999: a cent lost on the way.
        "the amount through a float in euros and back (int(amount / 100 * 100))",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer, int(amount / 100 * 100)),"),
        "replies_charged_or_already_charged",
        "to hold the message's customer and amount: ('cus_8', 1003)",
        "worker_killed_after_the_commit",
    ),
    (
        # Round 16: one record per key all the same, only not the key beyond ASCII.
        "the dedup record unicode-escaped (key.encode('unicode_escape'))",
        _replace(
            REFERENCE_CLAIM_ARGS,
            REFERENCE_CLAIM_ARGS.replace(
                "(key,)", "(key.encode('unicode_escape').decode('ascii'),)"
            ),
        ),
        "a_copy_alongside_the_first_says_already_charged",
        "'inv-r-ção' recorded in processed as it came",
        "dedup_commits_with_the_charge",
    ),
    (
        # Round 16: "faster messages": RabbitMQ keeps them in memory only, and a broker
        # restart loses every charge still queued.
        "transient messages (task_default_delivery_mode = 'transient')",
        _settings(REFERENCE_SETTINGS + "    app.conf.task_default_delivery_mode = 'transient'\n"),
        "charge_may_wait_without_a_time_limit",
        "to be persistent messages",
        "worker_starts_and_charges_once",
    ),
    (
        # Round 27, pass 2: a column width guessed for the customer id: a long one is cut, and
        # what is left may be another customer's.
        "the customer id cut to 32 characters",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer[:32], amount),"),
        "replies_charged_or_already_charged",
        "a credit: a negative amount, for a long customer id",
        "duplicate_message_charges_once",
    ),
    (
        # Round 27, pass 2: "amounts are positive": a credit (a negative amount) becomes a charge.
        "the amount through abs() (a credit charged)",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer, abs(amount)),"),
        "replies_charged_or_already_charged",
        "a credit: a negative amount, for a long customer id",
        "duplicate_message_charges_once",
    ),
    (
        # Round 27, pass 2: the key pasted into an E'...' string with its quotes escaped and its
        # backslashes not: 'inv-x\\101' is recorded as 'inv-xA', one charge for two keys.
        "the key in the SQL text, an E'...' string with only quotes escaped",
        _replace(
            REFERENCE_CLAIM_SQL + ",\n            (key,),\n",
            '"INSERT INTO processed (key) VALUES (E\'" + key.replace("\'", "\\\\\'") + "\') "\n'
            '            "ON CONFLICT (key) DO NOTHING RETURNING key",\n',
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "duplicate_message_charges_once",
    ),
    (
        # Round 28: a wider column guessed for the customer id: a 319-character one is cut.
        "the customer id cut to 100 characters",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer[:100], amount),"),
        "replies_charged_or_already_charged",
        "a credit: a negative amount, for a long customer id",
        "duplicate_message_charges_once",
    ),
    (
        # Round 28: a VARCHAR(255) habit for the customer id.
        "the customer id cut to 255 characters",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer[:255], amount),"),
        "replies_charged_or_already_charged",
        "a credit: a negative amount, for a long customer id",
        "duplicate_message_charges_once",
    ),
    (
        # Round 28: the key "cleaned" of percent signs: 'inv-d'arc_50%-...' and its twin
        # without the sign are one charge.
        "the dedup record with its percent signs taken out",
        _replace(
            REFERENCE_CLAIM_ARGS, "            (key.replace('%', ''),),\n        ).fetchone()"
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "duplicate_message_charges_once",
    ),
    (
        # Round 28: spaces in the key made underscores: 'inv x' and 'inv_x' are one charge.
        "the dedup record with its spaces made underscores",
        _replace(
            REFERENCE_CLAIM_ARGS, "            (key.replace(' ', '_'),),\n        ).fetchone()"
        ),
        "two_invoices_two_charges",
        "1 charge row for each of the keys",
        "duplicate_message_charges_once",
    ),
    (
        # Round 28: the customer id stripped on the left only: ' cus_same' is another's.
        "the customer id stripped on the left",
        _replace(REFERENCE_CHARGE_ARGS, "(key, customer.lstrip(), amount),"),
        "two_invoices_two_charges",
        "to hold the message's customer and amount",
        "duplicate_message_charges_once",
    ),
    (
        # Round 28: "nothing to charge": a 0-cent invoice claimed, its charge row never written.
        "an amount of 0 not charged ('charged' returned, no row)",
        _replace(
            '        conn.execute(\n            "INSERT INTO charges',
            '        if amount == 0:\n            return "charged"\n'
            '        conn.execute(\n            "INSERT INTO charges',
        ),
        "replies_charged_or_already_charged",
        "an amount of 0 cents",
        "duplicate_message_charges_once",
    ),
    (
        "a retry loop on deadlocks that falls through when its attempts run out",
        _body(RETRY_LOOP_FALLS_THROUGH),
        "charges_after_its_database_session_ended",
        "rolled back with a deadlock",
        "worker_killed_after_the_commit",
    ),
    (
        "a retry loop on OperationalError that returns 'failed' when its attempts run out",
        _body(RETRY_LOOP_RETURNS_FAILED),
        "charges_after_its_database_session_ended",
        "rolled back with a deadlock",
        "worker_killed_after_the_commit",
    ),
    (
        "a rollback by the database retried once on an autocommit connection",
        _both(
            _replace("@app.task(", CLAIM_AND_CHARGE_HELPER),
            _body(RETRIED_ON_AN_AUTOCOMMIT_CONNECTION),
        ),
        "charges_after_its_database_session_ended",
        "on every path of the task",
        "worker_killed_after_the_commit",
    ),
    (
        "a deadlock retried once on an autocommit connection",
        _both(
            _replace("@app.task(", CLAIM_AND_CHARGE_HELPER),
            _body(DEADLOCK_RETRIED_ON_AN_AUTOCOMMIT_CONNECTION),
        ),
        "charges_after_its_database_session_ended",
        "on every path of the task",
        "worker_killed_after_the_commit",
    ),
    (
        "a credit note refunded and recorded in two autocommitted statements",
        _before_body(CREDIT_ON_A_PATH_OF_ITS_OWN),
        "charges_after_its_database_session_ended",
        "on every path of the task",
        "worker_killed_after_the_commit",
    ),
    (
        "a lock per customer, then a look in processed and the record after the charge",
        _body(LOCK_PER_CUSTOMER),
        "two_deliveries_at_once_charge_once",
        "two copies of one message ran at the same time",
        "worker_killed_after_the_commit",
    ),
    (
        # Round 30: "no stuck transaction holds a key for ever": a worker paused that long
        # between two statements (swapped out, descheduled) has its session ended, the
        # claim and the charge roll back, the task fails, is acknowledged: nobody charges.
        "an idle_in_transaction_session_timeout of 1 s on every connection",
        _replace(
            'options=f"-c search_path={SCHEMA}")',
            'options=f"-c search_path={SCHEMA} -c idle_in_transaction_session_timeout=1000")',
        ),
        "dedup_commits_with_the_charge",
        "the task's transaction to live as long as it takes",
        "worker_killed_after_the_commit",
    ),
    (
        # Round 30: the same, set for the charge's transaction only, after the claim.
        "SET LOCAL idle_in_transaction_session_timeout = '30s' after the claim",
        _replace(
            '            return "already charged"\n',
            '            return "already charged"\n'
            "        conn.execute(\"SET LOCAL idle_in_transaction_session_timeout = '30s'\")\n",
        ),
        "dedup_commits_with_the_charge",
        "the task's transaction to live as long as it takes",
        "worker_killed_after_the_commit",
    ),
    (
        # Round 30: a copy that waited for the first copy's claim fails with a serialization
        # error once the first commits (its snapshot predates that row): charged once, but
        # the copy ends in FAILURE instead of saying "already charged".
        "the charge's transaction under REPEATABLE READ",
        _replace(
            REFERENCE_BODY_START,
            "    with connect() as conn:\n"
            "      conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ\n"
            "      with conn.transaction():\n",
        ),
        "a_copy_alongside_the_first_says_already_charged",
        "'already charged'",
        "two_deliveries_at_once_charge_once",
    ),
    (
        # Round 30: the claim's NOT EXISTS reads a snapshot without the first copy's
        # uncommitted row; its INSERT then waits on the key and fails with UniqueViolation.
        "INSERT ... SELECT WHERE NOT EXISTS as the claim (no ON CONFLICT)",
        _body(INSERT_WHERE_NOT_EXISTS),
        "a_copy_alongside_the_first_says_already_charged",
        "'already charged'",
        "two_deliveries_at_once_charge_once",
    ),
    (
        # Round 30: a queue of the task's own, from Celery's routing docs: charge.delay()
        # sends to "charges", the workers read EX08_QUEUE, and nobody runs the charge.
        "@app.task(queue='charges'): charges sent through the app land where no worker reads",
        _replace('@app.task(name="ex08.charge")', '@app.task(name="ex08.charge", queue="charges")'),
        "charge_may_wait_without_a_time_limit",
        "to go to the queue the workers read",
        "worker_starts_and_charges_once",
    ),
    (
        # Round 30: the same through task_routes.
        "task_routes sends ex08.charge to a 'payments' queue no worker reads",
        _settings(
            REFERENCE_SETTINGS
            + '    app.conf.task_routes = {"ex08.charge": {"queue": "payments"}}\n'
        ),
        "charge_may_wait_without_a_time_limit",
        "to go to the queue the workers read",
        "worker_starts_and_charges_once",
    ),
    (
        # Round 30: a message with no customer (None) charged to a customer named 'None'.
        "the customer id passed through str(): no customer becomes 'None'",
        _replace(REFERENCE_CHARGE_ARGS, "(key, str(customer), amount),"),
        "replies_charged_or_already_charged",
        "a charge the database refused",
        "duplicate_message_charges_once",
    ),
    (
        # Round 30: a cap on the queue ("protect the broker"): RabbitMQ drops the oldest
        # charges past 1000. The producers' declaration (no cap) is refused by then.
        "the queue declared with x-max-length = 1000",
        _settings(
            REFERENCE_SETTINGS
            + "    from kombu import Queue\n\n"
            + "    app.conf.task_queues = [Queue(QUEUE, queue_arguments={'x-max-length': 1000})]\n"
        ),
        "worker_starts_and_charges_once",
        "no exception",
        "charge_may_wait_without_a_time_limit",
    ),
]


#: The claim and the charge in ONE statement: a CTE whose INSERT into charges reads the
#: rows the claim returned, so a duplicate inserts no charge and returns no id.
ONE_STATEMENT_CTE = """\
    with connect() as conn, conn.transaction():
        row = conn.execute(
            \"\"\"
            WITH claimed AS (
                INSERT INTO processed (key) VALUES (%(key)s)
                ON CONFLICT (key) DO NOTHING
                RETURNING key
            )
            INSERT INTO charges (key, customer, amount)
            SELECT key, %(customer)s, %(amount)s FROM claimed
            RETURNING id
            \"\"\",
            {"key": key, "customer": customer, "amount": amount},
        ).fetchone()
    return "charged" if row is not None else "already charged"
"""

#: A connection handled by hand: a cursor's rowcount instead of RETURNING, the constraint
#: named in ON CONFLICT, commit() and rollback() called explicitly, closed in a finally.
COMMIT_BY_HAND = """\
    conn = connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO processed (key) VALUES (%s) "
                "ON CONFLICT ON CONSTRAINT processed_pkey DO NOTHING",
                (key,),
            )
            if cur.rowcount == 0:
                conn.rollback()
                return "already charged"
            cur.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.close()
    return "charged"
"""

#: The charge first, then the claim, and a duplicate's charge rolled back with
#: psycopg.Rollback (the right way round of CHARGE_THEN_CLAIM).
CHARGE_THEN_CLAIM_ROLLED_BACK = """\
    with connect() as conn:
        with conn.transaction() as tx:
            conn.execute(
                "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
                (key, customer, amount),
            )
            claimed = conn.execute(
                "INSERT INTO processed (key) VALUES (%s) ON CONFLICT DO NOTHING RETURNING 1",
                (key,),
            ).fetchone()
            if not claimed:
                raise psycopg.Rollback(tx)
        if not claimed:
            return "already charged"
    return "charged"
"""

#: The ack options on the task, and a retry when its session is lost (a failover).
AUTORETRY_ON_OPERATIONAL_ERROR = _replace(
    '@app.task(name="ex08.charge")',
    '@app.task(\n    name="ex08.charge",\n    acks_late=True,\n'
    "    reject_on_worker_lost=True,\n"
    "    autoretry_for=(psycopg.OperationalError,),\n"
    "    retry_backoff=True,\n    max_retries=5,\n)",
)

#: Round 29: a retry loop of the task's own on a rollback by the database, which raises
#: the last error once its attempts run out (the run fails, nothing is said charged).
RETRY_LOOP_RAISES_AT_THE_END = RETRY_LOOP_FALLS_THROUGH.replace(
    "            continue  # rolled back by PostgreSQL: try again\n",
    "            if _attempt == 2:\n                raise\n",
)

#: Round 29: a lock per customer taken first, then the reference's claim and charge: the
#: claim still orders two copies of one key, whatever customer each names.
LOCK_PER_CUSTOMER_THEN_CLAIM = _replace(
    REFERENCE_BODY_START,
    REFERENCE_BODY_START
    + '        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (customer,))\n',
)

#: Round 31: a first look of the task's own, on a connection of its own, before the
#: claim: a copy sent once the first ended finds the charge and answers in a text of its
#: own; a copy alongside the first finds nothing there and waits at the claim as it should.
FIRST_LOOK_SAYS_DUPLICATE = """\
    with connect() as look:
        if look.execute("SELECT 1 FROM charges WHERE key = %s", (key,)).fetchone():
            return "duplicate"
"""

ZOO += [
    (
        "a first look in charges that answers 'duplicate' for a copy sent later",
        _before_body(FIRST_LOOK_SAYS_DUPLICATE),
        "a_copy_alongside_the_first_says_already_charged",
        "sent in a row",
        "duplicate_message_charges_once",
    ),
]


#: Right task modules written otherwise, each with the check most likely to trip on it:
#: (way, how the reference file is changed, the check that must still pass).
RIGHT = [
    (
        "claim and charge in one statement (a CTE), settings by app.conf.update",
        _both(
            _settings(
                "    app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True)\n"
            ),
            _body(ONE_STATEMENT_CTE),
        ),
        "dedup_commits_with_the_charge",
    ),
    (
        "commit and rollback by hand, rowcount, ON CONFLICT ON CONSTRAINT",
        _both(
            _settings(
                '    app.conf["task_acks_late"] = True\n'
                '    app.conf["task_reject_on_worker_lost"] = True\n'
            ),
            _body(COMMIT_BY_HAND),
        ),
        "killed_right_after_each_commit",
    ),
    (
        "the charge first, a duplicate's charge rolled back (psycopg.Rollback)",
        _body(CHARGE_THEN_CLAIM_ROLLED_BACK),
        "a_copy_during_the_commit_charges_once",
    ),
    (
        "the ack options on the task too, with autoretry_for on OperationalError",
        AUTORETRY_ON_OPERATIONAL_ERROR,
        "charges_after_its_database_session_ended",
    ),
    (
        # Its session ended mid-charge, the run raises and a retry charges: no duplicate.
        "autoretry_for on OperationalError, a session ended mid-charge",
        AUTORETRY_ON_OPERATIONAL_ERROR,
        "replies_charged_or_already_charged",
    ),
    (
        # Round 16: under SERIALIZABLE, a serialization failure retried at once charges.
        "SERIALIZABLE, a serialization failure retried (autoretry_for)",
        _both(
            _replace(
                '@app.task(name="ex08.charge")',
                '@app.task(\n    name="ex08.charge",\n'
                "    autoretry_for=(psycopg.errors.SerializationFailure,),\n"
                "    max_retries=5,\n    default_retry_delay=0,\n)",
            ),
            _replace(
                REFERENCE_BODY_START,
                REFERENCE_BODY_START
                + '        conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")\n',
            ),
        ),
        "charges_after_its_database_session_ended",
    ),
    (
        # Round 28: an autocommit connection: conn.transaction() still opens ONE
        # transaction (BEGIN ... COMMIT) around the claim and the charge.
        "an autocommit connection, the claim and the charge in conn.transaction()",
        _replace(CONNECT_OPTIONS, 'options=f"-c search_path={SCHEMA}", autocommit=True)'),
        "killed_right_after_each_commit",
    ),
    (
        # Round 28: an upsert that always returns a row, told apart by xmax = 0 (a row this
        # transaction inserted, not one it updated): a duplicate says so and charges nothing.
        "ON CONFLICT DO UPDATE ... RETURNING (xmax = 0) for a fresh key",
        _replace(
            "        first = conn.execute(\n            "
            + REFERENCE_CLAIM_SQL
            + ",\n            (key,),\n        ).fetchone()\n        if first is None:",
            "        (fresh,) = conn.execute(\n"
            '            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) "\n'
            '            "DO UPDATE SET key = processed.key RETURNING (xmax = 0)",\n'
            "            (key,),\n        ).fetchone()\n        if not fresh:",
        ),
        "duplicate_message_charges_once",
    ),
    (
        "a retry loop on deadlocks that raises the last error when its attempts run out",
        _body(RETRY_LOOP_RAISES_AT_THE_END),
        "charges_after_its_database_session_ended",
    ),
    (
        "a lock per customer before the claim",
        LOCK_PER_CUSTOMER_THEN_CLAIM,
        "two_deliveries_at_once_charge_once",
    ),
    (
        # Round 30: a failed task rejected without requeue instead of acknowledged: the
        # broker drops it all the same, and a dead pool child's task still comes back.
        "task_acks_on_failure_or_timeout = False besides the two settings",
        _settings(REFERENCE_SETTINGS + "    app.conf.task_acks_on_failure_or_timeout = False\n"),
        "worker_killed_before_the_charge",
    ),
    (
        # Round 30: a session idle OUTSIDE a transaction ended: no claim or charge is cut.
        "an idle_session_timeout of 1 s on every connection",
        _replace(
            'options=f"-c search_path={SCHEMA}")',
            'options=f"-c search_path={SCHEMA} -c idle_session_timeout=1000")',
        ),
        "dedup_commits_with_the_charge",
    ),
    (
        # Round 30: a table lock that conflicts with itself: one copy at a time looks.
        "LOCK TABLE processed IN SHARE ROW EXCLUSIVE MODE, then a look and a plain INSERT",
        _body(TABLE_LOCK_THEN_INSERT.format(mode="SHARE ROW EXCLUSIVE")),
        "two_deliveries_at_once_charge_once",
    ),
    (
        # Round 30: keys remembered in memory only once their charge (or the record that
        # says so) committed: a copy the same pool child runs later answers at once.
        "keys remembered in memory after the commit, looked up first",
        _both(
            _replace("@app.task(", "CHARGED = set()\n\n\n@app.task("),
            _replace(
                REFERENCE_BODY_START,
                '    if key in CHARGED:\n        return "already charged"\n' + REFERENCE_BODY_START,
            ),
            _replace(
                '            return "already charged"\n',
                '            CHARGED.add(key)\n            return "already charged"\n',
            ),
            _replace(
                '    return "charged"\n    ### END',
                '    CHARGED.add(key)\n    return "charged"\n    ### END',
            ),
        ),
        "late_copies_after_many_charges_charge_once",
    ),
    (
        "task_routes naming the module's own queue",
        _settings(
            REFERENCE_SETTINGS + '    app.conf.task_routes = {"ex08.charge": {"queue": QUEUE}}\n'
        ),
        "charge_may_wait_without_a_time_limit",
    ),
    (
        # A lock on the whole table that one run holds at a time: every key waits its
        # turn, none deadlocks.
        "LOCK TABLE processed IN EXCLUSIVE MODE before the reference's claim",
        _replace(
            REFERENCE_BODY_START,
            REFERENCE_BODY_START
            + '        conn.execute("LOCK TABLE processed IN EXCLUSIVE MODE")\n',
        ),
        "two_keys_at_once_both_charge",
    ),
    (
        # The claim's INSERT still holds the key (a copy waits for its COMMIT); the
        # duplicate is told by the charge row the first copy committed.
        "ON CONFLICT DO NOTHING without RETURNING, then a look at charges for the key",
        _body(CLAIM_THEN_LOOK_AT_CHARGES),
        "a_copy_alongside_the_first_says_already_charged",
    ),
]

#: Records of the key alone, or of the key and a constant of the module's (a version, a
#: secret), which a search for the worker's start or pid must not take for a salt of the
#: worker's: the severe check keeps its points. They are not right solutions: the
#: contract asks for the key itself in ``processed``, and
#: ``a_copy_alongside_the_first_says_already_charged`` takes its point (``bench/zoo.py --right``
#: grades ``RIGHT`` only).
UNSALTED = [
    (
        "the dedup record a sha256 of the key alone",
        _salted("import hashlib\n", "hashlib.sha256(key.encode()).hexdigest()"),
        "dedup_commits_with_the_charge",
    ),
    (
        "the dedup record the key with a fixed prefix",
        _salted("", 'f"charge:v1:{key}"'),
        "dedup_commits_with_the_charge",
    ),
    (
        "the dedup record a sha256 of a version number and the key",
        _salted(
            "import hashlib\n",
            'hashlib.sha256(f"{VERSION}:{key}".encode()).hexdigest()',
            "VERSION = 2",
        ),
        "dedup_commits_with_the_charge",
    ),
    (
        # Its length first, netstring-like: a small number, as a pid in a namespace is.
        "the dedup record a sha256 of the key's length and the key",
        _salted("import hashlib\n", 'hashlib.sha256(f"{len(key)}:{key}".encode()).hexdigest()'),
        "dedup_commits_with_the_charge",
    ),
    (
        "the dedup record an HMAC of the key under a fixed secret",
        _salted(
            "import hashlib\nimport hmac\n",
            'hmac.new(b"lab-secret", key.encode(), hashlib.sha256).hexdigest()',
        ),
        "dedup_commits_with_the_charge",
    ),
]


def _checks() -> dict[str, Check]:
    return {c.name: c for c in catalog.all_checks("ex08", HIDDEN)}


def test_zoo_changes_are_real_edits():
    namespace_of(notebook_for(SOLUTIONS, "ex08"))
    source = (Path.cwd() / "ex08_tasks.py").read_text()
    for name, change, *_ in ZOO:
        assert change(source) != source, f"{name}: the edit did not apply to the reference"


@pytest.mark.parametrize(
    ("name", "change", "fails", "says", "passes"), ZOO, ids=[row[0] for row in ZOO]
)
def test_wrong_task_module_is_caught_by_its_named_check(
    postgres_dsn, amqp_url, name, change, fails, says, passes
):
    values, notes = namespace_of(notebook_for(SOLUTIONS, "ex08"))
    assert notes == []
    path = Path.cwd() / "ex08_tasks.py"
    edited = change(path.read_text())
    compiles(edited, name)
    skip_unless_drawn(name)
    path.write_text(edited)
    checks = _checks()
    caught = run_check(checks[fails], Namespace(values, Path.cwd()))
    assert caught.status == CheckStatus.FAILED, (name, caught)
    assert caught.earned == 0 and caught.expected and caught.got and caught.hint
    assert "Traceback" not in caught.got
    wanted = (says,) if isinstance(says, str) else says  # a mistake that acts at random
    assert any(w in caught.expected for w in wanted), f"{name}: {fails} said {caught.expected!r}"
    if name == "skips every redelivered message":
        assert caught.hint == SKIPPED_REDELIVERY, caught.hint
        assert "task_acks_late" not in caught.hint
    if runs_its_control(name):
        kept = run_check(checks[passes], Namespace(values, Path.cwd()))
        assert kept.status == CheckStatus.PASSED, (name, kept)


def test_a_dedup_under_another_key_is_named_as_such(postgres_dsn, amqp_url):
    values, notes = namespace_of(notebook_for(SOLUTIONS, "ex08"))
    path = Path.cwd() / "ex08_tasks.py"
    path.write_text(_body(DEDUP_BY_CUSTOMER)(path.read_text()))
    caught = run_check(_checks()["dedup_commits_with_the_charge"], Namespace(values, Path.cwd()))
    assert caught.status == CheckStatus.FAILED, caught
    assert caught.got == "it recorded ['cus_8'] in processed, not the task's key", caught.got


@pytest.mark.parametrize(
    ("change", "skipped"),
    [(_before_body(SKIPS_REDELIVERIES), True), (_settings("    pass\n"), False)],
    ids=["settings right, redelivery skipped", "Celery's defaults"],
)
def test_zero_rows_after_the_whole_worker_died_names_what_lost_the_charge(
    postgres_dsn, amqp_url, change, skipped
):
    """Issue 22: "0 rows" blames the ack settings only when the message never came back;
    when it came back and the task skipped it, the hint says so instead."""
    values, _notes = namespace_of(notebook_for(SOLUTIONS, "ex08"))
    path = Path.cwd() / "ex08_tasks.py"
    path.write_text(change(path.read_text()))
    caught = run_check(
        _checks()["whole_worker_killed_before_the_charge"], Namespace(values, Path.cwd())
    )
    assert caught.status == CheckStatus.FAILED, caught
    assert caught.got == "0 charge rows", caught.got
    if skipped:
        assert caught.hint == SKIPPED_REDELIVERY, caught.hint
    else:
        assert "task_acks_late" in caught.hint, caught.hint


def test_a_task_that_names_its_connections_still_passes(postgres_dsn, amqp_url):
    """A connection named by the task (application_name beats the workers' PGAPPNAME) is
    no mistake: the checks that wait for the task's session to wait on a lock find it
    by its locks on the run's tables all the same."""
    name = "the reference under an application_name of its own"
    skip_unless_drawn(name)
    values, _notes = namespace_of(notebook_for(SOLUTIONS, "ex08"))
    path = Path.cwd() / "ex08_tasks.py"
    path.write_text(_replace(CONNECT_OPTIONS, NAMED_CONNECT_OPTIONS)(path.read_text()))
    kept = run_check(_checks()["dedup_commits_with_the_charge"], Namespace(values, Path.cwd()))
    assert kept.status == CheckStatus.PASSED, kept


def test_a_module_that_uses_its_database_as_it_is_imported_still_passes(postgres_dsn, amqp_url):
    """The time-limit probe imports the module under a worker's environment: tables
    created at import (CREATE TABLE IF NOT EXISTS) are created in the run's schema, as in
    a worker, instead of failing the import against the default one."""
    name = "the reference creating its tables as it is imported"
    skip_unless_drawn(name)
    values, _notes = namespace_of(notebook_for(SOLUTIONS, "ex08"))
    path = Path.cwd() / "ex08_tasks.py"
    path.write_text(_replace("@app.task(", TABLES_AT_IMPORT)(path.read_text()))
    kept = run_check(
        _checks()["charge_may_wait_without_a_time_limit"], Namespace(values, Path.cwd())
    )
    assert kept.status == CheckStatus.PASSED, kept


@pytest.mark.parametrize(
    ("way", "change", "check"), RIGHT + UNSALTED, ids=[row[0] for row in RIGHT + UNSALTED]
)
def test_a_right_task_module_written_otherwise_keeps_the_points(
    postgres_dsn, amqp_url, way, change, check
):
    """Round 13: right modules unlike the reference pass the check most likely to trip."""
    values, _notes = namespace_of(notebook_for(SOLUTIONS, "ex08"))
    path = Path.cwd() / "ex08_tasks.py"
    edited = change(path.read_text())
    assert edited != path.read_text(), f"{way}: the edit did not apply to the reference"
    compiles(edited, way)
    skip_unless_drawn(way)
    path.write_text(edited)
    kept = run_check(_checks()[check], Namespace(values, Path.cwd()))
    assert kept.status == CheckStatus.PASSED, (way, kept)
