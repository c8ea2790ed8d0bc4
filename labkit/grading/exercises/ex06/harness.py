"""Harness for exercise 6: ``dead_letter`` and ``redrive`` on a database file the check made.

Each call opens its own connection, as an operator's console or a worker would.
Errors are built here from plain descriptions. The race functions run two redrives
at once, or a redrive while a worker takes the job, on connections that pause after a
read made outside a write transaction (``BEGIN IMMEDIATE``), so a redrive that selects
and then updates in separate steps is caught every time. ``then_another_writes`` keeps
the student's connection open after the call and tries a write from another one, as the
next worker would; ``redrive_kills`` kills a redrive right after each of its writes
(``killsweep``) and runs it again, as the operator would.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from labkit import redact
from labkit.grading.exercises.common import begin_refused_once as begin_refused_once
from labkit.grading.exercises.common import (
    fresh_state,
    need,
    outcome,
    taken_over_after_its_first_write,
)
from labkit.grading.exercises.described import build_error
from labkit.grading.exercises.killsweep import sweep
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.racesweep import race_sweep
from labkit.grading.exercises.tracing import (
    LockedAtBegin,
    Rows,
    Traced,
    Watched,
    begins_with_the_lock,
    left_as_given,
)


class Racing(Traced):
    """``Traced`` that pauses after reads unless a BEGIN IMMEDIATE/EXCLUSIVE is open.

    A deferred ``BEGIN`` takes no write lock until the first write, so another
    connection can read the same rows in between: that read pauses too. ``then`` runs
    once, at the first pause (another party acting in the gap).
    """

    def __init__(self, conn: Any, pause: float, then: Callable[[], None] | None = None) -> None:
        super().__init__(conn, pause=pause)
        self.locked = False
        self.then = then

    def execute(self, sql: str, params: Any = ()) -> Any:
        word = " ".join(sql.split()).upper()
        if word.startswith("BEGIN"):
            self.locked = "IMMEDIATE" in word or "EXCLUSIVE" in word
        cursor = self._run(sql, params)
        self.statements.append(word)
        if word.startswith(("COMMIT", "ROLLBACK", "END")):
            self.locked = False
        if word.startswith(("SELECT", "WITH")) and not self.locked:
            rows = cursor.fetchall()
            self.pauses += 1
            if self.then is not None:
                then, self.then = self.then, None
                then()
            else:
                threading.Event().wait(self.pause)
            return Rows(rows, cursor.rowcount, cursor.lastrowid, description=cursor.description)
        return cursor


def dead_letter(
    values: MutableMapping[str, Any],
    path: str,
    job_id: int,
    token: Any,
    reason: str,
    error: dict[str, Any],
    now: float,
) -> dict[str, Any]:
    """``dead_letter(conn, job_id, token, reason, <error built from spec>, now)``, as an outcome."""
    return _bury(values, path, job_id, token, reason, build_error(error), now)


class JobCancelled(BaseException):
    """A watchdog's cancellation: a BaseException, as ``asyncio.CancelledError`` is, so
    the job's own ``except Exception`` does not swallow it."""


def dead_letter_of_a_cancelled_job(
    values: MutableMapping[str, Any],
    path: str,
    job_id: int,
    token: Any,
    reason: str,
    message: str,
    now: float,
) -> dict[str, Any]:
    """``dead_letter`` with an error that is no ``Exception`` (``JobCancelled(message)``)."""
    return _bury(values, path, job_id, token, reason, JobCancelled(message), now)


def _bury(
    values: MutableMapping[str, Any],
    path: str,
    job_id: int,
    token: Any,
    reason: str,
    error: BaseException,
    now: float,
) -> dict[str, Any]:
    """The student's ``dead_letter`` on a connection of its own to ``path``, as an outcome."""
    conn = connect(path)
    try:
        with fresh_state(values):
            return outcome(need(values, "dead_letter"), conn, job_id, token, reason, error, now)
    finally:
        conn.close()


