"""Exercise 1: its checks (``checks.CHECKS``) and the harness they drive."""
