"""Hidden checks for exercise 10: the retry after a crash (at the 202, and as the job is
stored; across a midnight), keys per caller (not per token, kept apart from the owner's
name) and exactly as sent (quotes and all, kept whole or as a digest of 64 bits or more),
the request stored whole, requests sent together (by two callers), requests without a
key, the job a worker runs (with the store's attempts, whatever the body says), what every
202 says (an hour into the server's life too), the status among thousands of jobs, no
payload, a poll while the store is down, a refusal that leaves another request's job
alone, no secret in the server's output on any branch, 401 (before the job is read)."""

from __future__ import annotations

import calendar
import inspect
import os
import random
import string
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex10.crashes import crash_at_202, crash_while_posting
from labkit.grading.exercises.ex10.served import (
    ALICE,
    BOB,
    EAST_OF_UTC,
    TIMEOUT,
    WEST_OF_UTC,
    App,
    accepted_id,
    add_job,
    jobs_for,
    jobs_in,
    posted_together,
    retried_id,
    scratch,
    served,
    texts_in,
)
from labkit.grading.exercises.ex10.status_checks import poll_while_the_store_is_down
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.lang import _

CHECKS = Checks("ex10", hidden=True)
#: UTC-12 and UTC+14 as POSIX TZ strings: 26 hours apart, so their dates always differ.
FAR_WEST, FAR_EAST = "<-12>12", "<+14>-14"
#: A job due later than this after it was made is as good as lost to its caller.
DAY_S = 86_400
#: The token alice gets when alice-token expires: another token, the same caller.
ALICE_RENEWED = "alice-renewed-token"
#: When the client's retry reaches the restarted server: 23 and a half hours after the
#: crash (which is a minute before midnight), as a client that was offline most of a day
#: retries, within the day Stripe keeps keys. A key kept for less than a day (a TTL of
#: 24 * 60 seconds, an hour, or 12 hours) has expired then.
RETRY_LATER_S = 23 * 3600 + 30 * 60
#: Two requests without an Idempotency-Key, one to each restarted server of the crash check.
UNKEYED = ({"month": "2026-09", "unkeyed": 1}, {"month": "2026-09", "unkeyed": 2})


@CHECKS.add(
    1,
    "after the crash, the client's retry with the same key gets the job the "
    "crash left, and no second one; a request without a key sent after a restart is a "
    "job of its own",
    timeout=TIMEOUT,
    severe=True,
)
def retry_after_the_crash_gets_the_same_job(ns: Namespace) -> None:
    body = {"month": "2026-09"}
    # The next New Year's midnight (UTC): the day, the month and the year all change there.
    this_year = time.gmtime().tm_year
    midnight = calendar.timegm((this_year + 1, 1, 1, 0, 0, 0, 0, 0, 0))
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        # The crashed server and its replacement in time zones 26 hours apart: whenever
        # the check runs, their local dates differ, as they do for a retry sent just after
        # midnight. A job key holding the date is another key after the restart. Their
        # clocks, too, read a minute before the next UTC New Year's midnight and 23 and a
        # half hours after it (the client was offline a while): a key holding the UTC year,
        # month, day, hour or minute (time.time() // 86400, strftime('%Y-%m')) changes as
        # well, and a key the app lets expire sooner than a day (Stripe keeps them 24 hours)
        # is gone.
        with served(ns, db, crash_at_202=True, tz=FAR_WEST, clock_at=midnight - 60) as doomed:
            crash_at_202(ns, doomed, body, "crash-2")
        left = [j["id"] for j in jobs_for(db, "alice", body)]
        with served(ns, db, tz=FAR_EAST, clock_at=midnight + RETRY_LATER_S) as app:
            again = retried_id(app.post(body, key="crash-2"), _("the client's retry"))
            # A request without a key, after the retry: the restart of part two sends one
            # too, as many requests into its life, to the same database.
            unkeyed = accepted_id(app.post(UNKEYED[0]), _("a request without a key"))
        now = [j["id"] for j in jobs_for(db, "alice", body)]
        expect(
            len(left) == 1 and now == left and again == left[0],
            _("the retry to answer job {job_ids} and the database to still hold one job").format(
                job_ids=left
            ),
            _("retry got {job_id}, jobs now {job_ids}").format(job_id=again, job_ids=now),
            "build the job key from the owner and the Idempotency-Key alone (no hash(), "
            "no clock, no counter in memory) and let it never expire sooner than a day: "
            "the restarted server must compute the same key, a client may retry hours "
            "later, and only the store remembers what the crashed one did",
        )
        # The same retry after a kill as store.enqueue returns, before the rest of the
        # handler: whatever the app writes after the job (its own table of keys) is not
        # there. The same database: the servers before hold jobs of their own.
        body = {"month": "2026-09", "after": "enqueue"}
        with served(ns, db, crash_after_enqueue=True) as doomed:
            crash_while_posting(
                doomed,
                body,
                "crash-3",
                "kill after enqueue",
                _(
                    "the server killed as store.enqueue returned the new job (the check's crash "
                    "point)"
                ),
            )
        left = [j["id"] for j in jobs_for(db, "alice", body)]
        with served(ns, db) as app:
            again = retried_id(app.post(body, key="crash-3"), _("the client's retry"))
            later = app.post(UNKEYED[1])
        now = [j["id"] for j in jobs_for(db, "alice", body)]
        # None left is right too: an enqueue in the app's own transaction (conn=) had not
        # committed yet.
        expect(
            len(now) == 1 and set(left) <= set(now) and again == now[0],
            _(
                "after a kill right after store.enqueue, the retry to answer with the job "
                "the kill left ({job_ids}) and the database to hold one job"
            ).format(job_ids=left),
            _("retry got {job_id}, jobs now {job_ids}").format(job_id=again, job_ids=now),
            "let the job's key remember the request (store.enqueue(..., key=...)): a record "
            "of keys written after the job is missing when the server dies between the two",
        )
        # A server's life starts its counters afresh: a key made up for a request without
        # one (a counter in memory) is the key an earlier life gave another request.
        fresh = accepted_id(
            later,
            _("a request without a key, sent to a restarted server"),
            _(
                "pass key=None when the request has no Idempotency-Key: a key you make up "
                "from a counter in memory starts again at each restart, and meets the job "
                "an earlier life of the server gave another request"
            ),
        )
        stored = [[j["id"] for j in jobs_for(db, "alice", b)] for b in UNKEYED]
        expect(
            stored == [[unkeyed], [fresh]] and fresh != unkeyed,
            _("two requests without a key, sent to two lives of the server, stored as two jobs"),
            _("jobs {ids} answered, jobs stored per request {stored}").format(
                ids=[unkeyed, fresh], stored=stored
            ),
            _(
                "pass key=None when the request has no Idempotency-Key: a key you make up "
                "from a counter in memory starts again at each restart, and meets the job "
                "an earlier life of the server gave another request"
            ),
        )


@CHECKS.add(
    1,
    "two callers using the same Idempotency-Key get two different jobs",
    timeout=TIMEOUT,
    severe=True,
)
def keys_are_scoped_to_the_caller(ns: Namespace) -> None:
    body = {"month": "2026-10"}
    tokens = {TEAM_TOKENS[owner]: owner for owner in (*TEAMS, *JOINED, *CASED)}
    with scratch(ns) as folder, served(ns, folder / "jobs.db", renewed_tokens=tokens) as app:
        a = accepted_id(app.post(body, "alice-token", key="shared-key"), _("alice's request"))
        reply = app.post(body, "bob-token", key="shared-key")
        b = accepted_id(
            reply,
            _("bob's request with the key alice also used"),
            _(
                "put the owner in the job key next to the Idempotency-Key: bob's key must not "
                "meet alice's job (a 409 here means it did)"
            ),
        )
        expect(
            a != b,
            "bob to get a job of his own",
            _("alice's job {job_id}").format(job_id=a),
            "put the owner in the job key next to the Idempotency-Key",
        )
        expect(len(jobs_for(folder / "jobs.db", "bob", body)) == 1, "bob's job stored", 0)
        _owner_and_key_kept_apart(
            app,
            folder / "jobs.db",
            TEAMS,
            _(
                "keep the owner and the Idempotency-Key apart in the job key, with a separator "
                "(f'report:{owner}:{key}'), hashed or not: joined with nothing between, team1 + "
                "'2-report' and team12 + '-report' both read 'team12-report', and '7-mari' + ana "
                "and '7-' + mariana both read '7-mariana', so one caller's request is answered "
                "with another's job and never runs"
            ),
        )
        _owner_and_key_kept_apart(
            app,
            folder / "jobs.db",
            JOINED,
            _(
                "join the owner and the Idempotency-Key with a character no owner's name "
                "holds (f'report:{owner}:{key}'), or encode the pair (json.dumps([owner, "
                "key])): user names hold '-', '_' and '.', so joined with one of those, mary "
                "+ 'jane-7' and mary-jane + '7' both read 'mary-jane-7' ('7-mary' + jane and "
                "'7' + mary-jane both '7-mary-jane'), and one caller's request is answered "
                "with another's job and never runs"
            ),
        )
        _owner_and_key_kept_apart(
            app,
            folder / "jobs.db",
            CASED,
            _(
                "put the owner in the job key as caller_of(authorization) returns it, with no "
                "lower() or casefold(): Ana and ana are two callers, and with one key between "
                "them the second one's request is refused or answered with the first's job"
            ),
        )
        _uuid_keys_scoped_too(app, folder / "jobs.db")
        # A long key (200 characters, under Stripe's 255) hashed or cut to fit a column:
        # the owner must stay in what is kept.
        long_key = "shared-" + "k" * 193
        long_body = {"month": "2026-11"}
        a = accepted_id(app.post(long_body, "alice-token", key=long_key), _("alice's request"))
        reply = app.post(long_body, "bob-token", key=long_key)
        if reply.status_code == 400:
            return  # a long key refused with a clear 400 (odd_keys_are_data judges that)
        b = accepted_id(
            reply,
            _("bob's request with the 200-character key alice also used"),
            _(
                "keep the owner in the job key however you shorten a long Idempotency-Key: "
                "bob's key must not meet alice's job (a 409 or 422 here means it did)"
            ),
        )
        expect(
            a != b,
            _("bob to get a job of his own for the 200-character key alice also used"),
            _("alice's job {job_id}").format(job_id=a),
            "keep the owner in the job key however you shorten a long Idempotency-Key: "
            "hash the owner and the key together (sha256 of both), never the key alone",
        )