def dead_letters_in_a_row(
    values: MutableMapping[str, Any],
    path: str,
    calls: list[list[Any]],
    one_connection: bool = False,
) -> list[dict[str, Any]]:
    """Several ``dead_letter`` calls in one worker process, one after the other.

    ``calls`` are ``[job_id, token, reason, error spec, now]``; each call has its own
    connection, as the worker's attempts would, but module-level state (a cache) lives on
    between them, as it does in a long-running worker. ``one_connection``: all on ONE
    connection, as a long-running worker keeps it; what it did before
    (``conn.total_changes`` counts every change since it opened) must not decide what a
    call returns. One outcome per call.
    """
    results = []
    shared = connect(path) if one_connection else None
    try:
        with fresh_state(values):
            for job_id, token, reason, error, now in calls:
                conn = shared or connect(path)
                try:
                    results.append(
                        outcome(
                            need(values, "dead_letter"),
                            conn,
                            job_id,
                            token,
                            reason,
                            build_error(error),
                            now,
                        )
                    )
                finally:
                    if shared is None:
                        conn.close()
    finally:
        if shared is not None:
            shared.close()
    return results


def one_worker_process(
    values: MutableMapping[str, Any], path: str, steps: list[list[Any]]
) -> list[dict[str, Any]]:
    """A job's life in ONE long-running process: ``dead_letter`` and ``redrive`` calls and
    a worker's claims, one after the other, each call on its own connection, module-level
    state (a cache, a set of ids seen) living on between them as it does in a worker.

    ``steps`` are ``["dead_letter", job_id, token, reason, error spec, now]``,
    ``["redrive", {kwargs}]`` or ``["claim", job_id, token, now]`` (the harness's own
    claim of a pending job: running, attempt + 1, lease ``token`` until ``now`` + 30).
    One outcome per step (a claim's: whether it took the job).
    """
    results: list[dict[str, Any]] = []
    with fresh_state(values):
        for name, *args in steps:
            conn = connect(path)
            try:
                if name == "dead_letter":
                    job_id, token, reason, error, now = args
                    fn = need(values, "dead_letter")
                    results.append(
                        outcome(fn, conn, job_id, token, reason, build_error(error), now)
                    )
                elif name == "redrive":
                    results.append(_ids(outcome(_redrive(values), conn, **args[0])))
                else:
                    job_id, token, now = args
                    taken = conn.execute(
                        "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                        " lease_owner = 'w', lease_token = :token, lease_until = :now + 30,"
                        " updated_at = :now WHERE id = :id AND state = 'pending'",
                        {"id": job_id, "token": token, "now": now},
                    )
                    results.append({"returned": taken.rowcount > 0})
            finally:
                conn.close()
    return results


class _AfterFirstCommit(Traced):
    """``Traced`` that lets another party write once, right after the first COMMIT."""

    def __init__(self, conn: Any, then: Callable[[], None]) -> None:
        super().__init__(conn, pause=0.0)
        self.then: Callable[[], None] | None = then

    def execute(self, sql: str, params: Any = ()) -> Any:
        cursor = super().execute(sql, params)
        if self.then is not None and sql.lstrip().upper().startswith(("COMMIT", "END")):
            then, self.then = self.then, None
            then()
        return cursor


def redrive_while_a_worker_takes_a_job_after_a_commit(
    values: MutableMapping[str, Any],
    path: str,
    kwargs: dict[str, Any],
    job_id: int,
    at: float,
    redriven: int | None = None,
) -> dict[str, Any]:
    """``redrive(**kwargs)``; right after its first COMMIT another operator redrives job
    ``job_id`` (if still dead) and a worker takes it (state running, updated_at ``at``).
    With ``redriven``, a worker also claims that job if the redrive has made it pending
    by then (``"claimed"`` says so), as a worker may the moment a redrive commits.

    A redrive that commits once, at its end, has already changed the job by then.
    """
    acted: list[str] = []
    claimed: list[bool] = []

    def other() -> None:
        conn = connect(path)
        try:
            conn.execute(
                "UPDATE jobs SET state = 'running', attempt = 1, redrives = redrives + 1,"
                " lease_owner = 'worker-2', lease_token = 'worker-2-token',"
                " lease_until = :at + 30, updated_at = :at WHERE id = :id AND state = 'dead'",
                {"id": job_id, "at": at},
            )
            if redriven is not None:
                taken = conn.execute(
                    "UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                    " lease_owner = 'worker-3', lease_token = 'worker-3-token',"
                    " lease_until = :at + 30, updated_at = :at"
                    " WHERE id = :id AND state = 'pending'",
                    {"id": redriven, "at": at},
                )
                claimed.append(taken.rowcount > 0)
            acted.append("after the first commit")
        finally:
            conn.close()

    conn = _AfterFirstCommit(connect(path), other)
    try:
        with fresh_state(values):
            result = _ids(outcome(_redrive(values), conn, **kwargs))
    finally:
        conn.close()
    result["worker"] = acted[0] if acted else "never"
    result["claimed"] = bool(claimed and claimed[0])
    return result


