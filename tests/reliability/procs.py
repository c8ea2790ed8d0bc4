"""Helpers for the reliability suite: start, finish and kill real worker processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from labkit.clock import SystemClock
from labkit.store import JobStore

WORKER = Path(__file__).with_name("proc_worker.py")
sys.path.insert(0, str(Path(__file__).parent))

from proc_worker import EFFECTS_TABLE  # noqa: E402


def spawn(spec: dict[str, Any]) -> subprocess.Popen[str]:
    """Start one worker process (tests/reliability/proc_worker.py) with ``spec``."""
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(spec)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    """Wait for a worker that must exit normally and return its report."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"worker exited {proc.returncode}:\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def killed(proc: subprocess.Popen[str], timeout: float = 120) -> bool:
    """Wait for a worker expected to die by SIGKILL; True when it did."""
    proc.communicate(timeout=timeout)
    return proc.returncode == -signal.SIGKILL


def new_db(path: Path) -> JobStore:
    """A job database with the ``effects`` ledger table next to the jobs."""
    store = JobStore(path, clock=SystemClock())
    store.conn.execute(EFFECTS_TABLE)
    return store


def effect_counts(store: JobStore) -> dict[int, int]:
    rows = store.conn.execute("SELECT job_id, count(*) FROM effects GROUP BY job_id")
    return {job_id: n for job_id, n in rows}


def log_counts(log: Path) -> dict[int, int]:
    counts: dict[int, int] = {}
    if log.exists():
        for line in log.read_text().split():
            counts[int(line)] = counts.get(int(line), 0) + 1
    return counts


def replay(test: str, seed: int) -> str:
    return f"replay: LABKIT_SEED={seed} .venv/bin/pytest tests/reliability -k {test}"

