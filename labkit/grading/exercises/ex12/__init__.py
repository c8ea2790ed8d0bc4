"""Exercise 12: its checks (``checks.CHECKS``) and the harness they drive."""
