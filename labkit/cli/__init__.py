"""The ``labkit`` command: look at a job database, send jobs back, run a worker, grade a class.

::

    labkit inspect jobs.db [--job ID] [--as-of T]  counts, dead letters, one job's attempts
    labkit retry-failed jobs.db --limit N          redrive dead jobs whose failures were transient
    labkit redrive jobs.db ID [ID ...]             redrive those dead jobs (same key)
    labkit redrive jobs.db --limit N [--kind K]    redrive in bulk: --limit is required
    labkit worker jobs.db --handlers mod:HANDLERS  run a worker until stopped (Ctrl-C)
    labkit release exercises                        write the student notebooks
    labkit release --bundle ../student-kit          the student kit: lessons, exercises, labkit
    labkit grade submissions --out grading          grade one folder per student
    labkit export grading/RUN --to canvas           a run's grades for Canvas, Moodle or Gradescope
    labkit autograder --gradescope ex03.zip         a Gradescope autograder that grades with labkit

Every command that changes jobs accepts ``--dry-run`` and names what it would do.
``inspect``, ``redrive`` and ``retry-failed`` accept ``--as-of T`` to act as if it were
time T (UTC): ages are read, and redriven jobs become due, at T. Reports and lessons
use it to print the same thing on every run. Bulk
redrive has no default limit: redriving a whole dead-letter queue by accident floods
the dependency that killed those jobs in the first place.

The commands on a job database are ``labkit.cli.jobs``'s; ``release``, ``grade``,
``export`` and ``autograder`` are ``labkit.cli.grading``'s, and what every command shares
is ``labkit.cli.args``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

from labkit.cli import grading, jobs
from labkit.cli.args import CliError
from labkit.errors import LabkitError
from labkit.lang import _


def _version() -> str:
    try:
        return metadata.version("labkit")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare checkout
        return _("unknown (not installed)")


def build_parser() -> argparse.ArgumentParser:
    # The module docstring's first line, marked where a reader's language can reach it.
    description = _(
        "The ``labkit`` command: look at a job database, send jobs back, run a worker, "
        "grade a class."
    )
    parser = argparse.ArgumentParser(prog="labkit", description=description)
    parser.add_argument(
        "--version", action="version", version=f"labkit {_version()}", help=_("print the version")
    )
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        help=_("what to do (`labkit COMMAND --help` for its options)"),
    )
    jobs.add_parsers(sub)
    grading.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except CliError as exc:
        print(f"labkit {args.command}: {exc}", file=sys.stderr)
        return 2
    except LabkitError as exc:
        print(f"labkit {args.command}: {exc}", file=sys.stderr)
        return 1
