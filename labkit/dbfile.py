"""Opening labkit's SQLite files: recognise before touching, connect, run a schema, transact.

The job store, the world, the circuit breaker and the outbox all keep their state in
SQLite the same way: WAL mode (readers never block the one writer), autocommit mode
with explicit ``BEGIN IMMEDIATE`` transactions (a writer takes the write lock at the
start, so two writers queue instead of deadlocking halfway), and a busy timeout so a
short wait for another process's transaction is not an error. This module is that
shared way, so the four cannot drift apart.

``check_file`` refuses, without writing a byte, a file that is not the kind of labkit
file the caller expects, or whose ``-wal``, ``-shm`` or ``-journal`` file is a symbolic
link; ``explain`` turns SQLite's terse errors into messages that say what to do (a full
disk is never called damage); ``removing_on_failure`` takes back the side files a failed
open made. In production the database driver or an ORM (SQLAlchemy's engine events,
Django's ``OPTIONS``) applies such connection settings; labkit writes them by hand
because it uses the standard library's ``sqlite3`` alone.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit import queries
from labkit.clock import SystemClock
from labkit.errors import LabkitError, StoreBusy, StoreError

SQL = queries.load("dbfile.sql")
#: How long a connection waits for another one's write lock before giving up.
BUSY_TIMEOUT_S = 10.0
#: SQLite's ``synchronous`` levels: NORMAL survives any process crash, FULL a power cut.
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
#: The files SQLite keeps beside a database: the write-ahead log, its index, the journal.
SIDE_FILES = ("-wal", "-shm", "-journal")
#: Below this many free bytes a "disk I/O error" is a full disk: SQLite reports a failed
#: write as "database or disk is full", but a failed growth of the -shm file as I/O.
FULL_BELOW = 1 << 20
SQLITE_IOERR, SQLITE_FULL = 10, 13  # SQLite's primary result codes


@dataclass(frozen=True)
class FileKind:
    """What a labkit file is: how to recognise it, and how messages name it."""

    noun: str  # "database file": what to give the path of
    label: str  # "labkit job database": what a foreign file is not
    meta_table: str  # the table whose presence marks the file as ours
    version_sql: str  # reads ``value`` of the meta row named ``:name``
    schema_version: int  # the newest version this labkit understands


def connect(
    path: str | Path, synchronous: str | None = None, check_same_thread: bool = False
) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode, WAL, with a busy timeout and rows by name.

    ``synchronous`` is one of SQLite's levels (``NORMAL``, ``FULL``); None keeps the
    default. The connection may be used from other threads unless ``check_same_thread``.
    """
    if synchronous is not None and synchronous.upper() not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
    with removing_on_failure(Path(path)):
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=check_same_thread
        )
        try:
            conn.row_factory = sqlite3.Row
            _enable_wal(conn)
            if synchronous is not None:
                conn.execute(f"PRAGMA synchronous={synchronous.upper()}")  # checked above
        except BaseException:
            conn.close()
            raise
    return conn


def side_file(path: Path, suffix: str) -> Path:
    """Where SQLite keeps ``path``'s ``-wal``/``-shm``/``-journal``: beside the real file."""
    real = Path(os.path.realpath(path))
    return real.with_name(real.name + suffix)