def _uuid_keys_scoped_too(app: App, db: Path) -> None:
    """Alice and bob send one key shaped as a UUID: a job each. A UUID is unique only as
    far as every client draws it well; one a client library reuses, or a fixed one
    (the nil UUID in a test setup), reaches two callers, and a key left unscoped because
    it "looks unique" answers bob with alice's job (or tells him, by a 409, that she
    used it)."""
    rng = random.Random(f"ex10 uuid key {scene_seeds()[-1]}")
    key = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    body = {"month": "2026-12"}
    hint = _(
        "scope every Idempotency-Key to its owner, whatever it looks like: a key shaped as "
        "a UUID is the caller's choice too, and two callers who send the same one must not "
        "meet each other's job"
    )
    a = accepted_id(app.post(body, "alice-token", key=key), _("alice's request"))
    b = accepted_id(
        app.post(body, "bob-token", key=key),
        _("bob's request with the UUID key {key} alice also used").format(key=key),
        hint,
    )
    stored = [j["id"] for j in jobs_for(db, "bob", body)]
    expect(
        a != b and stored == [b],
        _("bob to get a job of his own for the UUID key {key} alice also used").format(key=key),
        _("alice's job {job_id}; bob's jobs stored: {stored}").format(job_id=a, stored=stored),
        hint,
    )


#: Callers whose names are one the other's start or end, as ids are ("team1" and
#: "team12", "ana" and "mariana"), and the key each sends: joined to its owner with nothing
#: between, owner first ("team12-report") or key first ("7-mariana"), two callers' keys
#: are one, and the second caller's request meets the first's job.
TEAMS = {"team1": "2-report", "team12": "-report", "ana": "7-mari", "mariana": "7-"}
#: Callers whose names hold a character a job key may join owner and key with, as user
#: names do ("mary-jane", "john_doe", "li.u"), and the key each sends: joined with that
#: character, owner first mary + 'jane-7' and mary-jane + '7' both read 'mary-jane-7',
#: and key first '7-mary' + jane and '7' + mary-jane both read '7-mary-jane'.
JOINED = {
    "mary": "jane-7",
    "mary-jane": "7",
    "jane": "7-mary",
    "john": "doe_7",
    "john_doe": "7",
    "doe": "7_john",
    "li": "u.7",
    "li.u": "7",
    "u": "7.li",
}
#: Two callers whose names differ only in case, and the one key both send: an owner
#: lower-cased in the job key makes their two requests one.
CASED = {"Ana": "case-7", "ana": "case-7"}
TEAM_TOKENS = {owner: f"{owner}-token" for owner in (*TEAMS, *JOINED, *CASED)}


def _owner_and_key_kept_apart(app: App, db: Path, keys: dict[str, str], hint: str) -> None:
    """Each owner of ``keys`` sends a request with its own key: a job each."""
    body = {"month": "2026-10", "teams": len(keys)}
    replies = {owner: app.post(body, TEAM_TOKENS[owner], key=key) for owner, key in keys.items()}
    if any(r.status_code in (401, 403) for r in replies.values()):
        return  # a table of tokens of its own: a_renewed_token_is_the_same_caller's to judge
    ids = {
        owner: accepted_id(
            reply,
            _("{owner}'s request with the key {key}").format(owner=owner, key=repr(keys[owner])),
            hint,
        )
        for owner, reply in replies.items()
    }
    stored = {owner: [j["id"] for j in jobs_for(db, owner, body)] for owner in keys}
    expect(
        len(set(ids.values())) == len(keys) and stored == {o: [ids[o]] for o in keys},
        _("each caller to get a job of its own for its own key: {keys}").format(
            keys=", ".join(f"{owner} {key!r}" for owner, key in keys.items())
        ),
        _("job ids answered {ids}, jobs stored per caller {stored}").format(ids=ids, stored=stored),
        hint,
    )


@CHECKS.add(
    1,
    "a retry sent with a renewed token (the same caller, a new token) gets the same job, "
    "and no bearer token is stored in the job database",
    timeout=TIMEOUT,
    severe=True,
)
def a_renewed_token_is_the_same_caller(ns: Namespace) -> None:
    body = {"month": "2027-06"}
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db, renewed_tokens={ALICE_RENEWED: "alice"}) as app:
            first = accepted_id(app.post(body, key="renewed-1"), _("alice's request"))
            reply = app.post(body, ALICE_RENEWED, key="renewed-1")
            # An app with a table of tokens of its own does not know the renewed one:
            # nothing to judge then but what it stored.
            if reply.status_code not in (401, 403):
                again = retried_id(reply, _("alice's retry with her renewed token"))
                stored = [j["id"] for j in jobs_for(db, "alice", body)]
                expect(
                    again == first and stored == [first],
                    _(
                        "alice's retry with the same key, sent with her renewed token, to get "
                        "job {job_id} again, and one job in the database"
                    ).format(job_id=first),
                    _("retry got {job_id}, jobs now {job_ids}").format(
                        job_id=again, job_ids=stored
                    ),
                    _(
                        "scope the key to the owner caller_of(authorization) names, not to the "
                        "token: a token expires and its holder gets a new one, and is the "
                        "same caller"
                    ),
                )
        leaked = sorted(
            {table for table, text in texts_in(db) if ALICE in text or ALICE_RENEWED in text}
        )
        expect(
            not leaked,
            _("no bearer token in the job database"),
            _("alice's token stored in the table(s) {tables}").format(tables=leaked),
            _(
                "build the key from the owner caller_of(authorization) returns, never from "
                "the Authorization header: whoever reads the jobs table could call as alice"
            ),
        )


def _as_json_text(value: Any) -> str:
    """``value`` as JSON text with its objects' keys sorted: the same request however its
    keys are ordered, another once a number changed its type."""
    import json

    return json.dumps(value, sort_keys=True)


@CHECKS.add(
    1,
    "the request is stored whole: a list of hundreds of items, a long text with spaces "
    "around it and a null field, nothing cut, stripped, dropped, reordered, rounded or "
    "retyped",
    timeout=TIMEOUT,
    severe=True,
)
def the_request_is_stored_whole(ns: Namespace) -> None:
    rng = random.Random(f"ex10 whole {scene_seeds()[-1]}")
    words = ["relatório", "março", "filial", "São Paulo", "crédito", "débito", "saldo"]
    body: dict[str, Any] = {
        "month": "2027-07",
        # The caller's own reference for the request, named as a job's id might be.
        "id": "rep-2027-07",
        "accounts": [f"acct-{rng.randrange(10**6):06d}" for _ in range(300)],
        # Spaces around the note and a null field: a stripped text or a dropped null is
        # another request than the one sent.
        "note": "  " + " ".join(rng.choice(words) for _ in range(150)) + " ",
        # A null inside an object too, and every other empty or false value: an empty
        # text, an empty list, a zero and a false are each something the caller asked for.
        "filters": {
            "region": "Nordeste",
            "min_total": 1500.5,
            "limit": 300,
            "segment": None,
            # A list inside an object, as long as the top one: trimmed there too, it is cut.
            "branches": [f"br-{rng.randrange(10**4):04d}" for _ in range(150)],
        },
        "branch": None,
        "cost_center": "",
        "tags": [],
        "min_pages": 0,
        "include_closed": False,
        # A rate with three decimals, a count beyond a float's 53 bits and a key in mixed
        # case: rounded, turned into a float or lower-cased, each is another request.
        "Rate": 0.125,
        # A whole number sent as a float: 1.0 stored as 1 is retyped too.
        "scale": 1.0,
        "row_limit": 2**53 + 1,
        # A field whose name starts with '_' is the caller's as much as any ("private"
        # fields dropped lose it), and a text with an accent written as a letter and a
        # combining mark (NFD, as macOS writes file names): normalized, it is another text.
        "_source": "erp-export",
        "title": "Relato\u0301rio de ma\u0300rc\u0327o",
    }
    # An account named twice (the caller's list as it is): a list made unique is another.
    body["accounts"].append(body["accounts"][0])
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        job_id = accepted_id(app.post(body, key="whole-1"), _("a long report request"))
        rows = [j["payload"] for j in jobs_in(folder / "jobs.db") if j["id"] == job_id]
    stored = rows[0].get("request") if rows and isinstance(rows[0], dict) else None
    if isinstance(stored, dict):
        # Compared as JSON: 300 stored as 300.0, or False as 0, is another value.
        differ = sorted(
            k
            for k in set(body) | set(stored)
            if k not in stored or _as_json_text(stored[k]) != _as_json_text(body.get(k))
        )
    else:
        differ = [] if stored == body else ["request"]
    expect(
        not differ,
        _(
            "job {job_id} to hold the request as it was sent: {count} accounts, a note "
            "of {length} characters, every number of the type and value sent (0.125 not "
            "rounded, 2**53 + 1 no float) and every field's name in its case"
        ).format(job_id=job_id, count=len(body["accounts"]), length=len(body["note"])),
        _("these fields stored otherwise: {fields}").format(fields=differ),
        _(
            "store the body as it came: store.enqueue('report', {'owner': owner, "
            "'request': body}, ...); a field cut short, a list trimmed or made unique, or "
            "a null, empty or false field dropped (at any depth), a number rounded or "
            "turned into a float, or a field's name lower-cased runs another report than "
            "the one asked for; so does a field whose name starts with '_' taken out, or a "
            "text normalized (unicodedata.normalize)"
        ),
    )


