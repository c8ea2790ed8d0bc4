"""Exercise 5's zoo: each plausible wrong solution loses the check named after it.

Exercise 5 is about a handler safe against a crash after the effect. Each entry
overrides one or two functions of the reference solution with a classic mistake; the
check named after its mistake must catch it, in process for every entry and, for a
sample, through ``labkit grade`` in the sandbox (``zoograding``), saying what ``SAYS``
gives. ``test_zoo.py`` checks the zoo as a whole.
"""

from __future__ import annotations

from zoograding import in_process_test, right_test

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
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
        "ex05",
        "an Idempotency-Key built from the customer and the amount",
        "every_invoice_is_charged_once",
        """
        def charge_handler(job, ctx):
            c, a = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(c, a, key=job.key, idempotency_key=f"{c}:{a}")
    """,
    ),
    (
        "ex05",
        "the job's key cut to its first 12 characters",
        "every_invoice_is_charged_once",
        """
        def charge_handler(job, ctx):
            c, a = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(c, a, key=job.key, idempotency_key=job.key[:12])
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key built with hash()",
        "charge_is_the_same_after_a_restart",
        """
        def charge_handler(job, ctx):
            c, a = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(c, a, key=job.key, idempotency_key=str(hash(job.key)))
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key prefixed with a uuid made at import",
        "charge_is_the_same_after_a_restart",
        """
        import uuid
        RUN = uuid.uuid4().hex[:8]
        def charge_handler(job, ctx):
            c, a = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(c, a, key=job.key, idempotency_key=f"{RUN}:{job.key}")
    """,
    ),
    (
        "ex05",
        "a failed payment call caught and returned as a reply",
        "a_failed_charge_is_retried",
        """
        def charge_handler(job, ctx):
            c, a = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(c, a, key=job.key, idempotency_key=job.key)
            except Exception as exc:
                return {"error": str(exc)}
    """,
    ),
    (
        "ex05",
        "the ledger mark kept under the customer",
        "every_entry_is_posted_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(customer) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(customer, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a failed ledger write caught and returned as a reply",
        "a_failed_ledger_write_is_retried",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                with ctx.world.ledger.transaction() as tx:
                    if tx.status(job.key) == "done":
                        return {"skipped": "already posted"}
                    reply = tx.post(customer, amount, key=job.key)
                    tx.mark(job.key, "done")
                return reply
            except Exception as exc:
                return {"error": str(exc)}
    """,
    ),
    (
        "ex05",
        "the ledger mark kept under hash(job.key)",
        "post_is_the_same_after_a_restart",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            k = str(hash(job.key))
            with ctx.world.ledger.transaction() as tx:
                if tx.status(k) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(k, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the charge in whole units, not cents (amount // 100)",
        "charge_runs_once_without_faults",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount // 100 or 1, key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the ledger entry posted as a debit (-amount)",
        "post_runs_once_without_faults",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, -amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "charge_handler forgets to return the reply",
        "charge_runs_once_without_faults",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key lower-cased",
        "every_invoice_is_charged_once",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key.lower())
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key cut to 64 characters",
        "every_invoice_is_charged_once",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key[:64])
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key folded to ASCII (João and Joao are one customer)",
        "every_invoice_is_charged_once",
        """
        import unicodedata as _ud
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ikey = _ud.normalize("NFKD", job.key).encode("ascii", "ignore").decode()
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=ikey)
    """,
    ),
    (
        "ex05",
        "the ledger mark kept under the lower-cased key",
        "every_entry_is_posted_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = job.key.lower()
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a lost reply (a timeout) caught and returned as a reply",
        "a_failed_charge_is_retried",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except Exception as exc:
                if getattr(exc, "ambiguous", False):
                    return {"status": "unknown"}
                raise
    """,
    ),
    (
        "ex05",
        "the charge looked up first (payments.find), then made without a key",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            done = ctx.world.payments.find(job.key)
            if done:
                return done[0].response
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key)
    """,
    ),
    (
        "ex05",
        "a 409 (KeyInProgress) caught and returned as 'skipped'",
        "a_409_fails_the_attempt",
        """
        from labkit.world.services import KeyInProgress
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except KeyInProgress:
                return {"skipped": "another delivery is charging"}
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key stripped of everything but letters and digits",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        import re
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=re.sub(r"[^A-Za-z0-9]", "", job.key))
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key made ASCII with encode('ascii', 'replace')",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ikey = job.key.encode("ascii", "replace").decode()
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=ikey)
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key stripped of surrounding spaces",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key.strip())
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key folded with NFKC (a ligature becomes two letters)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        import unicodedata
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ikey = unicodedata.normalize("NFKC", job.key)
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=ikey)
    """,
    ),
    (
        "ex05",
        "the ledger mark written with its spaces replaced by '_'",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = job.key.replace(" ", "_")
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a busy ledger (StoreBusy, a TimeoutError) caught and returned as a reply",
        "a_failed_ledger_write_is_retried",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                with ctx.world.ledger.transaction() as tx:
                    if tx.status(job.key) == "done":
                        return {"skipped": "already posted"}
                    reply = tx.post(customer, amount, key=job.key)
                    tx.mark(job.key, "done")
                return reply
            except TimeoutError as exc:
                return {"error": f"ledger busy: {exc}"}
    """,
    ),
    (
        "ex05",
        "the charge looked up first, and a repeat returns 'skipped' instead of the reply",
        "a_repeat_keeps_the_first_reply",
        """
        def charge_handler(job, ctx):
            if ctx.world.payments.find(job.key):
                return {"skipped": "already charged"}
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "a module-level set of posted keys filled before the mark (a failed mark leaves it)",
        "a_failed_ledger_write_is_retried",
        """
        _POSTED = set()


        def post_handler(job, ctx):
            if job.key in _POSTED:
                return {"skipped": "already posted"}
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                _POSTED.add(job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "charge retried three times in the handler, then a 'failed' reply returned",
        "a_failed_charge_is_retried",
        """
        from labkit.errors import TransientError


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            last = None
            for _try in range(3):
                try:
                    return ctx.world.payments.charge(
                        customer, amount, key=job.key, idempotency_key=job.key
                    )
                except TransientError as exc:
                    last = exc
            return {"status": "failed", "error": str(last)}
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with today's local date in it",
        "the_same_calls_a_day_later",
        """
        from datetime import datetime


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ikey = f"{job.key}:{datetime.now():%Y-%m-%d}"
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=ikey)
    """,
    ),
    (
        "ex05",
        "the ledger mark read in its own transaction under a threading.Lock",
        "two_worker_processes_at_once",
        """
        import threading

        _LOCK = threading.Lock()


        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with _LOCK:
                if ctx.world.ledger.status(job.key) == "done":
                    return {"skipped": "already posted"}
                with ctx.world.ledger.transaction() as tx:
                    reply = tx.post(customer, amount, key=job.key)
                    tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the charge looked up first under a threading.Lock, made without a key",
        "two_worker_processes_at_once",
        """
        import threading

        _LOCK = threading.Lock()


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with _LOCK:
                done = ctx.world.payments.find(job.key)
                if done:
                    return done[0].response
                return ctx.world.payments.charge(customer, amount, key=job.key)
    """,
    ),
    (
        "ex05",
        "a 409 retried at once with another Idempotency-Key",
        "a_409_fails_the_attempt",
        """
        from labkit.world.services import KeyInProgress


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(
                    customer, amount, key=job.key, idempotency_key=job.key
                )
            except KeyInProgress:
                return ctx.world.payments.charge(
                    customer, amount, key=job.key, idempotency_key=job.key + ":retry"
                )
    """,
    ),
    (
        "ex05",
        "a busy ledger retried three times in the handler, then an error reply returned",
        "a_failed_ledger_write_is_retried",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for _try in range(3):
                try:
                    with ctx.world.ledger.transaction() as tx:
                        if tx.status(job.key) == "done":
                            return {"skipped": "already posted"}
                        reply = tx.post(customer, amount, key=job.key)
                        tx.mark(job.key, "done")
                    return reply
                except TimeoutError:
                    continue
            return {"error": "ledger busy"}
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the UTC hour in it",
        "the_same_calls_a_day_later",
        """
        import time


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ikey = f"{job.key}@{time.strftime('%Y%m%d%H', time.gmtime())}"
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=ikey)
    """,
    ),
    (
        "ex05",
        "the Idempotency-Key is the job's id (str(job.id))",
        "two_stores_two_keys",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=str(job.id)
            )
    """,
    ),
    (
        "ex05",
        "replies kept in a module-level dict by job.id (the second store's job 1 never charged)",
        "two_stores_two_keys",
        """
        _REPLIES = {}


        def charge_handler(job, ctx):
            # a job run again in this worker answers from memory: no second call at all
            if job.id in _REPLIES:
                return _REPLIES[job.id]
            customer, amount = job.payload["customer"], job.payload["amount"]
            reply = ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key
            )
            _REPLIES[job.id] = reply
            return reply
    """,
    ),
    (
        "ex05",
        "ledger replies kept in a module-level dict by job.id",
        "two_stores_two_keys",
        """
        _POSTED = {}


        def post_handler(job, ctx):
            if job.id in _POSTED:
                return _POSTED[job.id]
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            _POSTED[job.id] = reply
            return reply
    """,
    ),
    (
        "ex05",
        "the ledger mark kept under str(job.id)",
        "two_stores_two_keys",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(str(job.id)) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(str(job.id), "done")
            return reply
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key cut to its last 255 characters",
        "every_invoice_is_charged_once",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            # the API takes at most 255 characters: keep the end, where the keys differ
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key[-255:])
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key made base64 and cut to 40 characters",
        "every_invoice_is_charged_once",
        """
        import base64


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            # header-safe, and short
            ikey = base64.urlsafe_b64encode(job.key.encode()).decode()[:40]
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=ikey)
    """,
    ),
    (
        "ex05",
        "the attempt number in the Idempotency-Key",
        "charge_survives_lost_response",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{job.key}#{job.attempt}")
    """,
    ),
    (
        "ex05",
        "retried in the handler with a new Idempotency-Key per try",
        "charge_survives_lost_response",
        """
        from labkit.errors import TransientError


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for attempt in range(3):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=f"{job.key}:try{attempt}")
                except TransientError:
                    if attempt == 2:
                        raise
    """,
    ),
    (
        "ex05",
        "the worker's pid in the Idempotency-Key",
        "charge_is_the_same_after_a_restart",
        """
        import os


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{os.getpid()}:{job.key}")
    """,
    ),
    (
        "ex05",
        "a payment error re-raised as a RuntimeError (the worker buries it)",
        "a_failed_charge_is_retried",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(
                    customer, amount, key=job.key, idempotency_key=job.key
                )
            except Exception as exc:
                raise RuntimeError(f"charge of {amount} to {customer} failed: {exc}") from exc
    """,
    ),
    (
        "ex05",
        "a busy ledger re-raised as a ValueError (the worker buries it)",
        "a_failed_ledger_write_is_retried",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                with ctx.world.ledger.transaction() as tx:
                    if tx.status(job.key) == "done":
                        return {"skipped": "already posted"}
                    reply = tx.post(customer, amount, key=job.key)
                    tx.mark(job.key, "done")
            except TimeoutError as exc:
                raise ValueError(f"ledger write failed for {job.key}") from exc
            return reply
    """,
    ),
    (
        "ex05",
        "the mark written as 'Done', read as 'done'",
        "post_survives_every_crash",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "Done")
            return reply
    """,
    ),
    (
        "ex05",
        "the entry posted through ctx.world.ledger, not tx, inside the transaction",
        "post_survives_every_crash",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = ctx.world.ledger.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the customer lower-cased and stripped before the charge",
        "charge_runs_once_without_faults",
        """
        def charge_handler(job, ctx):
            customer = job.payload["customer"].strip().lower()  # tidy the customer id
            amount = job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the reply returned with the job's key added",
        "charge_runs_once_without_faults",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            reply = ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key
            )
            return {"job": job.key, **reply}
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the date read at import",
        "the_same_calls_a_day_later",
        """
        from datetime import date

        TODAY = date.today().isoformat()  # the billing day this worker runs for


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{TODAY}:{job.key}")
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with date.today() of the call",
        "the_same_calls_a_day_later",
        """
        from datetime import date


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            day = date.today().isoformat()  # one charge per customer per billing day
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{day}:{job.key}")
    """,
    ),
    (
        "ex05",
        "the ledger mark with the day read at import (time.strftime)",
        "the_same_calls_a_day_later",
        """
        import time

        DAY = time.strftime("%Y%m%d")


        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{job.key}@{DAY}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with datetime.now() of the import",
        "the_same_calls_a_day_later",
        """
        from datetime import datetime

        RUN = datetime.now().strftime("%Y%m%d")  # one billing run per day


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{RUN}-{job.key}")
    """,
    ),
    (
        "ex05",
        "the amount sent as a float (float(amount): 4200.0)",
        "charge_runs_once_without_faults",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], float(job.payload["amount"])
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the Idempotency-Key sent only on a retry (attempt > 1)",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            key = job.key if getattr(job, "attempt", 1) > 1 else None
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=key)
    """,
    ),
    (
        "ex05",
        "the ledger amount made positive with abs() (a credit note posted as a bill)",
        "post_runs_once_without_faults",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], abs(job.payload["amount"])
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "post_handler forgets to return tx.post's reply",
        "post_runs_once_without_faults",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
    """,
    ),
    (
        "ex05",
        "the ledger mark kept under the customer and the amount",
        "every_entry_is_posted_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{customer}:{amount}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key from the kind, the customer and job.id",
        "two_stores_two_keys",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ikey = f"{job.kind}:{customer}:{job.id}"
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=ikey)
    """,
    ),
    (
        "ex05",
        "the ledger mark kept under the kind, the customer and job.id",
        "two_stores_two_keys",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{job.kind}:{customer}:{job.id}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a 409 retried five times, then 'skipped' returned",
        "a_409_fails_the_attempt",
        """
        import time


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for _ in range(5):
                try:
                    return ctx.world.payments.charge(
                        customer, amount, key=job.key, idempotency_key=job.key
                    )
                except Exception as exc:
                    if "409" not in str(exc) and "progress" not in str(exc).lower():
                        raise
                    time.sleep(0.01)
            return {"skipped": "another delivery holds the key"}
    """,
    ),
    (
        "ex05",
        "a failed mark swallowed inside the transaction (the entry commits without it)",
        "a_failed_ledger_write_is_retried",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                try:
                    tx.mark(job.key, "done")
                except Exception:
                    pass
            return reply
    """,
    ),
    (
        "ex05",
        "a refused charge (a 400) caught and returned as a 'failed' reply",
        "a_refused_charge_is_not_a_success",
        """
        from labkit.errors import TransientError


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError:
                raise
            except Exception as exc:
                return {"status": "failed", "error": str(exc)}
    """,
    ),
    (
        "ex05",
        "a 429 (rate limited) caught and returned as a reply",
        "a_failed_charge_is_retried",
        """
        from labkit.errors import TransientError


        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if getattr(exc, "status", None) == 429:
                    return {"status": "rate_limited", "retry_after": exc.retry_after}
                raise
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with ':' replaced by '-' (acct:8 and acct-8 are one customer)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key.replace(":", "-"))
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with its inner spaces removed",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key.replace(" ", ""))
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with its runs of spaces collapsed to one",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        import re
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=re.sub(r"\\s+", " ", job.key))
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key without its version, by rstrip(':v1') (strips characters)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key.rstrip(":v1"))
    """,
    ),
    (
        "ex05",
        "the ledger mark without its version, by rstrip(':v1')",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = job.key.rstrip(":v1")
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the charge made in 'USD' (a currency the job never named)",
        "charge_runs_once_without_faults",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, "USD", key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the mark 'started' in one transaction, the entry and 'done' in the next",
        "post_survives_two_deliveries_at_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ledger = ctx.world.ledger
            with ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                tx.mark(job.key, "started")
            with ledger.transaction() as tx:
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a lost reply answered with a reply of its own after payments.find",
        "a_repeat_keeps_the_first_reply",
        """
        from labkit.errors import ResponseLost
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except ResponseLost:
                if ctx.world.payments.find(job.key):
                    return {"status": "succeeded"}
                raise
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key cut to 255 characters (a payment API's limit)",
        "every_invoice_is_charged_once",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key[:255])
    """,
    ),
    (
        "ex05",
        "the ledger mark kept under the key cut to 255 characters (VARCHAR(255))",
        "every_entry_is_posted_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key[:255]) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key[:255], "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a 409 retried three times with the same key, then with a new one",
        "a_409_fails_the_attempt",
        """
        import time
        from labkit.world.services import KeyInProgress
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            key = job.key
            for attempt in range(4):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=key)
                except KeyInProgress as exc:
                    time.sleep(min(exc.retry_after or 0.05, 0.05))
                    if attempt == 2:
                        key = f"{job.key}:retry"
            raise RuntimeError("payments kept answering 409")
    """,
    ),
    (
        "ex05",
        "the ledger mark written under the lower-cased key, looked up under the key",
        "every_post_is_marked_under_the_key_it_looks_up",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key.lower(), "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a job found posted raises 'already posted' (the worker buries it as dead)",
        "a_posted_job_run_again_succeeds",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    raise RuntimeError(f"{job.key} already posted")
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "no Idempotency-Key for a key over 255 characters (the API's limit)",
        "every_charge_carries_its_idempotency_key",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            key = job.key if len(job.key) <= 255 else None
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=key)
    """,
    ),
    (
        "ex05",
        "a credit note (a negative amount) posted and returned before its mark",
        "every_post_is_marked_under_the_key_it_looks_up",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                if amount < 0:
                    return reply
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the Idempotency-Key on the first attempt only; a retry looks first, then charges without",
        "every_charge_carries_its_idempotency_key",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            if job.attempt <= 1:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            found = ctx.world.payments.find(job.key)
            if found:
                return found[0].response
            return ctx.world.payments.charge(customer, amount, key=job.key)
    """,
    ),
    (
        "ex05",
        "every payment error re-raised as a TransientError (a declined card retried)",
        "a_refused_charge_is_not_retried",
        """
        from labkit.errors import TransientError
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except Exception as exc:
                raise TransientError(f"payment failed: {exc}") from exc
    """,
    ),
    (
        "ex05",
        "a 409 answered 'skipped' once payments.find shows the other delivery's charge",
        "a_409_answered_by_find_keeps_the_reply",
        """
        from labkit.world.services import KeyInProgress
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except KeyInProgress:
                if ctx.world.payments.find(job.key):
                    return {"skipped": "charged by the other delivery"}
                raise
    """,
    ),
    (
        "ex05",
        "a 409 with nothing in payments.find charged again without a key",
        "a_409_fails_the_attempt",
        """
        from labkit.world.services import KeyInProgress
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except KeyInProgress:
                if not ctx.world.payments.find(job.key):
                    return ctx.world.payments.charge(customer, amount, key=job.key)
                raise
    """,
    ),
    (
        "ex05",
        "invoices over R$ 1,000 skipped as 'needs approval' (a silent limit)",
        "a_large_invoice_is_charged_in_full",
        """
        MAX_CENTS = 100_000
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            if amount > MAX_CENTS:
                return {"skipped": "needs manual approval"}
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "ledger entries capped at a million cents",
        "a_large_invoice_is_charged_in_full",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], min(job.payload["amount"], 1_000_000)
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "an IdempotencyKeyReused conflict caught and returned as 'skipped'",
        "a_conflicting_key_fails_the_job",
        """
        from labkit.errors import IdempotencyConflict
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except IdempotencyConflict:
                return {"skipped": "already charged"}
    """,
    ),
    (
        "ex05",
        "a conflicting key answered 'skipped' once payments.find shows a charge",
        "a_conflicting_key_fails_the_job",
        """
        from labkit.errors import IdempotencyConflict
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except IdempotencyConflict:
                if ctx.world.payments.find(job.key):
                    return {"skipped": "already charged"}
                raise
    """,
    ),
    (
        "ex05",
        "a conflicting key retried with a new Idempotency-Key (the amount added to it)",
        "a_conflicting_key_fails_the_job",
        """
        from labkit.errors import IdempotencyConflict
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except IdempotencyConflict:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=f"{job.key}:{amount}")
    """,
    ),
    (
        "ex05",
        "a declined charge (a 400) tried three times in the handler with the same key",
        "a_refused_charge_is_not_retried",
        """
        from labkit.errors import PermanentError
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for attempt in range(3):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except PermanentError:
                    if attempt == 2:
                        raise
    """,
    ),
    (
        "ex05",
        "a declined charge (a 400) tried again with a new Idempotency-Key",
        "a_refused_charge_is_not_retried",
        """
        from labkit.errors import PermanentError
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except PermanentError:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key + ":retry")
    """,
    ),
    (
        "ex05",
        "a posted job run again returns None, not {'skipped': 'already posted'}",
        "a_posted_job_run_again_succeeds",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return None
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the entry looked up with ledger.find before the transaction (two deliveries both post)",
        "post_survives_two_deliveries_at_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            if ctx.world.ledger.find(job.key):
                return {"skipped": "already posted"}
            with ctx.world.ledger.transaction() as tx:
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a lost reply retried three times in the handler, then an 'unknown' reply returned",
        "a_failed_charge_is_retried",
        """
        from labkit.errors import ResponseLost
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for _ in range(3):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except ResponseLost:
                    continue
            return {"status": "unknown", "key": job.key}
    """,
    ),
    (
        "ex05",
        "a 429 retried three times in the handler, then a 'rate limited' reply returned",
        "a_failed_charge_is_retried",
        """
        from labkit.errors import TransientError
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for _ in range(3):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except TransientError as exc:
                    if exc.status != 429:
                        raise
            return {"status": "rate limited", "key": job.key}
    """,
    ),
    (
        "ex05",
        "the charge looked up first and answered from payments.find, its amount unchecked",
        "a_conflicting_key_fails_the_job",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            found = ctx.world.payments.find(job.key)
            if found:
                return found[0].response
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the billing month of the call (time.strftime('%Y-%m'))",
        "the_same_calls_a_day_later",
        """
        import time
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            period = time.strftime("%Y-%m")
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{job.key}:{period}")
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the ISO week of the call (date.today().isocalendar())",
        "the_same_calls_a_day_later",
        """
        from datetime import date
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            year, week, _day = date.today().isocalendar()
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{job.key}:{year}-W{week:02d}")
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the UTC month (datetime.now(timezone.utc))",
        "the_same_calls_a_day_later",
        """
        from datetime import datetime, timezone
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            month = datetime.now(timezone.utc).strftime("%Y%m")
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{job.key}:{month}")
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the year of the call (a fiscal year)",
        "the_same_calls_a_day_later",
        """
        import datetime
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            fiscal_year = datetime.date.today().year
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"FY{fiscal_year}:{job.key}")
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the billing month read at import",
        "the_same_calls_a_day_later",
        """
        import time
        BILLING_PERIOD = time.strftime("%Y-%m")
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{BILLING_PERIOD}:{job.key}")
    """,
    ),
    (
        "ex05",
        "the ledger mark with the month of the call (datetime.now():%Y-%m)",
        "the_same_calls_a_day_later",
        """
        from datetime import datetime
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{job.key}:{datetime.now():%Y-%m}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        # "Namespace the key by worker, so two workers never clash": the retry that lands
        # on another worker sends another key, and the API charges again.
        "ex05",
        "an Idempotency-Key prefixed with the worker's host name, read at import",
        "the_same_calls_a_day_later",
        """
        import socket
        WORKER = socket.gethostname()
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{WORKER}:{job.key}")
    """,
    ),
    (
        "ex05",
        "the ledger mark prefixed with the host it is posted from (platform.node())",
        "the_same_calls_a_day_later",
        """
        import platform
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{platform.node()}/{job.key}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        # A corrected invoice is a new key to the API: the customer pays twice.
        "the Idempotency-Key made of the job's key, the customer and the amount",
        "a_conflicting_key_fails_the_job",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=f"{job.key}:{customer}:{amount}")
    """,
    ),
    (
        "ex05",
        # 32 bits: the keys of some 65,000 invoices meet, and the second is never charged.
        "the Idempotency-Key a sha256 of the job's key cut to 8 hex characters",
        "every_charge_carries_its_idempotency_key",
        """
        import hashlib
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            ikey = hashlib.sha256(job.key.encode()).hexdigest()[:8]
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=ikey)
    """,
    ),
    (
        "ex05",
        # Two jobs whose keys meet in 32 bits share a mark: the second is never posted.
        "the ledger mark a sha256 of the job's key cut to 8 hex characters",
        "every_post_is_marked_under_the_key_it_looks_up",
        """
        import hashlib
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = hashlib.sha256(job.key.encode()).hexdigest()[:8]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        # acct:8 and acct_8 (or any two names that differ only there) then send one key:
        # the second invoice gets the first one's charge back, or a refusal.
        "Idempotency-Key 'cleaned' for a header: ':' replaced by '_'",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key.replace(":", "_")
            )
    """,
    ),
    (
        "ex05",
        # A charge whose reply was lost, the job dead and redriven: a key that changes
        # with the redrive is a new charge, and the customer pays twice.
        "Idempotency-Key with the job's redrives in it (a redrive taken for a new try)",
        "a_redriven_job_sends_the_same_key",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            # a redrive is a deliberate new try: give it a key of its own
            idem = job.key if not job.redrives else f"{job.key}:redrive-{job.redrives}"
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
    """,
    ),
    (
        "ex05",
        # A job redriven into another queue sends another key: its charge, already made,
        # is made again.
        "Idempotency-Key prefixed with the job's queue",
        "a_redriven_job_sends_the_same_key",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            # keys are unique within a queue: namespace the Idempotency-Key by it
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=f"{job.queue}:{job.key}"
            )


        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{job.queue}:{job.key}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        # An invoice whose customer support corrected gets a new key: the first customer
        # was charged, and now the second is too.
        "Idempotency-Key built from the job's key and the customer",
        "a_conflicting_key_fails_the_job",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            # one key per (job, customer): the API refuses a key reused with other parameters
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=f"{job.key}:{customer}"
            )
    """,
    ),
    (
        "ex05",
        "the ledger mark keyed with the job's redrives",
        "a_redriven_job_finds_its_mark",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{job.key}#{job.redrives}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the ledger mark keyed with the job's queue",
        "a_redriven_job_finds_its_mark",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{job.queue}:{job.key}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        # 王伟 and 李娜 both become '??': the second invoice gets the first one's charge.
        "an Idempotency-Key made latin-1 for an HTTP header (encode('latin-1', 'replace'))",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            # HTTP header values are latin-1: make the key header-safe
            idem = job.key.encode("latin-1", "replace").decode("latin-1")
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key made latin-1, the other letters dropped (encode('latin-1', 'ignore'))",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = job.key.encode("latin-1", "ignore").decode("latin-1")
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
    """,
    ),
    (
        "ex05",
        "the ledger mark made latin-1 for a latin-1 column (encode('latin-1', 'replace'))",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = job.key.encode("latin-1", "replace").decode("latin-1")
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        # 23 characters, but only 8 of them (32 bits) tell two invoices apart.
        "an Idempotency-Key 'invoice-charge:' + a sha256 of the job's key cut to 8 hex characters",
        "every_charge_carries_its_idempotency_key",
        """
        import hashlib
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = "invoice-charge:" + hashlib.sha256(job.key.encode()).hexdigest()[:8]
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
    """,
    ),
    (
        "ex05",
        "the ledger mark 'ledger-post:' + a sha256 of the job's key cut to 8 hex characters",
        "every_post_is_marked_under_the_key_it_looks_up",
        """
        import hashlib
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = "ledger-post:" + hashlib.sha256(job.key.encode()).hexdigest()[:8]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        # Two long keys that differ only in their middle become one.
        "an Idempotency-Key over 255 characters shortened to its head and its tail",
        "every_invoice_is_charged_once",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            key = job.key
            if len(key) > 255:  # the API's limit: keep the head and the tail, where keys differ
                key = key[:127] + "~" + key[-127:]
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=key)
    """,
    ),
    (
        "ex05",
        "the ledger mark over 255 characters shortened to its head and its tail (VARCHAR(255))",
        "every_entry_is_posted_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = job.key
            if len(mark) > 255:  # the marks column is VARCHAR(255)
                mark = mark[:127] + "~" + mark[-127:]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        # Its own handler finds it, but whoever reads the ledger for 'done' does not.
        "the ledger mark written and read as 'posted', not 'done'",
        "every_mark_says_done",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "posted":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "posted")
            return reply
    """,
    ),
    (
        "ex05",
        # '409 Conflict' read as a client error: the worker buries the job, never charged.
        "a 409 (KeyInProgress) re-raised as a PermanentError",
        "a_409_fails_the_attempt",
        """
        from labkit.errors import PermanentError
        from labkit.world.services import KeyInProgress
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except KeyInProgress as exc:
                raise PermanentError(f"charge for {job.key} conflicts: {exc}") from exc
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key normalised to NFC (josé in one code point or two is one key)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        import unicodedata
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=unicodedata.normalize("NFC", job.key))
    """,
    ),
    (
        "ex05",
        "the ledger mark normalised to NFC, read and written",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        import unicodedata
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = unicodedata.normalize("NFC", job.key)
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the customer stripped of its spaces before the charge",
        "the_customer_as_the_job_names_it",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"].strip(), job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the ledger account normalised to NFC",
        "the_customer_as_the_job_names_it",
        """
        import unicodedata
        def post_handler(job, ctx):
            customer = unicodedata.normalize("NFC", job.payload["customer"])
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, job.payload["amount"], key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a charge under the 50-cent minimum skipped with a reply of its own",
        "a_small_invoice_is_charged_too",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            if amount < 50:
                return {"skipped": "below the minimum charge"}
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "a zero-amount ledger entry skipped",
        "a_small_invoice_is_charged_too",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            if not amount:
                return {"skipped": "nothing to post"}
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a set of charged keys in the worker: a repeat there answered 'skipped'",
        "a_repeat_in_one_worker_keeps_the_reply",
        """
        _CHARGED = set()
        def charge_handler(job, ctx):
            if job.key in _CHARGED:
                return {"skipped": "already charged"}
            customer, amount = job.payload["customer"], job.payload["amount"]
            reply = ctx.world.payments.charge(customer, amount, key=job.key,
                                              idempotency_key=job.key)
            _CHARGED.add(job.key)
            return reply
    """,
    ),
    (
        "ex05",
        "charges 'in progress' kept in a set: a second delivery answered 'skipped'",
        "a_second_delivery_in_one_worker_is_no_success",
        """
        import threading
        _INFLIGHT, _LOCK = set(), threading.Lock()
        def charge_handler(job, ctx):
            with _LOCK:
                if job.key in _INFLIGHT:
                    return {"skipped": "already being charged"}
                _INFLIGHT.add(job.key)
            try:
                customer, amount = job.payload["customer"], job.payload["amount"]
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            finally:
                with _LOCK:
                    _INFLIGHT.discard(job.key)
    """,
    ),
    (
        "ex05",
        "posts 'in progress' kept in a set: a second delivery answered 'already posted'",
        "a_second_delivery_in_one_worker_is_no_success",
        """
        import threading
        _INFLIGHT, _LOCK = set(), threading.Lock()
        def post_handler(job, ctx):
            with _LOCK:
                if job.key in _INFLIGHT:
                    return {"skipped": "already posted"}
                _INFLIGHT.add(job.key)
            try:
                customer, amount = job.payload["customer"], job.payload["amount"]
                with ctx.world.ledger.transaction() as tx:
                    if tx.status(job.key) == "done":
                        return {"skipped": "already posted"}
                    reply = tx.post(customer, amount, key=job.key)
                    tx.mark(job.key, "done")
                return reply
            finally:
                with _LOCK:
                    _INFLIGHT.discard(job.key)
    """,
    ),
    (
        "ex05",
        "the ledger mark keyed with the job's key and its customer",
        "a_redriven_job_finds_its_mark",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{job.key}:{customer}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "charges capped at a 32-bit integer column's maximum (2**31 - 1 cents)",
        "a_large_invoice_is_charged_in_full",
        """
        INT32_MAX = 2**31 - 1
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], min(job.payload["amount"], INT32_MAX)
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the amount sent through reais in floating point (int(amount / 100 * 100))",
        "the_customer_as_the_job_names_it",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            reais = amount / 100
            return ctx.world.payments.charge(customer, int(reais * 100), key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        # A space "encoded" for a header by hand: a key that already holds "%20" (a name
        # typed that way) is then the same key.
        "an Idempotency-Key with its spaces URL-encoded by hand (replace(' ', '%20'))",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key.replace(" ", "%20")
            )
    """,
    ),
    (
        "ex05",
        "the ledger mark URL-decoded (urllib.parse.unquote) before it is read and written",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        from urllib.parse import unquote
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = unquote(job.key)
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the characters a header cannot print dropped (isprintable)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            header_safe = "".join(ch for ch in job.key if ch.isprintable())
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=header_safe
            )
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with its no-break spaces made plain spaces",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key.replace("\\xa0", " ")
            )
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with its backslashes replaced by '/' (a Windows path made a URL path)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key.replace("\\\\", "/")
            )
    """,
    ),
    (
        "ex05",
        "the ledger mark stripped of leading spaces (lstrip)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key.lstrip()) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key.lstrip(), "done")
            return reply
    """,
    ),
    (
        "ex05",
        # The other 400 of the API, retried: every try meets the same conflict, and the
        # worker spends the job's attempts on it before burying it anyway.
        "an IdempotencyKeyReused conflict re-raised as a TransientError (retried in vain)",
        "a_refused_charge_is_not_retried",
        """
        from labkit.errors import TransientError
        from labkit.world.services import IdempotencyKeyReused
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except IdempotencyKeyReused as exc:
                raise TransientError(str(exc)) from exc
    """,
    ),
    (
        "ex05",
        # "No header injection": a key that holds a line break (a name from a multi-line
        # CSV field) then names the same charge as the one without it.
        "an Idempotency-Key with its CR and LF stripped for a header",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            header_safe = job.key.replace("\\r", "").replace("\\n", "")
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=header_safe
            )
    """,
    ),
    (
        "ex05",
        "the ledger mark cut at its first line (splitlines()[0])",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = job.key.splitlines()[0]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key stripped of zero-width spaces (invisible characters)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key.replace("\\u200b", "")
            )
    """,
    ),
    (
        "ex05",
        "replies kept in a module-level dict by job.key (a second world never charged)",
        "each_world_is_asked_for_the_job",
        """
        REPLIES = {}
        def charge_handler(job, ctx):
            if job.key in REPLIES:
                return REPLIES[job.key]
            customer, amount = job.payload["customer"], job.payload["amount"]
            reply = ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key
            )
            REPLIES[job.key] = reply
            return reply
    """,
    ),
    (
        "ex05",
        "a module-level set of posted keys filled after the commit (a second world never posted)",
        "each_world_is_asked_for_the_job",
        """
        POSTED = set()
        def post_handler(job, ctx):
            if job.key in POSTED:
                return {"skipped": "already posted"}
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            POSTED.add(job.key)
            return reply
    """,
    ),
    # Caught inside the block, the failed mark lets the entry commit; raised again after
    # it, the error is no StoreBusy: the job is buried with an unmarked entry.
    (
        "ex05",
        "a failed ledger write caught inside the transaction, raised again after the block",
        "a_failed_mark_rolls_back_its_entry",
        """
        def post_handler(job, ctx):
            failure = None
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
                try:
                    tx.mark(job.key, "done")
                except Exception as exc:
                    failure = exc
            if failure is not None:
                raise failure
            return reply
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key without its prefix, by lstrip('billing:') (strips characters)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                             key=job.key,
                                             idempotency_key=job.key.lstrip("billing:"))
    """,
    ),
    (
        "ex05",
        "the ledger mark without its prefix, by lstrip('ledger:')",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def post_handler(job, ctx):
            mark = job.key.lstrip("ledger:")
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a credit note charged as a positive amount (abs(amount))",
        "a_credit_note_is_never_charged",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, abs(amount), key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "a zero invoice charged one cent (max(amount, 1))",
        "a_credit_note_is_never_charged",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, max(amount, 1), key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with its tabs expanded to spaces (expandtabs())",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key.expandtabs())
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key stripped of the quotes around it (strip('\\'\"'))",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key.strip("'\\""))
    """,
    ),
    (
        "ex05",
        "a 429 re-raised as a TransientError with retry_after=0 (retry at once)",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status == 429:
                    raise TransientError(str(exc), status=429, retry_after=0) from exc
                raise
    """,
    ),
    (
        "ex05",
        "every TransientError wrapped with the job's key, its retry_after lost",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                raise TransientError(f"charge {job.key} failed: {exc}") from exc
    """,
    ),
    (
        "ex05",
        "a missing customer charged as 'unknown' (payload.get with a default)",
        "the_customer_as_the_job_names_it",
        """
        def charge_handler(job, ctx):
            customer = job.payload.get("customer", "unknown")
            amount = job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "a missing customer posted to the 'unknown' account",
        "the_customer_as_the_job_names_it",
        """
        def post_handler(job, ctx):
            customer = job.payload.get("customer") or "unknown"
            amount = job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a missing ledger amount posted as 0 (payload.get('amount', 0))",
        "the_customer_as_the_job_names_it",
        """
        def post_handler(job, ctx):
            customer = job.payload["customer"]
            amount = job.payload.get("amount", 0)
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a missing customer read off the job's key",
        "the_customer_as_the_job_names_it",
        """
        def charge_handler(job, ctx):
            customer = job.payload.get("customer") or job.key.split(":")[1]
            return ctx.world.payments.charge(customer, job.payload["amount"], key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the customer's apostrophe doubled by hand for SQL",
        "the_customer_as_the_job_names_it",
        """
        def charge_handler(job, ctx):
            customer = job.payload["customer"].replace("'", "''")
            return ctx.world.payments.charge(customer, job.payload["amount"], key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the customer stripped of the quotes around it (a CSV export)",
        "the_customer_as_the_job_names_it",
        """
        def charge_handler(job, ctx):
            customer = job.payload["customer"].strip("\\"'")
            return ctx.world.payments.charge(customer, job.payload["amount"], key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the ledger account HTML-escaped (html.escape)",
        "the_customer_as_the_job_names_it",
        """
        import html

        def post_handler(job, ctx):
            customer, amount = html.escape(job.payload["customer"]), job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "the customer id cut to 64 characters (a VARCHAR(64) column)",
        "the_customer_as_the_job_names_it",
        """
        def charge_handler(job, ctx):
            customer = job.payload["customer"][:64]
            return ctx.world.payments.charge(customer, job.payload["amount"], key=job.key,
                                             idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "the ledger account cut to 32 characters",
        "the_customer_as_the_job_names_it",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"][:32], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a missing customer posted as str(None)",
        "the_customer_as_the_job_names_it",
        """
        def post_handler(job, ctx):
            customer, amount = str(job.payload.get("customer")), job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a 429 retried in the handler after 10 ms, its Retry-After ignored",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        import time

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            while True:
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except TransientError:
                    time.sleep(0.01)
    """,
    ),
    (
        "ex05",
        "a 429 retried in the handler after a fixed second",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        import time

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status != 429:
                    raise
                time.sleep(1)
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "a 429's Retry-After read as milliseconds (slept retry_after / 1000)",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        import time

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status != 429:
                    raise
                time.sleep(exc.retry_after / 1000)
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "a 429 retried with a backoff of its own (0.1 s, doubled), its Retry-After ignored",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        import time

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for attempt in range(4):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except TransientError:
                    if attempt == 3:
                        raise
                    time.sleep(0.1 * 2**attempt)
    """,
    ),
    (
        "ex05",
        "a 429's Retry-After slept out in the handler, capped at 5 s (min(retry_after, 5))",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        import time

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status != 429:
                    raise
                time.sleep(min(exc.retry_after or 1, 5))
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "a 503 retried eight times in the handler (backoff), then a 'failed' reply returned",
        "a_long_outage_fails_the_attempt",
        """
        import time

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for attempt in range(8):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except TransientError as exc:
                    if exc.status != 503:
                        raise
                    time.sleep(0.05 * 2**attempt)
            return {"status": "failed", "reason": "payments unavailable"}
    """,
    ),
    (
        "ex05",
        "a busy ledger retried eight times in the handler, then an error reply returned",
        "a_long_outage_fails_the_attempt",
        """
        import time

        from labkit.errors import StoreBusy

        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for _attempt in range(8):
                try:
                    with ctx.world.ledger.transaction() as tx:
                        if tx.status(job.key) == "done":
                            return {"skipped": "already posted"}
                        reply = tx.post(customer, amount, key=job.key)
                        tx.mark(job.key, "done")
                    return reply
                except StoreBusy:
                    time.sleep(0.01)
            return {"error": "ledger busy"}
    """,
    ),
    (
        "ex05",
        "a lost reply retried eight times in the handler, then an 'unknown' reply returned",
        "a_long_outage_fails_the_attempt",
        """
        from labkit.errors import ResponseLost

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for _attempt in range(8):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except ResponseLost:
                    continue
            return {"status": "unknown"}
    """,
    ),
    (
        "ex05",
        "a 429 slept out eight times in the handler, then a 'rate limited' reply returned",
        "a_long_outage_fails_the_attempt",
        """
        import time

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for _attempt in range(8):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except TransientError as exc:
                    if exc.status != 429:
                        raise
                    time.sleep(exc.retry_after)
            return {"status": "rate limited"}
    """,
    ),
    (
        "ex05",
        "a failed charge on the job's last attempt answered 'gave up' (the job never dead)",
        "a_long_outage_fails_the_attempt",
        """
        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError:
                if job.attempt >= job.max_attempts:
                    return {"status": "gave up", "attempts": job.attempt}
                raise
    """,
    ),
    (
        "ex05",
        "a busy ledger on the job's last attempt answered with an error reply",
        "a_long_outage_fails_the_attempt",
        """
        from labkit.errors import StoreBusy

        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                with ctx.world.ledger.transaction() as tx:
                    if tx.status(job.key) == "done":
                        return {"skipped": "already posted"}
                    reply = tx.post(customer, amount, key=job.key)
                    tx.mark(job.key, "done")
                return reply
            except StoreBusy:
                if job.attempt >= job.max_attempts:
                    return {"error": "ledger busy, gave up"}
                raise
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key made ASCII with encode('ascii', 'backslashreplace')",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = job.key.encode("ascii", "backslashreplace").decode("ascii")
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key made ASCII with HTML character references (xmlcharrefreplace)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = job.key.encode("ascii", "xmlcharrefreplace").decode("ascii")
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key percent-encoded but for its printable characters "
        "(quote(key, safe=string.printable): '%' is kept as it is)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        import string
        from urllib.parse import quote

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = quote(job.key, safe=string.printable)
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
    """,
    ),
    (
        "ex05",
        "the ledger mark made ASCII with encode('ascii', 'backslashreplace')",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def post_handler(job, ctx):
            mark = job.key.encode("ascii", "backslashreplace").decode("ascii")
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with its trailing newline stripped for a header (rstrip('\\n'))",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = job.key.rstrip("\\n")
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
    """,
    ),
    (
        "ex05",
        "a 429 wrapped with its Retry-After made milliseconds (retry_after * 1000: hours)",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status != 429:
                    raise
                raise TransientError(f"rate limited: {job.key}", status=429,
                                     retry_after=(exc.retry_after or 0) * 1000) from exc
    """,
    ),
    (
        "ex05",
        "an Idempotency-Key with the day of the worker's clock (ctx.clock.now() // 86400)",
        "the_same_calls_a_day_later",
        """
        def charge_handler(job, ctx):
            day = int(ctx.clock.now() // 86400)
            return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                             key=job.key, idempotency_key=f"{job.key}:{day}")
    """,
    ),
    (
        "ex05",
        "the ledger mark with the month of the worker's clock (ctx.clock.now(): %Y-%m)",
        "the_same_calls_a_day_later",
        """
        from datetime import datetime, timezone

        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            month = datetime.fromtimestamp(ctx.clock.now(), timezone.utc).strftime("%Y-%m")
            mark = f"{job.key}:{month}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
    """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "an Idempotency-Key with the day of the worker's clock (ctx.clock.now() // 86400)": (
        "from the last day of a month to the next month"
    ),
    "the ledger mark with the month of the worker's clock (ctx.clock.now(): %Y-%m)": (
        "from the last day of a month to the next month"
    ),
    "charges capped at a 32-bit integer column's maximum (2**31 - 1 cents)": (
        "a charge of 2147483657 for job"
    ),
    "the amount sent through reais in floating point (int(amount / 100 * 100))": (
        "made for 1003 cents, as it is"
    ),
    "the customer stripped of its spaces before the charge": "made to the customer ' cus_9'",
    "the ledger account normalised to NFC": "for the customer 'jose\\u0301'",
    "a charge under the 50-cent minimum skipped with a reply of its own": "a charge of 1 for job",
    "a zero-amount ledger entry skipped": "a ledger entry of 0 for job",
    "a set of charged keys in the worker: a repeat there answered 'skipped'": (
        "run a second time in the same worker"
    ),
    "charges 'in progress' kept in a set: a second delivery answered 'skipped'": (
        "while the first was still charging"
    ),
    "posts 'in progress' kept in a set: a second delivery answered 'already posted'": (
        "while the first was still posting"
    ),
    "the ledger mark keyed with the job's key and its customer": (
        "its invoice corrected (customer 'cus_24'"
    ),
    "a 409 (KeyInProgress) re-raised as a PermanentError": "as an error the worker retries",
    "an Idempotency-Key normalised to NFC (josé in one code point or two is one key)": (
        "written as one code point or as two"
    ),
    "the ledger mark normalised to NFC, read and written": "written as one code point or as two",
    "an Idempotency-Key made latin-1 for an HTTP header (encode('latin-1', 'replace'))": (
        "a letter outside Latin-1"
    ),
    "an Idempotency-Key made latin-1, the other letters dropped (encode('latin-1', 'ignore'))": (
        "a letter outside Latin-1"
    ),
    "the ledger mark made latin-1 for a latin-1 column (encode('latin-1', 'replace'))": (
        "one post per job"
    ),
    "an Idempotency-Key 'invoice-charge:' + a sha256 of the job's key cut to 8 hex characters": (
        "not counting a prefix or a suffix every job's key has"
    ),
    "the ledger mark 'ledger-post:' + a sha256 of the job's key cut to 8 hex characters": (
        "not counting a prefix or a suffix every job's mark has"
    ),
    "an Idempotency-Key over 255 characters shortened to its head and its tail": (
        "one charge per invoice"
    ),
    "the ledger mark over 255 characters shortened to its head and its tail (VARCHAR(255))": (
        "one ledger entry per job"
    ),
    "the ledger mark written and read as 'posted', not 'done'": "written as 'done'",
    "the ledger mark keyed with the job's redrives": "one ledger entry for job",
    "the ledger mark keyed with the job's queue": "the second run finds the mark",
    "Idempotency-Key with the job's redrives in it (a redrive taken for a new try)": (
        "again for job"
    ),
    "Idempotency-Key prefixed with the job's queue": "again for job",
    "Idempotency-Key built from the job's key and the customer": "now that its invoice names",
    "Idempotency-Key 'cleaned' for a header: ':' replaced by '_'": (
        "that differ only in punctuation"
    ),
    "the Idempotency-Key made of the job's key, the customer and the amount": (
        "the 400 IdempotencyKeyReused, and no new charge"
    ),
    "the Idempotency-Key a sha256 of the job's key cut to 8 hex characters": (
        "its own key as the Idempotency-Key, or a digest of it"
    ),
    "the ledger mark a sha256 of the job's key cut to 8 hex characters": (
        "its own key as its ledger mark, or a digest of it"
    ),
    "every payment error re-raised as a TransientError (a declined card retried)": (
        "which the worker does not retry"
    ),
    "a 409 answered 'skipped' once payments.find shows the other delivery's charge": (
        "a charge with the same Idempotency-Key answers it"
    ),
    "a 409 with nothing in payments.find charged again without a key": (
        "every charge with the same Idempotency-Key"
    ),
    "invoices over R$ 1,000 skipped as 'needs approval' (a silent limit)": "a charge of 250000",
    "ledger entries capped at a million cents": "a ledger entry of 12345678",
    "no idempotency key (at-least-once)": "exactly one charge after a crash",
    "check-then-act in two transactions": "exactly one charge after a crash",
    "a new idempotency key per attempt": "exactly one charge after a lost reply",
    "ack before the effect": "exactly one charge after a crash at after_commit",
    "ledger entry and mark in two transactions": "after the first ledger commit",
    "check, post and mark in three separate transactions": "ledger commit number 2",
    "a typo in the handler (an AttributeError the worker retries)": "to fire",
    "mark checked in its own transaction before posting (two deliveries both post)": (
        "two deliveries of the job at the same moment"
    ),
    "one constant idempotency key": "one charge per invoice",
    "an Idempotency-Key built from the customer and the amount": "one charge per invoice",
    "the job's key cut to its first 12 characters": "one charge per invoice",
    "an Idempotency-Key built with hash()": "in a restarted worker",
    "an Idempotency-Key prefixed with a uuid made at import": "in a restarted worker",
    "a failed payment call caught and returned as a reply": "after a 503 from the payment API",
    "the ledger mark kept under the customer": "one ledger entry per job",
    "a failed ledger write caught and returned as a reply": "after a failed ledger write",
    "the ledger mark kept under hash(job.key)": "in a restarted worker",
    "the charge in whole units, not cents (amount // 100)": "the job's amount (in cents, as it is)",
    "the ledger entry posted as a debit (-amount)": "each ledger entry of the job's amount",
    "charge_handler forgets to return the reply": "to return the reply",
    "an Idempotency-Key lower-cased": "one charge per invoice",
    "an Idempotency-Key cut to 64 characters": "one charge per invoice",
    "an Idempotency-Key folded to ASCII (João and Joao are one customer)": "one charge per invoice",
    "the ledger mark kept under the lower-cased key": "one ledger entry per job",
    "a lost reply (a timeout) caught and returned as a reply": "a payment API that had not charged",
    "the charge looked up first (payments.find), then made without a key": (
        "exactly one charge after two deliveries"
    ),
    "a 409 (KeyInProgress) caught and returned as 'skipped'": "a 409 (KeyInProgress)",
    "an Idempotency-Key stripped of everything but letters and digits": (
        "that differ only in punctuation"
    ),
    "an Idempotency-Key made ASCII with encode('ascii', 'replace')": "an accent",
    "an Idempotency-Key stripped of surrounding spaces": "a space",
    "an Idempotency-Key folded with NFKC (a ligature becomes two letters)": "a ligature",
    "the ledger mark written with its spaces replaced by '_'": "one post per job",
    "a busy ledger (StoreBusy, a TimeoutError) caught and returned as a reply": (
        "after a failed ledger write"
    ),
    "the charge looked up first, and a repeat returns 'skipped' instead of the reply": (
        "to keep the charge's reply"
    ),
    "a module-level set of posted keys filled before the mark (a failed mark leaves it)": (
        "at the mark (the second write)"
    ),
    "charge retried three times in the handler, then a 'failed' reply returned": "503s in a row",
    "an Idempotency-Key with today's local date in it": "a day and an hour later",
    "the ledger mark read in its own transaction under a threading.Lock": "two worker processes",
    "the charge looked up first under a threading.Lock, made without a key": "two worker processes",
    "a 409 retried at once with another Idempotency-Key": "with the same Idempotency-Key",
    "a busy ledger retried three times in the handler, then an error reply returned": (
        "failed ledger writes in a row"
    ),
    "an Idempotency-Key with the UTC hour in it": "a day and an hour later",
    "the Idempotency-Key is the job's id (str(job.id))": "both job 1 of their own job store",
    "replies kept in a module-level dict by job.id (the second store's job 1 never charged)": (
        "one after the other in one worker"
    ),
    "ledger replies kept in a module-level dict by job.id": "to read and write the ledger",
    "the ledger mark kept under str(job.id)": "both job 1 of their own job store",
    "an Idempotency-Key cut to its last 255 characters": "one charge per invoice",
    "an Idempotency-Key made base64 and cut to 40 characters": "one charge per invoice",
    "the attempt number in the Idempotency-Key": "exactly one charge after a lost reply",
    "retried in the handler with a new Idempotency-Key per try": (
        "exactly one charge after a lost reply"
    ),
    "the worker's pid in the Idempotency-Key": "in a restarted worker",
    "a payment error re-raised as a RuntimeError (the worker buries it)": (
        "after a 503 from the payment API"
    ),
    "a busy ledger re-raised as a ValueError (the worker buries it)": (
        "after a failed ledger write"
    ),
    "the mark written as 'Done', read as 'done'": "exactly one ledger entry after a crash",
    "the entry posted through ctx.world.ledger, not tx, inside the transaction": (
        "a crash right after the first ledger commit to fire"
    ),
    "the customer lower-cased and stripped before the charge": (
        "the job's amount (in cents, as it is)"
    ),
    "the reply returned with the job's key added": "to return the reply",
    "an Idempotency-Key with date.today() of the call": "a day and an hour later",
    "an Idempotency-Key with the date read at import": (
        "from a worker started a day and an hour later"
    ),
    "the ledger mark with the day read at import (time.strftime)": (
        "from a worker started a day and an hour later"
    ),
    "an Idempotency-Key with datetime.now() of the import": (
        "from a worker started a day and an hour later"
    ),
    "the amount sent as a float (float(amount): 4200.0)": "one charge, job succeeded",
    "the Idempotency-Key sent only on a retry (attempt > 1)": (
        "exactly one charge after a crash right after the payment API charged"
    ),
    "the ledger amount made positive with abs() (a credit note posted as a bill)": (
        "each ledger entry of the job's amount"
    ),
    "post_handler forgets to return tx.post's reply": "to return the reply",
    "the ledger mark kept under the customer and the amount": "one ledger entry per job",
    "an Idempotency-Key from the kind, the customer and job.id": (
        "both job 1 of their own job store"
    ),
    "the ledger mark kept under the kind, the customer and job.id": (
        "both job 1 of their own job store"
    ),
    "a 409 retried five times, then 'skipped' returned": "still charging for 12 tries in a row",
    "a failed mark swallowed inside the transaction (the entry commits without it)": (
        "then a crash after the handler returned"
    ),
    "a refused charge (a 400) caught and returned as a 'failed' reply": "the job dead after a 400",
    "a 429 (rate limited) caught and returned as a reply": "after a 429 (rate limited",
    "an Idempotency-Key with ':' replaced by '-' (acct:8 and acct-8 are one customer)": (
        "that differ only in punctuation"
    ),
    "an Idempotency-Key with its inner spaces removed": "that differ only in punctuation",
    "an Idempotency-Key with its runs of spaces collapsed to one": "a space",
    "an Idempotency-Key without its version, by rstrip(':v1') (strips characters)": (
        "in the number before ':v1'"
    ),
    "the ledger mark without its version, by rstrip(':v1')": "in the number before ':v1'",
    "the charge made in 'USD' (a currency the job never named)": (
        "each charge of the job's amount"
    ),
    "the mark 'started' in one transaction, the entry and 'done' in the next": (
        "two deliveries of the job at the same moment"
    ),
    "a lost reply answered with a reply of its own after payments.find": (
        "after its first reply was lost"
    ),
    "an Idempotency-Key cut to 255 characters (a payment API's limit)": "one charge per invoice",
    "the ledger mark kept under the key cut to 255 characters (VARCHAR(255))": (
        "one ledger entry per job"
    ),
    "a 409 retried three times with the same key, then with a new one": (
        "with the other delivery still charging for 12 tries in a row"
    ),
    "the ledger mark written under the lower-cased key, looked up under the key": (
        "looked up under the key it is written under"
    ),
    "a job found posted raises 'already posted' (the worker buries it as dead)": (
        "succeeded when run again after a crash"
    ),
    "no Idempotency-Key for a key over 255 characters (the API's limit)": (
        "at attempt 1, with an Idempotency-Key"
    ),
    "a credit note (a negative amount) posted and returned before its mark": (
        "posted with its mark (amount -"
    ),
    "the Idempotency-Key on the first attempt only; a retry looks first, then charges without": (
        "at attempt 3, with an Idempotency-Key"
    ),
    "an IdempotencyKeyReused conflict caught and returned as 'skipped'": (
        "the 400 IdempotencyKeyReused to come out of charge_handler"
    ),
    "a conflicting key answered 'skipped' once payments.find shows a charge": (
        "the 400 IdempotencyKeyReused to come out of charge_handler"
    ),
    "a conflicting key retried with a new Idempotency-Key (the amount added to it)": (
        "no other charge for job"
    ),
    "a declined charge (a 400) tried three times in the handler with the same key": (
        "no other try in charge_handler"
    ),
    "a declined charge (a 400) tried again with a new Idempotency-Key": (
        "no other try in charge_handler"
    ),
    "a posted job run again returns None, not {'skipped': 'already posted'}": (
        "to keep {'skipped': 'already posted'}"
    ),
    "the entry looked up with ledger.find before the transaction (two deliveries both post)": (
        "two deliveries of the job at the same moment"
    ),
    "a lost reply retried three times in the handler, then an 'unknown' reply returned": (
        "a payment API that had not charged, 5 times in a row"
    ),
    "a 429 retried three times in the handler, then a 'rate limited' reply returned": (
        "from the payment API, 5 times in a row"
    ),
    "the charge looked up first and answered from payments.find, its amount unchecked": (
        "or an error out of charge_handler"
    ),
    "an Idempotency-Key with the billing month of the call (time.strftime('%Y-%m'))": (
        "from the last day of a month to the next month"
    ),
    "an Idempotency-Key with the ISO week of the call (date.today().isocalendar())": (
        "from the last day of a month to the next month"
    ),
    "an Idempotency-Key with the UTC month (datetime.now(timezone.utc))": (
        "from the last day of a month to the next month"
    ),
    "an Idempotency-Key with the year of the call (a fiscal year)": (
        "from the last day of a month to the next month"
    ),
    "an Idempotency-Key with the billing month read at import": (
        "from a worker started a day and an hour later, in the next month"
    ),
    "the ledger mark with the month of the call (datetime.now():%Y-%m)": (
        "from the last day of a month to the next month"
    ),
    "an Idempotency-Key prefixed with the worker's host name, read at import": (
        "on another machine (a new process"
    ),
    "the ledger mark prefixed with the host it is posted from (platform.node())": (
        "on another worker's machine"
    ),
    "an IdempotencyKeyReused conflict re-raised as a TransientError (retried in vain)": (
        "as an error the worker does not retry"
    ),
    "replies kept in a module-level dict by job.key (a second world never charged)": (
        "against a second world (its own payment API)"
    ),
    "a module-level set of posted keys filled after the commit (a second world never posted)": (
        "against a second world (its own ledger)"
    ),
}

#: Round 25's rewrites of the key, each caught where two customers' keys become one.
SAYS.update(
    dict.fromkeys(
        [
            "an Idempotency-Key with its spaces URL-encoded by hand (replace(' ', '%20'))",
            "the ledger mark URL-decoded (urllib.parse.unquote) before it is read and written",
            "an Idempotency-Key with the characters a header cannot print dropped (isprintable)",
            "an Idempotency-Key with its no-break spaces made plain spaces",
            "an Idempotency-Key with its backslashes replaced by '/' "
            "(a Windows path made a URL path)",
            "the ledger mark stripped of leading spaces (lstrip)",
            "an Idempotency-Key with its CR and LF stripped for a header",
            "the ledger mark cut at its first line (splitlines()[0])",
            "an Idempotency-Key stripped of zero-width spaces (invisible characters)",
        ],
        "that differ only in punctuation",
    )
)

#: What the feedback must name in its "got" line, where the expectation alone would not.
GOT = {
    "the customer stripped of its spaces before the charge": "it named 'cus_9'",
    "charges 'in progress' kept in a set: a second delivery answered 'skipped'": (
        "returned: {'skipped': 'already being charged'}, and the first failed"
    ),
    "a 409 (KeyInProgress) re-raised as a PermanentError": "which the worker does not retry",
    "an Idempotency-Key normalised to NFC (josé in one code point or two is one key)": (
        "'billing:jose\u0301:2026-05:charge:v1': 0"
    ),
    "the ledger mark normalised to NFC, read and written": (
        "'billing:jose\u0301:2026-05:post:v1': 0"
    ),
    "an Idempotency-Key made latin-1 for an HTTP header (encode('latin-1', 'replace'))": (
        "'billing:李娜:2026-05:charge:v1': 0"
    ),
    "the ledger mark written and read as 'posted', not 'done'": "it wrote the mark as 'posted'",
    "a typo in the handler (an AttributeError the worker retries)": (
        "your code raised AttributeError"
    ),
    "an Idempotency-Key from the kind, the customer and job.id": "charge:cus_ana:1",
    "the ledger mark kept under the kind, the customer and job.id": "post:cus_ana:1",
    "a 409 retried five times, then 'skipped' returned": "after 5 charge(s)",
    "an Idempotency-Key with ':' replaced by '-' (acct:8 and acct-8 are one customer)": (
        "'billing:acct-8:2026-05:charge:v1': 0"
    ),
    "an Idempotency-Key with its inner spaces removed": "'billing:anamaria:2026-05:charge:v1': 0",
    "an Idempotency-Key with its runs of spaces collapsed to one": (
        "'billing:ana  maria:2026-05:charge:v1': 0"
    ),
    "an Idempotency-Key without its version, by rstrip(':v1') (strips characters)": (
        "'billing:charge:carla:11:v1': 0"
    ),
    "the ledger mark without its version, by rstrip(':v1')": "'billing:post:carla:11:v1': 0",
    "the charge made in 'USD' (a currency the job never named)": "charged in 'USD'",
    "an Idempotency-Key with its spaces URL-encoded by hand (replace(' ', '%20'))": (
        "'billing:ana%20maria:2026-05:charge:v1': 0"
    ),
    "the ledger mark stripped of leading spaces (lstrip)": "' billing:bob:2026-05:post:v1': 0",
    "an IdempotencyKeyReused conflict re-raised as a TransientError (retried in vain)": (
        "which the worker retries"
    ),
}


SAYS.update(
    {
        "a failed ledger write caught inside the transaction, raised again after the block": (
            "retried and succeeded after a failed ledger write at the mark"
        ),
        "an Idempotency-Key without its prefix, by lstrip('billing:') (strips characters)": (
            "that differ only in punctuation"
        ),
        "the ledger mark without its prefix, by lstrip('ledger:')": (
            "that differ only in punctuation"
        ),
        "a credit note charged as a positive amount (abs(amount))": (
            "no charge for a credit note of -4500"
        ),
        "a zero invoice charged one cent (max(amount, 1))": "or a zero invoice",
        "an Idempotency-Key with its tabs expanded to spaces (expandtabs())": (
            "that differ only in punctuation"
        ),
        "an Idempotency-Key stripped of the quotes around it (strip('\\'\"'))": (
            "that differ only in punctuation"
        ),
        "a 429 re-raised as a TransientError with retry_after=0 (retry at once)": (
            "with retry_after 2.5 (or more)"
        ),
        "every TransientError wrapped with the job's key, its retry_after lost": (
            "after a 429 saying Retry-After"
        ),
    }
)
GOT.update(
    {
        "a failed ledger write caught inside the transaction, raised again after the block": (
            "it ended dead with its entry posted"
        ),
        "an Idempotency-Key without its prefix, by lstrip('billing:') (strips characters)": (
            "'billing:ana:2026-05:charge:v1': 0"
        ),
        "the ledger mark without its prefix, by lstrip('ledger:')": (
            "'ledger:ana:2026-05:post:v1': 0"
        ),
        "a credit note charged as a positive amount (abs(amount))": "1 charge(s) of 4500",
        "a zero invoice charged one cent (max(amount, 1))": "1 charge(s) of 1",
        "an Idempotency-Key with its tabs expanded to spaces (expandtabs())": (
            "'billing:ana     maria:2026-05:charge:v1': 0"
        ),
    }
)

SAYS.update(
    {
        "a missing customer charged as 'unknown' (payload.get with a default)": (
            "no charge to a customer of your own"
        ),
        "a missing customer posted to the 'unknown' account": (
            "no ledger entry for a customer of your own"
        ),
        "a missing ledger amount posted as 0 (payload.get('amount', 0))": (
            "no ledger entry of an amount of your own"
        ),
        "a missing customer read off the job's key": "no charge to a customer of your own",
        "the customer's apostrophe doubled by hand for SQL": 'made to the customer "o\'neil"',
        "the customer stripped of the quotes around it (a CSV export)": (
            "made to the customer '\"cus_12\"'"
        ),
        "the ledger account HTML-escaped (html.escape)": 'posted for the customer "o\'neil"',
        "the customer id cut to 64 characters (a VARCHAR(64) column)": (
            "made to the customer 'org_acme-holdings-latin-america:unit-00"
        ),
        "the ledger account cut to 32 characters": (
            "posted for the customer 'org_acme-holdings-latin-america:unit-00"
        ),
        "a missing customer posted as str(None)": "no ledger entry for a customer of your own",
        "a 429 retried in the handler after 10 ms, its Retry-After ignored": (
            "no other charge from charge_handler before 2.5s"
        ),
        "a 429 retried in the handler after a fixed second": (
            "no other charge from charge_handler before 2.5s"
        ),
        "a 429's Retry-After read as milliseconds (slept retry_after / 1000)": (
            "no other charge from charge_handler before 2.5s"
        ),
        "a 429 retried with a backoff of its own (0.1 s, doubled), its Retry-After ignored": (
            "no other charge from charge_handler before 2.5s"
        ),
        "a 429's Retry-After slept out in the handler, capped at 5 s (min(retry_after, 5))": (
            "no other charge from charge_handler before 45s"
        ),
        "a 503 retried eight times in the handler (backoff), then a 'failed' reply returned": (
            "an error out of charge_handler when every call fails"
        ),
        "a busy ledger retried eight times in the handler, then an error reply returned": (
            "an error out of post_handler when every call fails"
        ),
        "a lost reply retried eight times in the handler, then an 'unknown' reply returned": (
            "when every call fails (a lost reply"
        ),
        "a 429 slept out eight times in the handler, then a 'rate limited' reply returned": (
            "when every call fails (a 429"
        ),
        "a failed charge on the job's last attempt answered 'gave up' (the job never dead)": (
            "on the job's last attempt"
        ),
        "a busy ledger on the job's last attempt answered with an error reply": (
            "on the job's last attempt"
        ),
    }
)


SAYS.update(
    {
        "an Idempotency-Key made ASCII with encode('ascii', 'backslashreplace')": (
            "that differ only in punctuation"
        ),
        "an Idempotency-Key made ASCII with HTML character references (xmlcharrefreplace)": (
            "that differ only in punctuation"
        ),
        "an Idempotency-Key percent-encoded but for its printable characters "
        "(quote(key, safe=string.printable): '%' is kept as it is)": (
            "that differ only in punctuation"
        ),
        "the ledger mark made ASCII with encode('ascii', 'backslashreplace')": (
            "that differ only in punctuation"
        ),
        "a 429 wrapped with its Retry-After made milliseconds (retry_after * 1000: hours)": (
            "a retry_after in seconds, no later than"
        ),
        "an Idempotency-Key with its trailing newline stripped for a header (rstrip('\\n'))": (
            "that differ only in punctuation"
        ),
    }
)
GOT.update(
    {
        "an Idempotency-Key made ASCII with encode('ascii', 'backslashreplace')": (
            "'billing:jos\\\\xe9:2026-05:charge:v1': 0"
        ),
        "an Idempotency-Key made ASCII with HTML character references (xmlcharrefreplace)": (
            "'billing:jos&#233;:2026-05:charge:v1': 0"
        ),
        "an Idempotency-Key percent-encoded but for its printable characters "
        "(quote(key, safe=string.printable): '%' is kept as it is)": (
            "'billing:jos%C3%A9:2026-05:charge:v1': 0"
        ),
        "a 429 wrapped with its Retry-After made milliseconds (retry_after * 1000: hours)": (
            "with retry_after 2500.0"
        ),
        "an Idempotency-Key with its trailing newline stripped for a header (rstrip('\\n'))": (
            "'billing:bob:2026-05:charge:v1\\n': 0"
        ),
    }
)

test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS, GOT)


#: Right solutions written otherwise, each with a check that once took its points.
RIGHT: list[tuple[str, str, str]] = [
    (
        "the entry found with ledger.find(job.key) inside the transaction, not tx.status",
        "every_post_is_marked_under_the_key_it_looks_up",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if ctx.world.ledger.find(job.key):
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
        """,
    ),
    (
        "a stable idempotency key derived from the job's key (f'charge:{job.key}')",
        "two_stores_two_keys",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = f"charge:{job.key}"
            return ctx.world.payments.charge(
                customer=customer, amount=amount, key=job.key, idempotency_key=idem
            )
        """,
    ),
    (
        "a sha256 of the job's key as the idempotency key, choose_ack from a str Enum",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        import hashlib
        from enum import Enum

        class Ack(str, Enum):
            LATE = "late"
            FIRST = "first"

        def choose_ack():
            return Ack.LATE.value

        def charge_handler(job, ctx):
            idem = hashlib.sha256(job.key.encode()).hexdigest()
            return ctx.world.payments.charge(
                job.payload["customer"], job.payload["amount"], key=job.key, idempotency_key=idem
            )
        """,
    ),
    (
        "handlers as instances of classes with __call__, a threading.Lock around the ledger",
        "post_survives_two_deliveries_at_once",
        """
        import threading

        class PostHandler:
            def __init__(self):
                self._lock = threading.Lock()

            def __call__(self, job, ctx):
                customer, amount = job.payload["customer"], job.payload["amount"]
                with self._lock, ctx.world.ledger.transaction() as tx:
                    if tx.status(job.key) == "done":
                        result = {"skipped": "already posted"}
                    else:
                        result = tx.post(customer, amount, key=job.key)
                        tx.mark(job.key, "done")
                return result

        post_handler = PostHandler()
        """,
    ),
    (
        # Its ctxs once went out of scope between jobs: the next ctx's world took the freed
        # one's id(), and the cache handed it the ledger of the job before.
        "the ledger cached per world in a module-level dict keyed by id(ctx.world)",
        "post_is_the_same_after_a_restart",
        """
        _LEDGERS = {}

        def post_handler(job, ctx):
            ledger = _LEDGERS.get(id(ctx.world))
            if ledger is None:
                ledger = _LEDGERS[id(ctx.world)] = ctx.world.ledger
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
        """,
    ),
    (
        # A crash inside the lock, then the next worker life in the same thread.
        "a module-level RLock taken with acquire() and released in finally, in both handlers",
        "charge_survives_crash_after_effect",
        """
        import threading

        _LOCK = threading.RLock()

        def charge_handler(job, ctx):
            _LOCK.acquire()
            try:
                customer, amount = job.payload["customer"], job.payload["amount"]
                return ctx.world.payments.charge(
                    customer, amount, key=job.key, idempotency_key=job.key
                )
            finally:
                _LOCK.release()

        def post_handler(job, ctx):
            _LOCK.acquire()
            try:
                with ctx.world.ledger.transaction() as tx:
                    if tx.status(job.key) == "done":
                        return {"skipped": "already posted"}
                    reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
                    tx.mark(job.key, "done")
                return reply
            finally:
                _LOCK.release()
        """,
    ),
    (
        "the mark written before the entry, both in the one transaction",
        "post_survives_every_crash",
        """
        def post_handler(job, ctx):
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                tx.mark(job.key, "done")
                return tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
        """,
    ),
    (
        "a namespaced whole sha256 digest as the Idempotency-Key ('invoice-charge:' + hexdigest)",
        "every_charge_carries_its_idempotency_key",
        """
        import hashlib
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = "invoice-charge:" + hashlib.sha256(job.key.encode()).hexdigest()
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
        """,
    ),
    (
        "the ledger mark 'ledger-post:' + a blake2b digest of 16 hex characters (64 bits)",
        "every_post_is_marked_under_the_key_it_looks_up",
        """
        import hashlib
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = "ledger-post:" + hashlib.blake2b(job.key.encode(), digest_size=8).hexdigest()
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, state="done")
            return reply
        """,
    ),
    (
        "the ledger mark written with the default state, tx.mark(job.key)",
        "every_mark_says_done",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key)
            return reply
        """,
    ),
    (
        "one lock per job key in the worker: a second delivery waits for the first, then charges",
        "a_second_delivery_in_one_worker_is_no_success",
        """
        import threading
        from collections import defaultdict
        _LOCKS = defaultdict(threading.Lock)

        def charge_handler(job, ctx):
            with _LOCKS[job.key]:
                customer, amount = job.payload["customer"], job.payload["amount"]
                return ctx.world.payments.charge(
                    customer, amount, key=job.key, idempotency_key=job.key
                )

        def post_handler(job, ctx):
            with _LOCKS[job.key], ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
                tx.mark(job.key, "done")
            return reply
        """,
    ),
    (
        "a 409 retried in the handler with the same key until the reply comes",
        "a_second_delivery_in_one_worker_is_no_success",
        """
        import time
        from labkit.world.services import KeyInProgress

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            while True:
                try:
                    return ctx.world.payments.charge(
                        customer, amount, key=job.key, idempotency_key=job.key
                    )
                except KeyInProgress as exc:
                    time.sleep(min(exc.retry_after or 0.05, 0.05))
        """,
    ),
    (
        "a database error inside the ledger block re-raised there as a TransientError",
        "a_failed_mark_rolls_back_its_entry",
        """
        import sqlite3
        from labkit.errors import TransientError

        def post_handler(job, ctx):
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                try:
                    reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
                    tx.mark(job.key, "done")
                except sqlite3.OperationalError as exc:
                    raise TransientError(f"ledger busy for {job.key}: {exc}") from exc
            return reply
        """,
    ),
    (
        "a 429 slept out in the handler (its Retry-After), then charged again with the same key",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        import time

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status != 429 or not exc.retry_after or exc.retry_after > 5:
                    raise
                time.sleep(exc.retry_after)
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
        """,
    ),
    (
        "a credit note or a zero invoice refused by the handler itself (a PermanentError)",
        "a_credit_note_is_never_charged",
        """
        from labkit.errors import PermanentError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            if amount <= 0:
                raise PermanentError(f"nothing to charge for {job.key}: {amount}")
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key)
        """,
    ),
    (
        "a payload without its customer passed on as None (payload.get), for the API to judge",
        "the_customer_as_the_job_names_it",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload.get("customer"), job.payload.get("amount")
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=job.key)

        def post_handler(job, ctx):
            customer, amount = job.payload.get("customer"), job.payload.get("amount")
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
        """,
    ),
    (
        "the Idempotency-Key URL-quoted for a header (urllib.parse.quote, safe='')",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        from urllib.parse import quote

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=quote(job.key, safe=""))
        """,
    ),
    (
        "the mark read first in its own transaction, then again in the one that posts",
        "post_survives_two_deliveries_at_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            if ctx.world.ledger.status(job.key) == "done":
                return {"skipped": "already posted"}
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
        """,
    ),
    (
        "the entry posted first and rolled back by an exception when the mark said 'done'",
        "post_survives_two_deliveries_at_once",
        """
        class AlreadyPosted(Exception):
            pass

        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                with ctx.world.ledger.transaction() as tx:
                    was = tx.status(job.key)
                    reply = tx.post(customer, amount, key=job.key)
                    if was == "done":
                        raise AlreadyPosted(job.key)
                    tx.mark(job.key, "done")
            except AlreadyPosted:
                return {"skipped": "already posted"}
            return reply
        """,
    ),
    (
        "an Idempotency-Key escaped with unicode_escape (one-to-one, ASCII only)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = job.key.encode("unicode_escape").decode("ascii")
            return ctx.world.payments.charge(customer, amount, key=job.key,
                                             idempotency_key=idem)
        """,
    ),
    (
        "a 429's Retry-After slept out in full (from time import sleep), then charged again",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        from time import sleep

        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status != 429:
                    raise
                sleep(exc.retry_after)
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
        """,
    ),
    (
        "a busy ledger retried in the handler until it answers (sleeping between tries)",
        "a_long_outage_fails_the_attempt",
        """
        import time

        from labkit.errors import StoreBusy

        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            while True:
                try:
                    with ctx.world.ledger.transaction() as tx:
                        if tx.status(job.key) == "done":
                            return {"skipped": "already posted"}
                        reply = tx.post(customer, amount, key=job.key)
                        tx.mark(job.key, "done")
                    return reply
                except StoreBusy:
                    time.sleep(0.5)
        """,
    ),
    (
        "a uuid5 of the job's key as the Idempotency-Key (122 bits, one per key)",
        "keys_that_differ_only_in_punctuation_or_an_accent",
        """
        import uuid

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            idem = str(uuid.uuid5(uuid.NAMESPACE_URL, job.key))
            return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=idem)
        """,
    ),
    (
        "a 409 waited out briefly, then the committed charge's own reply read from payments.find",
        "a_409_answered_by_find_keeps_the_reply",
        """
        import time

        from labkit.world.services import KeyInProgress

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except KeyInProgress:
                time.sleep(0.05)
                found = ctx.world.payments.find(job.key)
                if found:
                    return found[-1].response
                raise
        """,
    ),
    (
        "a 429 wrapped in a TransientError of its own with a margin (max(retry_after, 60))",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status != 429:
                    raise
                raise TransientError(f"rate limited: {job.key}", status=429,
                                     retry_after=max(exc.retry_after or 0, 60)) from exc
        """,
    ),
    (
        "a 429 slept out on the injected clock (ctx.clock.sleep(retry_after)), then charged again",
        "a_rate_limited_charge_keeps_its_retry_after",
        """
        from labkit.errors import TransientError

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            try:
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
            except TransientError as exc:
                if exc.status != 429 or not exc.retry_after:
                    raise
                ctx.clock.sleep(exc.retry_after)
                return ctx.world.payments.charge(customer, amount, key=job.key,
                                                 idempotency_key=job.key)
        """,
    ),
    (
        "a 409 waited out on the injected clock (ctx.clock.sleep) until the reply comes",
        "a_409_fails_the_attempt",
        """
        from labkit.world.services import KeyInProgress

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            while True:
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except KeyInProgress as exc:
                    ctx.clock.sleep(min(exc.retry_after or 0.05, 0.05))
        """,
    ),
    (
        "a charge handler that renews its lease and reads ctx.clock (the worker's Context)",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            ctx.heartbeat()
            started = ctx.clock.now()
            customer, amount = job.payload["customer"], job.payload["amount"]
            reply = ctx.world.payments.charge(
                customer, amount, key=job.key, idempotency_key=job.key
            )
            assert ctx.clock.now() >= started
            return reply
    """,
    ),
    (
        "the ledger mark read as true or not (if tx.status(job.key)), any mark a posted one",
        "post_survives_two_deliveries_at_once",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            with ctx.world.ledger.transaction() as tx:
                if tx.status(job.key):
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "a lost reply tried twice more at once with the same Idempotency-Key, then re-raised",
        "charge_survives_lost_response",
        """
        from labkit.errors import ResponseLost

        def charge_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for tries_left in (2, 1, 0):
                try:
                    return ctx.world.payments.charge(customer, amount, key=job.key,
                                                     idempotency_key=job.key)
                except ResponseLost:
                    if not tries_left:
                        raise
        """,
    ),
    (
        "the ledger mark namespaced by the job's kind (f'{job.kind}:{job.key}'), read and written",
        "every_post_is_marked_under_the_key_it_looks_up",
        """
        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            mark = f"{job.kind}:{job.key}"
            with ctx.world.ledger.transaction() as tx:
                if tx.status(mark) == "done":
                    return {"skipped": "already posted"}
                reply = tx.post(customer, amount, key=job.key)
                tx.mark(mark, "done")
            return reply
        """,
    ),
    (
        "a busy ledger's whole transaction tried three times in the handler, then re-raised",
        "a_long_outage_fails_the_attempt",
        """
        from labkit.errors import StoreBusy

        def post_handler(job, ctx):
            customer, amount = job.payload["customer"], job.payload["amount"]
            for tries_left in (2, 1, 0):
                try:
                    with ctx.world.ledger.transaction() as tx:
                        if tx.status(job.key) == "done":
                            return {"skipped": "already posted"}
                        reply = tx.post(customer, amount, key=job.key)
                        tx.mark(job.key, "done")
                    return reply
                except StoreBusy:
                    if not tries_left:
                        raise
                    ctx.clock.sleep(0.05)
        """,
    ),
]


test_a_right_solution_written_otherwise_keeps_the_points = right_test("ex05", RIGHT)