def _ids(result: dict[str, Any]) -> dict[str, Any]:
    """The returned ids as ints; ``not_ints``, the answer as it came, when some id was no
    int (a '7' of a group_concat split, a 7.0): the caller's ``job_id in ids`` misses it."""
    if "returned" in result:
        given = result["returned"]
        try:
            result["returned"] = [int(i) for i in given]
        except (TypeError, ValueError):
            result["returned"] = repr(given)[:200]
        else:
            if any(type(i) is not int for i in given):
                result["not_ints"] = repr(given)[:200]
    return result


def _redrive(values: MutableMapping[str, Any]) -> Callable[..., Any]:
    """The student's ``redrive``, its ids as a list when it returned a set.

    A set loses the order (the business of the oldest-first checks), never a job: the
    checks of which jobs were redriven judge the ids it holds, not its type.
    """
    fn = need(values, "redrive")

    def listed(*args: Any, **kwargs: Any) -> Any:
        ids = fn(*args, **kwargs)
        return list(ids) if isinstance(ids, (set, frozenset)) else ids

    return listed


def redrive(values: MutableMapping[str, Any], path: str, **kwargs: Any) -> dict[str, Any]:
    """``redrive(conn, **kwargs)`` on a new connection; the ids it returned, as an outcome."""
    conn = connect(path)
    try:
        with fresh_state(values):
            return _ids(outcome(_redrive(values), conn, **kwargs))
    finally:
        conn.close()


def with_its_chain(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    args: list[Any],
    kwargs: dict[str, Any],
) -> dict[str, Any]:
    """``name(conn, *args, **kwargs)`` (``redrive``, or ``dead_letter`` with its error built
    from ``args[3]``) on a new connection, as an outcome; when it raised, ``chain``: each
    error its traceback shows ("Class: message"), the one raised first, then the one it was
    raised from (``__cause__``) or during (``__context__``, unless ``from None`` hid it)."""
    caught: list[BaseException] = []
    if name == "dead_letter":
        args = [*args[:3], build_error(args[3]), *args[4:]]
        fn = need(values, "dead_letter")
    else:
        fn = _redrive(values)

    def call(*call_args: Any, **call_kwargs: Any) -> Any:
        try:
            return fn(*call_args, **call_kwargs)
        except Exception as exc:
            caught.append(exc)
            raise

    conn = connect(path)
    try:
        with fresh_state(values):
            result = outcome(call, conn, *args, **kwargs)
    finally:
        conn.close()
    if name != "dead_letter":
        result = _ids(result)
    chain: list[str] = []
    error: BaseException | None = caught[0] if caught else None
    while error is not None and len(chain) < 10:
        chain.append(f"{type(error).__name__}: {error}")
        if error.__cause__ is not None:
            error = error.__cause__
        elif error.__suppress_context__:
            error = None
        else:
            error = error.__context__
    if "raised" in result:
        result["chain"] = chain
    return result


def two_redrives_at_once(
    values: MutableMapping[str, Any], path: str, kwargs: dict[str, Any], pause: float
) -> list[dict[str, Any]]:
    """Two operators run ``redrive(**kwargs)`` at the same moment; what each returned."""
    start = threading.Barrier(2)
    results: list[dict[str, Any]] = [{}, {}]
    conns = [Racing(connect(path), pause) for _ in range(2)]

    def one(i: int) -> None:
        start.wait()
        results[i] = _ids(outcome(_redrive(values), conns[i], **kwargs))

    with fresh_state(values):
        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for c in conns:
        c.close()
    return results


