"""Fencing, transactional enqueue, bad input and secrets, in one process with a FakeClock.

Two ``JobStore`` objects on the same file play two workers (two connections, as two
processes would have). Every refused input is checked twice: the error says what was
wrong, and the data already there is intact (rows compared, or file bytes compared).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from proc_worker import EFFECTS_TABLE, apply_mutant, complete_with_effect

from labkit.clock import FakeClock
from labkit.errors import LeaseLost, PayloadError, StoreError, TransientError
from labkit.job import JobState
from labkit.keys import MAX_PAYLOAD_BYTES
from labkit.store import JobStore
from labkit.store import sqlite as store_module
from labkit.worker import Worker


def _rows(path: Path) -> list[tuple]:
    """Every job row, read with plain sqlite3 (not through the store under test)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.fixture
def two_workers(db_path, clock):
    a = JobStore(db_path, clock=clock)
    a.conn.execute(EFFECTS_TABLE)
    b = JobStore(db_path, clock=clock)
    yield a, b
    a.close()
    b.close()


def _zombie_scenario(a: JobStore, b: JobStore, clock: FakeClock, db_path: Path) -> dict:
    """A claims, stalls past its lease, B takes over; A tries to finish while B holds the
    job, then B finishes, then A tries again. Returns what happened at each step."""
    job_id = a.enqueue("charge", {"invoice": 42}, key="invoice-42")[0].id
    zombie = a.claim("a", lease_s=10)
    assert zombie is not None and zombie.id == job_id
    clock.advance(11)  # A hangs (GC pause, network) longer than its lease
    takeover = b.claim("b", lease_s=10)
    assert takeover is not None and takeover.id == job_id, "B must take over the expired lease"
    held = _rows(db_path)
    seen = {"zombie_while_held": complete_with_effect(a, zombie)}
    seen["row_unchanged"] = _rows(db_path) == held
    seen["holder"] = complete_with_effect(b, takeover)
    seen["zombie_after"] = complete_with_effect(a, zombie)
    effects = a.conn.execute("SELECT count(*) FROM effects WHERE job_id = ?", (job_id,))
    seen["effects"] = effects.fetchone()[0]
    return seen


def test_a_zombie_whose_lease_was_taken_over_cannot_complete(two_workers, clock, db_path):
    a, b = two_workers
    seen = _zombie_scenario(a, b, clock, db_path)
    assert seen == {"zombie_while_held": False, "row_unchanged": True, "holder": True,
                    "zombie_after": False, "effects": 1}
    before = _rows(db_path)
    zombie = a.jobs(state=None)[0]
    stale = zombie.__class__(**{**zombie.__dict__, "lease_token": "1.1", "state": JobState.RUNNING})
    for refused in (lambda: a.complete(stale), lambda: a.heartbeat(stale),
                    lambda: a.fail(stale, TransientError("late"))):
        with pytest.raises(LeaseLost, match="lease expired"):
            refused()
    assert _rows(db_path) == before  # LeaseLost changed nothing


@pytest.mark.parametrize(
    "mutant, expected",
    [
        # without the token check the zombie finishes B's job under B's feet
        ("no_token", {"zombie_while_held": True, "row_unchanged": False, "holder": False,
                      "zombie_after": False, "effects": 1}),
        # without any fence both finish and the effect happens twice
        ("no_fence", {"zombie_while_held": True, "row_unchanged": False, "holder": True,
                      "zombie_after": True, "effects": 3}),
    ],
)
def test_mutant_without_the_fence_the_zombie_completes(
    two_workers, clock, db_path, monkeypatch, mutant, expected
):
    patched = dict(store_module.SQL)
    monkeypatch.setattr(store_module, "SQL", patched)
    monkeypatch.setattr(sys.modules["proc_worker"], "SQL", patched)
    original = patched["complete"]
    apply_mutant(mutant)
    assert patched["complete"] != original, "the mutant must really remove the fence"
    a, b = two_workers
    assert _zombie_scenario(a, b, clock, db_path) == expected


def test_an_enqueue_rolled_back_with_the_callers_transaction_leaves_no_job(store, db_path):
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
    for outcome in ("ROLLBACK", "COMMIT"):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO orders (total) VALUES (100)")
        store.enqueue("send_receipt", {"order": 1}, key=f"receipt-{outcome}", conn=conn)
        conn.execute(outcome)
    conn.close()
    # Only the committed enqueue exists: the rolled-back one left neither order nor job.
    assert [j.key for j in store.jobs()] == ["receipt-COMMIT"]
    assert store.get_by_key("receipt-ROLLBACK") is None


# -- bad input -----------------------------------------------------------------------


@pytest.fixture
def filled(store, db_path):
    """A store that already holds jobs, and a snapshot of them to compare against."""
    for i in range(3):
        store.enqueue("email", {"to": f"user{i}"}, key=f"mail-{i}")
    return store, _rows(db_path)


@pytest.mark.parametrize(
    "payload, says",
    [
        ({"when": dt.datetime(2026, 1, 1)}, "not plain JSON"),  # a datetime, not JSON
        ({"amount": float("nan")}, "not plain JSON"),  # NaN is not JSON either
        ({"blob": "x" * (MAX_PAYLOAD_BYTES + 1)}, "byte limit"),  # over the size cap
    ],
    ids=["datetime", "nan", "oversized"],
)
def test_a_bad_payload_is_a_clear_error_and_stores_nothing(filled, db_path, payload, says):
    store, before = filled
    with pytest.raises(PayloadError, match=says):
        store.enqueue("email", payload, key="bad")
    assert _rows(db_path) == before


