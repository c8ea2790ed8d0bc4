"""A class graded as jobs on the lab's own job store: a run survives its own crash.

``labkit grade`` puts one job per (student, exercise, notebook content) in a
``JobStore`` kept in the run's folder, and grading workers claim, grade (confined, by
``labkit.grading.grade.grade_notebook``) and complete them with the result stored in the
same write as the completion. Kill the grader or a worker at any moment and start it
again with the same ``--run-id``: what was graded stays graded, the notebook in flight is
graded again after its lease, and the gradebook is written once, atomically, from the
store. The grader below knows checks and notebooks, never jobs; this layer joins them.

- ``plan``: the settings every grading worker rebuilds its ``Settings`` from (JSON);
- ``results``: a ``Graded`` as the JSON a job's completion stores, and back;
- ``queue``: the class as jobs (keys, payloads), the results read back, a run's status;
- ``worker``: a grading worker process (``python -m labkit.classroom.worker``);
- ``run``: ``grade_folder``, the whole run, and the gradebook written atomically.
"""