def _while_another_writes(
    path: str,
    write: str,
    params: dict[str, Any],
    call: Callable[[Racing], dict[str, Any]],
    writes_first: bool = False,
) -> dict[str, Any]:
    """``call`` on a connection to ``path`` while another connection runs ``write``.

    The other writer acts in ``call``'s gap between reading and writing, if it leaves
    one (``Racing``); otherwise right after it. Returns ``call``'s outcome (``outcome``)
    with ``worker``: "in the gap", "after" or "never". With ``writes_first``, a read
    made after ``call`` already changed a row (a ``SELECT changes()`` after the fenced
    UPDATE) is no gap before its write: the other writer then counts as "after". A read
    made while ``call``'s own write transaction holds the lock (``BEGIN``, the fenced
    UPDATE, ``SELECT changes()``) is no gap either: the other writer, in this thread,
    would wait for a lock only the call can let go; it writes after the call. Nor is a
    read whose other write changes no row (the call's own write came first).
    """
    acted: list[str] = []
    raw = connect(path)
    locked_out: list[bool] = []

    def where() -> str:
        return "after" if writes_first and raw.total_changes > 0 else "in the gap"

    def other(where: str, wait: bool = True) -> None:
        conn = connect(path, timeout=10.0 if wait else 0.0)
        try:
            # A write that changed nothing found the job already past the call's own
            # write (a read the call makes after its COMMIT): that is no gap, and the
            # call is judged as if the other party came after it.
            changed = conn.execute(write, params).rowcount
            acted.append(where if changed else "after")
        except sqlite3.OperationalError:
            if wait:
                raise
            locked_out.append(True)  # the call holds the write lock: no gap
        finally:
            conn.close()

    conn = Racing(raw, 0.0, then=lambda: other(where(), wait=False))
    try:
        result = call(conn)
        if conn.then is not None or locked_out:  # no gap: the other comes after the call
            conn.then = None
            other("after")
    finally:
        conn.close()
    result["worker"] = acted[0] if acted else "never"
    return result


def redrive_while_a_worker_claims(
    values: MutableMapping[str, Any], path: str, job_id: int, now: float
) -> dict[str, Any]:
    """Redrive while another operator redrives job ``job_id`` and a worker claims it.

    The other party acts in the redrive's gap between reading and writing, if it leaves
    one; otherwise right after it. Returns the redrive's outcome and whether the worker
    acted inside the gap.
    """

    def redrive(conn: Racing) -> dict[str, Any]:
        with fresh_state(values):
            return _ids(outcome(_redrive(values), conn, limit=5, now=now))

    return _while_another_writes(
        path,
        "UPDATE jobs SET state = 'running', attempt = 1, redrives = redrives + 1,"
        " lease_owner = 'worker-9', lease_until = :until, lease_token = 'worker-9-token',"
        " dead_reason = NULL, updated_at = :now WHERE id = :id AND state = 'dead'",
        {"id": job_id, "now": now, "until": now + 300},
        redrive,
    )


def dead_letter_while_the_lease_moves(
    values: MutableMapping[str, Any], path: str, job_id: int, token: str, now: float
) -> dict[str, Any]:
    """``dead_letter`` by the holder of ``token`` while the lease moves to another worker.

    The lease runs out and another worker takes the job (a new token) in the gap between
    the student's read and write, if the code leaves one; otherwise right after it.
    Returns the call's outcome and whether the other worker acted inside the gap.
    """

    def dead_letter(conn: Racing) -> dict[str, Any]:
        with fresh_state(values):
            error = build_error({"type": "ValueError", "message": "no such customer"})
            return outcome(
                need(values, "dead_letter"), conn, job_id, token, "permanent error", error, now
            )

    return _while_another_writes(
        path,
        "UPDATE jobs SET attempt = attempt + 1, lease_owner = 'worker-2',"
        " lease_until = :until, lease_token = 'worker-2-token', updated_at = :now"
        " WHERE id = :id AND state = 'running'",
        {"id": job_id, "now": now, "until": now + 300},
        dead_letter,
        writes_first=True,
    )


def dead_letter_while_the_job_finishes(
    values: MutableMapping[str, Any], path: str, job_id: int, token: str, now: float
) -> dict[str, Any]:
    """``dead_letter`` by the holder of ``token`` (a watchdog giving up on it) while the
    job's own handler finishes it: state ``succeeded``, its lease columns left as they
    were (as a ``complete()`` may leave them), in the gap between the student's read and
    write if the code leaves one; otherwise right after it. Returns the call's outcome
    and whether the completion came inside the gap."""

    def dead_letter(conn: Racing) -> dict[str, Any]:
        with fresh_state(values):
            error = build_error({"type": "TimeoutError", "message": "no answer in 30 s"})
            return outcome(
                need(values, "dead_letter"), conn, job_id, token, "timed out", error, now
            )

    return _while_another_writes(
        path,
        "UPDATE jobs SET state = 'succeeded', updated_at = :now"
        " WHERE id = :id AND state = 'running'",
        {"id": job_id, "now": now},
        dead_letter,
        writes_first=True,
    )


