"""Exercise 6: the dead letter and the redrive that keeps the key.

The student writes ``dead_letter`` and ``redrive`` on the exercise table
(``labkit.grading.exercises.labdb``). Each check makes the database file under the student's
folder, runs the student's functions through the harness
(``labkit.grading.exercises.ex06.harness``, its own connections, errors built from plain
descriptions) and reads the table back itself. Two checks race: two operators
redriving at once, and a redrive while another party redrives the job and a worker
claims it; a redrive that selects and then updates outside one ``BEGIN IMMEDIATE``
transaction is caught by both. The first also races two operators in two processes,
one schedule at a time (``racesweep``), so a lock in Python cannot hide the gap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex06.deadletters import (
    HARNESS,
    NOW,
    RACE_PAUSE_S,
    add_dead,
    add_running,
    bury,
    it_said,
    redrive,
    returned,
    row_of,
    said,
)
from labkit.grading.exercises.helpers import holds_for
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.grading.exercises.racesweep import after_every_schedule
from labkit.lang import _

CHECKS = Checks("ex06", "dead letter and redrive", needs=("dead_letter", "redrive"))


@CHECKS.add(
    2,
    "UPDATE ... SET state='dead', dead_reason=:reason, last_error=..., lease_owner, "
    "lease_until and lease_token to NULL, updated_at=:now WHERE id=:id AND "
    "state='running' AND lease_token=:token; return whether a row changed",
)
def dead_letter_records_the_reason(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        ok = bury(
            ns,
            path,
            job_id,
            "tok-1",
            "permanent error",
            {"type": "ValueError", "message": "no such customer"},
            NOW,
        )
        job = row_of(conn, job_id)
        expect(ok is True, "True (the job was buried)", ok)
        expect(
            job["state"] == "dead" and job["dead_reason"] == "permanent error",
            "state dead with dead_reason 'permanent error'",
            f"state={job['state']}, dead_reason={job['dead_reason']!r}",
        )
        expect(
            "ValueError" in (job["last_error"] or "") and "no such customer" in job["last_error"],
            "last_error naming the class and message: 'ValueError: no such customer'",
            repr(job["last_error"]),
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
    # A reason is text from anywhere: a quote in it is data, never SQL, and its accents
    # stay (a person reads it).
    reason = "card declined: the customer's bank said no (Banco São João, ação negada)"
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        result = ns.harness(
            HARNESS + "dead_letter", str(path), job_id, "tok-1", reason, {"type": "ValueError"}, NOW
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
                "store the reason you were given unchanged: no encode('ascii'), no cut",
            )
        expect(
            result.get("returned") is True and stored == reason,
            _(
                "dead_reason {reason} stored as it is: the reason goes in as a :named "
                "parameter, never pasted into the SQL"
            ).format(reason=repr(reason)),
            _("{said}; dead_reason {stored}").format(said=it_said(result), stored=repr(stored)),
        )
    # A long reason (every attempt's answer): a column is not a VARCHAR(255) in SQLite,
    # and the end of the reason is often the part that says what to fix.
    long_reason = "attempts exhausted (5 of 5): " + "; ".join(
        f"attempt {n}: the ERP answered 503 Service Unavailable for order ORD-2026-{n:05d}"
        for n in range(1, 6)
    )
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        bury(ns, path, job_id, "tok-1", long_reason, {"type": "ValueError"}, NOW)
        stored = row_of(conn, job_id)["dead_reason"] or ""
        expect(
            stored == long_reason,
            _("a dead_reason of {length} characters stored whole, ending {tail}").format(
                length=len(long_reason), tail=repr(long_reason[-30:])
            ),
            _("{length} characters stored, ending {tail}").format(
                length=len(stored), tail=repr(stored[-30:])
            ),
            "store the reason as it is: no cut to 100 or 255 characters",
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
                not ok
                and job["state"] == "running"
                and job["lease_token"] == "worker-2-token",
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


@CHECKS.add(
    2,
    "limit is required: raise ValueError when it is None or below 1, before "
    "touching anything (a whole dead-letter queue redriven by accident floods "
    "the service that killed those jobs)",
)
def redrive_requires_a_limit(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_dead(conn, 3)
        before = all_jobs(conn)
        for limit in (None, 0, -3):
            result = ns.harness(HARNESS + "redrive", str(path), limit=limit, now=NOW)
            wanted = ("ValueError", "TypeError") if limit is None else ("ValueError",)
            expect(
                any(name in result.get("raised", ()) for name in wanted),
                _("ValueError for limit={limit}").format(limit=repr(limit)),
                said(result),
            )
        # A dry run is the same call, shown first: it refuses the same limits.
        for limit in (None, 0):
            result = ns.harness(HARNESS + "redrive", str(path), limit=limit, now=NOW, dry_run=True)
            wanted = ("ValueError", "TypeError") if limit is None else ("ValueError",)
            expect(
                any(name in result.get("raised", ()) for name in wanted),
                _(
                    "ValueError for limit={limit}, dry_run=True (a dry run shows what the same "
                    "call would do, and that call is refused)"
                ).format(limit=repr(limit)),
                said(result),
            )
        expect(all_jobs(conn) == before, "nothing changed", _("jobs were changed"))


@CHECKS.add(
    2,
    "redrive the same row (UPDATE, not INSERT): its key is how the destination "
    "recognises a repeat; a copy with a new key can charge twice",
    severe=True,
)
def redrive_keeps_the_key(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        [job_id] = add_dead(conn, 1)
        ids = redrive(ns, path, limit=1, now=NOW)
        rows = all_jobs(conn)
        expect(
            len(rows) == 1,
            "still one row in jobs",
            _("{count} rows: {rows}").format(
                count=len(rows), rows=", ".join(f"{r['id']}:{r['key']}" for r in rows)
            ),
        )
        expect(list(ids) == [job_id], _("[{job_id}] returned").format(job_id=job_id), ids)
        expect(
            rows[0]["state"] == "pending" and rows[0]["key"] == "email:0:send:v1",
            "the job pending again with key 'email:0:send:v1'",
            f"state={rows[0]['state']}, key={rows[0]['key']!r}",
        )


@CHECKS.add(
    2,
    "ORDER BY updated_at, id LIMIT :limit: the oldest dead letters first, and "
    "never more than asked",
)
def redrive_respects_the_limit(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = add_dead(conn, 5)
        got = redrive(ns, path, limit=2, now=NOW)
        pending = [j["id"] for j in all_jobs(conn) if j["state"] == "pending"]
        expect(
            len(pending) == 2,
            "2 jobs redriven with limit=2",
            _("{count} redriven").format(count=len(pending)),
        )
        expect(
            list(got) == ids[:2] and pending == ids[:2],
            _("the two oldest, {ids}").format(ids=ids[:2]),
            _("returned {ids}, pending {pending}").format(ids=list(got), pending=pending),
        )
    # Hundreds of dead letters, dead at 10 s, 20 s ... 3000 s: every one asked for, the
    # oldest by time (not by text: '100.0' < '20.0'), no cap of the code's own.
    with lab_file(ns) as (conn, path):
        ids = add_dead(conn, 300)
        got = redrive(ns, path, limit=250, now=NOW)
        pending = [j["id"] for j in all_jobs(conn) if j["state"] == "pending"]
        expect(
            list(got) == ids[:250] and pending == ids[:250],
            _(
                "the 250 oldest of 300 dead jobs (dead from 10 s to 3000 s), oldest first, "
                "with limit=250"
            ),
            _("returned {count} ids ({first}...), {pending} jobs pending").format(
                count=len(got) if isinstance(got, list) else got,
                first=list(got)[:5] if isinstance(got, list) else got,
                pending=len(pending),
            ),
            "every dead job up to limit, oldest by updated_at as a number: no cap of your own "
            "(fetchmany, a LIMIT 100), no order by text",
        )


@CHECKS.add(
    1,
    "only dead jobs are redriven: a pending, running, retry_wait or succeeded job "
    "is none of the redrive's business",
    severe=True,
)
def redrive_only_dead_jobs(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        others = {
            "pending": add_job(conn, "o:1:v1", updated_at=1.0),
            "retry_wait": add_job(conn, "o:2:v1", state="retry_wait", attempt=1, updated_at=1.0),
            "succeeded": add_job(conn, "o:3:v1", state="succeeded", attempt=1, updated_at=1.0),
            "running": add_job(
                conn,
                "o:4:v1",
                state="running",
                attempt=1,
                lease_owner="w",
                lease_until=NOW + 60,
                lease_token="t",
                updated_at=1.0,
            ),
        }
        before = {k: row_of(conn, v) for k, v in others.items()}
        [dead] = add_dead(conn, 1)
        got = redrive(ns, path, limit=100, now=NOW)
        expect(list(got) == [dead], _("only the dead job {job_id}").format(job_id=dead), list(got))
        changed = [k for k, v in others.items() if row_of(conn, v) != before[k]]
        expect(not changed, "the other jobs untouched", _("changed: {jobs}").format(jobs=changed))


@CHECKS.add(
    1,
    "a redriven job starts over: attempt = 0, run_after = now, dead_reason NULL, "
    "redrives + 1, updated_at = now (or it dies again at once)",
)
def redrive_gives_a_fresh_start(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        [job_id] = add_dead(conn, 1)
        redrive(ns, path, limit=1, now=NOW)
        job = row_of(conn, job_id)
        want = {
            "attempt": 0,
            "run_after": NOW,
            "dead_reason": None,
            "redrives": 1,
            "updated_at": NOW,
        }
        got = {k: job[k] for k in want}
        expect(got == want, str(want), str(got))


@CHECKS.add(1, "dry_run=True returns the ids it would redrive and changes nothing")
def dry_run_changes_nothing(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = add_dead(conn, 3)
        before = all_jobs(conn)
        got = redrive(ns, path, limit=2, now=NOW, dry_run=True)
        expect(list(got) == ids[:2], _("{ids} returned").format(ids=ids[:2]), got)
        expect(
            all_jobs(conn) == before, "every job unchanged", [j["state"] for j in all_jobs(conn)]
        )
        # A dry run shows what the same call would do: the kind counts there too.
        pays = add_dead(conn, 2, kind="payment", first_id=10)
        got = redrive(ns, path, limit=5, now=NOW, kind="payment", dry_run=True)
        expect(
            list(got) == pays,
            _("{ids} returned for kind='payment', dry_run=True").format(ids=pays),
            got,
        )


@CHECKS.add(
    1,
    "kind=... redrives only that kind, the very name ((:kind IS NULL OR kind = :kind)): "
    "LIKE reads '_' as any character and ignores case, so 'mail_digest' takes "
    "'mail-digest' and 'Mail_Digest' too",
)
def redrive_filters_by_kind(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        mails = add_dead(conn, 2, kind="email")
        pays = add_dead(conn, 2, kind="payment", first_id=10)
        got = redrive(ns, path, limit=2, now=NOW, kind="payment")
        expect(
            sorted(got) == pays,
            _(
                "the payment jobs {ids} for kind='payment', limit=2 (the older email jobs "
                "do not count against the limit: filter in the WHERE, before LIMIT)"
            ).format(ids=pays),
            list(got),
        )
        expect(
            all(row_of(conn, i)["state"] == "dead" for i in mails),
            "the email jobs still dead",
            [row_of(conn, i)["state"] for i in mails],
        )
    # Kinds that differ by a '_', a capital or a suffix: only the exact one is asked for.
    kinds = ["mail-digest", "Mail_Digest", "mail_digest", "mail_digest_v2", "maïl_digest"]
    with lab_file(ns) as (conn, path):
        ids = {k: add_dead(conn, 1, kind=k, first_id=20 + n)[0] for n, k in enumerate(kinds)}
        got = redrive(ns, path, limit=10, now=NOW, kind="mail_digest")
        moved = [
            f"{k} ({row_of(conn, i)['state']})"
            for k, i in ids.items()
            if row_of(conn, i)["state"] != "dead"
        ]
        expect(
            list(got) == [ids["mail_digest"]] and moved == ["mail_digest (pending)"],
            _(
                "only job {job_id} (kind 'mail_digest') redriven for kind='mail_digest' among "
                "kinds {kinds}"
            ).format(job_id=ids["mail_digest"], kinds=kinds),
            _("returned {ids}; redriven in the table: {redriven}").format(
                ids=list(got), redriven=", ".join(moved) or _("none")
            ),
        )
        others = [i for k, i in ids.items() if k != "mail_digest"]
        # A kind with a quote in it is a kind like any other; one that reads as SQL is too.
        [quoted] = add_dead(conn, 1, kind="vendor's_export", first_id=40)
        asked = {"vendor's_export": [quoted], "x' OR '1'='1": []}
        for kind, want in asked.items():
            result = ns.harness(HARNESS + "redrive", str(path), limit=10, now=NOW, kind=kind)
            expect(
                result.get("returned") == want,
                _(
                    "{ids} for kind={kind}: the kind goes in as a :named parameter, never "
                    "pasted into the SQL"
                ).format(ids=want, kind=repr(kind)),
                it_said(result),
            )
        # Characters that are patterns to GLOB or LIKE ('*', '[', '%') are plain in a kind.
        patterned = {
            k: add_dead(conn, 1, kind=k, first_id=50 + n)[0]
            for n, k in enumerate(["export*", "export_v2", "report[1]", "report1"])
        }
        for kind in ("export*", "report[1]"):
            got_ids = redrive(ns, path, limit=10, now=NOW, kind=kind)
            expect(
                list(got_ids) == [patterned[kind]],
                _(
                    "only job {job_id} (kind {kind}) redriven for kind={kind} among kinds "
                    "{kinds}: compare with kind = :kind, where '*', '[' and '%' are "
                    "characters, not patterns"
                ).format(job_id=patterned[kind], kind=repr(kind), kinds=list(patterned)),
                _("returned {ids}").format(ids=list(got_ids)),
            )
        # A space is a character too: 'weekly_report ' is no job's kind.
        [weekly] = add_dead(conn, 1, kind="weekly_report", first_id=60)
        spaced = redrive(ns, path, limit=10, now=NOW, kind="weekly_report ")
        expect(
            list(spaced) == [] and row_of(conn, weekly)["state"] == "dead",
            _(
                "nothing redriven for kind='weekly_report ' (a space at the end): job {job_id} "
                "of kind 'weekly_report' still dead"
            ).format(job_id=weekly),
            _("returned {ids}").format(ids=list(spaced)),
            "compare the kind as it is given: no strip(), no lower()",
        )
        empty = redrive(ns, path, limit=10, now=NOW, kind="")
        expect(
            list(empty) == [] and all(row_of(conn, i)["state"] == "dead" for i in others),
            "nothing redriven for kind='' (no job has that kind; only None means every kind)",
            _("returned {ids}").format(ids=list(empty)),
        )


@CHECKS.add(
    3,
    "choose and change in one write transaction: conn.execute('BEGIN IMMEDIATE'), "
    "SELECT the ids, UPDATE them, COMMIT; two operators who both SELECT before "
    "either UPDATEs pick the same jobs and each reports redriving them",
    timeout=40.0,
    severe=True,
)
def two_redrives_at_once_share_nothing(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        redrive(ns, path, limit=1, now=NOW, dry_run=True)  # a stub says "not started yet"
        ids = add_dead(conn, 2)
        results = ns.harness(
            HARNESS + "two_redrives_at_once", str(path), {"limit": 1, "now": NOW}, RACE_PAUSE_S
        )
        a, b = (returned(r, _("both redrives")) for r in results)
        expect(
            isinstance(a, list) and isinstance(b, list) and not set(a) & set(b),
            "two redrives with limit=1 at the same moment to return different jobs",
            _("{first} and {second}").format(first=a, second=b),
        )
        rows = {j["id"]: j for j in all_jobs(conn)}
        expect(
            all(rows[i]["state"] == "pending" and rows[i]["redrives"] == 1 for i in ids),
            _("both dead jobs {ids} pending, each redriven once").format(ids=ids),
            "; ".join(f"job {i}: {rows[i]['state']}, redrives {rows[i]['redrives']}" for i in ids),
        )
    _two_operators_in_two_processes(ns)


def _two_operators_in_two_processes(ns: Namespace) -> None:
    """The same race between two processes, every way one operator can overtake the other."""

    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        add_dead(conn, 2)
        conn.close()

    def judge(folder: Path, run: dict[str, Any]) -> tuple[bool, str]:
        a, b = (run[w]["returned"] for w in ("first", "second"))
        with reading(folder / "jobs.db") as conn:
            rows = all_jobs(conn)
        state = "; ".join(f"job {j['id']}: {j['state']}, redrives {j['redrives']}" for j in rows)
        ok = (
            isinstance(a, list)
            and isinstance(b, list)
            and not set(a) & set(b)
            and all(j["state"] == "pending" and j["redrives"] == 1 for j in rows)
        )
        ended = [run[w]["ended"] for w in ("first", "second")]
        return ok, _("they returned {first} and {second}; {jobs}; the operators {ended}").format(
            first=a, second=b, jobs=state, ended=ended
        )

    after_every_schedule(
        ns,
        HARNESS + "redrive_schedules",
        make,
        [{"limit": 1, "now": NOW}],
        judge,
        _(
            "two redrives with limit=1 in two processes to return different jobs, each "
            "redriven once,"
        ),
        _(
            "choose and change in one BEGIN IMMEDIATE transaction: a lock in Python guards "
            "nothing between two operators' processes"
        ),
        who=_("operator"),
    )


@CHECKS.add(
    2,
    "a job can leave 'dead' between your SELECT and your UPDATE (another operator "
    "redrove it, a worker took it): read and write inside one BEGIN IMMEDIATE "
    "transaction and return only the jobs you changed",
    timeout=20.0,
    severe=True,
)
def redrive_racing_a_worker(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        redrive(ns, path, limit=1, now=NOW, dry_run=True)  # a stub says "not started yet"
        [job_id] = add_dead(conn, 1)
        result = ns.harness(HARNESS + "redrive_while_a_worker_claims", str(path), job_id, NOW)
        ids = returned(result, "redrive(limit=5)")
        job = row_of(conn, job_id)
        if result["worker"] == "in the gap":
            expect(
                job["state"] == "running" and job["lease_token"] == "worker-9-token",
                _(
                    "job {job_id} left with the worker that claimed it while your redrive ran"
                ).format(job_id=job_id),
                _("state={state}, lease_token={token}: the redrive overwrote a running job").format(
                    state=job["state"], token=repr(job["lease_token"])
                ),
            )
            expect(
                job_id not in ids,
                _("job {job_id} not reported as redriven (it was no longer dead)").format(
                    job_id=job_id
                ),
                _("returned {ids}").format(ids=ids),
            )
        else:
            expect(
                ids == [job_id] and job["state"] == "pending",
                _("[{job_id}] returned and the job pending").format(job_id=job_id),
                _("returned {ids}, state {state}").format(ids=ids, state=job["state"]),
            )


def _then_another_writes(
    ns: Namespace, path: Path, name: str, args: list[Any], kwargs: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """The student's ``name(conn, *args, **kwargs)``, then another connection's write
    (the harness's ``then_another_writes``): its result, and the call as the feedback
    shows it (a job and its token, then the keyword arguments)."""
    got = ns.harness(HARNESS + "then_another_writes", str(path), name, args, kwargs)
    shown = [f"job {args[0]}", repr(args[1])] if args else []
    return got, f"{name}({', '.join(shown + [f'{k}={v!r}' for k, v in kwargs.items()])})"


@CHECKS.add(
    2,
    "end every path with COMMIT or ROLLBACK (the dry run, a refusal, an error, a False): "
    "conn is in autocommit mode, and while your BEGIN is open no worker can write",
)
def leaves_no_transaction_open(ns: Namespace) -> None:
    error = {"type": "ValueError", "message": "no such customer"}
    with lab_file(ns) as (conn, path):
        redrive(ns, path, limit=1, now=NOW, dry_run=True)  # a stub says "not started yet"
        add_dead(conn, 3)
        job = add_running(conn)
        calls: list[tuple[str, list[Any], dict[str, Any]]] = [
            ("redrive", [], {"limit": 2, "now": NOW, "dry_run": True}),
            ("redrive", [], {"limit": 0, "now": NOW}),
            ("redrive", [], {"limit": 5, "now": NOW, "kind": "no-such-kind"}),
            ("redrive", [], {"limit": 2, "now": NOW}),
            ("dead_letter", [job, "stale-token", "permanent", error, NOW], {}),
            ("dead_letter", [job, "tok-1", "permanent", error, NOW], {}),
        ]
        for name, args, kwargs in calls:
            got, call = _then_another_writes(ns, path, name, args, kwargs)
            then = (
                _(
                    "{did}; then your connection was still inside a transaction and another "
                    "connection's BEGIN IMMEDIATE got {other}"
                )
                if got["open"]
                else _(
                    "{did}; then your connection was not inside a transaction and another "
                    "connection's BEGIN IMMEDIATE got {other}"
                )
            )
            expect(
                not got["open"] and got["other"] == "wrote",
                _(
                    "no transaction left open when {call} is over: another connection can "
                    "write at once"
                ).format(call=call),
                then.format(did=it_said(got), other=got["other"]),
            )
    # A write that fails (a constraint, a full disk): the error comes out, the
    # transaction does not stay open behind it.
    with lab_file(ns) as (conn, path):
        add_dead(conn, 2)
        job = add_running(conn)
        conn.execute(
            "CREATE TRIGGER refuse BEFORE UPDATE OF state ON jobs "
            "BEGIN SELECT RAISE(ABORT, 'the write failed (a full disk, simulated)'); END"
        )
        failing: list[tuple[str, list[Any], dict[str, Any]]] = [
            ("redrive", [], {"limit": 2, "now": NOW}),
            ("dead_letter", [job, "tok-1", "permanent", error, NOW], {}),
        ]
        for name, args, kwargs in failing:
            got, call = _then_another_writes(ns, path, name, args, kwargs)
            expect(
                not got["open"] and got["other"] == "wrote",
                _(
                    "no transaction left open when {call} is over, its UPDATE having failed: "
                    "ROLLBACK before the error goes on"
                ).format(call=call),
                _("{did}; then your connection was still inside a transaction: {other}").format(
                    did=it_said(got), other=got["other"]
                )
                if got["open"]
                else _("{did}; then another connection's BEGIN IMMEDIATE got {other}").format(
                    did=it_said(got), other=got["other"]
                ),
            )


#: A generated table: (state, kind, updated_at) per job; times repeat so ties happen.
TABLES = st.lists(
    st.tuples(
        st.sampled_from(["dead", "dead", "pending", "succeeded", "retry_wait"]),
        st.sampled_from(["email", "payment"]),
        st.sampled_from([10.0, 20.0, 30.0, 40.0]),
    ),
    min_size=1,
    max_size=8,
)


@CHECKS.add(
    2,
    "the oldest dead letters first, ties by id (ORDER BY updated_at, id), of the kind "
    "asked for, never more than limit, and nothing else touched",
    timeout=30.0,
)
def redrive_picks_the_oldest_for_any_table(ns: Namespace) -> None:
    def picks(case: tuple[list[tuple[str, str, float]], int, str | None]) -> None:
        table, limit, kind = case
        with lab_file(ns) as (conn, path):
            ids = [
                add_job(conn, f"{k}:{i}:v1", kind=k, state=st_, attempt=1, updated_at=t)
                for i, (st_, k, t) in enumerate(table)
            ]
            before = {j["id"]: j for j in all_jobs(conn)}
            dead = [i for i, (st_, k, _t) in zip(ids, table, strict=True) if st_ == "dead"]
            want = sorted(
                (i for i in dead if kind is None or before[i]["kind"] == kind),
                key=lambda i: (before[i]["updated_at"], i),
            )[:limit]
            got = redrive(ns, path, limit=limit, now=NOW, kind=kind)
            after = {j["id"]: j for j in all_jobs(conn)}
        shape = ", ".join(f"{i}:{s}/{k}@{t:g}" for i, (s, k, t) in zip(ids, table, strict=True))
        expect(
            list(got) == want,
            _("{ids} for limit={limit}, kind={kind} on jobs {shape}").format(
                ids=want, limit=limit, kind=repr(kind), shape=shape
            ),
            _("returned {ids}").format(ids=list(got)),
        )
        changed = sorted(i for i in ids if after[i] != before[i])
        expect(
            changed == sorted(want) and all(after[i]["state"] == "pending" for i in want),
            _("exactly jobs {ids} changed (pending) on jobs {shape}").format(
                ids=sorted(want), shape=shape
            ),
            _("changed: {jobs}").format(jobs=changed),
        )

    # One plain call first: an untouched stub says "not started" at once, instead of
    # Hypothesis spending seconds shrinking its NotImplementedError.
    picks(([("dead", "email", 10.0), ("pending", "email", 20.0)], 1, None))
    cases = st.tuples(TABLES, st.integers(1, 4), st.sampled_from([None, "email", "payment"]))
    holds_for(cases, picks, examples=20)
