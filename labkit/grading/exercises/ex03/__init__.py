"""Exercise 3: its checks (``checks.CHECKS``) and the harness they drive."""
