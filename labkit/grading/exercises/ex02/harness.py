"""Harness for exercise 2: the student's ``single_instance`` held by real processes.

The checks name these functions (``labkit.grading.exercises.ex02.harness:NAME``); they
live by kind beside this module: ``holders`` (another process holds the lock, or held
it), ``alone`` (one process against what surrounds it), ``races`` (processes at the
same instant), built from ``forking``'s children and attempts. Every function reports
what each attempt did as text (``"acquired"``, ``"refused: <message>"`` or ``"raised
<Type>: <message>"``) and kills every child before returning. The checks read the lock
file themselves.
"""

from __future__ import annotations

from labkit.grading.exercises.ex02.alone import (
    attempt_once,
    attempt_when_opening_is_refused,
    attempts_beside_a_plain_holder,
    error_inside,
    open_files_after_uses,
    second_lock_in_one_process,
)
from labkit.grading.exercises.ex02.holders import (
    attempt_after_a_forked_worker_left,
    attempt_while_holding,
    file_while_a_forked_worker_holds,
    holders_in_turn,
    kill_the_holder,
    newcomer_as_the_holder_leaves,
    refused_as_the_holder_leaves,
    refused_by_holders_in_turn,
    refused_while_a_child_holds,
    refused_while_held_briefly,
)
from labkit.grading.exercises.ex02.races import (
    newcomer_race,
    staggered_start,
    start_together,
)

__all__ = [
    "attempt_after_a_forked_worker_left",
    "attempt_once",
    "attempt_when_opening_is_refused",
    "attempt_while_holding",
    "attempts_beside_a_plain_holder",
    "error_inside",
    "file_while_a_forked_worker_holds",
    "holders_in_turn",
    "kill_the_holder",
    "newcomer_as_the_holder_leaves",
    "newcomer_race",
    "open_files_after_uses",
    "refused_as_the_holder_leaves",
    "refused_by_holders_in_turn",
    "refused_while_a_child_holds",
    "refused_while_held_briefly",
    "second_lock_in_one_process",
    "staggered_start",
    "start_together",
]
