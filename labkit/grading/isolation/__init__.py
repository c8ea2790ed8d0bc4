"""THE TRUST BOUNDARY: a student's notebook run confined, and the narrow channel to it.

Review every change here. Nothing in this package imports the store, the worker or the
world: a student process loads only what it needs to run cells and answer the channel
(``tests/grading/test_student_imports.py`` proves it).
"""
