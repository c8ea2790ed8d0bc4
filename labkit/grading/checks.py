"""The check machinery shared by the student's ``check("exNN")`` and ``labkit grade``.

A check is a small function of the student's namespace that either returns (passed) or
raises ``CheckFailed`` with what was expected, what happened and a hint. Each check
runs in its own thread with a timeout, so an infinite loop in the student's code names
the check that hung instead of freezing the notebook; a runaway loop is then stopped
by raising an exception inside that thread (``PyThreadState_SetAsyncExc``), which works
for pure-Python loops (the usual culprit) and is harmless otherwise.

nbgrader and otter-grader do the same job with cell metadata and Docker images; labkit
keeps checks in plain Python modules the instructor owns, which is why it needs neither.
The module is about 500 lines: the check, its outcome, its timeout and its
report are one vocabulary every exercise's checks speak.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import random
import re
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from labkit.grading.course import PACKAGE
from labkit.grading.isolation.channel import harness_target
from labkit.grading.seeds import student_seed
from labkit.grading.stub import is_stub
from labkit.lang import _

#: Seconds a single check may run before it is reported as hung.
DEFAULT_TIMEOUT = 10.0
#: Where the graded namespace keeps the cells it was built from (``[(index, source)]``),
#: so a harness can build the same namespace again in a brand-new process.
CELLS = "__cells__"


class CheckStatus(StrEnum):
    """What became of one check: the gradebook's ``status`` column and ``check()``'s colour."""

    PASSED = "passed"
    FAILED = "failed"
    #: The exercise's stub raised: nothing to judge yet (not the student's mistake).
    NOT_STARTED = "not started yet"
    TIMED_OUT = "timed out"
    #: The notebook could not be run far enough to try the check (the reason is in ``got``).
    NOT_GRADED = "not graded"


class CheckFailed(Exception):
    """A check found the student's code does not meet the contract."""

    def __init__(self, expected: str, got: str, hint: str | None = None) -> None:
        super().__init__(f"expected {expected}, got {got}")
        self.expected = expected
        self.got = got
        self.hint = hint


class CheckTimedOut(BaseException):
    """Raised inside a check's thread to stop code that ran past its timeout."""


class StudentRaised(Exception):
    """The student's code raised: what it raised, as data, and the student's line.

    Checks see student exceptions only in this form (under ``labkit grade`` the
    exception happened in another process), so they test its kind by name:
    ``exc.is_a("ValueError")`` is true for a ValueError or any subclass of it.
    """

    def __init__(self, type_names: tuple[str, ...], message: str, where: str = "") -> None:
        super().__init__(f"{type_names[0] if type_names else 'Exception'}: {message}")
        self.type_names = tuple(type_names)
        self.message = message
        self.where = where

    @classmethod
    def from_exception(cls, exc: BaseException) -> StudentRaised:
        names = tuple(k.__name__ for k in type(exc).__mro__ if k is not object)
        text = str(exc).strip().splitlines()
        first = text[0] if text else ""
        if len(first) > 200:
            first = first[:197] + "..."
        return cls(names, first, _where(exc).strip().strip("()"))

    @property
    def type_name(self) -> str:
        """The class name of what the student raised."""
        return self.type_names[0] if self.type_names else "Exception"

    def is_a(self, *names: str) -> bool:
        """True when what the student raised is (a subclass of) one of the named classes."""
        return any(name in self.type_names for name in names)

    def describe(self) -> str:
        """'your code raised ValueError: limit is required (line 12 of redrive)'."""
        text = _("your code raised {error_type}").format(error_type=self.type_name)
        if self.message:
            text += f": {self.message}"
        if self.where:
            text += f" ({where_words(self.where)})"
        return text


_WHERE = re.compile(r"line (\d+) of (.+)")


def where_words(where: str) -> str:
    """'line 12 of redrive', as the student's process reports it, in the reader's language."""
    found = _WHERE.fullmatch(where.strip().strip("()"))
    if found is None:
        return where
    return _("line {line} of {name}").format(line=found[1], name=found[2])


