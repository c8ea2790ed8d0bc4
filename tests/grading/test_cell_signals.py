"""A cell that installs a signal handler runs whole, as it does on Jupyter's main thread.

The grader runs a notebook's cells on a thread of their own, where ``signal.signal``
raises ValueError: the rest of such a cell was lost, and a lock whose cell installed a
SIGTERM handler that deletes the lock file scored full marks. ``run_cells`` keeps the
handler as the kernel's main thread would install it (``isolation.signals``), and a
forked child installs it for real.
"""

from __future__ import annotations

import os
import signal
import textwrap
import threading

from labkit.grading.isolation.signals import (
    SIGNAL_HANDLERS,
    install_the_notebooks_handlers,
    signals_as_on_the_main_thread,
)
from labkit.grading.isolation.student_side import run_cells

CELL = textwrap.dedent(
    """
    import signal
    from signal import getsignal
    STOPPED = []
    def on_stop(signum, frame):
        STOPPED.append(signum)
    previous = signal.signal(signal.SIGTERM, on_stop)
    def after():  # defined after the signal.signal call: the cell ran to its end
        return getsignal(signal.SIGTERM)
    """
)


def test_a_cells_handler_is_kept_and_the_rest_of_the_cell_runs() -> None:
    real = signal.getsignal(signal.SIGTERM)
    values, notes = run_cells([(0, CELL)], cell_timeout=10.0)
    assert notes == []
    assert values[SIGNAL_HANDLERS] == {int(signal.SIGTERM): values["on_stop"]}
    assert signal.getsignal(signal.SIGTERM) is real  # the grader's own is untouched
    assert values["getsignal"] is signal.getsignal  # the student's name put back too
    # A check, on a thread of its own, sees the handler the cell installed.
    seen: list[object] = []

    def check() -> None:
        with signals_as_on_the_main_thread(values):
            seen.append(values["after"]())

    thread = threading.Thread(target=check)
    thread.start()
    thread.join()
    assert seen == [values["on_stop"]]


def test_a_forked_child_installs_the_notebooks_handler_for_real() -> None:
    values, notes = run_cells([(0, CELL)], cell_timeout=10.0)
    assert notes == []
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a job started from the notebook, stopped with SIGTERM
        try:
            install_the_notebooks_handlers(values)
            os.kill(os.getpid(), signal.SIGTERM)
            os.write(write_fd, repr(values["STOPPED"]).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    said = os.read(read_fd, 100).decode()
    os.close(read_fd)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert said == repr([int(signal.SIGTERM)])


def test_a_timers_handler_is_refused_as_python_refuses_it() -> None:
    cell = "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\nLATER = 1\n"
    values, notes = run_cells([(0, cell)], cell_timeout=10.0)
    assert len(notes) == 1 and "ValueError" in notes[0]
    assert "LATER" not in values and SIGNAL_HANDLERS not in values