@CHECKS.add(
    1,
    "the job's owner is the caller named by the token, whatever the body says: a body "
    "field 'owner' is only data",
    timeout=TIMEOUT,
    severe=True,
)
def owner_comes_from_the_token(ns: Namespace) -> None:
    # Every field a caller might name another owner in, not only "owner": an app that
    # takes the owner from any of them files jobs as bob.
    body = {
        "month": "2026-12",
        "owner": "bob",
        "user": "bob",
        "on_behalf_of": "bob",
        "requested_by": "bob",
    }
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        job_id = accepted_id(app.post(body, key="owner-in-body"), _("alice's request"))
        owners = [
            j["payload"].get("owner") if isinstance(j["payload"], dict) else None
            for j in jobs_in(folder / "jobs.db")
            if j["id"] == job_id
        ]
        requests = [
            j["payload"].get("request") if isinstance(j["payload"], dict) else None
            for j in jobs_in(folder / "jobs.db")
            if j["id"] == job_id
        ]
        by_bob = app.status(job_id, BOB).status_code
        expect(
            owners == ["alice"] and by_bob == 404,
            _(
                "alice's request whose body names bob (in the fields owner, user, "
                "on_behalf_of and requested_by) stored as alice's job, and 404 for bob"
            ),
            _("the job stored with owner {owners}; bob's GET answered {status}").format(
                owners=owners, status=by_bob
            ),
            _(
                'store {"owner": caller_of(authorization), "request": body}: the owner '
                "comes from the token alone, never from the body (a caller could file jobs "
                "as anyone, and show them their requests)"
            ),
        )
        expect(
            requests == [body],
            _("the request stored as alice sent it, its field 'owner' included: {body}").format(
                body=body
            ),
            _("the request stored as {requests}").format(requests=requests),
            _(
                "store the body whole in 'request': the owner of the job is the payload's "
                "'owner', so a field of the body called 'owner' is harmless data, and the "
                "report runs on what was asked"
            ),
        )


@CHECKS.add(
    1,
    "the status never shows the payload (the request may hold private data), and shows "
    "nothing of a job to anyone but its owner, whatever the job's state",
    timeout=TIMEOUT,
    severe=True,
)
def status_hides_the_payload(ns: Namespace) -> None:
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db, renewed_tokens=LOOK_ALIKES) as app:
            job_id = add_job(db, "alice", {"note": "private-marker-5521"}, "check:hide")
            reply = app.status(job_id)
            expect(200 <= reply.status_code < 300, "200 for the owner", reply.status_code)
            _nobody_else_sees(app, job_id, "pending")
            for state, other in _jobs_a_worker_left(db).items():
                _nobody_else_sees(app, other, state)
            expect(
                "private-marker-5521" not in reply.text,
                "no payload in the status",
                reply.text[:160],
                "return status_view(job), not the job itself",
            )
            # Finished, it still shows its result, not what was asked.
            from labkit.store import JobStore

            with JobStore(db) as store:
                claimed = store.claim("check-worker")
                if claimed is not None and claimed.id == job_id:
                    store.complete(claimed, {"pages": 1})
            _nobody_else_sees(app, job_id, "succeeded")
            done = app.status(job_id)
            at = done.text.find("private-marker-5521")
            expect(
                at < 0,
                _("no payload in the status of job {job_id} once it has succeeded").format(
                    job_id=job_id
                ),
                "..." + done.text[max(0, at - 100) : at + 40],
                _(
                    "return status_view(job) in every state: the result is in it; the "
                    "request (the payload) is not, finished or not"
                ),
            )


#: The token of a caller whose name is the start of alice's: an owner compared loosely
#: (``in``, ``startswith``, ``find``) shows him her jobs.
ALI = "ali-token"
#: Callers whose names look like alice's: ali (the start of hers), Alice (hers in another
#: case: an owner compared or stored lower-cased shows her alice's jobs), malice and alice2
#: (which hold hers, at the end and at the start: the stored owner looked up ``in`` the
#: caller's name, or the caller's name that ``startswith`` it, shows them her jobs).
LOOK_ALIKES = {
    ALI: "ali",
    "Alice-token": "Alice",
    "malice-token": "malice",
    "alice2-token": "alice2",
}


def _jobs_a_worker_left(db: Path) -> dict[str, int]:
    """Three jobs of alice's, each on a queue of its own, as a worker leaves them: running
    (claimed), waiting for a retry (a transient failure) and dead (a permanent one)."""
    from labkit.errors import PermanentError, TransientError
    from labkit.store import JobStore

    left = {}
    with JobStore(db) as store:
        for state in ("running", "retry_wait", "dead"):
            job, _new = store.enqueue(
                "report",
                {"owner": "alice", "request": {"note": f"private-marker-5521 {state}"}},
                key=f"check:hide:{state}",
                queue=f"check-{state}",
            )
            claimed = store.claim("check-worker", queues=(f"check-{state}",), lease_s=600)
            if claimed is None or claimed.id != job.id:
                continue
            if state == "retry_wait":
                store.fail(claimed, TransientError("ERP 503 Service Unavailable"))
            elif state == "dead":
                store.fail(claimed, PermanentError("ERP 400: no such month"))
            left[state] = job.id
    return left


def _with_any_id(text: str, job_id: int) -> str:
    """``text`` with the id ``job_id`` as a number of its own (not the digits of a name
    such as alice2, which a 404 naming its caller holds) written ``{id}``."""
    import re

    return re.sub(rf"(?<!\w){job_id}(?!\w)", "{id}", text)


def _with_any_digits(text: str, job_id: int) -> str:
    """``text`` with every ``job_id`` written ``{id}``, glued to a word too ('job7')."""
    return text.replace(str(job_id), "{id}")


def _nobody_else_sees(app: App, job_id: int, state: str) -> None:
    """Fail unless bob, and the callers named like alice (``LOOK_ALIKES``), asking for
    alice's job ``job_id`` (in ``state``) get the answer of an id that does not exist."""
    for token, who in ((BOB, "bob"), *LOOK_ALIKES.items()):
        asked = app.status(job_id, token, raw=True)
        absent = app.status(job_id + 1000, token, raw=True)
        same = asked.status_code == absent.status_code and any(
            mask(asked.text, job_id) == mask(absent.text, job_id + 1000)
            for mask in (_with_any_id, _with_any_digits)
        )
        expect(
            not 200 <= asked.status_code < 300 and same,
            _(
                "{who} asking for alice's job {job_id} ({state}) answered as for an id that "
                "does not exist"
            ).format(who=who, job_id=job_id, state=state),
            f"{asked.status_code} {asked.text[:120]!r} vs {absent.status_code} "
            f"{absent.text[:80]!r}",
            _(
                "check the owner first on every GET, before anything that looks at the "
                "job's state: a job running, waiting for a retry or dead is still its "
                "owner's alone. Compare job.payload.get('owner') == caller_of(authorization) "
                "exactly, and store the owner as caller_of returns it: 'ali' is in 'alice' and "
                "'alice' in 'malice' and 'alice2', and none is alice; nor is 'Alice' (no "
                "lower())"
            ),
        )
        told = _headers_of_a_404_told_apart(asked, absent, job_id)
        expect(
            not told,
            _(
                "the same headers when {who} asks for alice's job {job_id} ({state}) as for "
                "an id that does not exist"
            ).format(who=who, job_id=job_id, state=state),
            told,
            _(
                "answer another's job with exactly the 404 of a missing id, headers too: a "
                "header only that 404 carries (the job's state, a Retry-After, a "
                "WWW-Authenticate) tells the caller the id exists"
            ),
        )


#: Headers that differ between any two answers (the moment, the length of a body that
#: names the id asked for) or that the server adds itself.
_EX10_404_HEADERS_ANY = {"date", "content-length", "server", "connection"}


def _headers_of_a_404_told_apart(asked: Any, absent: Any, job_id: int) -> str:
    """The headers in which the answer for ``job_id`` differs from the one for
    ``job_id + 1000`` (an id that does not exist), once the id asked for is masked: ''
    when none does."""

    def seen(reply: Any, asked_id: int) -> dict[str, str]:
        return {
            name.lower(): value.replace(str(asked_id), "{id}")
            for name, value in reply.headers.items()
            if name.lower() not in _EX10_404_HEADERS_ANY
        }

    mine, missing = seen(asked, job_id), seen(absent, job_id + 1000)
    return "; ".join(
        f"{name}: {mine.get(name)!r} vs {missing.get(name)!r}"
        for name in sorted(set(mine) | set(missing))
        if mine.get(name) != missing.get(name)
    )


@CHECKS.add(
    1,
    "a poll while the job database cannot be read is a 5xx, never a 404: the job exists, "
    "and a client told it does not sends its request again as a new job",
    timeout=TIMEOUT,
    severe=True,
)
def a_poll_the_store_cannot_read_is_no_404(ns: Namespace) -> None:
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db, store_fault=True) as app:
            poll_while_the_store_is_down(app, add_job(db, "alice", {"month": "2027-10"}, "down"))


