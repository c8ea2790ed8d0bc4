"""A meeting point for processes of one check: each waits there until all have arrived.

Two consumers that read the same record and then write it race only if both read before
either writes; left to the scheduler, one usually finishes first and the race never
shows. ``Rendezvous(folder, parties)`` makes it show every time: a process that
``arrive()``s writes a file named for itself in ``folder`` and waits until ``parties``
files are there (or ``timeout`` seconds passed: a party that never comes, because the
code under test never makes that read, must not hang the check). ``arrive()`` meets
once; later arrivals pass straight through.

``meet()`` meets again each time it is called: the n-th call of each process waits for
the n-th call of every other one, so two processes that read a record twice (an early
look, then the look that decides) both make the second read before either goes on. A
process that ``leave()``s (it has written, or ended) is waited for no more, and one that
waited a whole ``timeout`` in vain leaves: a party gone elsewhere costs one timeout, not
one per meeting.

``labkit.explore.killrun --meet FOLDER PARTIES`` calls ``meet()`` right after each
Redis read of a key and right before each write, and leaves after the first
transaction or script. The threading and multiprocessing ``Barrier`` do this for threads
and for processes one parent started together; these processes are started one by one
by a check, through the sandbox, and share only a folder.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from labkit.clock import Clock, SystemClock

#: Seconds a process waits at the meeting point for the others.
TIMEOUT_S = 20.0


class Rendezvous:
    """One process's side of a meeting of ``parties`` processes in ``folder``."""

    def __init__(
        self,
        folder: str | Path,
        parties: int,
        timeout: float = TIMEOUT_S,
        clock: Clock | None = None,
    ) -> None:
        self.folder, self.parties, self.timeout = Path(folder), parties, timeout
        self.clock = clock or SystemClock()
        self.met = False
        #: How many meetings this process has come to, and whether it meets no more.
        self.rounds, self.left = 0, False
        # Not the pid alone: two sandboxes each have a pid namespace of their own, where
        # both processes may be pid 2, and one file for two parties never meets.
        self.me = f"{os.getpid()}-{uuid.uuid4().hex}"

    def arrive(self) -> int:
        """Wait until every party has arrived (once per process); how many were there."""
        if self.met:
            return self.parties
        return self.meet()

    def meet(self) -> int:
        """Come to this process's next meeting and wait until every other party has come
        to its own meeting of that number, or left; how many were there."""
        if self.left:
            return self.parties
        self.met = True
        self.rounds += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / _here(self.me, self.rounds)).touch()
        deadline = self.clock.now() + self.timeout
        while True:
            here = len(self._there(self.rounds))
            if here >= self.parties:
                return here
            if self.clock.now() >= deadline:
                self.leave()
                return here
            self.clock.sleep(0.01)

    def leave(self) -> None:
        """Meet no more: the other parties stop waiting for this one."""
        if not self.left:
            self.left = True
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / f"{self.me}.gone").touch()

    def _there(self, meeting: int) -> set[str]:
        """The parties at their meeting number ``meeting`` (or past it: gone)."""
        came = {p.name.partition(".")[0] for p in self.folder.glob(_here("*", meeting))}
        return came | {p.name.partition(".")[0] for p in self.folder.glob("*.gone")}


def _here(party: str, meeting: int) -> str:
    """The file a party leaves at a meeting; the first meeting's is ``arrived``'s."""
    return f"{party}.here" if meeting == 1 else f"{party}.here.{meeting}"


def arrived(folder: str | Path) -> int:
    """How many processes have reached the meeting point in ``folder`` so far."""
    return len(list(Path(folder).glob("*.here")))
