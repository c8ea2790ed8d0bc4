"""Exercise 7: its checks (``checks.CHECKS``) and the harness they drive."""