@CHECKS.add(
    1,
    "no secret a caller sends reaches the server's output: not the password of a refused "
    "body, not one written in a body it takes, not a bearer token (printed, logged at any "
    "level, or in a traceback), nor into a file or table the app keeps or a Location it "
    "answers with",
    timeout=TIMEOUT,
    severe=True,
)
def secrets_stay_out_of_the_logs(ns: Namespace) -> None:
    rng = random.Random(f"ex10 logs {scene_seeds()[-1]}")

    def made_up(prefix: str) -> str:
        return prefix + "".join(rng.choices(string.ascii_letters + string.digits, k=12))

    password, api_key, in_note = made_up("pw-"), made_up("key-"), made_up("pw-")
    renewed, forged = made_up("alice-renewed-"), made_up("forged-")
    # What the check sends, made up for this run (letters and digits: a repr or a JSON
    # dump shows them as they are), and what each is, for the feedback.
    secrets = {
        password: _("the password in a body the contract refuses (422)"),
        api_key: _("the api_key in a body the contract refuses (422)"),
        in_note: _(
            "the password written in the note of a body the store accepts "
            "('ERP login: password=...')"
        ),
        ALICE: _("alice's bearer token"),
        renewed: _("alice's renewed bearer token"),
        forged: _("an unknown bearer token (answered 401)"),
    }
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        before = _files_under(Path(ns.workdir), folder)
        served_here = served(
            ns, db, renewed_tokens={renewed: "alice"}, log_everything=True, store_fault=True
        )
        with served_here as app:
            # Every body, taken or not, holds a password in a note: the store takes it
            # (no field is named like a credential), and only the body as it came shows it.
            month = {"month": "2027-09", "note": f"ERP login: password={in_note}"}
            replies = [
                app.post(
                    {**month, "erp": {"user": "reports", "password": password}},
                    key="logs-1",
                    raw=True,
                ),
                app.post({**month, "api_key": api_key}, raw=True),
                app.post(month, key="logs-2", raw=True),
                app.post({**month, "n": 2}, renewed, key="logs-3", raw=True),
                app.post(month, forged, raw=True),
                # Every other branch a handler has, each a place to log who asked: a
                # retry, a reused key with another body, another owner's job and a
                # missing one (404), the job database down (5xx).
                app.post(month, key="logs-2", raw=True),
                app.post({**month, "n": 3}, key="logs-2", raw=True),
                app.status(add_job(db, "bob", month, "check:logs-bob"), raw=True),
                app.status(10_000, renewed, raw=True),
            ]
            for reply in replies[2:4]:
                if reply.status_code in (200, 201, 202) and reply.headers.get("Location"):
                    replies.append(app.status(reply.headers["Location"], renewed, raw=True))
                    replies.append(app.status(reply.headers["Location"], raw=True))
            replies.append(app.status(1, forged, raw=True))
            with app.store_down():
                replies.append(app.post({**month, "n": 4}, key="logs-4", raw=True))
                replies.append(app.status(1, renewed, raw=True))
            if any(r.status_code >= 500 for r in replies):
                app.settle()
            output = app.output()
        # What the app keeps of its own: a file it wrote (in its folder or the
        # database's), a table beside the jobs, a Location it answered with.
        kept = _kept_by_the_app(Path(ns.workdir), folder, before, db, replies)
    found = [(secret, what) for secret, what in secrets.items() if secret in output]
    expect(
        not found,
        _(
            "nothing the caller sent in confidence in what the server wrote (stdout, "
            "stderr, logging at any level, tracebacks): no password or key of a body it "
            "refused, no bearer token"
        ),
        _("{what}, {secret!r}, in the line: {line}").format(
            what=found[0][1], secret=found[0][0], line=_line_with(output, found[0][0])
        )
        if found
        else "",
        _(
            "log what you decided, not what came in: the owner caller_of() returned, the "
            "Idempotency-Key, the job id, the status. Never log, print or put in an "
            "exception's message the body or the Authorization header as they came: a "
            "refused body is refused for the secret it holds, and whoever reads the logs "
            "(and every copy of them, kept for months) could log in with it or call as "
            "alice. To log a request, log labkit.redact.redact(str(body))"
        ),
    )
    # The password written in a note of a body the store takes is in the jobs table by
    # the contract: only a file of the app's own or a Location may not hold it.
    at_rest = [
        (secret, what, where)
        for secret, what in secrets.items()
        for where, text, all_secrets in kept
        if secret in text and (all_secrets or secret != in_note)
    ]
    expect(
        not at_rest,
        _(
            "nothing the caller sent in confidence kept by the app at rest or handed out: "
            "no password or key of a refused body and no bearer token in a file the app "
            "writes, in a table of its own in the job database, or in a Location it "
            "answers with; no password of a body it takes in a file of its own"
        ),
        _("{what}, {secret!r}, in {where}").format(
            what=at_rest[0][1], secret=at_rest[0][0], where=at_rest[0][2]
        )
        if at_rest
        else "",
        _(
            "keep no copy of a request as it came: an audit file or table of raw bodies "
            "holds the very password a refused body was refused for, and whoever reads it "
            "(or a backup of it) can log in with it. Keep what you decided (owner, key, job "
            "id, status), or labkit.redact.redact(str(body)). And never put the bearer "
            "token in a URL (a Location with ?access_token=...): URLs are written to "
            "every proxy's and browser's history; the caller polls with its header"
        ),
    )


#: Folders of the student's where the app's own files are not: tools and caches.
_NOT_THE_APPS = {".git", ".venv", "venv", "__pycache__", ".ipynb_checkpoints", "node_modules"}
#: Files of the check's own scratch folder: the database (read as tables) and the
#: server's output (read as output).
_THE_CHECKS = ("jobs.db", "server-", "records-")


def _files_under(root: Path, scratch_folder: Path) -> dict[Path, tuple[int, int]]:
    """The files the app could write to, two levels under ``root`` (the student's
    folder) and in ``scratch_folder`` (the database's), with their mtime and size; not
    the check's own files, nor another check's scratch folder."""
    found: dict[Path, tuple[int, int]] = {}
    for top, dirs, files in os.walk(root):
        here = Path(top)
        depth = len(here.relative_to(root).parts)
        dirs[:] = [
            d
            for d in dirs
            if d not in _NOT_THE_APPS
            and depth < 2
            and (not d.startswith(".ex10-check-") or here / d == scratch_folder)
        ]
        for name in files:
            if here == scratch_folder and name.startswith(_THE_CHECKS):
                continue
            path = here / name
            try:
                stat = path.stat()
            except OSError:
                continue
            found[path] = (stat.st_mtime_ns, stat.st_size)
            if len(found) >= 2000:
                return found
    return found


def _kept_by_the_app(
    root: Path,
    scratch_folder: Path,
    before: dict[Path, tuple[int, int]],
    db: Path,
    replies: list[Any],
) -> list[tuple[str, str, bool]]:
    """``(where, text, every secret counts)`` for each file the app wrote or changed
    under ``root`` since ``before``, each row of every table of ``db`` (the jobs table
    holds the bodies the store took by the contract: there only what was never to be
    stored counts) and each Location the app answered with."""
    kept: list[tuple[str, str, bool]] = []
    for path, seen in _files_under(root, scratch_folder).items():
        if before.get(path) == seen or seen[1] > 4_000_000:
            continue
        try:
            text = path.read_bytes()[:4_000_000].decode("utf-8", errors="replace")
        except OSError:
            continue
        kept.append((_("the file {name} the app wrote").format(name=path.name), text, True))
    kept += [
        (_("a row of the table {table} in the job database").format(table=table), text, False)
        for table, text in texts_in(db)
    ]
    kept += [
        (
            _("the Location {location} it answered").format(location=r.headers["Location"]),
            r.headers["Location"],
            True,
        )
        for r in replies
        if r.headers.get("Location")
    ]
    return kept


def _line_with(text: str, part: str) -> str:
    """The line of ``text`` where ``part`` first occurs, cut to about 200 characters."""
    at = text.find(part)
    start = max(text.rfind("\n", 0, at) + 1, at - 120)
    end = text.find("\n", at)
    return text[start : end if end >= 0 else len(text)][:200]


@CHECKS.add(
    1,
    "a request without a valid bearer token gets 401 on both routes",
    timeout=TIMEOUT,
    severe=True,
)
def no_token_is_401(ns: Namespace) -> None:
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db) as app:
            job_id = add_job(db, "alice", {"month": "2026-11"}, "check:401")
            there, missing = app.status(job_id, token=None), app.status(job_id + 1000, token=None)
            codes = (
                app.post({"month": "2026-11"}, token=None).status_code,
                app.post({"month": "2026-11"}, token="stolen").status_code,
                there.status_code,
                missing.status_code,
            )
            expect(
                codes == (401, 401, 401, 401),
                "401 for a POST without a token, with an unknown token, and for a GET "
                "without a token of a job that exists and of one that does not",
                codes,
                "call caller_of(authorization) first in each handler, before reading the "
                "job: an anonymous caller must not learn which ids exist",
            )
            expect(
                there.text == missing.text,
                "the same 401 body for an id that exists and one that does not",
                _("{existing} vs {missing}").format(
                    existing=repr(there.text[:80]), missing=repr(missing.text[:80])
                ),
            )
            # A token that names nobody is no better than none: a handler that only
            # checks that the header is there, and asks who it names after reading the
            # job, answers 401 for an id that exists and 404 for one that does not.
            there, missing = (
                app.status(job_id, token="stolen"),
                app.status(job_id + 1000, token="stolen"),
            )
            expect(
                (there.status_code, missing.status_code) == (401, 401)
                and there.text == missing.text,
                _(
                    "401 with the same body for a GET with an unknown token, of a job that "
                    "exists and of one that does not"
                ),
                _("{existing} vs {missing}").format(
                    existing=f"{there.status_code} {there.text[:80]!r}",
                    missing=f"{missing.status_code} {missing.text[:80]!r}",
                ),
                _(
                    "call caller_of(authorization) first, before reading the job: it refuses "
                    "a token that names nobody as it refuses a missing one, and a caller with "
                    "a made-up token must not learn which ids exist"
                ),
            )


@CHECKS.add(
    1,
    "requests without an Idempotency-Key are each a job of their own: no key means no "
    "dedup, never one shared key",
    timeout=TIMEOUT,
    severe=True,
)
def requests_without_a_key_are_never_merged(ns: Namespace) -> None:
    bodies = ({"month": "2026-01"}, {"month": "2026-02"}, {"month": "2026-01"})
    with scratch(ns) as folder:
        _more_than_a_listing_holds(folder / "jobs.db")
        _keyless_are_jobs_of_their_own(ns, folder / "jobs.db", bodies)


#: Jobs of bob's already in the store when the requests without a key come: more than
#: ``store.jobs()`` lists (1000), so a key made up from that list's length is one key.
KEYLESS_AMONG = 1001


def _more_than_a_listing_holds(db: Path) -> None:
    """Fill the store at ``db`` with ``KEYLESS_AMONG`` jobs of bob's."""
    from labkit.store import JobStore

    with JobStore(db) as store:
        store.enqueue_many(
            "report",
            [{"owner": "bob", "request": {"n": n}} for n in range(KEYLESS_AMONG)],
            keys=[f"check:keyless:{n}" for n in range(KEYLESS_AMONG)],
        )


def _keyless_are_jobs_of_their_own(ns: Namespace, db: Path, bodies: tuple[Any, ...]) -> None:
    """POST ``bodies`` without a key to a server over ``db``: a job of its own for each.

    The server's clocks are stopped (a coarse clock, for requests that follow each other
    fast): a key made of the time is one key for every request."""
    folder = db.parent
    hint = _(
        "pass key=None to store.enqueue when the request has no Idempotency-Key (a key "
        "made from the body merges two requests that happen to be alike, one made from "
        "the number of jobs store.jobs() lists, which stops at 1000, from id(body), "
        "which Python hands out again, or from the time (time.time(), time_ns()), "
        "which a coarse clock reads the same for requests that follow each other "
        "fast, merges any two)"
    )
    with served(ns, db, stopped_clock=True) as app:
        ids = [
            accepted_id(
                app.post(body), _("the request {body} without a key").format(body=body), hint
            )
            for body in bodies
        ]
        stored = [len(jobs_for(folder / "jobs.db", "alice", body)) for body in bodies[:2]]
        expect(
            len(set(ids)) == 3 and stored == [2, 1],
            "three jobs for three requests without a key, two of them with the same body",
            _("job ids {ids}, jobs stored per request {stored}").format(ids=ids, stored=stored),
            hint,
        )


