"""Exercise 6: its checks (``checks.CHECKS``) and the harness they drive."""
