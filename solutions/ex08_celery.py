# %% [markdown]
# # Exercise 8: a Celery task that charges once, whatever is killed
#
# Lesson 14 showed it with real workers: Celery's defaults lose a task whose worker
# dies, `acks_late=True` alone still loses it when the pool child dies, and the
# settings that bring it back make it run twice. Your turn: configure a Celery app and
# write its task so that a charge happens **exactly once** even when the worker is
# SIGKILLed at any moment.
#
# The task module is a real file (`ex08_tasks.py`, written by the `%%writefile` cell
# below) because a real `celery worker` must import it. The check starts workers on
# RabbitMQ against that file, kills them (the pool child or the whole worker, before
# and after the charge), and counts the rows in PostgreSQL itself. It needs the lab's
# services: `docker compose up -d` in the repository's root.
#
# The check gives your module its broker, queue and database through environment
# variables (read at the top of the file), and creates two tables in its own schema:
#
# - `charges (id, key, customer, amount)`: the effect; one row per charge made;
# - `processed (key PRIMARY KEY)`: free for you to use as the dedup record. Keep every
#   record for good: a copy can come days late (a producer's retry), and a deleted
#   record lets it charge again.
#
# Two things to write:
#
# 1. `configure(app)`: the two task settings that make a killed worker's task come back
#    (lesson 14, sections 2 and 3);
# 2. the body of `charge`: insert the dedup record and the charge row **in one
#    transaction**, so a second delivery of the same key changes nothing.

# %%
# %%writefile ex08_tasks.py
import os

import psycopg
from celery import Celery

BROKER = os.environ.get("EX08_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
QUEUE = os.environ.get("EX08_QUEUE", "ex08")
DSN = os.environ.get("EX08_DSN", "postgresql://postgres@127.0.0.1:5432/test")
SCHEMA = os.environ.get("EX08_SCHEMA", "ex08")

app = Celery("ex08", broker=BROKER)
app.conf.task_default_queue = QUEUE
app.conf.task_ignore_result = True
# Given, not part of the exercise: no remote control on a shared broker, and a killed
# pool child is declared lost after 1 s instead of 10 s, so the checks run faster.
app.conf.worker_enable_remote_control = False
app.conf.worker_lost_wait = 1.0


def configure(app):
    """Set the task options under which a task whose worker is killed runs again.

    Two ``app.conf`` settings: acknowledge after the task, not before; and when the
    pool child running the task dies, give the message back to the broker instead of
    acknowledging it.
    """
    ### BEGIN SOLUTION
    app.conf.task_acks_late = True
    app.conf.task_reject_on_worker_lost = True
    ### END SOLUTION


configure(app)


def connect():
    """A connection to the check's database, with its schema first on the search path."""
    return psycopg.connect(DSN, options=f"-c search_path={SCHEMA}")


@app.task(name="ex08.charge")
def charge(key, customer, amount):
    """Charge ``amount`` cents to ``customer`` once per ``key``, however often this runs.

    In ONE transaction (``with connect() as conn, conn.transaction():``): record ``key``
    in ``processed`` with ``INSERT ... ON CONFLICT (key) DO NOTHING RETURNING key``; if
    no row comes back this key was already charged: return ``"already charged"``.
    Otherwise insert the row ``(key, customer, amount)`` into ``charges`` and return
    ``"charged"``. Both rows commit together or not at all. A copy running at the same
    time waits at that INSERT until the first commits: let it wait (no ``lock_timeout``
    or ``statement_timeout``), or it gives up while the first may still roll back.
    """
    ### BEGIN SOLUTION
    with connect() as conn, conn.transaction():
        first = conn.execute(
            "INSERT INTO processed (key) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key",
            (key,),
        ).fetchone()
        if first is None:
            return "already charged"
        conn.execute(
            "INSERT INTO charges (key, customer, amount) VALUES (%s, %s, %s)",
            (key, customer, amount),
        )
    return "charged"
    ### END SOLUTION


# %% [markdown]
# Try it yourself with a worker of your own (the check does the same, and kills it):
#
# ```
# celery -A ex08_tasks worker --pool prefork --concurrency 1 --loglevel INFO
# ```
#
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here:
# `worker_killed_before_the_charge`, `worker_killed_after_the_commit`,
# `whole_worker_killed_before_the_charge`, `killed_right_after_each_commit`, and hidden
# ones the grader runs.
#
# The check takes 10 to 20 seconds: it starts several real workers and waits for Celery
# to notice each one it kills.

# %%
from labkit.grading import check

check("ex08")
