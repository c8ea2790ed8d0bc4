"""Serve a student's ASGI app for a check, and read back the job database it wrote.

``served(ns, db)`` starts the student's ``ex10_app:app`` with uvicorn in a process of
its own (``ns.spawn``: in the student's folder, killed with its whole tree afterwards)
on a unix socket (``SOCKETS``), and yields an ``App`` that posts and polls
with httpx through that socket. ``jobs_in(db)`` reads the job table read-only, from the check's
own process: the verdict comes from there, not from what the app answered.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from labkit.grading.checks import CheckFailed, Namespace, expect
from labkit.grading.course import ROOT
from labkit.grading.exercises.ex10.harness import (
    CLOCK_JUMP_ENV,
    CLOCK_SHIFT_ENV,
    CLOCK_STOPPED_ENV,
    CRASH_AFTER_ENQUEUE_ENV,
    CRASH_ENV,
    HOLD_ENV,
    LOG_RECORDS_ENV,
    NOT_STARTED_STATUS,
    RENEWED_TOKENS_ENV,
    SLOW_ENQUEUE_ENV,
    STORE_DOWN_ENV,
)
from labkit.grading.exercises.killsweep import hash_salt
from labkit.grading.stub import is_stub_text
from labkit.integrations.http.serve import (
    client_for,
    listening_socket,
    server_argv,
    wait_until_serving,
)
from labkit.lang import _

APP_FILE = "ex10_app.py"
ALICE, BOB = "alice-token", "bob-token"
#: What the server imports before the student's app: under labkit grade each server is
#: forked from an interpreter that imported these once (``ns.spawn(warm=...)``), not
#: started afresh (about 0.4 s of CPU a server, twenty servers a notebook).
WARM = (
    "uvicorn",
    "fastapi",
    "labkit.integrations.http.connections",
    "labkit.grading.exercises.ex10.harness",
    "labkit.store",
)
#: Seconds a check may take: it starts one or two servers (importing FastAPI is slow).
TIMEOUT = 90.0
#: Where the check's server listens: a unix socket the checker made, handed to the server
#: as an open descriptor. The server needs no network, and no student's code, in a
#: sandbox that shows neither /run nor the checker's /tmp, can connect to it (a TCP port
#: on the host's loopback was in reach of every process on the machine). A short folder,
#: because a unix socket's path is limited to 107 bytes.
SOCKETS = "/run" if os.access("/run", os.W_OK) else "/tmp"
#: A time zone west of UTC (UTC-3, Brasilia's), as a POSIX TZ string that needs no
#: zoneinfo file: on such a server a naive UTC datetime read as local time
#: (``datetime.utcnow().timestamp()``) lands three hours in the future.
WEST_OF_UTC = "<-03>3"
#: A time zone east of UTC (UTC+3, Moscow's), the same way: there a local wall-clock time
#: labelled as UTC (``datetime.now().replace(tzinfo=timezone.utc).timestamp()``) lands
#: three hours in the future.
EAST_OF_UTC = "<+03>-3"

#: Numbers the POSTs of this process: each carries an X-Request-Id of its own, as a proxy
#: or a client library sends one per attempt, so a retry is the same request with a new
#: id (a job key that holds the request id makes a second job).
_POSTS = itertools.count(1)


@dataclass
class App:
    """The student's app, running, and a client that reaches it on its unix socket."""

    client: httpx.Client
    proc: subprocess.Popen[bytes]
    log: Path
    #: The file whose existence makes the server's ``store.enqueue`` fail (``store_down``).
    down_flag: Path | None = None
    #: Where the server's logging handlers also write (``served(..., log_everything=True)``).
    records: Path | None = None

    def post(
        self, body: Any, token: str | None = ALICE, key: str | None = None, raw: bool = False
    ) -> httpx.Response:
        """POST ``body``; ``raw``: a 5xx is returned like any answer, not a failure, and
        the connection is not kept (uvicorn drops it after an error it logs, and the next
        request on it would read a reset)."""
        headers = _headers(token, key)
        headers.append((b"X-Request-Id", f"check-{next(_POSTS)}".encode()))
        if raw:
            headers.append((b"Connection", b"close"))
        return _answer(self, self.client.post("/reports", json=body, headers=headers), raw)

    @contextmanager
    def store_down(self) -> Iterator[None]:
        """The server's job database down (locked by another connection) for the block:
        each ``store.enqueue`` raises ``StoreBusy`` (``served(..., store_fault=True)``)."""
        if self.down_flag is None:
            raise RuntimeError("served(..., store_fault=True) makes a store that can go down")
        self.down_flag.touch()
        try:
            yield
        finally:
            self.down_flag.unlink(missing_ok=True)

    def fired(self, point: str) -> bool:
        """Whether the server logged the harness's ``FAULT fired <point>`` line."""
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return f"FAULT fired {point}" in text

    def status(
        self, job_id: int | str, token: str | None = ALICE, raw: bool = False
    ) -> httpx.Response:
        """GET the status; ``raw``: a 5xx is returned like any answer (as ``post``'s)."""
        path = job_id if isinstance(job_id, str) else f"/reports/{job_id}"
        url = self.client.base_url.join(path)
        headers = _headers(token, None)
        if raw:
            headers.append((b"Connection", b"close"))
        return _answer(self, self.client.get(url, headers=headers), raw)

    def output(self) -> str:
        """All the server wrote: its stdout and stderr, then what its logging handlers
        wrote (``served(..., log_everything=True)``), to a file of their own as well."""
        texts = [
            path.read_text(encoding="utf-8", errors="replace")
            for path in (self.log, self.records)
            if path is not None and path.exists()
        ]
        return "\n".join(texts)

    def settle(self) -> None:
        """Give the server a moment to log what it raised for a 5xx (``raw``) it answered."""
        _wait_for_the_traceback(self)

    def log_tail(self, lines: int = 3) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        tail = [line for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(tail) or _("(the server wrote nothing)")


def _headers(token: str | None, key: str | None) -> list[tuple[bytes, bytes]]:
    headers = [] if token is None else [(b"Authorization", f"Bearer {token}".encode())]
    if key is not None:
        # A key with a non-ASCII letter goes out as its UTF-8 bytes, as a browser sends it.
        headers.append((b"Idempotency-Key", key.encode()))
    return headers


def _answer(app: App, reply: httpx.Response, raw: bool = False) -> httpx.Response:
    """The reply, after turning the stub's 501 into "not started" and (unless ``raw``) a
    500 into a failure."""
    if reply.status_code == NOT_STARTED_STATUS:
        with contextlib.suppress(ValueError):
            text = reply.json().get("not_started", "")
            if is_stub_text(text):
                raise NotImplementedError(text)
    if reply.status_code >= 500 and not raw:
        _wait_for_the_traceback(app)
        raise CheckFailed(
            _("an answer to {method} {path}").format(
                method=reply.request.method, path=reply.request.url.path
            ),
            _("{status}: your code raised; the server's log ends with: {log_tail}").format(
                status=reply.status_code, log_tail=app.log_tail()
            ),
            "run the request by hand with try_it() and read the traceback",
        )
    return reply


def _wait_for_the_traceback(app: App) -> None:
    """Give the server a moment to log what it raised: uvicorn logs it after the 500."""
    for _attempt in range(20):
        logged = app.log.read_text(encoding="utf-8", errors="replace") if app.log.exists() else ""
        if "Traceback" in logged or app.proc.poll() is not None:
            return
        time.sleep(0.1)


@contextmanager
def scratch(ns: Namespace) -> Iterator[Path]:
    """A fresh folder for this check's database, inside the student's folder, removed after."""
    folder = Path(tempfile.mkdtemp(prefix=".ex10-check-", dir=ns.workdir))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def served(
    ns: Namespace,
    db: Path,
    crash_at_202: bool = False,
    crash_after_enqueue: bool = False,
    slow_enqueue_s: float = 0.0,
    tz: str | None = None,
    renewed_tokens: dict[str, str] | None = None,
    clock_at: float | None = None,
    store_fault: bool = False,
    log_everything: bool = False,
    clock_jump_s: float = 0.0,
    hold_after_enqueue: tuple[float, str] | None = None,
    stopped_clock: bool = False,
) -> Iterator[App]:
    """Serve the student's ``ex10_app:app`` on ``db``; killed with its tree on the way out.

    The test points of ``labkit.grading.exercises.ex10.harness``: ``crash_at_202`` kills
    the server as a 202 starts, ``crash_after_enqueue`` as the job's ``enqueue`` returns,
    and ``slow_enqueue_s`` makes every ``enqueue`` wait that long first. ``tz``: the
    server's time zone (``TZ``), for a server that does not run on UTC.
    ``renewed_tokens``: more ``{token: owner}`` pairs ``caller_of`` accepts there.
    ``clock_at``: the epoch time the server's wall clocks read as it starts.
    ``clock_jump_s``: how much later they read once its first POST is answered.
    ``stopped_clock``: every clock there reads its first reading again at each call (a
    coarse clock): a value the app makes of the time is the same for every request.
    ``hold_after_enqueue``: ``(seconds, mark)``, the wait of an ``enqueue`` that created a
    job whose payload holds ``mark``, before it returns.
    ``store_fault``: the app's store can be taken down while it runs (``App.store_down``).
    ``log_everything``: the server logs from DEBUG up and flushes each printed line, and
    what its logging handlers write is kept too (``App.output``).
    """
    if not (Path(ns.workdir) / APP_FILE).exists():
        raise CheckFailed(
            _("a file {file} in your folder").format(file=APP_FILE),
            _("no such file"),
            _("run the %%writefile {file} cell (after each change), then check again").format(
                file=APP_FILE
            ),
        )
    nth = len(list(db.parent.glob("server-*")))
    env = {**os.environ, "EX10_DB": str(db), "PYTHONPATH": str(ROOT)}
    # Each server its own str hash salt, as two deployments of one app have: a job key
    # built from hash() does not survive the restart after a crash.
    env["PYTHONHASHSEED"] = str(hash_salt(nth))
    for name in (
        CRASH_ENV,
        CRASH_AFTER_ENQUEUE_ENV,
        SLOW_ENQUEUE_ENV,
        HOLD_ENV,
        RENEWED_TOKENS_ENV,
        CLOCK_SHIFT_ENV,
        CLOCK_JUMP_ENV,
        CLOCK_STOPPED_ENV,
        STORE_DOWN_ENV,
        LOG_RECORDS_ENV,
    ):
        env.pop(name, None)
    if clock_at is not None:
        env[CLOCK_SHIFT_ENV] = repr(clock_at - time.time())
    if clock_jump_s:
        env[CLOCK_JUMP_ENV] = repr(clock_jump_s)
    if stopped_clock:
        env[CLOCK_STOPPED_ENV] = "1"
    if renewed_tokens:
        env[RENEWED_TOKENS_ENV] = ",".join(f"{t}={o}" for t, o in renewed_tokens.items())
    if tz is not None:
        env["TZ"] = tz
    if crash_at_202:
        env[CRASH_ENV] = "1"
    if crash_after_enqueue:
        env[CRASH_AFTER_ENQUEUE_ENV] = "1"
    if slow_enqueue_s > 0:
        env[SLOW_ENQUEUE_ENV] = str(slow_enqueue_s)
    if hold_after_enqueue is not None:
        env[HOLD_ENV] = "{}:{}".format(*hold_after_enqueue)
    log = db.with_name(f"server-{nth}.log")
    down_flag = db.with_name(f"server-{nth}.store-down") if store_fault else None
    if down_flag is not None:
        env[STORE_DOWN_ENV] = str(down_flag)
    records = db.with_name(f"records-{nth}.log") if log_everything else None
    if records is not None:
        env[LOG_RECORDS_ENV] = str(records)
    folder = Path(tempfile.mkdtemp(prefix="ex10-", dir=SOCKETS))
    sock = listening_socket(folder / "http.sock")
    try:
        with log.open("ab") as out:
            proc = ns.spawn(
                server_argv("ex10_app:app", sock.fileno()),
                warm=WARM,
                env=env,
                pass_fds=(sock.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        client = client_for(sock)
    finally:
        sock.close()
    app = App(client, proc, log, down_flag, records)
    try:
        try:
            wait_until_serving(
                "", lambda: proc.poll() is None, TIMEOUT / 2, "/openapi.json", client=client
            )
        except RuntimeError:
            raise CheckFailed(
                _("{file} to start as a server").format(file=APP_FILE),
                # The code tells a crash of the app (1) from a kill from outside (-9).
                _("it exited with code {code}; its log ends with: {log_tail}").format(
                    code=proc.poll(), log_tail=app.log_tail()
                ),
                "run the %%writefile cell and then `import ex10_app` in a cell to see the error",
            ) from None
        yield app
    finally:
        client.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            ns.kill(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def jobs_in(db: Path) -> list[dict[str, Any]]:
    """Every job row of the database, payload decoded, read by the check itself."""
    if not db.exists():
        return []
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        conn.row_factory = sqlite3.Row
        try:
            rows = conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        except sqlite3.OperationalError:
            return []
    return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]


def texts_in(db: Path) -> list[tuple[str, str]]:
    """Every row of every table of the database, as ``(table, the row's text)``."""
    if not db.exists():
        return []
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return [
            (table, " ".join(str(v) for v in row))
            for table in tables
            for row in conn.execute('SELECT * FROM "{}"'.format(table.replace('"', '""')))
        ]


def jobs_for(db: Path, owner: str, body: Any) -> list[dict[str, Any]]:
    """The jobs holding exactly this owner's request."""
    wanted = {"owner": owner, "request": body}
    return [j for j in jobs_in(db) if j["payload"] == wanted]


def accepted_id(
    reply: httpx.Response,
    what: str,
    hint: str | None = None,
    statuses: tuple[int, ...] | None = None,
    strict: bool = False,
) -> int:
    """The job id of a 202, or a failure saying what came back instead.

    ``hint`` replaces the default one (answer 202) where another status means another
    mistake: a 409 for a second caller's key is a key not scoped to its caller.
    ``statuses``: the answers taken. ``strict``: only a 202, and the id a JSON integer.
    Otherwise a 200 or 201 with the job is taken as well, and a string of digits ("7") is
    read as the id: a wrong success code or an id sent as text loses and duplicates
    nothing, so only the contract's checks judge them (``accept_answers_202_with_location``
    and ``every_202_says_where_and_when_to_poll``), not the checks of keys and crashes.
    """
    if statuses is None:
        statuses = (202,) if strict else (200, 201, 202)
    expect(
        reply.status_code in statuses,
        _("202 Accepted for {what}").format(what=what),
        f"{reply.status_code} {reply.text[:160]}",
        hint or _("answer 202 once the job is stored: JSONResponse(..., status_code=202)"),
    )
    try:
        job_id = reply.json()["job_id"]
    except (ValueError, KeyError, TypeError):
        raise CheckFailed('a JSON body {"job_id": N}', reply.text[:160]) from None
    if not strict and isinstance(job_id, str) and job_id.isascii() and job_id.isdigit():
        job_id = int(job_id)
    expect(isinstance(job_id, int), "job_id to be the job's integer id", job_id)
    return int(job_id)


def retried_id(reply: httpx.Response, what: str, hint: str | None = None) -> int:
    """The job id answered to a retry of an accepted request: a 202, or a 200 with the job.

    The contract says 202, and ``every_202_says_where_and_when_to_poll`` holds a retry to
    it; a retry answered 200 with its job loses and duplicates nothing, so the checks of
    keys and crashes take it (as ``accepted_id`` does without ``strict``).
    """
    return accepted_id(reply, what, hint)


def add_job(db: Path, owner: str, body: Any, key: str) -> int:
    """A job created by the check itself, the way the contract stores one."""
    from labkit.store import JobStore

    with JobStore(db) as store:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    return job.id


def posted_together(app: App, requests: list[tuple[Any, ...]]) -> list[httpx.Response]:
    """POST every ``(body, key)`` of ``requests`` as alice, or ``(body, key, token)`` as
    that token's caller, at the same moment, one thread each (released together by a
    barrier); the replies in the same order."""
    gate = threading.Barrier(len(requests))

    def send(body: Any, key: str | None, token: str = ALICE) -> httpx.Response:
        gate.wait(TIMEOUT / 4)
        return app.post(body, token, key=key)

    with ThreadPoolExecutor(len(requests)) as pool:
        futures = [pool.submit(send, *request) for request in requests]
        return [f.result() for f in futures]  # the first failure, a CheckFailed, re-raised
