"""Exercise 13: its checks (``checks.CHECKS``) and the harness they drive."""
