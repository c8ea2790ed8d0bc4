"""Exercise 6's checks of one ``redrive`` alone: the limit it requires and respects, the
key it keeps, only dead jobs, a fresh start, a dry run and the kind."""

from __future__ import annotations

from typing import Any

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex06.deadletters import (
    CHECKS,
    HARNESS,
    NOW,
    add_dead,
    it_said,
    redrive,
    returned,
    row_of,
    said,
)
from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.labdb import add_job, all_jobs
from labkit.lang import _


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
        # Half a job is below 1 too: LIMIT 0.5 is no count SQLite takes, and int(0.5) is 0.
        for limit in (None, 0, -3, 0.5):
            result = ns.harness(HARNESS + "redrive", str(path), limit=limit, now=NOW)
            expect(
                _refused(result, limit),
                _("ValueError for limit={limit}").format(limit=repr(limit)),
                said(result),
            )
            _says_what_is_wrong(result, limit, dry_run=False)
        # A dry run is the same call, shown first: it refuses the same limits.
        for limit in (None, 0):
            result = ns.harness(HARNESS + "redrive", str(path), limit=limit, now=NOW, dry_run=True)
            expect(
                _refused(result, limit),
                _(
                    "ValueError for limit={limit}, dry_run=True (a dry run shows what the same "
                    "call would do, and that call is refused)"
                ).format(limit=repr(limit)),
                said(result),
            )
            _says_what_is_wrong(result, limit, dry_run=True)
        # Required means no default of the code's own: a call that forgets the limit
        # (redrive(conn, now=...)) is refused, not given a batch size nobody asked for.
        result = ns.harness(HARNESS + "redrive", str(path), now=NOW)
        expect(
            _refused(result, None),
            _(
                "a refusal for redrive(conn, now=...) with no limit at all (a TypeError for "
                "the missing argument, or a ValueError)"
            ),
            said(result),
            _(
                "no default for limit (or a default of None that is refused): an operator "
                "who forgets it must be told, not have a batch size of the code's own "
                "redriven"
            ),
        )
        expect(all_jobs(conn) == before, "nothing changed", _("jobs were changed"))


def _refused(result: dict[str, Any], limit: Any) -> bool:
    """A ValueError; for None (or a float), a TypeError of the code's own that names the
    limit too. A TypeError that no one raised on purpose (``None < 1``: "'<' not supported
    between instances...") is a comparison that never looked at None, and an operator's
    tool that catches ValueError crashes on it."""
    raised = result.get("raised", ())
    if "ValueError" in raised:
        return True
    message = str(result.get("message", "")).lower()
    own = limit is None or isinstance(limit, float)
    return own and "TypeError" in raised and "limit" in message


