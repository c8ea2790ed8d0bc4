"""A zoo of plausible wrong solutions: each loses points on the check that names its mistake.

Each entry overrides one or two functions of the reference solution with a classic
mistake, then runs every public and hidden check. The named check must fail, the
score must drop, and not every check may fail (the feedback points at one mistake).
"""

from __future__ import annotations

import pytest
from gradingkit import grade_values, with_override

from labkit.grading.core import PASSED

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        "ex01",
        "key from uuid4 per attempt",
        "key_is_stable",
        """
        import uuid
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{uuid.uuid4().hex[:8]}"
    """,
    ),
    (
        "ex01",
        "key from a timestamp",
        "key_ignores_the_clock",
        """
        import time
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{int(time.time())}"
    """,
    ),
    (
        "ex01",
        "key from datetime.now()",
        "key_ignores_the_clock",
        """
        from datetime import datetime
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{datetime.now():%Y%m%d}"
    """,
    ),
    (
        "ex01",
        "fingerprint without sort_keys (dict order)",
        "fingerprint_is_canonical",
        """
        def payload_fingerprint(payload):
            return hashlib.sha256(json.dumps(payload).encode()).hexdigest()
    """,
    ),
    (
        "ex01",
        "conflict overwrites the first payload",
        "accept_conflict",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            new = seen.get(key) != fp
            seen[key] = fp
            return new
    """,
    ),
    (
        "ex01",
        "dedup by payload instead of key",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if fp in seen.values() and seen.get(key) != fp:
                return False
            if key in seen and seen[key] != fp:
                raise IdempotencyConflict(key)
            new = key not in seen
            seen[key] = fp
            return new
    """,
    ),
    (
        "ex01",
        "key from hash() (salted per process)",
        "key_is_the_same_in_another_process",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{abs(hash((source, str(entity_id), action))):x}:v{version}"
    """,
    ),
    (
        "ex01",
        "key from the order of a set of strings",
        "key_is_the_same_in_another_process",
        """
        def operation_key(source, entity_id, action, version=1):
            return ":".join(sorted({source, action}, key=hash) + [str(entity_id), f"v{version}"])
    """,
    ),
    (
        "ex01",
        "entity id lowercased in the key",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).lower()}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint that sorts only the top-level keys",
        "fingerprint_is_canonical",
        """
        def payload_fingerprint(payload):
            text = json.dumps({k: payload[k] for k in sorted(payload)}, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with 1990.0 made 1990",
        "fingerprint_tells_payloads_apart",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return int(v) if isinstance(v, float) and v.is_integer() else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"))
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with json's default separators (', ' and ': ')",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of ASCII-escaped JSON (ensure_ascii left on)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept remembers keys in a module-level dict, not in `seen`",
        "accept_new_then_repeat",
        """
        _memory = {}
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if key not in _memory:
                _memory[key] = fp
                return True
            if _memory[key] != fp:
                raise IdempotencyConflict(key)
            return False
    """,
    ),
    (
        "ex02",
        "pidfile with O_EXCL goes stale after kill -9",
        "survives_holder_kill_9",
        """
        @contextmanager
        def single_instance(path):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                raise AlreadyRunning(f"locked by pid {open(path).read()}") from None
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            try:
                yield
            finally:
                os.unlink(path)
    """,
    ),
    (
        "ex02",
        "refusal without the holder's pid",
        "message_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise AlreadyRunning("another instance is running") from None
                yield
    """,
    ),
    (
        "ex02",
        "lock kept when the block raises",
        "released_on_error",
        """
        HELD = []
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                raise AlreadyRunning(f"pid {fh.read()}") from None
            fh.seek(0); fh.truncate(); fh.write(str(os.getpid())); fh.flush()
            HELD.append(fh)
            yield
            HELD.remove(fh)
            fh.close()
    """,
    ),
    (
        "ex02",
        "open(path, 'w') wipes the holder before locking",
        "refused_attempt_keeps_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "w+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"pid {fh.read() or 'unknown'}") from None
                fh.write(str(os.getpid())); fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "pidfile that appends the pid instead of replacing it",
        "pidfile_names_only_the_current_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"locked (pid {fh.read().strip()})") from None
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "lock by checking the file exists, then creating it",
        "two_instances_started_together",
        """
        @contextmanager
        def single_instance(path):
            if os.path.exists(path):
                with open(path) as fh:
                    raise AlreadyRunning(f"already running (pid {fh.read().strip()})")
            with open(path, "w") as fh:
                fh.write(str(os.getpid()))
            try:
                yield
            finally:
                os.unlink(path)
    """,
    ),
    (
        "ex02",
        "a refused attempt deletes the holder's lock file",
        "refusal_leaves_the_lock_alone",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"locked (pid {fh.read().strip()})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
                os.unlink(path)
    """,
    ),
    (
        "ex02",
        "a refused attempt removes the 'stale' lock file it could not take",
        "refusal_leaves_the_lock_alone",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip()
                    os.unlink(path)
                    raise AlreadyRunning(f"locked (pid {holder}); removed the stale file") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
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
        "ex04",
        "backoff without a cap",
        "backoff_is_capped",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return rng.uniform(0, base * 2.0 ** min(n, 1000))
    """,
    ),
    (
        "ex04",
        "exponential backoff without jitter",
        "backoff_has_full_jitter",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return min(cap, base * 2 ** min(n, 64))
    """,
    ),
    (
        "ex04",
        "jitter from the random module",
        "backoff_uses_the_given_rng",
        """
        import random as _random
        def backoff(n, rng, base=1.0, cap=60.0):
            return _random.uniform(0, min(cap, base * 2 ** min(n, 64)))
    """,
    ),
    (
        "ex04",
        "Retry-After ignored",
        "honours_retry_after",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            delay = backoff(attempt - 1, rng, base, cap)
            return None if now + delay > started_at + deadline else delay
    """,
    ),
    (
        "ex04",
        "every error retried",
        "gives_up_on_permanent",
        """
        def classify(error):
            return "transient"
    """,
    ),
    (
        "ex04",
        "no deadline",
        "respects_deadline",
        """
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0,
                       max_attempts=5, base=1.0, cap=60.0):
            if classify(error) == "permanent" or attempt >= max_attempts:
                return None
            return max(backoff(attempt - 1, rng, base, cap), getattr(error, "retry_after", 0) or 0)
    """,
    ),
    (
        "ex04",
        "'<' where the boundary needs '<=' (status > 500)",
        "classify_every_status",
        """
        def classify(error):
            if isinstance(error, (TimeoutError, ConnectionError, TransientError)):
                return "transient"
            if isinstance(error, PermanentError):
                return "permanent"
            status = getattr(error, "status", None)
            if isinstance(status, int) and (status in (408, 429) or status > 500):
                return "transient"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "classify by the exact class, not isinstance",
        "classify_transient",
        """
        def classify(error):
            if type(error) in (TimeoutError, ConnectionError, TransientError):
                return "transient"
            status = getattr(error, "status", None)
            if isinstance(status, int) and (status in (408, 429) or status >= 500):
                return "transient"
            return "permanent"
    """,
    ),
    (
        "ex04",
        "backoff that overflows for a huge n",
        "backoff_survives_a_huge_n",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return rng.uniform(0, min(cap, base * 2**n))
    """,
    ),
    (
        "ex04",
        "backoff with the base fixed at 1 s",
        "backoff_bounds_hold_for_any_base_and_cap",
        """
        def backoff(n, rng, base=1.0, cap=60.0):
            return rng.uniform(0, cap if n >= 64 else min(cap, 2**n))
    """,
    ),
    (
        "ex04",
        "Retry-After honoured only when it is a float",
        "honours_retry_after",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, **kwargs):
            if not isinstance(getattr(error, "retry_after", None), float):
                error.retry_after = None
            return _reference_next_delay(error, attempt, rng, **kwargs)
    """,
    ),
    (
        "ex04",
        "one retry too many (attempt > max_attempts)",
        "gives_up_after_max_attempts",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, *, max_attempts=5, **kwargs):
            return _reference_next_delay(error, attempt - 1, rng, max_attempts=max_attempts,
                                         **kwargs)
    """,
    ),
    (
        "ex04",
        "a retry exactly on the deadline refused (>=)",
        "respects_deadline",
        """
        _reference_next_delay = next_delay
        def next_delay(error, attempt, rng, *, started_at, now, deadline=300.0, **kwargs):
            delay = _reference_next_delay(error, attempt, rng, started_at=started_at, now=now,
                                          deadline=deadline, **kwargs)
            if delay is not None and now + delay >= started_at + deadline:
                return None
            return delay
    """,
    ),
    (
        "ex05",
        "no idempotency key (at-least-once)",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                             key=job.key)
    """,
    ),
    (
        "ex05",
        "check-then-act in two transactions",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            if ctx.world.ledger.status(job.key) == "done":
                return {"skipped": True}
            reply = ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                              key=job.key)
            ctx.world.ledger.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a new idempotency key per attempt",
        "charge_survives_lost_response",
        """
        import uuid
        def charge_handler(job, ctx):
            return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                             key=job.key, idempotency_key=uuid.uuid4().hex)
    """,
    ),
    (
        "ex05",
        "ack before the effect",
        "charge_survives_crash_after_commit",
        """
        def choose_ack():
            return "first"
    """,
    ),
    (
        "ex05",
        "ledger entry and mark in two transactions",
        "post_survives_every_crash",
        """
        def post_handler(job, ctx):
            ledger = ctx.world.ledger
            if ledger.status(job.key) == "done":
                return {"skipped": "already posted"}
            with ledger.transaction() as tx:
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
            ledger.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "check, post and mark in three separate transactions",
        "post_survives_every_crash",
        """
        def post_handler(job, ctx):
            ledger = ctx.world.ledger
            with ledger.transaction() as tx:
                done = tx.status(job.key) == "done"
            if done:
                return {"skipped": "already posted"}
            with ledger.transaction() as tx:
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
            with ledger.transaction() as tx:
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a typo in the handler (an AttributeError the worker retries)",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            return ctx.world.payment.charge(job.payload["customer"], job.payload["amount"],
                                            key=job.key, idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "mark checked in its own transaction before posting (two deliveries both post)",
        "post_survives_two_deliveries_at_once",
        """
        def post_handler(job, ctx):
            ledger = ctx.world.ledger
            if ledger.status(job.key) == "done":
                return {"skipped": "already posted"}
            with ledger.transaction() as tx:
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "one constant idempotency key",
        "two_invoices_two_charges",
        """
        def charge_handler(job, ctx):
            return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                             key=job.key, idempotency_key="charge")
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
        "ex07",
        "failures counted in total, not in a row",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_success(self):
                self.state, self.trial_out = "closed", False
    """,
    ),
    (
        "ex07",
        "half open lets everyone through",
        "half_open_allows_one_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "open" and self.clock.now() >= self.opened_at + self.cooldown_s:
                    self.state = "half_open"
                return self.state != "open"
    """,
    ),
    (
        "ex07",
        "a failed trial keeps the old cooldown",
        "trial_failure_reopens_for_a_full_cooldown",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                self.failures += 1
                if self.state == "half_open":
                    self.state, self.trial_out = "open", False
                elif self.failures >= self.threshold:
                    self.state, self.opened_at = "open", self.clock.now()
    """,
    ),
    (
        "ex07",
        "cooldown timed with the wall clock",
        "ignores_the_wall_clock",
        """
        import time
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                super().record_failure()
                if self.state == "open":
                    self.opened_wall = time.time()
            def allow(self):
                if self.state == "open" and time.time() >= self.opened_wall + self.cooldown_s:
                    self.state, self.trial_out = "half_open", False
                return super().allow() if self.state != "open" else False
    """,
    ),
    (
        "ex07",
        "failures forgotten after a minute (a window, not failures in a row)",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                now = self.clock.now()
                if now - getattr(self, "last_failure", now) > 60:
                    self.failures = 0
                self.last_failure = now
                super().record_failure()
    """,
    ),
    (
        "ex07",
        "failure count kept on the class, shared by every breaker",
        "two_breakers_side_by_side",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            failures_everywhere = 0
            def record_failure(self):
                Breaker.failures_everywhere += 1
                self.failures = Breaker.failures_everywhere - 1
                super().record_failure()
            def record_success(self):
                Breaker.failures_everywhere = 0
                super().record_success()
    """,
    ),
    (
        "ex07",
        "'<=' at the end of the cooldown (exactly 30 s still refused)",
        "half_open_allows_one_trial",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                if self.state == "open" and self.clock.now() <= self.opened_at + self.cooldown_s:
                    return False
                return super().allow()
    """,
    ),
    (
        "ex07",
        "opens one failure late (failures > threshold)",
        "opens_after_consecutive_failures",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def record_failure(self):
                self.failures += 1
                if self.state == "half_open" or self.failures > self.threshold:
                    self.state, self.opened_at, self.trial_out = "open", self.clock.now(), False
    """,
    ),
    (
        "ex07",
        "a breaker that records failures but never refuses a call",
        "outage_spares_the_dependency",
        """
        _Reference = Breaker
        class Breaker(_Reference):
            def allow(self):
                super().allow()
                return True
    """,
    ),
]


#: What the named check must say it expected, for each mistake: the failure is about the
#: mistake itself, not a side effect that a later edit of the check could stop catching.
SAYS: dict[str, str] = {
    "key from uuid4 per attempt": "the same key for the same intent",
    "key from a timestamp": "the same key three days later",
    "key from datetime.now()": "the same key three days later",
    "fingerprint without sort_keys (dict order)": "keys in another order",
    "conflict overwrites the first payload": "IdempotencyConflict for the same key",
    "dedup by payload instead of key": "two different keys with the same payload",
    "key from hash() (salted per process)": "in another Python process",
    "key from the order of a set of strings": "in another Python process",
    "entity id lowercased in the key": "different keys for",
    "fingerprint that sorts only the top-level keys": "keys in another order",
    "fingerprint with 1990.0 made 1990": "the amount as a float",
    "accept remembers keys in a module-level dict, not in `seen`": "one entry in `seen`",
    "fingerprint with json's default separators (', ' and ': ')": "canonical JSON",
    "fingerprint of ASCII-escaped JSON (ensure_ascii left on)": "non-ASCII kept",
    "pidfile with O_EXCL goes stale after kill -9": "killed with SIGKILL",
    "refusal without the holder's pid": "naming the holder's pid",
    "lock kept when the block raises": "after an error inside the block",
    "open(path, 'w') wipes the holder before locking": "still naming the holder",
    "pidfile that appends the pid instead of replacing it": "only the last holder's pid",
    "lock by checking the file exists, then creating it": "exactly one of 3 processes",
    "a refused attempt deletes the holder's lock file": "a third process refused too",
    "a refused attempt removes the 'stale' lock file it could not take": (
        "a third process refused too"
    ),
    "claim by SELECT then UPDATE": "each job claimed by exactly one worker",
    "claim without attempt + 1": "attempt 1 after the first claim",
    "the worker's name as the lease token": "different tokens for two claims",
    "expired leases never come back": "lease expired at 50",
    "run_after ignored": "due later",
    "'<' where the boundary needs '<=' (run_after < now)": "run_after = 100 exactly",
    "a lease ending exactly now still counted as held (lease_until > now)": "ends at 130 exactly",
    "claim that never sets updated_at": "updated_at = now",
    "retried jobs never run again (only pending is ready)": "claimed at 200",
    "claim in id order, not the job due first": "at now=100 among jobs",
    "backoff without a cap": "delays within [0, 60]",
    "exponential backoff without jitter": "different delays (jitter)",
    "jitter from the random module": "two rngs with the same seed",
    "Retry-After ignored": "Retry-After: 120",
    "every error retried": "None for HTTP 400",
    "no deadline": "deadline",
    "'<' where the boundary needs '<=' (status > 500)": "every HTTP status 100-599",
    "classify by the exact class, not isinstance": "'transient' for",
    "backoff that overflows for a huge n": "backoff(2000",
    "backoff with the base fixed at 1 s": "base=",
    "Retry-After honoured only when it is a float": "Retry-After",
    "one retry too many (attempt > max_attempts)": "None after attempt",
    "a retry exactly on the deadline refused (>=)": "exactly on the 300 s deadline",
    "no idempotency key (at-least-once)": "exactly one charge after a crash",
    "check-then-act in two transactions": "exactly one charge after a crash",
    "a new idempotency key per attempt": "exactly one charge after a lost reply",
    "ack before the effect": "exactly one charge after a crash at after_commit",
    "ledger entry and mark in two transactions": "after the first ledger commit",
    "one constant idempotency key": "one charge per invoice",
    "mark checked in its own transaction before posting (two deliveries both post)": (
        "two deliveries of the job at the same moment"
    ),
    "check, post and mark in three separate transactions": "ledger commit number 2",
    "a typo in the handler (an AttributeError the worker retries)": "to fire",
    "redrive as a copy with a new key": "still one row in jobs",
    "redrive of everything, limit ignored": "with limit=2",
    "redrive without resetting attempts": "'attempt': 0",
    "the raw error stored, secrets and all": "the password and the token redacted",
    "dead letter without the token fence": "False for a stale token",
    "no limit required": "ValueError for limit=None",
    "redrive that selects then updates without BEGIN IMMEDIATE": "at the same moment",
    "redrive by id alone, outside a transaction (a running job reset)": "left with the worker",
    "limit checked with `if not limit` (a negative limit accepted)": "limit=-3",
    "redrive in id order, not oldest first": "on jobs",
    "failures counted in total, not in a row": "never 3 failures in a row",
    "half open lets everyone through": "the callers behind the trial",
    "a failed trial keeps the old cooldown": "10 s after the failed trial",
    "cooldown timed with the wall clock": "the fake clock did not move",
    "failure count kept on the class, shared by every breaker": "breaker B closed",
    "failures forgotten after a minute (a window, not failures in a row)": "one failure every",
    "'<=' at the end of the cooldown (exactly 30 s still refused)": "exactly 30 s",
    "opens one failure late (failures > threshold)": "open at the 3rd failure",
    "a breaker that records failures but never refuses a call": "at most 7 calls",
}


@pytest.mark.parametrize(
    ("exercise", "mistake", "check", "source"), ZOO, ids=[f"{e}: {m}" for e, m, _, _ in ZOO]
)
def test_wrong_solution_fails_the_check_that_names_its_mistake(
    exercise: str, mistake: str, check: str, source: str
) -> None:
    outcomes = grade_values(exercise, with_override(exercise, source))
    assert check in outcomes, f"no check called {check}"
    named = outcomes[check]
    assert named.status == "failed", f"{mistake}: {check} was {named.status}"
    assert named.earned == 0 and named.expected and named.got and named.hint
    assert "Traceback" not in named.got
    assert SAYS[mistake] in named.expected, f"{mistake}: {check} said {named.expected!r}"
    if mistake in GOT:
        assert GOT[mistake] in named.got, f"{mistake}: {check} got {named.got!r}"
    passed = [o.check for o in outcomes.values() if o.status == PASSED]
    assert passed, f"{mistake}: every check failed, the feedback would not point at the mistake"


#: What the feedback must name in its "got" line, where the expectation alone would not.
GOT = {
    "a typo in the handler (an AttributeError the worker retries)": (
        "your code raised AttributeError"
    ),
}

#: Mistakes so serious that a solution making them cannot score above half the points.
SERIOUS = [
    "retried jobs never run again (only pending is ready)",
    "a refused attempt removes the 'stale' lock file it could not take",  # two run at once
]


@pytest.mark.parametrize("mistake", SERIOUS)
def test_a_serious_mistake_costs_at_least_half_the_points(mistake: str) -> None:
    [(exercise, source)] = [(e, src) for e, m, _, src in ZOO if m == mistake]
    outcomes = grade_values(exercise, with_override(exercise, source)).values()
    earned, possible = sum(o.earned for o in outcomes), sum(o.points for o in outcomes)
    assert earned <= possible / 2, f"{mistake}: {earned}/{possible}"


def test_the_zoo_covers_every_exercise_three_times() -> None:
    from collections import Counter

    from test_zoo_ex08 import ZOO as ZOO_EX08  # ex08's wrong task modules are files too
    from test_zoo_ex09 import ZOO as ZOO_EX09  # ex09's wrong consumers run as processes
    from test_zoo_ex10 import ZOO as ZOO_EX10  # ex10's wrong apps are files: their own zoo
    from test_zoo_ex11_13 import ZOO as ZOO_EX11_13  # exercises 11-13 keep their own zoo

    from labkit.grading import catalog

    counts = (
        Counter(e for e, *_ in ZOO)
        + Counter({"ex08": len(ZOO_EX08)})
        + Counter({"ex09": len(ZOO_EX09)})
        + Counter({"ex10": len(ZOO_EX10)})
        + Counter(e for e, *_ in ZOO_EX11_13)
    )
    assert sorted(SAYS) == sorted(m for _, m, _, _ in ZOO)
    assert all(counts[e] >= 3 for e in catalog.exercises()), counts
