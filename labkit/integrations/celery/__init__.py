"""Celery for real: the lab's app and tasks, broker probes, worker harness, crash table."""
