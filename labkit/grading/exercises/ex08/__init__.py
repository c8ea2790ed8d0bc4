"""Exercise 8: its checks (``checks.CHECKS``) and the harness they drive."""
