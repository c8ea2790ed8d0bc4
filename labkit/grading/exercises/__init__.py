"""The exercises' content: a folder per exercise, and what the exercises share.

Each ``exNN/`` holds ``checks.py`` beside ``harness.py``.

A check (in ``exNN/checks.py``) runs in the grader's trusted process and calls
``ns.harness("labkit.grading.exercises.exNN.harness:FUNCTION", *args)``; the harness
function runs beside the student's code (under ``labkit grade``, in the student's confined
process), drives it and returns plain data: evidence to check against files the grader
reads itself, never a verdict. Edit freely: nothing here is the trust boundary.
"""
