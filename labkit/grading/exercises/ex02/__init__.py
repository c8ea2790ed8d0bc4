"""Exercise 2: its checks (``checks.CHECKS``) and the harness they drive."""
