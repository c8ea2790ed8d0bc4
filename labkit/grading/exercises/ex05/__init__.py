"""Exercise 5: its checks (``checks.CHECKS``) and the harness they drive."""
