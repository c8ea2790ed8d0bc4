"""Exercise 14: its checks (``checks.CHECKS``) and the harness they drive."""
