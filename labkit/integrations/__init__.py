"""Real production tools driven from the lab: Celery workers and beats in child processes.

``celery_harness`` starts, watches, kills and stops ``celery worker`` / ``celery beat``
processes; ``celery_lab`` is the Celery app lesson 14 and its tests run in them.
"""
