"""Exercise 3's zoo: each plausible wrong solution loses the check named after it.

Exercise 3 is about claiming a job with a lease. Each entry overrides one or two
functions of the reference solution with a classic mistake; the check named after its
mistake must catch it, in process for every entry and, for a sample, through ``labkit
grade`` in the sandbox (``zoograding``), saying what ``SAYS`` gives. ``test_zoo.py``
checks the zoo as a whole.
"""

from __future__ import annotations

import pytest
from gradingkit import assert_severe
from zoograding import in_process_test, right_test

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        "ex03",
        "claim by SELECT then UPDATE",
        "no_double_claim_under_a_race",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1",
                {"now": now}).fetchone()
            if row is None:
                return None
            return dict(conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = :id RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s, "id": row["id"]}).fetchone())
    """,
    ),
    (
        "ex03",
        "SELECT then UPDATE behind a threading.Lock (it guards one process only)",
        "no_double_claim_under_a_race",
        """
        import threading
        _CLAIMING = threading.Lock()
        def claim(conn, worker, now, lease_s):
            with _CLAIMING:
                row = conn.execute(
                    "SELECT id FROM jobs WHERE"
                    " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                    " OR (state = 'running' AND lease_until <= :now)"
                    " ORDER BY run_after, id LIMIT 1",
                    {"now": now}).fetchone()
                if row is None:
                    return None
                return dict(conn.execute(
                    "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                    " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                    " updated_at = :now WHERE id = :id RETURNING *",
                    {"w": worker, "now": now, "lease_s": lease_s, "id": row["id"]}).fetchone())
        """,
    ),
    (
        "ex03",
        "claim without attempt + 1",
        "attempt_goes_up_by_one",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the worker's name as the lease token",
        "token_is_fresh",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = :w,"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "expired leases never come back",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " state IN ('pending', 'retry_wait') AND run_after <= :now"
                " ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "run_after ignored",
        "respects_run_after_and_state",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " state IN ('pending', 'retry_wait')"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "'<' where the boundary needs '<=' (run_after < now)",
        "due_exactly_now_is_ready",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after < :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a lease ending exactly now still counted as held (lease_until > now)",
        "due_exactly_now_is_ready",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until < :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim that never sets updated_at",
        "claims_one_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16)))"
                " WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim in id order, not the job due first",
        "claims_the_right_job_for_any_table",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "retried jobs never run again (only pending is ready)",
        "retried_jobs_run_again",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state = 'pending' AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "now cut to whole seconds (now = int(now))",
        "lease_runs_to_now_plus_lease_s_exactly",
        """
        def claim(conn, worker, now, lease_s):
            now = int(now)  # epoch seconds
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease makes any job ready, not only a running one",
        "respects_run_after_and_state",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR lease_until <= :now"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the job id and the attempt as the lease token (repeats after a redrive)",
        "token_is_fresh",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = id || ':' || (attempt + 1),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim returns only id, key and kind (RETURNING id, key, kind)",
        "returns_the_claimed_row_whole",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING id, key, kind",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the worker's name stored stripped (worker.strip())",
        "returns_the_claimed_row_whole",
        """
        _reference_claim = claim
        def claim(conn, worker, now, lease_s):
            return _reference_claim(conn, worker.strip(), now, lease_s)
    """,
    ),
    (
        "ex03",
        "ties of run_after broken by key, not id (text order)",
        "claims_the_right_job_for_any_table",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, key LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "lease tokens from a random.Random seeded once at import",
        "tokens_differ_between_worker_processes",
        """
        import random
        _TOKENS = random.Random(20260101)  # seeded, so runs replay
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = :token,"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s,
                 "token": "%032x" % _TOKENS.getrandbits(128)},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "SQL built with an f-string (a worker name with a quote breaks it)",
        "returns_the_claimed_row_whole",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                f'''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = '{worker}',
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a retry_wait job still carrying its failed run's lease is never claimed",
        "retried_jobs_run_again",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now
                                AND lease_owner IS NULL)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "fresh jobs first (ORDER BY attempt): retries starve behind new work",
        "retried_jobs_run_again",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY attempt, run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the lease token drawn once, as a default argument",
        "token_is_fresh",
        """
        import secrets
        def claim(conn, worker, now, lease_s, token=secrets.token_hex(16)):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = :token,
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s, "token": token},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "expired leases claimed only below max_attempts: a job whose worker died on its "
        "last attempt stays running forever",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE ((state IN ('pending', 'retry_wait') AND run_after <= :now)
                               OR (state = 'running' AND lease_until <= :now))
                          AND attempt < max_attempts
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease reclaimed only by another worker (lease_owner <> :worker)",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now AND lease_owner <> :worker)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "SELECT, then UPDATE guarded by the state read (an expired lease stays 'running')",
        "no_double_claim_under_a_race",
        """
        def claim(conn, worker, now, lease_s):
            found = conn.execute(
                '''
                SELECT id, state FROM jobs
                 WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                    OR (state = 'running' AND lease_until <= :now)
                 ORDER BY run_after, id LIMIT 1
                ''',
                {"now": now},
            ).fetchone()
            if found is None:
                return None
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = :id AND state = :state
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "id": found[0], "state": found[1]},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "dead workers' jobs taken last (ORDER BY state = 'running', run_after, id)",
        "dead_workers_jobs_are_not_starved",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY state = 'running', run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the lease token made of the worker, the job id and now",
        "token_is_fresh",
        """
        import hashlib as _hl
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = :worker || ':' || id || ':' || :now,
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim in two UPDATEs, the state first and the lease second (killed between: stuck)",
        "a_claim_killed_midway_comes_back",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = NULL
                 WHERE id = (SELECT id FROM jobs
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running' AND lease_until <= :now)
                              ORDER BY run_after, id LIMIT 1)
                RETURNING id
                ''',
                {"worker": worker, "now": now},
            ).fetchone()
            if row is None:
                return None
            done = conn.execute(
                '''
                UPDATE jobs SET lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = :id RETURNING *
                ''',
                {"id": row[0], "now": now, "lease_s": lease_s},
            ).fetchone()
            return dict(done)
    """,
    ),
    (
        "ex03",
        "an expired lease judged with a second's allowance (lease_until <= now + 1)",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running' AND lease_until <= :now + 1)
                              ORDER BY run_after, id LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the lease token from the process id and a counter (every container's worker is pid 1)",
        "tokens_differ_between_worker_processes",
        """
        import itertools as _it
        from os import getpid

        _COUNTER = _it.count(1)


        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = :token, updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running' AND lease_until <= :now)
                              ORDER BY run_after, id LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "token": f"{getpid()}-{next(_COUNTER)}"},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the lease token from the worker's name and a counter started at import",
        "tokens_differ_between_worker_processes",
        """
        import itertools as _it

        _COUNTER = _it.count(1)


        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = :token, updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running' AND lease_until <= :now)
                              ORDER BY run_after, id LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "token": f"{worker}-{next(_COUNTER)}"},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the ready job chosen among the first 100 rows only (LIMIT before the filter)",
        "a_long_table_still_gives_its_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (SELECT id FROM (SELECT * FROM jobs ORDER BY id LIMIT 100)
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running' AND lease_until <= :now)
                              ORDER BY run_after, id LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim answers None when the database raises (sqlite3.Error swallowed)",
        "a_database_error_comes_out",
        """
        import sqlite3 as _sqlite3


        def claim(conn, worker, now, lease_s):
            try:
                row = conn.execute(
                    '''
                    UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                           lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                           updated_at = :now
                     WHERE id = (SELECT id FROM jobs
                                  WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                     OR (state = 'running' AND lease_until <= :now)
                                  ORDER BY run_after, id LIMIT 1)
                    RETURNING *
                    ''',
                    {"worker": worker, "now": now, "lease_s": lease_s},
                ).fetchone()
            except _sqlite3.Error:
                return None
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a running job leased to the claiming worker's name taken back whatever its lease",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running'
                                     AND (lease_until <= :now OR lease_owner = :worker))
                              ORDER BY run_after, id LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease reclaimed without attempt + 1 (CASE WHEN state = 'running')",
        "attempt_goes_up_by_one",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = CASE WHEN state = 'running' THEN attempt ELSE attempt + 1 END,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a due retry_wait job claimed only below max_attempts (stuck when its budget is lowered)",
        "retried_jobs_run_again",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now
                               AND attempt < max_attempts)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim serves only the 'default' queue",
        "jobs_on_any_queue_are_claimed",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE ((state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now))
                        AND queue = 'default' ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a lease token of 16 random bits (randomblob(2))",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(2))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a random number below 10000 as the lease token",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = abs(random()) % 10000,
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the lease token from hash() of the worker, now and lease_s",
        "token_is_fresh",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = :tok,
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "tok": "%x" % (hash((worker, now, lease_s)) & (2**64-1))},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease keeps its old token (COALESCE(lease_token, ...))",
        "token_is_fresh",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = COALESCE(lease_token, lower(hex(randomblob(16)))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "UPDATE ... WHERE id IN (SELECT ...) without LIMIT 1: every ready job taken at once",
        "no_double_claim_under_a_race",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id IN (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        )
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the claimed row read back by lease_owner after the UPDATE",
        "no_double_claim_under_a_race",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            if row is None:
                return None
            again = conn.execute(
                'SELECT * FROM jobs WHERE lease_owner = ? ORDER BY updated_at DESC LIMIT 1',
                (worker,),
            ).fetchone()
            return dict(again)
    """,
    ),
    (
        "ex03",
        "updated_at from the wall clock (time.time()), not now",
        "claims_one_ready_job",
        """
        import time
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :wall
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s, "wall": time.time()},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "BEGIN before the UPDATE, never committed (the claim is rolled back on close)",
        "claims_one_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute('BEGIN')
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "ready means due and not leased (an old lease on a retry_wait job delays it)",
        "claims_the_right_job_for_any_table",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1,
                       state = 'running',
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE state IN ('pending', 'retry_wait', 'running') AND run_after <= :now
                           AND (lease_until IS NULL OR lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "SELECT then UPDATE in a deferred transaction (BEGIN): 'database is locked' under load",
        "no_double_claim_under_a_race",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN")  # one transaction: the SELECT and the UPDATE together
            try:
                found = conn.execute(
                    '''
                    SELECT id FROM jobs
                     WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                        OR (state = 'running' AND lease_until <= :now)
                     ORDER BY run_after, id LIMIT 1
                    ''',
                    {"now": now},
                ).fetchone()
                row = None
                if found is not None:
                    row = conn.execute(
                        '''
                        UPDATE jobs SET state = 'running', attempt = attempt + 1,
                               lease_owner = :worker, lease_until = :now + :lease_s,
                               lease_token = lower(hex(randomblob(16))), updated_at = :now
                         WHERE id = :id RETURNING *
                        ''',
                        {"worker": worker, "now": now, "lease_s": lease_s, "id": found[0]},
                    ).fetchone()
                conn.execute("COMMIT")
            except Exception:
                conn.execute("ROLLBACK")
                raise
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the ready job read before BEGIN IMMEDIATE, taken inside it (the read outside the lock)",
        "no_double_claim_under_a_race",
        """
        def claim(conn, worker, now, lease_s):
            found = conn.execute(
                '''
                SELECT id FROM jobs
                 WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                    OR (state = 'running' AND lease_until <= :now)
                 ORDER BY run_after, id LIMIT 1
                ''',
                {"now": now},
            ).fetchone()
            conn.execute("BEGIN IMMEDIATE")  # the lock taken once the job is chosen
            try:
                row = None
                if found is not None:
                    row = conn.execute(
                        '''
                        UPDATE jobs SET state = 'running', attempt = attempt + 1,
                               lease_owner = :worker, lease_until = :now + :lease_s,
                               lease_token = lower(hex(randomblob(16))), updated_at = :now
                         WHERE id = :id RETURNING *
                        ''',
                        {"worker": worker, "now": now, "lease_s": lease_s, "id": found[0]},
                    ).fetchone()
                conn.execute("COMMIT")
            except Exception:
                conn.execute("ROLLBACK")
                raise
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a job due within a second counted as ready (run_after <= now + 1)",
        "claims_the_right_job_for_any_table",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now + 1)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "jobs sorted by whole seconds (ORDER BY CAST(run_after AS INTEGER), id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY CAST(run_after AS INTEGER), id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the claim also sets run_after = now (when the job was due is lost)",
        "claims_one_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       run_after = :now,
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "ready is any state but running and succeeded (dead jobs run again)",
        "respects_run_after_and_state",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state NOT IN ('running', 'succeeded') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease reclaimed only below max_attempts (the last attempt's job stays running)",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now AND attempt < max_attempts)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a pending job ready whatever its run_after (only retry_wait waits)",
        "retried_jobs_run_again",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE state = 'pending' OR (state = 'retry_wait' AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "ties of run_after broken by the newest id (ORDER BY run_after, id DESC)",
        "claims_the_right_job_for_any_table",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id DESC
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the job touched longest ago first (ORDER BY updated_at, id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY updated_at, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a lease expired over an hour ago never reclaimed (lease_until > now - 3600)",
        "a_claim_killed_midway_comes_back",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running',
                       attempt = attempt + 1,
                       lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now
                               AND lease_until > :now - 3600)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim retries 'database is locked' three times, then answers None (the error swallowed)",
        "a_database_error_comes_out",
        """
        import sqlite3, time as _t


        def claim(conn, worker, now, lease_s):
            for _i in range(3):
                try:
                    row = conn.execute(
                        '''
                        UPDATE jobs SET state = 'running', attempt = attempt + 1,
                               lease_owner = :worker, lease_until = :now + :lease_s,
                               lease_token = lower(hex(randomblob(16))), updated_at = :now
                         WHERE id = (SELECT id FROM jobs
                                WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                   OR (state = 'running' AND lease_until <= :now)
                                ORDER BY run_after, id LIMIT 1)
                        RETURNING *
                        ''',
                        {"worker": worker, "now": now, "lease_s": lease_s},
                    ).fetchone()
                    return None if row is None else dict(row)
                except sqlite3.OperationalError:
                    _t.sleep(0.01)
            return None
    """,
    ),
    (
        "ex03",
        "claim returns the row without its NULL columns",
        "returns_the_claimed_row_whole",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs SET state = 'running', attempt = attempt + 1,
                       lease_owner = :worker, lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            conn.commit()
            return None if row is None else {k: row[k] for k in row.keys() if row[k] is not None}
    """,
    ),
    (
        "ex03",
        "a kind filter that binds only to expired leases (AND before OR, no parentheses)",
        "jobs_on_any_queue_are_claimed",
        '''
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                """
                UPDATE jobs
                   SET attempt = attempt + 1, state = 'running', lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now) AND kind = 'email'
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex03",
        "now passed through datetime.utcfromtimestamp(now).timestamp() (hours off outside UTC)",
        "claim_is_the_same_in_every_time_zone",
        """
        from datetime import datetime
        def claim(conn, worker, now, lease_s):
            # epoch seconds "in UTC", whatever the server's zone
            now = datetime.utcfromtimestamp(int(now)).timestamp() + (now - int(now))
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running' AND lease_until <= :now)
                              ORDER BY run_after, id LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease reclaimed with its old lease_until pushed by lease_s (still expired)",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET attempt = attempt + 1, lease_owner = :worker,
                       lease_until = CASE WHEN state = 'running' THEN lease_until + :lease_s
                                          ELSE :now + :lease_s END,
                       state = 'running',
                       lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running' AND lease_until <= :now)
                              ORDER BY run_after, id LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the first call's connection kept in a global (another database's jobs never claimed)",
        "claim_uses_the_connection_it_is_given",
        """
        _CONN = []
        def claim(conn, worker, now, lease_s):
            if not _CONN:  # one connection for the worker's life, opened by the first call
                _CONN.append(conn)
            row = _CONN[0].execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the worker's name stored lowercased (lease_owner = lower(:worker))",
        "returns_the_claimed_row_whole",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = lower(:worker), lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a pending job's attempt set to 1 (a job put back by hand starts its budget over)",
        "attempt_goes_up_by_one",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running',"
                " attempt = CASE WHEN state = 'pending' THEN 1 ELSE attempt + 1 END,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now WHERE id = (SELECT id"
                " FROM jobs WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the longer of the old lease and the new one kept (max(lease_until, now + lease_s))",
        "claims_the_right_job_for_any_table",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = max(coalesce(lease_until, 0), :now + :lease_s),"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a job due within the lease counted as ready (run_after <= now + lease_s)",
        "respects_run_after_and_state",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now + :lease_s)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "an expired lease claimed with max_attempts + 1 (a crash costs no attempt)",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now, max_attempts = max_attempts + (state = 'running')"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the ready job chosen among the first 500 rows only (a page of the table)",
        "a_long_table_still_gives_its_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM (SELECT * FROM jobs ORDER BY id LIMIT 500) WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "lease_s capped at an hour (min(lease_s, 3600): a day-long lease cut short)",
        "lease_runs_to_now_plus_lease_s_exactly",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": min(lease_s, 3600.0)},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a due pending job claimed only below max_attempts (stuck when put back by hand)",
        "retried_jobs_run_again",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " AND (state <> 'pending' OR attempt < max_attempts)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the claim clears last_error (a fresh run forgets why the last one failed)",
        "claims_one_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now, last_error = NULL"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the claim resets redrives to 0 (a redriven job's count starts over)",
        "claims_one_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now, redrives = 0"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "an expired lease reclaimed with run_after = now (when the job was due is lost)",
        "claims_one_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now,"
                " run_after = CASE WHEN state = 'running' THEN :now ELSE run_after END"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "attempt capped at max_attempts (attempt = min(attempt + 1, max_attempts))",
        "attempt_goes_up_by_one",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = min(attempt + 1, max_attempts),"
                " lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "an expired lease judged with a tenth of a second's allowance (lease_until < now + 0.1)",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until < :now + 0.1))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "ties of run_after go to new work first (ORDER BY run_after, lease_until IS NOT NULL, id)",
        "dead_workers_jobs_are_not_starved",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, lease_until IS NOT NULL, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "run_after sorted as text (ORDER BY CAST(run_after AS TEXT), id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY CAST(run_after AS TEXT), id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a job due within a tenth of a second counted as ready (run_after <= now + 0.1)",
        "claims_the_right_job_for_any_table",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now + 0.1)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "ties of run_after go to retries first (ORDER BY run_after, attempt DESC, id)",
        "claims_the_right_job_for_any_table",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, attempt DESC, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a worker takes back its own expired leases first (ORDER BY lease_owner = :worker DESC)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY coalesce(lease_owner = :worker, 0) DESC, run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a lease token of 24 random bits (randomblob(3)): no repeat in most runs of 2000 claims",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(3))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a random number below a million as the lease token (secrets.randbelow(10**6))",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        import secrets
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token, updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "token": str(secrets.randbelow(10**6))},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "ties of run_after broken by the key's length (ORDER BY run_after, length(key), id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, length(key), id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "ties of run_after broken by kind (ORDER BY run_after, kind, id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, kind, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "ties of run_after broken by queue, by name (ORDER BY run_after, queue, id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, queue, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a lease token counted up from the largest in the table, compared as text ('9' > '10')",
        "token_is_fresh",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s,"
                " lease_token = (SELECT coalesce(max(lease_token), 0) + 1 FROM jobs),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a lease token counted up from the largest number in the table (restarts after a redrive)",
        "token_is_fresh",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s,"
                " lease_token = (SELECT coalesce(max(CAST(lease_token AS INTEGER)), 0) + 1"
                "                FROM jobs),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a dead worker's job ordered by its lease_until (coalesce(lease_until, run_after))",
        "dead_workers_jobs_are_not_starved",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " ((state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))"
                " ORDER BY coalesce(lease_until, run_after), id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a lease token of 32 random bits (secrets.randbits(32)): 2000 claims seldom repeat it",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        import secrets
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token, updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "token": secrets.randbits(32)},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a lease token cut to 8 hex digits (uuid.uuid4().hex[:8])",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        import uuid
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token, updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "token": uuid.uuid4().hex[:8]},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a lease token of 32 bits from random.getrandbits(32), as text",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        import random
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token, updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "token": str(random.getrandbits(32))},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a lease token of 4 random bytes (os.urandom(4).hex())",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        import os
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token, updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "token": os.urandom(4).hex()},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a lease token of 32 random bits in SQL (lower(hex(randomblob(4))))",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(4))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "claim in BEGIN IMMEDIATE ... COMMIT, no ROLLBACK when its UPDATE fails",
        "a_failed_claim_leaves_no_transaction_open",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            conn.execute("COMMIT")
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "claim in BEGIN IMMEDIATE rolls back on sqlite3.IntegrityError only",
        "a_failed_claim_leaves_no_transaction_open",
        """
        import sqlite3
        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                    " lease_owner = :worker, lease_until = :now + :lease_s,"
                    " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                    " WHERE id = (SELECT id FROM jobs WHERE"
                    " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                    " OR (state = 'running' AND lease_until <= :now)"
                    " ORDER BY run_after, id LIMIT 1) RETURNING *",
                    {"worker": worker, "now": now, "lease_s": lease_s},
                ).fetchone()
            except sqlite3.IntegrityError:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        # A Ctrl-C between the SELECT and the UPDATE leaves BEGIN IMMEDIATE open.
        "BEGIN IMMEDIATE rolled back on `except Exception` only",
        "an_interrupted_claim_leaves_the_connection_usable",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = conn.execute(
                    '''SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id LIMIT 1''', {"now": now}).fetchone()
                row = None
                if found is not None:
                    row = conn.execute(
                        '''UPDATE jobs
                              SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                                  lease_until = :now + :lease_s,
                                  lease_token = lower(hex(randomblob(16))),
                                  updated_at = :now
                            WHERE id = :id
                           RETURNING *''',
                        {"worker": worker, "now": now, "lease_s": lease_s, "id": found["id"]},
                    ).fetchone()
                conn.execute("COMMIT")
            except Exception:
                conn.execute("ROLLBACK")
                raise
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        # Ties come in the order SQLite reads the rows, which an index on (state, run_after)
        # changes: a pending job claimed before an older retry due at the same instant.
        "ORDER BY run_after without the id that breaks ties",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        # Python's sqlite3 opens a transaction before the UPDATE in this mode and leaves it
        # for a commit that never comes: the claim holds the write lock, and closing the
        # connection throws it away.
        "conn.isolation_level = 'IMMEDIATE' set for the claim, never committed",
        "a_claim_leaves_the_connection_as_it_was_given",
        """
        def claim(conn, worker, now, lease_s):
            conn.isolation_level = "IMMEDIATE"
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        # The claim itself commits; the worker's next write (marking the job succeeded, in
        # the autocommit it was promised) opens a transaction nobody commits.
        "conn.isolation_level = 'IMMEDIATE' with a commit, the mode left on the connection",
        "a_claim_leaves_the_connection_as_it_was_given",
        """
        def claim(conn, worker, now, lease_s):
            conn.isolation_level = "IMMEDIATE"
            row = conn.execute(
                '''
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (
                       SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            conn.commit()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        # An empty queue returns before the COMMIT: the idle worker keeps the write lock.
        "BEGIN IMMEDIATE committed only when a job was found (an empty queue leaves it open)",
        "a_claim_leaves_the_connection_as_it_was_given",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = conn.execute(
                    '''
                    SELECT id FROM jobs
                     WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                        OR (state = 'running' AND lease_until <= :now)
                     ORDER BY run_after, id
                     LIMIT 1
                    ''',
                    {"now": now},
                ).fetchone()
                if found is None:
                    return None
                row = conn.execute(
                    '''
                    UPDATE jobs
                       SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                           lease_until = :now + :lease_s,
                           lease_token = lower(hex(randomblob(16))), updated_at = :now
                     WHERE id = :id
                    RETURNING *
                    ''',
                    {"worker": worker, "now": now, "lease_s": lease_s, "id": found["id"]},
                ).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return dict(row)
    """,
    ),
    (
        "ex03",
        # Two workers whose BEGIN meets a long writer both swallow the error, both read
        # the job, and both take it once the writer lets go: one charge, twice.
        "a BEGIN IMMEDIATE refused 'database is locked' swallowed, the claim going on without it",
        "a_refused_begin_is_not_a_claim_without_the_lock",
        """
        import sqlite3


        def claim(conn, worker: str, now: float, lease_s: float):
            params = {"worker": worker, "now": now, "lease_s": lease_s}
            try:
                conn.execute("BEGIN IMMEDIATE")
                began = True
            except sqlite3.OperationalError:
                began = False  # already inside a transaction (the caller's own): go on inside it
            try:
                row = conn.execute(
                    '''
                    SELECT id FROM jobs
                     WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                        OR (state = 'running' AND lease_until <= :now)
                     ORDER BY run_after, id
                     LIMIT 1
                    ''',
                    params,
                ).fetchone()
                taken = None
                if row is not None:
                    taken = conn.execute(
                        '''
                        UPDATE jobs
                           SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                               lease_until = :now + :lease_s,
                               lease_token = lower(hex(randomblob(16))), updated_at = :now
                         WHERE id = :id
                        RETURNING *
                        ''',
                        {**params, "id": row["id"]},
                    ).fetchone()
            except BaseException:
                if began:
                    conn.execute("ROLLBACK")
                raise
            if began:
                conn.execute("COMMIT")
            return None if taken is None else dict(taken)
    """,
    ),
    (
        "ex03",
        "SELECT, then an UPDATE guarded by the updated_at it read",
        "no_double_claim_under_a_race",
        """
        def claim(conn, worker: str, now: float, lease_s: float):
            # Optimistic: read the next ready job, then take it only if nobody changed it since
            # (updated_at is "when the row last changed": our version stamp).
            while True:
                seen = conn.execute(
                    '''
                    SELECT id, updated_at FROM jobs
                     WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                        OR (state = 'running' AND lease_until <= :now)
                     ORDER BY run_after, id
                     LIMIT 1
                    ''',
                    {"now": now},
                ).fetchone()
                if seen is None:
                    return None
                row = conn.execute(
                    '''
                    UPDATE jobs
                       SET state = 'running',
                           attempt = attempt + 1,
                           lease_owner = :worker,
                           lease_until = :now + :lease_s,
                           lease_token = lower(hex(randomblob(16))),
                           updated_at = :now
                     WHERE id = :id AND updated_at = :seen
                    RETURNING *
                    ''',
                    {"worker": worker, "now": now, "lease_s": lease_s, "id": seen["id"],
                     "seen": seen["updated_at"]},
                ).fetchone()
                if row is not None:
                    return dict(row)
    """,
    ),
    (
        "ex03",
        "SELECT, then an UPDATE guarded by the lease_owner it read",
        "no_double_claim_under_a_race",
        """
        def claim(conn, worker: str, now: float, lease_s: float):
            # Optimistic: read the next ready job, then take it only if its lease is still the
            # one we saw (nobody leased it in between).
            while True:
                seen = conn.execute(
                    '''
                    SELECT id, lease_owner FROM jobs
                     WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                        OR (state = 'running' AND lease_until <= :now)
                     ORDER BY run_after, id
                     LIMIT 1
                    ''',
                    {"now": now},
                ).fetchone()
                if seen is None:
                    return None
                row = conn.execute(
                    '''
                    UPDATE jobs
                       SET state = 'running',
                           attempt = attempt + 1,
                           lease_owner = :worker,
                           lease_until = :now + :lease_s,
                           lease_token = lower(hex(randomblob(16))),
                           updated_at = :now
                     WHERE id = :id AND lease_owner IS :seen
                    RETURNING *
                    ''',
                    {"worker": worker, "now": now, "lease_s": lease_s, "id": seen["id"],
                     "seen": seen["lease_owner"]},
                ).fetchone()
                if row is not None:
                    return dict(row)
    """,
    ),
    (
        "ex03",
        "claim answers None on an IntegrityError ('another worker took it first')",
        "a_database_error_comes_out",
        """
        import sqlite3


        def claim(conn, worker: str, now: float, lease_s: float):
            try:
                row = conn.execute(
                    '''
                    UPDATE jobs
                       SET state = 'running',
                           attempt = attempt + 1,
                           lease_owner = :worker,
                           lease_until = :now + :lease_s,
                           lease_token = lower(hex(randomblob(16))),
                           updated_at = :now
                     WHERE id = (
                           SELECT id FROM jobs
                            WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                               OR (state = 'running' AND lease_until <= :now)
                            ORDER BY run_after, id
                            LIMIT 1)
                    RETURNING *
                    ''',
                    {"worker": worker, "now": now, "lease_s": lease_s},
                ).fetchone()
            except sqlite3.IntegrityError:
                return None  # another worker took the job first: nothing for us
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim reads its row back by id after its UPDATE ... RETURNING id",
        "a_claim_returns_the_lease_it_took",
        """
        def claim(conn, worker, now, lease_s):
            taken = conn.execute(
                '''
                UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
                       updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                              WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                 OR (state = 'running' AND lease_until <= :now)
                              ORDER BY run_after, id LIMIT 1)
                RETURNING id
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            if taken is None:
                return None
            row = conn.execute("SELECT * FROM jobs WHERE id = :id", {"id": taken["id"]}).fetchone()
            return dict(row)
    """,
    ),
    (
        "ex03",
        "claim reads its row back by id after its COMMIT (BEGIN IMMEDIATE, SELECT, UPDATE)",
        "a_claim_returns_the_lease_it_took",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = conn.execute(
                    '''
                    SELECT id FROM jobs
                     WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                        OR (state = 'running' AND lease_until <= :now)
                     ORDER BY run_after, id LIMIT 1
                    ''',
                    {"now": now},
                ).fetchone()
                if found is not None:
                    conn.execute(
                        '''
                        UPDATE jobs SET state = 'running', attempt = attempt + 1,
                               lease_owner = :worker, lease_until = :now + :lease_s,
                               lease_token = lower(hex(randomblob(16))), updated_at = :now
                         WHERE id = :id
                        ''',
                        {"worker": worker, "now": now, "lease_s": lease_s, "id": found["id"]},
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            if found is None:
                return None
            row = conn.execute("SELECT * FROM jobs WHERE id = :id", {"id": found["id"]})
            return dict(row.fetchone())
    """,
    ),
    (
        "ex03",
        "claim turns PRAGMA synchronous OFF on the worker's connection",
        "a_claim_leaves_the_connection_as_it_was_given",
        """
        _reference_claim = claim


        def claim(conn, worker, now, lease_s):
            conn.execute("PRAGMA synchronous = OFF")  # no need to wait for the disk
            return _reference_claim(conn, worker, now, lease_s)
    """,
    ),
    (
        "ex03",
        "a retry skipped by the worker its last run failed on (lease_owner IS NOT :worker)",
        "a_waiting_job_is_ready_whatever_lease_it_carries",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = ("
                "SELECT id FROM jobs WHERE (state = 'pending' AND run_after <= :now)"
                " OR (state = 'retry_wait' AND run_after <= :now AND lease_owner IS NOT :worker)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1"
                ") RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a pending job ready only with no lease on it (lease_owner IS NULL)",
        "a_waiting_job_is_ready_whatever_lease_it_carries",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = ("
                "SELECT id FROM jobs"
                " WHERE (state = 'pending' AND run_after <= :now AND lease_owner IS NULL)"
                " OR (state = 'retry_wait' AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1"
                ") RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "only the newest 1000 rows scanned (ORDER BY id DESC LIMIT 1000, then the ready filter)",
        "an_old_job_behind_many_newer_ones_is_claimed",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = ("
                "SELECT id FROM (SELECT * FROM jobs ORDER BY id DESC LIMIT 1000)"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1"
                ") RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "jobs overdue by more than a day skipped as stale (run_after > now - 86400)",
        "an_old_job_behind_many_newer_ones_is_claimed",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = ("
                "SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now"
                " AND run_after > :now - 86400)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1"
                ") RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a page of 100 ready rows read first, the one due first among them only",
        "the_job_due_first_in_a_long_backlog",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = ("
                "SELECT id FROM (SELECT id, run_after FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) LIMIT 100)"
                " ORDER BY run_after, id LIMIT 1"
                ") RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the claim clears dead_reason (a redriven job forgets why it died)",
        "a_claim_writes_its_columns_and_only_them",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now, dead_reason = NULL WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "updated_at kept when an expired lease is taken over (CASE WHEN state = 'running')",
        "a_claim_writes_its_columns_and_only_them",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = CASE WHEN state = 'running' THEN updated_at ELSE :now END"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the worker's name cut to 64 characters (a VARCHAR(64) habit)",
        "a_claim_writes_its_columns_and_only_them",
        """
        _reference_claim = claim


        def claim(conn, worker, now, lease_s):
            return _reference_claim(conn, worker[:64], now, lease_s)
    """,
    ),
    (
        "ex03",
        "the latest now seen kept in a global (a clock that never goes back)",
        "a_claim_reads_only_the_now_it_is_given",
        """
        _reference_claim = claim
        _latest_now = 0.0


        def claim(conn, worker, now, lease_s):
            global _latest_now
            _latest_now = max(_latest_now, now)
            return _reference_claim(conn, worker, _latest_now, lease_s)
    """,
    ),
    (
        "ex03",
        "now and lease_s written into the SQL with an f-string (the worker a parameter)",
        "now_and_lease_s_are_parameters",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                f" lease_until = {now} + {lease_s}, lease_token = lower(hex(randomblob(16))),"
                f" updated_at = {now} WHERE id = (SELECT id FROM jobs WHERE"
                f" (state IN ('pending', 'retry_wait') AND run_after <= {now})"
                f" OR (state = 'running' AND lease_until <= {now}) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim answers None on 'database is locked' only (other errors come out)",
        "a_locked_database_is_not_an_empty_queue",
        """
        import sqlite3

        _reference_claim = claim


        def claim(conn, worker, now, lease_s):
            try:
                return _reference_claim(conn, worker, now, lease_s)
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc):
                    return None  # another worker is claiming: nothing for us now
                raise
    """,
    ),
    (
        "ex03",
        "lease_s capped at a day (min(lease_s, 86400): a month-long lease cut short)",
        "lease_runs_to_now_plus_lease_s_exactly",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
            " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
            " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
            " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
            " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
            " RETURNING *",
                {"worker": worker, "now": now, "lease_s": min(lease_s, 86400.0)}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease judged with a millisecond's allowance (lease_until <= now + 0.001)",
        "lease_runs_to_now_plus_lease_s_exactly",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
            " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
            " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
            " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
            " OR (state = 'running' AND lease_until <= :now + 0.001)"
            " ORDER BY run_after, id LIMIT 1)"
            " RETURNING *", {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "ties of run_after broken by the id as text (ORDER BY run_after, CAST(id AS TEXT))",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
            " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
            " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
            " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
            " OR (state = 'running' AND lease_until <= :now)"
            " ORDER BY run_after, CAST(id AS TEXT) LIMIT 1)"
            " RETURNING *", {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a job due within a millisecond counted as ready (run_after <= now + 0.001)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
            " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
            " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
            " (state IN ('pending', 'retry_wait') AND run_after <= :now + 0.001)"
            " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
            " RETURNING *", {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the worker's name written into the SQL, its quotes doubled by hand",
        "now_and_lease_s_are_parameters",
        """
        def claim(conn, worker, now, lease_s):
            name = worker.replace("'", "''")
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                f" lease_owner = '{name}', lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "a due job claimed only while attempt <= max_attempts (stuck below a lowered budget)",
        "retried_jobs_run_again",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now"
                " AND attempt <= max_attempts)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "jobs overdue by more than a year skipped as stale (run_after > now - 365 days)",
        "an_old_job_behind_many_newer_ones_is_claimed",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now"
                " AND run_after > :now - 365 * 86400)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the lease token made of the worker, now and a random number below 1000",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        import random
        def claim(conn, worker, now, lease_s):
            token = f"{worker}-{now}-{random.randint(0, 999)}"
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = :token,"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s, "token": token}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease reclaimed only while attempt <= max_attempts (a lowered budget: stuck)",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now AND attempt <= max_attempts)"
                " ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "an expired lease at its last attempt marked dead, and returned to the worker all the same",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = CASE WHEN state = 'running' AND attempt >= max_attempts"
                " THEN 'dead' ELSE 'running' END, attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "any job past its budget marked dead by the claim, and returned all the same",
        "expired_lease_is_reclaimable",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = CASE WHEN attempt >= max_attempts THEN 'dead'"
                " ELSE 'running' END, attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "claim pauses 5 s after an empty poll (a job due a moment later waits)",
        "a_claim_right_after_an_empty_poll_takes_the_job_now_due",
        """
        _IDLE_UNTIL = {}
        def claim(conn, worker, now, lease_s):
            if now < _IDLE_UNTIL.get(worker, float("-inf")):
                return None
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            if row is None:
                _IDLE_UNTIL[worker] = now + 5
                return None
            return dict(row)
    """,
    ),
    (
        "ex03",
        "updated_at that never goes back (max(updated_at, :now))",
        "a_claim_right_after_an_empty_poll_takes_the_job_now_due",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = max(coalesce(updated_at, 0), :now) WHERE id = (SELECT id FROM"
                " jobs WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *", {"w": worker, "now": now, "lease_s": lease_s}).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex03",
        "the claimed job found again by key with LIKE (a '_' in a key matches any character)",
        "a_claim_takes_only_the_job_it_chose",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE key LIKE (SELECT key FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "SELECT in BEGIN IMMEDIATE, then UPDATE ... WHERE key LIKE the key read",
        "a_claim_takes_only_the_job_it_chose",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = conn.execute(
                    "SELECT key FROM jobs WHERE"
                    " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                    " OR (state = 'running' AND lease_until <= :now)"
                    " ORDER BY run_after, id LIMIT 1",
                    {"now": now},
                ).fetchone()
                row = None
                if found is not None:
                    row = conn.execute(
                        "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                        " lease_owner = :worker, lease_until = :now + :lease_s,"
                        " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                        " WHERE key LIKE :key RETURNING *",
                        {"worker": worker, "now": now, "lease_s": lease_s, "key": found[0]},
                    ).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the ready job chosen among the first 5000 rows only (a bigger page of the table)",
        "a_long_table_still_gives_its_ready_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM (SELECT * FROM jobs ORDER BY id LIMIT 5000) WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "jobs sorted by run_after rounded to the millisecond (ORDER BY round(run_after, 3), id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY round(run_after, 3), id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "an expired lease ignored once it ended over a year ago (lease_until > now - 365 days)",
        "an_old_job_behind_many_newer_ones_is_claimed",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now"
                " AND lease_until > :now - 365 * 86400)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a retry overdue by over a week skipped as stale (retry_wait, run_after > now - 7 days)",
        "an_old_job_behind_many_newer_ones_is_claimed",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state = 'pending' AND run_after <= :now)"
                " OR (state = 'retry_wait' AND run_after <= :now AND run_after > :now - 604800)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the lease token from the clock (str(time.time_ns())): the same within one tick",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        import time

        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token,"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "token": str(time.time_ns())},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the lease token from the worker's name and time.time(): the same within one tick",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        import time

        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token,"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "token": f"{worker}-{time.time()!r}"},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the lease token from datetime.now().isoformat() and the worker: the same within one tick",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        """
        from datetime import datetime

        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token,"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "token": f"{worker}:{datetime.now().isoformat()}"},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "lease_s written into SQL text made once, at the first call (a module-level cache)",
        "each_claim_leases_for_its_own_lease_s",
        """
        _SQL = None
        def claim(conn, worker, now, lease_s):
            global _SQL
            if _SQL is None:
                _SQL = (
                    "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                    " lease_owner = :worker, lease_until = :now + " + repr(float(lease_s)) + ","
                    " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                    " WHERE id = (SELECT id FROM jobs WHERE"
                    " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                    " OR (state = 'running' AND lease_until <= :now)"
                    " ORDER BY run_after, id LIMIT 1) RETURNING *"
                )
            row = conn.execute(_SQL, {"worker": worker, "now": now}).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the lease_s of a worker's first claim kept in a dict by worker name",
        "each_claim_leases_for_its_own_lease_s",
        """
        _LEASE = {}
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": _LEASE.setdefault(worker, lease_s)},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "claim deletes dead jobs first (housekeeping: a dead job can never be redriven)",
        "a_claim_changes_no_other_job",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute("DELETE FROM jobs WHERE state = 'dead'")
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "claim deletes jobs finished over 30 days ago first (the key of a done job freed)",
        "a_claim_changes_no_other_job",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute(
                "DELETE FROM jobs WHERE state IN ('succeeded', 'dead') AND updated_at < ?",
                (now - 30 * 86400,),
            )
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the worker's name stored NFC-normalized (unicodedata.normalize('NFC', worker))",
        "a_claim_writes_its_columns_and_only_them",
        """
        import unicodedata
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": unicodedata.normalize("NFC", worker), "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the lease token sha256 of the worker, now and a counter started at import",
        "tokens_differ_between_worker_processes",
        """
        import hashlib
        import itertools
        _COUNTER = itertools.count()
        def claim(conn, worker, now, lease_s):
            token = hashlib.sha256(f"{worker}|{now}|{next(_COUNTER)}".encode()).hexdigest()
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = :token, updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "token": token},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "random.seed(42) at import, the lease token from random.getrandbits(128)",
        "tokens_differ_between_worker_processes",
        """
        import random
        random.seed(42)  # reproducible runs
        def claim(conn, worker, now, lease_s):
            token = "%032x" % random.getrandbits(128)
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = :token, updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "token": token},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the next job's due time remembered after an empty poll (a job enqueued meanwhile waits)",
        "a_claim_right_after_an_empty_poll_takes_the_job_now_due",
        """
        _NEXT_DUE = {}
        def claim(conn, worker, now, lease_s):
            due = _NEXT_DUE.get(worker)
            if due is not None and now < due:
                return None  # nothing is due before then: spare the database
            _NEXT_DUE.pop(worker, None)
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            if row is None:
                nxt = conn.execute(
                    "SELECT min(run_after) FROM jobs WHERE state IN ('pending', 'retry_wait')"
                ).fetchone()[0]
                if nxt is not None:
                    _NEXT_DUE[worker] = nxt
                return None
            return dict(row)
        """,
    ),
    (
        "ex03",
        "claim pauses a tenth of a second after an empty poll (a job enqueued meanwhile waits)",
        "a_claim_right_after_an_empty_poll_takes_the_job_now_due",
        """
        _IDLE_UNTIL = {}
        def claim(conn, worker, now, lease_s):
            if now < _IDLE_UNTIL.get(worker, float("-inf")):
                return None
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            if row is None:
                _IDLE_UNTIL[worker] = now + 0.1
                return None
            return dict(row)
        """,
    ),
    (
        "ex03",
        "claim resumes after the last id it took (WHERE id > the last id, from 0 when none)",
        "oldest_due_first",
        """
        _LAST = {"id": 0}
        def claim(conn, worker, now, lease_s):
            for floor in (_LAST["id"], 0):
                row = conn.execute(
                    "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (((state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))) AND id > :floor"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                    {"worker": worker, "now": now, "lease_s": lease_s, "floor": floor},
                ).fetchone()
                if row is not None:
                    _LAST["id"] = row["id"]
                    return dict(row)
            return None
        """,
    ),
    (
        "ex03",
        "claim resumes from the last run_after it took (run_after >= it, until an empty poll)",
        "oldest_due_first",
        """
        _FLOOR = {}
        def claim(conn, worker, now, lease_s):
            floor = _FLOOR.get(worker, float("-inf"))
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (((state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))) AND run_after >= :floor"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "floor": floor},
            ).fetchone()
            if row is None:
                _FLOOR.pop(worker, None)
                return None
            _FLOOR[worker] = row["run_after"]
            return dict(row)
        """,
    ),
    (
        "ex03",
        "ties of run_after broken by redrives (ORDER BY run_after, redrives, id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, redrives, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "the worker's name cut to 255 characters (a VARCHAR(255) habit)",
        "a_claim_writes_its_columns_and_only_them",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker[:255], "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a redriven job skipped while its dead_reason is set (dead_reason IS NULL)",
        "retried_jobs_run_again",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (((state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now))) AND dead_reason IS NULL"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "now=0.0 taken for no now (now or time.time()): the wall clock judges a claim at 0",
        "a_claim_at_time_zero_keeps_time_zero",
        """
        import time
        def claim(conn, worker, now, lease_s):
            now = now or time.time()
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "a live lease taken once its updated_at is old (updated_at <= now - 10 * lease_s)",
        "a_claim_changes_no_other_job",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                " lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait')"
                " AND run_after <= :now)"
                " OR (state = 'running' AND (lease_until <= :now"
                " OR updated_at <= :now - 10 * :lease_s))"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "lease_s capped at 30 days (min(lease_s, 2592000): a lease of over a year cut short)",
        "lease_runs_to_now_plus_lease_s_exactly",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + min(:lease_s, 30 * 86400),"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "an expired lease ignored once it ended over ten years ago (a window on lease_until)",
        "an_old_job_behind_many_newer_ones_is_claimed",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now"
                " AND lease_until > :now - 10 * 365 * 86400)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "SELECT in BEGIN IMMEDIATE, then UPDATE ... WHERE key GLOB the key read (a '*' in it)",
        "a_claim_takes_only_the_job_it_chose",
        """
        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = conn.execute(
                    "SELECT key FROM jobs WHERE"
                    " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                    " OR (state = 'running' AND lease_until <= :now)"
                    " ORDER BY run_after, id LIMIT 1",
                    {"now": now},
                ).fetchone()
                row = None
                if found is not None:
                    row = conn.execute(
                        "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                        " lease_owner = :worker, lease_until = :now + :lease_s,"
                        " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                        " WHERE key GLOB :key RETURNING *",
                        {"worker": worker, "now": now, "lease_s": lease_s, "key": found[0]},
                    ).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex03",
        "claim returns the sqlite3.Row itself (return row, not dict(row))",
        "returns_the_claimed_row_whole",
        """
        def claim(conn, worker, now, lease_s):
            return conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
                " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
        """,
    ),
    (
        "ex03",
        "an expired lease reclaimed only when it names an owner (lease_owner IS NOT NULL)",
        "dead_workers_jobs_are_not_starved",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                \"\"\"
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_owner IS NOT NULL
                               AND lease_until <= :now)
                        ORDER BY run_after, id LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    # A failed retry waits behind fresh work due at the same instant: not the job due first by id.
    (
        "ex03",
        "ties of run_after go to jobs that never failed (last_error IS NOT NULL, then id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                \"\"\"
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, last_error IS NOT NULL, id LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    # Other queues wait behind the default one at the same instant: not ORDER BY run_after, id.
    (
        "ex03",
        "ties of run_after go to the default queue first (queue <> 'default', then id)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                \"\"\"
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, queue <> 'default', id LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    # A name with spaces at its ends is stored without them: the worker's own guards miss its lease.
    (
        "ex03",
        "the worker's name trimmed in SQL (lease_owner = trim(:worker))",
        "a_claim_writes_its_columns_and_only_them",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                \"\"\"
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = trim(:worker),
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    # The lease must run from this claim's now; a row stamped by a clock ahead of the
    # worker's makes it longer than lease_s, and the worker holds a job it may have lost.
    (
        "ex03",
        "the lease counted from the latest time seen (max(:now, updated_at) + :lease_s)",
        "a_claim_right_after_an_empty_poll_takes_the_job_now_due",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :w,"
                " lease_until = max(:now, updated_at) + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now"
                " WHERE id = (SELECT id FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)"
                " ORDER BY run_after, id LIMIT 1) RETURNING *",
                {"w": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "an expired lease reclaimed only when it names an owner (lease_owner IS NOT NULL)": (
        "no lease_owner on it"
    ),
    "a live lease taken once its updated_at is old (updated_at <= now - 10 * lease_s)": (
        "held by w9 for an hour, 5 s left"
    ),
    "now=0.0 taken for no now (now or time.time()): the wall clock judges a claim at 0": (
        "at now=0.0 (lease_s=30.0): the first claim takes job"
    ),
    "an expired lease at its last attempt marked dead, and returned to the worker all the same": (
        "a job marked dead is not returned"
    ),
    "any job past its budget marked dead by the claim, and returned all the same": (
        "a job marked dead is not returned"
    ),
    "updated_at that never goes back (max(updated_at, :now))": ("then job 1 (due at"),
    "claim pauses 5 s after an empty poll (a job due a moment later waits)": (
        "on one connection, None at now="
    ),
    "lease_s capped at a day (min(lease_s, 86400): a month-long lease cut short)": (
        "lease_s=2592000.0"
    ),
    "an expired lease judged with a millisecond's allowance (lease_until <= now + 0.001)": (
        "the next float after now, still held"
    ),
    "ties of run_after broken by the id as text (ORDER BY run_after, CAST(id AS TEXT))": (
        "compared as a number"
    ),
    "a job due within a millisecond counted as ready (run_after <= now + 0.001)": (
        "is due at 100.00000000000001, the next float after now"
    ),
    "the worker's name written into the SQL, its quotes doubled by hand": (
        "with the worker's name, now and lease_s as parameters"
    ),
    "a retry skipped by the worker its last run failed on (lease_owner IS NOT :worker)": (
        "its failed run's lease held by"
    ),
    "a pending job ready only with no lease on it (lease_owner IS NULL)": (
        "put back by hand with its old lease on the row"
    ),
    "only the newest 1000 rows scanned (ORDER BY id DESC LIMIT 1000, then the ready filter)": (
        "then 1500 newer jobs"
    ),
    "jobs overdue by more than a day skipped as stale (run_after > now - 86400)": (
        "enqueued before an outage"
    ),
    "a page of 100 ready rows read first, the one due first among them only": (
        "after 300 ready jobs"
    ),
    "the claim clears dead_reason (a redriven job forgets why it died)": (
        "every other column as it was"
    ),
    "updated_at kept when an expired lease is taken over (CASE WHEN state = 'running')": (
        "an expired lease, claimed at now="
    ),
    "the worker's name cut to 64 characters (a VARCHAR(64) habit)": "the worker's name whole",
    "the latest now seen kept in a global (a clock that never goes back)": (
        "is leased to w9 until"
    ),
    "now and lease_s written into the SQL with an f-string (the worker a parameter)": (
        "not written into the SQL text"
    ),
    "claim answers None on 'database is locked' only (other errors come out)": (
        "to raise that error or to try again"
    ),
    "claim reads its row back by id after its UPDATE ... RETURNING id": "the lease it took",
    "claim reads its row back by id after its COMMIT (BEGIN IMMEDIATE, SELECT, UPDATE)": (
        "the lease it took"
    ),
    "claim turns PRAGMA synchronous OFF on the worker's connection": "PRAGMA synchronous as it was",
    "SELECT, then an UPDATE guarded by the updated_at it read": (
        "each job claimed by exactly one worker"
    ),
    # The four-worker race catches it when the worker whose name the row holds updates
    # first (its UPDATE leaves lease_owner as read), and the two-process schedules always
    # do: either expectation may come first, both say "exactly one".
    "SELECT, then an UPDATE guarded by the lease_owner it read": "exactly one",
    "claim answers None on an IntegrityError ('another worker took it first')": "IntegrityError",
    "a BEGIN IMMEDIATE refused 'database is locked' swallowed, the claim going on without it": (
        "whose BEGIN IMMEDIATE fails 'database is locked'"
    ),
    "conn.isolation_level = 'IMMEDIATE' set for the claim, never committed": (
        "to hand the connection back as it was given"
    ),
    "conn.isolation_level = 'IMMEDIATE' with a commit, the mode left on the connection": (
        "to hand the connection back as it was given"
    ),
    "BEGIN IMMEDIATE committed only when a job was found (an empty queue leaves it open)": (
        "to hand the connection back as it was given"
    ),
    "BEGIN IMMEDIATE rolled back on `except Exception` only": (
        "then the next claim on the same connection taking job"
    ),
    "ORDER BY run_after without the id that breaks ties": (
        "with an index on jobs (state, run_after)"
    ),
    "ties of run_after broken by kind (ORDER BY run_after, kind, id)": (
        "whatever the keys, kinds and queues"
    ),
    "ties of run_after broken by queue, by name (ORDER BY run_after, queue, id)": (
        "whatever the keys, kinds and queues"
    ),
    "a lease token of 24 random bits (randomblob(3)): no repeat in most runs of 2000 claims": (
        "2000 different lease tokens"
    ),
    "a random number below a million as the lease token (secrets.randbelow(10**6))": (
        "2000 different lease tokens"
    ),
    "claim by SELECT then UPDATE": "each job claimed by exactly one worker",
    "SELECT then UPDATE behind a threading.Lock (it guards one process only)": (
        "exactly one of two workers in two processes"
    ),
    "claim without attempt + 1": "attempt 1 after the first claim",
    "the worker's name as the lease token": "different tokens for two claims",
    "expired leases never come back": "lease expired at 50",
    "run_after ignored": "due later",
    "'<' where the boundary needs '<=' (run_after < now)": "run_after = 100 exactly",
    "a lease ending exactly now still counted as held (lease_until > now)": "ends at 130 exactly",
    "claim that never sets updated_at": "updated_at = now",
    "claim in id order, not the job due first": "at now=100 among jobs",
    "retried jobs never run again (only pending is ready)": "claimed at 200",
    "now cut to whole seconds (now = int(now))": "to lease job",
    "an expired lease makes any job ready, not only a running one": "retry_wait, due at 90",
    "the job id and the attempt as the lease token (repeats after a redrive)": "after a redrive",
    "claim returns only id, key and kind (RETURNING id, key, kind)": "every column",
    "the worker's name stored stripped (worker.strip())": "its name stored as it is",
    "ties of run_after broken by key, not id (text order)": "at now=100 among jobs",
    "lease tokens from a random.Random seeded once at import": (
        "another process forked from the same parent"
    ),
    "SQL built with an f-string (a worker name with a quote breaks it)": "its name stored as it is",
    "a retry_wait job still carrying its failed run's lease is never claimed": "claimed at 200",
    "fresh jobs first (ORDER BY attempt): retries starve behind new work": "before job",
    "the lease token drawn once, as a default argument": "different tokens for two claims",
    "expired leases claimed only below max_attempts: a job whose worker died on its "
    "last attempt stays running forever": "died on attempt 3 of 3",
    "an expired lease reclaimed only by another worker (lease_owner <> :worker)": (
        "a restarted worker keeps its name"
    ),
    "SELECT, then UPDATE guarded by the state read (an expired lease stays 'running')": (
        "each job claimed by exactly one worker"
    ),
    "dead workers' jobs taken last (ORDER BY state = 'running', run_after, id)": (
        "its worker died: lease expired at 50"
    ),
    "the lease token made of the worker, the job id and now": (
        "claimed at the same instant as before"
    ),
    "claim in two UPDATEs, the state first and the lease second (killed between: stuck)": (
        "killed between its claim's statements"
    ),
    "an expired lease judged with a second's allowance (lease_until <= now + 1)": (
        "to w9 until 100.5"
    ),
    "the lease token from the process id and a counter (every container's worker is pid 1)": (
        "takes over w1's expired lease"
    ),
    "the lease token from the worker's name and a counter started at import": (
        "restarted in a new process under the same name"
    ),
    "the ready job chosen among the first 100 rows only (LIMIT before the filter)": (
        "succeeded jobs in the table"
    ),
    "the ready job chosen among the first 500 rows only (a page of the table)": (
        "succeeded jobs in the table"
    ),
    "claim answers None when the database raises (sqlite3.Error swallowed)": "no such table: jobs",
    "a running job leased to the claiming worker's name taken back whatever its lease": (
        "None for w1 at now=100"
    ),
    "an expired lease reclaimed without attempt + 1 (CASE WHEN state = 'running')": (
        "attempt 2 after the expired lease is claimed again"
    ),
    "a due retry_wait job claimed only below max_attempts (stuck when its budget is lowered)": (
        "an operator lowered its budget"
    ),
    "claim serves only the 'default' queue": "on the queues reports, billing and default",
    "a lease token of 16 random bits (randomblob(2))": "2000 different lease tokens",
    "a random number below 10000 as the lease token": "2000 different lease tokens",
    "the lease token from hash() of the worker, now and lease_s": "different tokens for two claims",
    "an expired lease keeps its old token (COALESCE(lease_token, ...))": (
        "a new token when the same worker claims a job again"
    ),
    "UPDATE ... WHERE id IN (SELECT ...) without LIMIT 1: every ready job taken at once": (
        "three claims by w1 at now=100"
    ),
    "the claimed row read back by lease_owner after the UPDATE": (
        "each with the lease_token the table holds"
    ),
    "updated_at from the wall clock (time.time()), not now": "updated_at = now",
    "BEGIN before the UPDATE, never committed (the claim is rolled back on close)": (
        "the job running, leased to w1, in the database"
    ),
    "ready means due and not leased (an old lease on a retry_wait job delays it)": (
        "at now=100 among jobs"
    ),
    "SELECT then UPDATE in a deferred transaction (BEGIN): 'database is locked' under load": (
        "no errors while 4 workers claim at once"
    ),
    "the ready job read before BEGIN IMMEDIATE, taken inside it (the read outside the lock)": (
        "each job claimed by exactly one worker"
    ),
    "a job due within a second counted as ready (run_after <= now + 1)": "run_after=100.25",
    "jobs sorted by whole seconds (ORDER BY CAST(run_after AS INTEGER), id)": "(due at 10.2)",
    "the claim also sets run_after = now (when the job was due is lost)": (
        "run_after left as it was"
    ),
    "ready is any state but running and succeeded (dead jobs run again)": "job 4",
    "an expired lease reclaimed only below max_attempts (the last attempt's job stays running)": (
        "claimed again"
    ),
    "a pending job ready whatever its run_after (only retry_wait waits)": "the retry is due at 150",
    "ties of run_after broken by the newest id (ORDER BY run_after, id DESC)": "mail:10:v1",
    "the job touched longest ago first (ORDER BY updated_at, id)": "(due at 10)",
    "a lease expired over an hour ago never reclaimed (lease_until > now - 3600)": (
        "long after w1 was killed"
    ),
    "claim retries 'database is locked' three times, then answers None (the error swallowed)": (
        "no such table"
    ),
    "claim returns the row without its NULL columns": "every column",
    "a kind filter that binds only to expired leases (AND before OR, no parentheses)": (
        "then a report due at 40 whose worker died"
    ),
    "now passed through datetime.utcfromtimestamp(now).timestamp() (hours off outside UTC)": (
        "with TZ=<-03>3"
    ),
    "an expired lease reclaimed with its old lease_until pushed by lease_s (still expired)": (
        "None: job 2 is leased until"
    ),
    "the first call's connection kept in a global (another database's jobs never claimed)": (
        "then 'b:1:sync:v1' from the second"
    ),
    "the worker's name stored lowercased (lease_owner = lower(:worker))": (
        "its name stored as it is"
    ),
    "a pending job's attempt set to 1 (a job put back by hand starts its budget over)": (
        "attempt 3 for a pending job that has run twice"
    ),
    "the longer of the old lease and the new one kept (max(lease_until, now + lease_s))": (
        "leased until now + lease_s = 130"
    ),
    "a job due within the lease counted as ready (run_after <= now + lease_s)": (
        "None: the rest is due later"
    ),
    "an expired lease claimed with max_attempts + 1 (a crash costs no attempt)": (
        "max_attempts left as it was, 3"
    ),
    "lease_s capped at an hour (min(lease_s, 3600): a day-long lease cut short)": (
        "lease_s=86400.0"
    ),
    "a due pending job claimed only below max_attempts (stuck when put back by hand)": (
        "put back by hand after its runs"
    ),
    "the claim clears last_error (a fresh run forgets why the last one failed)": (
        "last_error 'SMTP 451'"
    ),
    "the claim resets redrives to 0 (a redriven job's count starts over)": "redrives 1",
    "an expired lease reclaimed with run_after = now (when the job was due is lost)": (
        "its run_after still 42.5"
    ),
    "attempt capped at max_attempts (attempt = min(attempt + 1, max_attempts))": (
        "attempt 4 for a retry_wait job at attempt 3 of max_attempts 3"
    ),
    "an expired lease judged with a tenth of a second's allowance (lease_until < now + 0.1)": (
        "leased to w9 until 100.01"
    ),
    "ties of run_after go to new work first (ORDER BY run_after, lease_until IS NOT NULL, id)": (
        "a tie of run_after goes to the smaller id"
    ),
    "run_after sorted as text (ORDER BY CAST(run_after AS TEXT), id)": "sorts as a number",
    "a job due within a tenth of a second counted as ready (run_after <= now + 0.1)": (
        "run_after=100.01"
    ),
    "ties of run_after go to retries first (ORDER BY run_after, attempt DESC, id)": (
        "retry_wait run_after=0"
    ),
    "a worker takes back its own expired leases first (ORDER BY lease_owner = :worker DESC)": (
        "no preference for the jobs a worker held before"
    ),
    "ties of run_after broken by the key's length (ORDER BY run_after, length(key), id)": (
        "whatever the keys"
    ),
    "a lease token counted up from the largest in the table, compared as text ('9' > '10')": (
        "tokens never used before when the jobs are claimed again after a redrive"
    ),
    "a lease token counted up from the largest number in the table (restarts after a redrive)": (
        "tokens never used before when the jobs are claimed again after a redrive"
    ),
    "a dead worker's job ordered by its lease_until (coalesce(lease_until, run_after))": (
        "its worker died: lease expired at 50"
    ),
    "a lease token of 32 random bits (secrets.randbits(32)): 2000 claims seldom repeat it": (
        "drawn from at least 2**48 values"
    ),
    "a lease token cut to 8 hex digits (uuid.uuid4().hex[:8])": (
        "drawn from at least 2**48 values"
    ),
    "a lease token of 32 bits from random.getrandbits(32), as text": (
        "drawn from at least 2**48 values"
    ),
    "a lease token of 4 random bytes (os.urandom(4).hex())": ("drawn from at least 2**48 values"),
    "a lease token of 32 random bits in SQL (lower(hex(randomblob(4))))": (
        "drawn from at least 2**48 values"
    ),
    "claim in BEGIN IMMEDIATE ... COMMIT, no ROLLBACK when its UPDATE fails": (
        "the next one at 101 takes job 1"
    ),
    "claim in BEGIN IMMEDIATE rolls back on sqlite3.IntegrityError only": (
        "the next one at 101 takes job 1"
    ),
    "a due job claimed only while attempt <= max_attempts (stuck below a lowered budget)": (
        "attempt 3 of max_attempts 2"
    ),
    "jobs overdue by more than a year skipped as stale (run_after > now - 365 days)": (
        "enqueued with the table's default run_after"
    ),
    "the lease token made of the worker, now and a random number below 1000": (
        "at the same now=600, each after a redrive"
    ),
    "an expired lease reclaimed only while attempt <= max_attempts (a lowered budget: stuck)": (
        "whose worker died on attempt 4 with max_attempts lowered to 3"
    ),
    "the claimed job found again by key with LIKE (a '_' in a key matches any character)": (
        "whose keys only look alike"
    ),
    "SELECT in BEGIN IMMEDIATE, then UPDATE ... WHERE key LIKE the key read": (
        "whose keys only look alike"
    ),
    "the ready job chosen among the first 5000 rows only (a bigger page of the table)": (
        "succeeded jobs in the table"
    ),
    "jobs sorted by run_after rounded to the millisecond (ORDER BY round(run_after, 3), id)": (
        "never rounded"
    ),
    "an expired lease ignored once it ended over a year ago (lease_until > now - 365 days)": (
        "the lease expired"
    ),
    "a retry overdue by over a week skipped as stale (retry_wait, run_after > now - 7 days)": (
        "retry_wait, due 400 days ago"
    ),
    "the lease token from the clock (str(time.time_ns())): the same within one tick": (
        "within one tick of the clock"
    ),
    "the lease token from the worker's name and time.time(): the same within one tick": (
        "within one tick of the clock"
    ),
    "the lease token from datetime.now().isoformat() and the worker: the same within one tick": (
        "within one tick of the clock"
    ),
    "lease_s written into SQL text made once, at the first call (a module-level cache)": (
        "the lease_s of the claim that took each"
    ),
    "the lease_s of a worker's first claim kept in a dict by worker name": (
        "the lease_s of the claim that took each"
    ),
    "claim deletes dead jobs first (housekeeping: a dead job can never be redriven)": (
        "leave every other row as it was"
    ),
    "claim deletes jobs finished over 30 days ago first (the key of a done job freed)": (
        "leave every other row as it was"
    ),
    "the worker's name stored NFC-normalized (unicodedata.normalize('NFC', worker))": (
        "never cut or normalized"
    ),
    "the lease token sha256 of the worker, now and a counter started at import": (
        "three different tokens for job"
    ),
    "random.seed(42) at import, the lease token from random.getrandbits(128)": (
        "three different tokens for job"
    ),
    "the next job's due time remembered after an empty poll (a job enqueued meanwhile waits)": (
        "enqueued meanwhile to run at once"
    ),
    "claim pauses a tenth of a second after an empty poll (a job enqueued meanwhile waits)": (
        "enqueued meanwhile to run at once"
    ),
    "claim resumes after the last id it took (WHERE id > the last id, from 0 when none)": (
        "has a smaller id and an earlier"
    ),
    "claim resumes from the last run_after it took (run_after >= it, until an empty poll)": (
        "has a smaller id and an earlier"
    ),
    "ties of run_after broken by redrives (ORDER BY run_after, redrives, id)": (
        "redriven once) then job"
    ),
    "the worker's name cut to 255 characters (a VARCHAR(255) habit)": ("never cut or normalized"),
    "a redriven job skipped while its dead_reason is set (dead_reason IS NULL)": (
        "redriven twice after it"
    ),
    "lease_s capped at 30 days (min(lease_s, 2592000): a lease of over a year cut short)": (
        "lease_s=34560000.0"
    ),
    "an expired lease ignored once it ended over ten years ago (a window on lease_until)": (
        "lease_until = 0"
    ),
    "SELECT in BEGIN IMMEDIATE, then UPDATE ... WHERE key GLOB the key read (a '*' in it)": (
        "whose keys only look alike"
    ),
    "claim returns the sqlite3.Row itself (return row, not dict(row))": ("claim to return a dict"),
    "ties of run_after go to jobs that never failed (last_error IS NOT NULL, then id)": (
        "its last run's error still on it"
    ),
    "ties of run_after go to the default queue first (queue <> 'default', then id)": (
        "fresh work on the default queue"
    ),
    "the worker's name trimmed in SQL (lease_owner = trim(:worker))": (
        "the worker's name whole, never cut or normalized"
    ),
    "the lease counted from the latest time seen (max(:now, updated_at) + :lease_s)": (
        "and lease_until="
    ),
}

#: Mistakes that lose or duplicate an effect (or let two intents share one): the
#: reported score (severity cap included) is at most half of the exercise.
SEVERE = [
    "a live lease taken once its updated_at is old (updated_at <= now - 10 * lease_s)",
    "now=0.0 taken for no now (now or time.time()): the wall clock judges a claim at 0",
    "lease_s capped at a day (min(lease_s, 86400): a month-long lease cut short)",
    "an expired lease judged with a millisecond's allowance (lease_until <= now + 0.001)",
    "a retry skipped by the worker its last run failed on (lease_owner IS NOT :worker)",
    "a pending job ready only with no lease on it (lease_owner IS NULL)",
    "only the newest 1000 rows scanned (ORDER BY id DESC LIMIT 1000, then the ready filter)",
    "jobs overdue by more than a day skipped as stale (run_after > now - 86400)",
    "the latest now seen kept in a global (a clock that never goes back)",
    "the lease token from the process id and a counter (every container's worker is pid 1)",
    "an expired lease judged with a tenth of a second's allowance (lease_until < now + 0.1)",
    "ties of run_after go to new work first (ORDER BY run_after, lease_until IS NOT NULL, id)",
    "a retry_wait job still carrying its failed run's lease is never claimed",
    "fresh jobs first (ORDER BY attempt): retries starve behind new work",
    "the lease token drawn once, as a default argument",
    "expired leases claimed only below max_attempts: a job whose worker died on its "
    "last attempt stays running forever",
    "an expired lease reclaimed only by another worker (lease_owner <> :worker)",
    "SELECT, then UPDATE guarded by the state read (an expired lease stays 'running')",
    "dead workers' jobs taken last (ORDER BY state = 'running', run_after, id)",
    "the lease token made of the worker, the job id and now",
    "claim in two UPDATEs, the state first and the lease second (killed between: stuck)",
    "an expired lease judged with a second's allowance (lease_until <= now + 1)",
    "the lease token from the worker's name and a counter started at import",
    "the ready job chosen among the first 100 rows only (LIMIT before the filter)",
    "a running job leased to the claiming worker's name taken back whatever its lease",
    "a due retry_wait job claimed only below max_attempts (stuck when its budget is lowered)",
    "claim serves only the 'default' queue",
    "a lease token of 16 random bits (randomblob(2))",
    "a random number below 10000 as the lease token",
    "the lease token from hash() of the worker, now and lease_s",
    "an expired lease keeps its old token (COALESCE(lease_token, ...))",
    "UPDATE ... WHERE id IN (SELECT ...) without LIMIT 1: every ready job taken at once",
    "the claimed row read back by lease_owner after the UPDATE",
    "SELECT then UPDATE in a deferred transaction (BEGIN): 'database is locked' under load",
    "the ready job read before BEGIN IMMEDIATE, taken inside it (the read outside the lock)",
    "ready is any state but running and succeeded (dead jobs run again)",
    "an expired lease reclaimed only below max_attempts (the last attempt's job stays running)",
    "a pending job ready whatever its run_after (only retry_wait waits)",
    "a lease expired over an hour ago never reclaimed (lease_until > now - 3600)",
    "a kind filter that binds only to expired leases (AND before OR, no parentheses)",
    "now passed through datetime.utcfromtimestamp(now).timestamp() (hours off outside UTC)",
    "an expired lease reclaimed with its old lease_until pushed by lease_s (still expired)",
    "the first call's connection kept in a global (another database's jobs never claimed)",
    "a job due within the lease counted as ready (run_after <= now + lease_s)",
    "an expired lease claimed with max_attempts + 1 (a crash costs no attempt)",
    "the ready job chosen among the first 500 rows only (a page of the table)",
    "lease_s capped at an hour (min(lease_s, 3600): a day-long lease cut short)",
    "a due pending job claimed only below max_attempts (stuck when put back by hand)",
    "a lease token of 24 random bits (randomblob(3)): no repeat in most runs of 2000 claims",
    "a random number below a million as the lease token (secrets.randbelow(10**6))",
    "a lease token counted up from the largest in the table, compared as text ('9' > '10')",
    "a lease token counted up from the largest number in the table (restarts after a redrive)",
    "a lease token of 32 random bits (secrets.randbits(32)): 2000 claims seldom repeat it",
    "a lease token cut to 8 hex digits (uuid.uuid4().hex[:8])",
    "a lease token of 32 bits from random.getrandbits(32), as text",
    "a lease token of 4 random bytes (os.urandom(4).hex())",
    "a lease token of 32 random bits in SQL (lower(hex(randomblob(4))))",
    "claim in BEGIN IMMEDIATE ... COMMIT, no ROLLBACK when its UPDATE fails",
    "claim in BEGIN IMMEDIATE rolls back on sqlite3.IntegrityError only",
    "a due job claimed only while attempt <= max_attempts (stuck below a lowered budget)",
    "jobs overdue by more than a year skipped as stale (run_after > now - 365 days)",
    "the lease token made of the worker, now and a random number below 1000",
    "an expired lease reclaimed only while attempt <= max_attempts (a lowered budget: stuck)",
    "an expired lease at its last attempt marked dead, and returned to the worker all the same",
    "any job past its budget marked dead by the claim, and returned all the same",
    "the claimed job found again by key with LIKE (a '_' in a key matches any character)",
    "SELECT in BEGIN IMMEDIATE, then UPDATE ... WHERE key LIKE the key read",
    "the ready job chosen among the first 5000 rows only (a bigger page of the table)",
    "an expired lease ignored once it ended over a year ago (lease_until > now - 365 days)",
    "a retry overdue by over a week skipped as stale (retry_wait, run_after > now - 7 days)",
    "the lease token from the clock (str(time.time_ns())): the same within one tick",
    "the lease token from the worker's name and time.time(): the same within one tick",
    "the lease token from datetime.now().isoformat() and the worker: the same within one tick",
    "lease_s written into SQL text made once, at the first call (a module-level cache)",
    "the lease_s of a worker's first claim kept in a dict by worker name",
    "claim deletes dead jobs first (housekeeping: a dead job can never be redriven)",
    "claim deletes jobs finished over 30 days ago first (the key of a done job freed)",
    "the lease token sha256 of the worker, now and a counter started at import",
    "random.seed(42) at import, the lease token from random.getrandbits(128)",
    "a redriven job skipped while its dead_reason is set (dead_reason IS NULL)",
    "lease_s capped at 30 days (min(lease_s, 2592000): a lease of over a year cut short)",
    "an expired lease ignored once it ended over ten years ago (a window on lease_until)",
    "SELECT in BEGIN IMMEDIATE, then UPDATE ... WHERE key GLOB the key read (a '*' in it)",
]


test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS)


@pytest.mark.parametrize("mistake", SEVERE)
def test_a_severe_mistake_costs_at_least_half_the_points(mistake: str) -> None:
    # Its entry's test proves the named check fails; a severe check's failure is capped.
    [(exercise, check)] = [(e, c) for e, m, c, _ in ZOO if m == mistake]
    assert_severe(exercise, mistake, check)


_CLAIM_SQL = (
    "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
    " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
    " updated_at = :now WHERE id {pick} RETURNING *"
)
_READY = (
    "SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
    " OR (state = 'running' AND lease_until <= :now) ORDER BY run_after, id LIMIT 1"
)


_TOKEN = "lower(hex(randomblob(16)))"
#: The claim with its token passed in as :token (drawn in Python).
_TOKEN_SQL = _CLAIM_SQL.format(pick=f"= ({_READY})").replace(_TOKEN, ":token")


def _claim_with(sql: str) -> str:
    return (
        "def claim(conn, worker, now, lease_s):\n"
        f"    row = conn.execute({sql!r},\n"
        "        {'worker': worker, 'now': now, 'lease_s': lease_s}).fetchone()\n"
        "    return None if row is None else dict(row)\n"
    )


#: Right solutions written otherwise, each with a check that once took its points.
RIGHT: list[tuple[str, str, str]] = [
    (
        "BEGIN IMMEDIATE tried again while 'database is locked', then SELECT and UPDATE",
        "a_refused_begin_is_not_a_claim_without_the_lock",
        '''
import sqlite3
import time


def claim(conn, worker, now, lease_s):
    for wait in (0.01, 0.05, 0.2, 0.5, None):
        try:
            conn.execute("BEGIN IMMEDIATE")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or wait is None:
                raise
            time.sleep(wait)
    try:
        found = conn.execute(
            """
            SELECT id FROM jobs
             WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                OR (state = 'running' AND lease_until <= :now)
             ORDER BY run_after, id
             LIMIT 1
            """,
            {"now": now},
        ).fetchone()
        row = None
        if found is not None:
            row = conn.execute(
                """
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = :id
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "id": found["id"]},
            ).fetchone()
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return None if row is None else dict(row)
''',
    ),
    (
        "conn.isolation_level = None set again (the autocommit mode it was handed)",
        "a_claim_leaves_the_connection_as_it_was_given",
        "def claim(conn, worker, now, lease_s):\n"
        "    conn.isolation_level = None\n"
        f"    row = conn.execute({_CLAIM_SQL.format(pick=f'= ({_READY})')!r},\n"
        "        {'worker': worker, 'now': now, 'lease_s': lease_s}).fetchone()\n"
        "    return None if row is None else dict(row)\n",
    ),
    (
        "one UPDATE ... RETURNING after a comment line",
        "claim_is_one_statement",
        _claim_with(
            "-- take the job due first, in one statement\n"
            + _CLAIM_SQL.format(pick=f"= ({_READY})")
        ),
    ),
    (
        "one UPDATE ... RETURNING whose choice is a CTE (WITH next AS (SELECT ...) UPDATE)",
        "claim_is_one_statement",
        _claim_with(f"WITH next AS ({_READY}) " + _CLAIM_SQL.format(pick="IN next")),
    ),
    (
        "the UPDATE run on conn.cursor(), the row read with cur.fetchone(), then cur.close()",
        "claims_one_ready_job",
        "def claim(conn, worker, now, lease_s):\n"
        "    cur = conn.cursor()\n"
        f"    cur.execute({_CLAIM_SQL.format(pick=f'= ({_READY})')!r},\n"
        "        {'worker': worker, 'now': now, 'lease_s': lease_s})\n"
        "    row = cur.fetchone()\n"
        "    cur.close()\n"
        "    return None if row is None else dict(row)\n",
    ),
    (
        "a uuid1 token (a clock and the host: little randomness, never the same twice)",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        "import uuid\n"
        "def claim(conn, worker, now, lease_s):\n"
        f"    row = conn.execute({_TOKEN_SQL!r},\n"
        "        {'worker': worker, 'now': now, 'lease_s': lease_s,\n"
        "         'token': str(uuid.uuid1())}).fetchone()\n"
        "    return None if row is None else dict(row)\n",
    ),
    (
        "the token a raw randomblob(16), bytes, not hex text (the row returned whole)",
        "returns_the_claimed_row_whole",
        _claim_with(_CLAIM_SQL.format(pick=f"= ({_READY})").replace(_TOKEN, "randomblob(16)")),
    ),
    (
        "the token a raw randomblob(16), bytes, not hex text (each claim's own token)",
        "no_double_claim_under_a_race",
        _claim_with(_CLAIM_SQL.format(pick=f"= ({_READY})").replace(_TOKEN, "randomblob(16)")),
    ),
    (
        "one UPDATE ... FROM (SELECT ... LIMIT 1) AS nxt WHERE jobs.id = nxt.pick,"
        " after a /* */ comment",
        "claim_is_one_statement",
        '''
def claim(conn, worker, now, lease_s):
    row = conn.execute(
        """
        /* pick and take in one go */
        UPDATE jobs
           SET state = 'running', attempt = jobs.attempt + 1, lease_owner = :worker,
               lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
               updated_at = :now
          FROM (SELECT id AS pick FROM jobs
                 WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                    OR (state = 'running' AND lease_until <= :now)
                 ORDER BY run_after, id LIMIT 1) AS nxt
         WHERE jobs.id = nxt.pick
        RETURNING *
        """,
        {"worker": worker, "now": now, "lease_s": lease_s},
    ).fetchone()
    return None if row is None else dict(row)
''',
    ),
    (
        "a frozen dataclass whose bound method is claim, states in an Enum, the token"
        " from secrets.token_hex and lease_until summed in Python",
        "tokens_differ_between_worker_processes",
        '''
from __future__ import annotations
import logging
import secrets
from dataclasses import dataclass
from enum import Enum
from typing import Any

log = logging.getLogger("claim")

class State(str, Enum):
    PENDING = "pending"
    RETRY_WAIT = "retry_wait"
    RUNNING = "running"

CLAIM_SQL = f"""
UPDATE jobs
   SET state = '{State.RUNNING.value}', attempt = attempt + 1, lease_owner = :worker,
       lease_until = :until, lease_token = :token, updated_at = :now
 WHERE id = (SELECT id FROM jobs
              WHERE (state IN ('{State.PENDING.value}', '{State.RETRY_WAIT.value}')
                     AND run_after <= :now)
                 OR (state = '{State.RUNNING.value}' AND lease_until <= :now)
              ORDER BY run_after ASC, id ASC LIMIT 1)
RETURNING *
"""

@dataclass(frozen=True)
class Claimer:
    sql: str = CLAIM_SQL
    def claim(self, conn: Any, worker: str, now: float, lease_s: float) -> dict[str, Any] | None:
        if lease_s <= 0:
            raise ValueError("lease_s must be positive")
        params = {"worker": worker, "now": now, "until": now + lease_s,
                  "token": secrets.token_hex(16)}
        row = conn.execute(self.sql, params).fetchone()
        if row is None:
            log.debug("nothing ready for %s", worker)
            return None
        log.info("%s claimed %s", worker, row["id"])
        return dict(row)

_CLAIMER = Claimer()
claim = _CLAIMER.claim
''',
    ),
    (
        "SET (state, ...) = (...) as a row value, readiness by CASE state,"
        " WHERE id IN (... LIMIT 1), fetchall",
        "respects_run_after_and_state",
        '''
def claim(conn, worker: str, now: float, lease_s: float):
    cur = conn.execute(
        """UPDATE jobs
              SET (state, attempt, lease_owner, lease_until, lease_token, updated_at)
                = ('running', attempt + 1, :worker, :now + :lease_s, hex(randomblob(16)), :now)
            WHERE id IN (SELECT id FROM jobs
                          WHERE CASE state
                                  WHEN 'pending' THEN run_after <= :now
                                  WHEN 'retry_wait' THEN :now >= run_after
                                  WHEN 'running' THEN lease_until <= :now
                                  ELSE 0 END
                          ORDER BY run_after, id
                          LIMIT 1)
        RETURNING *""",
        {"now": now, "lease_s": lease_s, "worker": worker},
    )
    rows = cur.fetchall()
    assert len(rows) <= 1
    return dict(rows[0]) if rows else None
''',
    ),
    (
        "lower-case SQL retried up to five times on 'database is locked' only,"
        " the row returned as {**row}",
        "a_database_error_comes_out",
        '''
import sqlite3, time
from typing import Any, Optional
_SQL = """update jobs
   set state = 'running', attempt = attempt + 1, lease_owner = :worker,
       lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))), updated_at = :now
 where id = (select id from jobs
              where (state in ('pending', 'retry_wait') and run_after <= :now)
                 or (state = 'running' and lease_until <= :now)
              order by run_after, id limit 1)
returning *"""
MAX_TRIES = 5
def claim(
    conn: sqlite3.Connection, worker: str, now: float, lease_s: float
) -> Optional[dict[str, Any]]:
    for attempt in range(MAX_TRIES):
        try:
            row = conn.execute(_SQL, {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == MAX_TRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
            continue
        return {**row} if row is not None else None
''',
    ),
    (
        "SELECT then UPDATE by id under BEGIN IMMEDIATE, COMMIT, ROLLBACK on any error (the"
        " write lock held from the start: as atomic as one statement)",
        "claim_is_one_statement",
        """
def claim(conn, worker, now, lease_s):
    conn.execute("BEGIN IMMEDIATE")  # the write lock first, then choose
    try:
        found = conn.execute(_READY, {"now": now}).fetchone()
        row = None
        if found is not None:
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = :id RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "id": found[0]},
            ).fetchone()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return None if row is None else dict(row)
""".replace("_READY", repr(_READY)),
    ),
    (
        "PRAGMA busy_timeout = 5000 on the connection, then the one UPDATE ... RETURNING",
        "claim_is_one_statement",
        "def claim(conn, worker, now, lease_s):\n"
        "    conn.execute('PRAGMA busy_timeout = 5000')\n"
        f"    row = conn.execute({_CLAIM_SQL.format(pick=f'= ({_READY})')!r},\n"
        "        {'worker': worker, 'now': now, 'lease_s': lease_s}).fetchone()\n"
        "    return None if row is None else dict(row)\n",
    ),
    (
        "the one UPDATE ... RETURNING inside BEGIN IMMEDIATE under a module-level"
        " threading.Lock, conn.commit(), conn.rollback() on any error",
        "a_claim_killed_midway_comes_back",
        """
import threading
_LOCK = threading.Lock()
def claim(conn, worker, now, lease_s):
    with _LOCK:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(_SQL, {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
        return None if row is None else dict(row)
""".replace("_SQL", repr(_CLAIM_SQL.format(pick=f"= ({_READY})"))),
    ),
    (
        "with conn: around BEGIN EXCLUSIVE, a SELECT, an UPDATE by id and the row read back,"
        " under a module-level threading.RLock",
        "a_failed_claim_leaves_no_transaction_open",
        """
import threading
_GUARD = threading.RLock()
def claim(conn, worker, now, lease_s):
    with _GUARD, conn:
        conn.execute("BEGIN EXCLUSIVE")
        found = conn.execute(
            "SELECT id FROM jobs WHERE (state IN ('pending', 'retry_wait') AND run_after <= ?)"
            " OR (state = 'running' AND lease_until <= ?) ORDER BY run_after, id LIMIT 1",
            (now, now)).fetchone()
        if found is None:
            return None
        conn.execute(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = ?,"
            " lease_until = ?, lease_token = lower(hex(randomblob(16))), updated_at = ?"
            " WHERE id = ?", (worker, now + lease_s, now, found[0]))
        return dict(conn.execute("SELECT * FROM jobs WHERE id = ?", (found[0],)).fetchone())
""",
    ),
    (
        "the token from a SQL function registered once per connection, the connections kept"
        " in a module-level dict by id",
        "claim_uses_the_connection_it_is_given",
        """
import secrets
_REGISTERED = {}
def _ready(conn):
    if _REGISTERED.get(id(conn)) is not conn:
        conn.create_function("new_token", 0, lambda: secrets.token_hex(16))
        _REGISTERED[id(conn)] = conn
    return conn
def claim(conn, worker, now, lease_s):
    row = _ready(conn).execute(_SQL, {"worker": worker, "now": now, "lease_s": lease_s}).fetchone()
    return None if row is None else dict(row)
""".replace("_SQL", repr(_CLAIM_SQL.format(pick=f"= ({_READY})").replace(_TOKEN, "new_token()"))),
    ),
    *[
        (
            f"a token drawn in Python: {expr}",
            "lease_tokens_do_not_repeat_over_thousands_of_claims",
            f"import {module}\n"
            "def claim(conn, worker, now, lease_s):\n"
            f"    row = conn.execute({_TOKEN_SQL!r},\n"
            "        {'worker': worker, 'now': now, 'lease_s': lease_s,\n"
            f"         'token': {expr}}}).fetchone()\n"
            "    return None if row is None else dict(row)\n",
        )
        for module, expr in (
            ("uuid", "uuid.uuid4().hex"),
            ("uuid", "str(uuid.uuid4())"),
            ("secrets", "secrets.token_urlsafe()"),
            ("secrets", "str(secrets.randbits(128))"),
            # 64 bits in base64: the fewest the hints allow, read as about 64 from the text.
            ("secrets", "secrets.token_urlsafe(8)"),
            # Time-based, yet unique within one tick of the clock: uuid1 counts on.
            ("uuid", "uuid.uuid1().hex"),
            ("secrets", "f'{__import__(\"time\").time_ns()}-{secrets.token_hex(8)}'"),
        )
    ],
    (
        "the token from the random module, never seeded by hand (the interpreter seeds it from"
        " the OS in every process)",
        "tokens_differ_between_worker_processes",
        "import random\n"
        "def claim(conn, worker, now, lease_s):\n"
        f"    row = conn.execute({_TOKEN_SQL!r},\n"
        "        {'worker': worker, 'now': now, 'lease_s': lease_s,\n"
        "         'token': '%032x' % random.getrandbits(128)}).fetchone()\n"
        "    return None if row is None else dict(row)\n",
    ),
    (
        "the job chosen and taken by its key, compared with = (key is UNIQUE)",
        "a_claim_takes_only_the_job_it_chose",
        _claim_with(
            _CLAIM_SQL.format(pick=f"= ({_READY})").replace(
                "WHERE id = (SELECT id", "WHERE key = (SELECT key"
            )
        ),
    ),
    (
        "BEGIN (deferred) ... COMMIT around the one UPDATE ... RETURNING, ROLLBACK on any error",
        "claim_is_one_statement",
        """
def claim(conn, worker, now, lease_s):
    conn.execute("BEGIN")
    try:
        row = conn.execute(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
            " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
            " updated_at = :now WHERE id = (SELECT id FROM jobs WHERE"
            " (state IN ('pending', 'retry_wait') AND run_after <= :now)"
            " OR (state = 'running' AND lease_until <= :now)"
            " ORDER BY run_after, id LIMIT 1) RETURNING *",
            {"worker": worker, "now": now, "lease_s": lease_s},
        ).fetchone()
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return None if row is None else dict(row)
""",
    ),
    (
        "the token random hex with the worker's name after it (randomblob(16) || worker)",
        "lease_tokens_do_not_repeat_over_thousands_of_claims",
        _claim_with(
            _CLAIM_SQL.format(pick=f"= ({_READY})").replace(_TOKEN, _TOKEN + " || ':' || :worker")
        ),
    ),
    (
        "the token from a random.Random() made at each call (seeded from the OS every time)",
        "tokens_differ_between_worker_processes",
        """
import random
def claim(conn, worker, now, lease_s):
    row = conn.execute(SQL, {"worker": worker, "now": now, "lease_s": lease_s,
                             "token": "%032x" % random.Random().getrandbits(128)}).fetchone()
    return None if row is None else dict(row)
""".replace("SQL", repr(_TOKEN_SQL)),
    ),
    (
        "states compared through lower(state) (the table's CHECK allows lower case only)",
        "respects_run_after_and_state",
        _claim_with(
            _CLAIM_SQL.format(pick=f"= ({_READY})")
            .replace("(state IN", "(lower(state) IN")
            .replace("(state = 'running'", "(lower(state) = 'running'")
        ),
    ),
    (
        "the claimed row's dict built from cur.description's column names (a cursor)",
        "returns_the_claimed_row_whole",
        """
        def claim(conn, worker, now, lease_s):
            cur = conn.cursor()
            cur.execute(
                \"\"\"
                UPDATE jobs
                   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                       lease_until = :now + :lease_s,
                       lease_token = lower(hex(randomblob(16))), updated_at = :now
                 WHERE id = (SELECT id FROM jobs
                        WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                           OR (state = 'running' AND lease_until <= :now)
                        ORDER BY run_after, id LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            )
            row = cur.fetchone()
            if row is None:
                return None
            names = [d[0] for d in cur.description]
            return dict(zip(names, tuple(row)))
    """,
    ),
    (
        "a dict row factory set on the connection for the claim, put back in a finally",
        "returns_the_claimed_row_whole",
        """
        def _dicts(cursor, row):
            return {d[0]: v for d, v in zip(cursor.description, row)}

        def claim(conn, worker, now, lease_s):
            factory = conn.row_factory
            conn.row_factory = _dicts
            try:
                return conn.execute(
                    \"\"\"
                    UPDATE jobs
                       SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                           lease_until = :now + :lease_s,
                           lease_token = lower(hex(randomblob(16))), updated_at = :now
                     WHERE id = (SELECT id FROM jobs
                            WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                               OR (state = 'running' AND lease_until <= :now)
                            ORDER BY run_after, id LIMIT 1)
                    RETURNING *
                    \"\"\",
                    {"worker": worker, "now": now, "lease_s": lease_s},
                ).fetchone()
            finally:
                conn.row_factory = factory
    """,
    ),
    (
        "the one UPDATE ... RETURNING, then conn.commit() (a no-op in autocommit mode)",
        "a_claim_leaves_the_connection_as_it_was_given",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                \"\"\"
                    UPDATE jobs
                       SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                           lease_until = :now + :lease_s,
                           lease_token = lower(hex(randomblob(16))), updated_at = :now
                     WHERE id = (SELECT id FROM jobs
                            WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                               OR (state = 'running' AND lease_until <= :now)
                            ORDER BY run_after, id LIMIT 1)
                    RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            conn.commit()
            return None if row is None else dict(row)
    """,
    ),
    (
        "a sqlite3.Error raised again as RuntimeError('claim failed') from it",
        "a_database_error_comes_out",
        """
        import sqlite3

        def claim(conn, worker, now, lease_s):
            try:
                row = conn.execute(
                    \"\"\"
                    UPDATE jobs
                       SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                           lease_until = :now + :lease_s,
                           lease_token = lower(hex(randomblob(16))), updated_at = :now
                     WHERE id = (SELECT id FROM jobs
                            WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                               OR (state = 'running' AND lease_until <= :now)
                            ORDER BY run_after, id LIMIT 1)
                    RETURNING *
                    \"\"\",
                    {"worker": worker, "now": now, "lease_s": lease_s},
                ).fetchone()
            except sqlite3.Error as exc:
                raise RuntimeError("claim failed") from exc
            return None if row is None else dict(row)
    """,
    ),
    (
        "run_after read through coalesce(run_after, 0), states matched with LIKE",
        "respects_run_after_and_state",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                \"\"\"
                    UPDATE jobs
                       SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
                           lease_until = :now + :lease_s,
                           lease_token = lower(hex(randomblob(16))), updated_at = :now
                     WHERE id = (SELECT id FROM jobs
                            WHERE ((state LIKE 'pending' OR state LIKE 'retry_wait')
                                    AND coalesce(run_after, 0) <= :now)
                               OR (state = 'running' AND lease_until <= :now)
                            ORDER BY run_after, id LIMIT 1)
                    RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "the job due first found with min(run_after), then min(id) among them (no ORDER BY)",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            ready = ("(state IN ('pending', 'retry_wait') AND run_after <= :now)"
                     " OR (state = 'running' AND lease_until <= :now)")
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now"
                f" WHERE id = (SELECT min(id) FROM jobs WHERE ({ready})"
                f"   AND run_after = (SELECT min(run_after) FROM jobs WHERE {ready}))"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "BEGIN IMMEDIATE, a UNION ALL of the ready states, a secrets token, ROLLBACK on any error",
        "no_double_claim_under_a_race",
        """
        import secrets

        def claim(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = conn.execute(
                    "WITH ready AS (SELECT id, run_after FROM jobs"
                    " WHERE state IN ('pending', 'retry_wait') AND run_after <= :now"
                    " UNION ALL SELECT id, run_after FROM jobs"
                    " WHERE state = 'running' AND lease_until <= :now)"
                    " SELECT id FROM ready ORDER BY run_after, id LIMIT 1",
                    {"now": now},
                ).fetchone()
                if found is None:
                    conn.execute("COMMIT")
                    return None
                row = conn.execute(
                    "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                    " lease_owner = :worker, lease_until = :until, lease_token = :token,"
                    " updated_at = :now"
                    " WHERE id = :id RETURNING *",
                    {"worker": worker, "until": now + lease_s, "token": secrets.token_hex(16),
                     "now": now, "id": found[0]},
                ).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return {k: row[k] for k in row.keys()}
    """,
    ),
    (
        "ready as a CASE on state in the WHERE, a uuid4 token, the columns named in RETURNING",
        "respects_run_after_and_state",
        """
        import uuid

        _COLUMNS = ("id, key, kind, queue, state, attempt, max_attempts, run_after, lease_owner,"
                    " lease_until, lease_token, last_error, dead_reason, redrives, updated_at")

        def claim(conn, worker, now, lease_s):
            cur = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = :token, updated_at = :now"
                " WHERE id = (SELECT id FROM jobs WHERE CASE state"
                "   WHEN 'pending' THEN run_after <= :now"
                "   WHEN 'retry_wait' THEN run_after <= :now"
                "   WHEN 'running' THEN lease_until <= :now"
                "   ELSE 0 END"
                " ORDER BY run_after ASC, id ASC LIMIT 1)"
                f" RETURNING {_COLUMNS}",
                {"worker": worker, "now": now, "lease_s": lease_s, "token": uuid.uuid4().hex},
            )
            row = cur.fetchone()
            if row is None:
                return None
            return dict(zip([d[0] for d in cur.description], row))
    """,
    ),
    # The first ready job picked by a window function, not ORDER BY ... LIMIT 1.
    (
        "the job due first picked by row_number() OVER (ORDER BY run_after, id) = 1",
        "oldest_due_first",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = (SELECT id FROM (SELECT id, row_number() OVER"
                " (ORDER BY run_after, id) AS rn FROM jobs"
                " WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)"
                " OR (state = 'running' AND lease_until <= :now)) WHERE rn = 1)"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    # The first ready job as the one no other ready job comes before (no ORDER BY at all).
    (
        "the job due first found with NOT EXISTS of a ready job due earlier, or as early "
        "with a smaller id",
        "oldest_due_first",
        """
        def ready(t):
            return (f"(({t}.state IN ('pending', 'retry_wait') AND {t}.run_after <= :now)"
                    f" OR ({t}.state = 'running' AND {t}.lease_until <= :now))")

        def claim(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                f" updated_at = :now WHERE id = (SELECT a.id FROM jobs AS a WHERE {ready('a')}"
                f" AND NOT EXISTS (SELECT 1 FROM jobs AS b WHERE {ready('b')}"
                " AND (b.run_after < a.run_after OR (b.run_after = a.run_after AND b.id < a.id))))"
                " RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
]


test_a_right_solution_written_otherwise_keeps_the_points = right_test("ex03", RIGHT)