def dead_letter_then_taken_again(
    values: MutableMapping[str, Any], path: str, job_id: int, token: str, now: float, at: float
) -> dict[str, Any]:
    """``dead_letter(job_id, token, ...)``; the moment its first change is committed, an
    operator redrives the job and a worker claims it (lease ``worker-2-token`` until
    ``at`` + 30), if it is dead by then (``common.taken_over_after_its_first_write``)."""
    error = build_error({"type": "ValueError", "message": "no such customer"})
    return taken_over_after_its_first_write(
        values,
        "dead_letter",
        path,
        [job_id, token, "permanent error", error, now],
        "UPDATE jobs SET state = 'running', attempt = 1, redrives = redrives + 1,"
        " dead_reason = NULL, lease_owner = 'worker-2', lease_token = 'worker-2-token',"
        " lease_until = :at + 30, updated_at = :at WHERE id = :id AND state = 'dead'",
        {"id": job_id, "at": at},
    )


def dead_letter_as_the_lease_moves_after_a_write(
    values: MutableMapping[str, Any], path: str, job_id: int, token: str, now: float, at: float
) -> dict[str, Any]:
    """``dead_letter(job_id, token, ...)``; the moment its first change is committed, the
    lease runs out and another worker takes the job (``worker-2-token`` until ``at`` + 30),
    if it is still running by then (``"taken"``): a first write that was not the burial
    (the reason alone, a touch of updated_at) is followed by a fence that no longer holds."""
    error = build_error({"type": "ValueError", "message": "no such customer"})
    return taken_over_after_its_first_write(
        values,
        "dead_letter",
        path,
        [job_id, token, "permanent error", error, now],
        "UPDATE jobs SET attempt = attempt + 1, lease_owner = 'worker-2',"
        " lease_token = 'worker-2-token', lease_until = :at + 30, updated_at = :at"
        " WHERE id = :id AND state = 'running'",
        {"id": job_id, "at": at},
    )


def redrive_schedules(
    values: MutableMapping[str, Any], folder: str, kwargs: dict[str, Any], seed: int
) -> dict[str, Any]:
    """Two operators' ``redrive(**kwargs)`` in two processes, one schedule at a time.

    See ``racesweep.race_sweep``; each copy returns the ids it reported (or raises), and
    the check reads ``jobs.db`` in each schedule's folder.
    """

    def operator(where: Path) -> Any:
        conn = connect(where / "jobs.db")
        try:
            return _redrive(values)(conn, **kwargs)
        finally:
            conn.close()

    return race_sweep(folder, ["jobs.db"], operator, operator, seed)


def then_another_writes(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    interrupt_after: int | None = None,
) -> dict[str, Any]:
    """``name(conn, *args, **kwargs)``, then, its connection still open, another one's write.

    For ``dead_letter`` the error (``args[3]``) is built from its description. With
    ``interrupt_after``, a Ctrl-C (KeyboardInterrupt, no ``Exception``) comes right after
    that write statement of the call, as in a process that lives on; its outcome is then
    ``{"interrupted": True}``. Returns the call's outcome, ``"open"`` (whether the
    student's connection was still inside a transaction), ``"synchronous"`` (its
    ``PRAGMA synchronous`` then: 0 is OFF), ``"settings"`` when the call changed the
    connection's row factory or busy timeout, ``"closed"`` when the call closed the
    connection it was given, and ``"other"``: ``"wrote"``, or the error
    another connection's ``BEGIN IMMEDIATE`` met at once (no busy timeout: a worker would
    wait, then fail).
    """
    if name == "dead_letter":
        args = [*args[:3], build_error(args[3]), *args[4:]]
    conn = connect(path)
    waits = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    try:
        given: sqlite3.Connection | Watched = conn
        if interrupt_after is not None:
            given = Watched(conn, interrupt_after, crash_with=KeyboardInterrupt)
        with fresh_state(values):
            try:
                result = outcome(need(values, name), given, *args, **kwargs)
            except KeyboardInterrupt:
                result = {"interrupted": True}
        try:
            result["open"] = conn.in_transaction
        except sqlite3.ProgrammingError:  # the call closed the connection it was given
            result["open"], result["closed"] = False, True
            conn = connect(path)
        result["left"] = left_as_given(conn)
        settings = _settings_changed(conn, waits)
        if settings:
            result["settings"] = settings
        try:
            result["synchronous"] = int(conn.execute("PRAGMA synchronous").fetchone()[0])
        except (sqlite3.Error, TypeError, ValueError):
            result["synchronous"] = None
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            result["other"] = "wrote"
        except sqlite3.OperationalError as exc:
            result["other"] = f"{type(exc).__name__}: {exc}"
        finally:
            other.close()
    finally:
        conn.close()
    return result


