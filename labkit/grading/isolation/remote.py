"""The ``Namespace`` a check receives under ``labkit grade``: the student's code is elsewhere.

``RemoteNamespace`` keeps the contract of ``labkit.grading.checks.Namespace``
(``ns.NAME(*args)``, ``ns.harness(...)``, ``ns.workdir``, ``ns.spawn(...)``,
``ns.redis_url()``, ``ns.services(...)``) over the channel to a ``StudentProcess``
(``grader_side``), with every value crossing as plain data. A student exception comes
back as ``StudentRaised`` with the student's line; the exercise stub comes back as
``NotImplementedError`` so the check reads "not started".
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from labkit.grading.checks import CheckFailed, Endpoint, Namespace, StudentRaised
from labkit.grading.isolation.channel import (
    NotData,
    Op,
    Reply,
    decode,
    encode,
    harness_target,
    request,
)
from labkit.grading.isolation.grader_side import StudentProcess
from labkit.grading.isolation.processes import kill_tree
from labkit.grading.isolation.services import private_redis
from labkit.grading.stub import is_stub_text
from labkit.lang import _


def _plain() -> str:
    """What may cross the channel, in the reader's language."""
    return _("plain data (None, bool, int, float, str, bytes, list, tuple, dict)")


class RemoteFunction:
    """``ns.NAME`` for a callable definition: calling it sends the arguments as data."""

    def __init__(self, ns: RemoteNamespace, name: str) -> None:
        self._ns = ns
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ns._call(Op.CALL, self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<student function {self.__name__}>"


class RemoteNamespace(Namespace):
    """The ``Namespace`` contract over the channel: the student's code is in another process."""

    def __init__(self, student: StudentProcess) -> None:
        super().__init__({}, student.workdir)
        self._student = student
        self._redis: str | None = None
        #: The student's functions this check looked up: a call sends its name, and the
        #: student's side finds it again (a name rebound to data answers "missing"), so
        #: a check calling ``ns.f`` in a loop asks once whether ``f`` is a function.
        self._functions: dict[str, RemoteFunction] = {}

    @contextlib.contextmanager
    def seeded(self, seed: str) -> Iterator[None]:
        """Nothing to do here: the student's side seeds its ``random`` module in the fork
        that runs the check (``StudentProcess.begin_check``)."""
        yield

    def redis_url(self) -> str:
        """A Redis for this check alone, on a socket in the student's folder (see services)."""
        if self._redis is None:
            self._redis = private_redis(self.spawn, self.workdir)
        return self._redis

    def services(self, *names: str) -> dict[str, Endpoint]:
        """The notebook's own services (``NotebookServices``), reached by the student's code
        inside its network namespace and by the check through relays. Where the machine
        can make no namespace, the machine's, shared (the grading log says so)."""
        own = self._student.services()
        return own.endpoints(*names) if own is not None else super().services(*names)

    def _call(self, op: Op, name: str, args: Any, kwargs: Any) -> Any:
        try:
            message = request(op, name, encode(list(args)), encode(dict(kwargs)))
        except NotData as exc:
            raise TypeError(f"a check passed something that is not data to {name}: {exc}") from exc
        reply = self._student.request(message)
        return self._value(reply, name, op == Op.HARNESS)

    def _value(self, reply: dict[str, Any], name: str, harness: bool) -> Any:
        if Reply.VALUE in reply:
            try:
                return decode(reply[Reply.VALUE])
            except (NotData, ValueError, TypeError) as exc:
                raise CheckFailed(
                    _plain(),
                    _("a malformed answer from {name} ({error})").format(name=name, error=exc),
                ) from None
        if Reply.NOT_DATA in reply:
            raise CheckFailed(
                _("{name} to return {plain_data}").format(name=name, plain_data=_plain()),
                str(reply[Reply.NOT_DATA])[:200],
                "return numbers, strings, lists, tuples or dicts, not objects",
            )
        if Reply.FAILED in reply:  # a harness's verdict: it can only take points away
            failed = reply[Reply.FAILED] if isinstance(reply[Reply.FAILED], dict) else {}
            raise CheckFailed(
                str(failed.get("expected", ""))[:300],
                str(failed.get("got", ""))[:300],
                str(failed.get("hint", ""))[:300] or None,
            )
        if Reply.MISSING in reply:
            raise self._missing(str(reply.get("name") or name)[:100])
        if Reply.RAISED in reply:
            raise self._raised(reply[Reply.RAISED], harness)
        raise CheckFailed(
            "an answer from your code", _("an unexpected reply to {name}").format(name=name)
        )

    def _raised(self, data: Any, harness: bool) -> BaseException:
        data = data if isinstance(data, dict) else {}
        types = tuple(str(t) for t in data.get("types", ()) if isinstance(t, str))[:20]
        message = str(data.get("message", ""))[:300]
        where = str(data.get("where", ""))[:100]
        self._student.note_raised(types, message)
        if "NotImplementedError" in types and is_stub_text(message):
            return NotImplementedError(message)
        if harness and not data.get("student"):
            return RuntimeError(f"the harness raised {types[:1] or ('an error',)[0]}: {message}")
        return StudentRaised(types, message, where)

    @staticmethod
    def _missing(name: str) -> CheckFailed:
        return CheckFailed(
            _("a definition named {name} in the notebook").format(name=repr(name)),
            _("no such name"),
            _("run the cell that defines {name} (and do not rename it), then check again").format(
                name=name
            ),
        )

    def harness(self, target: str, *args: Any, **kwargs: Any) -> Any:
        harness_target(target)  # refused here, before anything is sent
        return self._call(Op.HARNESS, target, args, kwargs)

    def spawn(
        self, argv: list[str], warm: Sequence[str] = (), **kwargs: Any
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` confined like the student's process, killed after the check.

        ``warm``: modules a Python program (``python -m MODULE`` or ``python SCRIPT``)
        imports; it is then forked from the notebook's zygote that imported them once
        (``labkit.grading.isolation.warm``), where the machine allows.
        """
        student = self._student
        cwd = Path(kwargs.pop("cwd", self.workdir))
        student.confinement.hand_over(self.workdir)
        # A pid namespace of its own: it sees only its own tree, not the host's processes
        # (the grader's command line, other students' consumers). The pids it reports are
        # inner numbers; the Celery harness looks them up (proctree.host_pids).
        group = student.group.child(f"spawn-{len(self._spawned)}") if student.group else None
        proc: Any = None
        if warm and group is not None:
            proc = student.warm_start(argv, warm, cwd, group, kwargs)
        if proc is None:
            proc = student.confinement.popen(
                argv, cwd, own_pids=True, group=group, netns=student.netns, **kwargs
            )
        self._spawned.append(proc)
        return proc  # type: ignore[no-any-return]

    def kill(self, proc: subprocess.Popen[Any]) -> None:
        """SIGKILL a process ``spawn`` started, with everything it started; reap it."""
        kill_tree(proc)

    def close(self) -> None:
        for proc in self._spawned:
            self.kill(proc)
        self._spawned.clear()
        self._redis = None  # it was one of them

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._functions:
            return self._functions[name]
        reply = self._student.request(request(Op.GET, name))
        if reply.get(Reply.CALLABLE):
            function = self._functions[name] = RemoteFunction(self, name)
            return function
        return self._value(reply, name, False)
