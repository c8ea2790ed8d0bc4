"""The benchmark cannot rot: every subject of bench/ runs a handful of jobs, each once.

Nothing here is timed (performance is measured by ``make bench`` only). Each subject,
SQLite and PostgreSQL, labkit, peers and raw loops alike, enqueues a few jobs and drains
them through the same ``work_one`` the bench drives; the check reads what happened (the
effects the subject ran, or its ledger table) and what is left in its queue. One small
``bench/run.py`` run checks the process plumbing and that RESULTS.md is written from the
run's own rows.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

pytest.importorskip("psycopg", reason="the bench needs the `services` extra (make venv-test)")

from bench import pg  # noqa: E402
from bench.adapters import ADAPTERS  # noqa: E402
from bench.report import summarize  # noqa: E402
from bench.streams import STREAM_ADAPTERS  # noqa: E402
from bench.streams import drop as drop_streams  # noqa: E402

N = 7
#: The third-party package each peer needs (the `bench` extra).
NEEDS = {"huey": "huey", "persistqueue": "persistqueue", "litequeue": "litequeue",
         "procrastinate": "procrastinate", "pgqueuer": "pgqueuer"}


class Recorder:
    """The bench's effect without a file: remembers each ``i`` it ran, in order."""

    def __init__(self) -> None:
        self.ran: list[int] = []
        self.hooks = 0

    def before(self, i: int) -> None:
        self.hooks += 1

    def after(self, i: int) -> None:
        pass

    def __call__(self, i: int) -> None:
        self.before(i)
        self.ran.append(i)
        self.after(i)


def _needs(name: str) -> None:
    module = NEEDS.get(name)
    if module and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: pip install -e '.[bench]'")


def _drain(make: Callable[[Path], object], where: Path, ledger: Callable[[], list[int]] | None):
    where.mkdir(parents=True)
    subject = make(where)
    try:
        subject.enqueue(N)  # type: ignore[attr-defined]
        effect = Recorder()
        for _ in range(10 * N):
            # procrastinate and pgqueuer drain the whole queue per call, then take
            # seconds to shut down: one call is enough.
            if (subject.work_one(effect, "smoke") == 0  # type: ignore[attr-defined]
                    or getattr(subject, "drains", False)):
                break
        ran = ledger() if ledger is not None else effect.ran
        assert sorted(ran) == list(range(N)), f"each job once, got {sorted(ran)}"
        assert effect.hooks == N
        assert subject.remaining() == 0  # type: ignore[attr-defined]
    finally:
        subject.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_each_sqlite_subject_runs_every_job_once(name: str, tmp_path: Path) -> None:
    _needs(name)
    where = tmp_path / name

    def ledger() -> list[int]:
        import sqlite3

        with sqlite3.connect(where / "jobs.db") as conn:
            return [i for (i,) in conn.execute("SELECT i FROM effects")]

    _drain(ADAPTERS[name], where, ledger if name == "labkit_ledger" else None)


@pytest.mark.parametrize("name", sorted(pg.PG_ADAPTERS))
def test_each_postgres_subject_runs_every_job_once(
    name: str, tmp_path: Path, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs(name)
    monkeypatch.setattr(pg, "DSN", postgres_dsn)
    # The schema is named after the folder: unique, as other runs share the server.
    where = tmp_path / f"smoke_{uuid.uuid4().hex[:10]}"
    try:
        _drain(pg.PG_ADAPTERS[name], where,
               (lambda: pg.ledger_effects(where)) if name == "pg_labkit_ledger" else None)
    finally:
        pg.drop(where)
    with pg.psycopg.connect(postgres_dsn) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                            (pg.schema_for(where),)).fetchone()
    assert left == (0,), "the subject's schema was dropped"


def test_a_tiny_run_writes_results_from_its_own_rows(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    md = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--engines", "sqlite", "--only", "W1",
         "--sizes", "30", "--repeats", "1", "--adapters", "labkit,raw_normal",
         "--out", str(out), "--results", str(md)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = md.read_text()
    assert "--sizes 30" in text, "the exact command is recorded"
    assert "Load average" in text and "labkit commit" in text
    for subject in ("| 30 | labkit |", "| 30 | raw sqlite WAL/NORMAL |"):
        assert subject in text


def _w1(name: str, n: int, rate: float) -> dict[str, object]:
    return {"workload": "W1", "adapter": name, "n": n, "repeat": 0, "enqueue_per_s": 1.0,
            "process_per_s": rate, "partial": False, "peak_rss_mb": 1.0}


@pytest.mark.parametrize(("labkit", "raw", "verdict"), [(40.0, 100.0, "**missed**"),
                                                        (70.0, 100.0, "met"),
                                                        (510.0, 1000.0, "met")])
def test_verdicts_come_from_the_rows(labkit: float, raw: float, verdict: str) -> None:
    rows = [_w1("pg_labkit", 2_000, labkit), _w1("pg_raw", 2_000, raw),
            _w1("pg_labkit", 10_000, labkit * 1.1), _w1("pg_raw", 10_000, raw)]
    text = summarize({"rows": rows})
    line = next(x for x in text.splitlines() if "≥ 0.5× raw loop at N=2,000" in x)
    assert f"{labkit / raw:.2f}" in line and line.endswith(f"| {verdict} |")
    flat = next(x for x in text.splitlines() if "labkit PostgreSQL flat" in x)
    assert "+10 %" in flat and flat.endswith("| met |")


@pytest.mark.parametrize("name", sorted(STREAM_ADAPTERS))
def test_each_redis_subject_runs_every_job_once(
    name: str, tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import streams

    monkeypatch.setattr(streams, "URL", redis_url)
    # The key prefix is named after the folder: unique, as other runs share the server.
    where = tmp_path / f"smoke_{uuid.uuid4().hex[:10]}"
    try:
        _drain(STREAM_ADAPTERS[name], where, None)
    finally:
        drop_streams(where)
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        assert not list(client.scan_iter(match=f"{streams.prefix_for(where)}:*"))
    finally:
        client.close()


def test_the_enqueue_profile_runs_and_names_each_piece(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from bench import profile_enqueue

    monkeypatch.setattr(profile_enqueue, "N", 300)
    profile_enqueue.main()
    printed = capsys.readouterr().out
    for piece in ("payload_text", "insert_jobs + commit", "without the jobs_ready index",
                  "without the unique key index", "the row alone", "raw executemany",
                  "enqueue_many / raw"):
        assert piece in printed, printed
