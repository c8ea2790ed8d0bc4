"""``signal.signal`` off the main thread, as a notebook's main thread would take it.

Jupyter runs a notebook's cells on the kernel's main thread, where a cell may install a
signal handler (``signal.signal(signal.SIGTERM, on_stop)`` at module level). The grader
runs cells and checks on threads of their own, where ``signal.signal`` raises
ValueError: a cell that installs a handler would stop there, the rest of it lost, and
the handler never seen by the checks. ``signals_as_on_the_main_thread`` keeps such
handlers instead, as the main thread would install them: the cells' in the namespace
(``SIGNAL_HANDLERS``), for the checks to read with ``signal.getsignal`` and for a forked
child (whose only thread is a main one) to install for real with
``install_the_notebooks_handlers``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

#: Signals a timer sends (signal.alarm, signal.setitimer): off the main thread their
#: handlers are refused as Python refuses them, since the timer would go off for real.
TIMER_SIGNALS = frozenset({signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF})

#: The namespace's key for the handlers its cells installed off the main thread.
SIGNAL_HANDLERS = "__labkit_signal_handlers__"


@contextmanager
def signals_as_on_the_main_thread(
    values: MutableMapping[str, Any] | None = None, cells: bool = False
) -> Iterator[None]:
    """``signal.signal`` and ``signal.getsignal`` working off the main thread, for the block.

    Off the main thread the handlers are kept, as the main thread would install them (no
    check sends this process a signal); on the main thread (a forked child's) they are
    installed for real. A timer's signal (``TIMER_SIGNALS``) is the exception: its
    handler kept while the timer goes off for real would end the grader, or leave a call
    waiting forever, so it gets Python's own ValueError. The student's own names for the
    two functions (``from signal import signal``) in ``values`` are swapped too, then
    put back, even those bound inside the block.

    ``cells``: the block runs the notebook's cells, whose handlers stay in ``values``
    (``SIGNAL_HANDLERS``) for later blocks to see; a check's own are forgotten after it.
    """
    if threading.current_thread() is threading.main_thread() and not cells:
        yield
        return
    real_signal, real_getsignal = signal.signal, signal.getsignal
    # The cells' handlers so far: a check starts from them, and forgets its own after.
    kept: dict[int, Any] = dict((values or {}).get(SIGNAL_HANDLERS) or {})

    def here(signum: int) -> bool:
        return threading.current_thread() is threading.main_thread() or int(signum) in TIMER_SIGNALS

    def fake_signal(signum: int, handler: Any) -> Any:
        if here(signum):
            return real_signal(signum, handler)
        if not (callable(handler) or handler in (signal.SIG_DFL, signal.SIG_IGN)):
            raise TypeError("signal handler must be signal.SIG_IGN, signal.SIG_DFL, or a callable")
        before = fake_getsignal(signum)
        kept[int(signum)] = handler
        if cells and values is not None:  # only a namespace that installed one holds any
            values[SIGNAL_HANDLERS] = dict(kept)
        return before

    def fake_getsignal(signum: int) -> Any:
        if here(signum) or int(signum) not in kept:
            return real_getsignal(signum)
        return kept[int(signum)]

    fakes: dict[Any, Any] = {real_signal: fake_signal, real_getsignal: fake_getsignal}
    reals = {fake_signal: real_signal, fake_getsignal: real_getsignal}
    setattr(signal, "signal", fake_signal)  # noqa: B010 - a plain assignment does not type-check
    setattr(signal, "getsignal", fake_getsignal)  # noqa: B010
    if values is not None:
        for name, value in list(values.items()):
            if any(value is real for real in fakes):
                values[name] = fakes[value]
    try:
        yield
    finally:
        setattr(signal, "signal", real_signal)  # noqa: B010
        setattr(signal, "getsignal", real_getsignal)  # noqa: B010
        if values is not None:
            for name, value in list(values.items()):
                if any(value is fake for fake in reals):
                    values[name] = reals[value]


def install_the_notebooks_handlers(values: MutableMapping[str, Any]) -> None:
    """Install for real, on this thread, the handlers the notebook's cells installed off
    the main thread: in a forked child (its one thread a main one), as a process started
    from the notebook would have them."""
    for signum, handler in dict(values.get(SIGNAL_HANDLERS) or {}).items():
        signal.signal(signum, handler)
