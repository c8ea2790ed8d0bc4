"""``hold_in_subprocess``: a real process holding an advisory lock, for lesson 13."""

from __future__ import annotations

import signal
import threading
import uuid

import pytest

from labkit.errors import AlreadyRunning

pytest.importorskip("psycopg")

from labkit.backends.postgres.lock import hold_in_subprocess, single_instance_pg  # noqa: E402

pytestmark = pytest.mark.services


def test_a_sigkilled_holder_process_gives_the_lock_back(postgres_dsn):
    name = f"test-holder-{uuid.uuid4().hex[:12]}"
    proc, pid = hold_in_subprocess(postgres_dsn, name, application_name="holder-under-test")
    try:
        with pytest.raises(AlreadyRunning, match=f"pid {pid} \\(holder-under-test\\)"):
            with single_instance_pg(postgres_dsn, name):
                pass
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        for _ in range(500):  # the server ends the backend once it sees the socket close
            try:
                with single_instance_pg(postgres_dsn, name):
                    break
            except AlreadyRunning:
                threading.Event().wait(0.02)
        else:
            pytest.fail("the lock of a SIGKILLed holder process was never released")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)