@CHECKS.add(
    1,
    "identical requests with one Idempotency-Key sent at the same moment (a client that "
    "timed out and sent again) get one job between them",
    timeout=TIMEOUT,
    severe=True,
)
def requests_sent_together_get_one_job(ns: Namespace) -> None:
    body = {"month": "2026-12"}
    # Every enqueue waits half a second first: the six requests are all in the app at once,
    # and three of bob's with the same body and key among them (his own request).
    with scratch(ns) as folder, served(ns, folder / "jobs.db", slow_enqueue_s=0.5) as app:
        sent = [(body, "together-1", ALICE)] * 6 + [(body, "together-1", BOB)] * 3
        replies = posted_together(app, sent)
        # A 409 "still in progress" for a copy whose first request is in flight creates
        # nothing and loses nothing (the client retries): that is
        # copies_sent_while_the_first_runs_get_its_job's to catch, not this check's.
        answered = {
            who: [r for r in replies[part] if r.status_code != 409] or replies[part]
            for who, part in (("alice", slice(0, 6)), ("bob", slice(6, None)))
        }
        _each_answered_with_its_senders_job(folder / "jobs.db", answered)
        ids = [retried_id(r, _("each of six requests sent together")) for r in answered["alice"]]
        stored = [j["id"] for j in jobs_for(folder / "jobs.db", "alice", body)]
        expect(
            len(set(ids)) == 1 and stored == ids[:1],
            "one job, and every request answered with it",
            _("job ids answered {ids}, jobs stored {stored}").format(ids=ids, stored=stored),
            "let store.enqueue(..., key=...) decide: it inserts the key or finds it in one "
            "step, where a lookup first and a write after lets two requests both miss",
        )


def _each_answered_with_its_senders_job(db: Path, answered: dict[str, list[Any]]) -> None:
    """Fail unless every reply of ``answered`` (caller -> replies) names a job of that
    caller's."""
    owners = {
        j["id"]: j["payload"].get("owner") if isinstance(j["payload"], dict) else None
        for j in jobs_in(db)
    }
    ids = {
        who: [
            retried_id(r, _("each of {who}'s requests sent together").format(who=who))
            for r in replies
        ]
        for who, replies in answered.items()
    }
    wrong = {
        who: [(i, owners.get(i)) for i in got if owners.get(i) != who] for who, got in ids.items()
    }
    expect(
        not any(wrong.values()),
        _(
            "alice's and bob's copies of one request with one Idempotency-Key, sent at the "
            "same moment, each answered with a job of its sender's"
        ),
        _("job ids answered {ids}; (job, owner) of those not the sender's: {wrong}").format(
            ids=ids, wrong={who: w for who, w in wrong.items() if w}
        ),
        _(
            "read the caller from each request's own Authorization header "
            "(caller_of(authorization) in the handler, kept in a local variable): a module-level "
            "variable or app.state set by a middleware or dependency is shared by every "
            "request in flight, so one caller's request is filed as another's, and shown to them"
        ),
    )


@CHECKS.add(
    1,
    "a copy of a request sent while the first is still being accepted, or once its job has "
    "run, gets the same job (202), not a 409: the contract answers every retry with the "
    "key's job",
    timeout=TIMEOUT,
)
def copies_sent_while_the_first_runs_get_its_job(ns: Namespace) -> None:
    from labkit.store import JobStore

    body = {"month": "2026-12", "copies": 3}
    with scratch(ns) as folder, served(ns, folder / "jobs.db", slow_enqueue_s=0.5) as app:
        db = folder / "jobs.db"
        replies = posted_together(app, [(body, "in-flight-1")] * 3)
        refused = [r for r in replies if r.status_code == 409]
        expect(
            not refused,
            _(
                "each of three identical requests sent together with one Idempotency-Key "
                "answered 202 with the one job, though the first was still being accepted"
            ),
            _("{count} answered {reply}").format(
                count=len(refused), reply=f"409 {refused[0].text[:120]}" if refused else ""
            ),
            _(
                "a retry gets the key's job, even while the first request is still inside "
                "the handler: call store.enqueue(..., key=...) for every copy; it waits for "
                "the first and returns its job (no set of keys in progress, no 409)"
            ),
        )
        ids = {retried_id(r, _("each of three requests sent together")) for r in replies}
        expect(
            len(ids) == 1,
            _("one job for the three requests"),
            _("job ids {ids}").format(ids=sorted(ids)),
        )
        # A retry whose first reply was lost comes back after a worker ran the job: the
        # answer is still the key's job, not a 409 that says "already processed".
        [job_id] = ids
        with JobStore(db) as store:
            claimed = store.claim("check-worker")
            if claimed is not None and claimed.id == job_id:
                store.complete(claimed, {"pages": 1})
        late = app.post(body, key="in-flight-1")
        answered = late.status_code in (200, 202)  # 200: every_202_says_where_and_when_to_poll's
        expect(
            answered and retried_id(late, _("the late retry")) == job_id,
            _(
                "202 with job {job_id} for a copy of the request sent after the job ran "
                "(its first reply lost)"
            ).format(job_id=job_id),
            f"{late.status_code} {late.text[:120]}",
            _(
                "a finished job is still the key's job: answer its retries with it (202), "
                "whatever its state; a client whose reply was lost asks again"
            ),
        )


def _cut(key: str) -> str:
    return key if len(key) <= 24 else f"{key[:12]}...{key[-8:]} ({len(key)} chars)"


def _one_job_per_key(
    app: App, keys: list[str], body: dict[str, str], longest: int = 255
) -> dict[str, int]:
    """Each key posted twice with ``body``: its job id, or a failure naming merged keys.

    A key with a non-ASCII letter (HTTP meant header values to be ASCII) or longer than
    ``longest`` characters (255: Stripe's limit) may be refused outright with 400 or 422;
    it is left out then. Any other key must be accepted.
    """
    first: dict[str, int] = {}
    for key in keys:
        reply = app.post(body, key=key)
        if (not key.isascii() or len(key) > longest) and reply.status_code in (400, 422):
            continue
        first[key] = accepted_id(reply, _("the request with key {key}").format(key=_cut(key)))
    again = {
        k: retried_id(app.post(body, key=k), _("the retry with key {key}").format(key=_cut(k)))
        for k in first
    }
    keys_of: defaultdict[int, list[str]] = defaultdict(list)
    for key, job_id in first.items():
        keys_of[job_id].append(_cut(key))
    merged = [ks for ks in keys_of.values() if len(ks) > 1]
    expect(
        not merged and again == first,
        _("{count} jobs, one per key, and each retry answered with its key's job").format(
            count=len(first)
        ),
        _("keys that got one job between them: {merged}").format(merged=merged)
        if merged
        else _("retries answered with {again}, first requests with {first}").format(
            again=list(again.values()), first=list(first.values())
        ),
        "use the Idempotency-Key exactly as it came (scoped to the caller): no lower(), no "
        "cutting it short (not its start, its middle or its end), no characters taken out or "
        "replaced (quotes, a slash, a letter not ASCII turned into '?'), no number read out "
        "of it ('077' is not '77'); two keys that differ are two requests",
    )
    return first


@CHECKS.add(
    1,
    "keys are compared exactly as sent: keys that differ only in case, in punctuation, in "
    "a non-ASCII letter or in their last character after dozens or hundreds are different "
    "requests (or, over 64 characters or not ASCII, refused with a clear 400)",
    timeout=TIMEOUT,
    severe=True,
)
def keys_are_compared_exactly(ns: Namespace) -> None:
    rng = random.Random(f"ex10 keys {scene_seeds()[-1]}")
    stem = "".join(rng.choices(string.ascii_lowercase + string.digits, k=292))
    keys = ["Order-77", "order-77", "order.77", "order77", "plan-ç", "plan-"]
    # Two more non-ASCII letters: 'plan-é' is not 'plan-ç' (each letter turned into '?',
    # encode('ascii', 'replace'), makes both 'plan-??'), nor is 'plan-c' (accents folded
    # away, NFKD then ASCII).
    keys += ["plan-é", "plan-c"]
    # Quotes and a semicolon taken out "for SQL safety": 'order'77' is not 'order77'.
    keys += ["order'77", 'order"77', "order;77"]
    # Quotes around the whole key, taken off as if they quoted it: '"order77"' is not
    # 'order77' (HTTP strips the spaces around a header value, never its quotes).
    keys += ['"order77"', "'order77'"]
    # A space, a '%' escape, an underscore: 'order 77' is not 'order77', 'order%2E77'
    # (percent-decoded) not 'order.77', and 'order_77' not 'order-77'.
    keys += ["order 77", "order%2E77", "order_77"]
    # A colon (the app's own separator, taken out or replaced), two spaces (whitespace
    # collapsed) and a comma (only the part before it kept, as if a proxy had joined two
    # headers): each is a key of its own.
    keys += ["order:77", "order  77", "order-77,retry"]
    # A slash (taken out, as from a path) and a number with a leading zero (read as the
    # number it spells): 'order/77' is not 'order77', nor is '077' the key '77'.
    keys += ["order/77", "077", "77"]
    # 60 characters, which every app must take, then 200 and 300. A long key refused with
    # a clear 400 loses and duplicates nothing: odd_keys_are_data holds an app to taking
    # 200 characters, this check only to never merging two keys.
    keys += [f"batch-{stem[:52]}-a", f"batch-{stem[:52]}-b"]
    keys += [f"batch-{stem[:192]}-a", f"batch-{stem[:192]}-b", f"batch-{stem}-a", f"batch-{stem}-b"]
    # About 200 characters that differ only in their first character, then only in the
    # middle: a long key cut to its end (key[-64:]), or to its start and end, merges them.
    keys += [f"a-batch-{stem[:190]}", f"b-batch-{stem[:190]}"]
    keys += [f"batch-{stem[:96]}-{end}-{stem[96:192]}" for end in "ab"]
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        ids = _one_job_per_key(app, keys, {"month": "2027-01"}, longest=64)
        stored = jobs_for(folder / "jobs.db", "alice", {"month": "2027-01"})
        expect(len(stored) == len(ids), "one job per key in the database", len(stored))
    # Apart here, yet a job key that is a digest cut short (8 hex digits, as git shows a
    # commit) gives two keys in about a hundred thousand one job: what tells the keys apart
    # must be the key itself or a digest of 64 bits or more.
    kept = {job["id"]: str(job.get("key")) for job in stored}
    short = _cut_short({key: kept.get(job_id, "") for key, job_id in ids.items()})
    expect(
        not short,
        _(
            "each job key to hold the Idempotency-Key as sent, or a digest of it of 64 bits "
            "or more (16 hex digits)"
        ),
        _("the key {key} kept as {kept}").format(
            key=repr(_cut(short[0])), kept=repr(_cut(kept.get(ids[short[0]], "")))
        )
        if short
        else "",
        _(
            "keep the whole Idempotency-Key in the job key, scoped to its owner, or a whole "
            "sha256 of owner and key: a digest cut to 8 hex digits gives two keys in about a "
            "hundred thousand one job, and the second request is answered with the first's "
            "job and never runs"
        ),
    )


