"""Exercise 6's checks of ``dead_letter``: the reason and the error kept, no secret
stored, and the fence on the lease token."""

from __future__ import annotations

from typing import Any

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex06.deadletters import (
    CHECKS,
    HARNESS,
    NOW,
    add_running,
    bury,
    it_said,
    returned,
    row_of,
)
from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.labdb import add_job
from labkit.lang import _

#: The columns a dead letter sets; every other one stays as it was.
_BURIAL = frozenset(
    {
        "state",
        "dead_reason",
        "last_error",
        "lease_owner",
        "lease_until",
        "lease_token",
        "updated_at",
    }
)


@CHECKS.add(
    2,
    "UPDATE ... SET state='dead', dead_reason=:reason, last_error=..., lease_owner, "
    "lease_until and lease_token to NULL, updated_at=:now WHERE id=:id AND "
    "state='running' AND lease_token=:token; return whether a row changed",
)
def dead_letter_records_the_reason(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        # Its first attempt failed, and a redrive by hand left an old reason: the error and
        # the reason that bury it replace those (no COALESCE keeping the first).
        old = "last_error = 'TimeoutError: slow', dead_reason = 'attempts exhausted (3 of 3)'"
        conn.execute(f"UPDATE jobs SET {old} WHERE id = ?", (job_id,))
        before = row_of(conn, job_id)
        ok = bury(
            ns,
            path,
            job_id,
            "tok-1",
            "permanent error",
            # Raised from a lower-level error, as a client library raises its own: the
            # error given is what is stored, not its __cause__.
            {
                "type": "ValueError",
                "message": "no such customer",
                "cause": {"type": "KeyError", "message": "customer 7"},
            },
            NOW,
        )
        job = row_of(conn, job_id)
        expect(ok is True, "True (the job was buried)", ok)
        expect(
            job["state"] == "dead" and job["dead_reason"] == "permanent error",
            "state dead with dead_reason 'permanent error'",
            f"state={job['state']}, dead_reason={job['dead_reason']!r}",
            _(
                "SET dead_reason = :reason: the reason given replaces one left from an "
                "earlier burial (no COALESCE, no CASE keeping the old one)"
            ),
        )
        expect(
            job["last_error"] == "ValueError: no such customer",
            "last_error naming the class and message: 'ValueError: no such customer'",
            repr(job["last_error"]),
            _(
                "last_error = describe(error), as it is: that error's own class and message, "
                "with nothing added (not the reason, not the cause)"
            ),
        )
        expect(
            job["lease_token"] is None
            and job["lease_owner"] is None
            and job["lease_until"] is None
            and job["updated_at"] == NOW,
            "the lease cleared and updated_at = now",
            {k: job[k] for k in ("lease_owner", "lease_until", "lease_token", "updated_at")},
        )
        expect(job["key"] == "pay:7:charge:v1", "the key unchanged", job["key"])
        # The attempts it used, its budget, its kind and queue are part of what a person
        # reads (and what a redrive starts over from): a dead letter changes none of them.
        kept = {k: v for k, v in before.items() if k not in _BURIAL}
        moved = {k: f"{v!r} -> {job[k]!r}" for k, v in kept.items() if job[k] != v}
        expect(
            not moved,
            _("every other column as it was: {columns}").format(columns=", ".join(kept)),
            _("changed: {changes}").format(
                changes=", ".join(f"{k} {change}" for k, change in moved.items())
            ),
            _(
                "set only what dead_letter is for (state, dead_reason, last_error, the lease, "
                "updated_at): the attempt it died at and its budget are what a person reads"
            ),
        )
    # A reason is text from anywhere: a quote in it is data, never SQL, and its accents
    # stay (a person reads it).
    reason = "card declined: the customer's bank said no (Banco São João, ação negada)\n"
    # The error's own words are a person's to read too: a Brazilian ERP answers in Portuguese.
    accented = "endereço de cobrança inválido para o cliente João Conceição"
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        result = ns.harness(
            HARNESS + "dead_letter",
            str(path),
            job_id,
            "tok-1",
            reason,
            {"type": "ValueError", "message": accented},
            NOW,
        )
        stored = row_of(conn, job_id)["dead_reason"]
        if result.get("returned") is True and stored is not None:
            expect(
                stored == reason,
                _(
                    "dead_reason {reason} stored as it is, every character (accents too: a "
                    "person reads it)"
                ).format(reason=repr(reason)),
                _("dead_reason {stored}").format(stored=repr(stored)),
                "store the reason you were given unchanged: no encode('ascii'), no cut, no strip()",
            )
        expect(
            result.get("returned") is True and stored == reason,
            _(
                "dead_reason {reason} stored as it is: the reason goes in as a :named "
                "parameter, never pasted into the SQL"
            ).format(reason=repr(reason)),
            _("{said}; dead_reason {stored}").format(said=it_said(result), stored=repr(stored)),
        )
        error_text = "ValueError: " + accented
        stored_error = row_of(conn, job_id)["last_error"]
        expect(
            stored_error == error_text,
            _(
                "last_error {error} stored as it is, every character (accents too: a person "
                "reads it)"
            ).format(error=repr(error_text)),
            _("last_error {stored}").format(stored=repr(stored_error)),
            _(
                "store describe(error) unchanged: no encode('ascii'), no unidecode, no cut "
                "(describe already hides the secrets)"
            ),
        )
    # A long reason (every attempt's answer): a column is not a VARCHAR(255) in SQLite,
    # and the end of the reason is often the part that says what to fix.
    # A hundred and twenty attempts' answers: over 9000 characters, so a cut at 1000, 2000,
    # 4000 or 8192 (a "generous" cap) loses the end too. The error's message is the first
    # five: describe() itself shortens a message longer than that.
    answers = [
        f"attempt {n}: the ERP answered 503 Service Unavailable for order ORD-2026-{n:05d}"
        for n in range(1, 121)
    ]
    long_reason = "attempts exhausted (120 of 120): " + "; ".join(answers)
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        message = "attempts exhausted (5 of 5): " + "; ".join(answers[:5])
        error = {"type": "ValueError", "message": message}
        bury(ns, path, job_id, "tok-1", long_reason, error, NOW)
        job = row_of(conn, job_id)
        stored = job["dead_reason"] or ""
        expect(
            stored == long_reason,
            _("a dead_reason of {length} characters stored whole, ending {tail}").format(
                length=len(long_reason), tail=repr(long_reason[-30:])
            ),
            _("{length} characters stored, ending {tail}").format(
                length=len(stored), tail=repr(stored[-30:])
            ),
            "store the reason as it is: no cut to 100, 255 or 1000 characters",
        )
        error_text = "ValueError: " + message
        last_error = job["last_error"] or ""
        expect(
            last_error == error_text,
            _("a last_error of {length} characters stored whole, ending {tail}").format(
                length=len(error_text), tail=repr(error_text[-30:])
            ),
            _("{length} characters stored, ending {tail}").format(
                length=len(last_error), tail=repr(last_error[-30:])
            ),
            _("store describe(error) as it is: no cut, the end of an error often says the most"),
        )


@CHECKS.add(
    1,
    "errors carry secrets (passwords, tokens in URLs): store "
    "labkit.redact.describe(error), never str(error) as it is",
    severe=True,
)
def dead_letter_hides_secrets(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        error = {
            "type": "PermissionError",
            "message": "login to https://erp:hunter2@erp.example failed, token=abc123xyz",
        }
        bury(ns, path, job_id, "tok-1", "permanent error", error, NOW)
        row = row_of(conn, job_id)
        stored = row["last_error"] or ""
        leaked = [s for s in ("hunter2", "abc123xyz") if s in stored]
        # Only the leak is severe: a last_error without its class is
        # dead_letter_records_the_reason's business.
        expect(
            not leaked and bool(stored),
            _("the error stored with the password and the token redacted"),
            repr(stored),
        )
        _no_secret_in_any_column(row, ("hunter2", "abc123xyz"))
    # Secrets of other shapes: a Bearer header and a client_secret. A redaction of your
    # own (a regex for URLs and token=) lets them through; describe() knows them all.
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        secrets = ("eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.Zm9v", "s3cr3t-v4lue-77")
        error = {
            "type": "ConnectionError",
            "message": f"POST https://erp.example/orders refused (401), sent "
            f"Authorization: Bearer {secrets[0]}, client_secret={secrets[1]}",
        }
        bury(ns, path, job_id, "tok-1", "permanent error", error, NOW)
        row = row_of(conn, job_id)
        stored = row["last_error"] or ""
        expect(
            not any(s in stored for s in secrets) and bool(stored),
            _(
                "the error stored with the Bearer token and the client_secret redacted "
                "(labkit.redact.describe knows every shape of secret; a regex of your own "
                "does not)"
            ),
            repr(stored),
        )
        _no_secret_in_any_column(row, secrets)
    # A password in a URL, and no word around it that says so: a redaction kept for
    # messages that mention a password, a token or a secret lets this one through. The
    # worker gives no reason this time (an empty one): the error is no stand-in for it.
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        error = {
            "type": "ConnectionError",
            "message": "could not connect to postgres://app:Tr0ub4dor@db.internal:5432/erp",
        }
        bury(ns, path, job_id, "tok-1", "", error, NOW)
        row = row_of(conn, job_id)
        stored = row["last_error"] or ""
        expect(
            "Tr0ub4dor" not in stored and bool(stored),
            _(
                "the error stored with the password in its URL redacted, though no word in "
                "the message says 'password' (describe every error, not only the ones that "
                "look secret)"
            ),
            repr(stored),
        )
        _no_secret_in_any_column(row, ("Tr0ub4dor",))


def _no_secret_in_any_column(row: dict[str, Any], secrets: tuple[str, ...]) -> None:
    """No column of the buried job holds a secret: not the reason, not the payload either."""
    leaked = [
        column
        for column, value in row.items()
        if isinstance(value, str) and any(s in value for s in secrets)
    ]
    expect(
        not leaked,
        _("no secret of the error in any column of the job"),
        _("the secret is in {columns}").format(columns=", ".join(leaked)),
        "store the reason you were given as dead_reason, and the error only as "
        "labkit.redact.describe(error) in last_error: a person reads every column",
    )


@CHECKS.add(1, "fence on the token: a worker whose lease moved on must change nothing", severe=True)
def dead_letter_is_fenced(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn, token="new-holder")
        before = row_of(conn, job_id)
        ok = bury(ns, path, job_id, "stale-token", "permanent error", {"type": "ValueError"}, NOW)
        # A 0 or None is as false to the worker: True and False exactly are
        # dead_letter_records_the_reason's business, not this severe check's.
        expect(not ok, "False for a stale token", ok)
        expect(row_of(conn, job_id) == before, "the job unchanged", row_of(conn, job_id)["state"])
        # A caller with no token at all (None: it never held the lease, or lost it) is no
        # holder either: "OR :token IS NULL" as a way in buries the job another worker runs.
        # (An exception for None buries nothing: not this severe check's business.)
        result = ns.harness(
            HARNESS + "dead_letter",
            str(path),
            job_id,
            None,
            "permanent error",
            {"type": "ValueError"},
            NOW,
        )
        after = row_of(conn, job_id)
        expect(
            not result.get("returned") and after == before,
            _(
                "False and job {job_id} unchanged for token=None (the job's token is {token})"
            ).format(job_id=job_id, token=repr(before["lease_token"])),
            _("{said}; state {state}").format(said=it_said(result), state=after["state"]),
            "lease_token = :token is never true for a NULL token: no way in for None, a "
            "caller without the lease buries nothing",
        )
        # The holder's lease has run out and no one has taken the job yet: it is still
        # the holder's, and a stale token buries nothing ("OR lease_until < :now" does).
        conn.execute(
            "UPDATE jobs SET lease_until = :t WHERE id = :id", {"t": NOW - 1, "id": job_id}
        )
        expired = row_of(conn, job_id)
        ok = bury(ns, path, job_id, "stale-token", "permanent error", {"type": "ValueError"}, NOW)
        expect(
            not ok and row_of(conn, job_id) == expired,
            _(
                "False and job {job_id} unchanged for a stale token, its holder's lease run "
                "out (the token is the fence, not the clock)"
            ).format(job_id=job_id),
            _("{said}; state {state}").format(
                said=_("returned {value}").format(value=repr(ok)),
                state=row_of(conn, job_id)["state"],
            ),
        )
    # A running job with no token at all (claimed by a worker from before tokens, in the
    # middle of a rolling deploy): its holder is that worker, and no token proves holding
    # it. "OR lease_token IS NULL" as a way in lets any worker bury a job another runs.
    with lab_file(ns) as (conn, path):
        job_id = add_job(
            conn,
            "pay:9:charge:v1",
            kind="payment",
            state="running",
            attempt=1,
            lease_owner="old-worker",
            lease_until=NOW + 30,
            updated_at=NOW - 5,
        )
        before = row_of(conn, job_id)
        result = ns.harness(
            HARNESS + "dead_letter",
            str(path),
            job_id,
            "tok-9",
            "permanent error",
            {"type": "ValueError"},
            NOW,
        )
        after = row_of(conn, job_id)
        expect(
            not result.get("returned") and after == before,
            _(
                "False and job {job_id} unchanged for token 'tok-9': the job runs under "
                "lease_owner 'old-worker' with no token (lease_token NULL)"
            ).format(job_id=job_id),
            _("{said}; state {state}").format(said=it_said(result), state=after["state"]),
            _(
                "lease_token = :token is never true for a job whose token is NULL: no way in "
                "for a job without a token, its holder is another worker"
            ),
        )
    # One claim can hand a worker several jobs under one lease token (a batch): burying
    # one of them is about that job alone. A fence on the token without the id buries the
    # others too, which the worker is still running.
    with lab_file(ns) as (conn, path):
        first = add_running(conn, token="batch-tok")
        second = add_running(conn, token="batch-tok", key="pay:8:charge:v1", attempt=1)
        kept = row_of(conn, second)
        result = ns.harness(
            HARNESS + "dead_letter",
            str(path),
            first,
            "batch-tok",
            "permanent error",
            {"type": "ValueError", "message": "no such customer"},
            NOW,
        )
        after = row_of(conn, second)
        expect(
            after == kept and row_of(conn, first)["state"] == "dead",
            _(
                "job {first} dead and job {second} still running as it was, after "
                "dead_letter(job {first}, 'batch-tok'): both jobs were claimed under that "
                "one token"
            ).format(first=first, second=second),
            _("{said}; job {first} {state}, job {second} {other}").format(
                said=it_said(result),
                first=first,
                state=row_of(conn, first)["state"],
                second=second,
                other=after["state"],
            ),
            "fence on the job AND its lease: WHERE id = :id AND state = 'running' AND "
            "lease_token = :token; the token alone may name more than one job",
        )
    # The lease runs out and another worker takes the job while the dead letter runs: a
    # token read first and compared in Python is stale by the time the UPDATE lands.
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        result = ns.harness(
            HARNESS + "dead_letter_while_the_lease_moves", str(path), job_id, "tok-1", NOW
        )
        ok = returned(result, f"dead_letter(job {job_id})")
        job = row_of(conn, job_id)
        if result["worker"] == "in the gap":
            expect(
                not ok and job["state"] == "running" and job["lease_token"] == "worker-2-token",
                _(
                    "False, and job {job_id} left running with the worker that took its lease "
                    "while your dead_letter ran"
                ).format(job_id=job_id),
                _(
                    "{said}; state={state}, lease_token={token}: the fence was checked before "
                    "the write, not in it"
                ).format(said=it_said(result), state=job["state"], token=repr(job["lease_token"])),
                "put the fence in the UPDATE itself (WHERE id = :id AND state = 'running' AND "
                "lease_token = :token) and return whether it changed a row",
            )
        else:
            expect(
                bool(ok) and job["state"] == "dead",
                _("True and job {job_id} dead").format(job_id=job_id),
                _("{said}, state {state}").format(said=it_said(result), state=job["state"]),
            )
