"""Exercise 6's zoo: each plausible wrong solution loses the check named after it.

Exercise 6 is about dead letters and redrive. Each entry overrides one or two functions
of the reference solution with a classic mistake; the check named after its mistake must
catch it, in process for every entry and, for a sample, through ``labkit grade`` in the
sandbox (``zoograding``), saying what ``SAYS`` gives. ``test_zoo.py`` checks the zoo as
a whole.
"""

from __future__ import annotations

from zoograding import in_process_test, right_test

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        "ex06",
        "redrive folds the kind asked for to lower case (kind = lower(:kind))",
        "redrive_picks_the_oldest_for_any_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead'"
                    " AND (:kind IS NULL OR kind = lower(:kind))"
                    " ORDER BY updated_at, id LIMIT :limit",
                    {"kind": None if kind is None else kind.lower(), "limit": limit})]
                if not dry_run:
                    for i in ids:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE id = :id AND state = 'dead'", {"now": now, "id": i})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive picks the jobs with the fewest attempts first (ORDER BY attempt, updated_at, id)",
        "redrive_picks_the_oldest_for_any_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY attempt, updated_at, id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    for i in ids:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE id = :id AND state = 'dead'", {"now": now, "id": i})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive lower-cases the key as it resets the job (keys 'normalised')",
        "the_key_survives_a_dead_letter_and_a_redrive",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    for i in ids:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now,"
                            " key = lower(key) WHERE id = :id AND state = 'dead'",
                            {"now": now, "id": i})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive as a copy with a new key",
        "redrive_keeps_the_key",
        """
        import uuid
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit")
            rows = conn.execute(
                "SELECT * FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit}).fetchall()
            if dry_run:
                return [r["id"] for r in rows]
            return [conn.execute(
                "INSERT INTO jobs (key, kind, run_after, updated_at)"
                " VALUES (:key, :kind, :now, :now)"
                " RETURNING id", {"key": f"{r['key']}:{uuid.uuid4().hex[:6]}", "kind": r["kind"],
                                  "now": now}).fetchone()[0] for r in rows]
    """,
    ),
    (
        "ex06",
        "redrive of everything, limit ignored",
        "redrive_respects_the_limit",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id", {"kind": kind})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)",
                    {"now": now, "kind": kind})
            return ids
    """,
    ),
    (
        "ex06",
        "redrive without resetting attempts",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
            if not dry_run:
                for i in ids:
                    conn.execute("UPDATE jobs SET state = 'pending', redrives = redrives + 1,"
                                 " updated_at = :now WHERE id = :id", {"now": now, "id": i})
            return ids
    """,
    ),
    (
        "ex06",
        "the raw error stored, secrets and all",
        "dead_letter_hides_secrets",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            return conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason,
                 "error": f"{type(error).__name__}: {error}", "now": now}).fetchone() is not None
    """,
    ),
    (
        "ex06",
        "dead letter without the token fence",
        "dead_letter_is_fenced",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            return conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' RETURNING id",
                {"id": job_id, "reason": reason, "error": describe(error), "now": now}
            ).fetchone() is not None
    """,
    ),
    (
        "ex06",
        "no limit required",
        "redrive_requires_a_limit",
        """
        _reference_redrive = redrive
        def redrive(conn, *, limit=None, now, kind=None, dry_run=False):
            return _reference_redrive(conn, limit=limit or 1_000_000, now=now, kind=kind,
                                      dry_run=dry_run)
    """,
    ),
    (
        "ex06",
        "redrive that selects then updates without BEGIN IMMEDIATE",
        "two_redrives_at_once_share_nothing",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            return ids
    """,
    ),
    (
        "ex06",
        "redrive that selects then updates behind a threading.Lock",
        "two_redrives_at_once_share_nothing",
        """
        import threading
        _REDRIVING = threading.Lock()
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            with _REDRIVING:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            return ids
    """,
    ),
    (
        "ex06",
        "redrive by id alone, outside a transaction (a running job reset)",
        "redrive_racing_a_worker",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            return ids
    """,
    ),
    (
        # An order mistake only: every dead job still comes back, so no severe check fails
        # (test_severity.py grades it with every check).
        "ex06",
        "redrive newest first (ORDER BY updated_at DESC, id DESC)",
        "redrive_respects_the_limit",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at DESC, id DESC LIMIT :limit", {"kind": kind, "limit": limit})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive in id order, not oldest first",
        "redrive_picks_the_oldest_for_any_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY id LIMIT :limit", {"kind": kind, "limit": limit})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "limit checked with `if not limit` (a negative limit accepted)",
        "redrive_requires_a_limit",
        """
        _reference_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if not limit:
                raise ValueError("limit is required")
            return _reference_redrive(conn, limit=max(limit, 1), now=now, kind=kind,
                                      dry_run=dry_run)
    """,
    ),
    (
        "ex06",
        "the fresh start committed apart from the state (two transactions)",
        "a_killed_redrive_leaves_no_job_half_redriven",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', redrives = redrives + 1"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            if not dry_run:
                # The rows are ours now: the fresh start needs no lock.
                conn.execute(
                    "UPDATE jobs SET attempt = 0, run_after = :now, dead_reason = NULL,"
                    " updated_at = :now WHERE id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            return ids
    """,
    ),
    (
        "ex06",
        "a dry run that returns inside its BEGIN IMMEDIATE (never rolled back)",
        "leaves_no_transaction_open",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
            if dry_run:
                return ids
            conn.execute(
                "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                " dead_reason = NULL,"
                " redrives = redrives + 1, updated_at = :now"
                " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                {"now": now, "ids": json.dumps(ids)})
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter that returns False inside its BEGIN IMMEDIATE",
        "leaves_no_transaction_open",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT state, lease_token FROM jobs WHERE id = :id", {"id": job_id}
            ).fetchone()
            if row is None or row["state"] != "running" or row["lease_token"] != token:
                return False
            conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id",
                {"id": job_id, "reason": reason, "error": describe(error), "now": now})
            conn.execute("COMMIT")
            return True
    """,
    ),
    (
        "ex06",
        "kind matched with LIKE ('_' is any character, case ignored)",
        "redrive_filters_by_kind",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND kind LIKE :kind"
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind or "%"})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL,"
                        " redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "one UPDATE ... RETURNING id: the ids in table order, not oldest first",
        "redrive_picks_the_oldest_for_any_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            pick = ("SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit")
            params = {"limit": limit, "kind": kind, "now": now}
            if dry_run:
                return [r["id"] for r in conn.execute(pick, params)]
            # One statement: atomic without BEGIN IMMEDIATE.
            rows = conn.execute(
                "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                " dead_reason = NULL,"
                " redrives = redrives + 1, updated_at = :now"
                " WHERE id IN (" + pick + ") RETURNING id",
                params).fetchall()
            return [r["id"] for r in rows]
    """,
    ),
    (
        "ex06",
        "dead_letter fenced on the token alone (a succeeded job buried)",
        "dead_letter_needs_a_running_job",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter fenced in Python: the token read, compared, then an UPDATE by id",
        "dead_letter_is_fenced",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "SELECT state, lease_token FROM jobs WHERE id = :id", {"id": job_id}
            ).fetchone()
            if row is None or row["state"] != "running" or row["lease_token"] != token:
                return False
            conn.execute(
                '''
                UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id
                ''',
                {"id": job_id, "reason": reason, "error": describe(error), "now": now},
            )
            return True
    """,
    ),
    (
        "ex06",
        "redrive silently capped at 100 jobs a call",
        "redrive_respects_the_limit",
        """
        SELECT = '''
            SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
             ORDER BY updated_at, id LIMIT :limit
        '''

        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")

            params = {"limit": min(limit, 100), "kind": kind, "now": now}

            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(SELECT, params)]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive takes its rows with fetchmany(100)",
        "redrive_respects_the_limit",
        """
        SELECT = '''
            SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
             ORDER BY updated_at, id LIMIT :limit
        '''

        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")

            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(SELECT, params).fetchmany(100)]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "the oldest first by updated_at compared as text ('100.0' < '20.0')",
        "redrive_respects_the_limit",
        """
        SELECT = '''
            SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
             ORDER BY CAST(updated_at AS TEXT), id LIMIT :limit
        '''

        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")

            params = {"limit": limit, "kind": kind, "now": now}

            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(SELECT, params)]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "a dry run that forgets the kind",
        "dry_run_changes_nothing",
        """
        SELECT = '''
            SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
             ORDER BY updated_at, id LIMIT :limit
        '''

        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")

            params = {"limit": limit, "kind": None if dry_run else kind, "now": now}

            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(SELECT, params)]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "an empty kind taken as every kind (kind or None)",
        "redrive_filters_by_kind",
        """
        SELECT = '''
            SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
             ORDER BY updated_at, id LIMIT :limit
        '''

        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")

            params = {"limit": limit, "kind": kind or None, "now": now}

            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(SELECT, params)]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive with no ROLLBACK when its UPDATE fails",
        "leaves_no_transaction_open",
        """
        SELECT = '''
            SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
             ORDER BY updated_at, id LIMIT :limit
        '''

        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")

            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            ids = [row["id"] for row in conn.execute(SELECT, params)]
            if not dry_run:
                conn.execute(
                    '''
                    UPDATE jobs
                       SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                           redrives = redrives + 1, updated_at = :now
                     WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                    ''',
                    {"now": now, "ids": json.dumps(ids)},
                )
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter in BEGIN IMMEDIATE with no ROLLBACK when its UPDATE fails",
        "leaves_no_transaction_open",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute("BEGIN IMMEDIATE")
            cur = conn.execute(
                '''
                UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            )
            conn.execute("COMMIT")
            return cur.rowcount == 1
    """,
    ),
    (
        "ex06",
        "the kind filtered in Python after the LIMIT",
        "redrive_filters_by_kind",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = conn.execute(
                    "SELECT id, kind FROM jobs WHERE state = 'dead'"
                    " ORDER BY updated_at, id LIMIT :limit",
                    {"limit": limit}).fetchall()
                ids = [r["id"] for r in rows if kind is None or r["kind"] == kind]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL,"
                        " redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "the kind put into the SQL with an f-string",
        "redrive_filters_by_kind",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            where = f" AND kind = '{kind}'" if kind is not None else ""
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead'" + where +
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "the dead_reason put into the SQL with an f-string",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                f"UPDATE jobs SET state = 'dead', dead_reason = '{reason}', last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "error": describe(error), "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "a dry run that skips the limit check",
        "redrive_requires_a_limit",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if not dry_run and (limit is None or limit < 1):
                raise ValueError("limit is required (1 or more)")
            limit = -1 if limit is None else limit
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", params)]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive silently capped at 500 jobs a call",
        "redrive_has_no_cap_of_its_own",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            limit = min(limit, 500)
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", params)]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "kind matched with GLOB ('*' and '[' are patterns)",
        "redrive_filters_by_kind",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead'"
                    " AND (:kind IS NULL OR kind GLOB :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", params)]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive that catches sqlite3.Error and returns []",
        "a_failed_write_comes_out",
        """
        import sqlite3
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", params)]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except sqlite3.Error:
                conn.execute("ROLLBACK")
                return []
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter fenced on 'not finished' (a retry_wait job buried)",
        "dead_letter_needs_a_running_job",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state NOT IN ('succeeded', 'dead') AND lease_token = :token"
                " RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "the token put into the SQL with an f-string",
        "dead_letter_token_is_a_parameter",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                f" WHERE id = :id AND state = 'running' AND lease_token = '{token}' RETURNING id",
                {"id": job_id, "reason": reason, "error": describe(error), "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter that catches sqlite3.Error and returns False",
        "a_failed_write_comes_out",
        """
        import sqlite3
        def dead_letter(conn, job_id, token, reason, error, now):
            try:
                row = conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL,"
                    " updated_at = :now"
                    " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                    {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                     "now": now},
                ).fetchone()
            except sqlite3.Error:
                return False
            return row is not None
    """,
    ),
    (
        "ex06",
        "last_error cached per error class in a module-level dict",
        "each_job_keeps_its_own_error",
        '''
        import json
        from labkit.redact import describe

        _DESCRIBED = {}


        def dead_letter(conn, job_id, token, reason, error, now):
            text = _DESCRIBED.setdefault(type(error), describe(error))
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                """,
                {"id": job_id, "token": token, "reason": reason, "error": text, "now": now},
            ).fetchone()
            return row is not None
    ''',
    ),
    (
        "ex06",
        "dead_letter also fenced on a live lease (lease_until > now)",
        "dead_letter_after_the_lease_ran_out",
        '''
        from labkit.redact import describe


        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                   AND lease_until > :now
                RETURNING id
                """,
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    ''',
    ),
    (
        "ex06",
        "dead_letter in two UPDATEs: the state first, the reason and error after",
        "a_killed_dead_letter_leaves_the_reason",
        '''
        from labkit.redact import describe


        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'dead', lease_owner = NULL, lease_until = NULL, lease_token = NULL,
                       updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                """,
                {"id": job_id, "token": token, "now": now},
            ).fetchone()
            if row is None:
                return False
            conn.execute(
                "UPDATE jobs SET dead_reason = :reason, last_error = :error WHERE id = :id",
                {"id": job_id, "reason": reason, "error": describe(error)},
            )
            return True
    ''',
    ),
    (
        "ex06",
        "dead_reason made ASCII before it is stored",
        "dead_letter_records_the_reason",
        '''
        from labkit.redact import describe


        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                """,
                {"id": job_id, "token": token, "reason": reason.encode("ascii", "ignore").decode(),
                 "error": describe(error), "now": now},
            ).fetchone()
            return row is not None
    ''',
    ),
    (
        "ex06",
        "redrive stamps int(now)",
        "the_instants_are_kept_as_given",
        """
        import json


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            now = int(now)
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' "
                    "AND (:kind IS NULL OR kind = :kind) "
                    "ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                        "dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive keeps the old dead_reason (not cleared)",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' "
                    "AND (:kind IS NULL OR kind = :kind) "
                    "ORDER BY updated_at, id LIMIT :limit", params)]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "the raw error put into dead_reason too (its secrets with it)",
        "dead_letter_hides_secrets",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            # the reason tells the person what happened: put the error in it too
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": f"{reason} ({error})",
                 "error": describe(error), "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "a redaction of one's own (URL passwords and token= only)",
        "dead_letter_hides_secrets",
        """
        import re
        def dead_letter(conn, job_id, token, reason, error, now):
            text = f"{type(error).__name__}: {error}"
            # passwords in URLs, then token=... and password=...
            text = re.sub(r"(://[^:/@ ]*:)[^@ ]*@", lambda m: m.group(1) + "***@", text)
            text = re.sub(r"(token|password)=[^ ,;]+", lambda m: m.group(1) + "=***", text)
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": text, "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_reason cut to 255 characters (VARCHAR habit)",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason[:255],  # VARCHAR(255)
                 "error": describe(error), "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "last_error without the error's class",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            # the class name is noise: keep the (redacted) message
            text = describe(error).split(": ", 1)[-1]
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": text, "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter returns the rowcount (1 or 0), not True or False",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            cur = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            )
            return cur.rowcount  # 1 or 0
    """,
    ),
    (
        "ex06",
        "a deferred BEGIN (not IMMEDIATE) around the SELECT and the UPDATE",
        "two_redrives_at_once_share_nothing",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "no transaction, a state guard in the UPDATE, the selected ids returned",
        "redrive_racing_a_worker",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
            if not dry_run:
                # the state guard makes it safe: a job that left 'dead' meanwhile is skipped
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            return ids
    """,
    ),
    (
        "ex06",
        "the SELECT committed, then one short transaction per job",
        "two_redrives_at_once_share_nothing",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
            finally:
                conn.execute("COMMIT")
            if dry_run:
                return ids
            for job_id in ids:  # one short transaction per job, to keep the lock short
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE id = :id",
                    {"now": now, "id": job_id})
                conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "the ids returned newest first",
        "redrive_picks_the_oldest_for_any_table",
        """
        _reference_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            return _reference_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)[::-1]
    """,
    ),
    (
        "ex06",
        "kind compared with COLLATE NOCASE",
        "redrive_filters_by_kind",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead'"
                    " AND (:kind IS NULL OR kind = :kind COLLATE NOCASE)"
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "the kind stripped of spaces before it is compared",
        "redrive_filters_by_kind",
        """
        _reference_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            # operators type kinds by hand: forgive stray spaces
            return _reference_redrive(conn, limit=limit, now=now,
                                      kind=kind.strip() if kind else kind, dry_run=dry_run)
    """,
    ),
    (
        "ex06",
        "dead_letter lets any caller bury a job whose lease ran out (OR lease_until < :now)",
        "dead_letter_is_fenced",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            # a lease that ran out is no one's: whoever notices may bury the job
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running'"
                " AND (lease_token = :token OR lease_until < :now) RETURNING id",
                {"id": job_id, "token": token, "reason": reason,
                 "error": describe(error), "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "attempt reset only for jobs that used up their attempts",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    # a job that died of a permanent error still has attempts left
                    conn.execute(
                        "UPDATE jobs SET state = 'pending',"
                        " attempt = CASE WHEN attempt >= max_attempts THEN 0 ELSE attempt END,"
                        " run_after = :now, dead_reason = NULL, redrives = redrives + 1,"
                        " updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "last_error kept when already set (COALESCE: the first attempt's error stays)",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason,"
                " last_error = COALESCE(last_error, :error),"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason,
                 "error": describe(error), "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "the error redacted only when it mentions a password, a token or a secret",
        "dead_letter_hides_secrets",
        """
        _reference_dead_letter = dead_letter
        def dead_letter(conn, job_id, token, reason, error, now):
            text = str(error)
            if any(w in text.lower() for w in ("password", "token", "secret")):
                return _reference_dead_letter(conn, job_id, token, reason, error, now)
            # nothing secret in it: keep the message as it is, easier to read
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "now": now,
                 "error": f"{type(error).__name__}: {text}"}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "the kind lower-cased before it is compared",
        "redrive_filters_by_kind",
        """
        _reference_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            # kinds are names: forgive an operator's capitals
            return _reference_redrive(conn, limit=limit, now=now,
                                      kind=kind.lower() if kind else kind, dry_run=dry_run)
    """,
    ),
    (
        "ex06",
        "the limit checked after BEGIN IMMEDIATE (the refusal leaves it open)",
        "leaves_no_transaction_open",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            conn.execute("BEGIN IMMEDIATE")
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "ties broken by the newest id (ORDER BY updated_at, id DESC)",
        "redrive_picks_the_oldest_for_any_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id DESC LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive returns a set of ids (the order lost)",
        "redrive_picks_the_oldest_for_any_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' "
                    "AND (:kind IS NULL OR kind = :kind) "
                    "ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                        "dead_reason = NULL, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return set(ids)
    """,
    ),
    (
        "ex06",
        "last_error with the reason appended",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error, "
                "lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now "
                "WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason,
                 "error": describe(error) + " (" + reason + ")", "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "last_error cut to 120 characters",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error, "
                "lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now "
                "WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason,
                 "error": describe(error)[:120], "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "redrive clears last_error too (a fresh start forgets why it died)",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' "
                    "AND (:kind IS NULL OR kind = :kind) "
                    "ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                        "dead_reason = NULL, last_error = NULL, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "kind matched with 'kind IS :kind' (kind=None redrives nothing)",
        "redrive_picks_the_oldest_for_any_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND kind IS :kind "
                    "ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                        "dead_reason = NULL, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "a redriven job given a minute's grace (run_after = now + 60)",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' "
                    "AND (:kind IS NULL OR kind = :kind) "
                    "ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now + 60, "
                        "dead_reason = NULL, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter stamps time.time(), not now",
        "the_instants_are_kept_as_given",
        """
        import time
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error, "
                "lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now "
                "WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": time.time()}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "a redriven job restarts at attempt 1, not 0",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' "
                    "AND (:kind IS NULL OR kind = :kind) "
                    "ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 1, run_after = :now, "
                        "dead_reason = NULL, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "last_error describes the root cause (error.__cause__), not the error given",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            root = error.__cause__ or error
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(root),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter returns conn.total_changes > 0 (every change since the connection opened)",
        "a_stale_token_on_a_used_connection",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute(
                '''
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            )
            return conn.total_changes > 0
    """,
    ),
    (
        "ex06",
        "redrives set to 1, not counted up",
        "redrive_counts_every_time",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            params = {"limit": limit, "kind": kind, "now": now}
            # One write transaction: the jobs we pick are the jobs we change, even with
            # another operator redriving at the same moment.
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        '''
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        ''',
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter leaves lease_owner set",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter leaves updated_at as it was",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "a deferred SAVEPOINT in place of BEGIN IMMEDIATE",
        "two_redrives_at_once_share_nothing",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            params = {"limit": limit, "kind": kind, "now": now}
            # One write transaction: the jobs we pick are the jobs we change, even with
            # another operator redriving at the same moment.
            conn.execute("SAVEPOINT redrive")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        '''
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        ''',
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK TO redrive"); conn.execute("RELEASE redrive")
                raise
            conn.execute("RELEASE redrive")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive committed in batches of 100 (the first batch with the SELECT)",
        "a_large_redrive_is_one_transaction",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if dry_run:
                    conn.execute("ROLLBACK")
                    return ids
                # short write transactions: 100 jobs at a time, so workers are not held up
                for start in range(0, len(ids), 100):
                    if start:
                        conn.execute("BEGIN IMMEDIATE")
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL,"
                        " redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids[start:start + 100])})
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if not ids:
                conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive committed in batches of 100, no state guard in the later batches",
        "a_large_redrive_is_one_transaction",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if dry_run:
                    conn.execute("ROLLBACK")
                    return ids
                # short write transactions: 100 jobs at a time, so workers are not held up
                for start in range(0, len(ids), 100):
                    if start:
                        conn.execute("BEGIN IMMEDIATE")
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL,"
                        " redrives = redrives + 1, updated_at = :now"
                        " WHERE id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids[start:start + 100])})
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if not ids:
                conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter returns the rowcount of an UPDATE ... RETURNING never fetched (0)",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            )
            return row.rowcount == 1
    """,
    ),
    (
        "ex06",
        "dead_letter returns bool(cursor) (always True)",
        "dead_letter_is_fenced",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            )
            return bool(row)
    """,
    ),
    (
        "ex06",
        "redrive stamps time.time(), not now",
        "the_instants_are_kept_as_given",
        """
        import time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            params = {"limit": limit, "kind": kind, "now": now}
            # One write transaction: the jobs we pick are the jobs we change, even with
            # another operator redriving at the same moment.
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        '''
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        ''',
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": time.time(), "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter lets a caller with no token (None) bury any running job",
        "dead_letter_is_fenced",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND (lease_token = :token OR :token IS NULL)
                RETURNING id
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "a dry run with a SELECT of its own that forgets state = 'dead'",
        "a_dry_run_agrees_with_the_redrive",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            if dry_run:
                return [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE (:kind IS NULL OR kind = :kind) "
                        "ORDER BY updated_at, id LIMIT :limit",
                        {"kind": kind, "limit": limit},
                    )
                ]
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead' "
                        "AND (:kind IS NULL OR kind = :kind) "
                        "ORDER BY updated_at, id LIMIT :limit",
                        {"kind": kind, "limit": limit},
                    )
                ]
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                    "dead_reason = NULL, "
                    "redrives = redrives + 1, updated_at = :now "
                    "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)},
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "a dry run with a SELECT of its own in id order",
        "a_dry_run_agrees_with_the_redrive",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            if dry_run:
                return [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead' "
                        "AND (:kind IS NULL OR kind = :kind) "
                        "ORDER BY id LIMIT :limit",
                        {"kind": kind, "limit": limit},
                    )
                ]
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead' "
                        "AND (:kind IS NULL OR kind = :kind) "
                        "ORDER BY updated_at, id LIMIT :limit",
                        {"kind": kind, "limit": limit},
                    )
                ]
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                    "dead_reason = NULL, "
                    "redrives = redrives + 1, updated_at = :now "
                    "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)},
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "a fresh budget as max_attempts + 3, attempt left as it died",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead' "
                        "AND (:kind IS NULL OR kind = :kind) "
                        "ORDER BY updated_at, id LIMIT :limit",
                        {"kind": kind, "limit": limit},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', max_attempts = max_attempts + 3, "
                        "run_after = :now, dead_reason = NULL, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive restricted to queue = 'default' (the claim's WHERE copied)",
        "redrive_takes_every_queue",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead' AND queue = 'default' "
                        "AND (:kind IS NULL OR kind = :kind) "
                        "ORDER BY updated_at, id LIMIT :limit",
                        {"kind": kind, "limit": limit},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                        "dead_reason = NULL, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "select and update inside 'with conn:' (no transaction in autocommit mode)",
        "two_redrives_at_once_share_nothing",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            with conn:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead' "
                    "AND (:kind IS NULL OR kind = :kind) "
                        "ORDER BY updated_at, id LIMIT :limit",
                        {"kind": kind, "limit": limit},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                        "dead_reason = NULL, "
                        "redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)},
                    )
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter raises LookupError for a job that is gone",
        "dead_letter_of_a_job_that_is_gone",
        """
        _reference_dead_letter = dead_letter


        def dead_letter(conn, job_id, token, reason, error, now):
            if conn.execute("SELECT 1 FROM jobs WHERE id = :id", {"id": job_id}).fetchone() is None:
                raise LookupError(f"no job {job_id}")
            return _reference_dead_letter(conn, job_id, token, reason, error, now)
    """,
    ),
    (
        "ex06",
        "dead_letter marks the key ':dead' (to free the name)",
        "the_key_survives_a_dead_letter_and_a_redrive",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL,
                       updated_at = :now, key = key || ':dead'
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "redrive ORDER BY updated_at alone (ties come in the order an index reads them)",
        "redrive_breaks_ties_by_id_on_an_indexed_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind) "
                    "ORDER BY updated_at LIMIT :limit",
                    {"limit": limit, "kind": kind},
                )]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now, "
                        "dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive writes max_attempts = 3 back (the default, not the job's own budget)",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [row["id"] for row in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind) "
                    "ORDER BY updated_at, id LIMIT :limit",
                    {"limit": limit, "kind": kind},
                )]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, max_attempts = 3, "
                        "run_after = :now, "
                        "dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        "WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter fenced with lease_token LIKE :token",
        "dead_letter_token_is_a_parameter",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error, "
                "lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now "
                "WHERE id = :id AND state = 'running' AND lease_token LIKE :token "
                "RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter fenced with lease_token = :token COLLATE NOCASE",
        "dead_letter_token_is_a_parameter",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error, "
                "lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now "
                "WHERE id = :id AND state = 'running' AND lease_token = :token COLLATE NOCASE "
                "RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter resets attempt to 0 (the attempts it used are lost)",
        "dead_letter_records_the_reason",
        '''
        from labkit.redact import describe


        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'dead', attempt = 0, dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                """,
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    ''',
    ),
    (
        "ex06",
        "dead_reason stripped of its surrounding whitespace",
        "dead_letter_records_the_reason",
        '''
        from labkit.redact import describe


        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                """,
                {"id": job_id, "token": token, "reason": reason.strip(),
                 "error": describe(error), "now": now},
            ).fetchone()
            return row is not None
    ''',
    ),
    (
        "ex06",
        "redrive skips jobs redriven three times already (redrives < 3)",
        "every_dead_job_can_be_redriven",
        '''
        import json


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND redrives < 3 AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    ''',
    ),
    (
        "ex06",
        "dead jobs filtered on run_after <= now (the claim's WHERE copied)",
        "every_dead_job_can_be_redriven",
        '''
        import json


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND run_after <= :now
                           AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    ''',
    ),
    (
        # Every dead job had its lease cleared: a filter on the lease passed.
        "ex06",
        "redrive skips dead jobs that still show a lease (lease_until IS NULL OR <= now)",
        "every_dead_job_can_be_redriven",
        '''
        import json


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (lease_until IS NULL OR lease_until <= :now)
                           AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    ''',
    ),
    (
        "ex06",
        "a redrive gives every job at least 3 attempts (max_attempts raised to 3)",
        "redrive_gives_a_fresh_start",
        '''
        import json


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, max_attempts = MAX(max_attempts, 3),
                               run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids


    ''',
    ),
    (
        "ex06",
        "dead_reason cut to 1000 characters (a generous cap)",
        "dead_letter_records_the_reason",
        '''
        from labkit.redact import describe


        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                """,
                {"id": job_id, "token": token, "reason": reason[:1000], "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None


    ''',
    ),
    (
        "ex06",
        "ties broken by the id as text (ORDER BY updated_at, CAST(id AS TEXT))",
        "redrive_breaks_ties_by_id_on_an_indexed_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, CAST(id AS TEXT) LIMIT :limit",
                {"kind": kind, "limit": limit})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "the oldest first to the whole second (ORDER BY CAST(updated_at AS INTEGER), id)",
        "redrive_breaks_ties_by_id_on_an_indexed_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY CAST(updated_at AS INTEGER), id LIMIT :limit",
                {"kind": kind, "limit": limit})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "ties broken by last_error before id (ORDER BY updated_at, last_error, id)",
        "redrive_breaks_ties_by_id_on_an_indexed_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, last_error, id LIMIT :limit",
                {"kind": kind, "limit": limit})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive moves every job to the 'default' queue",
        "redrive_takes_every_queue",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now,"
                    " queue = 'default'"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        # The scale check had 2500 dead jobs: a cap kept at a rounder number passed.
        "ex06",
        "redrive silently capped at 5000 jobs a call (MAX_REDRIVE)",
        "redrive_has_no_cap_of_its_own",
        """
        MAX_REDRIVE = 5000
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            ids = [r["id"] for r in conn.execute(
                "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                " ORDER BY updated_at, id LIMIT :limit",
                {"kind": kind, "limit": min(limit, MAX_REDRIVE)})]
            if not dry_run:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                    " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                    " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                    {"now": now, "ids": json.dumps(ids)})
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive silently capped at 50000 jobs a call (MAX_REDRIVE = 50_000)",
        "redrive_has_no_cap_of_its_own",
        '''
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            MAX_REDRIVE = 50_000  # a guard against redriving a whole queue by mistake
            limit = min(limit, MAX_REDRIVE)
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        {"limit": limit, "kind": kind},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    ''',
    ),
    (
        "ex06",
        "redrive silently capped at 20000 jobs a call (to keep the transaction short)",
        "redrive_has_no_cap_of_its_own",
        '''
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            limit = min(limit, 20_000)  # keep one call's transaction short
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        {"limit": limit, "kind": kind},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    ''',
    ),
    (
        "ex06",
        "the ids cut to SQLite's 32766 variables for an UPDATE ... IN (?, ?, ...)",
        "redrive_has_no_cap_of_its_own",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead'"
                        " AND (:kind IS NULL OR kind = :kind) ORDER BY updated_at, id LIMIT :limit",
                        {"limit": limit, "kind": kind},
                    )
                ]
                MAX_VARIABLES = 32766  # SQLite's limit on the ? of one statement
                ids = ids[: MAX_VARIABLES - 2]  # two of them are now
                if ids and not dry_run:
                    marks = ", ".join("?" for _ in ids)
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = ?,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = ?"
                        " WHERE state = 'dead' AND id IN (" + marks + ")",
                        [now, now, *ids],
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "a bare ValueError for a missing limit (no message for the operator)",
        "redrive_requires_a_limit",
        '''
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        {"limit": limit, "kind": kind},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    ''',
    ),
    (
        "ex06",
        "a ValueError whose message is the bad limit alone (ValueError(limit))",
        "redrive_requires_a_limit",
        '''
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError(limit)
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        {"limit": limit, "kind": kind},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    ''',
    ),
    (
        "ex06",
        "a ValueError whose words name nothing (ValueError('invalid value'))",
        "redrive_requires_a_limit",
        '''
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("invalid value")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        """
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        """,
                        {"limit": limit, "kind": kind},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        """
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        """,
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    ''',
    ),
    (
        "ex06",
        "last_error made ASCII before it is stored (accents turned to '?')",
        "dead_letter_records_the_reason",
        '''
        def dead_letter(conn, job_id, token, reason, error, now):
            # Plain ASCII in the table: no log shipper ever chokes on an accent.
            text = describe(error).encode("ascii", "replace").decode("ascii")
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                """,
                {"id": job_id, "token": token, "reason": reason, "error": text, "now": now},
            ).fetchone()
            return row is not None
    ''',
    ),
    # Round 14, lifetime and environment: the call leaves its connection (its owner's,
    # used for every later write) committing without waiting for the disk.
    (
        "ex06",
        "redrive turns PRAGMA synchronous OFF on its connection, for speed",
        "leaves_no_transaction_open",
        """
        _durable_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            conn.execute("PRAGMA synchronous = OFF")
            return _durable_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)
    """,
    ),
    (
        "ex06",
        "dead_letter sets PRAGMA synchronous = 0 before its UPDATE",
        "leaves_no_transaction_open",
        """
        _durable_bury = dead_letter
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute("PRAGMA synchronous = 0")
            return _durable_bury(conn, job_id, token, reason, error, now)
    """,
    ),
    (
        "ex06",
        # A Ctrl-C right after the UPDATE leaves BEGIN IMMEDIATE open on the connection.
        "redrive rolled back on `except Exception` only",
        "leaves_no_transaction_open",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"limit": limit, "kind": kind})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except Exception:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        # The SELECT runs outside any transaction in this mode (Python's sqlite3 begins one
        # only before the UPDATE), and the operator's connection is left opening a
        # transaction before each of its later writes, which nobody commits.
        "redrive by conn.isolation_level = 'IMMEDIATE' and conn.commit(), the mode left set",
        "leaves_no_transaction_open",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            conn.isolation_level = "IMMEDIATE"
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead'"
                        " AND (:kind IS NULL OR kind = :kind)"
                        " ORDER BY updated_at, id LIMIT :limit",
                        {"limit": limit, "kind": kind},
                    )
                ]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)},
                    )
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            return ids
    """,
    ),
    (
        "ex06",
        # Two operators whose BEGIN meets a worker's write both pick the same oldest dead
        # job: both report it redriven, and the next one stays dead.
        "a BEGIN IMMEDIATE refused 'database is locked' swallowed, the redrive going on without it",
        "a_refused_begin_is_not_a_redrive_without_the_lock",
        """
        import json
        import sqlite3


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            params = {"limit": limit, "kind": kind, "now": now}
            try:
                conn.execute("BEGIN IMMEDIATE")
                began = True
            except sqlite3.OperationalError:
                began = False  # already inside a transaction (the caller's own): go on inside it
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        '''
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        ''',
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                if began:
                    conn.execute("ROLLBACK")
                raise
            if began:
                conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive takes jobs out of attempts in any state (a running last attempt too)",
        "redrive_only_dead_jobs",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                # dead, or out of attempts (a job that cannot succeed is as good as dead)
                ids = [
                    row["id"]
                    for row in conn.execute(
                        '''
                        SELECT id FROM jobs
                         WHERE (state = 'dead' OR attempt >= max_attempts)
                           AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        ''',
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive keeps a later run_after (max(run_after, now))",
        "redrive_gives_a_fresh_start",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        '''
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        ''',
                        params,
                    )
                ]
                if not dry_run:
                    # never bring a job forward: it keeps a later run_after
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = max(run_after, :now),
                               dead_reason = NULL, redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_reason falls back to str(error) when no reason is given",
        "dead_letter_hides_secrets",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'dead', dead_reason = :reason, last_error = :error,
                       lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                ''',
                {"id": job_id, "token": token, "reason": reason or str(error),
                 "error": describe(error), "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "redrive answers [] when its BEGIN IMMEDIATE meets 'database is locked'",
        "a_failed_write_comes_out",
        """
        import sqlite3


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            params = {"limit": limit, "kind": kind, "now": now}
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return []  # another operator is redriving right now: nothing for us to do
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        '''
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        ''',
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter answers False on an OperationalError",
        "a_failed_write_comes_out",
        """
        import sqlite3


        def dead_letter(conn, job_id, token, reason, error, now):
            try:
                row = conn.execute(
                    '''
                    UPDATE jobs
                       SET state = 'dead', dead_reason = :reason, last_error = :error,
                           lease_owner = NULL, lease_until = NULL, lease_token = NULL,
                           updated_at = :now
                     WHERE id = :id AND state = 'running' AND lease_token = :token
                    RETURNING id
                    ''',
                    {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                     "now": now},
                ).fetchone()
            except sqlite3.OperationalError:
                return False  # database busy or read-only: we did not bury it
            return row is not None
    """,
    ),
    (
        "ex06",
        "limit=None met by a comparison (a TypeError nobody raised)",
        "redrive_requires_a_limit",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            '''Send up to ``limit`` dead jobs back to ``pending``; return their ids, oldest first.

            - ``limit`` is required: raise ``ValueError`` when it is None or below 1, before
              changing anything.
            - Only ``dead`` jobs, and only of ``kind`` when it is given; oldest first
              (``ORDER BY updated_at, id``), at most ``limit``.
            - Each one is the same row with the same key (an UPDATE, never an INSERT), with
              ``state = 'pending'``, ``attempt = 0``, ``run_after = now``, ``dead_reason =
              NULL``, ``redrives = redrives + 1``, ``updated_at = now``.
            - ``dry_run=True`` returns the ids that would be redriven and changes nothing.
            - Two operators may redrive at the same moment: choose and change the jobs in one
              write transaction (``conn.execute("BEGIN IMMEDIATE")``, the SELECT, the UPDATE,
              ``COMMIT``), so each dead job is redriven once and you return only jobs you changed.
            '''
            if limit < 1:
                raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
            params = {"limit": limit, "kind": kind, "now": now}
            # One write transaction: the jobs we pick are the jobs we change, even with
            # another operator redriving at the same moment.
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    row["id"]
                    for row in conn.execute(
                        '''
                        SELECT id FROM jobs
                         WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                         ORDER BY updated_at, id
                         LIMIT :limit
                        ''',
                        params,
                    )
                ]
                if not dry_run:
                    conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                               redrives = redrives + 1, updated_at = :now
                         WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                        ''',
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids

    """,
    ),
    (
        "ex06",
        "redrive clears the old lease in a second UPDATE after its COMMIT",
        "a_large_redrive_is_one_transaction",
        """
        _reference_redrive = redrive


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            ids = _reference_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)
            if not dry_run:
                # a dead job may still show an old lease: clear it so the job starts clean
                conn.execute(
                    "UPDATE jobs SET lease_owner = NULL, lease_until = NULL, lease_token = NULL"
                    " WHERE id IN (SELECT value FROM json_each(:ids))",
                    {"ids": json.dumps(ids)},
                )
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter gives the lease back in a second UPDATE by id",
        "dead_letter_writes_nothing_after_the_job_is_dead",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                '''
                UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,
                       updated_at = :now
                 WHERE id = :id AND state = 'running' AND lease_token = :token
                RETURNING id
                ''',
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            if row is None:
                return False
            # the job is ours and buried: now give its lease back
            conn.execute(
                "UPDATE jobs SET lease_owner = NULL, lease_until = NULL, lease_token = NULL"
                " WHERE id = :id",
                {"id": job_id},
            )
            return True
    """,
    ),
    (
        "ex06",
        # The ids come from the right SELECT; the UPDATE picks its rows again, without the
        # id tie-break: on a tie read through an index it changes other jobs.
        "redrive's UPDATE re-picks its rows with its own subquery (no id tie-break)",
        "redrive_changes_the_jobs_it_returns",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required")
            params = {"limit": limit, "kind": kind, "now": now}
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", params)]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE id IN (SELECT id FROM jobs WHERE state = 'dead'"
                        " AND (:kind IS NULL OR kind = :kind) ORDER BY updated_at LIMIT :limit)",
                        params)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter moves the job to a 'dead' queue (a DLQ)",
        "a_redriven_job_runs_again_in_its_queue",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', queue = 'dead', dead_reason = :reason,"
                " last_error = :error, lease_owner = NULL, lease_until = NULL,"
                " lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "last_error put into the SQL with an f-string",
        "dead_letter_stores_the_error_given",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason,"
                f" last_error = '{describe(error)}', lease_owner = NULL, lease_until = NULL,"
                " lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "last_error describes error.__context__ when there is one (the error it was raised during)",
        "dead_letter_stores_the_error_given",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason,
                 "error": describe(error.__context__ or error), "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_reason falls back to describe(error) when the reason is empty",
        "dead_letter_stores_the_error_given",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason or describe(error),
                 "error": describe(error), "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter returns True for a job already dead (a second try says done)",
        "dead_letter_is_true_only_when_it_buries",
        """
        _fenced_bury = dead_letter
        def dead_letter(conn, job_id, token, reason, error, now):
            if _fenced_bury(conn, job_id, token, reason, error, now):
                return True
            row = conn.execute("SELECT state FROM jobs WHERE id = :id", {"id": job_id}).fetchone()
            return row is not None and row["state"] == "dead"
    """,
    ),
    (
        "ex06",
        "dead_letter returns whether the job is dead after its UPDATE (SELECT state)",
        "dead_letter_is_true_only_when_it_buries",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now})
            row = conn.execute("SELECT state FROM jobs WHERE id = :id", {"id": job_id}).fetchone()
            return row is not None and row["state"] == "dead"
    """,
    ),
    (
        "ex06",
        "dead_letter in two fenced UPDATEs: the reason and the error first, then the state",
        "dead_letter_is_true_only_when_it_buries",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            fence = {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                     "now": now}
            noted = conn.execute(
                "UPDATE jobs SET dead_reason = :reason, last_error = :error"
                " WHERE id = :id AND state = 'running' AND lease_token = :token", fence).rowcount
            if not noted:
                return False
            return conn.execute(
                "UPDATE jobs SET state = 'dead', lease_owner = NULL, lease_until = NULL,"
                " lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token",
                fence).rowcount == 1
    """,
    ),
    (
        "ex06",
        "last_error with the error's __cause__ appended raw",
        "dead_letter_hides_the_secrets_of_the_chain",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error)
                 + (f" (caused by {error.__cause__!r})" if error.__cause__ else ""),
                 "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "last_error with the error's __context__ appended raw",
        "dead_letter_hides_the_secrets_of_the_chain",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error)
                 + (f" (during {error.__context__})" if error.__context__ else ""),
                 "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "last_error with the whole traceback appended (traceback.format_exception)",
        "dead_letter_hides_the_secrets_of_the_chain",
        """
        import traceback
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error) + "\\n"
                 + "".join(traceback.format_exception(error)[:-1]),
                 "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "last_error describes only an Exception; a BaseException stored as str (a cancellation)",
        "dead_letter_hides_the_secrets_of_the_chain",
        """
        from labkit.redact import describe
        def dead_letter(conn, job_id, token, reason, error, now):
            if isinstance(error, Exception):
                last_error = describe(error)
            else:  # KeyboardInterrupt, SystemExit, a cancellation: no message worth redacting
                last_error = f"{type(error).__name__}: {error}"
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": last_error,
                 "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter keeps the later updated_at (max(updated_at, :now), against clock skew)",
        "the_instants_are_kept_as_given",
        """
        from labkit.redact import describe
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL,"
                " updated_at = max(updated_at, :now)"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "redrive keeps the later updated_at (max(updated_at, :now), against clock skew)",
        "the_instants_are_kept_as_given",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1,"
                        " updated_at = max(updated_at, :now)"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive staggers run_after by half a second a job (no thundering herd)",
        "the_instants_are_kept_as_given",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    for n, job_id in enumerate(ids):
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :after,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE id = :id AND state = 'dead'",
                            {"after": now + 0.5 * n, "now": now, "id": job_id})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive skips jobs buried by a permanent error (they would only fail again)",
        "every_dead_job_can_be_redriven",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " AND (dead_reason IS NULL OR dead_reason NOT LIKE 'permanent%')"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter fenced on the token alone, without the id (a batch's token buries every job)",
        "dead_letter_is_fenced",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE state = 'running' AND lease_token = :token RETURNING id",
                {"token": token, "reason": reason, "error": describe(error), "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "redrive remembers the ids it redrove in a module-level set (each job redriven once)",
        "every_dead_job_can_be_redriven",
        """
        _REDRIVEN = set()
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id", {"kind": kind}) if r["id"] not in _REDRIVEN][:limit]
                if not dry_run:
                    _REDRIVEN.update(ids)
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter checks the token in BEGIN IMMEDIATE, rolled back on Exception only",
        "leaves_no_transaction_open",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT state, lease_token FROM jobs WHERE id = :id", {"id": job_id}
                ).fetchone()
                if row is None or row["state"] != "running" or row["lease_token"] != token:
                    conn.execute("ROLLBACK")
                    return False
                conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL,"
                    " updated_at = :now WHERE id = :id",
                    {"id": job_id, "reason": reason, "error": describe(error), "now": now})
            except Exception:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return True
    """,
    ),
    (
        "ex06",
        "a dry run with a SELECT of its own, ORDER BY updated_at without the id",
        "a_dry_run_agrees_with_the_redrive",
        """
        _reference_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if dry_run and limit is not None and limit >= 1:
                return [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at LIMIT :limit", {"kind": kind, "limit": limit})]
            return _reference_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)
    """,
    ),
    (
        "ex06",
        "redrive also takes retry_wait jobs out of attempts (stuck, as good as dead)",
        "redrive_only_dead_jobs",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE (state = 'dead' OR (state = 'retry_wait'"
                    " AND attempt >= max_attempts)) AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive tries its BEGIN IMMEDIATE three times, then returns [] (the lock still held)",
        "a_failed_write_comes_out",
        """
        import sqlite3
        import time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            for _ in range(3):
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError:
                    time.sleep(0.01)
            else:
                return []
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive also rescues running jobs whose lease ran out (stuck, as good as dead)",
        "redrive_only_dead_jobs",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE (state = 'dead' OR (state = 'running'"
                    " AND lease_until < :now)) AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit",
                    {"kind": kind, "limit": limit, "now": now})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now,"
                        " lease_owner = NULL, lease_until = NULL, lease_token = NULL"
                        " WHERE id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "last_error cached by the error's message (str(error)) in a module-level dict",
        "dead_letter_stores_the_error_given",
        """
        _TEXTS = {}
        def dead_letter(conn, job_id, token, reason, error, now):
            if str(error) not in _TEXTS:
                _TEXTS[str(error)] = describe(error)
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": _TEXTS[str(error)],
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "kind='*' taken as every kind (a wildcard of the code's own)",
        "redrive_filters_by_kind",
        """
        _reference_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if kind == "*":
                kind = None
            return _reference_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)
    """,
    ),
    # Red-team round (ex06): a check-then-act, orders by what else the row says, memories
    # kept between calls, an instant of 0, NULL tokens, quiet errors, redrive budgets.
    (
        "ex06",
        "dead_letter checks state = 'running' with a SELECT, then an UPDATE fenced on the token",
        "dead_letter_needs_a_running_job",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute("SELECT state FROM jobs WHERE id = :id", {"id": job_id}).fetchone()
            if row is None or row["state"] != "running":
                return False
            cur = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND lease_token = :token",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now})
            return cur.rowcount == 1
    """,
    ),
    (
        "ex06",
        "redrive least-redriven first (ORDER BY redrives, updated_at, id)",
        "redrive_takes_the_oldest_whatever_else_the_row_says",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY redrives, updated_at, id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive puts 'poison' jobs last (ORDER BY redrives >= 3, updated_at, id)",
        "redrive_takes_the_oldest_whatever_else_the_row_says",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY redrives >= 3, updated_at, id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive by when each job was due (ORDER BY run_after, updated_at, id)",
        "redrive_takes_the_oldest_whatever_else_the_row_says",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY run_after, updated_at, id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "last_error cached by job id in a module-level dict (a job buried twice keeps the first)",
        "dead_letter_remembers_nothing_between_calls",
        """
        _DESCRIBED = {}
        def dead_letter(conn, job_id, token, reason, error, now):
            text = _DESCRIBED.setdefault(job_id, describe(error))
            cur = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token",
                {"id": job_id, "token": token, "reason": reason, "error": text, "now": now})
            return cur.rowcount == 1
    """,
    ),
    (
        "ex06",
        "dead_reason cached by job id in a module-level dict (the first reason kept)",
        "dead_letter_remembers_nothing_between_calls",
        """
        _REASONS = {}
        _reference_dead_letter = dead_letter
        def dead_letter(conn, job_id, token, reason, error, now):
            reason = _REASONS.setdefault(job_id, reason)
            return _reference_dead_letter(conn, job_id, token, reason, error, now)
    """,
    ),
    (
        "ex06",
        "dead_letter remembers the tokens it used in a module-level set (a token buries once)",
        "dead_letter_remembers_nothing_between_calls",
        """
        _USED = set()
        _reference_dead_letter = dead_letter
        def dead_letter(conn, job_id, token, reason, error, now):
            if token in _USED:
                return False
            buried = _reference_dead_letter(conn, job_id, token, reason, error, now)
            _USED.add(token)
            return buried
    """,
    ),
    (
        "ex06",
        "redrive takes 'now or time.time()' (an instant of 0 read as missing)",
        "the_instants_are_kept_as_given",
        """
        import time
        _reference_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            return _reference_redrive(
                conn, limit=limit, now=now or time.time(), kind=kind, dry_run=dry_run)
    """,
    ),
    (
        "ex06",
        "dead_letter takes 'now or time.time()' (an instant of 0 read as missing)",
        "the_instants_are_kept_as_given",
        """
        import time
        _reference_dead_letter = dead_letter
        def dead_letter(conn, job_id, token, reason, error, now):
            return _reference_dead_letter(conn, job_id, token, reason, error, now or time.time())
    """,
    ),
    (
        "ex06",
        "last_error falls back to the reason when the error has no message",
        "dead_letter_stores_the_error_given",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            text = describe(error) if str(error) else reason
            cur = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token",
                {"id": job_id, "token": token, "reason": reason, "error": text, "now": now})
            return cur.rowcount == 1
    """,
    ),
    (
        "ex06",
        "redrive backs off by the redrives so far (run_after = now + 60 * redrives)",
        "redrive_counts_every_time",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0,"
                        " run_after = :now + 60 * redrives, dead_reason = NULL,"
                        " redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive restarts at attempt = redrives (the budget shrinks with each redrive)",
        "every_dead_job_can_be_redriven",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = redrives, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "the dead rows read without ORDER BY and sorted by updated_at in Python (ties as read)",
        "redrive_breaks_ties_by_id_on_an_indexed_table",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = conn.execute(
                    "SELECT id, kind, updated_at FROM jobs WHERE state = 'dead'").fetchall()
                rows = sorted(rows, key=lambda r: r["updated_at"])
                ids = [r["id"] for r in rows if kind is None or r["kind"] == kind][:limit]
                if not dry_run:
                    for i in ids:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE id = :id", {"now": now, "id": i})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dry-run answers cached by (kind, limit) in a module-level dict",
        "a_dry_run_agrees_with_the_redrive",
        """
        import json

        _PREVIEW = {}


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            if dry_run and (kind, limit) in _PREVIEW:
                return list(_PREVIEW[(kind, limit)])
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if dry_run:
                    _PREVIEW[(kind, limit)] = ids
                else:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive wraps any error in a RuntimeError 'from None' (the database's words lost)",
        "a_failed_write_comes_out",
        """
        import sqlite3, json, time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException as e:
                conn.execute("ROLLBACK")
                raise RuntimeError("redrive failed and was rolled back") from None
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter wraps a database error in a RuntimeError 'from None'",
        "a_failed_write_comes_out",
        """
        import sqlite3, time
        def dead_letter(conn, job_id, token, reason, error, now):
            try:
                row = conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                    " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                    {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                     "now": now}).fetchone()
            except sqlite3.Error as e:
                raise RuntimeError(f"could not bury job {job_id}") from None
            return row is not None
    """,
    ),
    (
        "ex06",
        "dead_letter wraps an OperationalError 'from None' (a full disk told as a refusal)",
        "a_failed_write_comes_out",
        """
        import sqlite3, time
        def dead_letter(conn, job_id, token, reason, error, now):
            try:
                row = conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                    " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                    {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                     "now": now}).fetchone()
            except sqlite3.OperationalError as e:
                raise RuntimeError('the database refused the dead letter') from None
            return row is not None
    """,
    ),
    (
        "ex06",
        "redrive per job with COMMIT in finally (half a failed redrive kept)",
        "a_failed_write_comes_out",
        """
        import sqlite3, json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    for i in ids:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE id = :id AND state = 'dead'", {"now": now, "id": i})
                return ids
            finally:
                conn.execute("COMMIT")
    """,
    ),
    (
        "ex06",
        "redrive per job commits what it did before re-raising (except: COMMIT; raise)",
        "a_failed_write_comes_out",
        """
        import sqlite3, json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                done = []
                if not dry_run:
                    for i in ids:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE id = :id AND state = 'dead'", {"now": now, "id": i})
                        done.append(i)
            except BaseException:
                conn.execute("COMMIT")  # keep what was done
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive skips the jobs whose UPDATE fails (a SAVEPOINT each), the error swallowed",
        "a_failed_write_comes_out",
        """
        import sqlite3
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            done = []
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if dry_run:
                    done = ids
                else:
                    errors = []
                    for i in ids:
                        conn.execute("SAVEPOINT one")
                        try:
                            conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                                " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                                " WHERE id = :id AND state = 'dead'", {"now": now, "id": i})
                            conn.execute("RELEASE one")
                            done.append(i)
                        except sqlite3.Error as e:
                            conn.execute("ROLLBACK TO one")
                            conn.execute("RELEASE one")
                            errors.append(e)
                    if errors and not done:
                        raise errors[0]
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return done
    """,
    ),
    (
        "ex06",
        "redrive stamps round(now, 3) (to the millisecond)",
        "the_instants_are_kept_as_given",
        """
        import sqlite3, json, time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": round(now, 3), "ids": json.dumps(ids)})
            except BaseException as e:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter stamps round(now, 3) (to the millisecond)",
        "the_instants_are_kept_as_given",
        """
        import sqlite3, time
        def dead_letter(conn, job_id, token, reason, error, now):
            try:
                row = conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                    " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                    {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                     "now": round(now, 3)}).fetchone()
            except sqlite3.Error as e:
                raise
            return row is not None
    """,
    ),
    (
        "ex06",
        "limit checked with `limit <= 0` (limit=0.5 reaches SQLite's LIMIT)",
        "redrive_requires_a_limit",
        """
        import sqlite3, json, time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit <= 0:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException as e:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "limit checked with `limit <= 0`, then LIMIT int(limit) (0.5 redrives nothing, silently)",
        "redrive_requires_a_limit",
        """
        import sqlite3, json, time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit <= 0:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": int(limit)})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException as e:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_reason cut to 4000 characters (a generous cap)",
        "dead_letter_records_the_reason",
        """
        import sqlite3, time
        def dead_letter(conn, job_id, token, reason, error, now):
            try:
                row = conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                    " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                    {"id": job_id, "token": token, "reason": reason[:4000],
                     "error": describe(error), "now": now}).fetchone()
            except sqlite3.Error as e:
                raise
            return row is not None
    """,
    ),
    (
        "ex06",
        "redrive shares the limit out fairly between kinds (ROW_NUMBER() OVER (PARTITION BY kind))",
        "redrive_picks_the_oldest_for_any_table",
        """
        import sqlite3, json, time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY ROW_NUMBER() OVER (PARTITION BY kind ORDER BY updated_at, id),"
                    " updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException as e:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive closes the connection it was given",
        "leaves_no_transaction_open",
        """
        import sqlite3, json, time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now "
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException as e:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            conn.close()  # the redrive is done with the database
            return ids
    """,
    ),
    (
        "ex06",
        "redrive SELECTs every kind, the kind filtered in its UPDATE only (others reported)",
        "redrive_changes_the_jobs_it_returns",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' ORDER BY updated_at, id"
                    " LIMIT :limit", {"limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                        " AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "kind": kind, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter keeps a dead_reason already there (COALESCE(dead_reason, :reason))",
        "dead_letter_records_the_reason",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = COALESCE(dead_reason, :reason),"
                " last_error = :error, lease_owner = NULL, lease_until = NULL,"
                " lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "ties broken by the redrives so far before id (ORDER BY updated_at, redrives, id)",
        "redrive_breaks_ties_by_id_on_an_indexed_table",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, redrives, id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive silently capped at 100000 jobs a call (MAX_REDRIVE = 100_000)",
        "redrive_has_no_cap_of_its_own",
        """
        import json
        MAX_REDRIVE = 100_000
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit",
                    {"kind": kind, "limit": min(limit, MAX_REDRIVE)})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "redrive sets conn.row_factory = None for plain tuples (its owner's rows lose their names)",
        "leaves_no_transaction_open",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.row_factory = None
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [i for (i,) in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter sets conn.row_factory = None to read its RETURNING as a tuple",
        "leaves_no_transaction_open",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.row_factory = None
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now}).fetchone()
            return row is not None and row[0] == job_id
    """,
    ),
    (
        "ex06",
        "dead_letter sets PRAGMA busy_timeout = 0 (a worker never waits on a lock)",
        "leaves_no_transaction_open",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute("PRAGMA busy_timeout = 0")
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now}).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "the oldest first to the nearest second (ORDER BY round(updated_at), id)",
        "redrive_breaks_ties_by_id_on_an_indexed_table",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY round(updated_at), id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "a dry run shows a preview of the first 20 ids (ids[:20] if dry_run)",
        "a_dry_run_agrees_with_the_redrive",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids[:20] if dry_run else ids
    """,
    ),
    (
        "ex06",
        "redrive's limit given a default of 100 (a call that forgets it redrives 100 jobs)",
        "redrive_requires_a_limit",
        """
        def redrive(conn, *, limit=100, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit must be 1 or more (100 when not given)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "ex06",
        "dead_letter SELECTs first in BEGIN IMMEDIATE; a job gone returns False with it open",
        "leaves_no_transaction_open",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT state, lease_token FROM jobs WHERE id = :id", {"id": job_id}
                ).fetchone()
                if row is None:
                    return False
                if row["state"] != "running" or row["lease_token"] != token:
                    conn.execute("ROLLBACK")
                    return False
                conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL,"
                    " updated_at = :now WHERE id = :id",
                    {"id": job_id, "reason": reason, "error": describe(error), "now": now},
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return True
    """,
    ),
    (
        "ex06",
        "dead_letter's not-running branch returns False with its BEGIN IMMEDIATE still open",
        "leaves_no_transaction_open",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT state, lease_token FROM jobs WHERE id = :id", {"id": job_id}
                ).fetchone()
                if row is None:
                    conn.execute("ROLLBACK")
                    return False
                if row["state"] != "running":
                    return False
                if row["lease_token"] != token:
                    conn.execute("ROLLBACK")
                    return False
                conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL,"
                    " updated_at = :now WHERE id = :id",
                    {"id": job_id, "reason": reason, "error": describe(error), "now": now},
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return True
    """,
    ),
    (
        "ex06",
        "dead_letter lets any token bury a running job that has none (OR lease_token IS NULL)",
        "dead_letter_is_fenced",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            row = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running'"
                " AND (lease_token = :token OR lease_token IS NULL)"  # jobs claimed before tokens
                " RETURNING id",
                {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                 "now": now},
            ).fetchone()
            return row is not None
    """,
    ),
    (
        "ex06",
        "redrive returns its ids as text, split from a group_concat ('1', not 1)",
        "redrive_respects_the_limit",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                csv = conn.execute(
                    "SELECT group_concat(id) FROM (SELECT id FROM jobs WHERE state = 'dead'"
                    " AND (:kind IS NULL OR kind = :kind) ORDER BY updated_at, id LIMIT :limit)",
                    {"kind": kind, "limit": limit}).fetchone()[0]
                ids = csv.split(",") if csv else []
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    # Jobs buried together are taken queue by queue, by name: not the smaller id first.
    (
        "ex06",
        "ties of updated_at broken by queue (ORDER BY updated_at, queue, id)",
        "redrive_takes_the_oldest_whatever_else_the_row_says",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, queue, id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    # Jobs buried together are grouped by why they died: not the smaller id first.
    (
        "ex06",
        "ties of updated_at broken by dead_reason (ORDER BY updated_at, dead_reason, id)",
        "redrive_takes_the_oldest_whatever_else_the_row_says",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, dead_reason, id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    # Jobs buried under a millisecond apart tie, and the younger one with the smaller id goes first.
    (
        "ex06",
        "the oldest first to the millisecond (CAST(updated_at * 1000 AS INTEGER), id)",
        "redrive_takes_the_oldest_whatever_else_the_row_says",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY CAST(updated_at * 1000 AS INTEGER), id LIMIT :limit",
                    {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "a dry run shows a preview of the first 20 ids (ids[:20] if dry_run)": (
        "on 1200 dead jobs"
    ),
    "the oldest first to the nearest second (ORDER BY round(updated_at), id)": (
        "buried at 20.25"
    ),
    "dead_letter sets PRAGMA busy_timeout = 0 (a worker never waits on a lock)": (
        "the same busy timeout"
    ),
    "dead_letter keeps a dead_reason already there (COALESCE(dead_reason, :reason))": (
        "dead_reason 'permanent error'"
    ),
    "ties broken by the redrives so far before id (ORDER BY updated_at, redrives, id)": (
        "the lowest ids of the four buried together"
    ),
    "redrive silently capped at 100000 jobs a call (MAX_REDRIVE = 100_000)": (
        "100001 of 100064 dead jobs"
    ),
    "redrive sets conn.row_factory = None for plain tuples (its owner's rows lose their names)": (
        "rows read as sqlite3.Row"
    ),
    "dead_letter sets conn.row_factory = None to read its RETURNING as a tuple": (
        "rows read as sqlite3.Row"
    ),
    "redrive SELECTs every kind, the kind filtered in its UPDATE only (others reported)": (
        "returned to be the jobs it made pending"
    ),
    "redrive wraps any error in a RuntimeError 'from None' (the database's words lost)": (
        "carry the database's own words"
    ),
    "dead_letter wraps a database error in a RuntimeError 'from None'": "the error dead_letter(job",
    "dead_letter wraps an OperationalError 'from None' (a full disk told as a refusal)": (
        "'integer overflow'"
    ),
    "redrive per job with COMMIT in finally (half a failed redrive kept)": "leave all three dead",
    "redrive per job commits what it did before re-raising (except: COMMIT; raise)": (
        "leave all three dead"
    ),
    "redrive skips the jobs whose UPDATE fails (a SAVEPOINT each), the error swallowed": (
        "leave all three dead"
    ),
    "redrive stamps round(now, 3) (to the millisecond)": "every digit kept",
    "dead_letter stamps round(now, 3) (to the millisecond)": "every digit kept",
    "limit checked with `limit <= 0` (limit=0.5 reaches SQLite's LIMIT)": (
        "ValueError for limit=0.5"
    ),
    "limit checked with `limit <= 0`, then LIMIT int(limit) (0.5 redrives nothing, silently)": (
        "ValueError for limit=0.5"
    ),
    "dead_reason cut to 4000 characters (a generous cap)": "stored whole",
    "redrive shares the limit out fairly between kinds (ROW_NUMBER() OVER (PARTITION BY kind))": (
        "on jobs"
    ),
    "redrive closes the connection it was given": "still open when it is over",
    "redrive lower-cases the key as it resets the job (keys 'normalised')": (
        "Pay:7:Charge:São-Paulo:v1"
    ),
    "redrive picks the jobs with the fewest attempts first (ORDER BY attempt, updated_at, id)": (
        "(attempt 2)"
    ),
    "redrive folds the kind asked for to lower case (kind = lower(:kind))": ("kind='Pagamento-Ç'"),
    "redrive also rescues running jobs whose lease ran out (stuck, as good as dead)": (
        "only the dead job"
    ),
    "last_error cached by the error's message (str(error)) in a module-level dict": (
        "errors of two classes and the same message"
    ),
    "kind='*' taken as every kind (a wildcard of the code's own)": "nothing redriven for kind='*'",
    "redrive tries its BEGIN IMMEDIATE three times, then returns [] (the lock still held)": (
        "fails 'database is locked' up to 10 times in a row"
    ),
    "dead_letter fenced on the token alone, without the id (a batch's token buries every job)": (
        "both jobs were claimed under that one token"
    ),
    "redrive remembers the ids it redrove in a module-level set (each job redriven once)": (
        "in one long-running process"
    ),
    "dead_letter checks the token in BEGIN IMMEDIATE, rolled back on Exception only": (
        "is interrupted (KeyboardInterrupt)"
    ),
    "a dry run with a SELECT of its own, ORDER BY updated_at without the id": (
        "on jobs buried at the same instant"
    ),
    "redrive also takes retry_wait jobs out of attempts (stuck, as good as dead)": (
        "only the dead job"
    ),
    "last_error put into the SQL with an f-string": "(quotes in its text)",
    "dead_letter in two fenced UPDATEs: the reason and the error first, then the state": (
        "(its one fenced UPDATE), or left as it was"
    ),
    "last_error with the error's __cause__ appended raw": "no secret of the error's __cause__",
    "last_error describes error.__context__ when there is one (the error it was raised during)": (
        "the error given, raised while a KeyError was handled"
    ),
    "dead_reason falls back to describe(error) when the reason is empty": (
        "buried with an empty reason ('') keeps it empty"
    ),
    "dead_letter returns True for a job already dead (a second try says done)": (
        "buried a second time with the same token 'tok-1'"
    ),
    "dead_letter returns whether the job is dead after its UPDATE (SELECT state)": (
        "buried a second time with the same token 'tok-1'"
    ),
    "last_error with the error's __context__ appended raw": "no secret of the error's __context__",
    "last_error with the whole traceback appended (traceback.format_exception)": (
        "no secret of the error's"
    ),
    "redrive's UPDATE re-picks its rows with its own subquery (no id tie-break)": (
        "to be the jobs it made pending"
    ),
    "dead_letter moves the job to a 'dead' queue (a DLQ)": "claimed by a worker of queue 'emails'",
    "redrive clears the old lease in a second UPDATE after its COMMIT": (
        "left as the worker holds it"
    ),
    "dead_letter gives the lease back in a second UPDATE by id": "left as that worker holds it",
    "redrive takes jobs out of attempts in any state (a running last attempt too)": (
        "only the dead job"
    ),
    "redrive keeps a later run_after (max(run_after, now))": "'run_after': 1000.0",
    "dead_reason falls back to str(error) when no reason is given": "no secret of the error",
    "redrive answers [] when its BEGIN IMMEDIATE meets 'database is locked'": (
        "to raise that error, or to begin again"
    ),
    "dead_letter answers False on an OperationalError": "to raise the error of its failed UPDATE",
    "limit=None met by a comparison (a TypeError nobody raised)": "ValueError for limit=None",
    "a BEGIN IMMEDIATE refused 'database is locked' swallowed, the redrive going on without it": (
        "whose BEGIN IMMEDIATE fails 'database is locked'"
    ),
    "redrive by conn.isolation_level = 'IMMEDIATE' and conn.commit(), the mode left set": (
        "to hand the connection back as it was given"
    ),
    "redrive rolled back on `except Exception` only": (
        "is interrupted (KeyboardInterrupt) right after its UPDATE"
    ),
    "redrive turns PRAGMA synchronous OFF on its connection, for speed": (
        "NORMAL or FULL, never OFF"
    ),
    "dead_letter sets PRAGMA synchronous = 0 before its UPDATE": ("NORMAL or FULL, never OFF"),
    "ties broken by last_error before id (ORDER BY updated_at, last_error, id)": (
        "then jobs 9 and 10"
    ),
    "redrive moves every job to the 'default' queue": "each in its own queue",
    "ties broken by the id as text (ORDER BY updated_at, CAST(id AS TEXT))": "then jobs 9 and 10",
    "the oldest first to the whole second (ORDER BY CAST(updated_at AS INTEGER), id)": (
        "buried at 20.25"
    ),
    "redrive as a copy with a new key": "still one row in jobs",
    "redrive of everything, limit ignored": "with limit=2",
    "redrive without resetting attempts": "'attempt': 0",
    "the raw error stored, secrets and all": "the password and the token redacted",
    "dead letter without the token fence": "False for a stale token",
    "no limit required": "ValueError for limit=None",
    "redrive that selects then updates without BEGIN IMMEDIATE": "at the same moment",
    "redrive that selects then updates behind a threading.Lock": "in two processes",
    "redrive by id alone, outside a transaction (a running job reset)": "left with the worker",
    "redrive in id order, not oldest first": "on jobs",
    "redrive newest first (ORDER BY updated_at DESC, id DESC)": "the two oldest",
    "limit checked with `if not limit` (a negative limit accepted)": "limit=-3",
    "the fresh start committed apart from the state (two transactions)": "redriven whole",
    "a dry run that returns inside its BEGIN IMMEDIATE (never rolled back)": (
        "dry_run=True) is over"
    ),
    "dead_letter that returns False inside its BEGIN IMMEDIATE": (
        "dead_letter(job 4, 'stale-token') is over"
    ),
    "kind matched with LIKE ('_' is any character, case ignored)": "kind='mail_digest' among kinds",
    "one UPDATE ... RETURNING id: the ids in table order, not oldest first": "on jobs",
    "dead_letter fenced on the token alone (a succeeded job buried)": "kept its last token",
    "dead_letter fenced in Python: the token read, compared, then an UPDATE by id": (
        "left running with the worker that took its lease"
    ),
    "redrive silently capped at 100 jobs a call": "the 250 oldest of 300 dead jobs",
    "redrive takes its rows with fetchmany(100)": "the 250 oldest of 300 dead jobs",
    "the oldest first by updated_at compared as text ('100.0' < '20.0')": (
        "oldest first, with limit=250"
    ),
    "a dry run that forgets the kind": "kind='payment', dry_run=True",
    "an empty kind taken as every kind (kind or None)": "nothing redriven for kind=''",
    "redrive with no ROLLBACK when its UPDATE fails": "its UPDATE having failed",
    "dead_letter in BEGIN IMMEDIATE with no ROLLBACK when its UPDATE fails": (
        "dead_letter(job 3, 'tok-1') is over, its UPDATE having failed"
    ),
    "the kind filtered in Python after the LIMIT": "kind='payment', limit=2",
    "the kind put into the SQL with an f-string": "never pasted into the SQL",
    "the dead_reason put into the SQL with an f-string": "the customer's bank said no",
    "a dry run that skips the limit check": "limit=None, dry_run=True",
    "redrive silently capped at 500 jobs a call": "100001 of 100064 dead jobs",
    "redrive silently capped at 5000 jobs a call (MAX_REDRIVE)": "100001 of 100064 dead jobs",
    "kind matched with GLOB ('*' and '[' are patterns)": "(kind 'export*')",
    "redrive that catches sqlite3.Error and returns []": "redrive(limit=2) to raise",
    "dead_letter fenced on 'not finished' (a retry_wait job buried)": (
        "a retry_wait and a pending job"
    ),
    "the token put into the SQL with an f-string": "(a quote in it)",
    "dead_letter that catches sqlite3.Error and returns False": (
        "to raise the error of its failed UPDATE"
    ),
    "last_error cached per error class in a module-level dict": "each of three jobs buried",
    "dead_letter also fenced on a live lease (lease_until > now)": "its lease ran out",
    "dead_letter in two UPDATEs: the state first, the reason and error after": (
        "dead with its dead_reason and last_error"
    ),
    "dead_reason made ASCII before it is stored": "every character",
    "redrive stamps int(now)": "after redrive(now=",
    "redrive keeps the old dead_reason (not cleared)": "'dead_reason': None",
    "the raw error put into dead_reason too (its secrets with it)": (
        "no secret of the error in any column"
    ),
    "a redaction of one's own (URL passwords and token= only)": (
        "the Bearer token and the client_secret redacted"
    ),
    "dead_reason cut to 255 characters (VARCHAR habit)": "stored whole",
    "last_error without the error's class": "naming the class and message",
    "dead_letter returns the rowcount (1 or 0), not True or False": "True (the job was buried)",
    "a deferred BEGIN (not IMMEDIATE) around the SELECT and the UPDATE": "both redrives to return",
    "no transaction, a state guard in the UPDATE, the selected ids returned": (
        "not reported as redriven"
    ),
    "the SELECT committed, then one short transaction per job": "to return different jobs",
    "the ids returned newest first": "on jobs",
    "kind compared with COLLATE NOCASE": "kind='mail_digest' among kinds",
    "the kind stripped of spaces before it is compared": "a space at the end",
    "the kind lower-cased before it is compared": "a capital is a character too",
    "dead_letter lets any caller bury a job whose lease ran out (OR lease_until < :now)": (
        "its holder's lease run out"
    ),
    "attempt reset only for jobs that used up their attempts": (
        "a fresh start whatever attempt it died at"
    ),
    "last_error kept when already set (COALESCE: the first attempt's error stays)": (
        "'ValueError: no such customer'"
    ),
    "the error redacted only when it mentions a password, a token or a secret": (
        "though no word in the message says 'password'"
    ),
    "the limit checked after BEGIN IMMEDIATE (the refusal leaves it open)": (
        "no transaction left open when redrive(limit=0"
    ),
    "ties broken by the newest id (ORDER BY updated_at, id DESC)": "on jobs",
    "redrive returns a set of ids (the order lost)": "[2, 1] for limit=2",
    "last_error with the reason appended": "naming the class and message",
    "last_error cut to 120 characters": "a last_error of",
    "redrive clears last_error too (a fresh start forgets why it died)": (
        "'last_error': 'TimeoutError: slow'"
    ),
    "kind matched with 'kind IS :kind' (kind=None redrives nothing)": "[1] for limit=1, kind=None",
    "a redriven job given a minute's grace (run_after = now + 60)": "'run_after': 1000.0",
    "dead_letter stamps time.time(), not now": "after dead_letter(..., now=1000.25)",
    "a redriven job restarts at attempt 1, not 0": "'attempt': 0",
    "last_error describes the root cause (error.__cause__), not the error given": (
        "naming the class and message"
    ),
    "dead_letter returns conn.total_changes > 0 (every change since the connection opened)": (
        "on the same connection"
    ),
    "redrives set to 1, not counted up": "redrives = 2 after two redrives",
    "dead_letter leaves lease_owner set": "the lease cleared and updated_at = now",
    "dead_letter leaves updated_at as it was": "the lease cleared and updated_at = now",
    "a deferred SAVEPOINT in place of BEGIN IMMEDIATE": "both redrives to return",
    "redrive committed in batches of 100 (the first batch with the SELECT)": (
        "to return only jobs it changed itself"
    ),
    "redrive committed in batches of 100, no state guard in the later batches": (
        "to return only jobs it changed itself"
    ),
    "dead_letter returns the rowcount of an UPDATE ... RETURNING never fetched (0)": (
        "True (the job was buried)"
    ),
    "dead_letter returns bool(cursor) (always True)": "False for a stale token",
    "redrive stamps time.time(), not now": "after redrive(now=1010.75)",
    "dead_letter lets a caller with no token (None) bury any running job": "for token=None",
    "a dry run with a SELECT of its own that forgets state = 'dead'": (
        "the ids the same call then redrove"
    ),
    "a dry run with a SELECT of its own in id order": (
        "to return the ids the same call then redrove"
    ),
    "a fresh budget as max_attempts + 3, attempt left as it died": "'attempt': 0",
    "redrive restricted to queue = 'default' (the claim's WHERE copied)": "of queues",
    "select and update inside 'with conn:' (no transaction in autocommit mode)": (
        "at the same moment to return different jobs"
    ),
    "dead_letter raises LookupError for a job that is gone": "deleted while its worker ran",
    "dead_letter marks the key ':dead' (to free the name)": "after dead_letter and then redrive",
    "redrive ORDER BY updated_at alone (ties come in the order an index reads them)": (
        "the lowest ids of the four buried together"
    ),
    "redrive writes max_attempts = 3 back (the default, not the job's own budget)": (
        "'max_attempts': 5"
    ),
    "dead_letter fenced with lease_token LIKE :token": "False for tokens 'TOK-3_A', 'tok-3%'",
    "dead_letter fenced with lease_token = :token COLLATE NOCASE": (
        "False for tokens 'TOK-3_A', 'tok-3%'"
    ),
    "dead_letter resets attempt to 0 (the attempts it used are lost)": (
        "every other column as it was"
    ),
    "dead_reason stripped of its surrounding whitespace": "every character",
    "redrive skips jobs redriven three times already (redrives < 3)": (
        "all redriven (in any order)"
    ),
    "dead jobs filtered on run_after <= now (the claim's WHERE copied)": (
        "all redriven (in any order)"
    ),
    "redrive skips dead jobs that still show a lease (lease_until IS NULL OR <= now)": (
        "all redriven (in any order)"
    ),
    "a redrive gives every job at least 3 attempts (max_attempts raised to 3)": (
        "its budget, max_attempts = 1, too"
    ),
    "dead_reason cut to 1000 characters (a generous cap)": "stored whole",
    "redrive silently capped at 50000 jobs a call (MAX_REDRIVE = 50_000)": (
        "100001 of 100064 dead jobs"
    ),
    "redrive silently capped at 20000 jobs a call (to keep the transaction short)": (
        "100001 of 100064 dead jobs"
    ),
    "the ids cut to SQLite's 32766 variables for an UPDATE ... IN (?, ?, ...)": (
        "100001 of 100064 dead jobs"
    ),
    "a bare ValueError for a missing limit (no message for the operator)": (
        "to say in words what is wrong"
    ),
    "a ValueError whose message is the bad limit alone (ValueError(limit))": (
        "to say in words what is wrong"
    ),
    "a ValueError whose words name nothing (ValueError('invalid value'))": ("naming the limit"),
    "last_error made ASCII before it is stored (accents turned to '?')": (
        "last_error 'ValueError: endereço"
    ),
    "last_error describes only an Exception; a BaseException stored as str (a cancellation)": (
        "buried with JobCancelled (a BaseException, not an Exception)"
    ),
    "dead_letter keeps the later updated_at (max(updated_at, :now), against clock skew)": (
        "updated_at = 1000.25 after dead_letter(..., now=1000.25)"
    ),
    "redrive keeps the later updated_at (max(updated_at, :now), against clock skew)": (
        "though it died at 1020.0 by a clock ahead"
    ),
    "redrive staggers run_after by half a second a job (no thundering herd)": (
        "the second of redrive(limit=2, now=1010.75)"
    ),
    "redrive skips jobs buried by a permanent error (they would only fail again)": (
        "all redriven (in any order)"
    ),
    "dead_letter checks state = 'running' with a SELECT, then an UPDATE fenced on the token": (
        "after your dead_letter read the job and before it wrote"
    ),
    "redrive least-redriven first (ORDER BY redrives, updated_at, id)": (
        "the two oldest, on dead jobs"
    ),
    "redrive puts 'poison' jobs last (ORDER BY redrives >= 3, updated_at, id)": (
        "the two oldest, on dead jobs"
    ),
    "redrive by when each job was due (ORDER BY run_after, updated_at, id)": "run_after 500",
    "last_error cached by job id in a module-level dict (a job buried twice keeps the first)": (
        "(the second burial's)"
    ),
    "dead_reason cached by job id in a module-level dict (the first reason kept)": (
        "dead_reason 'permanent error'"
    ),
    "dead_letter remembers the tokens it used in a module-level set (a token buries once)": (
        "claimed together under the token 'batch-tok'"
    ),
    "redrive takes 'now or time.time()' (an instant of 0 read as missing)": (
        "an instant of 0 stored as given"
    ),
    "dead_letter takes 'now or time.time()' (an instant of 0 read as missing)": (
        "updated_at = 0 after dead_letter(..., now=0.0)"
    ),
    "last_error falls back to the reason when the error has no message": (
        "with a ValueError that has no message"
    ),
    "redrive backs off by the redrives so far (run_after = now + 60 * redrives)": (
        "as after the first"
    ),
    "redrive restarts at attempt = redrives (the budget shrinks with each redrive)": (
        "all back with their attempts to run"
    ),
    "the dead rows read without ORDER BY and sorted by updated_at in Python (ties as read)": (
        "on a table with an index on (state, id DESC)"
    ),
    "dry-run answers cached by (kind, limit) in a module-level dict": (
        "not a cached answer from the first"
    ),
    "redrive's limit given a default of 100 (a call that forgets it redrives 100 jobs)": (
        "with no limit at all"
    ),
    "dead_letter SELECTs first in BEGIN IMMEDIATE; a job gone returns False with it open": (
        "a job that is gone"
    ),
    "dead_letter's not-running branch returns False with its BEGIN IMMEDIATE still open": (
        "a job that is dead, not running"
    ),
    "dead_letter lets any token bury a running job that has none (OR lease_token IS NULL)": (
        "with no token (lease_token NULL)"
    ),
    "redrive returns its ids as text, split from a group_concat ('1', not 1)": (
        "as the integers the table holds"
    ),
    "ties of updated_at broken by queue (ORDER BY updated_at, queue, id)": (
        "the two lowest ids of three dead jobs buried together"
    ),
    "ties of updated_at broken by dead_reason (ORDER BY updated_at, dead_reason, id)": (
        "the two lowest ids of three dead jobs buried together"
    ),
    "the oldest first to the millisecond (CAST(updated_at * 1000 AS INTEGER), id)": (
        "less than a millisecond later"
    ),
}

#: What the named check must say it got, where the mistake shows there.
GOT: dict[str, str] = {
    "last_error describes error.__context__ when there is one (the error it was raised during)": (
        "last_error \"KeyError: 'card'\""
    ),
    "dead_letter returns True for a job already dead (a second try says done)": (
        "it returned True"
    ),
    "redrive's UPDATE re-picks its rows with its own subquery (no id tie-break)": (
        "returned [13, 9, 10]; pending now: [11, 12, 13]"
    ),
    "dead_letter moves the job to a 'dead' queue (a DLQ)": "pending in queue 'dead'",
    "last_error describes the root cause (error.__cause__), not the error given": (
        "KeyError: 'customer 7'"
    ),
    "dead_letter leaves lease_owner set": "'lease_owner': 'w1'",
    "a deferred SAVEPOINT in place of BEGIN IMMEDIATE": "database is locked",
    "redrive committed in batches of 100 (the first batch with the SELECT)": (
        "job 231: running, redrives 1"
    ),
    "redrive committed in batches of 100, no state guard in the later batches": (
        "job 231: pending, redrives 2"
    ),
}


test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS, GOT)


#: Right solutions written otherwise, each with a check that once might take its points.
RIGHT: list[tuple[str, str, str]] = [
    (
        "redrive reads a count after its COMMIT (for a log line)",
        "redrive_racing_a_worker",
        """
        _reference_redrive = redrive


        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            ids = _reference_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)
            left = conn.execute("SELECT count(*) FROM jobs WHERE state = 'dead'").fetchone()[0]
            print(f"redrove {len(ids)} job(s); {left} still dead")
            return ids
        """,
    ),
    (
        "dead_letter as SELECT then UPDATE inside BEGIN IMMEDIATE (ROLLBACK when not the holder)",
        "dead_letter_is_fenced",
        """
        def dead_letter(conn, job_id, token, reason, error, now):
            message = describe(error)
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT state, lease_token FROM jobs WHERE id = :id", {"id": job_id}
                ).fetchone()
                if row is None or row["state"] != "running" or row["lease_token"] != token:
                    conn.execute("ROLLBACK")
                    return False
                conn.execute(
                    '''UPDATE jobs SET state = 'dead', dead_reason = :reason,
                           last_error = :error, lease_owner = NULL, lease_until = NULL,
                           lease_token = NULL, updated_at = :now
                       WHERE id = :id''',
                    {"id": job_id, "reason": reason, "error": message, "now": now},
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return True
        """,
    ),
    (
        "redrive as one UPDATE ... RETURNING per id in a loop, the dry run rolled back",
        "two_redrives_at_once_share_nothing",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError(f"limit must be given, 1 or more (got {limit!r})")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    r["id"]
                    for r in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead'"
                        " AND (:kind IS NULL OR kind = :kind)"
                        " ORDER BY updated_at, id LIMIT :limit",
                        {"limit": limit, "kind": kind},
                    )
                ]
                if not dry_run:
                    for job_id in ids:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE id = :id AND state = 'dead' RETURNING id",
                            {"id": job_id, "now": now},
                        ).fetchall()
                conn.execute("ROLLBACK" if dry_run else "COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return ids
        """,
    ),
    (
        "a dry run as a plain SELECT outside any transaction; the redrive an UPDATE whose"
        " WHERE id IN (SELECT ... LIMIT) picks the jobs",
        "a_dry_run_agrees_with_the_redrive",
        """
        PICK = '''
        WITH picked AS (
          SELECT id, updated_at FROM jobs
           WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
           ORDER BY updated_at, id
           LIMIT :limit
        )
        SELECT id FROM picked ORDER BY updated_at, id
        '''

        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
                raise ValueError(f"limit is required, a whole number of 1 or more, not {limit!r}")
            if dry_run:
                return [r[0] for r in conn.execute(PICK, {"kind": kind, "limit": limit})]
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r[0] for r in conn.execute(PICK, {"kind": kind, "limit": limit})]
                changed = conn.execute(
                    '''UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,
                           dead_reason = NULL, redrives = redrives + 1, updated_at = :now
                        WHERE state = 'dead' AND id IN (
                          SELECT id FROM jobs
                           WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                           ORDER BY updated_at, id LIMIT :limit)
                       RETURNING id''',
                    {"kind": kind, "limit": limit, "now": now},
                ).fetchall()
                conn.execute("COMMIT")
            except BaseException:  # a Ctrl-C too (leaves_no_transaction_open)
                conn.execute("ROLLBACK")
                raise
            got = {r[0] for r in changed}
            return [i for i in ids if i in got]
        """,
    ),
    (
        "the dead rows sorted in Python, a ValueError subclass for the limit, redact.describe",
        "a_large_redrive_is_one_transaction",
        """
        from labkit import redact

        class LimitRequired(ValueError):
            pass

        def dead_letter(conn, job_id, token, reason, error, now):
            cur = conn.execute(
                "UPDATE jobs SET state='dead', dead_reason=:r, last_error=:e, lease_owner=NULL,"
                " lease_until=NULL, lease_token=NULL, updated_at=:now"
                " WHERE id=:id AND state='running' AND lease_token=:t",
                {"r": reason, "e": redact.describe(error), "now": now, "id": job_id, "t": token},
            )
            return cur.rowcount > 0

        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise LimitRequired(f"redrive needs a limit of at least 1, not {limit!r}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = conn.execute(
                    "SELECT id, kind, updated_at FROM jobs WHERE state = 'dead'"
                ).fetchall()
                rows = [r for r in rows if kind is None or r["kind"] == kind]
                rows.sort(key=lambda r: (r["updated_at"], r["id"]))
                ids = [r["id"] for r in rows[:limit]]
                if not dry_run and ids:
                    conn.execute(
                        "UPDATE jobs SET state='pending', attempt=0, run_after=:now,"
                        " dead_reason=NULL, redrives=redrives+1, updated_at=:now"
                        " WHERE state='dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
        """,
    ),
    # Round 14: a lock of the module's around the calls (one process's operators and
    # workers take turns), which a harness running another party in the same thread
    # while the first holds it would deadlock.
    (
        # A read inside its own write transaction, after the fenced UPDATE: no gap. The
        # harness's other writer, in the same thread, waited 10 s for this lock (round 14).
        "dead_letter as BEGIN, the fenced UPDATE, SELECT changes(), COMMIT",
        "dead_letter_is_fenced",
        """
        from labkit.redact import describe
        def dead_letter(conn, job_id, token, reason, error, now):
            conn.execute("BEGIN")
            try:
                conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL,"
                    " updated_at = :now"
                    " WHERE id = :id AND state = 'running' AND lease_token = :token",
                    {"id": job_id, "token": token, "reason": reason,
                     "error": describe(error), "now": now},
                )
                changed = conn.execute("SELECT changes()").fetchone()[0]
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return changed == 1
    """,
    ),
    (
        # WAL's usual setting: the log is synced at each checkpoint, not at each COMMIT (a
        # power cut may take back the last commits, and never damages the file).
        "redrive under PRAGMA synchronous = NORMAL",
        "leaves_no_transaction_open",
        """
        _full_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            conn.execute("PRAGMA synchronous = NORMAL")
            return _full_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)
    """,
    ),
    (
        "redrive under a module-level threading.Lock",
        "two_redrives_at_once_share_nothing",
        """
        import threading
        _REDRIVE_LOCK = threading.Lock()
        _unlocked_redrive = redrive
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            with _REDRIVE_LOCK:
                return _unlocked_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)
    """,
    ),
    (
        "redrive and dead_letter under one module-level RLock",
        "a_large_redrive_is_one_transaction",
        """
        import threading
        _LOCK = threading.RLock()
        _unlocked_redrive, _unlocked_bury = redrive, dead_letter
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            with _LOCK:
                return _unlocked_redrive(conn, limit=limit, now=now, kind=kind, dry_run=dry_run)
        def dead_letter(conn, job_id, token, reason, error, now):
            with _LOCK:
                return _unlocked_bury(conn, job_id, token, reason, error, now)
    """,
    ),
    (
        "dead_letter under a module-level threading.Condition",
        "dead_letter_is_fenced",
        """
        import threading
        _BURY = threading.Condition()
        _unlocked_bury = dead_letter
        def dead_letter(conn, job_id, token, reason, error, now):
            with _BURY:
                return _unlocked_bury(conn, job_id, token, reason, error, now)
    """,
    ),
    (
        "redrive tries its BEGIN IMMEDIATE again until another writer lets go",
        "a_failed_write_comes_out",
        """
        import sqlite3
        import time
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc):
                        raise
                    time.sleep(0.01)
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "redrive per job, a TypeError for a limit that is no whole number, a database error"
        " chained to one of its own (from exc)",
        "a_failed_write_comes_out",
        """
        import sqlite3
        class RedriveFailed(Exception):
            pass
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if not isinstance(limit, int) or isinstance(limit, bool):
                raise TypeError(f"limit must be a whole number of jobs, not {limit!r}")
            if limit < 1:
                raise ValueError(f"limit must be 1 or more, not {limit!r}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    for i in ids:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE id = :id AND state = 'dead'", {"now": now, "id": i})
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise RedriveFailed("redrive rolled back, nothing changed") from exc
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
    """,
    ),
    (
        "dead_letter wraps a database error in one of its own, chained (from exc)",
        "a_failed_write_comes_out",
        """
        import sqlite3, time
        def dead_letter(conn, job_id, token, reason, error, now):
            try:
                row = conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                    " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                    {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                     "now": now}).fetchone()
            except sqlite3.Error as e:
                raise RuntimeError(f"could not bury job {job_id}") from e
            return row is not None
    """,
    ),
    (
        "dead_letter wraps a database error 'from None', its words in the new message",
        "a_failed_write_comes_out",
        """
        import sqlite3, time
        def dead_letter(conn, job_id, token, reason, error, now):
            try:
                row = conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                    " WHERE id = :id AND state = 'running' AND lease_token = :token RETURNING id",
                    {"id": job_id, "token": token, "reason": reason, "error": describe(error),
                     "now": now}).fetchone()
            except sqlite3.Error as e:
                raise RuntimeError(f"could not bury job {job_id}: {e}") from None
            return row is not None
    """,
    ),
    (
        "redrive reads its ids as tuples, conn.row_factory put back in a finally",
        "leaves_no_transaction_open",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            factory, conn.row_factory = conn.row_factory, None
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    ids = [i for (i,) in conn.execute(
                        "SELECT id FROM jobs WHERE state = 'dead'"
                        " AND (:kind IS NULL OR kind = :kind)"
                        " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                    if not dry_run:
                        conn.execute(
                            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                            " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                            " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                            {"now": now, "ids": json.dumps(ids)})
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            finally:
                conn.row_factory = factory
            return ids
        """,
    ),
    (
        "redrive in BEGIN EXCLUSIVE (the readers shut out too)",
        "two_redrives_at_once_share_nothing",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN EXCLUSIVE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND kind = COALESCE(:kind, kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.executemany(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE id = :id", [{"id": i, "now": now} for i in ids])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return ids
        """,
    ),
    (
        "redrive's BEGIN IMMEDIATE inside 'with conn:' (its exit commits or rolls back)",
        "leaves_no_transaction_open",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            return ids
        """,
    ),
    (
        "redrive picks its jobs into a TEMP table inside its transaction, dropped before COMMIT",
        "a_large_redrive_is_one_transaction",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TEMP TABLE IF NOT EXISTS picked"
                             " (pos INTEGER PRIMARY KEY, job INTEGER)")
                conn.execute("DELETE FROM picked")
                conn.execute(
                    "INSERT INTO picked (job) SELECT id FROM jobs WHERE state = 'dead'"
                    " AND (:kind IS NULL OR kind = :kind) ORDER BY updated_at, id LIMIT :limit",
                    {"kind": kind, "limit": limit})
                ids = [r[0] for r in conn.execute("SELECT job FROM picked ORDER BY pos")]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT job FROM picked)", {"now": now})
                conn.execute("DROP TABLE picked")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
        """,
    ),
    (
        "a dry run in a deferred (read) BEGIN, the redrive in BEGIN IMMEDIATE",
        "dry_run_changes_nothing",
        """
        import json
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError("limit is required (1 or more)")
            conn.execute("BEGIN" if dry_run else "BEGIN IMMEDIATE")
            try:
                ids = [r["id"] for r in conn.execute(
                    "SELECT id FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)"
                    " ORDER BY updated_at, id LIMIT :limit", {"kind": kind, "limit": limit})]
                if not dry_run:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))",
                        {"now": now, "ids": json.dumps(ids)})
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return ids
        """,
    ),
    (
        "dead_letter answers cursor.rowcount == 1 of an UPDATE without RETURNING",
        "dead_letter_is_true_only_when_it_buries",
        """
        from labkit.redact import describe


        def dead_letter(conn, job_id, token, reason, error, now):
            cur = conn.execute(
                "UPDATE jobs SET state = 'dead', dead_reason = :reason, last_error = :error,"
                " lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now"
                " WHERE id = :id AND state = 'running' AND lease_token = :token",
                {"id": job_id, "token": token, "reason": reason, "now": now,
                 "error": describe(error)},
            )
            return cur.rowcount == 1
    """,
    ),
    (
        "redrive picks by row_number() OVER (ORDER BY updated_at, id), updates with executemany",
        "redrive_takes_the_oldest_whatever_else_the_row_says",
        """
        def redrive(conn, *, limit, now, kind=None, dry_run=False):
            if limit is None or limit < 1:
                raise ValueError(f"limit must be 1 or more, got {limit!r}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                ids = [
                    n_id
                    for (n_id,) in conn.execute(
                        "WITH dead AS (SELECT id, row_number() OVER (ORDER BY updated_at, id) AS n"
                        " FROM jobs WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind))"
                        " SELECT id FROM dead WHERE n <= :limit ORDER BY n",
                        {"kind": kind, "limit": limit},
                    ).fetchall()
                ]
                if not dry_run:
                    conn.executemany(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = :now,"
                        " dead_reason = NULL, redrives = redrives + 1, updated_at = :now"
                        " WHERE id = :id AND state = 'dead'",
                        [{"now": now, "id": job_id} for job_id in ids],
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return ids
    """,
    ),
]


test_a_right_solution_written_otherwise_keeps_the_points = right_test("ex06", RIGHT)