def _cut_short(kept: dict[str, str]) -> list[str]:
    """The keys of ``kept`` (a client's key -> the job key stored for it) whose job key
    neither holds the key as sent nor, once the part every job key shares is taken off
    (a prefix such as 'report:alice:'), 64 bits: fewer than 16 hex digits, 11 base64
    characters or 8 others. A key shorter than that must only not lose any of its own."""
    texts = list(kept.values())
    if len(texts) < 2:
        return []
    head = len(os.path.commonprefix(texts))
    tail = len(os.path.commonprefix([t[head:][::-1] for t in texts]))
    short = []
    for key, text in kept.items():
        part = text[head : len(text) - tail]
        if set(part) <= set(string.hexdigits):
            bits = 4 * len(part)
        elif set(part) <= set(string.ascii_letters + string.digits + "+/-_="):
            bits = 6 * len(part)
        else:
            bits = 8 * len(part)
        if key not in text and bits < min(64, 8 * len(key.encode())):
            short.append(key)
    return short


@CHECKS.add(
    1,
    "keys holding quotes, SQL, % or _, or 200 characters long, are data: each gets a job "
    "of its own, and its retry the same job (a key with a non-ASCII letter: that, or a "
    "clear 400); a key reused with another body is refused with a message naming it "
    "whole; an empty request {} is a request too",
    timeout=TIMEOUT,
)
def odd_keys_are_data(ns: Namespace) -> None:
    keys = ["o'brien-7", 'say "hi"', "x'); DROP TABLE jobs; --", "50%_off", "clé-1"]
    # Long, but under Stripe's 255: a client's key of 200 characters must be taken.
    keys += ["odd-" + "x" * 196]
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        ids = _one_job_per_key(app, keys, {"month": "2027-02"})
        theirs = accepted_id(app.post({"month": "2027-02"}, BOB, key=keys[2]), _("bob's request"))
        expect(
            len(jobs_in(folder / "jobs.db")) == len(ids) + 1 and theirs not in ids.values(),
            _("{count} jobs in the database: alice's {mine} and bob's own").format(
                count=len(ids) + 1, mine=len(ids)
            ),
            [j["id"] for j in jobs_in(folder / "jobs.db")],
            "pass the key to store.enqueue as a value; never paste it into SQL",
        )
        _conflict_names_the_key(app)
        _an_empty_request_is_taken(app)


def _an_empty_request_is_taken(app: App) -> None:
    """``{}`` is a JSON object: a report with every parameter left to its default. A
    refusal of it (a 4xx) tells the client to drop a request the contract takes."""
    accepted_id(
        app.post({}, key="empty-1"),
        _("the empty request {} (a report with every default)"),
        _(
            "take any JSON object without a credential, {} too: the contract refuses only "
            "credentials and a key reused with another body; the report's parameters are "
            "the worker's to judge, so do not refuse an empty or short request"
        ),
    )


def _conflict_names_the_key(app: App) -> None:
    """A key as clients make them (a UUID, 36 characters), reused with another body: the
    refusal names it whole, as the client sent it, so the client can tell which request
    of theirs it was."""
    rng = random.Random(f"ex10 uuid {scene_seeds()[-1]}")
    key = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    accepted_id(app.post({"month": "2027-02", "n": 1}, key=key), _("the first request"))
    other = app.post({"month": "2027-02", "n": 2}, key=key)
    expect(
        other.status_code in (409, 422) and key in other.text,
        _("409 or 422 for the key {key} reused with another body, naming the key whole").format(
            key=key
        ),
        f"{other.status_code} {other.text[:160]}",
        _(
            "name the Idempotency-Key as it came in the message (f'Idempotency-Key "
            "{idempotency_key!r} ...'), not cut short: a client sends many requests, each "
            "with a key of its own, and must tell which one was refused"
        ),
    )


@CHECKS.add(
    1,
    "a retry's 202 says where and when to poll as the first one did: the same Location, "
    "and a Retry-After in seconds (1 to 300, not milliseconds)",
    timeout=TIMEOUT,
)
def every_202_says_where_and_when_to_poll(ns: Namespace) -> None:
    body = {"month": "2027-03"}
    # On a server west of UTC: a job due "in Retry-After seconds" computed from a naive
    # UTC datetime (datetime.utcnow().timestamp()) is due hours later there.
    with scratch(ns) as folder, served(ns, folder / "jobs.db", tz=WEST_OF_UTC) as app:
        first, again = app.post(body, key="poll-1"), app.post(body, key="poll-1")
        for what, reply in ((_("the first request"), first), (_("the retry"), again)):
            job_id = accepted_id(
                reply,
                what,
                None
                if reply is first
                else _(
                    "answer a retry as the first request: 202 with its job_id, Location and "
                    "Retry-After (the caller keeps polling), not 200"
                ),
                statuses=(202,),
            )
            location, wait = reply.headers.get("Location"), reply.headers.get("Retry-After", "")
            _location_of_this_server(reply, what)
            polled = app.status(location) if location else None
            expect(
                polled is not None and _polled_job_id(polled) == job_id,
                _("{what}: a Location whose GET shows job {job_id}").format(
                    what=what, job_id=job_id
                ),
                location or _("no Location"),
                "answer a retry as the first request: 202, its job_id, Location, Retry-After",
            )
            expect(
                wait.isdigit() and 1 <= int(wait) <= 300,
                _("{what}: Retry-After a whole number of seconds, 1 to 300").format(what=what),
                wait or _("none"),
                "Retry-After counts seconds (2, not 2000)",
            )
        # The poll Retry-After asks for must find the job due: not hours later.
        _due_by_the_poll(folder / "jobs.db", first, "UTC-3")
        _a_finished_jobs_retry_is_a_202(app, folder / "jobs.db", body, "poll-1")
    # And on a server east of UTC, where a local wall-clock time labelled as UTC
    # (datetime.now().replace(tzinfo=timezone.utc)) lands hours late instead. Its next
    # request comes an hour after the first: a time read once, at import or at the first
    # request (a default argument, now=time.time()), is an hour old then.
    with (
        scratch(ns) as folder,
        served(ns, folder / "jobs.db", tz=EAST_OF_UTC, clock_jump_s=NEXT_REQUEST_S) as app,
    ):
        for key in ("poll-2", "poll-3"):
            reply = app.post(body, key=key)
            accepted_id(reply, _("the request with key {key}").format(key=key), statuses=(202,))
            _due_by_the_poll(folder / "jobs.db", reply, "UTC+3")


#: How long after its first request the server of every_202_says_where_and_when_to_poll's
#: second scene gets the next (its wall clocks jump that much once the first is answered).
NEXT_REQUEST_S = 3600.0


def _a_finished_jobs_retry_is_a_202(app: App, db: Path, body: Any, key: str) -> None:
    """A worker runs the key's job (it succeeds; another key's job fails for good); a retry
    whose first reply was lost comes back while it runs and after it ended: 202 with the
    same job, its Location and a Retry-After, as before it ran."""
    from labkit.errors import PermanentError
    from labkit.store import JobStore

    job_id = accepted_id(app.post(body, key=key), _("the retry"))
    with JobStore(db) as store:
        claimed = store.claim("check-worker")
        if claimed is None or claimed.id != job_id:
            return  # the job is not one a worker takes: a_report_worker_claims_the_job's
        late = [(_("while a worker runs its job"), job_id, app.post(body, key=key))]
        store.complete(claimed, {"pages": 2})
    late.append((_("once its job has succeeded"), job_id, app.post(body, key=key)))
    # The same for a job that failed for good: still its key's job.
    other = {**body, "fails": True}
    dead_id = accepted_id(app.post(other, key=f"{key}-dead"), _("the first request"))
    with JobStore(db) as store:
        claimed = store.claim("check-worker")
        if claimed is not None and claimed.id == dead_id:
            store.fail(claimed, PermanentError("ERP 400: no such month"))
            again = app.post(other, key=f"{key}-dead")
            late.append((_("once its job has failed for good (dead)"), dead_id, again))
    for when, wanted, reply in late:
        try:
            answered = reply.json().get("job_id") if reply.status_code == 202 else None
        except (ValueError, AttributeError):
            answered = None
        expect(
            answered == wanted
            and reply.headers.get("Location") is not None
            and reply.headers.get("Retry-After", "").isdigit(),
            _("a retry {when}: 202 with job {job_id}, its Location and a Retry-After").format(
                when=when, job_id=wanted
            ),
            f"{reply.status_code} {reply.text[:120]}",
            _(
                "answer every retry as the first request, whatever the job's state: 202, "
                "the key's job_id, Location, Retry-After. The caller learns how the job "
                "ended by polling the Location; another code to a POST reads as a reply of "
                "another kind, and another job_id as another request"
            ),
        )


def _location_of_this_server(reply: Any, what: str) -> None:
    """Fail unless the 202's Location is a path, or an absolute URL of the server the
    request reached (its scheme, host and port, as the request named them)."""
    import httpx

    location = reply.headers.get("Location")
    if not location:
        return  # the caller of this function judges a missing Location
    try:
        url = httpx.URL(location)
    except (httpx.InvalidURL, ValueError):
        url = None
    asked = reply.request.url
    here = url is not None and (
        not url.is_absolute_url
        or (url.scheme, url.host, url.port) == (asked.scheme, asked.host, asked.port)
    )
    expect(
        here,
        _(
            "{what}: a Location on the server that answered ({origin}), or a path ('/reports/<id>')"
        ).format(what=what, origin=f"{asked.scheme}://{asked.netloc.decode()}"),
        location,
        _(
            "answer Location: /reports/<id> (a path: the client resolves it against the URL "
            "it called), or build it from the request (request.url_for): a host and port "
            "written in the code (http://localhost:8000) send every client behind a proxy, "
            "or to another port, to a server that is not there"
        ),
    )


