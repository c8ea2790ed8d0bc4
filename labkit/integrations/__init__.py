"""Labkit beside the tools a production system would use: an HTTP front door, Celery.

``http_service`` / ``serve`` run the request-reply service (lesson 12);
``celery_harness`` starts, watches, kills and stops real ``celery worker`` / ``celery
beat`` processes, ``celery_points`` pauses a task where the lab kills it,
``celery_lab`` is the Celery app lesson 14 runs, ``celery_run`` one run of it,
``celery_table`` lesson 06's crash table on it, ``brokers`` reads queue depths and
unacked messages straight from the brokers, and ``proctree`` answers "is that process
really gone?" from /proc.
"""
