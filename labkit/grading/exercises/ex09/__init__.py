"""Exercise 9: its checks (``checks.CHECKS``) and the harness they drive."""