def _polled_job_id(polled: Any) -> Any:
    """The job_id a status answer shows, or None for an answer that is not a 200 object."""
    try:
        view = polled.json() if polled.status_code == 200 else None
    except ValueError:
        return None
    return view.get("job_id") if isinstance(view, dict) else None


def _due_by_the_poll(db: Path, reply: Any, zone: str) -> None:
    """Fail unless the job ``reply`` accepted is due by the time its Retry-After says to
    poll, on a server whose time zone is ``zone``."""
    wait = reply.headers.get("Retry-After", "")
    wait_s = int(wait) if wait.isdigit() else 0
    job_id = accepted_id(reply, _("the first request"))
    rows = [j for j in jobs_in(db) if j["id"] == job_id]
    expect(
        len(rows) == 1,
        _("job {job_id}, named by the 202, in the database when the 202 arrives").format(
            job_id=job_id
        ),
        _("no such job in the database"),
        _(
            "answer 202 only once store.enqueue has returned: it commits the job, so the "
            "id you answer with is there for the caller's first poll"
        ),
    )
    row = rows[0]
    late = row["run_after"] - row["created_at"]
    expect(
        late >= -1,
        _(
            "the job due when it was made, not earlier, on a server whose time zone is "
            "{zone}: the store runs jobs in the order of their due time"
        ).format(zone=zone),
        _("it is due {early:.0f} s before it was made").format(early=-late),
        _(
            "enqueue without run_after (the job is due at once); a due time in the past "
            "(run_after=0, time.monotonic(), time.time() - 3600, or a time read once when "
            "the module was imported, such as a default argument now=time.time()) puts "
            "every report ahead of the jobs already waiting, whose turn then never comes "
            "while requests keep arriving"
        ),
    )
    expect(
        late <= wait_s + 1,
        _(
            "the job due by the time Retry-After says to poll ({seconds} s after it was "
            "made), on a server whose time zone is {zone}"
        ).format(seconds=wait_s, zone=zone),
        _("it is due {late:.0f} s after it was made").format(late=late),
        _(
            "enqueue without run_after (the job is due at once); a time you compute "
            "yourself comes from time.time(): datetime.utcnow().timestamp() reads UTC "
            "as the server's local time, and datetime.now() labelled as UTC is the local "
            "wall clock: either lands hours off"
        ),
    )


@CHECKS.add(
    1,
    "the accepted job is one a report worker runs: kind 'report', on the default queue, "
    "due within a day, and retried after a transient failure",
    timeout=TIMEOUT,
    severe=True,
)
def a_report_worker_claims_the_job(ns: Namespace) -> None:
    from labkit.clock import FakeClock
    from labkit.errors import TransientError
    from labkit.store import JobStore

    # Fields named like the job's own settings are the caller's data: a job whose kind,
    # queue, attempts or due time the body chooses is one no report worker runs.
    body = {"month": "2027-04", **STEERING}
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        # On a server east of UTC (every_202_says_where_and_when_to_poll's is west): a due
        # time made from the local wall clock labelled as UTC is hours later there.
        with served(ns, db, tz=EAST_OF_UTC) as app:
            job_id = accepted_id(app.post(body, key="work-1"), _("the report request"))
        found: list[dict[str, Any] | None] = [j for j in jobs_in(db) if j["id"] == job_id]
        [row] = found or [None]
        expect(row is not None, _("job {job_id} in the database").format(job_id=job_id), None)
        assert row is not None  # for the type checker: expect() failed otherwise
        # The worker's clock: a day after the job was made, as the job's row says. A job
        # due hours late (a time zone mistake) still runs: that is
        # every_202_says_where_and_when_to_poll's to catch; one due days late never does.
        with JobStore(db, clock=FakeClock(row["created_at"] + DAY_S)) as store:
            claimed = store.claim("report-worker")
            expect(
                claimed is not None and (claimed.id, claimed.kind) == (job_id, "report"),
                _("a worker of the 'default' queue to claim job {job_id}, of kind 'report'").format(
                    job_id=job_id
                ),
                {k: row[k] for k in ("id", "kind", "queue", "run_after", "created_at")},
                _(
                    "the job is due {late:.0f} s after it was made: no worker runs it for more "
                    "than a day. Enqueue without run_after; a time you compute yourself is "
                    "time.time() plus seconds (not milliseconds)"
                ).format(late=row["run_after"] - row["created_at"])
                if row["run_after"] - row["created_at"] > DAY_S
                else _(
                    "store.enqueue('report', {{'owner': owner, 'request': body}}, key=key): "
                    "kind 'report', no queue, no run_after, whatever the body says (its fields "
                    "{fields} are the caller's data, not the job's settings)"
                ).format(fields=sorted(STEERING)),
            )
            assert claimed is not None
            # Its first attempt meets the ERP down for a while: the job must come back.
            after = store.fail(claimed, TransientError("ERP 503 Service Unavailable"))
        expect(
            after.state == "retry_wait",
            _(
                "job {job_id} to wait for a retry after its first attempt failed with a "
                "transient error (state retry_wait)"
            ).format(job_id=job_id),
            _("state {state} after 1 attempt of at most {limit}").format(
                state=after.state, limit=row.get("max_attempts")
            ),
            _(
                "leave max_attempts to the store (no max_attempts=1): a report whose first try "
                "meets a dependency down for a minute must run again, not end dead"
            ),
        )
        # Fewer attempts than the store gives a job (2, "reports are expensive") end it
        # dead in an outage the store's retries are there to ride out.
        given = inspect.signature(JobStore.enqueue).parameters["max_attempts"].default
        expect(
            int(row.get("max_attempts") or 0) >= given,
            _("job {job_id} to have at least the {count} attempts the store gives a job").format(
                job_id=job_id, count=given
            ),
            _("max_attempts {count}").format(count=row.get("max_attempts")),
            _(
                "leave max_attempts to the store, whatever the body says: a report with fewer "
                "attempts ends dead when a dependency is down for a few minutes, which the "
                "store's retries ride out"
            ),
        )


#: Fields of a_report_worker_claims_the_job's request named like the job's settings (a
#: kind, a queue, its attempts, a due time in 2100): data, which must steer nothing.
STEERING = {
    "kind": "summary",
    "queue": "urgent",
    "priority": "high",
    "max_attempts": 1,
    "retries": 0,
    "run_after": 4_102_444_800,
}


#: New requests the check sends among thousands of jobs, each Retry-After judged: a
#: jitter that says 0 once in five is seen with odds of about a thousand to one.
RETRY_AFTER_SAMPLES = 30


def _a_new_job_is_found(app: App, job_id: int, polled: int) -> None:
    """Alice's poll of her new job ``job_id`` (a poll of id ``polled`` came before it
    existed) finds it: a "no such job" is never kept for later."""
    got = app.status(job_id)
    expect(
        got.status_code == 200,
        _("200 for alice's new job {job_id}, whose id was polled before it existed").format(
            job_id=job_id
        ),
        f"{got.status_code} {got.text[:160]}" + ("" if job_id == polled else f" ({polled})"),
        _(
            "read the job with store.get on every poll and keep no answer of 'no such "
            "job': ids are handed out in order, so an id that is missing now is the next "
            "request's job"
        ),
    )


