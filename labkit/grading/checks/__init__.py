"""Public checks, one module per exercise (``ex01`` ... ): ``CHECKS`` in each."""
