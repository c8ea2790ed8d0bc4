"""Exercise 4: its checks (``checks.CHECKS``) and the harness they drive."""
