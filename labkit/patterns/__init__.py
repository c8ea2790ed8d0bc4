"""What the lessons build beside the store: lock, breaker, outbox, steps, schedules, herd…"""
