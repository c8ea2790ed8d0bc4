"""What the lessons build beside the store: lock, breaker, outbox, schedules, queues, herd."""
