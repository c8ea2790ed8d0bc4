"""Exercise 10: async request-reply over HTTP, graded through real HTTP calls.

The student's ``ex10_app.py`` (written by the notebook's ``%%writefile`` cell into
their folder) is served by uvicorn in a process of its own (``ns.spawn``, killed with
its tree after each check) on a unix socket the check made, and driven with httpx
(``labkit.grading.exercises.ex10.served``). The verdict comes from the answers and from the
job database, which the check reads itself: a 202 whose job is not in the database
fails, whatever the body says.

One check kills the server at the moment it starts a 202 (the app's test point,
``labkit.grading.exercises.ex10.harness``): a job written after the answer (a background task)
is not in the database then.

The checks live in two modules, by the route they call: ``request_checks`` (POST)
and ``status_checks`` (GET). Each registers on ``crashes.CHECKS`` when imported; this
module imports them in the order the feedback lists them, and is where the catalog
finds ``CHECKS``.
"""

from __future__ import annotations

from labkit.grading.exercises.ex10 import (  # noqa: F401 - imported to register, in order
    request_checks,
    status_checks,
)
from labkit.grading.exercises.ex10.crashes import CHECKS

__all__ = ["CHECKS"]