@CHECKS.add(
    1,
    "the status finds any job among more than a thousand (no list of jobs with a cap); "
    "a new request there is still answered with a Retry-After of 1 to 300 seconds",
    timeout=TIMEOUT,
)
def status_finds_a_job_among_thousands(ns: Namespace) -> None:
    from labkit.store import JobStore

    rng = random.Random(f"ex10 many {scene_seeds()[-1]}")
    count = 1000 + rng.randrange(100, 500)
    owners = ["bob" if i % 3 == 0 else "alice" for i in range(count)]
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with JobStore(db) as store:
            made = store.enqueue_many(
                "report",
                [{"owner": o, "request": {"n": i}} for i, o in enumerate(owners)],
                keys=[f"check:many:{i}" for i in range(count)],
            )
        alices = [
            job_id for (job_id, _new), owner in zip(made, owners, strict=True) if owner == "alice"
        ]
        wanted = [alices[0], rng.choice(alices[len(alices) // 2 :]), alices[-1]]
        with served(ns, db) as app:
            seen = {job_id: app.status(job_id) for job_id in wanted}
            expect(
                all(r.status_code == 200 and r.json().get("job_id") == i for i, r in seen.items()),
                _("200 and the job for each of alice's jobs {ids}, among {count}").format(
                    ids=wanted, count=count
                ),
                {i: r.status_code for i, r in seen.items()},
                "read the job with store.get(job_id); store.jobs() lists only the first 1000",
            )
            other = app.status(alices[-1], BOB).status_code
            expect(other == 404, "404 when bob asks for alice's last job", other)
            # A new request among them: its 202 names the job enqueue made for it.
            body = {"month": "2027-05", "among": count}
            # Bob polls the id the next job will get before it exists: that 404 is of the
            # moment, the id is alice's once her request makes the job.
            ahead = max(job_id for job_id, _new in made) + 1
            app.status(ahead, BOB)
            reply = app.post(body, key="many-new")
            job_id = accepted_id(reply, _("a new report request"))
            _a_new_job_is_found(app, job_id, ahead)
            holding = [j["id"] for j in jobs_for(db, "alice", body)]
            expect(
                holding == [job_id],
                _("the 202 for a new request among {count} jobs to name the job holding it").format(
                    count=count
                ),
                _("it named job {job_id}; the request is in job {holding}").format(
                    job_id=job_id, holding=holding
                ),
                _(
                    "answer with the job store.enqueue returned (job.id), never the newest or "
                    "last job of a list: store.jobs() stops at 1000, and another request may "
                    "come in between"
                ),
            )
            # Many more requests among them, each 202 with a Retry-After of 1 to 300 s: a
            # wait estimated from the queue's length grows past any poll a client makes,
            # and a jittered one drawn from 0 up says "poll now" once in a while. Sent
            # without a key, one after another, as a server's life sends them: a key made
            # up from id(body) meets the key of a body freed before (Python hands its
            # address out again), and the request is refused as a reused key.
            waits = [reply.headers.get("Retry-After", "")]
            for n in range(RETRY_AFTER_SAMPLES):
                more = app.post({"month": "2027-05", "among": count, "n": n})
                accepted_id(
                    more,
                    _("request {n} of {count} without an Idempotency-Key").format(
                        n=n + 1, count=RETRY_AFTER_SAMPLES
                    ),
                    _(
                        "pass key=None to store.enqueue when the request has no "
                        "Idempotency-Key: a key made up from id(body) is the address of "
                        "an object, which Python hands out again once it is freed, so a "
                        "later request meets an earlier one's key and is refused or merged"
                    ),
                )
                waits.append(more.headers.get("Retry-After", ""))
            wrong = [w for w in waits if not (w.isdigit() and 1 <= int(w) <= 300)]
            expect(
                not wrong,
                _(
                    "each of {count} new requests among {jobs} jobs answered with a "
                    "Retry-After of 1 to 300 seconds"
                ).format(count=len(waits), jobs=count),
                _("Retry-After {waits}").format(waits=sorted(set(wrong), key=str)[:5]),
                _(
                    "cap the Retry-After you compute to 1..300 seconds after any estimate "
                    "or random jitter (max(1, min(300, wait))): a wait grown with the queue "
                    "(thousands of seconds) leaves the client not polling for an hour, and "
                    "a jitter drawn from 0 tells it to poll at once, again and again"
                ),
            )


@CHECKS.add(
    1,
    "a reused Idempotency-Key with another body (one whose only change is a value's JSON "
    "type, false for 0, too) is never answered as accepted with the first job (200 or 202 "
    "and its id): that request is then dropped while its client "
    "believes it runs; nor stored while refused, nor once per copy sent; the refusal leaves "
    "the job database free for the workers, and another request's job, written meanwhile, "
    "as it was; and a key whose request was refused for a credential is free for the "
    "request sent without it",
    timeout=TIMEOUT,
    severe=True,
)
def a_conflict_is_never_answered_as_accepted(ns: Namespace) -> None:
    first_body, other_body = {"month": "2027-07"}, {"month": "2027-08"}
    hold = (HOLD_S, HELD)
    with scratch(ns) as folder, served(ns, folder / "jobs.db", hold_after_enqueue=hold) as app:
        _a_refused_key_is_free(app, folder / "jobs.db")
        accepted_id(app.post(first_body, key="k-12"), _("the first request"))
        other = app.post(other_body, key="k-12")
        # The client sends that request again, unchanged (its reply was lost).
        again = app.post(other_body, key="k-12")
        stored = jobs_for(folder / "jobs.db", "alice", other_body)
        _a_worker_claims_after_the_refusal(folder / "jobs.db")
        _a_refusal_leaves_another_job_alone(app, folder / "jobs.db")
        _a_lookalike_body_is_another_request(app, folder / "jobs.db")
    dropped = 200 <= other.status_code < 300 and not stored
    expect(
        not dropped,
        _(
            "the request {body} sent with key 'k-12', already used for {first}, refused "
            "(409 or 422) or stored, never answered as accepted and dropped"
        ).format(body=other_body, first=first_body),
        _("{status} {text}, and no job holds {body}").format(
            status=other.status_code, text=other.text[:120], body=other_body
        ),
        _(
            "catch IdempotencyConflict and answer 409 or 422 naming the key: a 2xx with the "
            "first job tells the client its new request is running, and it never will"
        ),
    )
    refused = [r.status_code for r in (other, again) if 400 <= r.status_code < 500]
    expect(
        len(stored) <= 1 and not (refused and stored),
        _(
            "the request {body} sent twice with key 'k-12', already used for {first}: "
            "refused both times with nothing stored, never run once per copy nor run "
            "while refused"
        ).format(body=other_body, first=first_body),
        _("answered {statuses}; jobs holding {body}: {job_ids}").format(
            statuses=[other.status_code, again.status_code],
            body=other_body,
            job_ids=[j["id"] for j in stored],
        ),
        _(
            "catch IdempotencyConflict and answer 409 or 422, storing nothing: a job made "
            "for the reused key's new body (without a key, or under a key of your own) "
            "runs once per copy the client sends, or runs while the client, told it was "
            "refused, sends it again under a new key"
        ),
    )


#: The mark of the request whose enqueue a_conflict_is_never_answered_as_accepted's server
#: holds for HOLD_S seconds once its job is written (``served(..., hold_after_enqueue=)``).
HELD, HOLD_S = "held-after-enqueue", 0.15


def _a_refusal_leaves_another_job_alone(app: App, db: Path) -> None:
    """A new request (key 'k-13') whose job is written, its answer not yet sent, and
    meanwhile the reused key 'k-12' sent with another body: refused, and the new job stays."""
    from concurrent.futures import ThreadPoolExecutor

    body = {"month": "2027-09", "note": HELD}
    with ThreadPoolExecutor(1) as pool:
        new = pool.submit(app.post, body, ALICE, "k-13")
        deadline = time.monotonic() + 5
        while not (app.fired("hold after enqueue") or new.done() or time.monotonic() > deadline):
            time.sleep(0.005)
        app.post({"month": "2027-10"}, key="k-12")
        reply = new.result()
    job_id = accepted_id(reply, _("the request with key 'k-13', sent before it"))
    stored = [j["id"] for j in jobs_for(db, "alice", body)]
    expect(
        stored == [job_id],
        _(
            "job {job_id}, answered 202 for the request with key 'k-13', in the database "
            "although the reused key 'k-12' was refused while that request was being "
            "answered"
        ).format(job_id=job_id),
        _("jobs holding that request: {job_ids}").format(job_ids=stored),
        _(
            "give each request a connection (and transaction) of its own: on a connection "
            "shared by every request (a module-level sqlite3.connect(..., "
            "check_same_thread=False) passed as store.enqueue(..., conn=...)), the rollback "
            "of a refused request undoes the job another request has just written and is "
            "about to answer 202 for. Or call store.enqueue without conn="
        ),
    )


#: A request, and the same key sent with another body that Python's == takes for the
#: first (0 == False), and JSON does not: the store fingerprints the JSON text.
LOOKALIKES: tuple[dict[str, Any], dict[str, Any]] = (
    {"month": "2027-11", "include_closed": 0},
    {"month": "2027-11", "include_closed": False},
)


def _a_lookalike_body_is_another_request(app: App, db: Path) -> None:
    """The reused key 'k-14' with a body that differs from the first only in a value's
    JSON type (false for 0): refused or stored, never answered with the first job."""
    first, other = LOOKALIKES
    accepted_id(app.post(first, key="k-14"), _("the first request with key 'k-14'"))
    reply = app.post(other, key="k-14")
    wanted = _as_json_text({"owner": "alice", "request": other})
    stored = [j["id"] for j in jobs_in(db) if _as_json_text(j["payload"]) == wanted]
    expect(
        not (200 <= reply.status_code < 300 and not stored),
        _(
            "the request {body} sent with key 'k-14', already used for {first}, refused "
            "(409 or 422) or stored: false is not 0 in JSON, it is another body"
        ).format(body=_as_json_text(other), first=_as_json_text(first)),
        _("{status} {text}, and no job holds {body}").format(
            status=reply.status_code, text=reply.text[:120], body=_as_json_text(other)
        ),
        _(
            "let store.enqueue judge a reused key: it compares the bodies as JSON text. A "
            "comparison of your own with == takes False for 0 and 1.0 or True for 1, and "
            "answers a new request with the first job, which never runs what it asked"
        ),
    )


def _a_worker_claims_after_the_refusal(db: Path) -> None:
    """Fail if a worker cannot claim from the database once the app refused a reused key:
    a transaction of the app's own left open on the refusal holds the write lock."""
    from labkit.errors import StoreBusy
    from labkit.store import JobStore

    try:
        with JobStore(db) as store:
            store.claim("check-worker")
    except StoreBusy as exc:
        locked: str | None = str(exc)
    else:
        locked = None
    expect(
        locked is None,
        _(
            "a worker to claim a job once the server refused the reused key 'k-12': the "
            "refusal leaves the job database as it found it"
        ),
        _("the database stayed locked: {error}").format(error=(locked or "")[:160]),
        _(
            "roll back what you began when store.enqueue raises: a transaction of your own "
            "(store.enqueue(..., conn=conn)) left open on a refusal keeps the write lock, and "
            "no worker claims a job until the next request commits it. Use `with conn:` "
            "(commit, or roll back on an error), or call store.enqueue without conn="
        ),
    )


def _a_refused_key_is_free(app: App, db: Path) -> None:
    """A request refused for a credential in its body (422, nothing stored), sent again
    without it and with the same Idempotency-Key: taken, as a job of its own."""
    refused = app.post({"month": "2027-06", "erp": {"password": "hunter2"}}, key="k-11")
    fixed = {"month": "2027-06", "erp": {"credential_id": "erp-readonly"}}
    if refused.status_code != 422:
        return  # credential_in_the_body_is_refused's to judge
    reply = app.post(fixed, key="k-11")
    hint = _(
        "let store.enqueue decide what a key already names: a request refused before it "
        "was stored (a credential in its body) leaves its key free, and a key or body "
        "you record before store.enqueue takes it turns the corrected request away for "
        "ever (a 4xx the client does not send again)"
    )
    job_id = accepted_id(
        reply,
        _(
            "the request sent again without its password, with the Idempotency-Key of the "
            "request refused for it"
        ),
        hint,
    )
    stored = [j["id"] for j in jobs_for(db, "alice", fixed)]
    expect(
        stored == [job_id],
        _("job {job_id} to hold the corrected request").format(job_id=job_id),
        _("jobs holding it: {job_ids}").format(job_ids=stored),
        hint,
    )


@CHECKS.add(
    1,
    "the refusal of a reused Idempotency-Key names the key, so the caller knows which "
    "request to send again with its first body or under a new key",
    # It serves the app as its neighbours do: their time, or a loaded machine takes the
    # point of a right app whose server was slow to start.
    timeout=TIMEOUT,
)
def a_conflict_names_the_key_it_refused(ns: Namespace) -> None:
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        accepted_id(app.post({"month": "2026-04"}, key="k-9"), _("the first request"))
        other = app.post({"month": "2026-05"}, key="k-9")
        if other.status_code not in (409, 422):
            return  # same_key_other_body_is_refused's to judge
        expect(
            "k-9" in other.text,
            _("the {status} for the key k-9, reused with another body, to name k-9").format(
                status=other.status_code
            ),
            other.text[:160],
            _(
                "put the Idempotency-Key in the refusal's message (the store's "
                "IdempotencyConflict names the job key that holds it)"
            ),
        )
