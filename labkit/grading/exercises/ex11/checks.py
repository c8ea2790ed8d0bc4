"""Exercise 11: the transactional outbox, its relay, and a consumer that dedups by message id.

The student writes ``place_order`` (the order and its message in one transaction),
``relay_once`` (publish, then mark) and ``consume`` (the effect and the message id in
one transaction). Each check makes the databases in a folder under the student's
folder and runs the student's code through the harness
(``labkit.grading.exercises.ex11.harness``) on its own connections. The transaction
checks kill the student's process for real (``killsweep``) right after each write and
each COMMIT it sends, then retry or redeliver; the relay checks crash inside
``publish`` before or after the broker has the message, refuse it, or save another
order while it publishes; a few checks make several calls on one connection, as a
long-lived process does, so a transaction left open after an error shows. The check
then reads the shop's database, the broker's log and the consumer's database itself:
every order has exactly one message, no message is lost or marked sent unpublished,
and every order gets exactly one email however often its message arrives.

The checks live in three modules, one per function: ``place_checks``, ``relay_checks``
and ``consume_checks`` (with the whole pipeline on generated orders). Each registers on
``outbox.CHECKS`` when imported; this module imports them in the order the feedback
lists them (the pipeline's order, which is not the alphabet's), and is where the catalog
finds ``CHECKS``.
"""

from __future__ import annotations

import importlib

from labkit.grading.exercises.ex11.outbox import CHECKS

for _module in ("place_checks", "relay_checks", "consume_checks"):
    importlib.import_module(f"{__package__}.{_module}")  # registers its checks, in order

__all__ = ["CHECKS"]
