"""Exercise 10: its checks (``checks.CHECKS``) and the harness they drive."""