def _says_what_is_wrong(result: dict[str, Any], limit: Any, *, dry_run: bool) -> None:
    """The refusal says why in words: an operator at the console reads only its message,
    and a bare ``ValueError`` (or one whose message is the bad value alone, '0') tells
    them nothing about what to pass."""
    message = str(result.get("message", "")).strip()
    call = f"limit={limit!r}, dry_run=True" if dry_run else f"limit={limit!r}"
    # Words that name nothing ('invalid value', 'bad argument') tell the operator no more
    # than a bare ValueError: the message names the argument to fix, the limit.
    expect(
        message not in ("", str(limit), repr(limit)) and "limit" in message.lower(),
        _(
            "the error for {call} to say in words what is wrong, naming the limit (a message "
            "an operator can act on, not a bare ValueError, the bad value alone, or words "
            "such as 'invalid value' that name nothing)"
        ).format(call=call),
        said(result),
        _(
            'raise ValueError("limit is required (1 or more): ...") with words: the operator '
            "who typed the call reads only the message"
        ),
    )


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
        result = ns.harness(HARNESS + "redrive", str(path), limit=2, now=NOW)
        got = returned(result, f"redrive(limit=2, now={NOW!r})")
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
        # The ids are the table's: integers, as a caller compares them (job_id in ids).
        expect(
            "not_ints" not in result,
            _("the ids returned as the integers the table holds, {ids}").format(ids=ids[:2]),
            _("returned {value}").format(value=result.get("not_ints")),
            _(
                "return row['id'] as read (an int): a '7' (a group_concat split, a str()) is "
                "not 7, and the caller's job_id in ids misses it"
            ),
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
            # Both at their last attempt: out of attempts is not dead. The running one is
            # still held, and a redrive would hand it to a second worker.
            "succeeded": add_job(conn, "o:3:v1", state="succeeded", attempt=3, updated_at=1.0),
            # Its lease ran out a minute ago, its worker maybe only slow: reclaiming it is the
            # claim's business (a new token fences the old worker out), never a redrive's.
            "running (lease run out)": add_job(
                conn,
                "o:6:v1",
                state="running",
                attempt=1,
                lease_owner="w-slow",
                lease_until=NOW - 60,
                lease_token="t-slow",
                updated_at=1.0,
            ),
            # Waiting for a retry its budget no longer allows (a budget lowered meanwhile):
            # the retry's code buries it when it comes up, not a redrive.
            "retry_wait (attempt 3 of 3)": add_job(
                conn, "o:5:v1", state="retry_wait", attempt=3, updated_at=1.0
            ),
            "running": add_job(
                conn,
                "o:4:v1",
                state="running",
                attempt=3,
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
    "redrives + 1, updated_at = now (or it dies again at once); last_error stays as it "
    "was, for a person to read",
)
def redrive_gives_a_fresh_start(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id, early, single = add_dead(conn, 3)
        # Its own budget (not the default 3): the redrive resets the attempts, not the budget.
        # Buried while its next retry was an hour away: run_after = now, not the later one.
        conn.execute(
            "UPDATE jobs SET max_attempts = 5, attempt = 5, run_after = :later WHERE id = :id",
            {"id": job_id, "later": NOW + 3_600.0},
        )
        # Buried by a permanent error at its first attempt: it starts over too.
        conn.execute(
            "UPDATE jobs SET max_attempts = 5, attempt = 1, dead_reason = 'permanent error' "
            "WHERE id = :id",
            {"id": early},
        )
        # A job allowed one attempt (a charge not to be retried): its budget is its own.
        conn.execute("UPDATE jobs SET max_attempts = 1, attempt = 1 WHERE id = :id", {"id": single})
        before = row_of(conn, single)
        redrive(ns, path, limit=3, now=NOW)
        job = row_of(conn, job_id)
        want = {
            "attempt": 0,
            "max_attempts": 5,
            "run_after": NOW,
            "dead_reason": None,
            "redrives": 1,
            "updated_at": NOW,
            "last_error": "TimeoutError: slow",
        }
        got = {k: job[k] for k in want}
        expect(got == want, str(want), str(got))
        first = {k: row_of(conn, early)[k] for k in ("state", "attempt", "dead_reason")}
        expect(
            first == {"state": "pending", "attempt": 0, "dead_reason": None},
            _(
                "attempt 0 for job {job_id}, buried by a permanent error at attempt 1 of 5: "
                "a fresh start whatever attempt it died at"
            ).format(job_id=early),
            str(first),
        )
        after = row_of(conn, single)
        kept = {k: v for k, v in before.items() if k not in _FRESH_START}
        moved = {k: f"{v!r} -> {after[k]!r}" for k, v in kept.items() if after[k] != v}
        expect(
            not moved,
            _(
                "every other column of job {job_id} as it was (its budget, max_attempts = 1, "
                "too): {columns}"
            ).format(job_id=single, columns=", ".join(kept)),
            _("changed: {changes}").format(
                changes=", ".join(f"{k} {change}" for k, change in moved.items())
            ),
            _(
                "set only what a redrive is for (state, attempt, run_after, dead_reason, "
                "redrives, updated_at): the job's budget is its own"
            ),
        )


#: The columns a redrive sets (and the lease, NULL already on a dead job); every other
#: one stays as it was.
_FRESH_START = frozenset(
    {"state", "attempt", "run_after", "dead_reason", "redrives", "updated_at"}
    | {"lease_owner", "lease_until", "lease_token"}
)


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
        # Nor does a wildcard of the code's own: '*' and 'all' are kinds no job has.
        for every in ("*", "all"):
            wild = redrive(ns, path, limit=10, now=NOW, kind=every)
            expect(
                list(wild) == [] and all(row_of(conn, i)["state"] == "dead" for i in others),
                _(
                    "nothing redriven for kind={kind} (no job has that kind; only None means "
                    "every kind)"
                ).format(kind=repr(every)),
                _("returned {ids}").format(ids=list(wild)),
                "kind is a job's kind, compared as it is: None, and nothing else, means every kind",
            )
        # A capital is a character too: kind.lower() would find 'mail_digest' (already
        # redriven above) and leave the 'Mail_Digest' job dead.
        capital = redrive(ns, path, limit=10, now=NOW, kind="Mail_Digest")
        expect(
            list(capital) == [ids["Mail_Digest"]],
            _(
                "only job {job_id} (kind {kind}) redriven for kind={kind} among kinds "
                "{kinds}: a capital is a character too"
            ).format(job_id=ids["Mail_Digest"], kind=repr("Mail_Digest"), kinds=kinds),
            _("returned {ids}").format(ids=list(capital)),
            "compare the kind as it is given: no strip(), no lower()",
        )
