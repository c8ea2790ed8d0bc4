"""The first cell of a notebook that needs more than the lab's core: say what is missing.

A lesson or exercise that imports an extra's package (FastAPI, psycopg, Celery...) or
talks to a service (PostgreSQL, Redis, RabbitMQ) calls ``require(...)`` first. If all is
there it prints one line saying so; if not, it prints what is missing and the one
command that fixes it here, then stops the notebook with ``SystemExit``, so a student
reads the cause once instead of a ``ModuleNotFoundError`` in every later cell::

    require("fastapi", "uvicorn", "httpx", extra="web")
    require("psycopg", "redis", extra="services", services=("postgres", "redis"))

Both the repository and the student kit install every extra a lesson needs with
``make venv`` (which ``make lab`` runs), so that is the command this module gives; a
kernel started before the install must be restarted to see the new packages.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable

from labkit.integrations.celery.brokers import HOW_TO_START, SERVICES, unreachable

#: What fixes a missing package, in the repository and in the student kit alike.
HOW_TO_INSTALL = (
    "in a terminal in the lab's folder (the one with the Makefile) run `make venv`, then "
    "restart this notebook's kernel (Kernel > Restart Kernel) and run it again"
)
#: How each service is named to a student.
LABELS = {"postgres": "PostgreSQL", "redis": "Redis", "rabbitmq": "RabbitMQ"}


class MissingRequirement(SystemExit):
    """Raised by ``require``: the notebook stops here (its message says why and what to do)."""


def missing_modules(modules: Iterable[str]) -> list[str]:
    """The top-level modules among ``modules`` that this Python cannot import."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require(
    *modules: str,
    extra: str,
    services: Iterable[str] = (),
    host: str = "127.0.0.1",
) -> None:
    """Stop the notebook, saying how to fix it, unless ``modules`` import and ``services`` answer.

    ``extra`` names labkit's optional dependency group that holds ``modules`` (for the
    message); ``services`` are keys of ``SERVICES`` (``postgres``, ``redis``,
    ``rabbitmq``), probed with one TCP connection each on ``host``.
    """
    wanted = list(services)
    unknown = [s for s in wanted if s not in SERVICES]
    if unknown:
        raise ValueError(f"unknown service {unknown}: choose among {sorted(SERVICES)}")
    absent = missing_modules(modules)
    if absent:
        print(
            f"This notebook needs {', '.join(absent)} (labkit's [{extra}] extra), which this "
            f"kernel's Python ({sys.executable}) does not have. To install it, {HOW_TO_INSTALL}."
        )
        raise MissingRequirement("stopped: a package is missing (see the line above)")
    down = unreachable({s: f"tcp://{host}:{SERVICES[s]}" for s in wanted})
    if down:
        named = ", ".join(f"{LABELS[s]} ({host}:{SERVICES[s]})" for s in down)
        print(f"Not reachable: {named}. To run this notebook, {HOW_TO_START}.")
        raise MissingRequirement("stopped: a service is not running (see the line above)")
    parts = [", ".join(modules) + " installed"] if modules else []
    if wanted:
        parts.append(", ".join(LABELS[s] for s in wanted) + " answering")
    print("Ready: " + "; ".join(parts) + ".")