def _student_call(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with any ``Exception`` it raises turned into ``StudentRaised``.

    The exercise stub (``NotImplementedError("Exercise ...")``) passes unchanged so the
    check reads "not started yet", and so do ``BaseException``s that are not errors
    of the student's code (a simulated crash, a check's timeout).
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except StudentRaised:
            raise
        except Exception as exc:
            if _is_not_started(exc):
                raise
            raise StudentRaised.from_exception(exc) from exc

    call.__name__ = getattr(fn, "__name__", "student_call")
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def expect(ok: bool, expected: str, got: object, hint: str | None = None) -> None:
    """Fail the running check unless ``ok``; ``got`` is what the student's code produced."""
    if not ok:
        raise CheckFailed(expected, got if isinstance(got, str) else repr(got), hint)


@dataclass(frozen=True)
class Endpoint:
    """A service's URL as the student's processes reach it, and as the check does."""

    student: str
    checker: str


#: The lab's services, as ``compose.yaml`` starts them and the lessons use them.
LAB_SERVICES = {
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//",
    "postgres": "postgresql://postgres@127.0.0.1:5432/test",
    "redis": "redis://127.0.0.1:6379/0",
}


class Namespace:
    """The student's side of a check: their definitions, their folder, their processes.

    Checks touch student code only through this object, and only in these ways, so the
    same check runs in the notebook (everything in one process) and under ``labkit
    grade`` (student code in a confined process, the check in the trusted one):

    - ``ns.NAME(*args)``: call the student's top-level ``NAME`` with plain data (None,
      bool, int, float, str, list, tuple, dict) and get plain data back;
    - ``ns.harness("labkit.grading.exercises.exNN.harness:FUNC", *args)``: run a labkit harness
      function beside the student's code, ``FUNC(values, *args)``, data in and out (for
      checks that must hand the student's code live objects: a connection, a clock);
    - ``ns.workdir``: the student's own folder, the working directory of their code;
      files written by ``%%writefile`` cells are there, and checks put databases there
      and read them back themselves;
    - ``ns.spawn(argv, **popen_kwargs)``: a new process running student code, confined
      like the student's own and killed with its whole tree when the check ends;
    - ``ns.redis_url()`` and ``ns.services("rabbitmq", "postgres")``: the services the
      student's code and the check share (under ``labkit grade``, the student's own).
    """

    def __init__(self, values: Mapping[str, Any], workdir: Path | None = None) -> None:
        self._values = values
        self.workdir = Path(workdir) if workdir is not None else Path.cwd()
        self._spawned: list[subprocess.Popen[Any]] = []

    def harness(self, target: str, *args: Any, **kwargs: Any) -> Any:
        """Run the labkit harness function ``module:function`` on the student's definitions."""
        module_name, func_name = harness_target(target)
        func = getattr(importlib.import_module(module_name), func_name)
        try:
            return func(self._values, *args, **kwargs)
        except StudentRaised:
            raise
        except Exception as exc:
            if _is_not_started(exc) or not _where(exc):
                raise  # the stub, or labkit's own error: not the student's to fix
            raise StudentRaised.from_exception(exc) from exc

    @contextlib.contextmanager
    def seeded(self, seed: str) -> Iterator[None]:
        """The student's ``random`` module seeded with ``seed`` (``student_seed``) for the
        block, then put back as it was: here it is the notebook's own."""
        state = random.getstate()
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)

    def spawn(
        self, argv: list[str], warm: Sequence[str] = (), **kwargs: Any
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` in the student's folder, in its own session, killed after the check.

        ``warm`` names modules a Python program (``python -m MODULE`` or ``python
        SCRIPT``) imports: under ``labkit grade`` it may be forked from an interpreter
        that imported them once; here it is ignored.
        """
        kwargs.setdefault("cwd", self.workdir)
        kwargs["start_new_session"] = True
        proc = subprocess.Popen(argv, **kwargs)
        self._spawned.append(proc)
        return proc

    def redis_url(self) -> str:
        """The Redis this check and the student's code share: in ``check()``, the lab's.

        ``LABKIT_REDIS_URL`` or Redis on 127.0.0.1:6379 (``docker compose up -d``), in
        its database 3, not the default 0: code that ignores the URL it is given and
        connects to the default Redis fails here as it fails under ``labkit grade``, where
        each check gets a private one instead (``labkit.grading.isolation.services``).
        """
        return os.environ.get("LABKIT_REDIS_URL", "redis://127.0.0.1:6379/3")

    def services(self, *names: str) -> dict[str, Endpoint]:
        """Where the student's code and the check reach each named service (``rabbitmq``,
        ``postgres``): in ``check()``, the lab's own on 127.0.0.1 (``docker compose up
        -d``), the same address for both. Under ``labkit grade`` the notebook gets its own
        (``labkit.grading.isolation.services.NotebookServices``)."""
        return {name: Endpoint(LAB_SERVICES[name], LAB_SERVICES[name]) for name in names}

    def kill(self, proc: subprocess.Popen[Any]) -> None:
        """SIGKILL a process ``spawn`` started, with its process group; reap it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)

    def close(self) -> None:
        """Kill every process the check spawned, with its whole process group."""
        for proc in self._spawned:
            self.kill(proc)
        self._spawned.clear()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            value = self._values[name]
        except KeyError:
            raise CheckFailed(
                _("a definition named {name} in the notebook").format(name=repr(name)),
                _("no such name"),
                _(
                    "run the cell that defines {name} (and do not rename it), then check again"
                ).format(name=name),
            ) from None
        return _student_call(value) if callable(value) else value


@dataclass(frozen=True)
class Check:
    """One named, scored property of an exercise."""

    name: str
    points: int
    hint: str
    run: Callable[[Namespace], None]
    hidden: bool = False
    timeout: float = DEFAULT_TIMEOUT
    #: A mistake this check catches loses or duplicates an effect, lets two holders run,
    #: shows one owner's data to another, or never runs a retried job again: failing it
    #: caps the exercise's score at half (``scoring.score``).
    severe: bool = False

    def outcome(
        self, status: str, earned: int = 0, expected: str = "", got: str = "", hint: str = ""
    ) -> Outcome:
        """What this check found, as an ``Outcome`` carrying its name, points and kind.

        The check's own words (its hint, a literal expectation) are put in the reader's
        language here, in the process that ran the check: it is the one that loaded the
        hidden checks' catalog. What it got is never looked up (a student's value that
        happens to equal a message is shown as it is)."""
        expected, hint = (_(text) if text else text for text in (expected, hint))
        return Outcome(
            self.name, self.points, earned, status, expected, got, hint, self.hidden, self.severe
        )


@dataclass
class Checks:
    """The checks of one exercise, collected with the ``@CHECKS.add(points, hint)`` decorator.

    ``network=True`` (public checks only) says the student's code must reach the network:
    PostgreSQL, Redis or RabbitMQ on 127.0.0.1, or an HTTP server the check calls. Under
    ``labkit grade`` its processes then share the machine's network instead of having none.

    ``lanes`` (public checks only): how many copies of the student's process ``labkit
    grade`` runs the checks in at once, each copy (a lane) with its own folder, uid,
    control group and services, and its share of the checks (every ``lanes``-th one). For
    exercises whose checks mostly wait on real processes (a consumer's idle threshold, a
    server starting): their waits overlap. Each check still runs in a fresh fork of its
    lane's process, seeded by its name, so its outcome does not depend on its lane.
    """

    exercise: str
    title: str = ""
    needs: tuple[str, ...] = ()
    hidden: bool = False
    items: list[Check] = field(default_factory=list)
    network: bool = False
    lanes: int = 1

    def add(
        self, points: int, hint: str, timeout: float = DEFAULT_TIMEOUT, *, severe: bool = False
    ) -> Callable[[Callable[[Namespace], None]], Callable[[Namespace], None]]:
        def register(fn: Callable[[Namespace], None]) -> Callable[[Namespace], None]:
            check = Check(fn.__name__, points, hint, fn, self.hidden, timeout, severe)
            self.items.append(check)
            return fn

        return register

    def __iter__(self) -> Iterator[Check]:
        return iter(self.items)


@dataclass(frozen=True)
class Outcome:
    """What one check found."""

    check: str
    points: int
    earned: int
    status: str
    expected: str = ""
    got: str = ""
    hint: str = ""
    hidden: bool = False
    severe: bool = False

    @property
    def label(self) -> str:
        """The check's name as reports show it: ``name (hidden, severe)``."""
        kinds = [k for k, on in ((_("hidden"), self.hidden), (_("severe"), self.severe)) if on]
        return self.check + (f" ({', '.join(kinds)})" if kinds else "")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _stop_thread(thread: threading.Thread) -> None:
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(CheckTimedOut)
        )


#: The steady clock as imported, not as a check may patch it (``wallclock.clock_moved``).
_steady = time.monotonic


def run_with_timeout(fn: Callable[[], Any], timeout: float) -> tuple[bool, BaseException | None]:
    """Run ``fn`` in a daemon thread; return ``(finished, error)``.

    When ``fn`` is still running after ``timeout`` seconds (``math.inf``: none), a
    ``CheckTimedOut`` is raised inside it and ``(False, None)`` is returned whether or
    not it stopped. The wait is made of short ones, so that an exception sent to the
    waiting thread (a check that runs this inside it, timed out) arrives between two.
    """
    box: list[BaseException | None] = [None]

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - every failure becomes an outcome
            box[0] = exc

    thread = threading.Thread(target=target, name="labkit-check", daemon=True)
    thread.start()
    deadline = _steady() + timeout
    try:
        while thread.is_alive() and (left := deadline - _steady()) > 0:
            thread.join(min(left, 0.05))
    except BaseException:
        # The caller was interrupted (Jupyter's stop button, a check timed out around
        # this one): stop the thread too.
        _stop_thread(thread)
        raise
    if thread.is_alive():
        _stop_thread(thread)
        thread.join(0.5)
        return False, None
    return True, box[0]


def _where(exc: BaseException) -> str:
    """' (line N of name)' for the innermost frame that is not labkit's or the stdlib's."""
    labkit_dir = str(PACKAGE)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        name = frame.filename
        if name.startswith(labkit_dir) or "/lib/python" in name:
            continue
        return f" (line {frame.lineno} of {frame.name})"
    return ""


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 200:
        first = first[:197] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _is_not_started(exc: BaseException) -> bool:
    return is_stub(exc)


def run_check(check: Check, ns: Namespace, timeout: float | None = None) -> Outcome:
    """Run one check against the namespace and turn whatever happens into an ``Outcome``."""
    limit = check.timeout if timeout is None else min(timeout, check.timeout)

    base = check.outcome

    def seeded_run() -> None:
        with ns.seeded(student_seed(check.name)):
            check.run(ns)

    try:
        finished, error = run_with_timeout(seeded_run, limit)
    finally:
        ns.close()
    if not finished:
        return base(
            CheckStatus.TIMED_OUT,
            expected=_("to finish within {limit}s").format(limit=f"{limit:g}"),
            got=_("still running when the time ran out (an infinite loop, or waiting forever?)"),
            hint=check.hint,
        )
    if error is None:
        return base(CheckStatus.PASSED, earned=check.points)
    if _is_not_started(error):
        return base(
            CheckStatus.NOT_STARTED,
            got=_("{name} is still a stub").format(name=error),
            hint=_("replace the `raise NotImplementedError` line"),
        )
    if isinstance(error, CheckFailed):
        return base(
            CheckStatus.FAILED,
            expected=error.expected,
            got=error.got,
            hint=error.hint or check.hint,
        )
    if isinstance(error, CheckTimedOut):
        return base(CheckStatus.TIMED_OUT, got=_("stopped"), hint=check.hint)
    if isinstance(error, StudentRaised):
        return base(CheckStatus.FAILED, got=error.describe(), hint=check.hint)
    return base(
        CheckStatus.FAILED,
        expected=_("no exception"),
        got=_("raised {error}{where}").format(
            error=_short(error), where=f" ({where_words(_where(error))})" if _where(error) else ""
        ),
        hint=check.hint,
    )


def run_checks(
    checks: list[Check],
    values: Mapping[str, Any],
    timeout: float | None = None,
    workdir: Path | None = None,
) -> list[Outcome]:
    """Run every check in order; one failing, crashing or hanging check never stops the rest."""
    ns = Namespace(values, workdir)
    return [run_check(check, ns, timeout) for check in checks]
