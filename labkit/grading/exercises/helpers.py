"""Small tools the exercise checks share: the seed, short reprs, property-based checks.

``holds_for(strategy, prop)`` runs ``prop`` on examples Hypothesis generates, a bounded
number (no example database), so a check stays inside its timeout: in ``check()`` the
same examples on every run (derandomized), so a student's failure replays exactly;
under ``labkit grade`` examples drawn from the run's seed (``seeds.grading_seed``).
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import (
    HealthCheck,
    Verbosity,
    configuration,
    given,
    register_random,
    seed,
    settings,
)
from hypothesis import core as hypothesis_core
from hypothesis import strategies as st

from labkit.grading.checks import CheckFailed, StudentRaised, where_words
from labkit.grading.seeds import grading_seed
from labkit.lang import _

#: Every check that draws random numbers starts from this seed, so a failure replays.
SEED = 20260101


def raised_error(result: dict[str, Any]) -> str:
    """'KeyError: 'id' (line 4 of claim)': what a harness outcome raised, and where.

    For a message that puts its own words around it ("it raised {error}"), where
    ``raised_text``'s "your code raised" does not fit.
    """
    text = f"{result['raised'][0]}"
    if result.get("message"):
        text += f": {result['message']}"
    if result.get("where"):
        text += f" ({where_words(str(result['where']))})"
    return text


def raised_text(result: dict[str, Any]) -> str:
    """'your code raised KeyError: 'id' (line 4 of claim)' for a harness outcome that raised."""
    return _("your code raised {error}").format(error=raised_error(result))


def because_of(check: str) -> str:
    """Said when a check cannot get past what an earlier check tests: fix that one first."""
    return " " + _("(needed first; the check {check} tests it: fix that one first)").format(
        check=check
    )


def expect_left_as_given(got: list[dict[str, Any]], call: str, hint: str) -> None:
    """Every call of ``got`` (``common.on_one_connection``, or one outcome with its
    ``left``) that returned left its connection as it was handed over: autocommit mode,
    no transaction open. A mode set on it (``conn.isolation_level = 'IMMEDIATE'``) turns
    each later write of the caller into a transaction nobody commits, which holds the
    write lock; an open one, too."""
    for n, result in enumerate(got, 1):
        left = result.get("left")
        if "returned" not in result or not left:
            continue  # a call that raised: the checks on failed calls judge it
        changed = [
            _("a transaction still open")
            if name == "in_transaction"
            else _(
                "PRAGMA synchronous = OFF (every later commit of its owner may be lost to a "
                "power cut, after it was reported done)"
            )
            if name == "synchronous"
            else f"conn.{name} = {value!r}"
            for name, value in left.items()
        ]
        raise CheckFailed(
            _(
                "{call} (call {n} on one long-lived connection) to hand the connection "
                "back as it was given: autocommit mode (isolation_level None), no "
                "transaction open, PRAGMA synchronous as it was"
            ).format(call=call, n=n)
            if len(got) > 1
            else _(
                "{call} to hand the connection back as it was given: autocommit mode "
                "(isolation_level None), no transaction open, PRAGMA synchronous as it was"
            ).format(call=call),
            _("it left {changed}").format(changed=", ".join(changed)),
            hint,
        )


def expect_no_write_after_a_refused_begin(result: dict[str, Any], call: str, hint: str) -> None:
    """``result`` (``common.begin_refused_once``): once its BEGIN IMMEDIATE failed
    "database is locked", ``call`` raised, or began again before it wrote; it never wrote
    without the lock, on what it had read while another writer held it."""
    if not result.get("refused") or not result.get("unlocked_writes"):
        return
    did = (
        _("returned {value}").format(value=short_repr(result["returned"]))
        if "returned" in result
        else raised_text(result)
    )
    raise CheckFailed(
        _(
            "{call} whose BEGIN IMMEDIATE fails 'database is locked' (another writer held "
            "the lock past the busy timeout) to let the error out, or to begin again, "
            "before it writes"
        ).format(call=call),
        _("it went on without the lock: {n} write(s) outside any transaction, then {did}").format(
            n=result["unlocked_writes"], did=did
        ),
        hint,
    )


def short_repr(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: The one Random every check thread's Hypothesis runs share (``_share_thread_random``),
#: registered once, here, where a module global keeps it alive.
_EXAMPLES_RANDOM = random.Random(SEED)
register_random(_EXAMPLES_RANDOM)


def _share_thread_random() -> None:
    """Give this thread's Hypothesis the Random registered above instead of a new one.

    Hypothesis makes each thread a Random of its own the first time a test runs in it,
    and registers it; registering runs a full garbage collection and then searches the
    whole heap for what refers to it (``hypothesis.internal.entropy.register_random``):
    about 90 ms in a process of 600,000 objects, paid by every check, since each runs in
    a new thread (``checks.run_with_timeout``). In a long-lived test worker it was most
    of a quick check's time. The runs here are all derandomized or seeded, so that Random
    never draws a seed: Hypothesis only re-seeds it around each example and restores it
    after, and one serves every thread alike. Hypothesis keeps it in a private
    thread-local; a release without that attribute just makes its own, as before.
    """
    with contextlib.suppress(AttributeError):
        local = hypothesis_core.threadlocal
        if local._hypothesis_global_random is None:
            local._hypothesis_global_random = _EXAMPLES_RANDOM


def holds_for(
    strategy: st.SearchStrategy[Any], prop: Callable[[Any], None], examples: int = 40
) -> None:
    """Run ``prop(example)`` on generated examples; the first failure (shrunk) fails the check.

    ``prop`` calls ``expect``; Hypothesis shrinks a failing example to a small one, so
    the student reads the simplest input that breaks their code.

    ``check()`` draws the same examples every time. ``labkit grade`` draws those too, and
    then the run's own (replayable by its seed): a grading seed adds inputs nobody has
    seen, and never loses one ``check()`` would have caught a mistake with.
    """

    def run(graded: int | None) -> None:
        runner = settings(
            max_examples=examples,
            derandomize=graded is None,  # check()'s examples: the same every time
            database=None,
            deadline=None,
            verbosity=Verbosity.quiet,
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
        )(given(strategy)(prop))
        if graded is not None:  # labkit grade: this run's own examples
            runner = seed(graded)(runner)
        runner()

    _share_thread_random()
    graded = grading_seed()
    # Hypothesis caches what it learns in ./.hypothesis: not in the student's folder.
    home = configuration.storage_directory(intent_to_write=False).path
    configuration.set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "labkit-hypothesis")
    try:
        run(None)
        if graded is not None:
            run(graded)
    except BaseExceptionGroup as group:  # a flaky student function: report its first failure
        found = group.subgroup((CheckFailed, StudentRaised))
        if found is None:
            raise
        first: BaseException = found
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    finally:
        configuration.set_hypothesis_home_dir(home)


def shared_ends(texts: list[str]) -> tuple[int, int]:
    """How many characters all ``texts`` (keys a solution built) begin and end with alike:
    a namespace ("order-") or a suffix added to every key, which tells no two apart. None
    when fewer than two differ (one key for all is caught where effects are counted)."""
    distinct = list(dict.fromkeys(texts))
    if len(distinct) < 2:
        return 0, 0
    head = len(os.path.commonprefix(distinct))
    return head, len(os.path.commonprefix([t[head:][::-1] for t in distinct]))
