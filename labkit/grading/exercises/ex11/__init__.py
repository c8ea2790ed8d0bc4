"""Exercise 11: its checks (``checks.CHECKS``) and the harness they drive."""