def _settings_changed(conn: sqlite3.Connection, waits: int) -> list[str]:
    """What a call changed of its connection's owner's settings (the rows read by name,
    the wait for another's lock), each as ``conn.row_factory = None``."""
    factory = conn.row_factory
    changed = [] if factory is sqlite3.Row else [f"conn.row_factory = {factory!r}"]
    try:
        now_waits = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    except sqlite3.Error:
        return changed
    if now_waits != waits:
        changed.append(f"PRAGMA busy_timeout = {now_waits} (it was {waits})")
    return changed


def redrive_kills(
    values: MutableMapping[str, Any], folder: str, kwargs: dict[str, Any], seed: int
) -> dict[str, Any]:
    """``redrive(**kwargs)`` killed right after each of its writes, then run again.

    The restart is the same redrive on the life's copy of ``folder/jobs.db``, as the
    operator runs it again after the console died. See ``killsweep.sweep``.
    """

    def once(life: Path, _tracer: Any) -> Any:
        conn = connect(life / "jobs.db")
        try:
            return _redrive(values)(conn, **kwargs)
        finally:
            conn.close()

    return sweep(folder, ["jobs.db"], once, once, seed)


def dead_letter_kills(
    values: MutableMapping[str, Any], folder: str, args: list[Any], seed: int
) -> dict[str, Any]:
    """``dead_letter(conn, *args)`` killed right after each of its writes, then run again.

    ``args`` are ``[job_id, token, reason, error spec, now]``; the restart is the same
    call on the life's copy of ``folder/jobs.db`` (the worker's bury tried again: the
    token fence makes it a no-op once the job is dead). See ``killsweep.sweep``.
    """
    job_id, token, reason, error, now = args

    def once(life: Path, _tracer: Any) -> Any:
        conn = connect(life / "jobs.db")
        try:
            bury = need(values, "dead_letter")
            return bury(conn, job_id, token, reason, build_error(error), now)
        finally:
            conn.close()

    return sweep(folder, ["jobs.db"], once, once, seed)


class _LockedAtBeginOften(LockedAtBegin):
    """``LockedAtBegin`` whose first ``times`` BEGIN IMMEDIATE (or EXCLUSIVE) all fail
    "database is locked": another writer keeps the lock through a few tries."""

    def __init__(self, conn: sqlite3.Connection, path: str, times: int) -> None:
        super().__init__(conn, path)
        self.left = times
        self.refusals = 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        if self.left > 0 and begins_with_the_lock(sql):
            self.left -= 1
            self.refusals += 1
            self.refused = False  # refuse this BEGIN too
        return super().execute(sql, params)


def begin_refused_often(
    values: MutableMapping[str, Any], path: str, kwargs: dict[str, Any], times: int
) -> dict[str, Any]:
    """``redrive(conn, **kwargs)`` whose first ``times`` BEGIN IMMEDIATE fail "database is
    locked" at once (another operator's long redrive holds the lock): the outcome, and
    ``refusals``, how many of its BEGINs were refused."""
    conn = connect(path)
    try:
        with fresh_state(values):
            watched = _LockedAtBeginOften(conn, path, times)
            got = _ids(outcome(_redrive(values), watched, **kwargs))
            return {**got, "refusals": watched.refusals}
    finally:
        conn.close()


def warm_up() -> None:
    """Once in the graded student process, before the checks fork (``student_side.preload``):
    the store scrubs every error it keeps, and its scrubber imports detect-secrets on first
    use, which each check's fork would otherwise do again."""
    redact.warm_up()
