"""Exercise 9: a Redis Streams consumer that recovers pending work and dead-letters poison.

The student's ``consume`` lives in ``stream_consumer.py`` (a ``%%writefile`` cell) in
their folder. Every check builds a stream under a prefix of its own on a real Redis
(``ns.redis_url()``: in ``check()`` the lab's, 127.0.0.1:6379 or ``LABKIT_REDIS_URL``;
under ``labkit grade`` one started for the check alone, on a unix socket in the
student's folder, so the student's code needs no network), runs the student's file in
processes started with ``ns.spawn`` (killed with SIGKILL where the check says, and with their whole
process group when the check ends), then judges only from what it reads in Redis
itself: the effects list, the PEL (``XPENDING``) and the dead-letter stream. The
prefix's keys are deleted at the end of every check.

The checks live in two modules: ``delivery_checks`` (each entry applied once, pending
work recovered or taken over, a live consumer's left alone) and ``kill_checks``
(crashes and kills). Each registers on ``consumers.CHECKS`` when imported; this module
imports them in the order the feedback lists them, and is where the catalog finds
``CHECKS``.
"""

from __future__ import annotations

from labkit.grading.exercises.ex09 import (  # noqa: F401 - imported to register, in order
    delivery_checks,
    kill_checks,
)
from labkit.grading.exercises.ex09.consumers import CHECKS

__all__ = ["CHECKS"]
