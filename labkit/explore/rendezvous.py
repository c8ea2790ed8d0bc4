"""A meeting point for processes of one check: each waits there until all have arrived.

Two consumers that read the same record and then write it race only if both read before
either writes; left to the scheduler, one usually finishes first and the race never
shows. ``Rendezvous(folder, parties)`` makes it show every time: a process that
``arrive()``s writes a file named for itself in ``folder`` and waits until ``parties``
files are there (or ``timeout`` seconds passed: a party that never comes, because the
code under test never makes that read, must not hang the check). Each process meets
once; later arrivals pass straight through.

``labkit.explore.killrun --meet FOLDER PREFIX PARTIES`` calls it right after the first
Redis read of a key that starts with ``PREFIX`` (the consumers' done records). The
threading and multiprocessing ``Barrier`` do this for threads and for processes one
parent started together; these processes are started one by one by a check, through
the sandbox, and share only a folder.
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

    def arrive(self) -> int:
        """Wait until every party has arrived (once per process); how many were there."""
        if self.met:
            return self.parties
        self.met = True
        self.folder.mkdir(parents=True, exist_ok=True)
        # Not the pid alone: two sandboxes each have a pid namespace of their own, where
        # both processes may be pid 2, and one file for two parties never meets.
        (self.folder / f"{os.getpid()}-{uuid.uuid4().hex}.here").touch()
        deadline = self.clock.now() + self.timeout
        while True:
            here = len(list(self.folder.glob("*.here")))
            if here >= self.parties or self.clock.now() >= deadline:
                return here
            self.clock.sleep(0.01)


def arrived(folder: str | Path) -> int:
    """How many processes have reached the meeting point in ``folder`` so far."""
    return len(list(Path(folder).glob("*.here")))