@contextmanager
def removing_on_failure(path: Path) -> Iterator[None]:
    """When the block raises, remove the ``-wal`` and ``-shm`` files it created, if unused.

    SQLite deletes them when the last connection closes, after a checkpoint; an open that
    failed for want of disk space cannot checkpoint, and leaves them. The block must have
    closed its connection when it raises. A ``-wal`` file that holds a frame, or that
    another connection uses, is never removed: it may hold someone's committed data.
    """
    sides = (side_file(path, "-wal"), side_file(path, "-shm"))
    before = {f for f in sides if f.exists()}
    try:
        yield
    except BaseException:
        created = [str(f) for f in sides if f.exists() and f not in before]
        if created and sys.executable:
            argv = [sys.executable, "-I", "-S", "-c", _REMOVE_IF_UNUSED, os.path.realpath(path)]
            try:
                subprocess.run([*argv, *created], capture_output=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass  # left as SQLite left them: harmless, and the next open uses them
        raise


#: In a child process: closing a file drops all its process's POSIX locks on it, SQLite's
#: too. Each connection to a WAL database holds a shared lock on its lock bytes (os_unix.c:
#: 512 from 1 GiB) and on byte 128 of its -shm file: SQLite's own test before it deletes a
#: WAL is that exclusive locks there succeed, so that no connection has the file open.
_REMOVE_IF_UNUSED = """
import fcntl, os, sys
db, names, how = sys.argv[1], sys.argv[2:], fcntl.LOCK_EX | fcntl.LOCK_NB
fcntl.lockf(os.open(db, os.O_RDWR | os.O_NOFOLLOW), how, 512, 1 << 30)
if os.path.exists(db + "-shm"):
    fcntl.lockf(os.open(db + "-shm", os.O_RDWR | os.O_NOFOLLOW), how, 1, 128)
if not (os.path.exists(db + "-wal") and os.path.getsize(db + "-wal")):  # no frame in it
    for name in names:
        if os.path.exists(name):
            os.unlink(name)
"""


def _enable_wal(conn: sqlite3.Connection, tries: int = 100) -> None:
    """Switch to WAL, waiting out another connection doing the same.

    Two processes opening a brand-new file at once both try to switch it to WAL; the
    loser gets "database is locked" at once, without SQLite's busy handler, so the wait
    is written here (a few milliseconds between tries, about two seconds at most).
    """
    for attempt in range(tries):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == tries - 1:
                raise
            SystemClock().sleep(0.002 * (1 + attempt % 10))


@contextmanager
def transaction(
    conn: sqlite3.Connection,
    lock: AbstractContextManager[Any] | None = None,
    explain: Callable[[sqlite3.Error], Exception] | None = None,
) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction: all or nothing, one writer at a time.

    ``lock`` serialises the threads sharing ``conn``; ``explain`` turns a busy or broken
    database into the caller's own error. Without it, a database that stays locked past
    the busy timeout still raises ``StoreBusy`` (every labkit file waits and gives up
    the same way); other SQLite errors are raised as they are.
    """
    explain = explain or functools.partial(_busy_only, conn)
    with lock if lock is not None else nullcontext():
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise explain(exc) from None
        try:
            yield conn
        except sqlite3.Error as exc:
            _rollback(conn)
            raise explain(exc) from None
        except BaseException:
            # A crash inside the transaction undoes it, as the OS would for a dead process.
            _rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(conn)
            raise explain(exc) from None


def own_transaction(conn: sqlite3.Connection, purpose: str) -> AbstractContextManager[Any]:
    """``transaction(conn)``, refused while ``conn`` already has one open.

    For helpers whose writes must commit on their own (a checkpoint, an outbox row with
    its business write): the error says what to do, and ``purpose`` says why.
    """
    if conn.in_transaction:
        raise LabkitError(
            "this connection already has an open transaction; commit or roll it back "
            f"first, so {purpose}"
        )
    return transaction(conn)


def _busy_only(conn: sqlite3.Connection, exc: sqlite3.Error) -> Exception:
    """``StoreBusy`` for a lock held too long, SQLite's own error for anything else."""
    if "locked" in str(exc) or "busy" in str(exc):
        files = {row[1]: row[2] for row in conn.execute("PRAGMA database_list")}
        return explain(Path(files.get("main") or ":memory:"), exc)
    return exc


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back unless SQLite already did.

    After some errors (a full disk, an I/O error) SQLite has rolled the transaction
    back itself; a second ROLLBACK would fail with "cannot rollback - no transaction is
    active" and hide the error that matters.
    """
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def split_script(script: str) -> list[str]:
    """Split a schema into statements, keeping trigger bodies whole.

    The last statement may leave out its ``;``, as a named query in a .sql file does.
    """
    statements, current = [], []
    for line in script.splitlines():
        current.append(line)
        candidate = "\n".join(current).strip()
        if candidate and sqlite3.complete_statement(candidate):
            statements.append(candidate)
            current = []
    rest = "\n".join(current).strip()
    if rest:
        statements.append(rest)
    return statements


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Execute every statement of ``script`` on ``conn`` (inside the caller's transaction)."""
    for statement in split_script(script):
        conn.execute(statement)


def _read_header(path: Path) -> bytes | None:
    """The file's first 20 bytes; None when a connection may have the file open.

    Closing any descriptor of a file drops every POSIX lock this process holds on it,
    SQLite's included (fcntl(2)). A connection of this process that lost its shared lock
    lets another process, closing last, checkpoint and delete the ``-wal`` and ``-shm``
    files while this one still reads through them: it reads a stale database, and its
    next write can damage the file. A ``-wal`` file means a connection may have the file
    open, so it is then read through SQLite alone, which keeps a descriptor open as long
    as a lock of its process needs it.
    """
    if side_file(path, "-wal").exists():
        return None
    with path.open("rb") as fh:
        return fh.read(20)


def _read_only_uri(path: Path, header: bytes | None) -> str:
    """A URI that reads ``path`` without creating anything next to it.

    Reading a WAL-mode file, even read-only, creates its ``-wal`` and ``-shm`` files.
    When there is no ``-wal`` file, no connection has the file open and all its content
    is in the main file, so it can be read as immutable, which creates nothing. When
    there is one, the side files exist already and a plain read-only open adds nothing.
    """
    wal_mode = header is not None and header[18:20] == b"\x02\x02"
    no_wal = not side_file(path, "-wal").exists()
    return f"{path.resolve().as_uri()}?{'immutable=1' if wal_mode and no_wal else 'mode=ro'}"


def _read_schema(
    path: Path, header: bytes | None, kind: FileKind, tries: int = 5
) -> tuple[set[str], int | None]:
    """The file's table names and labkit schema version, read without writing a byte.

    An immutable read races another connection that is creating the file right now (it
    switched to WAL, has no ``-wal`` file yet, then checkpoints while we read), and SQLite
    calls that "malformed". So a failed read is tried again with a fresh look at the
    header; a file that is really damaged fails every time and is reported as such.
    """
    for attempt in range(tries):
        try:
            ro = sqlite3.connect(_read_only_uri(path, header), uri=True, timeout=BUSY_TIMEOUT_S)
            try:
                tables = {r[0] for r in ro.execute(SQL["table_names"])}
                version = None
                if kind.meta_table in tables:
                    row = ro.execute(kind.version_sql, {"name": "schema_version"}).fetchone()
                    version = int(row[0]) if row else None
            finally:
                ro.close()
            return tables, version
        except sqlite3.DatabaseError as exc:
            # Busy is not damage: another process holds the file (an exclusive lock, a
            # backup). Said at once, after one busy timeout, and never called corrupt.
            # Nor is an I/O error, which on a full disk is the -shm file that cannot grow.
            said = ("readonly", "unable to open", "locked", "busy", "disk I/O", "disk is full")
            if any(w in str(exc) for w in said):
                raise explain(path, exc) from None
            if attempt == tries - 1:
                raise StoreError(
                    f"{path} cannot be read as a SQLite database ({exc}); it was not "
                    "modified. Restore it from a backup or move it aside."
                ) from None
            SystemClock().sleep(0.02 * (attempt + 1))
            header = _read_header(path)
    raise AssertionError("unreachable: the last try returns or raises")


def check_file(path: Path, kind: FileKind) -> None:
    """Refuse, without writing a byte, a file that is not a ``kind`` file we understand.

    A missing or empty file is fine (it will be created) as long as its folder exists.
    A symbolic link in its place is followed, as SQLite does; one as its side file is not.
    """
    for suffix in SIDE_FILES:
        if refused := link_error(side_file(path, suffix), _SIDE_LINK_ADVICE):
            raise refused
    if path.is_dir():
        raise StoreError(f"{path} is a directory; give the path of a {kind.noun}")
    if path.exists() and not path.is_file():
        # A pipe, socket or device reads as an empty file, and SQLite then writes a
        # -journal beside it (as root, /dev/null-journal) and calls the failure a disk's.
        raise StoreError(
            f"{path} is not a regular file (a pipe, socket or device); it was not modified. "
            f"Give the path of a {kind.noun}"
        )
    if not path.exists() or path.stat().st_size == 0:
        if not path.parent.exists():
            raise StoreError(f"folder {path.parent} does not exist; create it first")
        return
    mode = path.stat().st_mode
    if not mode & 0o222:
        # os.access says yes to root whatever the mode: the mode is what someone meant.
        raise StoreError(
            f"{path} is read-only (mode {stat.S_IMODE(mode):04o}): someone marked it so, and "
            "labkit will not write it, even as root; it was not modified. If it should "
            "change, make it writable first (chmod u+w), or work on a copy"
        )
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise StoreError(
            f"cannot write {path}: labkit needs write access to the file and its folder "
            f"{path.parent} (for the -wal and -shm files); it was not modified. Fix the "
            "permissions or copy the database to a writable folder"
        )
    header = _read_header(path)
    if header is not None and not header.startswith(b"SQLite format 3\x00"):
        raise StoreError(
            f"{path} is not a SQLite database (corrupt, or some other file); it was not "
            "modified. Move it aside or choose another path."
        )
    tables, version = _read_schema(path, header, kind)
    if tables and version is None:
        raise StoreError(
            f"{path} is a SQLite database but not a {kind.label} (it has tables "
            f"{', '.join(sorted(tables)[:5])}); it was not modified. Choose another path."
        )
    if version is not None and version > kind.schema_version:
        raise StoreError(
            f"{path} has labkit schema version {version}, newer than this labkit "
            f"understands ({kind.schema_version}); it was not modified. Upgrade labkit."
        )


_SIDE_LINK_ADVICE = (
    "Check where it points, then remove the link (SQLite creates that file itself) and run "
    "the command again"
)


def link_error(path: Path, advice: str) -> StoreError | None:
    """When ``path`` is a symbolic link, the error that says where it points, why, ``advice``."""
    if not path.is_symlink():
        return None
    target = Path(os.path.normpath(path.parent / os.readlink(path)))
    where = str(target) if target.exists() else f"{target}, which does not exist"
    return StoreError(
        f"{path} is a symbolic link to {where}: labkit refuses it, because a link planted "
        "as a database or beside one can redirect its writes to another file; nothing was "
        f"changed. {advice}"
    )


def _full_disk(path: Path, exc: sqlite3.Error) -> StoreError | None:
    """The error for a full disk, or for a file stopped from growing; None for others."""
    code, text = getattr(exc, "sqlite_errorcode", 0) & 0xFF, str(exc)
    said_full = code == SQLITE_FULL or "disk is full" in text
    if not (said_full or code == SQLITE_IOERR or "disk I/O" in text):
        return None
    try:  # what this process may still write: root may use the filesystem's reserve too
        st = os.statvfs(path.parent)
        room: int | None = (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize
    except OSError:
        room = None
    free = "an unknown number of bytes" if room is None else f"{room} bytes"
    if (room is None and said_full) or (room is not None and room < FULL_BELOW):
        return StoreError(
            f"the disk holding {path} is full ({free} free): free some space and run "
            "the command again; nothing was changed, and what was stored before is intact"
        )
    if not said_full:
        return None  # an I/O error on a disk with room: not the disk's size
    return StoreError(
        f"{path} cannot grow ({text}), though its disk has {free} free: a size limit "
        "(PRAGMA max_page_count) stopped it, or the disk was full for a moment; raise the "
        "limit or run the command again; nothing was changed"
    )


def explain(path: Path, exc: sqlite3.Error) -> StoreError:
    """SQLite's error on ``path`` as a ``StoreError`` that says what happened and what to do."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreBusy(
            f"{path} stayed locked by another connection for over {BUSY_TIMEOUT_S:g}s "
            "(a long transaction elsewhere?); nothing was changed, try again"
        )
    # SQLite opens no side file through a link: say it is one, not "needs write access".
    links = (link_error(side_file(path, s), _SIDE_LINK_ADVICE) for s in SIDE_FILES)
    if "unable to open" in text and (link := next(filter(None, links), None)):
        return link
    if "readonly" in text or "unable to open" in text:
        return StoreError(
            f"cannot write {path} ({text}): labkit needs write access to the file and "
            f"its folder {path.parent} (for the -wal and -shm files); choose a "
            "writable folder"
        )
    full = _full_disk(path, exc)
    if full is not None:
        return full
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return StoreError(f"{path} is corrupt ({text}); restore it from a backup or move it aside")
    if "disk I/O" in text:  # a failing disk, a quota, a lost mount: not a damaged file
        text += ": the system could not read or write it; check the disk (dmesg) and try again"
    return StoreError(f"{path}: {text}")
