# %% [markdown]
# # Exercise 11: the transactional outbox, its relay, and a consumer that drops repeats
#
# A shop saves an order and must tell the mail service about it. Saving the row and
# publishing a message are two systems and no shared transaction: a crash between them
# loses the message, or announces an order that was never saved. The outbox fixes the
# first half: the order row and a **message row** (in an `outbox` table of the same
# database) commit in **one transaction**. A **relay** then publishes pending messages
# to the broker and marks each sent. A relay that crashes after publishing and before
# marking publishes that message again on its next run, so delivery is *at least once*:
# the **consumer** must apply each message id once, recording the id in the same
# transaction as its effect.
#
# The tables (`labkit.grading.exercises.labdb`, also in `labkit/grading/exercises/labdb.sql`):
#
# | database | table | columns |
# |---|---|---|
# | the shop's | `orders` | `id`, `customer`, `total` |
# | the shop's | `outbox` | `id`, `message_id` (UNIQUE), `topic`, `body` (JSON text), `sent_at` (NULL until sent) |
# | the consumer's | `processed_messages` | `message_id` (PRIMARY KEY) |
# | the consumer's | `emails` | `id`, `order_id`, `customer` |
#
# Every connection you get is in autocommit mode: open a transaction yourself with
# `conn.execute("BEGIN IMMEDIATE")`, end it with `conn.execute("COMMIT")`, and roll it
# back if anything in between raises. The check crashes your code after each of its
# writes in turn, the way a killed process stops, and reads the databases itself.

# %%
import json

from labkit.grading.exercises.labdb import consumer_db, outbox_db, rows_of
from labkit.notebook.scratch import fresh_dir


# %%
def place_order(conn, order_id: int, customer: str, total: int) -> bool:
    """Save the order and its ``order.placed`` message in ONE transaction.

    - Insert the order into ``orders``, and a row into ``outbox`` with
      ``message_id = f"order:{order_id}:placed:v1"`` (it names the fact, not the
      attempt), ``topic = "order.placed"`` and ``body = json.dumps({"order_id": ...,
      "customer": ..., "total": ...})``; ``sent_at`` stays NULL.
    - Both commit together or neither does (``BEGIN IMMEDIATE`` ... ``COMMIT``; on an
      exception, ``ROLLBACK`` and re-raise).
    - Placing an order that already exists changes nothing and returns False (a retried
      request); a new order returns True.
    """
    ### BEGIN SOLUTION
    conn.execute("BEGIN IMMEDIATE")
    try:
        created = conn.execute(
            "INSERT INTO orders (id, customer, total) VALUES (:id, :customer, :total)"
            " ON CONFLICT (id) DO NOTHING RETURNING id",
            {"id": order_id, "customer": customer, "total": total},
        ).fetchone()
        if created is not None:
            body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
            conn.execute(
                "INSERT INTO outbox (message_id, topic, body) VALUES (:mid, 'order.placed', :body)",
                {"mid": f"order:{order_id}:placed:v1", "body": body},
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return created is not None
    ### END SOLUTION


# %%
def relay_once(conn, publish, now: float) -> list:
    """Publish every pending outbox message, oldest (smallest id) first.

    Return the ``message_id`` of each message published, in the order published (not
    the outbox rows' ``id``).

    - Pending means ``sent_at IS NULL``. For each: call ``publish(topic, message_id,
      body)`` FIRST, then set ``sent_at = now`` on that row. A crash between the two
      leaves the row pending, and the next run publishes it again: a duplicate, never a
      loss.
    - When ``publish`` raises (the broker is down), leave that row pending and let the
      error propagate: the messages after it wait, so they keep their order.
    """
    ### BEGIN SOLUTION
    sent = []
    pending = conn.execute(
        "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
    ).fetchall()
    for row_id, topic, message_id, body in pending:
        publish(topic, message_id, body)
        conn.execute("UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id})
        sent.append(message_id)
    return sent
    ### END SOLUTION


# %%
def consume(conn, message_id: str, body: str) -> bool:
    """Apply one delivered message to the consumer's database, once per message id.

    - In ONE transaction: record ``message_id`` in ``processed_messages`` and, only if
      it was not there, insert an email (``order_id``, ``customer`` from the JSON body).
    - Return True when applied, False for a repeat (the relay published it twice, or
      the broker redelivered). Another consumer process may receive the same message
      at the same moment.
    """
    ### BEGIN SOLUTION
    order = json.loads(body)
    conn.execute("BEGIN IMMEDIATE")
    try:
        fresh = conn.execute(
            "INSERT INTO processed_messages (message_id) VALUES (:mid)"
            " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
            {"mid": message_id},
        ).fetchone()
        if fresh is not None:
            conn.execute(
                "INSERT INTO emails (order_id, customer) VALUES (:order_id, :customer)",
                {"order_id": order["order_id"], "customer": order["customer"]},
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return fresh is not None
    ### END SOLUTION


# %% [markdown]
# Try it: two orders, a relay run that "publishes" into a list, and the consumer fed
# every message twice. Two emails in the end.

# %%
def demo():
    folder = fresh_dir("ex11")
    shop, mail = outbox_db(folder / "shop.db"), consumer_db(folder / "mail.db")
    place_order(shop, 1, "ana", 4200)
    place_order(shop, 2, "bia", 1500)
    broker = []
    relay_once(shop, lambda topic, mid, body: broker.append((mid, body)), now=100.0)
    applied = [consume(mail, mid, body) for mid, body in broker + broker]
    return applied, rows_of(shop, "all_outbox"), rows_of(mail, "all_emails")

# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here:
# `place_order_twice_is_one_message`, `place_order_is_one_transaction`,
# `relay_never_loses_a_message`, `consume_applies_each_message_once`,
# `consume_is_one_transaction`, `pipeline_on_generated_orders`,
# `relay_marks_only_the_rows_it_published`, `consume_records_the_message_id`, and hidden
# ones the grader runs.

# %%
from labkit.grading import check

check("ex11")
