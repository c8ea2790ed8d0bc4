"""Harness for exercise 2: the student's ``single_instance`` held by real processes.

The checks name these functions (``labkit.grading.exercises.ex02.harness:NAME``); they
live by kind beside this module: ``holders`` (another process holds the lock, or held
it), ``alone`` (one process against what surrounds it), ``threads`` (its threads at the
lock), ``races`` (processes at the same instant), ``faults`` (the lock's own start
fails), built from ``forking``'s children and attempts. Every function reports what each
attempt did as text (``"acquired"``, ``"refused: <message>"`` or ``"raised <Type>:
<message>"``) and kills every child before returning. The checks read the lock file
themselves.
"""

from __future__ import annotations

from labkit.grading.exercises.ex02.alone import (
    attempt_once,
    attempt_when_locking_fails,
    attempt_when_opening_is_refused,
    attempts_beside_a_plain_holder,
    attempts_by_a_relative_path,
    error_inside,
    open_files_after_uses,
    process_state_around_a_run,
    refusals_under_holders_in_turn,
    second_lock_in_one_process,
)
from labkit.grading.exercises.ex02.faults import (
    attempt_after_a_failed_start,
    attempts_as_another_lock_reuses_a_closed_descriptor,
)
from labkit.grading.exercises.ex02.forking import on_the_main_thread
from labkit.grading.exercises.ex02.holders import (
    attempt_after_a_forked_worker_left,
    attempt_while_holding,
    file_while_a_forked_worker_holds,
    holders_in_turn,
    kill_the_holder,
    newcomer_as_the_holder_leaves,
    probe_between_two_flocks,
    refused_as_a_holder_arrives,
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
from labkit.grading.exercises.ex02.threads import (
    attempt_from_a_thread_as_the_holder_leaves,
    attempt_from_a_thread_while_holding,
    other_lock_from_a_thread_while_holding,
)
from labkit.grading.exercises.ex02.watchdogs import (
    attempt_while_time_flies,
    file_after_the_holder_left_while_time_flies,
    refusals_while_time_flies,
)

__all__ = [
    "attempt_after_a_failed_start",
    "attempt_after_a_forked_worker_left",
    "attempt_from_a_thread_as_the_holder_leaves",
    "attempt_from_a_thread_while_holding",
    "attempt_once",
    "attempt_when_locking_fails",
    "attempt_when_opening_is_refused",
    "attempt_while_holding",
    "attempt_while_time_flies",
    "attempts_as_another_lock_reuses_a_closed_descriptor",
    "attempts_beside_a_plain_holder",
    "attempts_by_a_relative_path",
    "error_inside",
    "file_after_the_holder_left_while_time_flies",
    "file_while_a_forked_worker_holds",
    "holders_in_turn",
    "kill_the_holder",
    "newcomer_as_the_holder_leaves",
    "newcomer_race",
    "open_files_after_uses",
    "other_lock_from_a_thread_while_holding",
    "probe_between_two_flocks",
    "process_state_around_a_run",
    "refused_as_a_holder_arrives",
    "refused_as_the_holder_leaves",
    "refused_by_holders_in_turn",
    "refused_while_a_child_holds",
    "refused_while_held_briefly",
    "refusals_under_holders_in_turn",
    "refusals_while_time_flies",
    "second_lock_in_one_process",
    "staggered_start",
    "start_together",
]

# The checks call these on a thread of their own: a lock's signal.signal works as on
# the main thread a job takes its lock on (``forking.signals_as_on_the_main_thread``).
attempt_after_a_failed_start = on_the_main_thread(attempt_after_a_failed_start)
attempt_after_a_forked_worker_left = on_the_main_thread(attempt_after_a_forked_worker_left)
attempt_from_a_thread_as_the_holder_leaves = on_the_main_thread(
    attempt_from_a_thread_as_the_holder_leaves
)
attempt_from_a_thread_while_holding = on_the_main_thread(attempt_from_a_thread_while_holding)
attempt_once = on_the_main_thread(attempt_once)
attempt_when_locking_fails = on_the_main_thread(attempt_when_locking_fails)
attempt_when_opening_is_refused = on_the_main_thread(attempt_when_opening_is_refused)
attempt_while_holding = on_the_main_thread(attempt_while_holding)
attempt_while_time_flies = on_the_main_thread(attempt_while_time_flies)
attempts_as_another_lock_reuses_a_closed_descriptor = on_the_main_thread(
    attempts_as_another_lock_reuses_a_closed_descriptor
)
attempts_beside_a_plain_holder = on_the_main_thread(attempts_beside_a_plain_holder)
attempts_by_a_relative_path = on_the_main_thread(attempts_by_a_relative_path)
error_inside = on_the_main_thread(error_inside)
file_after_the_holder_left_while_time_flies = on_the_main_thread(
    file_after_the_holder_left_while_time_flies
)
file_while_a_forked_worker_holds = on_the_main_thread(file_while_a_forked_worker_holds)
holders_in_turn = on_the_main_thread(holders_in_turn)
kill_the_holder = on_the_main_thread(kill_the_holder)
newcomer_as_the_holder_leaves = on_the_main_thread(newcomer_as_the_holder_leaves)
newcomer_race = on_the_main_thread(newcomer_race)
open_files_after_uses = on_the_main_thread(open_files_after_uses)
other_lock_from_a_thread_while_holding = on_the_main_thread(other_lock_from_a_thread_while_holding)
process_state_around_a_run = on_the_main_thread(process_state_around_a_run)
probe_between_two_flocks = on_the_main_thread(probe_between_two_flocks)
refused_as_a_holder_arrives = on_the_main_thread(refused_as_a_holder_arrives)
refused_as_the_holder_leaves = on_the_main_thread(refused_as_the_holder_leaves)
refused_by_holders_in_turn = on_the_main_thread(refused_by_holders_in_turn)
refused_while_a_child_holds = on_the_main_thread(refused_while_a_child_holds)
refused_while_held_briefly = on_the_main_thread(refused_while_held_briefly)
refusals_under_holders_in_turn = on_the_main_thread(refusals_under_holders_in_turn)
refusals_while_time_flies = on_the_main_thread(refusals_while_time_flies)
second_lock_in_one_process = on_the_main_thread(second_lock_in_one_process)
staggered_start = on_the_main_thread(staggered_start)
start_together = on_the_main_thread(start_together)
