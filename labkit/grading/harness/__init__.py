"""Harness functions that run beside a student's code and hand it live objects.

A check calls ``ns.harness("labkit.grading.harness.MODULE:FUNCTION", *args)``; the
function receives the student's definitions and plain-data arguments, drives the
student's code (with a connection, a clock, a worker...) and returns plain data. Under
``labkit grade`` it runs in the student's confined process, so what it returns is
evidence to check against files the grader reads itself, never a verdict.
"""
