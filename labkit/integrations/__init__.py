"""Labkit beside the tools a production system would use: an HTTP front door, Celery."""