def test_an_unknown_kind_goes_dead_with_no_handler_and_the_others_still_run(filled, clock):
    store, _ = filled
    fax = store.enqueue("fax", {"to": "+55 11"}, key="fax-1")[0]
    done: list[str] = []
    worker = Worker(store, {"email": lambda job, ctx: done.append(job.payload["to"])}, clock=clock)
    assert worker.drain() == 4
    dead = store.get(fax.id)
    assert dead.state == JobState.DEAD and dead.attempt == 1  # permanent: no retries
    assert dead.dead_reason is not None and "no handler for kind 'fax'" in dead.dead_reason
    assert sorted(done) == ["user0", "user1", "user2"]


@pytest.mark.parametrize(
    "damage",
    ["garbage", "bad_page"],
    ids=["not_sqlite_at_all", "sqlite_header_then_garbage"],
)
def test_a_corrupt_database_file_is_refused_and_left_byte_identical(tmp_path, damage):
    path = tmp_path / "jobs.db"
    if damage == "garbage":
        path.write_bytes(os.urandom(8192))
    else:
        with JobStore(path, clock=FakeClock()) as store:
            store.enqueue("email", {"to": "a"}, key="a")
        raw = bytearray(path.read_bytes())
        raw[100:] = b"\xff" * (len(raw) - 100)  # the header survives, every page is junk
        path.write_bytes(bytes(raw))
    before = path.read_bytes()
    with pytest.raises(StoreError, match="corrupt|not a SQLite database|cannot be read"):
        JobStore(path, clock=FakeClock())
    assert path.read_bytes() == before


def test_a_database_with_a_newer_schema_is_refused_and_its_jobs_kept(filled, db_path):
    store, before = filled
    store.close()
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("UPDATE labkit_meta SET value = '99' WHERE name = 'schema_version'")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    raw = db_path.read_bytes()
    with pytest.raises(StoreError, match="newer than this labkit"):
        JobStore(db_path, clock=FakeClock())
    assert db_path.read_bytes() == raw
    assert _rows(db_path) == before


_OPEN_AND_ENQUEUE = """
import sys
from pathlib import Path
from labkit.clock import FakeClock
from labkit.errors import StoreError
from labkit.store import JobStore
probe = Path(sys.argv[1]).parent / "probe"
try:
    probe.write_text("x")
    print("FOLDER WRITABLE")  # the sandbox did not take: the test must not pass
    sys.exit(0)
except PermissionError:
    pass
try:
    JobStore(sys.argv[1], clock=FakeClock()).enqueue("email", {"to": "z"}, key="z")
except StoreError as exc:
    print("StoreError:", exc)
else:
    print("ENQUEUED")
"""


def test_a_read_only_folder_is_a_clear_error_and_the_jobs_survive(filled, db_path):
    """CI runs as root, and root ignores permission bits: the child drops the capabilities
    that let it (setpriv), and proves it before the real check by failing to write a probe."""
    store, before = filled
    store.close()
    command = [sys.executable, "-c", _OPEN_AND_ENQUEUE, str(db_path)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot make a folder read-only")
        command = [setpriv, "--inh-caps=-all",
                   "--bounding-set=-dac_override,-dac_read_search", *command]
    folder = db_path.parent
    folder.chmod(0o555)
    try:
        said = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        folder.chmod(0o755)
    assert said.returncode == 0, said.stderr
    assert said.stdout.startswith("StoreError:") and "write access" in said.stdout, said.stdout
    assert _rows(db_path) == before
    with JobStore(db_path, clock=FakeClock()) as reopened:  # and it still works afterwards
        assert reopened.counts()["pending"] == 3


# -- secrets ---------------------------------------------------------------------------

SECRETS = ["hunter2-pw", "sk_live_51Habcdef0123456789", "4111 1111 1111 1111", "s3cr3t-tok"]


def test_secrets_never_reach_the_database_file(db_path, clock, rng):
    store = JobStore(db_path, clock=clock, rng=rng)
    # A payload carrying a credential field is refused, and the refusal does not echo it.
    with pytest.raises(PayloadError) as refused:
        store.enqueue("charge", {"card": "ref-1", "password": SECRETS[0]}, key="bad")
    assert SECRETS[0] not in str(refused.value)

    def leaky(job, ctx):
        raise TransientError(
            f"gateway said 401 for password={SECRETS[0]} Authorization: Bearer {SECRETS[1]} "
            f"card {SECRETS[2]} token: {SECRETS[3]}"
        )

    job = store.enqueue("charge", {"card": "ref-1"}, key="charge-1", max_attempts=2)[0]
    Worker(store, {"charge": leaky}, clock=clock).drain()
    dead = store.get(job.id)
    assert dead.state == JobState.DEAD and dead.attempt == 2  # the error really was stored
    assert "***" in (dead.last_error or "") and "***" in (dead.dead_reason or "")
    texts = [dead.last_error or "", dead.dead_reason or ""]
    texts += [a.error or "" for a in store.attempts(job.id)]
    texts += [d.reason + (d.error or "") for d in store.dead_letters()]
    store.close()
    files = [p for p in db_path.parent.iterdir() if p.name.startswith(db_path.name)]
    raw = b"".join(p.read_bytes() for p in files)  # the database and its -wal, byte for byte
    assert b"gateway said 401" in raw  # the sanitized error is in the bytes we search
    for secret in SECRETS:
        assert secret not in " ".join(texts)
        assert secret.encode() not in raw, f"{secret!r} reached {[p.name for p in files]}"
