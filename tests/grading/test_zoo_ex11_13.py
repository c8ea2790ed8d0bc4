"""The zoo of exercises 11-13: each plausible wrong solution loses the check named after it.

Each entry overrides one function of the reference solution with a classic mistake;
every entry is checked in process, and a sample is graded by ``labkit grade`` in the
sandbox (``zoograding``). The named check must fail with an expectation and a hint, the
score must drop, and some checks must still pass (the feedback points at one mistake,
not at everything).
"""

from __future__ import annotations

from collections import Counter

import pytest
from gradingkit import assert_severe
from zoograding import in_process_test, right_test

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, mistake, the check that must fail, source replacing the reference)
    (
        "ex11",
        "the order and its message in two transactions",
        "place_order_is_one_transaction",
        """
        def place_order(conn, order_id, customer, total):
            created = conn.execute(
                "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
            ).fetchone()
            if created is not None:
                body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                conn.execute(
                    "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
                    (f"order:{order_id}:placed:v1", body),
                )
            return created is not None
        """,
    ),
    (
        "ex11",
        "the relay marks the row sent, then publishes",
        "relay_never_loses_a_message",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                publish(topic, mid, body)
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay skips a message the broker refused and goes on",
        "relay_stops_when_the_broker_is_down",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                try:
                    publish(topic, mid, body)
                except Exception:
                    continue
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer commits the processed id before sending the email",
        "consume_is_one_transaction",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            fresh = conn.execute(
                "INSERT INTO processed_messages (message_id) VALUES (?)"
                " ON CONFLICT DO NOTHING RETURNING message_id", (message_id,),
            ).fetchone()
            if fresh is not None:
                conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                             (order["order_id"], order["customer"]))
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the processed id committed first, the email sent through a cursor after it",
        "consume_is_one_transaction",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            fresh = conn.execute(
                "INSERT INTO processed_messages (message_id) VALUES (?)"
                " ON CONFLICT (message_id) DO NOTHING RETURNING message_id", (message_id,),
            ).fetchone()
            conn.execute("COMMIT")
            if fresh is not None:
                conn.cursor().execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                                      (order["order_id"], order["customer"]))
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the order committed, then its outbox row written by executemany",
        "place_order_is_one_transaction",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            created = conn.execute(
                "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
            ).fetchone()
            conn.execute("COMMIT")
            if created is not None:
                body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                conn.executemany(
                    "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
                    [(f"order:{order_id}:placed:v1", body)],
                )
            return created is not None
        """,
    ),
    (
        "ex11",
        "the consumer checks with a SELECT outside the transaction",
        "two_consumer_processes_send_each_email_once",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            seen = conn.execute(
                "SELECT 1 FROM processed_messages WHERE message_id = ?", (message_id,)
            ).fetchone()
            if seen:
                return False
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR IGNORE INTO processed_messages (message_id) VALUES (?)",
                         (message_id,))
            conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                         (order["order_id"], order["customer"]))
            conn.execute("COMMIT")
            return True
        """,
    ),
    (
        "ex11",
        "the body built with an f-string",
        "body_is_json_for_any_name",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            created = conn.execute(
                "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
            ).fetchone()
            if created is not None:
                body = f'{{"order_id": {order_id}, "customer": "{customer}", "total": {total}}}'
                conn.execute(
                    "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
                    (f"order:{order_id}:placed:v1", body),
                )
            conn.execute("COMMIT")
            return created is not None
        """,
    ),
    (
        "ex11",
        "the relay marks every pending row sent in one UPDATE after publishing",
        "relay_marks_only_the_rows_it_published",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                publish(topic, mid, body)
                sent.append(mid)
            conn.execute("UPDATE outbox SET sent_at = ? WHERE sent_at IS NULL", (now,))
            return sent
        """,
    ),
    (
        "ex11",
        "the relay publishes in message_id order (text: order 10 before order 9)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                " ORDER BY message_id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                publish(topic, mid, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay publishes at most 100 rows a run, as labkit's Relay does by default",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                " ORDER BY id LIMIT 100"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                publish(topic, mid, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay stops quietly when the broker is down",
        "relay_lets_the_broker_error_out",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                try:
                    publish(topic, mid, body)
                except ConnectionError:
                    break
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer records hash(message_id), which changes with each process",
        "consume_records_the_message_id",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            key = str(hash(message_id))
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id", (key,),
                ).fetchone()
                if fresh is not None:
                    conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                                 (order["order_id"], order["customer"]))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the consumer skips a message when its order already has an email (dedup by order)",
        "consume_applies_each_message_once",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING", (message_id,),
                )
                sent = conn.execute(
                    "SELECT 1 FROM emails WHERE order_id = ?", (order["order_id"],)
                ).fetchone()
                if sent is None:
                    conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                                 (order["order_id"], order["customer"]))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return sent is None
        """,
    ),
    (
        "ex11",
        "the consumer never rolls back: a failed message leaves its transaction open",
        "consume_rolls_back_a_message_it_cannot_apply",
        """
        def consume(conn, message_id, body):
            conn.execute("BEGIN IMMEDIATE")
            fresh = conn.execute(
                "INSERT INTO processed_messages (message_id) VALUES (?)"
                " ON CONFLICT (message_id) DO NOTHING RETURNING message_id", (message_id,),
            ).fetchone()
            if fresh is not None:
                order = json.loads(body)
                conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                             (order["order_id"], order["customer"]))
            conn.execute("COMMIT")
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "place_order never rolls back: a failed INSERT leaves the transaction open",
        "place_order_rolls_back_and_re_raises",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            created = conn.execute(
                "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
            ).fetchone()
            if created is not None:
                body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                conn.execute(
                    "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
                    (f"order:{order_id}:placed:v1", body),
                )
            conn.execute("COMMIT")
            return created is not None
        """,
    ),
    (
        "ex11",
        "the consumer records a message without 'customer' as applied (except KeyError: pass)",
        "a_failed_message_is_applied_when_redelivered",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    (message_id,),
                ).fetchone()
                if fresh is not None:
                    try:
                        conn.execute(
                            "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                            (order["order_id"], order["customer"]),
                        )
                    except KeyError:
                        pass  # a malformed message: nothing to send
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the consumer returns False for a body that is not JSON (acked as a repeat)",
        "a_failed_message_is_applied_when_redelivered",
        """
        _reference_consume = consume
        def consume(conn, message_id, body):
            try:
                json.loads(body)
            except ValueError:
                return False
            return _reference_consume(conn, message_id, body)
        """,
    ),
    (
        "ex11",
        "the consumer cuts the customer's name to 255 characters (a VARCHAR(255) habit)",
        "consume_keeps_the_customers_name_intact",
        """
        _reference_consume = consume
        def consume(conn, message_id, body):
            order = json.loads(body)
            order["customer"] = order["customer"][:255]
            return _reference_consume(conn, message_id, json.dumps(order))
        """,
    ),
    (
        "ex11",
        "the consumer NFC-normalises the customer's name (decomposed accents recomposed)",
        "consume_keeps_the_customers_name_intact",
        """
        import unicodedata
        _reference_consume = consume
        def consume(conn, message_id, body):
            order = json.loads(body)
            order["customer"] = unicodedata.normalize("NFC", order["customer"])
            return _reference_consume(conn, message_id, json.dumps(order))
        """,
    ),
    (
        "ex11",
        "place_order cuts the customer's name to 255 characters (a VARCHAR(255) habit)",
        "body_is_json_for_any_name",
        """
        _reference_place = place_order
        def place_order(conn, order_id, customer, total):
            return _reference_place(conn, order_id, customer[:255], total)
        """,
    ),
    (
        "ex11",
        "place_order NFC-normalises the customer's name (decomposed accents recomposed)",
        "body_is_json_for_any_name",
        """
        import unicodedata
        _reference_place = place_order
        def place_order(conn, order_id, customer, total):
            return _reference_place(conn, order_id, unicodedata.normalize("NFC", customer), total)
        """,
    ),
    (
        "ex11",
        "the relay keeps the rows a run left pending in a module list, for the next run",
        "each_shop_database_relays_its_own_messages",
        """
        _backlog = []
        def relay_once(conn, publish, now):
            global _backlog
            if not _backlog:  # re-read only once the last run's rows are all out
                _backlog = conn.execute(
                    "SELECT id, topic, message_id, body FROM outbox"
                    " WHERE sent_at IS NULL ORDER BY id"
                ).fetchall()
            sent = []
            while _backlog:
                row_id, topic, mid, body = _backlog[0]
                publish(topic, mid, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                _backlog.pop(0)
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "place_order saves its outbox row under the order's id (INSERT INTO outbox (id, ...))",
        "place_order_lets_the_outbox_number_its_row",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (id, message_id, topic, body)"
                        " VALUES (?, ?, 'order.placed', ?)",
                        (order_id, f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "the relay lets ConnectionError out but wraps a broker client's own error in RuntimeError",
        "relay_stops_at_any_publish_error",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                try:
                    publish(topic, message_id, body)
                except (ConnectionError, TimeoutError):
                    raise
                except Exception as exc:
                    raise RuntimeError(f"the broker refused {message_id}") from exc
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay turns a publish that timed out into a ConnectionError",
        "relay_stops_at_any_publish_error",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                try:
                    publish(topic, message_id, body)
                except TimeoutError as exc:
                    raise ConnectionError(str(exc)) from exc
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks a body that is not JSON sent without publishing it (a poison guard)",
        "relay_publishes_every_body_as_saved",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                try:
                    json.loads(body)
                except ValueError:
                    conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                    continue
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay skips a body that is not JSON and goes on (it stays pending for good)",
        "relay_publishes_every_body_as_saved",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                try:
                    json.loads(body)
                except ValueError:
                    continue
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks a body past 64 KB sent without publishing it (too large for the broker)",
        "relay_publishes_every_body_as_saved",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                if len(body) > 65536:
                    conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                    continue
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay keeps the first publish it is given in a module global",
        "each_shop_database_relays_its_own_messages",
        """
        _publish = []
        def relay_once(conn, publish, now):
            sent = []
            if not _publish:
                _publish.append(publish)
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                _publish[0](topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "place_order caches each message body by order id in a module dict",
        "each_tenant_message_carries_its_own_order",
        """
        _bodies = {}
        def _body(order_id, customer, total):
            if order_id not in _bodies:
                _bodies[order_id] = json.dumps(
                    {"order_id": order_id, "customer": customer, "total": total}
                )
            return _bodies[order_id]
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", _body(order_id, customer, total)),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex12",
        "slot key in the machine's local time",
        "slot_key_is_the_same_in_every_time_zone",
        """
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(schedule)
            return f"schedule:{schedule}:{datetime.fromtimestamp(fire_time):%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "key from the moment of the tick, not the slot",
        "two_schedulers_enqueue_each_slot_once",
        """
        _reference_due = due_slots
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(run_after) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            created = []
            for slot in _reference_due(period_s, row[0], since, now, catch_up):
                key = slot_key(schedule, int(now))
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "plain INSERT: the second scheduler's insert raises",
        "two_schedulers_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(run_after) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            created = []
            for slot in due_slots(period_s, row[0], since, now, catch_up):
                key = slot_key(schedule, slot)
                conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)",
                    (key, schedule, slot, now),
                )
                created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "the catch-up inserted newest slot first",
        "a_killed_scheduler_restarts_without_losing_a_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            newest = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()[0]
            last = None
            if newest is not None:
                fired = datetime.strptime(newest[len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in sorted(due_slots(period_s, last, since, now, catch_up), reverse=True):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "what fired kept in memory, not read from the table",
        "tick_reads_what_fired_from_the_table",
        """
        FIRED = {}
        def tick(conn, schedule, period_s, since, now, catch_up):
            created = []
            for slot in due_slots(period_s, FIRED.get(schedule), since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                FIRED[schedule] = slot
                if got:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "a catch-up capped at 48 slots without a word",
        "due_slots_on_generated_schedules",
        """
        _due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _due(period_s, last, since, now, catch_up)[-48:]
        """,
    ),
    (
        "ex12",
        "the slot at exactly now is not due yet (< instead of <=)",
        "due_slots_boundaries",
        """
        _reference_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return [s for s in _reference_due(period_s, last, since, now, catch_up) if s < now]
        """,
    ),
    (
        "ex12",
        "slots rounded to the nearest multiple instead of the one at or before now",
        "due_slots_on_generated_schedules",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0 or catch_up not in ("all", "latest"):
                raise ValueError("bad arguments")
            slot = round(now / period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        "ex12",
        "a catch-up that looks back one week at most",
        "a_long_outage_enqueues_every_missed_slot",
        """
        _reference_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _reference_due(period_s, last, max(since, now - 7 * 86400), now, catch_up)
        """,
    ),
    (
        "ex12",
        "tick enqueues 1000 slots a call at most, the rest silently dropped",
        "a_long_outage_enqueues_every_missed_slot",
        """
        _reference_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _reference_due(period_s, last, since, now, catch_up)[:1000]
        """,
    ),
    (
        "ex12",
        "due_slots walks back 500 slots at most (a loop guard)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0 or catch_up not in ("all", "latest"):
                raise ValueError("bad period_s or catch_up")
            slot = (now // period_s) * period_s
            slots = []
            for _guard in range(500):
                if slot < since or (last is not None and slot <= last):
                    break
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        "ex12",
        "minutes written with %m (the month): the slots of one hour share a key",
        "slot_key_names_the_slot",
        """
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(schedule)
            stamp = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{stamp:%Y-%m-%dT%H:%m:%SZ}"
        """,
    ),
    (
        "ex12",
        "a key looked up with SELECT, then a plain INSERT (check-then-act)",
        "two_schedulers_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            newest = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()[0]
            last = None
            if newest is not None:
                fired = datetime.strptime(newest[len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                if conn.execute("SELECT 1 FROM jobs WHERE key = ?", (key,)).fetchone():
                    continue
                conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)",
                    (key, schedule, slot, now),
                )
                created.append(key)
            return created
        """,
    ),
    (
        "ex13",
        # A head a day away is left out of the heads: the job behind it overtakes.
        "serial heads looked for only among jobs due within the hour (a look-ahead window)",
        "a_waiting_head_blocks_its_queue",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state = 'running'
                                           OR (state IN ('pending', 'retry_wait')
                                               AND run_after <= :now + 3600)
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "the cap alone, without least-busy-first",
        "a_flood_does_not_starve_the_others",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                         OR (c.state = 'running' AND c.lease_until <= :now))
                    AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running' AND r.lease_until > :now) < :cap
                  ORDER BY c.run_after, c.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "count in a SELECT, then claim in an UPDATE",
        "the_cap_holds_when_two_processes_claim",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = dict(conn.execute(
                "SELECT queue, count(*) FROM jobs WHERE state = 'running'"
                " AND lease_until > ? GROUP BY queue", (now,)).fetchall())
            open_queues = [q for (q,) in conn.execute("SELECT DISTINCT queue FROM jobs")
                           if busy.get(q, 0) < cap]
            if not open_queues:
                return None
            marks = ",".join("?" for _ in open_queues)
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET.replace(":worker", "?").replace(":now + :lease_s", "?")
                .replace(":now", "?") + f\"\"\"
                 WHERE id = (SELECT id FROM jobs
                  WHERE ((state IN ('pending', 'retry_wait') AND run_after <= ?)
                         OR (state = 'running' AND lease_until <= ?))
                    AND queue IN ({marks})
                  ORDER BY run_after, id LIMIT 1)
                RETURNING *\"\"\",
                (worker, now + lease_s, now, now, now, *open_queues),
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "a dead worker's expired lease still counts toward the cap",
        "a_dead_workers_job_does_not_hold_the_cap",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                         OR (c.state = 'running' AND c.lease_until <= :now))
                    AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running') < :cap
                  ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                             AND r.state = 'running'), c.run_after, c.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial: the oldest ready job of the key, overtaking a head that waits to retry",
        "a_waiting_head_blocks_its_queue",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                         OR (c.state = 'running' AND c.lease_until <= :now))
                    AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running' AND r.lease_until > :now)
                    AND c.id = (SELECT min(o.id) FROM jobs o WHERE o.queue = c.queue
                          AND ((o.state IN ('pending', 'retry_wait') AND o.run_after <= :now)
                               OR (o.state = 'running' AND o.lease_until <= :now)))
                  ORDER BY c.run_after, c.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "least busy counted with every running job, dead workers' leases included",
        "least_busy_counts_only_live_leases",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                         OR (c.state = 'running' AND c.lease_until <= :now))
                    AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running' AND r.lease_until > :now) < :cap
                  ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                             AND r.state = 'running'), c.run_after, c.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "the cap applied among the 50 oldest ready jobs only",
        "a_backlog_does_not_hide_another_accounts_job",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM (
                        SELECT * FROM jobs
                         WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                            OR (state = 'running' AND lease_until <= :now)
                         ORDER BY run_after, id LIMIT 50) c
                  WHERE (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running' AND r.lease_until > :now) < :cap
                  ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                             AND r.state = 'running' AND r.lease_until > :now),
                           c.run_after, c.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial head by the smallest key, as text ('sync:10' before 'sync:9')",
        "serial_head_is_the_smallest_id_whatever_the_keys",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT h.id FROM jobs h
                  WHERE h.key IN (SELECT min(key) FROM jobs
                                   WHERE state IN ('pending', 'retry_wait', 'running')
                                   GROUP BY queue)
                    AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                         OR (h.state = 'running' AND h.lease_until <= :now))
                  ORDER BY h.run_after, h.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "the lease fixed at 30 s, exercise 3's value, whatever lease_s says",
        "lease_lasts_the_lease_s_given",
        """
        LEASE_S = 30.0
        _reference_capped = claim_capped
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(conn, worker, now, LEASE_S, cap)
        """,
    ),
    (
        "ex13",
        "a claim that finds nothing returns without ending its BEGIN IMMEDIATE",
        "a_worker_claims_again_on_its_own_connection",
        """
        _reference_capped = claim_capped
        def claim_capped(conn, worker, now, lease_s, cap):
            conn.execute("BEGIN IMMEDIATE")
            row = _reference_capped(conn, worker, now, lease_s, cap)
            if row is None:
                return None
            conn.execute("COMMIT")
            return row
        """,
    ),
    (
        "ex13",
        "a running job whose worker died is never claimed again by claim_capped",
        "retried_and_orphaned_jobs_run_again",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE c.state IN ('pending', 'retry_wait') AND c.run_after <= :now
                    AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running' AND r.lease_until > :now) < :cap
                  ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                             AND r.state = 'running' AND r.lease_until > :now),
                           c.run_after, c.id
                  LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial: a dead job stays the head and blocks its queue for good",
        "retried_and_orphaned_jobs_run_again",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT h.id FROM jobs h
                  WHERE h.id IN (SELECT min(id) FROM jobs
                                  WHERE state IN ('pending', 'retry_wait', 'running', 'dead')
                                  GROUP BY queue)
                    AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                         OR (h.state = 'running' AND h.lease_until <= :now))
                  ORDER BY h.run_after, h.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "accounts compared with LIKE: 'acme_1' shares the cap of 'acmex1'",
        "accounts_are_told_apart_by_their_exact_names",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = \"\"\"(SELECT count(*) FROM jobs r WHERE r.queue LIKE c.queue
                          AND r.state = 'running' AND r.lease_until > :now)\"\"\"
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                         OR (c.state = 'running' AND c.lease_until <= :now))
                    AND \"\"\" + busy + \"\"\" < :cap
                  ORDER BY \"\"\" + busy + \"\"\", c.run_after, c.id
                  LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial queues grouped by lower(queue): 'Sync' blocks 'sync'",
        "accounts_are_told_apart_by_their_exact_names",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT h.id FROM jobs h
                  WHERE h.id IN (SELECT min(id) FROM jobs
                                  WHERE state IN ('pending', 'retry_wait', 'running')
                                  GROUP BY lower(queue))
                    AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                         OR (h.state = 'running' AND h.lease_until <= :now))
                  ORDER BY h.run_after, h.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex11",
        "the relay's run is one transaction, left open when the broker is down",
        "relay_stops_when_the_broker_is_down",
        """
        def relay_once(conn, publish, now):
            sent = []
            conn.execute("BEGIN IMMEDIATE")
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            conn.execute("COMMIT")
            return sent
        """,
    ),
    (
        "ex11",
        "the relay's marks commit at the end of the run (rolled back when the broker is down)",
        "relay_stops_when_the_broker_is_down",
        """
        def relay_once(conn, publish, now):
            sent = []
            conn.execute("BEGIN IMMEDIATE")
            try:
                pending = conn.execute(
                    "SELECT id, topic, message_id, body FROM outbox"
                    " WHERE sent_at IS NULL ORDER BY id"
                ).fetchall()
                for row_id, topic, message_id, body in pending:
                    publish(topic, message_id, body)
                    conn.execute(
                        "UPDATE outbox SET sent_at = :now WHERE id = :id",
                        {"now": now, "id": row_id},
                    )
                    sent.append(message_id)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer swallows a failed email INSERT and commits the message id anyway",
        "consume_rolls_back_a_message_it_cannot_apply",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            fresh = conn.execute(
                "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                {"mid": message_id},
            ).fetchone()
            if fresh is not None:
                try:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (:o, :c)",
                        {"o": order["order_id"], "c": order["customer"]},
                    )
                except Exception:
                    pass
            conn.execute("COMMIT")
            return fresh is not None
        """,
    ),
    (
        "ex13",
        "claim_capped never takes a job waiting in retry_wait (pending only)",
        "retried_and_orphaned_jobs_run_again",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE ((c.state = 'pending' AND c.run_after <= :now)
                         OR (c.state = 'running' AND c.lease_until <= :now))
                    AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running' AND r.lease_until > :now) < :cap
                  ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                             AND r.state = 'running' AND r.lease_until > :now),
                           c.run_after, c.id
                  LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "the lease token made once when the notebook runs, the same for every claim",
        "every_claim_gets_a_fresh_token",
        """
        import secrets
        TOKEN = secrets.token_hex(16)
        _reference_capped = claim_capped
        def claim_capped(conn, worker, now, lease_s, cap):
            row = _reference_capped(conn, worker, now, lease_s, cap)
            if row is not None:
                conn.execute("UPDATE jobs SET lease_token = ? WHERE id = ?", (TOKEN, row["id"]))
                row["lease_token"] = TOKEN
            return row
        """,
    ),
    (
        "ex11",
        "place_order looks for the order with a SELECT before its transaction",
        "two_shop_processes_place_the_same_order",
        """
        def place_order(conn, order_id, customer, total):
            if conn.execute("SELECT 1 FROM orders WHERE id = ?", (order_id,)).fetchone():
                return False
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)",
                    (order_id, customer, total),
                )
                body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                conn.execute(
                    "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
                    (f"order:{order_id}:placed:v1", body),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return True
        """,
    ),
    (
        "ex13",
        "claim_serial resets the attempt to 1 instead of counting it",
        "a_job_claimed_again_counts_its_attempt",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET.replace("attempt + 1", "1") + \"\"\"
                 WHERE id = (SELECT h.id FROM jobs h
                  WHERE h.id IN (SELECT min(id) FROM jobs
                                  WHERE state IN ('pending', 'retry_wait', 'running')
                                  GROUP BY queue)
                    AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                         OR (h.state = 'running' AND h.lease_until <= :now))
                  ORDER BY h.run_after, h.id LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "the lease token made of the worker's name and now",
        "a_token_is_random_not_the_worker_and_the_time",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            token_set = CLAIM_SET.replace("lower(hex(randomblob(16)))", ":worker || ':' || :now")
            row = conn.execute(
                "UPDATE jobs" + token_set + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                         OR (c.state = 'running' AND c.lease_until <= :now))
                    AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running' AND r.lease_until > :now) < :cap
                  ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                             AND r.state = 'running' AND r.lease_until > :now),
                           c.run_after, c.id
                  LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "the open accounts listed into the claim with an f-string",
        "accounts_are_told_apart_by_their_exact_names",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            conn.execute("BEGIN IMMEDIATE")
            try:
                busy = dict(conn.execute(
                    "SELECT queue, count(*) FROM jobs WHERE state = 'running'"
                    " AND lease_until > ? GROUP BY queue", (now,)).fetchall())
                names = [q for (q,) in conn.execute("SELECT DISTINCT queue FROM jobs")
                         if busy.get(q, 0) < cap]
                row = None
                if names:
                    listed = ", ".join(f"'{q}'" for q in names)
                    row = conn.execute(
                        "UPDATE jobs" + CLAIM_SET + f\"\"\"
                         WHERE id = (SELECT c.id FROM jobs c
                          WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                                 OR (c.state = 'running' AND c.lease_until <= :now))
                            AND c.queue IN ({listed})
                          ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                                     AND r.state = 'running' AND r.lease_until > :now),
                                   c.run_after, c.id
                          LIMIT 1)
                        RETURNING *\"\"\",
                        {"worker": worker, "now": now, "lease_s": lease_s},
                    ).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex11",
        "the relay publishes at most 1000 rows a run (a silent batch size)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                " ORDER BY id LIMIT 1000"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                publish(topic, mid, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the outbox row committed on its own before the order's transaction",
        "an_order_killed_and_never_retried_is_whole_or_absent",
        """
        def place_order(conn, order_id, customer, total):
            body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
            conn.execute(
                "INSERT OR IGNORE INTO outbox (message_id, topic, body)"
                " VALUES (?, 'order.placed', ?)",
                (f"order:{order_id}:placed:v1", body),
            )
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "the consumer tells a repeat by cursor.lastrowid after INSERT OR IGNORE",
        "a_long_lived_consumer_drops_repeats",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO processed_messages (message_id) VALUES (?)",
                    (message_id,),
                )
                fresh = bool(cur.lastrowid)
                if fresh:
                    conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                                 (order["order_id"], order["customer"]))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh
        """,
    ),
    (
        "ex11",
        "the consumer remembers ids in memory before its transaction commits",
        "a_failed_message_is_applied_when_redelivered",
        """
        _SEEN = set()
        _reference_consume = consume
        def consume(conn, message_id, body):
            if message_id in _SEEN:
                return False
            _SEEN.add(message_id)
            return _reference_consume(conn, message_id, body)
        """,
    ),
    (
        "ex11",
        "the consumer reports a message it cannot apply as a repeat (False)",
        "a_failed_message_is_applied_when_redelivered",
        """
        import sqlite3
        def consume(conn, message_id, body):
            order = json.loads(body)
            try:
                with conn:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("INSERT INTO processed_messages (message_id) VALUES (?)",
                                 (message_id,))
                    conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                                 (order["order_id"], order["customer"]))
            except sqlite3.IntegrityError:
                return False
            return True
        """,
    ),
    (
        "ex11",
        "a retried order recognised by its content (same customer and total)",
        "place_order_twice_is_one_message",
        """
        _reference_place = place_order
        def place_order(conn, order_id, customer, total):
            if conn.execute(
                "SELECT 1 FROM orders WHERE customer = ? AND total = ?", (customer, total)
            ).fetchone():
                return False
            return _reference_place(conn, order_id, customer, total)
        """,
    ),
    (
        "ex11",
        "the relay remembers in memory what it published, before publish returns",
        "a_long_lived_relay_publishes_what_the_broker_refused",
        """
        _published = set()


        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                if mid not in _published:
                    _published.add(mid)
                    publish(topic, mid, body)
                    sent.append(mid)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
            return sent
        """,
    ),
    (
        "ex11",
        "place_order opens its transaction inside the try and rolls back unguarded (a refused "
        "BEGIN reported as 'cannot rollback')",
        "a_refused_begin_reports_the_lock_not_a_rollback",
        """
        def place_order(conn, order_id, customer, total):
            try:
                conn.execute("BEGIN IMMEDIATE")
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "consume opens its transaction inside the try and rolls back unguarded (a refused "
        "BEGIN reported as 'cannot rollback')",
        "a_refused_begin_reports_the_lock_not_a_rollback",
        """
        def consume(conn, message_id, body):
            try:
                conn.execute("BEGIN IMMEDIATE")
                order = json.loads(body)
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    (message_id,),
                ).fetchone()
                if fresh is not None:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order["order_id"], order["customer"]),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the relay keeps the now of its first run in a module dict (later runs marked at it)",
        "relay_marks_sent_at_the_now_given",
        """
        _CLOCK = {}


        def relay_once(conn, publish, now):
            now = _CLOCK.setdefault("now", now)
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                publish(topic, mid, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay caches each message body by message id in a module dict (another shop's "
        "body sent)",
        "each_shop_relay_publishes_its_own_body",
        """
        _BODIES = {}


        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                body = _BODIES.setdefault(mid, body)
                publish(topic, mid, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "consume returns False when the database is locked (taken for a repeat)",
        "a_locked_database_is_an_error_not_a_repeat",
        """
        import sqlite3


        def consume(conn, message_id, body):
            order = json.loads(body)
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return False
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    (message_id,),
                ).fetchone()
                if fresh is not None:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order["order_id"], order["customer"]),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "place_order returns False when the database is locked (taken for a retry)",
        "a_locked_database_is_an_error_not_a_repeat",
        """
        import sqlite3


        def place_order(conn, order_id, customer, total):
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return False
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "consume rolls back only on sqlite3.Error: a KeyError leaves its transaction open",
        "consume_rolls_back_whatever_it_raises",
        """
        import sqlite3


        def consume(conn, message_id, body):
            conn.execute("BEGIN IMMEDIATE")
            try:
                order = json.loads(body)
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    (message_id,),
                ).fetchone()
                if fresh is not None:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order["order_id"], order["customer"]),
                    )
                conn.execute("COMMIT")
            except sqlite3.Error:
                conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the relay stores sent_at as int(now)",
        "relay_marks_sent_at_the_now_given",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                publish(topic, mid, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (int(now), row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "place_order cuts the customer's name to 64 characters",
        "body_is_json_for_any_name",
        """
        _reference_place = place_order


        def place_order(conn, order_id, customer, total):
            if isinstance(customer, str):
                customer = customer[:64]
            return _reference_place(conn, order_id, customer, total)
        """,
    ),
    (
        "ex11",
        "the relay publishes at most 5000 rows a run (a batch size past every small backlog)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                " ORDER BY id LIMIT 5000"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay pages through pending rows with OFFSET while marking them (skips pages)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent, offset = [], 0
            while True:
                page = conn.execute(
                    "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                    " ORDER BY id LIMIT 100 OFFSET ?", (offset,)
                ).fetchall()
                if not page:
                    return sent
                for row_id, topic, message_id, body in page:
                    publish(topic, message_id, body)
                    conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                    sent.append(message_id)
                offset += 100
        """,
    ),
    (
        "ex11",
        "the relay publishes by the body's order_id, not by outbox id",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
            ).fetchall()
            pending.sort(key=lambda r: json.loads(r[3])["order_id"])
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay publishes again rows sent more than 30 s ago",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox"
                " WHERE sent_at IS NULL OR sent_at < ? ORDER BY id",
                (now - 30,),
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "place_order strips the spaces around the customer's name",
        "body_is_json_for_any_name",
        """
        def place_order(conn, order_id, customer, total):
            customer = customer.strip()
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
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                        {"mid": f"order:{order_id}:placed:v1", "body": body},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "place_order swallows a failed INSERT: ROLLBACK and return False",
        "a_failed_order_is_an_error_not_a_retry",
        """
        def place_order(conn, order_id, customer, total):
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
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                        {"mid": f"order:{order_id}:placed:v1", "body": body},
                    )
                conn.execute("COMMIT")
            except Exception:
                conn.execute("ROLLBACK")
                return False
            return created is not None
        """,
    ),
    (
        "ex11",
        "place_order returns False for a retry inside its open BEGIN IMMEDIATE",
        "a_long_lived_shop_connection_tells_each_retry",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (:id, :customer, :total)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    {"id": order_id, "customer": customer, "total": total},
                ).fetchone()
                if created is None:
                    return False
                body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                conn.execute(
                    "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                    {"mid": f"order:{order_id}:placed:v1", "body": body},
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return True
        """,
    ),
    (
        "ex11",
        "the consumer keeps the ids it applied in a set in memory and skips them",
        "each_consumer_database_applies_the_message",
        """
        _seen = set()
        def consume(conn, message_id, body):
            if message_id in _seen:
                return False
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
            _seen.add(message_id)
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the consumer checks with a SELECT in a deferred BEGIN (locked when two consume at once)",
        "two_consumer_processes_send_each_email_once",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN")
            try:
                seen = conn.execute(
                    "SELECT 1 FROM processed_messages WHERE message_id = ?", (message_id,)
                ).fetchone()
                if seen is None:
                    conn.execute(
                        "INSERT INTO processed_messages (message_id) VALUES (?)", (message_id,)
                    )
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order["order_id"], order["customer"]),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return seen is None
        """,
    ),
    (
        "ex11",
        "the consumer's two INSERTs in `with conn:` on an autocommit connection (two transactions)",
        "consume_is_one_transaction",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            with conn:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id", (message_id,),
                ).fetchone()
                if fresh is not None:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order["order_id"], order["customer"]),
                    )
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the consumer returns False for a repeat inside its open BEGIN IMMEDIATE",
        "a_long_lived_consumer_drops_repeats",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    {"mid": message_id},
                ).fetchone()
                if fresh is None:
                    return False
                conn.execute(
                    "INSERT INTO emails (order_id, customer) VALUES (:order_id, :customer)",
                    {"order_id": order["order_id"], "customer": order["customer"]},
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return True
        """,
    ),
    (
        "ex11",
        "the consumer records the message id without its version (order:1:placed)",
        "consume_applies_each_message_once",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            fact = message_id.rsplit(":", 1)[0]   # 'order:1:placed': the version is noise
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    {"mid": fact},
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
        """,
    ),
    (
        "ex11",
        "the email's INSERT built with an f-string (a quote in the name breaks it)",
        "pipeline_on_generated_orders",
        """
        def consume(conn, message_id, body):
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
                        "INSERT INTO emails (order_id, customer)"
                        f" VALUES ({order['order_id']}, '{order['customer']}')"
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "place_order tells a retry by cursor.lastrowid (the connection's last insert)",
        "a_long_lived_shop_connection_tells_each_retry",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING",
                    (order_id, customer, total),
                )
                created = bool(cur.lastrowid)
                if created:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created
        """,
    ),
    (
        "ex11",
        "place_order's INSERT OR IGNORE ignores a NOT NULL failure too (returns False)",
        "a_failed_order_is_an_error_not_a_retry",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO orders (id, customer, total) VALUES (?, ?, ?)",
                    (order_id, customer, total),
                )
                created = cur.rowcount == 1
                if created:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created
        """,
    ),
    (
        "ex11",
        "the relay remembers in memory the id it published up to and selects only past it",
        "a_row_made_pending_again_is_published",
        """
        _cursor = {"published_up_to": 0}
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL AND id > ?"
                " ORDER BY id", (_cursor["published_up_to"],)
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                _cursor["published_up_to"] = row_id
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex12",
        "tick writes updated_at from the machine's clock, not now",
        "tick_enqueues_each_slot",
        """
        import time as _time


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, _time.time()),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "due_slots returns [] before checking its arguments when nothing is due",
        "due_slots_refuses_bad_arguments",
        """
        _reference_due = due_slots


        def due_slots(period_s, last, since, now, catch_up):
            if now < since:
                return []
            return _reference_due(period_s, last, since, now, catch_up)
        """,
    ),
    (
        "ex12",
        "catch_up='latest' returns the newest slot even when it already fired",
        "due_slots_boundaries",
        """
        _reference_due = due_slots


        def due_slots(period_s, last, since, now, catch_up):
            if catch_up == "latest" and period_s > 0:
                slot = (now // period_s) * period_s
                return [slot] if slot >= since else []
            return _reference_due(period_s, last, since, now, catch_up)
        """,
    ),
    (
        "ex12",
        "since bounds only the first tick, not the ticks after a slot fired",
        "since_bounds_every_tick",
        """
        _reference_due = due_slots


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since if last is None else 0, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick's BEGIN IMMEDIATE left open when slot_key raises",
        "a_failed_tick_leaves_the_connection_usable",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            conn.execute("COMMIT")
            return created
        """,
    ),
    (
        "ex13",
        "claim_serial takes an expired head again only when lease_until < now",
        "dead_and_expired_heads",
        """
        def claim_serial(conn, worker: str, now: float, lease_s: float):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until < :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "lease tokens drawn from a random.Random seeded once at import",
        "tokens_differ_between_forked_workers",
        """
        import random
        TOKENS = random.Random(1313)  # every forked worker inherits it in this state
        _reference_capped, _reference_serial = claim_capped, claim_serial
        class _TokenFromPython:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params):
                return self.conn.execute(
                    sql.replace("lower(hex(randomblob(16)))", ":token"),
                    {**params, "token": "%032x" % TOKENS.getrandbits(128)},
                )
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_TokenFromPython(conn), worker, now, lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_TokenFromPython(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "lease tokens numbered by a counter started at import",
        "tokens_differ_between_forked_workers",
        """
        import itertools
        LEASES = itertools.count(1)
        _reference_capped, _reference_serial = claim_capped, claim_serial
        class _NumberedToken:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params):
                return self.conn.execute(
                    sql.replace("lower(hex(randomblob(16)))", ":token"),
                    {**params, "token": f"lease-{next(LEASES):06d}"},
                )
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_NumberedToken(conn), worker, now, lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_NumberedToken(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "lease tokens from the process id and a counter (every container's worker is pid 1)",
        "tokens_differ_between_forked_workers",
        """
        import itertools
        import os
        LEASES = itertools.count(1)
        _reference_capped, _reference_serial = claim_capped, claim_serial
        class _PidToken:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params):
                return self.conn.execute(
                    sql.replace("lower(hex(randomblob(16)))", ":token"),
                    {**params, "token": f"{os.getpid()}-{next(LEASES)}"},
                )
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_PidToken(conn), worker, now, lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_PidToken(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "the lease cut to whole seconds (CAST(:lease_s AS INTEGER))",
        "lease_lasts_the_lease_s_given",
        """
        CLAIM_SET = CLAIM_SET.replace(
            "lease_until = :now + :lease_s", "lease_until = :now + CAST(:lease_s AS INTEGER)"
        )
        """,
    ),
    (
        "ex13",
        "jobs waiting to be retried counted as busy for the cap",
        "retried_and_orphaned_jobs_run_again",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (SELECT c.id FROM jobs c
                  WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                         OR (c.state = 'running' AND c.lease_until <= :now))
                    AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND (r.state = 'retry_wait'
                               OR (r.state = 'running' AND r.lease_until > :now))) < :cap
                  ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                             AND r.state = 'running' AND r.lease_until > :now),
                           c.run_after, c.id
                  LIMIT 1)
                RETURNING *\"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "a claim that catches sqlite3.Error and returns None",
        "a_failed_claim_comes_out",
        """
        import sqlite3
        _reference_capped, _reference_serial = claim_capped, claim_serial
        def claim_capped(conn, worker, now, lease_s, cap):
            try:
                return _reference_capped(conn, worker, now, lease_s, cap)
            except sqlite3.Error:
                return None  # "nothing to do": the worker sleeps on a broken database
        def claim_serial(conn, worker, now, lease_s):
            try:
                return _reference_serial(conn, worker, now, lease_s)
            except sqlite3.Error:
                return None
        """,
    ),
    (
        "ex11",
        "the relay publishes only the topic 'order.placed' (other facts stay pending)",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox"
                " WHERE sent_at IS NULL AND topic = 'order.placed' ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay publishes the body parsed back into a dict (json.loads)",
        "relay_publishes_and_marks",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, json.loads(body))
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay publishes the whole run at once in a thread pool, then marks",
        "relay_stops_when_the_broker_is_down",
        """
        def relay_once(conn, publish, now):
            from concurrent.futures import ThreadPoolExecutor
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            with ThreadPoolExecutor(4) as pool:
                futures = [pool.submit(publish, t, m, b) for _, t, m, b in pending]
            sent = []
            for (row_id, topic, mid, body), fut in zip(pending, futures):
                fut.result()
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay retries a refused publish 3 times itself before raising",
        "relay_lets_the_broker_error_out",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                for attempt in range(3):
                    try:
                        publish(topic, message_id, body)
                        break
                    except Exception:
                        if attempt == 2:
                            raise
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex13",
        "claim_capped takes an expired lease again only when lease_until < now",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until < :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)


        # %%
        """,
    ),
    (
        "ex13",
        "serial: ready heads taken by id alone (run_after ignored)",
        "serial_claim_follows_the_rules_on_generated_tables",
        """
        def claim_serial(conn, worker: str, now: float, lease_s: float):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped orders by busy, then id (run_after ignored)",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)


        # %%
        """,
    ),
    (
        "ex13",
        "claim_capped takes a retry_wait job only once run_after < now",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state = 'pending' AND c.run_after <= :now)
                               OR (c.state = 'retry_wait' AND c.run_after < :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)


        # %%
        """,
    ),
    (
        "ex13",
        "serial: a succeeded job stays the head (state != 'dead')",
        "serial_runs_one_at_a_time_in_order",
        """
        def claim_serial(conn, worker: str, now: float, lease_s: float):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state != 'dead'
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial head = the oldest READY job of its queue: a running head overtaken",
        "serial_runs_one_at_a_time_in_order",
        """
        def claim_serial(conn, worker: str, now: float, lease_s: float):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE (state IN ('pending', 'retry_wait')
                                               AND run_after <= :now)
                                           OR (state = 'running' AND lease_until <= :now)
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "the cap counted per worker (lease_owner = worker), not per account",
        "cap_skips_a_busy_account",
        """
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.lease_owner = :worker AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)


        # %%
        """,
    ),
    (
        "ex13",
        "serial: a head in retry_wait is never taken again (pending only)",
        "retried_and_orphaned_jobs_run_again",
        """
        def claim_serial(conn, worker: str, now: float, lease_s: float):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state = 'pending' AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped compares accounts with lower(): 'Bolt' shares the cap of 'bolt'",
        "accounts_are_told_apart_by_their_exact_names",
        """
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE lower(r.queue) = lower(c.queue) AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE lower(r.queue) = lower(c.queue) AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)


        # %%
        """,
    ),
    (
        "ex11",
        "a retried place_order sets its message pending again (re-announces the order)",
        "a_retried_order_leaves_its_sent_message_alone",
        """
        def place_order(conn, order_id, customer, total):
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
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                else:  # a retried request: announce the order again, in case the first got lost
                    conn.execute(
                        "UPDATE outbox SET sent_at = NULL WHERE message_id = ?",
                        (f"order:{order_id}:placed:v1",),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "the body's order_id written as a string (str(order_id))",
        "place_order_writes_the_order_and_its_message",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (:id, :customer, :total)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    {"id": order_id, "customer": customer, "total": total},
                ).fetchone()
                if created is not None:
                    order = {"order_id": str(order_id), "customer": customer, "total": total}
                    body = json.dumps(order)
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex13",
        "the cap compared with <= (an account runs cap + 1 jobs)",
        "cap_skips_a_busy_account",
        """
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) <= :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)


        # %%
        """,
    ),
    (
        "ex13",
        "claim_capped takes a pending job before its run_after (only retry_wait waits)",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE (c.state = 'pending'
                               OR (c.state = 'retry_wait' AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)


        # %%
        """,
    ),
    (
        # A killed process loses its connection; a Ctrl-C in a process that lives on does not.
        "ex11",
        "consume rolls back only on Exception: a KeyboardInterrupt leaves its transaction open",
        "an_interrupted_call_leaves_the_connection_usable",
        """
        def consume(conn, message_id, body):
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
            except Exception:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        # SimulatedCrash is a BaseException too, but the crash checks close the connection after it.
        "ex11",
        "place_order rolls back only on Exception: a Ctrl-C leaves BEGIN IMMEDIATE open",
        "an_interrupted_call_leaves_the_connection_usable",
        """
        def place_order(conn, order_id, customer, total):
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
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                        {"mid": f"order:{order_id}:placed:v1", "body": body},
                    )
                conn.execute("COMMIT")
            except Exception:
                conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        # The boundary of the cap, not its absence.
        "ex13",
        "a lease that ends exactly at now still counts as busy (lease_until >= now)",
        "a_dead_workers_job_does_not_hold_the_cap",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until >= :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until >= :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        # The capped claim's version of this mistake is in the zoo; the serial one differs.
        "ex13",
        "serial: a pending head taken before its run_after (only retry_wait waits)",
        "serial_claim_follows_the_rules_on_generated_tables",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND (h.state = 'pending'
                               OR (h.state = 'retry_wait' AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        # The head due exactly now waits one claim more.
        "ex13",
        "serial: a head in retry_wait taken only once run_after < now",
        "serial_claim_follows_the_rules_on_generated_tables",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after < :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        # Its worker died: the job behind it runs first, the orphan only later or never.
        "ex13",
        "serial: a running head whose lease ended drops out of the line",
        "retried_and_orphaned_jobs_run_again",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait')
                                           OR (state = 'running' AND lease_until > :now)
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        # Fewest waiting jobs is not fewest running ones.
        "ex13",
        "least busy read as the smallest backlog of ready jobs, not live leases",
        "least_busy_account_first",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue
                                     AND r.state IN ('pending', 'retry_wait')),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        # An account that had its turn yesterday is not busy now.
        "ex13",
        "least busy counted with succeeded jobs too (the fewest claimed so far)",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state IN ('running', 'succeeded')),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        # Message ids of order.placed have no '_', '%' or capitals: those of another
        # producer do.
        "ex11",
        "the consumer compares message ids with LIKE ('_' and capitals match other ids)",
        "message_ids_are_told_apart_exactly",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                seen = conn.execute(
                    "SELECT 1 FROM processed_messages WHERE message_id LIKE :mid",
                    {"mid": message_id},
                ).fetchone()
                if seen is None:
                    conn.execute(
                        "INSERT INTO processed_messages (message_id) VALUES (:mid)",
                        {"mid": message_id},
                    )
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (:order_id, :customer)",
                        {"order_id": order["order_id"], "customer": order["customer"]},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return seen is None
        """,
    ),
    (
        "ex11",
        "the consumer records the message id lower-cased",
        "message_ids_are_told_apart_exactly",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    {"mid": message_id.lower()},
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
        """,
    ),
    (
        "ex11",
        "the relay marks only the 'order.placed' rows sent (the others published every run)",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now"
                    " WHERE message_id = :mid AND topic = 'order.placed'",
                    {"now": now, "mid": message_id},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "a retried place_order overwrites the saved order (ON CONFLICT DO UPDATE)",
        "a_retried_order_leaves_its_sent_message_alone",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                old = conn.execute(
                    "SELECT id FROM orders WHERE id = :id", {"id": order_id}
                ).fetchone()
                conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (:id, :customer, :total)"
                    " ON CONFLICT (id) DO UPDATE"
                    " SET customer = excluded.customer, total = excluded.total",
                    {"id": order_id, "customer": customer, "total": total},
                )
                if old is None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                        {"mid": f"order:{order_id}:placed:v1", "body": body},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return old is None
        """,
    ),
    (
        # Publishes and marks as it should: only the return value is wrong, so no severe
        # check fails.
        "ex11",
        "the relay returns the outbox row ids, not the message ids",
        "relay_publishes_and_marks",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(row_id)
            return sent
        """,
    ),
    (
        # Both workers read the same head, then both set it running: one running job per
        # queue, held by two workers.
        "ex13",
        "serial: the head SELECTed, then claimed by an UPDATE on its id (both workers take it)",
        "serial_heads_hold_when_two_processes_claim",
        '''
        def claim_serial(conn, worker, now, lease_s):
            head = conn.execute(
                """SELECT h.id FROM jobs h
                    WHERE h.id IN (SELECT min(id) FROM jobs
                                    WHERE state IN ('pending', 'retry_wait', 'running')
                                    GROUP BY queue)
                      AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                           OR (h.state = 'running' AND h.lease_until <= :now))
                    ORDER BY h.run_after, h.id
                    LIMIT 1""",
                {"now": now},
            ).fetchone()
            if head is None:
                return None
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + " WHERE id = :id RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "id": head[0]},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped SELECTs the job, then claims it by an UPDATE on its id (both take it)",
        "the_cap_holds_when_two_processes_claim",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            chosen = conn.execute(
                """SELECT c.id FROM jobs c
                    WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                           OR (c.state = 'running' AND c.lease_until <= :now))
                      AND (SELECT count(*) FROM jobs r
                            WHERE r.queue = c.queue AND r.state = 'running'
                              AND r.lease_until > :now) < :cap
                    ORDER BY (SELECT count(*) FROM jobs r
                               WHERE r.queue = c.queue AND r.state = 'running'
                                 AND r.lease_until > :now),
                             c.run_after, c.id
                    LIMIT 1""",
                {"now": now, "cap": cap},
            ).fetchone()
            if chosen is None:
                return None
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + " WHERE id = :id RETURNING *",
                {"worker": worker, "now": now, "lease_s": lease_s, "id": chosen[0]},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial queues grouped by (queue, kind): a queue's jobs of two kinds run at once",
        "serial_heads_hold_when_two_processes_claim",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue, kind)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        # Meant to stop retrying, but nothing marks the job dead: it stays running, its
        # lease ended, and never runs or dies.
        "ex13",
        "claim_capped leaves a dead worker's job at its last attempt running for ever",
        "retried_and_orphaned_jobs_run_again",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now
                                   AND c.attempt < c.max_attempts))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: a head whose worker died at its last attempt blocks its queue for good",
        "retried_and_orphaned_jobs_run_again",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now
                                   AND h.attempt < h.max_attempts))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: heads taken among the 50 oldest queues only (LIMIT 50)",
        "many_running_heads_do_not_hide_a_ready_head",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue ORDER BY min(id) LIMIT 50)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        # json.loads gives 4200.0 == 4200 in Python: the body compared as a dict let it by.
        "ex11",
        "place_order writes the total as a float (total / 100 * 100): '4200.0' on the wire",
        "place_order_writes_the_order_and_its_message",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = json.dumps(
                        {"order_id": order_id, "customer": customer, "total": total / 100 * 100}
                    )
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        # The got line of its check showed every field but the wrong one.
        "ex13",
        "claim_serial writes updated_at from the database's clock, not now",
        "a_job_claimed_again_counts_its_attempt",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs"
                + CLAIM_SET.replace("updated_at = :now", "updated_at = strftime('%s', 'now')")
                + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        # Every earlier scene's running jobs were added with updated_at 0 or claimed with
        # one lease_s: a lease worked out from updated_at never met a longer one (two
        # holders). Its cap-only twin below (busy counted so) is caught, not severe.
        "ex13",
        "claim_capped takes a running job again once updated_at + its own lease_s has passed",
        "a_long_lease_holds_against_a_shorter_one",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.updated_at + :lease_s <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: a running head is ready again once updated_at + the caller's lease_s passed",
        "a_long_lease_holds_against_a_shorter_one",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.updated_at + :lease_s <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped counts a job busy until updated_at + the caller's lease_s (cap broken)",
        "cap_skips_a_busy_account",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.updated_at + :lease_s > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        # Every body the checks sent was JSON: a poison message never reached json.loads.
        "ex11",
        "consume parses the body after its BEGIN IMMEDIATE, outside the try (a poison message)",
        "consume_rolls_back_whatever_it_raises",
        """
        def consume(conn, message_id, body):
            conn.execute("BEGIN IMMEDIATE")
            order = json.loads(body)
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    (message_id,),
                ).fetchone()
                if fresh is not None:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order["order_id"], order["customer"]),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        # The broker the checks took down refused with ConnectionError, never a timeout.
        "ex11",
        "the relay marks a message sent when its publish times out (to spare a duplicate)",
        "a_publish_that_timed_out_stays_pending",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                try:
                    publish(topic, mid, body)
                except TimeoutError:
                    pass  # the broker may have it: publishing again would duplicate it
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer writes the message id into its INSERT with an f-string (a quote breaks it)",
        "message_ids_are_told_apart_exactly",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    f"INSERT INTO processed_messages (message_id) VALUES ('{message_id}')"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
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
        """,
    ),
    (
        "ex11",
        "the consumer looks the message id up with GLOB ('evt?1Qa' matches 'evtX1Qa')",
        "message_ids_are_told_apart_exactly",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                seen = conn.execute(
                    "SELECT 1 FROM processed_messages WHERE message_id GLOB ?", (message_id,)
                ).fetchone()
                if seen is None:
                    conn.execute(
                        "INSERT INTO processed_messages (message_id) VALUES (?)", (message_id,)
                    )
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order["order_id"], order["customer"]),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return seen is None
        """,
    ),
    (
        "ex11",
        "the consumer strips the spaces around the message id",
        "message_ids_are_told_apart_exactly",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    {"mid": message_id.strip()},
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
        """,
    ),
    (
        "ex11",
        "the consumer records the message id NFKC-normalised (a full-width digit made another id)",
        "message_ids_are_told_apart_exactly",
        """
        import unicodedata

        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    {"mid": unicodedata.normalize("NFKC", message_id)},
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
        """,
    ),
    (
        "ex11",
        "the consumer records the message id cut to 32 characters (a VARCHAR(32) habit)",
        "message_ids_are_told_apart_exactly",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    {"mid": message_id[:32]},
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
        """,
    ),
    (
        "ex13",
        "claim_capped compares accounts with GLOB: 'acme*' shares the cap of 'acmex1'",
        "accounts_are_told_apart_by_their_exact_names",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue GLOB c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue GLOB c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped compares accounts with trim(): 'Bolt ' shares the cap of 'Bolt'",
        "accounts_are_told_apart_by_their_exact_names",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE trim(r.queue) = trim(c.queue) AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE trim(r.queue) = trim(c.queue) AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial queues grouped by trim(queue): 'sync ' waits behind 'sync'",
        "accounts_are_told_apart_by_their_exact_names",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY trim(queue))
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: the head found with GLOB on the queue ('sync*' blocked by 'syncx1')",
        "accounts_are_told_apart_by_their_exact_names",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id = (SELECT min(x.id) FROM jobs x
                                        WHERE x.queue GLOB h.queue
                                          AND x.state IN ('pending', 'retry_wait', 'running'))
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped picks among the 500 oldest ready jobs (a silent LIMIT past small backlogs)",
        "a_backlog_does_not_hide_another_accounts_job",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM (SELECT * FROM jobs
                                WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                   OR (state = 'running' AND lease_until <= :now)
                                ORDER BY run_after, id LIMIT 500) c
                        WHERE (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: heads taken among the 300 oldest queues only (LIMIT 300)",
        "many_running_heads_do_not_hide_a_ready_head",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue ORDER BY min(id) LIMIT 300)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped never takes a job past its 5th attempt (a limit written into the claim)",
        "retried_and_orphaned_jobs_run_again",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND c.attempt < 5
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: a head past its 5th attempt is never taken again (attempt < 5 in the claim)",
        "retried_and_orphaned_jobs_run_again",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        AND h.attempt < 5
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped reads cap=0 as no cap at all",
        "no_account_runs_past_its_cap",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now)
                              < (CASE WHEN :cap > 0 THEN :cap ELSE 1e9 END)
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex11",
        "place_order writes its message already sent (sent_at = 0): the relay never publishes it",
        "place_order_twice_is_one_message",
        """
        def place_order(conn, order_id, customer, total):
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
                        "INSERT INTO outbox (message_id, topic, body, sent_at)"
                        " VALUES (:mid, 'order.placed', :body, 0)",
                        {"mid": f"order:{order_id}:placed:v1", "body": body},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex13",
        "claim_serial's lease token made of the worker's name (one token for all its claims)",
        "every_claim_gets_a_fresh_token",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                """UPDATE jobs
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = lower(hex(:worker)),
                   updated_at = :now

                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex11",
        "the relay skips a row whose body it already published this run (marked sent unpublished)",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent, seen = [], set()
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                if body not in seen:
                    publish(topic, message_id, body)
                    seen.add(body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "place_order remembers the order ids it placed in a set in memory (False for a new shop)",
        "each_shop_database_saves_the_order",
        """
        _placed = set()

        def place_order(conn, order_id, customer, total):
            if order_id in _placed:
                return False
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            _placed.add(order_id)
            return created is not None
        """,
    ),
    (
        "ex11",
        "the relay publishes json.dumps(body): the JSON text encoded once more (a string)",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                publish(topic, mid, json.dumps(body))
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay publishes every row of a run with the first row's body (a variable reused)",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent, payload = [], None
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                payload = payload or body
                publish(topic, mid, payload)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay publishes every row under the topic 'order.placed' (its topic column unread)",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent = []
            rows = conn.execute(
                "SELECT id, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, mid, body in rows:
                publish("order.placed", mid, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer remembers applied ids per database file in memory, after its COMMIT",
        "each_consumer_database_applies_the_message",
        """
        _seen = {}

        def consume(conn, message_id, body):
            where = conn.execute("PRAGMA database_list").fetchone()[2]
            if message_id in _seen.get(where, set()):
                return False
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id", (message_id,),
                ).fetchone()
                if fresh is not None:
                    conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                                 (order["order_id"], order["customer"]))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            _seen.setdefault(where, set()).add(message_id)
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "place_order remembers placed order ids per database file in memory, after its COMMIT",
        "each_shop_database_saves_the_order",
        """
        _placed = {}

        def place_order(conn, order_id, customer, total):
            where = conn.execute("PRAGMA database_list").fetchone()[2]
            if order_id in _placed.get(where, set()):
                return False
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            _placed.setdefault(where, set()).add(order_id)
            return created is not None
        """,
    ),
    (
        "ex13",
        "claim_serial returns None on sqlite3.OperationalError (taken for 'database is locked')",
        "a_failed_claim_comes_out",
        """
        import sqlite3

        def claim_serial(conn, worker, now, lease_s):
            try:
                row = conn.execute(
                    "UPDATE jobs" + CLAIM_SET + \"\"\"
                     WHERE id = (
                           SELECT h.id FROM jobs h
                            WHERE h.id IN (SELECT min(id) FROM jobs
                                            WHERE state IN ('pending', 'retry_wait', 'running')
                                            GROUP BY queue)
                              AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                                   OR (h.state = 'running' AND h.lease_until <= :now))
                            ORDER BY h.run_after, h.id
                            LIMIT 1)
                    RETURNING *
                    \"\"\",
                    {"worker": worker, "now": now, "lease_s": lease_s},
                ).fetchone()
            except sqlite3.OperationalError:
                return None
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped breaks ties by key, as text ('acme:10' before 'acme:9'), not by id",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = (
                "(SELECT count(*) FROM jobs r WHERE r.queue = c.queue"
                " AND r.state = 'running' AND r.lease_until > :now)"
            )
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + f\"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND {busy} < :cap
                        ORDER BY {busy}, c.run_after, c.key
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial: ready heads taken by run_after, then key as text ('sync:10' before 'sync:9')",
        "serial_claim_follows_the_rules_on_generated_tables",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.key
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex11",
        "consume decides its return from a SELECT before its transaction (both copies say True)",
        "two_consumers_report_each_message_applied_once",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            seen = conn.execute(
                "SELECT 1 FROM processed_messages WHERE message_id = ?", (message_id,)
            ).fetchone()
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id", (message_id,),
                ).fetchone()
                if fresh is not None:
                    conn.execute("INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                                 (order["order_id"], order["customer"]))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return seen is None
        """,
    ),
    (
        "ex11",
        "the relay selects at most 20000 pending rows a run (LIMIT 20000, past the backlog)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                " ORDER BY id LIMIT 20000"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay reads its pending rows with one fetchmany(20000) (a cap in Python)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now: float) -> list:
            \"\"\"Publish every pending outbox message, oldest (smallest id) first.

            Return the ``message_id`` of each message published, in the order published (not
            the outbox rows' ``id``).

            - Pending means ``sent_at IS NULL``. For each: call ``publish(topic, message_id,
              body)`` FIRST, then set ``sent_at = now`` on that row. A crash between the two
              leaves the row pending, and the next run publishes it again: a duplicate, never a
              loss.
            - When ``publish`` raises (the broker is down), leave that row pending and let the
              error propagate: the messages after it wait, so they keep their order.
            \"\"\"
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchmany(20000)
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay keeps the first connection it is given in a module global",
        "each_shop_database_relays_its_own_messages",
        """
        _CONN = None
        def relay_once(conn, publish, now):
            global _CONN
            if _CONN is None:
                _CONN = conn
            conn = _CONN
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex13",
        "claim_capped keeps the first connection it is given in a module global",
        "each_claim_uses_the_connection_it_is_given",
        """
        _CONN = None
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            global _CONN
            if _CONN is None:
                _CONN = conn
            row = _CONN.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_serial keeps the first connection it is given in a module global",
        "each_claim_uses_the_connection_it_is_given",
        """
        _CONN = None
        def claim_serial(conn, worker: str, now: float, lease_s: float):
            global _CONN
            if _CONN is None:
                _CONN = conn
            row = _CONN.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped takes any job whose lease ended, whatever its state (succeeded ones again)",
        "finished_jobs_are_never_claimed_again",
        """
        def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex11",
        "the relay publishes rows[:20000] of the pending rows (a cap in a Python slice)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending[:20000]:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay stops a run at BATCH_SIZE = 30000 messages, a module constant",
        "relay_publishes_every_pending_row_oldest_first",
        """
        BATCH_SIZE = 30000

        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                if len(sent) >= BATCH_SIZE:
                    break
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks the row sent, publishes, and un-marks it when publish raises",
        "relay_never_loses_a_message",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                try:
                    publish(topic, message_id, body)
                except BaseException:
                    conn.execute("UPDATE outbox SET sent_at = NULL WHERE id = ?", (row_id,))
                    raise
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks the row it published WHERE message_id LIKE :mid ('_' a wildcard)",
        "relay_marks_each_row_by_its_own_id",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE message_id LIKE :mid",
                    {"now": now, "mid": message_id},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks the row it published WHERE message_id GLOB :mid ('?' a wildcard)",
        "relay_marks_each_row_by_its_own_id",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE message_id GLOB :mid",
                    {"now": now, "mid": message_id},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks the row it published WHERE lower(message_id) = lower(:mid)",
        "relay_marks_each_row_by_its_own_id",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE lower(message_id) = lower(:mid)",
                    {"now": now, "mid": message_id},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks sent every row of the order it published (by the body's order_id)",
        "relay_marks_each_row_by_its_own_id",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now"
                    " WHERE json_extract(body, '$.order_id') = json_extract(:body, '$.order_id')",
                    {"now": now, "body": body},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer strips the spaces around the customer's name",
        "consume_keeps_the_customers_name_intact",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            customer = order["customer"]
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
                        {"order_id": order["order_id"], "customer": customer and customer.strip()},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the consumer cuts the customer's name to 64 characters (a VARCHAR(64) habit)",
        "consume_keeps_the_customers_name_intact",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            customer = order["customer"]
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
                        {"order_id": order["order_id"], "customer": customer and customer[:64]},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the relay selects at most 1000000 pending rows a run (LIMIT 1000000, a safety cap)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                " ORDER BY id LIMIT 1000000"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay's run capped by a parameter, limit=500_000, bound to its LIMIT",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now, limit=500_000):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                " ORDER BY id LIMIT :limit",
                {"limit": limit},
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay reads its pending rows with one fetchmany(1_000_000) (a cap in Python)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchmany(1_000_000)
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay publishes itertools.islice(rows, 300_000) of the pending rows",
        "relay_publishes_every_pending_row_oldest_first",
        """
        import itertools

        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            )
            for row_id, topic, message_id, body in itertools.islice(pending, 300_000):
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay takes one pending row at a time, at most MAX_RUN = 250_000 a run",
        "relay_publishes_every_pending_row_oldest_first",
        """
        MAX_RUN = 250_000

        def relay_once(conn, publish, now):
            sent = []
            for _n in range(MAX_RUN):
                row = conn.execute(
                    "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                    " ORDER BY id LIMIT 1"
                ).fetchone()
                if row is None:
                    break
                row_id, topic, message_id, body = row
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        # The relay_with_an_order_meanwhile scene's new order took a higher id: a mark of
        # every row up to the last one published passed. A row pending below it (an
        # operator's re-drive, an id a slower writer committed late) is marked unpublished.
        "ex11",
        "the relay marks its run sent in one UPDATE of the ids up to the last published",
        "a_row_pending_behind_the_relay_is_published_later",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            last_id = None
            try:
                for row_id, topic, message_id, body in pending:
                    publish(topic, message_id, body)
                    sent.append(message_id)
                    last_id = row_id
            finally:
                if last_id is not None:  # one UPDATE for the run, even when publish raised
                    conn.execute(
                        "UPDATE outbox SET sent_at = :now WHERE sent_at IS NULL AND id <= :last",
                        {"now": now, "last": last_id},
                    )
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks every pending row up to the one it published (id <= :id)",
        "a_row_pending_behind_the_relay_is_published_later",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                # everything up to this row is out (heals a mark an earlier run missed)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE sent_at IS NULL AND id <= :id",
                    {"now": now, "id": row_id},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        # The rows below the run's first id are left alone: a re-drive of an old row
        # passes; an id committed out of order inside the run's range does not.
        "ex11",
        "the relay marks the run's rows from its first id up to the one it published",
        "a_row_pending_behind_the_relay_is_published_later",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            first = pending[0][0] if pending else None
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now"
                    " WHERE id BETWEEN :first AND :id AND sent_at IS NULL",
                    {"now": now, "first": first, "id": row_id},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        # The look-alike rows had a body each: a mark by the row's content passed.
        "ex11",
        "the relay marks the row it published by its topic and body (no id selected)",
        "relay_marks_each_row_by_its_own_id",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE topic = :topic AND body = :body",
                    {"now": now, "topic": topic, "body": body},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex13",
        "a lease token of 16 random bits (lower(hex(randomblob(2))))",
        "lease_tokens_hold_enough_randomness",
        '''
        CLAIM_SET = """
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = lower(hex(randomblob(2))),
                   updated_at = :now
        """
        ''',
    ),
    (
        "ex13",
        "a random number below a million as the lease token (abs(random()) % 1000000)",
        "lease_tokens_hold_enough_randomness",
        '''
        CLAIM_SET = """
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = abs(random()) % 1000000,
                   updated_at = :now
        """
        ''',
    ),
    (
        "ex13",
        "a lease token of 32 random bits from a SQL function (secrets.randbits(32))",
        "lease_tokens_hold_enough_randomness",
        """
        import secrets
        CLAIM_SET = CLAIM_SET.replace("lower(hex(randomblob(16)))", "new_token()")
        _reference_capped, _reference_serial = claim_capped, claim_serial
        def _with_token(conn):
            conn.create_function("new_token", 0, lambda: secrets.randbits(32))
            return conn
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_with_token(conn), worker, now, lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_with_token(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "a lease token cut to 8 hex digits (uuid4().hex[:8] in a SQL function)",
        "lease_tokens_hold_enough_randomness",
        """
        import uuid
        CLAIM_SET = CLAIM_SET.replace("lower(hex(randomblob(16)))", "new_token()")
        _reference_capped, _reference_serial = claim_capped, claim_serial
        def _with_token(conn):
            conn.create_function("new_token", 0, lambda: uuid.uuid4().hex[:8])
            return conn
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_with_token(conn), worker, now, lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_with_token(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "a lease token of 32 bits as text (str(random.getrandbits(32)) in a SQL function)",
        "lease_tokens_hold_enough_randomness",
        """
        import random
        CLAIM_SET = CLAIM_SET.replace("lower(hex(randomblob(16)))", "new_token()")
        _reference_capped, _reference_serial = claim_capped, claim_serial
        def _with_token(conn):
            conn.create_function("new_token", 0, lambda: str(random.getrandbits(32)))
            return conn
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_with_token(conn), worker, now, lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_with_token(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "a lease token of 4 random bytes (os.urandom(4).hex() in a SQL function)",
        "lease_tokens_hold_enough_randomness",
        """
        import os
        CLAIM_SET = CLAIM_SET.replace("lower(hex(randomblob(16)))", "new_token()")
        _reference_capped, _reference_serial = claim_capped, claim_serial
        def _with_token(conn):
            conn.create_function("new_token", 0, lambda: os.urandom(4).hex())
            return conn
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_with_token(conn), worker, now, lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_with_token(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "both claims' lease token 32 random bits in SQL (lower(hex(randomblob(4))))",
        "lease_tokens_hold_enough_randomness",
        '''
        CLAIM_SET = """
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = lower(hex(randomblob(4))),
                   updated_at = :now
        """
        ''',
    ),
    (
        "ex13",
        "claim_capped counts busy with a window ORDER BY id: older ready jobs pass the cap",
        "cap_skips_a_busy_account",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT id FROM (
                              SELECT c.*, sum(c.state = 'running' AND c.lease_until > :now)
                                          OVER (PARTITION BY c.queue ORDER BY c.id) AS busy
                                FROM jobs c)
                        WHERE ((state IN ('pending', 'retry_wait') AND run_after <= :now)
                               OR (state = 'running' AND lease_until <= :now))
                          AND busy < :cap
                        ORDER BY busy, run_after, id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped takes a dead worker's job whatever the cap (only new work is capped)",
        "cap_skips_a_busy_account",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE (c.state IN ('pending', 'retry_wait') AND c.run_after <= :now
                               AND """ + busy + """ < :cap)
                           OR (c.state = 'running' AND c.lease_until <= :now)
                        ORDER BY """ + busy + """, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped counts as busy only the running jobs older than the job it takes",
        "cap_skips_a_busy_account",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue AND r.id < c.id
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped puts idle accounts first, then the oldest job (busy accounts all alike)",
        "least_busy_account_first",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """ > 0, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped breaks a tie of run_after by account name (ORDER BY ..., queue, id)",
        "capped_claim_follows_the_rules_on_generated_tables",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after, c.queue, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped serves the account served longest ago first, before run_after",
        "capped_claim_follows_the_rules_on_generated_tables",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """,
                                 (SELECT max(updated_at) FROM jobs u WHERE u.queue = c.queue),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped breaks a tie of run_after by the biggest backlog of pending jobs",
        "capped_claim_follows_the_rules_on_generated_tables",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after,
                                 (SELECT count(*) FROM jobs b
                                   WHERE b.queue = c.queue AND b.state = 'pending') DESC,
                                 c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped takes a retry_wait job once its old lease ended, before its run_after",
        "capped_claim_follows_the_rules_on_generated_tables",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state IN ('running', 'retry_wait') AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped keeps the longer of the old lease and the new (max(lease_until, ...))",
        "a_job_claimed_again_counts_its_attempt",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            longer = CLAIM_SET.replace(
                ":now + :lease_s", "max(coalesce(lease_until, 0), :now + :lease_s)"
            )
            row = conn.execute(
                "UPDATE jobs" + longer + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: heads due together go to new work first (ORDER BY run_after, attempt, id)",
        "serial_claim_follows_the_rules_on_generated_tables",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.attempt, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: a head in retry_wait taken once its old lease ended, before its run_after",
        "serial_claim_follows_the_rules_on_generated_tables",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state IN ('running', 'retry_wait') AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped caps each kind of an account's jobs apart (r.kind = c.kind in the count)",
        "cap_skips_a_busy_account",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue AND r.kind = c.kind
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped takes an expired lease back only for another worker (lease_owner <> :worker)",
        "retried_and_orphaned_jobs_run_again",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now
                                   AND c.lease_owner <> :worker))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: an expired head taken back only by another worker (lease_owner <> :worker)",
        "retried_and_orphaned_jobs_run_again",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now
                                   AND h.lease_owner <> :worker))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped moves now through datetime.utcfromtimestamp (hours off outside UTC)",
        "claims_are_the_same_in_every_time_zone",
        """
        import datetime

        _claim_capped = claim_capped

        def claim_capped(conn, worker, now, lease_s, cap):
            now = datetime.datetime.utcfromtimestamp(now).timestamp()
            return _claim_capped(conn, worker, now, lease_s, cap)
        """,
    ),
    (
        "ex13",
        "claim_serial moves now through datetime.utcfromtimestamp (hours off outside UTC)",
        "claims_are_the_same_in_every_time_zone",
        """
        import datetime

        _claim_serial = claim_serial

        def claim_serial(conn, worker, now, lease_s):
            now = datetime.datetime.utcfromtimestamp(now).timestamp()
            return _claim_serial(conn, worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "both claims set run_after = now as well (when the job was due is lost)",
        "a_job_claimed_again_counts_its_attempt",
        '''
        CLAIM_SET = """
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = lower(hex(randomblob(16))),
                   updated_at = :now,
                   run_after = :now
        """
        ''',
    ),
    (
        "ex13",
        "both claims clear last_error (a new run forgets why the last one failed)",
        "a_job_claimed_again_counts_its_attempt",
        '''
        CLAIM_SET = """
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = lower(hex(randomblob(16))),
                   updated_at = :now,
                   last_error = NULL
        """
        ''',
    ),
    (
        "ex13",
        "claim_capped writes the worker's name into its SQL with an f-string",
        "the_worker_is_stored_by_its_exact_name",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET.replace(":worker", f"'{worker}'") + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_serial stores the worker's name stripped (worker.strip())",
        "the_worker_is_stored_by_its_exact_name",
        """
        _claim_serial = claim_serial

        def claim_serial(conn, worker, now, lease_s):
            return _claim_serial(conn, worker.strip(), now, lease_s)
        """,
    ),
    (
        "ex13",
        "serial: head SELECTed, then UPDATE guarded by the state read (a dead head taken twice)",
        "serial_heads_hold_when_two_processes_claim",
        '''
        def claim_serial(conn, worker, now, lease_s):
            while True:
                head = conn.execute(
                    """
                    SELECT h.id, h.state FROM jobs h
                     WHERE h.id IN (SELECT min(id) FROM jobs
                                     WHERE state IN ('pending', 'retry_wait', 'running')
                                     GROUP BY queue)
                       AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                            OR (h.state = 'running' AND h.lease_until <= :now))
                     ORDER BY h.run_after, h.id
                     LIMIT 1
                    """,
                    {"now": now},
                ).fetchone()
                if head is None:
                    return None
                row = conn.execute(
                    "UPDATE jobs" + CLAIM_SET + " WHERE id = :id AND state = :state RETURNING *",
                    {"worker": worker, "now": now, "lease_s": lease_s, **dict(head)},
                ).fetchone()
                if row is not None:
                    return dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped: SELECT, then UPDATE guarded by the state read and the cap (orphan twice)",
        "the_cap_holds_when_two_processes_claim",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            while True:
                cand = conn.execute(
                    """SELECT c.id, c.state FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """, c.run_after, c.id LIMIT 1""",
                    {"now": now, "cap": cap},
                ).fetchone()
                if cand is None:
                    return None
                row = conn.execute(
                    "UPDATE jobs" + CLAIM_SET + """ WHERE id = :id AND state = :state
                       AND (SELECT count(*) FROM jobs r WHERE r.queue = jobs.queue
                            AND r.state = 'running' AND r.lease_until > :now) < :cap
                     RETURNING *""",
                    {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap, **dict(cand)},
                ).fetchone()
                if row is not None:
                    return dict(row)
        ''',
    ),
    (
        "ex13",
        "lease tokens counted up from the largest in the table, compared as text ('9' > '10')",
        "every_claim_gets_a_fresh_token",
        '''
        CLAIM_SET = """
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = (SELECT coalesce(max(lease_token), 0) + 1 FROM jobs),
                   updated_at = :now
        """
        ''',
    ),
    (
        "ex13",
        "lease tokens counted up from the largest number in the table (restart after a redrive)",
        "every_claim_gets_a_fresh_token",
        '''
        CLAIM_SET = """
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = (SELECT coalesce(max(CAST(lease_token AS INTEGER)), 0) + 1
                                    FROM jobs),
                   updated_at = :now
        """
        ''',
    ),
    (
        "ex13",
        "serial: heads whose worker died taken after the others (ORDER BY h.state = 'running')",
        "dead_workers_and_retried_jobs_keep_their_place",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.state = 'running', h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: fresh heads first (ORDER BY h.attempt): retried heads wait, their queues too",
        "dead_workers_and_retried_jobs_keep_their_place",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.attempt, h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped takes new work before dead workers' jobs (a CASE on state after busy)",
        "dead_workers_and_retried_jobs_keep_their_place",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = """(SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                         AND r.state = 'running' AND r.lease_until > :now)"""
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND """ + busy + """ < :cap
                        ORDER BY """ + busy + """,
                                 CASE c.state WHEN 'running' THEN 1 ELSE 0 END,
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: a head whose worker died goes by its lease_until (coalesce(lease_until, ...))",
        "dead_workers_and_retried_jobs_keep_their_place",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY coalesce(h.lease_until, h.run_after), h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "lease tokens made of the job id and its attempt (they repeat after a redrive)",
        "every_claim_gets_a_fresh_token",
        '''
        CLAIM_SET = """
               SET state = 'running',
                   attempt = attempt + 1,
                   lease_owner = :worker,
                   lease_until = :now + :lease_s,
                   lease_token = id || ':' || (attempt + 1),
                   updated_at = :now
        """
        ''',
    ),
    (
        "ex13",
        "both claims in BEGIN IMMEDIATE, no ROLLBACK when the UPDATE raises (the lock kept)",
        "a_failed_claim_leaves_no_transaction_open",
        """
        _claim_capped, _claim_serial = claim_capped, claim_serial

        def claim_capped(conn, worker, now, lease_s, cap):
            conn.execute("BEGIN IMMEDIATE")
            row = _claim_capped(conn, worker, now, lease_s, cap)
            conn.execute("COMMIT")
            return row

        def claim_serial(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            row = _claim_serial(conn, worker, now, lease_s)
            conn.execute("COMMIT")
            return row
        """,
    ),
    (
        "ex13",
        "claim_capped rolls its BEGIN IMMEDIATE back on an IntegrityError only (a full disk)",
        "a_failed_claim_leaves_no_transaction_open",
        """
        import sqlite3

        _claim_capped = claim_capped

        def claim_capped(conn, worker, now, lease_s, cap):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = _claim_capped(conn, worker, now, lease_s, cap)
            except sqlite3.IntegrityError:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return row
        """,
    ),
    (
        "ex11",
        # The order and its message still commit together; the shop's connection is left
        # opening a transaction before every later write, which nobody commits.
        "place_order by conn.isolation_level = 'IMMEDIATE' and conn.commit(), the mode left set",
        "a_long_lived_shop_connection_tells_each_retry",
        """
        def place_order(conn, order_id, customer, total):
            conn.isolation_level = "IMMEDIATE"
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (:id, :customer, :total)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    {"id": order_id, "customer": customer, "total": total},
                ).fetchone()
                if created is not None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                        {"mid": f"order:{order_id}:placed:v1", "body": body},
                    )
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            return created is not None
    """,
    ),
    (
        "ex11",
        # A repeat returns inside its transaction: the consumer's connection keeps the
        # write lock, and no other consumer process records a message meanwhile.
        "consume returns False for a repeat before its COMMIT",
        "a_long_lived_consumer_drops_repeats",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    {"mid": message_id},
                ).fetchone()
                if fresh is None:
                    return False
                conn.execute(
                    "INSERT INTO emails (order_id, customer) VALUES (:order_id, :customer)",
                    {"order_id": order["order_id"], "customer": order["customer"]},
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return True
    """,
    ),
    (
        "ex11",
        # Each message is applied once, in one transaction; the consumer's later writes
        # (its own bookkeeping) open transactions nobody commits.
        "consume by conn.isolation_level = 'DEFERRED' and conn.commit(), the mode left set",
        "a_long_lived_consumer_drops_repeats",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.isolation_level = "DEFERRED"
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
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            return fresh is not None
    """,
    ),
    (
        "ex13",
        # The claim is one statement and commits; the worker's connection is left in a
        # mode where its later writes (the job's end) open transactions nobody commits.
        "claim_serial sets conn.isolation_level = 'IMMEDIATE' and commits, the mode left set",
        "a_worker_claims_again_on_its_own_connection",
        """
        _serial = claim_serial
        def claim_serial(conn, worker, now, lease_s):
            conn.isolation_level = "IMMEDIATE"
            row = _serial(conn, worker, now, lease_s)
            conn.commit()
            return row
    """,
    ),
    (
        "ex13",
        # On a real connection the count of an UPDATE ... RETURNING is 0 until its row is
        # fetched: the claim takes the head every time and returns None, so the head's
        # attempts climb and the queue behind it never moves.
        "claim_serial tests cur.rowcount before fetching the RETURNING row",
        "serial_runs_one_at_a_time_in_order",
        """
        def claim_serial(conn, worker, now, lease_s):
            cur = conn.execute(
                "UPDATE jobs" + CLAIM_SET + '''
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            )
            if cur.rowcount == 0:
                return None
            return dict(cur.fetchone())
    """,
    ),
    (
        "ex11",
        # The open SELECT keeps its snapshot while the loop marks rows: an order saved
        # meanwhile makes the next mark fail 'database is locked', every run, and the same
        # message goes out again on each (the marks of a run also wait for the loop's end).
        "relay_once loops over its SELECT's open cursor instead of fetchall()",
        "relay_marks_only_the_rows_it_published",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            )
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
    """,
    ),
    (
        "ex11",
        # Under a thousand pending rows one batch reads them all and the SELECT ends;
        # past it, the batches' open SELECT fails the next mark after a shop commit.
        "the relay reads its backlog in fetchmany(1000) batches from one open SELECT",
        "a_busy_shop_beside_a_long_relay_run",
        """
        def relay_once(conn, publish, now):
            sent = []
            cursor = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            )
            while rows := cursor.fetchmany(1000):
                for row_id, topic, message_id, body in rows:
                    publish(topic, message_id, body)
                    conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                    sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "place_order tells a new order by the id RETURNING gave (order 0 taken for a retry)",
        "an_order_numbered_zero_is_announced",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                new_id = row[0] if row else None
                if new_id:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return bool(new_id)
        """,
    ),
    (
        "ex11",
        # The order and its message then go in as two autocommitted INSERTs: a crash
        # between them saves an order whose message is never sent.
        "place_order swallows a refused BEGIN IMMEDIATE and inserts without it",
        "a_refused_begin_is_not_a_write_without_the_transaction",
        """
        import sqlite3


        def place_order(conn, order_id, customer, total):
            try:
                conn.execute("BEGIN IMMEDIATE")
                began = True
            except sqlite3.OperationalError:
                began = False  # already in a transaction (the caller's): go on inside it
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (:id, :customer, :total)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    {"id": order_id, "customer": customer, "total": total},
                ).fetchone()
                if created is not None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                        {"mid": f"order:{order_id}:placed:v1", "body": body},
                    )
            except BaseException:
                if began:
                    conn.execute("ROLLBACK")
                raise
            if began:
                conn.execute("COMMIT")
            return created is not None
    """,
    ),
    (
        "ex13",
        # AND binds before OR: a job behind the head whose lease ended is claimed too, and
        # two jobs of one serial queue run at once.
        "claim_serial's readiness rule without brackets (head AND ready OR expired)",
        "an_expired_job_behind_the_head_waits",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + '''
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND h.state IN ('pending', 'retry_wait') AND h.run_after <= :now
                           OR h.state = 'running' AND h.lease_until <= :now
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
    """,
    ),
    (
        "ex11",
        # Another producer's id with a quote: published, then the mark raises, every run.
        "the relay marks the published row with an f-string of its message_id",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    f"UPDATE outbox SET sent_at = {now} WHERE message_id = '{message_id}'"
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer keeps only the last 1000 processed ids (a dedup window)",
        "a_redelivery_after_thousands_of_messages_is_a_repeat",
        """
        KEEP = 1000


        def consume(conn, message_id, body):
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
                    conn.execute(
                        "DELETE FROM processed_messages"
                        " WHERE rowid <= (SELECT max(rowid) FROM processed_messages) - :keep",
                        {"keep": KEEP},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the consumer keeps 10000 processed ids, pruning the oldest every 100 messages",
        "a_redelivery_after_thousands_of_messages_is_a_repeat",
        """
        _ok_consume = consume


        def consume(conn, message_id, body):
            fresh = _ok_consume(conn, message_id, body)
            held = conn.execute("SELECT count(*) FROM processed_messages").fetchone()[0]
            if fresh and held % 100 == 0:
                conn.execute(
                    "DELETE FROM processed_messages"
                    " WHERE rowid <= (SELECT max(rowid) FROM processed_messages) - 10000"
                )
            return fresh
        """,
    ),
    (
        "ex11",
        "the consumer records the message id NFC-normalised (an accent spelt two ways made one id)",
        "message_ids_are_told_apart_exactly",
        """
        import unicodedata

        _ok_consume = consume


        def consume(conn, message_id, body):
            return _ok_consume(conn, unicodedata.normalize("NFC", message_id), body)
        """,
    ),
    (
        "ex11",
        "each relay run stops after a 2 s time budget (the rest waits for the next run)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        import time

        RUN_BUDGET_S = 2.0


        def relay_once(conn, publish, now):
            sent = []
            deadline = time.monotonic() + RUN_BUDGET_S
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                if time.monotonic() > deadline:
                    break
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "each relay run stops after an hour by the wall clock (from time import time)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        from time import time as wall_clock


        def relay_once(conn, publish, now):
            sent = []
            began = wall_clock()
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                if wall_clock() - began > 3600:
                    break
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex13",
        # A poison head that kills its worker never reaches max_attempts: its queue waits
        # behind it for good.
        "serial: a head taken back from a dead worker keeps its attempt (not counted again)",
        "retried_and_orphaned_jobs_run_again",
        """
        SAME_ATTEMPT = CLAIM_SET.replace(
            "attempt = attempt + 1",
            "attempt = CASE WHEN state = 'running' THEN attempt ELSE attempt + 1 END",
        )


        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + SAME_ATTEMPT + '''
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped sorts the 5000 oldest ready jobs only (LIMIT :max_candidates)",
        "a_backlog_does_not_hide_another_accounts_job",
        """
        MAX_CANDIDATES = 5000


        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + '''
                 WHERE id = (
                       SELECT c.id FROM (SELECT * FROM jobs
                                WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                                   OR (state = 'running' AND lease_until <= :now)
                                ORDER BY run_after, id LIMIT :max_candidates) c
                        WHERE (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap,
                 "max_candidates": MAX_CANDIDATES},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial: heads taken among the 5000 oldest queues only (LIMIT 5000)",
        "many_running_heads_do_not_hide_a_ready_head",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + '''
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue ORDER BY min(id) LIMIT 5000)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial: a pending head not due yet is left out of the line (the job behind overtakes)",
        "a_waiting_head_blocks_its_queue",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + '''
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('retry_wait', 'running')
                                           OR (state = 'pending' AND run_after <= :now)
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped counts every live lease as busy, whatever the job's state",
        "busy_means_running_now",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + '''
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                ''',
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex11",
        "relay_once returns the ids it published sorted (as text: order 10 before order 9)",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sorted(sent)
    """,
    ),
    (
        "ex11",
        "relay_once returns the ids read back from the outbox, ordered by message_id",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
            ids = ",".join(str(r[0]) for r in pending) or "NULL"
            return [r[0] for r in conn.execute(
                f"SELECT message_id FROM outbox WHERE id IN ({ids}) ORDER BY message_id")]
    """,
    ),
    (
        "ex11",
        "the relay's SELECT has no ORDER BY (table order, until an index reorders it)",
        "relay_orders_by_id_whatever_the_indexes",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay takes COALESCE(sent_at, 0) = 0 for pending (a row sent at 0.0 sent again)",
        "relay_at_time_zero_marks_and_moves_on",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox"
                " WHERE COALESCE(sent_at, 0) = 0 ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay defaults its clock with now = now or time.time() (0.0 taken for none)",
        "relay_at_time_zero_marks_and_moves_on",
        """
        import time

        def relay_once(conn, publish, now):
            now = now or time.time()
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "place_order saves the body as bytes (json.dumps(...).encode(): a BLOB)",
        "the_message_body_is_saved_as_text",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = {"order_id": order_id, "customer": customer, "total": total}
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", json.dumps(body).encode()),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "place_order carries on past an IntegrityError of the outbox INSERT (taken for a retry)",
        "an_order_whose_message_cannot_be_written_is_not_saved",
        """
        import sqlite3

        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                try:
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                except sqlite3.IntegrityError:
                    pass  # the message is there already: a retried request
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "place_order tells a retry by its message in the outbox, not by the order",
        "an_order_saved_before_the_outbox_is_a_retry",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                mid = f"order:{order_id}:placed:v1"
                if conn.execute("SELECT 1 FROM outbox WHERE message_id = ?", (mid,)).fetchone():
                    conn.execute("COMMIT")
                    return False
                conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)",
                    (order_id, customer, total),
                )
                body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                conn.execute(
                    "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
                    (mid, body),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return True
        """,
    ),
    (
        "ex11",
        "place_order writes its message with INSERT OR IGNORE on every call, retries too",
        "an_order_saved_before_the_outbox_is_a_retry",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id", (order_id, customer, total),
                ).fetchone()
                body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                conn.execute(
                    "INSERT OR IGNORE INTO outbox (message_id, topic, body)"
                    " VALUES (?, 'order.placed', ?)",
                    (f"order:{order_id}:placed:v1", body),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "each relay run stops after a 2 s budget read with datetime.now()",
        "relay_publishes_every_pending_row_oldest_first",
        """
        from datetime import datetime, timedelta


        def relay_once(conn, publish, now):
            sent = []
            deadline = datetime.now() + timedelta(seconds=2)
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                if datetime.now() > deadline:
                    break
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay re-raises ConnectionError and TimeoutError only, marks any other failure sent",
        "a_message_the_broker_rejects_is_never_marked_sent",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                try:
                    publish(topic, message_id, body)
                except (ConnectionError, TimeoutError):
                    raise
                except Exception:  # a poison message: out of the way
                    conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                    continue
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay re-raises OSError only, skips a message any other error refused and goes on",
        "relay_stops_at_any_publish_error",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                try:
                    publish(topic, message_id, body)
                except OSError:
                    raise
                except Exception:
                    continue
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay wraps the broker's error in its own RuntimeError (raise ... from exc)",
        "relay_lets_the_broker_error_out",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                try:
                    publish(topic, message_id, body)
                except Exception as exc:
                    raise RuntimeError(f"relay stopped at {message_id}") from exc
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay returns [] quietly when the broker refuses the run's first message",
        "relay_lets_the_broker_error_out",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                try:
                    publish(topic, message_id, body)
                except Exception:
                    if not sent:
                        return []  # nothing went out: nothing to report
                    raise
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay never lets sent_at go back: it marks max(now, the latest sent_at saved)",
        "relay_marks_sent_at_the_now_given",
        """
        def relay_once(conn, publish, now):
            sent = []
            latest = conn.execute("SELECT max(sent_at) FROM outbox").fetchone()[0]
            stamp = now if latest is None else max(now, latest)
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (stamp, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay skips a row whose body is the empty object '{}' (left pending, never sent)",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                if not json.loads(body):
                    continue  # nothing to say
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the relay marks its rows sent ten at a time (a crash publishes the batch again)",
        "a_crash_after_publish_repeats_that_message_only",
        """
        def relay_once(conn, publish, now):
            sent, batch = [], []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()

            def mark():
                conn.executemany(
                    "UPDATE outbox SET sent_at = ? WHERE id = ?", [(now, i) for i in batch]
                )
                batch.clear()

            try:
                for row_id, topic, message_id, body in pending:
                    publish(topic, message_id, body)
                    batch.append(row_id)
                    sent.append(message_id)
                    if len(batch) == 10:
                        mark()
            finally:
                mark()
            return sent
        """,
    ),
    (
        "ex13",
        "both claims UPDATE without RETURNING, then read the row back by lease_owner",
        "each_claim_returns_the_job_it_took",
        """
        _CAPPED_PICK = \"\"\"
            SELECT c.id FROM jobs c
             WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                    OR (c.state = 'running' AND c.lease_until <= :now))
               AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                     AND r.state = 'running' AND r.lease_until > :now) < :cap
             ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                        AND r.state = 'running' AND r.lease_until > :now),
                      c.run_after, c.id LIMIT 1\"\"\"
        _SERIAL_PICK = \"\"\"
            SELECT h.id FROM jobs h
             WHERE h.id IN (SELECT min(id) FROM jobs
                             WHERE state IN ('pending', 'retry_wait', 'running')
                             GROUP BY queue)
               AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                    OR (h.state = 'running' AND h.lease_until <= :now))
             ORDER BY h.run_after, h.id LIMIT 1\"\"\"
        def _take(conn, pick, params):
            cur = conn.execute("UPDATE jobs" + CLAIM_SET + " WHERE id = (" + pick + ")", params)
            if cur.rowcount == 0:
                return None
            row = conn.execute(
                "SELECT * FROM jobs WHERE lease_owner = :worker AND state = 'running'"
                " ORDER BY updated_at DESC, id DESC LIMIT 1", params).fetchone()
            return None if row is None else dict(row)
        def claim_capped(conn, worker, now, lease_s, cap):
            return _take(conn, _CAPPED_PICK,
                         {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap})
        def claim_serial(conn, worker, now, lease_s):
            return _take(conn, _SERIAL_PICK, {"worker": worker, "now": now, "lease_s": lease_s})
        """,
    ),
    (
        "ex13",
        "both claims compare with now rounded to whole seconds (round(now))",
        "a_lease_holds_to_the_fraction_of_a_second",
        """
        _reference_capped, _reference_serial = claim_capped, claim_serial
        class _Rounded:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                sql = sql.replace("<= :now", "<= :whole").replace("> :now", "> :whole")
                return self.conn.execute(sql, {**params, "whole": round(params["now"])})
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_Rounded(conn), worker, now, lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_Rounded(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "claim_capped compares with now cut to whole seconds (int(now))",
        "due_times_count_to_the_fraction_of_a_second",
        """
        _reference_capped = claim_capped
        class _Cut:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                sql = sql.replace("<= :now", "<= :whole").replace("> :now", "> :whole")
                return self.conn.execute(sql, {**params, "whole": int(params["now"])})
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_Cut(conn), worker, now, lease_s, cap)
        """,
    ),
    (
        "ex13",
        "both claims set the lease_token in a second UPDATE, after the one that takes the job",
        "the_old_holder_is_fenced_off_by_the_claim_itself",
        """
        import secrets
        CLAIM_SET = CLAIM_SET.replace("lease_token = lower(hex(randomblob(16))),", "")
        _reference_capped, _reference_serial = claim_capped, claim_serial
        def _with_token(conn, row):
            if row is not None:
                token = secrets.token_hex(16)
                conn.execute("UPDATE jobs SET lease_token = ? WHERE id = ?", (token, row["id"]))
                row["lease_token"] = token
            return row
        def claim_capped(conn, worker, now, lease_s, cap):
            return _with_token(conn, _reference_capped(conn, worker, now, lease_s, cap))
        def claim_serial(conn, worker, now, lease_s):
            return _with_token(conn, _reference_serial(conn, worker, now, lease_s))
        """,
    ),
    (
        "ex13",
        "both claims count the attempt in a second UPDATE (a kill between loses it)",
        "a_claim_killed_midway_leaves_no_half_claim",
        """
        CLAIM_SET = CLAIM_SET.replace("attempt = attempt + 1,", "")
        _reference_capped, _reference_serial = claim_capped, claim_serial
        def _counted(conn, row):
            if row is None:
                return None
            return dict(conn.execute(
                "UPDATE jobs SET attempt = attempt + 1 WHERE id = ? RETURNING *", (row["id"],)
            ).fetchone())
        def claim_capped(conn, worker, now, lease_s, cap):
            return _counted(conn, _reference_capped(conn, worker, now, lease_s, cap))
        def claim_serial(conn, worker, now, lease_s):
            return _counted(conn, _reference_serial(conn, worker, now, lease_s))
        """,
    ),
    (
        "ex13",
        "claim_capped counts an account's busy jobs up to a LIMIT of 10 (a big cap never reached)",
        "no_account_runs_past_its_cap",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = (
                "(SELECT count(*) FROM (SELECT 1 FROM jobs r WHERE r.queue = c.queue"
                " AND r.state = 'running' AND r.lease_until > :now LIMIT 10))"
            )
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + f"""
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND {busy} < :cap
                        ORDER BY {busy}, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped takes the account from the key's prefix (before ':'), not from queue",
        "busy_means_running_now",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = (
                "(SELECT count(*) FROM jobs r"
                " WHERE substr(r.key, 1, instr(r.key, ':') - 1)"
                "     = substr(c.key, 1, instr(c.key, ':') - 1)"
                " AND r.state = 'running' AND r.lease_until > :now)"
            )
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + f"""
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND {busy} < :cap
                        ORDER BY {busy}, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped takes a job due within the next second (run_after <= now + 1, for skew)",
        "due_times_count_to_the_fraction_of_a_second",
        """
        _reference_capped = claim_capped
        class _Skewed:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params):
                return self.conn.execute(
                    sql.replace("c.run_after <= :now", "c.run_after <= :now + 1"), params
                )
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_Skewed(conn), worker, now, lease_s, cap)
        """,
    ),
    (
        "ex13",
        "serial: a head due within the next second taken (run_after <= now + 1, for skew)",
        "due_times_count_to_the_fraction_of_a_second",
        """
        _reference_serial = claim_serial
        class _Skewed:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params):
                return self.conn.execute(
                    sql.replace("h.run_after <= :now", "h.run_after <= :now + 1"), params
                )
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_Skewed(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "both claims cap the lease at an hour (min(lease_s, 3600)): a longer one ends early",
        "lease_lasts_the_lease_s_given",
        """
        _reference_capped, _reference_serial = claim_capped, claim_serial
        MAX_LEASE_S = 3600.0
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(conn, worker, now, min(lease_s, MAX_LEASE_S), cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(conn, worker, now, min(lease_s, MAX_LEASE_S))
        """,
    ),
    (
        "ex13",
        "claim_capped SELECTs the job, then an UPDATE guarded on it still ready: None if it lost",
        "a_worker_that_loses_a_race_takes_the_next_job",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            params = {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap}
            found = conn.execute("""
                SELECT c.id FROM jobs c
                 WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                        OR (c.state = 'running' AND c.lease_until <= :now))
                   AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                          AND r.state = 'running' AND r.lease_until > :now) < :cap
                 ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                             AND r.state = 'running' AND r.lease_until > :now),
                          c.run_after, c.id
                 LIMIT 1""", params).fetchone()
            if found is None:
                return None
            row = conn.execute("UPDATE jobs" + CLAIM_SET + """
                WHERE id = :id
                  AND ((state IN ('pending', 'retry_wait') AND run_after <= :now)
                       OR (state = 'running' AND lease_until <= :now))
                  AND (SELECT count(*) FROM jobs r WHERE r.queue = jobs.queue
                         AND r.state = 'running' AND r.lease_until > :now) < :cap
                RETURNING *""", {**params, "id": found[0]}).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: head SELECTed, then an UPDATE guarded on it still a ready head: None if it lost",
        "a_worker_that_loses_a_race_takes_the_next_job",
        '''
        HEADS = """(SELECT min(id) FROM jobs
                     WHERE state IN ('pending', 'retry_wait', 'running') GROUP BY queue)"""
        READY = """((state IN ('pending', 'retry_wait') AND run_after <= :now)
                    OR (state = 'running' AND lease_until <= :now))"""
        def claim_serial(conn, worker, now, lease_s):
            params = {"worker": worker, "now": now, "lease_s": lease_s}
            found = conn.execute(
                f"SELECT id FROM jobs WHERE id IN {HEADS} AND {READY}"
                " ORDER BY run_after, id LIMIT 1", params,
            ).fetchone()
            if found is None:
                return None
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + f" WHERE id = :id AND id IN {HEADS} AND {READY}"
                " RETURNING *", {**params, "id": found[0]},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: a head taken back from a dead worker keeps its old lease_owner",
        "dead_and_expired_heads",
        """
        _reference_serial = claim_serial
        class _KeepsOwner:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params):
                return self.conn.execute(
                    sql.replace(
                        "lease_owner = :worker",
                        "lease_owner = CASE WHEN state = 'running'"
                        " THEN lease_owner ELSE :worker END",
                    ),
                    params,
                )
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_KeepsOwner(conn), worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "claim_capped keeps updated_at of a job it takes back from a dead worker",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        _reference_capped = claim_capped
        class _KeepsUpdatedAt:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params):
                return self.conn.execute(
                    sql.replace(
                        "updated_at = :now",
                        "updated_at = CASE WHEN state = 'running' THEN updated_at ELSE :now END",
                    ),
                    params,
                )
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_KeepsUpdatedAt(conn), worker, now, lease_s, cap)
        """,
    ),
    (
        "ex13",
        "claim_capped in Python breaks ties of run_after by a set of accounts (PYTHONHASHSEED)",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = conn.execute("SELECT * FROM jobs").fetchall()
                busy = {}
                for r in rows:
                    if r["state"] == "running" and r["lease_until"] > now:
                        busy[r["queue"]] = busy.get(r["queue"], 0) + 1
                best = None
                for queue in {r["queue"] for r in rows}:
                    if busy.get(queue, 0) >= cap:
                        continue
                    ready = [
                        r for r in rows
                        if r["queue"] == queue
                        and ((r["state"] in ("pending", "retry_wait") and r["run_after"] <= now)
                             or (r["state"] == "running" and r["lease_until"] <= now))
                    ]
                    if ready:
                        first = min(ready, key=lambda r: (r["run_after"], r["id"]))
                        rank = (busy.get(queue, 0), first["run_after"])
                        if best is None or rank < best[0]:
                            best = (rank, first["id"])
                row = None
                if best is not None:
                    row = conn.execute(
                        "UPDATE jobs" + CLAIM_SET + " WHERE id = :id RETURNING *",
                        {"worker": worker, "now": now, "lease_s": lease_s, "id": best[1]},
                    ).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial in Python breaks ties of run_after between heads by a set of queues",
        "serial_claim_follows_the_rules_on_generated_tables",
        """
        def claim_serial(conn, worker, now, lease_s):
            conn.execute("BEGIN IMMEDIATE")
            try:
                heads = {}
                for r in conn.execute(
                    "SELECT * FROM jobs WHERE state IN ('pending', 'retry_wait', 'running')"
                    " ORDER BY id"
                ).fetchall():
                    heads.setdefault(r["queue"], r)
                best = None
                for queue in set(heads):
                    h = heads[queue]
                    ready = (h["state"] in ("pending", "retry_wait") and h["run_after"] <= now) or (
                        h["state"] == "running" and h["lease_until"] <= now
                    )
                    if ready and (best is None or h["run_after"] < best["run_after"]):
                        best = h
                row = None
                if best is not None:
                    row = conn.execute(
                        "UPDATE jobs" + CLAIM_SET + " WHERE id = :id RETURNING *",
                        {"worker": worker, "now": now, "lease_s": lease_s, "id": best["id"]},
                    ).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        # Busy counted per kind in the ORDER BY only (the cap itself counts the account):
        # an account running a sync and a report looks idle to its waiting email.
        "claim_capped orders by the busy jobs of the job's own kind (r.kind = c.kind)",
        "least_busy_account_first",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.kind = c.kind
                                     AND r.state = 'running' AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        # The least recently touched first: a retry whose run just failed waits behind
        # newer work due at the same time.
        "claim_capped breaks a tie of run_after by updated_at, then id",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.updated_at, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "serial: heads due together taken by updated_at, then id (a failed head's queue waits)",
        "serial_claim_follows_the_rules_on_generated_tables",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.updated_at, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        # Ids compared as text: 10 and 11 go before 2 once an account has ten jobs.
        "claim_capped breaks a tie of run_after by the id as text (CAST(c.id AS TEXT))",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, CAST(c.id AS TEXT)
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        # Retries first among jobs due together: new work saved before them waits.
        "claim_capped breaks a tie of run_after by attempt DESC (retries first), then id",
        "capped_claim_follows_the_rules_on_generated_tables",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.attempt DESC, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        # Between its two writes the head is pending under a new lease: still ready.
        "serial: the head's lease written in one UPDATE, its state in a second (ready between)",
        "serial_heads_hold_when_two_processes_claim",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs SET lease_owner = :worker, lease_until = :now + :lease_s,"
                " lease_token = lower(hex(randomblob(16))), updated_at = :now" + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING id
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            if row is None:
                return None
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1 WHERE id = ? RETURNING *",
                (row["id"],),
            ).fetchone()
            return dict(row)
        """,
    ),
    (
        "ex13",
        # Keys that start with the kind ('email:order:1:0') make each job a line of its own.
        "serial: heads grouped by the key without its trailing digits, not by queue",
        "serial_heads_hold_when_two_processes_claim",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY rtrim(key, '0123456789'))
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        # The cap counts running jobs only; the order counts every lease still to come.
        "claim_capped's least-busy order counts leases left on succeeded and retry_wait jobs",
        "busy_means_running_now",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped's SQL built once, the first call's cap written in (a module global)",
        "each_call_uses_its_own_cap_and_lease_s",
        """
        _SQL = []

        def claim_capped(conn, worker, now, lease_s, cap):
            if not _SQL:
                _SQL.append("UPDATE jobs" + CLAIM_SET + f\"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < {int(cap)}
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *\"\"\")
            row = conn.execute(
                _SQL[0], {"worker": worker, "now": now, "lease_s": lease_s}
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_serial's SQL built once, the first call's lease_s written in (a module dict)",
        "each_call_uses_its_own_cap_and_lease_s",
        """
        _SQL = {}

        def claim_serial(conn, worker, now, lease_s):
            if "serial" not in _SQL:
                _SQL["serial"] = "UPDATE jobs" + CLAIM_SET.replace(
                    ":lease_s", repr(float(lease_s))
                ) + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *\"\"\"
            row = conn.execute(_SQL["serial"], {"worker": worker, "now": now}).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        # NULL leases as 0: a head whose worker died waits behind new heads due with it.
        "serial: heads due together ordered by the lease they still hold, then id",
        "ties_go_by_id_whatever_lease_a_job_still_holds",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, coalesce(h.lease_until, 0), h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "capped: least busy as a share, live running jobs over all the account's jobs",
        "least_busy_is_a_live_count_at_every_claim",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now) * 1.0
                                 / (SELECT count(*) FROM jobs t WHERE t.queue = c.queue),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "capped: ties of busy go first to the account not served last (kept in a module dict)",
        "least_busy_is_a_live_count_at_every_claim",
        """
        _LAST = {}

        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.queue = :last, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap,
                 "last": _LAST.get("queue")},
            ).fetchone()
            if row is None:
                return None
            _LAST["queue"] = row["queue"]
            return dict(row)
        """,
    ),
    (
        "ex13",
        "capped: now never goes back, the largest now seen kept in a class attribute",
        "each_claim_uses_the_now_it_is_given",
        """
        _reference_capped = claim_capped

        class Clock:
            last = 0.0

        def claim_capped(conn, worker, now, lease_s, cap):
            Clock.last = now = max(Clock.last, now)
            return _reference_capped(conn, worker, now, lease_s, cap)
        """,
    ),
    (
        "ex13",
        "serial: now never goes back, the largest now seen kept in a module list",
        "each_claim_uses_the_now_it_is_given",
        """
        _reference_serial = claim_serial
        _LAST_NOW = [0.0]

        def claim_serial(conn, worker, now, lease_s):
            _LAST_NOW[0] = now = max(_LAST_NOW[0], now)
            return _reference_serial(conn, worker, now, lease_s)
        """,
    ),
    (
        "ex11",
        "the relay takes rows marked sent after now for pending (sent_at IS NULL OR sent_at > now)",
        "relay_publishes_and_marks",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox"
                " WHERE sent_at IS NULL OR sent_at > :now ORDER BY id",
                {"now": now},
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer records the message id cut to 255 characters (a VARCHAR(255) habit)",
        "message_ids_are_told_apart_exactly",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (:mid)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    {"mid": message_id[:255]},
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
        """,
    ),
    (
        "ex11",
        "the relay publishes only bodies with an order_id, marks the other facts sent unpublished",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                if "order_id" in json.loads(body):
                    publish(topic, message_id, body)
                    sent.append(message_id)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id", {"now": now, "id": row_id}
                )
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer writes the email's order_id as int(float(...)) (wrong past 2**53)",
        "order_ids_past_a_float_stay_exact",
        """
        def consume(conn, message_id, body):
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
                        {"order_id": int(float(order["order_id"])), "customer": order["customer"]},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the consumer writes the email's order_id as float(...) (2**53 + 1 becomes 2**53)",
        "order_ids_past_a_float_stay_exact",
        """
        def consume(conn, message_id, body):
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
                        {"order_id": float(order["order_id"]), "customer": order["customer"]},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the consumer parses the body with json.loads(parse_int=float), then int(order_id)",
        "order_ids_past_a_float_stay_exact",
        """
        def consume(conn, message_id, body):
            order = json.loads(body, parse_int=float)
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
                        {"order_id": int(order["order_id"]), "customer": order["customer"]},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "place_order writes the body's order_id as int(float(order_id))",
        "order_ids_past_a_float_stay_exact",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (:id, :customer, :total)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    {"id": order_id, "customer": customer, "total": total},
                ).fetchone()
                if created is not None:
                    body = json.dumps(
                        {"order_id": int(float(order_id)), "customer": customer, "total": total}
                    )
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                        {"mid": f"order:{order_id}:placed:v1", "body": body},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "place_order builds the message_id from int(float(order_id))",
        "order_ids_past_a_float_stay_exact",
        """
        def place_order(conn, order_id, customer, total):
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
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (:mid, 'order.placed', :body)",
                        {"mid": f"order:{int(float(order_id))}:placed:v1", "body": body},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created is not None
        """,
    ),
    (
        "ex11",
        "the relay stores sent_at rounded to the millisecond (round(now, 3))",
        "relay_marks_sent_at_the_now_given",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = :now WHERE id = :id",
                    {"now": round(now, 3), "id": row_id},
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer defaults a missing order_id to 0 (order.get('order_id', 0))",
        "a_failed_message_is_applied_when_redelivered",
        """
        def consume(conn, message_id, body):
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
                        {"order_id": order.get("order_id", 0), "customer": order["customer"]},
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the relay truncates sent_at to the millisecond (int(now * 1000) / 1000)",
        "relay_marks_sent_at_the_now_given",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute(
                    "UPDATE outbox SET sent_at = ? WHERE id = ?", (int(now * 1000) / 1000, row_id)
                )
                sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex13",
        "capped: now never goes back, the largest now seen kept in a dict by id(conn)",
        "each_claim_uses_the_now_it_is_given",
        """
        _reference_capped = claim_capped
        _LAST_NOW = {}

        def claim_capped(conn, worker, now, lease_s, cap):
            _LAST_NOW[id(conn)] = now = max(_LAST_NOW.get(id(conn), 0.0), now)
            return _reference_capped(conn, worker, now, lease_s, cap)
        """,
    ),
    (
        "ex13",
        "serial: now never goes back, the largest now seen kept in a dict by id(conn)",
        "each_claim_uses_the_now_it_is_given",
        """
        _reference_serial = claim_serial
        _LAST_NOW = {}

        def claim_serial(conn, worker, now, lease_s):
            _LAST_NOW[id(conn)] = now = max(_LAST_NOW.get(id(conn), 0.0), now)
            return _reference_serial(conn, worker, now, lease_s)
        """,
    ),
    (
        "ex13",
        "serial: the queues this process took kept in a module set and skipped after",
        "a_job_taken_before_comes_back_in_the_same_process",
        """
        import json

        _HELD = set()

        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                          AND h.queue NOT IN (SELECT value FROM json_each(:held))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s,
                 "held": json.dumps(sorted(_HELD))},
            ).fetchone()
            if row is None:
                return None
            _HELD.add(row["queue"])
            return dict(row)
        """,
    ),
    (
        "ex13",
        "capped: the jobs this process took kept in a module set and never taken again",
        "a_job_taken_before_comes_back_in_the_same_process",
        """
        import json

        _TAKEN = set()

        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND c.id NOT IN (SELECT value FROM json_each(:taken))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap,
                 "taken": json.dumps(sorted(_TAKEN))},
            ).fetchone()
            if row is None:
                return None
            _TAKEN.add(row["id"])
            return dict(row)
        """,
    ),
    (
        "ex13",
        # The ready test copied into the count: a job claimed by a worker whose clock runs
        # ahead is due after this worker's now, and its account looks under its cap.
        "claim_capped counts as busy only running jobs already due (r.run_after <= :now)",
        "no_account_runs_past_its_cap",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now AND r.run_after <= :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped counts as busy only jobs claimed by now (r.updated_at <= :now)",
        "no_account_runs_past_its_cap",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now AND r.updated_at <= :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped's least-busy order counts only running jobs already due (r.run_after)",
        "busy_means_running_now",
        """
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now AND r.run_after <= :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        # Backoffs grow past a day: the head's retry falls out of the window.
        "serial heads looked for only among jobs due within a week (a look-ahead window)",
        "serial_head_is_the_smallest_id_whatever_the_keys",
        """
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + \"\"\"
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state = 'running'
                                           OR (state IN ('pending', 'retry_wait')
                                               AND run_after <= :now + 7 * 86400)
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                \"\"\",
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        """,
    ),
    (
        "ex13",
        "claim_capped returns the sqlite3.Row itself, not dict(row)",
        "each_claim_hands_back_a_plain_dict",
        """
        _reference_capped = claim_capped

        def claim_capped(conn, worker, now, lease_s, cap):
            got = _reference_capped(conn, worker, now, lease_s, cap)
            if got is None:
                return None
            return conn.execute("SELECT * FROM jobs WHERE id = ?", (got["id"],)).fetchone()
        """,
    ),
    (
        "ex13",
        "claim_capped lists the full accounts with a LIMIT 100 (NOT IN ... HAVING count(*) >= cap)",
        "many_accounts_at_their_cap_all_wait",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND :cap > 0 AND c.queue NOT IN (SELECT queue FROM jobs
                                               WHERE state = 'running' AND lease_until > :now
                                               GROUP BY queue HAVING count(*) >= :cap
                                               LIMIT 100)
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped counts busy in a CTE of the 1000 busiest accounts only (LIMIT 1000)",
        "many_accounts_at_their_cap_all_wait",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                """WITH busy AS (SELECT queue, count(*) AS n FROM jobs
                                  WHERE state = 'running' AND lease_until > :now
                                  GROUP BY queue ORDER BY n DESC LIMIT 1000)
                UPDATE jobs""" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c LEFT JOIN busy b ON b.queue = c.queue
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND coalesce(b.n, 0) < :cap
                        ORDER BY coalesce(b.n, 0), c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "both claims return the row read before the UPDATE, the lease patched in (attempt stale)",
        "each_claim_hands_back_a_plain_dict",
        '''
        import secrets
        def _claim_by_hand(conn, worker, now, lease_s, pick_sql, params):
            conn.execute("BEGIN IMMEDIATE")
            try:
                job = conn.execute(pick_sql, params).fetchone()
                if job is None:
                    conn.execute("COMMIT")
                    return None
                token = secrets.token_hex(16)
                conn.execute("UPDATE jobs SET state = 'running', attempt = attempt + 1,"
                             " lease_owner = ?, lease_until = ?, lease_token = ?,"
                             " updated_at = ? WHERE id = ?",
                             (worker, now + lease_s, token, now, job["id"]))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return {**dict(job), "state": "running", "lease_owner": worker,
                    "lease_until": now + lease_s, "lease_token": token, "updated_at": now}
        def claim_capped(conn, worker, now, lease_s, cap):
            return _claim_by_hand(conn, worker, now, lease_s, """
                       SELECT c.* FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1""", {"now": now, "cap": cap})
        def claim_serial(conn, worker, now, lease_s):
            return _claim_by_hand(conn, worker, now, lease_s, """
                       SELECT h.* FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1""", {"now": now})
        ''',
    ),
    (
        "ex13",
        "claim_serial returns a few columns only (RETURNING id, key, queue, state, attempt, ...)",
        "each_claim_hands_back_a_plain_dict",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING id, key, queue, state, attempt, lease_until, lease_token
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped takes only jobs due within the last hour (BETWEEN :now - 3600 AND :now)",
        "retried_and_orphaned_jobs_run_again",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait')
                                AND c.run_after BETWEEN :now - 3600 AND :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial: an expired head taken back only within an hour of its lease's end",
        "retried_and_orphaned_jobs_run_again",
        '''
        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now
                                   AND h.lease_until > :now - 3600))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped ranks accounts by the running jobs saved before the candidate (r.id < c.id)",
        "least_busy_is_a_live_count_at_every_claim",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now AND r.id < c.id),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped keeps the accounts it read first, per database file (new ones never served)",
        "accounts_and_queues_that_come_later_are_served",
        '''
        import json
        _ACCOUNTS = {}
        def _accounts(conn):
            path = conn.execute("PRAGMA database_list").fetchone()[2]
            if path not in _ACCOUNTS:
                _ACCOUNTS[path] = [r[0] for r in conn.execute("SELECT DISTINCT queue FROM jobs")]
            return json.dumps(_ACCOUNTS[path])

        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE c.queue IN (SELECT value FROM json_each(:accounts))
                          AND ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap,
                 "accounts": _accounts(conn)},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "serial keeps the queues it read first, per database file (new queues never served)",
        "accounts_and_queues_that_come_later_are_served",
        '''
        import json
        _QUEUES = {}
        def _queues(conn):
            path = conn.execute("PRAGMA database_list").fetchone()[2]
            if path not in _QUEUES:
                _QUEUES[path] = [r[0] for r in conn.execute("SELECT DISTINCT queue FROM jobs")]
            return json.dumps(_QUEUES[path])

        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.queue IN (SELECT value FROM json_each(:queues))
                          AND h.id IN (SELECT min(id) FROM jobs
                                        WHERE state IN ('pending', 'retry_wait', 'running')
                                        GROUP BY queue)
                          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                               OR (h.state = 'running' AND h.lease_until <= :now))
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "queues": _queues(conn)},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex11",
        "the relay returns only the 'order.placed' ids it published (other topics left out)",
        "relay_returns_the_ids_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                if topic == "order.placed":
                    sent.append(message_id)
            return sent
        """,
    ),
    (
        "ex11",
        "the consumer strips the line break ending the customer's name (a newline rstrip)",
        "consume_keeps_the_customers_name_intact",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                    (message_id,),
                ).fetchone()
                if fresh is not None:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order["order_id"], order["customer"].rstrip(chr(10))),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex13",
        # The guard re-tests readiness only: a take landing between the SELECT and the
        # UPDATE fills the account's cap, and the stale pick still goes through.
        "claim_capped SELECTs, then an UPDATE guarded on the job still ready, never on the cap",
        "a_take_between_the_read_and_the_write_still_counts",
        '''
        _READY = """((state IN ('pending', 'retry_wait') AND run_after <= :now)
                     OR (state = 'running' AND lease_until <= :now))"""
        _BUSY = """(SELECT count(*) FROM jobs r WHERE r.queue = jobs.queue
                      AND r.state = 'running' AND r.lease_until > :now)"""
        def claim_capped(conn, worker, now, lease_s, cap):
            params = {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap}
            while True:
                found = conn.execute(
                    f"SELECT id FROM jobs WHERE {_READY} AND {_BUSY} < :cap"
                    f" ORDER BY {_BUSY}, run_after, id LIMIT 1", params).fetchone()
                if found is None:
                    return None
                row = conn.execute(
                    "UPDATE jobs" + CLAIM_SET + f" WHERE id = :id AND {_READY} RETURNING *",
                    {**params, "id": found[0]}).fetchone()
                if row is not None:
                    return dict(row)
        ''',
    ),
    (
        "ex13",
        # An older job of the queue redriven and taken between the read and the write is
        # the running head then: the stale pick runs beside it.
        "serial: head SELECTed, then an UPDATE guarded on it still ready, not still the head",
        "a_take_between_the_read_and_the_write_still_counts",
        '''
        _READY = """((state IN ('pending', 'retry_wait') AND run_after <= :now)
                     OR (state = 'running' AND lease_until <= :now))"""
        def claim_serial(conn, worker, now, lease_s):
            params = {"worker": worker, "now": now, "lease_s": lease_s}
            while True:
                found = conn.execute(
                    "SELECT id FROM jobs WHERE id IN (SELECT min(id) FROM jobs WHERE state IN"
                    " ('pending', 'retry_wait', 'running') GROUP BY queue)"
                    f" AND {_READY} ORDER BY run_after, id LIMIT 1", params).fetchone()
                if found is None:
                    return None
                row = conn.execute(
                    "UPDATE jobs" + CLAIM_SET + f" WHERE id = :id AND {_READY} RETURNING *",
                    {**params, "id": found[0]}).fetchone()
                if row is not None:
                    return dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped counts busy jobs up to a LIMIT of 1000 (a bigger cap never reached)",
        "no_account_runs_past_its_cap",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            busy = (
                "(SELECT count(*) FROM (SELECT 1 FROM jobs r WHERE r.queue = c.queue"
                " AND r.state = 'running' AND r.lease_until > :now LIMIT 1000))"
            )
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + f"""
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND {busy} < :cap
                        ORDER BY {busy}, c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "ex13",
        "claim_capped compares accounts NFC-normalised (two spellings of 'cafe' share a cap)",
        "accounts_are_told_apart_by_their_exact_names",
        '''
        import unicodedata
        _reference_capped = claim_capped
        class _Normalised:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                sql = sql.replace("r.queue = c.queue", "nfc(r.queue) = nfc(c.queue)")
                return self.conn.execute(sql, params)
        def claim_capped(conn, worker, now, lease_s, cap):
            conn.create_function("nfc", 1, lambda s: unicodedata.normalize("NFC", s))
            return _reference_capped(_Normalised(conn), worker, now, lease_s, cap)
        ''',
    ),
    (
        "ex13",
        "serial queues grouped NFKC-normalised (two spellings of 'cafe' are one queue)",
        "accounts_are_told_apart_by_their_exact_names",
        '''
        import unicodedata
        _reference_serial = claim_serial
        class _Normalised:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                sql = sql.replace("GROUP BY queue", "GROUP BY nfkc(queue)")
                return self.conn.execute(sql, params)
        def claim_serial(conn, worker, now, lease_s):
            conn.create_function("nfkc", 1, lambda s: unicodedata.normalize("NFKC", s))
            return _reference_serial(_Normalised(conn), worker, now, lease_s)
        ''',
    ),
    # Account names cut to 64 characters: two long names alike that far share one cap.
    (
        "ex13",
        "claim_capped compares accounts by their first 64 characters (substr(queue, 1, 64))",
        "accounts_are_told_apart_by_their_exact_names",
        '''
        _reference_capped = claim_capped
        class _Cut:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                sql = sql.replace(
                    "r.queue = c.queue", "substr(r.queue, 1, 64) = substr(c.queue, 1, 64)"
                )
                return self.conn.execute(sql, params)
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_Cut(conn), worker, now, lease_s, cap)
        ''',
    ),
    # Queue names cut to 64 characters: a long queue's running head blocks another's.
    (
        "ex13",
        "serial queues grouped by their first 64 characters (GROUP BY substr(queue, 1, 64))",
        "accounts_are_told_apart_by_their_exact_names",
        '''
        _reference_serial = claim_serial
        class _Cut:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                sql = sql.replace("GROUP BY queue", "GROUP BY substr(queue, 1, 64)")
                return self.conn.execute(sql, params)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_Cut(conn), worker, now, lease_s)
        ''',
    ),
    # run_after cut to the second in the order: a job due at x.75 goes before one due at x.25.
    (
        "ex13",
        "claim_capped orders by run_after cut to the second (CAST(c.run_after AS INTEGER), id)",
        "jobs_due_within_one_second_go_by_their_fraction",
        '''
        _reference_capped = claim_capped
        class _Whole:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                sql = sql.replace("c.run_after, c.id", "CAST(c.run_after AS INTEGER), c.id")
                return self.conn.execute(sql, params)
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(_Whole(conn), worker, now, lease_s, cap)
        ''',
    ),
    # The same among serial heads: the head due later in the second goes first.
    (
        "ex13",
        "serial: ready heads by run_after cut to the second (CAST(h.run_after AS INTEGER), id)",
        "jobs_due_within_one_second_go_by_their_fraction",
        '''
        _reference_serial = claim_serial
        class _Whole:
            def __init__(self, conn):
                self.conn = conn
            def execute(self, sql, params=()):
                sql = sql.replace("h.run_after, h.id", "CAST(h.run_after AS INTEGER), h.id")
                return self.conn.execute(sql, params)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(_Whole(conn), worker, now, lease_s)
        ''',
    ),
    (
        "ex13",
        "claim_capped clamps the cap to 1000 (min(cap, 1000)): a bigger cap is never reached",
        "busy_means_running_now",
        """
        _reference_capped = claim_capped
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(conn, worker, now, lease_s, min(cap, 1000))
        """,
    ),
    (
        "ex11",
        "the consumer sends an email only for a truthy order_id (order 0's message applied, "
        "never emailed)",
        "an_order_numbered_zero_is_announced",
        """
        def consume(conn, message_id, body):
            order = json.loads(body)
            order_id = order.get("order_id")
            conn.execute("BEGIN IMMEDIATE")
            try:
                fresh = conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)"
                    " ON CONFLICT (message_id) DO NOTHING RETURNING message_id", (message_id,),
                ).fetchone()
                if fresh is not None and order_id:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (order_id, order["customer"]),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh is not None
        """,
    ),
    (
        "ex11",
        "the relay reads now as a local date and back as UTC (sent_at shifted by the time zone)",
        "relay_marks_sent_at_the_now_given",
        """
        from datetime import datetime, timezone


        def relay_once(conn, publish, now):
            sent = []
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                stamp = datetime.fromtimestamp(now).replace(tzinfo=timezone.utc).timestamp()
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (stamp, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    # A BEGIN ended only on the path that publishes: after an empty run, the long-lived
    # relay's connection cannot begin again, so nothing saved later is ever published.
    (
        "ex11",
        "the relay BEGINs its read and returns [] early, its transaction left open",
        "a_relay_run_that_found_nothing_lets_the_next_run_publish",
        """
        def relay_once(conn, publish, now):
            conn.execute("BEGIN")
            pending = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            if not pending:
                return []
            conn.execute("COMMIT")
            sent = []
            for row_id, topic, message_id, body in pending:
                publish(topic, message_id, body)
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(message_id)
            return sent
        """,
    ),
    # A job taken back from a dead worker at its last attempt stays at max_attempts: its
    # fourth run is counted as its third.
    (
        "ex13",
        "claim_capped clamps the attempt at max_attempts (min(attempt + 1, max_attempts))",
        "retried_and_orphaned_jobs_run_again",
        '''
        CAPPED_SET = CLAIM_SET.replace(
            "attempt = attempt + 1", "attempt = min(attempt + 1, max_attempts)"
        )
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CAPPED_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    # updated_at is the claim's now: a row written by a worker whose clock ran ahead keeps
    # that later time, and the claim's own time is lost.
    (
        "ex13",
        "claim_capped never moves updated_at back (updated_at = max(updated_at, :now))",
        "a_job_claimed_again_counts_its_attempt",
        '''
        CAPPED_SET = CLAIM_SET.replace("updated_at = :now", "updated_at = max(updated_at, :now)")
        def claim_capped(conn, worker, now, lease_s, cap):
            row = conn.execute(
                "UPDATE jobs" + CAPPED_SET + """
                 WHERE id = (
                       SELECT c.id FROM jobs c
                        WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                               OR (c.state = 'running' AND c.lease_until <= :now))
                          AND (SELECT count(*) FROM jobs r
                                WHERE r.queue = c.queue AND r.state = 'running'
                                  AND r.lease_until > :now) < :cap
                        ORDER BY (SELECT count(*) FROM jobs r
                                   WHERE r.queue = c.queue AND r.state = 'running'
                                     AND r.lease_until > :now),
                                 c.run_after, c.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    # now rounded to the millisecond "against float noise": a job due at now itself is
    # not due yet, and the lease and updated_at are written a fraction off.
    (
        "ex13",
        "both claims pass now rounded to the millisecond (round(now, 3))",
        "due_times_count_to_the_fraction_of_a_second",
        """
        _reference_capped, _reference_serial = claim_capped, claim_serial
        def claim_capped(conn, worker, now, lease_s, cap):
            return _reference_capped(conn, worker, round(now, 3), lease_s, cap)
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(conn, worker, round(now, 3), lease_s)
        """,
    ),
    # lease_owner cut to 64 characters (a VARCHAR(64) habit): a worker named after its pod
    # and host never finds its own lease again.
    (
        "ex13",
        "claim_serial stores the worker's name cut to 64 characters (worker[:64])",
        "the_worker_is_stored_by_its_exact_name",
        """
        _reference_serial = claim_serial
        def claim_serial(conn, worker, now, lease_s):
            return _reference_serial(conn, worker[:64], now, lease_s)
        """,
    ),
    # A relay that "spares the consumer a duplicate": a row whose topic and body it
    # already published this run is marked sent unpublished. Two facts stated alike
    # (a second partial refund) are two messages: the second is lost.
    (
        "ex11",
        "the relay publishes a (topic, body) once a run, marks its look-alikes sent unpublished",
        "relay_publishes_pending_rows_of_every_topic",
        """
        def relay_once(conn, publish, now):
            sent, seen = [], set()
            rows = conn.execute(
                "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
            ).fetchall()
            for row_id, topic, mid, body in rows:
                if (topic, body) not in seen:
                    publish(topic, mid, body)
                    seen.add((topic, body))
                conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                sent.append(mid)
            return sent
        """,
    ),
    # A retry told by its content: the request with another total writes nothing (DO
    # NOTHING) but returns True, so the caller reports a new order that was never saved.
    (
        "ex11",
        "place_order returns True for a retry whose total changed (a retry told by content)",
        "a_retried_order_leaves_its_sent_message_alone",
        """
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                same = conn.execute(
                    "SELECT 1 FROM orders WHERE id = ? AND customer = ? AND total = ?",
                    (order_id, customer, total),
                ).fetchone()
                if same is None:
                    conn.execute(
                        "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                        " ON CONFLICT (id) DO NOTHING", (order_id, customer, total),
                    )
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)"
                        " ON CONFLICT (message_id) DO NOTHING",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return same is None
        """,
    ),
]


#: What the named check must say it expected, for the entries that name it (see test_zoo.py).
SAYS: dict[str, str] = {
    "claim_capped clamps the attempt at max_attempts (min(attempt + 1, max_attempts))": (
        "claim_capped counts the attempt of a job whose worker died"
    ),
    "both claims pass now rounded to the millisecond (round(now, 3))": "due at now itself",
    "the relay BEGINs its read and returns [] early, its transaction left open": (
        "[] while the outbox is empty"
    ),
    "the relay caches each message body by message id in a module dict (another shop's "
    "body sent)": "each run publishes its own shop's bodies",
    "the relay keeps the now of its first run in a module dict (later runs marked at it)": (
        "one relay process ran at now="
    ),
    "place_order opens its transaction inside the try and rolls back unguarded (a refused "
    "BEGIN reported as 'cannot rollback')": "to raise sqlite3's own 'database is locked'",
    "consume opens its transaction inside the try and rolls back unguarded (a refused "
    "BEGIN reported as 'cannot rollback')": "to raise sqlite3's own 'database is locked'",
    "claim_capped compares accounts NFC-normalised (two spellings of 'cafe' share a cap)": (
        "Bolt and 'caf\\xe9' are at their cap"
    ),
    "serial queues grouped NFKC-normalised (two spellings of 'cafe' are one queue)": (
        "Sync and 'caf\\xe9' are other queues"
    ),
    "claim_capped SELECTs, then an UPDATE guarded on the job still ready, never on the cap": (
        "so the claim takes no job of acme"
    ),
    "serial: head SELECTed, then an UPDATE guarded on it still ready, not still the head": (
        "so the claim takes no job of order:7"
    ),
    "claim_capped counts busy jobs up to a LIMIT of 1000 (a bigger cap never reached)": (
        "never acme's job"
    ),
    "claim_capped clamps the cap to 1000 (min(cap, 1000)): a bigger cap is never reached": (
        "(both at their cap)"
    ),
    "the relay returns only the 'order.placed' ids it published (other topics left out)": (
        "relay_once to return the same ids in the same order"
    ),
    "the consumer strips the line break ending the customer's name (a newline rstrip)": (
        "each name as the body has it"
    ),
    "place_order saves its outbox row under the order's id (INSERT INTO outbox (id, ...))": (
        "order 9's before order 2's"
    ),
    "the relay lets ConnectionError out but wraps a broker client's own error in RuntimeError": (
        "the BrokerRejectedError publish raised"
    ),
    "the relay turns a publish that timed out into a ConnectionError": (
        "the TimeoutError publish raised"
    ),
    "the relay marks a body that is not JSON sent without publishing it (a poison guard)": (
        "its body as saved"
    ),
    "the relay skips a body that is not JSON and goes on (it stays pending for good)": (
        "its body as saved"
    ),
    "the relay marks a body past 64 KB sent without publishing it (too large for the broker)": (
        "its body as saved"
    ),
    "the relay keeps the first publish it is given in a module global": (
        "each run given its own publish"
    ),
    "place_order caches each message body by order id in a module dict": (
        "never a body cached by order id from the other shop"
    ),
    # The check's first scene (a race with pauses) may catch it before its schedules do,
    # under load: both say the job went to one worker.
    "serial: the head's lease written in one UPDATE, its state in a second (ready between)": (
        "one worker"
    ),
    "serial: heads grouped by the key without its trailing digits, not by queue": (
        "one running job per serial key"
    ),
    "claim_capped's least-busy order counts leases left on succeeded and retry_wait jobs": (
        "so cora is the least busy though bolt's job is older"
    ),
    "claim_capped's SQL built once, the first call's cap written in (a module global)": (
        "each job leased until now + the lease_s of its own call"
    ),
    "claim_serial's SQL built once, the first call's lease_s written in (a module dict)": (
        "each job leased until now + the lease_s of its own call"
    ),
    "serial: heads due together ordered by the lease they still hold, then id": (
        "in id order: both are due at 50"
    ),
    "claim_capped breaks a tie of run_after by attempt DESC (retries first), then id": (
        "1 bolt pending run_after=50; 2 acme retry_wait"
    ),
    "claim_capped orders by the busy jobs of the job's own kind (r.kind = c.kind)": (
        "acme 2: a sync and a report"
    ),
    "claim_capped breaks a tie of run_after by updated_at, then id": "updated_at=95",
    "serial: heads due together taken by updated_at, then id (a failed head's queue waits)": (
        "updated_at=95"
    ),
    "claim_capped breaks a tie of run_after by the id as text (CAST(c.id AS TEXT))": (
        "10, 11] in id order"
    ),
    "the relay wraps the broker's error in its own RuntimeError (raise ... from exc)": (
        "the broker's ConnectionError itself"
    ),
    "the relay returns [] quietly when the broker refuses the run's first message": (
        "message 1, the first of the run"
    ),
    "the relay never lets sent_at go back: it marks max(now, the latest sent_at saved)": (
        "by a relay whose clock ran ahead"
    ),
    "the relay skips a row whose body is the empty object '{}' (left pending, never sent)": (
        "whatever its topic, by outbox id"
    ),
    "claim_capped counts an account's busy jobs up to a LIMIT of 10 (a big cap never reached)": (
        "never acme's job"
    ),
    "claim_capped takes the account from the key's prefix (before ':'), not from queue": (
        "(both at their cap)"
    ),
    "claim_capped takes a job due within the next second (run_after <= now + 1, for skew)": (
        "then None (cora's job is due at"
    ),
    "serial: a head due within the next second taken (run_after <= now + 1, for skew)": (
        "then None (cora's job is due at"
    ),
    "the relay keeps the rows a run left pending in a module list, for the next run": (
        "in the first shop's run"
    ),
    "the consumer records a message without 'customer' as applied (except KeyError: pass)": (
        "a body without 'customer') to raise"
    ),
    "the consumer returns False for a body that is not JSON (acked as a repeat)": (
        "cut short (not JSON)) to raise"
    ),
    "the consumer cuts the customer's name to 255 characters (a VARCHAR(255) habit)": (
        "each name as the body has it"
    ),
    "the consumer NFC-normalises the customer's name (decomposed accents recomposed)": (
        "each name as the body has it"
    ),
    "place_order cuts the customer's name to 255 characters (a VARCHAR(255) habit)": (
        "the name intact"
    ),
    "place_order NFC-normalises the customer's name (decomposed accents recomposed)": (
        "the name intact"
    ),
    "each relay run stops after a 2 s budget read with datetime.now()": ("the broker to get all"),
    "serial heads looked for only among jobs due within the hour (a look-ahead window)": (
        "order:44's head retries a day later"
    ),
    "relay_once returns the ids it published sorted (as text: order 10 before order 9)": (
        "in the order published"
    ),
    "relay_once returns the ids read back from the outbox, ordered by message_id": (
        "in the order published"
    ),
    "claim_serial's readiness rule without brackets (head AND ready OR expired)": (
        "waits for the head"
    ),
    "place_order swallows a refused BEGIN IMMEDIATE and inserts without it": (
        "whose BEGIN IMMEDIATE fails 'database is locked'"
    ),
    "relay_once loops over its SELECT's open cursor instead of fetchall()": "to run",
    "claim_serial tests cur.rowcount before fetching the RETURNING row": (
        "each queue's head, then nothing"
    ),
    "place_order by conn.isolation_level = 'IMMEDIATE' and conn.commit(), the mode left set": (
        "to hand the connection back as it was given"
    ),
    "consume returns False for a repeat before its COMMIT": "on one connection",
    "consume by conn.isolation_level = 'DEFERRED' and conn.commit(), the mode left set": (
        "to hand the connection back as it was given"
    ),
    "claim_serial sets conn.isolation_level = 'IMMEDIATE' and commits, the mode left set": (
        "to hand the connection back as it was given"
    ),
    "the relay marks the row it published by its topic and body (no id selected)": (
        "the broker refuses evt_9Zz"
    ),
    "the relay marks its run sent in one UPDATE of the ids up to the last published": (
        "by the relay's next run at the latest"
    ),
    "the relay marks every pending row up to the one it published (id <= :id)": (
        "by the relay's next run at the latest"
    ),
    "the relay marks the run's rows from its first id up to the one it published": (
        "a slower writer committed"
    ),
    "a lease token of 16 random bits (lower(hex(randomblob(2))))": "drawn from at least 2**48",
    "a lease token of 32 random bits from a SQL function (secrets.randbits(32))": (
        "drawn from at least 2**48"
    ),
    "a lease token cut to 8 hex digits (uuid4().hex[:8] in a SQL function)": (
        "drawn from at least 2**48"
    ),
    "a lease token of 32 bits as text (str(random.getrandbits(32)) in a SQL function)": (
        "drawn from at least 2**48"
    ),
    "a lease token of 4 random bytes (os.urandom(4).hex() in a SQL function)": (
        "drawn from at least 2**48"
    ),
    "both claims' lease token 32 random bits in SQL (lower(hex(randomblob(4))))": (
        "drawn from at least 2**48"
    ),
    "the relay remembers in memory what it published, before publish returns": (
        "the same relay process ran again"
    ),
    "consume returns False when the database is locked (taken for a repeat)": (
        "to raise while another process holds the write lock"
    ),
    "place_order returns False when the database is locked (taken for a retry)": (
        "to raise while another process holds the write lock"
    ),
    "consume rolls back only on sqlite3.Error: a KeyError leaves its transaction open": (
        "a body without 'customer' to raise"
    ),
    "the relay stores sent_at as int(now)": "sent_at = 1767225600.75",
    "place_order cuts the customer's name to 64 characters": "the name intact",
    "tick writes updated_at from the machine's clock, not now": "the now tick was given",
    "due_slots returns [] before checking its arguments when nothing is due": (
        "ValueError for due_slots(60, None, 200, 100, 'most')"
    ),
    "catch_up='latest' returns the newest slot even when it already fired": (
        "'latest' when last is the newest slot"
    ),
    "since bounds only the first tick, not the ticks after a slot fired": (
        "since is 2026-01-01T05:00:00Z"
    ),
    "tick's BEGIN IMMEDIATE left open when slot_key raises": "on the same connection to create",
    "claim_serial takes an expired head again only when lease_until < now": (
        "the expired head again"
    ),
    "the relay marks every pending row sent in one UPDATE after publishing": (
        "only rows the broker has marked sent"
    ),
    "the relay publishes in message_id order (text: order 10 before order 9)": "by outbox id",
    "the relay publishes at most 100 rows a run, as labkit's Relay does by default": (
        "pending messages of"
    ),
    "the relay stops quietly when the broker is down": "relay_once to raise",
    "the consumer records hash(message_id), which changes with each process": (
        "processed_messages to hold ['order:1:placed:v1'"
    ),
    "the consumer never rolls back: a failed message leaves its transaction open": (
        "applied on the same connection"
    ),
    "the consumer skips a message when its order already has an email (dedup by order)": (
        "another message about order 1"
    ),
    "place_order never rolls back: a failed INSERT leaves the transaction open": (
        "by the next place_order on the same connection"
    ),
    "least busy counted with every running job, dead workers' leases included": (
        "runs 0 live jobs"
    ),
    "the cap applied among the 50 oldest ready jobs only": "older jobs waiting",
    "serial head by the smallest key, as text ('sync:10' before 'sync:9')": "in id order",
    "the lease fixed at 30 s, exercise 3's value, whatever lease_s says": "lease_s=",
    "a claim that finds nothing returns without ending its BEGIN IMMEDIATE": (
        "on one connection at now=100, 100 and 110"
    ),
    "a running job whose worker died is never claimed again by claim_capped": "lease that ended",
    "serial: a dead job stays the head and blocks its queue for good": "behind a dead head",
    "accounts compared with LIKE: 'acme_1' shares the cap of 'acmex1'": "are at their cap",
    "serial queues grouped by lower(queue): 'Sync' blocks 'sync'": "are other queues",
    "the relay's run is one transaction, left open when the broker is down": (
        "out of any transaction"
    ),
    "the relay's marks commit at the end of the run (rolled back when the broker is down)": (
        "right after its publish"
    ),
    "the consumer swallows a failed email INSERT and commits the message id anyway": (
        "only their 2 ids"
    ),
    "claim_capped never takes a job waiting in retry_wait (pending only)": (
        "whose run_after has come"
    ),
    "the lease token made once when the notebook runs, the same for every claim": (
        "a different lease_token"
    ),
    "place_order looks for the order with a SELECT before its transaction": (
        "True once, False once"
    ),
    "a retried order recognised by its content (same customer and total)": (
        "a retry is known by the order id"
    ),
    "the outbox row committed on its own before the order's transaction": (
        "or neither, after a kill -9"
    ),
    "the consumer tells a repeat by cursor.lastrowid after INSERT OR IGNORE": (
        "messages of orders [1, 2, 1, 3, 2, 3] on one connection"
    ),
    "the consumer remembers ids in memory before its transaction commits": "its redelivery",
    "the consumer reports a message it cannot apply as a repeat (False)": (
        "body with customer null) to raise"
    ),
    "the relay publishes at most 1000 rows a run (a silent batch size)": "pending messages of",
    "the relay remembers in memory the id it published up to and selects only past it": (
        "after an operator set its"
    ),
    "place_order tells a retry by cursor.lastrowid (the connection's last insert)": (
        "7 again, 8 and 8 again"
    ),
    "place_order's INSERT OR IGNORE ignores a NOT NULL failure too (returns False)": (
        "the order could not be saved"
    ),
    "the relay publishes at most 5000 rows a run (a batch size past every small backlog)": (
        "pending messages of"
    ),
    "the relay pages through pending rows with OFFSET while marking them (skips pages)": (
        "by outbox id"
    ),
    "the relay publishes by the body's order_id, not by outbox id": "by outbox id",
    "the relay publishes again rows sent more than 30 s ago": "by outbox id",
    "place_order strips the spaces around the customer's name": "the name intact",
    "place_order swallows a failed INSERT: ROLLBACK and return False": (
        "the order could not be saved"
    ),
    "place_order returns False for a retry inside its open BEGIN IMMEDIATE": (
        "orders 7, 7 again, 8 and 8 again"
    ),
    "the consumer keeps the ids it applied in a set in memory and skips them": (
        "applied in each of two consumer databases"
    ),
    "the consumer checks with a SELECT in a deferred BEGIN (locked when two consume at once)": (
        "both consumers to finish"
    ),
    "the consumer's two INSERTs in `with conn:` on an autocommit connection (two transactions)": (
        "exactly one email"
    ),
    "the consumer returns False for a repeat inside its open BEGIN IMMEDIATE": "on one connection",
    "the consumer records the message id without its version (order:1:placed)": (
        "another message about order 1"
    ),
    "the email's INSERT built with an f-string (a quote in the name breaks it)": "consume(",
    "claim_serial resets the attempt to 1 instead of counting it": "at attempt 2",
    "the lease token made of the worker's name and now": "two different lease_tokens",
    "the open accounts listed into the claim with an f-string": "to return a job or None",
    "lease tokens drawn from a random.Random seeded once at import": "forked from the same parent",
    "lease tokens numbered by a counter started at import": "takes over w1's expired lease",
    "lease tokens from the process id and a counter (every container's worker is pid 1)": (
        "takes over w1's expired lease"
    ),
    "the lease cut to whole seconds (CAST(:lease_s AS INTEGER))": "lease_s=",
    "jobs waiting to be retried counted as busy for the cap": "acme's two jobs in retry_wait",
    "a claim that catches sqlite3.Error and returns None": (
        "to raise the error of its failed UPDATE"
    ),
    "the relay publishes only the topic 'order.placed' (other facts stay pending)": (
        "whatever its topic"
    ),
    "the relay publishes the body parsed back into a dict (json.loads)": (
        "relay_once(conn, publish, now) to run"
    ),
    "the relay publishes the whole run at once in a thread pool, then marks": (
        "must not overtake message 2"
    ),
    "the relay retries a refused publish 3 times itself before raising": "relay_once to raise",
    "claim_capped takes an expired lease again only when lease_until < now": (
        "lease_until=100) to take job 1"
    ),
    "serial: ready heads taken by id alone (run_after ignored)": "to take job 2",
    "claim_capped orders by busy, then id (run_after ignored)": "to take job 2",
    "claim_capped takes a retry_wait job only once run_after < now": (
        "retry_wait run_after=100) to take job 1"
    ),
    "serial: a succeeded job stays the head (state != 'dead')": "once job 1 succeeded",
    "serial head = the oldest READY job of its queue: a running head overtaken": "both heads run",
    "the cap counted per worker (lease_owner = worker), not per account": (
        "acme already runs 2 jobs"
    ),
    "serial: a head in retry_wait is never taken again (pending only)": "whose run_after has come",
    "claim_capped compares accounts with lower(): 'Bolt' shares the cap of 'bolt'": (
        "are at their cap"
    ),
    "a retried place_order sets its message pending again (re-announces the order)": (
        "still sent at 50"
    ),
    "the body's order_id written as a string (str(order_id))": "the order as JSON",
    "the cap compared with <= (an account runs cap + 1 jobs)": "the cap is 2",
    "claim_capped takes a pending job before its run_after (only retry_wait waits)": (
        "run_after=150) to take nothing"
    ),
    "consume rolls back only on Exception: a KeyboardInterrupt leaves its transaction open": (
        "consume interrupted (KeyboardInterrupt)"
    ),
    "place_order rolls back only on Exception: a Ctrl-C leaves BEGIN IMMEDIATE open": (
        "place_order interrupted (KeyboardInterrupt)"
    ),
    "a lease that ends exactly at now still counts as busy (lease_until >= now)": (
        "a lease that ended at now"
    ),
    "serial: a pending head taken before its run_after (only retry_wait waits)": (
        "run_after=150) to take nothing"
    ),
    "serial: a head in retry_wait taken only once run_after < now": (
        "1 acme retry_wait run_after=100; 2 acme pending run_after=100) to take job 1"
    ),
    "serial: a running head whose lease ended drops out of the line": "heads whose lease ended",
    "least busy read as the smallest backlog of ready jobs, not live leases": (
        "(bolt runs 0 jobs, acme 1)"
    ),
    "least busy counted with succeeded jobs too (the fewest claimed so far)": (
        "2 acme succeeded run_after=0"
    ),
    "the consumer compares message ids with LIKE ('_' and capitals match other ids)": (
        "each of ['evtX1Qa'"
    ),
    "the consumer records the message id lower-cased": (
        "processed_messages holding exactly these ids"
    ),
    "the relay marks only the 'order.placed' rows sent (the others published every run)": (
        "marked sent_at = 100.0, whatever its topic"
    ),
    "a retried place_order overwrites the saved order (ON CONFLICT DO UPDATE)": (
        "placing an order that exists changes nothing"
    ),
    "the relay returns the outbox row ids, not the message ids": (
        "relay_once to return ['order:1:placed:v1'"
    ),
    "serial: the head SELECTed, then claimed by an UPDATE on its id (both workers take it)": (
        "each job claimed by one worker only"
    ),
    "claim_capped SELECTs the job, then claims it by an UPDATE on its id (both take it)": (
        "each job claimed by one worker only"
    ),
    "serial queues grouped by (queue, kind): a queue's jobs of two kinds run at once": (
        "one running job per serial key"
    ),
    "claim_capped leaves a dead worker's job at its last attempt running for ever": (
        "one at its last attempt"
    ),
    "serial: a head whose worker died at its last attempt blocks its queue for good": (
        "one at its last attempt"
    ),
    "serial: heads taken among the 50 oldest queues only (LIMIT 50)": "while the heads of",
    "place_order writes the total as a float (total / 100 * 100): '4200.0' on the wire": (
        "the order as JSON"
    ),
    "claim_serial writes updated_at from the database's clock, not now": "updated_at 100",
    "claim_capped takes a running job again once updated_at + its own lease_s has passed": (
        "w2, with lease_s=30, gets"
    ),
    "serial: a running head is ready again once updated_at + the caller's lease_s passed": (
        "w2, with lease_s=30, gets"
    ),
    "consume parses the body after its BEGIN IMMEDIATE, outside the try (a poison message)": (
        "a body cut short (not JSON)"
    ),
    "the relay marks a message sent when its publish times out (to spare a duplicate)": (
        "times out (the broker never got it)"
    ),
    "claim_capped compares accounts with GLOB: 'acme*' shares the cap of 'acmex1'": ("'acme*'"),
    "claim_capped compares accounts with trim(): 'Bolt ' shares the cap of 'Bolt'": ("'Bolt '"),
    "serial queues grouped by trim(queue): 'sync ' waits behind 'sync'": ("'sync '"),
    "serial: the head found with GLOB on the queue ('sync*' blocked by 'syncx1')": ("'sync*'"),
    "claim_capped picks among the 500 oldest ready jobs (a silent LIMIT past small backlogs)": (
        "older jobs waiting"
    ),
    "serial: heads taken among the 300 oldest queues only (LIMIT 300)": ("while the heads of"),
    "claim_capped never takes a job past its 5th attempt (a limit written into the claim)": (
        "attempt 7 of 10"
    ),
    "serial: a head past its 5th attempt is never taken again (attempt < 5 in the claim)": (
        "attempt 7 of 10"
    ),
    "claim_capped reads cap=0 as no cap at all": ("cap=0"),
    "place_order writes its message already sent (sent_at = 0): the relay never publishes it": (
        "pending (sent_at NULL)"
    ),
    "claim_serial's lease token made of the worker's name (one token for all its claims)": (
        "then w1 once more"
    ),
    "place_order remembers the order ids it placed in a set in memory (False for a new shop)": (
        "on each of two shop databases"
    ),
    "the relay publishes json.dumps(body): the JSON text encoded once more (a string)": (
        "its own row's topic and body"
    ),
    "the relay publishes every row of a run with the first row's body (a variable reused)": (
        "its own row's topic and body"
    ),
    "the relay publishes every row under the topic 'order.placed' (its topic column unread)": (
        "its own row's topic and body"
    ),
    "the consumer remembers applied ids per database file in memory, after its COMMIT": (
        "rebuilt empty at the same path"
    ),
    "place_order remembers placed order ids per database file in memory, after its COMMIT": (
        "rebuilt empty at the same path"
    ),
    "claim_serial returns None on sqlite3.OperationalError (taken for 'database is locked')": (
        "claim_serial to raise the error of its failed UPDATE"
    ),
    "claim_capped breaks ties by key, as text ('acme:10' before 'acme:9'), not by id": (
        "acme pending run_after=50; 2 acme pending run_after=50) to take job 1"
    ),
    "serial: ready heads taken by run_after, then key as text ('sync:10' before 'sync:9')": (
        "sync:10 pending run_after=50) to take job 1"
    ),
    "consume decides its return from a SELECT before its transaction (both copies say True)": (
        "each message True in exactly one consumer"
    ),
    "the relay selects at most 20000 pending rows a run (LIMIT 20000, past the backlog)": (
        "pending messages of 22225 rows"
    ),
    "the relay reads its pending rows with one fetchmany(20000) (a cap in Python)": (
        "pending messages of 22225 rows"
    ),
    "the relay publishes rows[:20000] of the pending rows (a cap in a Python slice)": (
        "pending messages of 22225 rows"
    ),
    "the relay stops a run at BATCH_SIZE = 30000 messages, a module constant": (
        "pending messages of 33336 rows"
    ),
    "the relay marks the row sent, publishes, and un-marks it when publish raises": (
        "crash before publish of message 2"
    ),
    "the relay keeps the first connection it is given in a module global": (
        "relay_once on each of two shop databases"
    ),
    "claim_capped keeps the first connection it is given in a module global": (
        "claim_capped on each of two job databases"
    ),
    "claim_serial keeps the first connection it is given in a module global": (
        "claim_serial on each of two job databases"
    ),
    "claim_capped takes any job whose lease ended, whatever its state (succeeded ones again)": (
        "None while only succeeded and dead jobs"
    ),
    "serial: a head taken back from a dead worker keeps its attempt (not counted again)": (
        "counts the attempt of a head whose worker died"
    ),
    "serial: a pending head not due yet is left out of the line (the job behind overtakes)": (
        "order:43's head, pending"
    ),
    "claim_capped counts every live lease as busy, whatever the job's state": "cora runs nothing",
    "capped: least busy as a share, live running jobs over all the account's jobs": (
        "busy is a count, not a share"
    ),
    "capped: ties of busy go first to the account not served last (kept in a module dict)": (
        "bolt and acme then run 1 each"
    ),
    "capped: now never goes back, the largest now seen kept in a class attribute": (
        "claim_capped on one connection at now=300"
    ),
    "serial: now never goes back, the largest now seen kept in a module list": (
        "claim_serial on one connection at now=300"
    ),
    "the consumer writes the email's order_id as int(float(...)) (wrong past 2**53)": (
        "each with the body's order id exactly"
    ),
    "the consumer writes the email's order_id as float(...) (2**53 + 1 becomes 2**53)": (
        "each with the body's order id exactly"
    ),
    "the consumer parses the body with json.loads(parse_int=float), then int(order_id)": (
        "each with the body's order id exactly"
    ),
    "place_order writes the body's order_id as int(float(order_id))": (
        "the outbox messages (message_id, the body's order_id)"
    ),
    "place_order builds the message_id from int(float(order_id))": (
        "the outbox messages (message_id, the body's order_id)"
    ),
    "the relay stores sent_at rounded to the millisecond (round(now, 3))": (
        "sent_at = 1767225600.7503"
    ),
    "the consumer defaults a missing order_id to 0 (order.get('order_id', 0))": (
        "a body without 'order_id') to raise"
    ),
    "the relay truncates sent_at to the millisecond (int(now * 1000) / 1000)": (
        "sent_at = 1767225600.7503"
    ),
    "the consumer sends an email only for a truthy order_id (order 0's message applied, "
    "never emailed)": "to return True and send one email for order 0",
    "the relay reads now as a local date and back as UTC (sent_at shifted by the time "
    "zone)": "whose local time zone is UTC-3",
}

#: Text the failing check's "got" line must hold, where its expectation is shared.
GOT: dict[str, str] = {
    "the relay skips a row whose body it already published this run (marked sent unpublished)": (
        "the broker got ['order.placed:31:v1', 'order.cancelled:32:v1', "
    ),
    "the consumer writes the message id into its INSERT with an f-string (a quote breaks it)": (
        "unrecognized token"
    ),
    "the consumer looks the message id up with GLOB ('evt?1Qa' matches 'evtX1Qa')": (
        "returned [True, True, True, True, False,"
    ),
    "the consumer strips the spaces around the message id": (
        "[True, True, True, True, True, True, False, True, True, True, True, True"
    ),
    "the consumer records the message id NFKC-normalised (a full-width digit made another id)": (
        "[True, True, True, True, True, True, True, False, True, True, True, False"
    ),
    "the consumer records the message id cut to 32 characters (a VARCHAR(32) habit)": (
        "[True, True, True, True, True, True, True, True, True, False, True, True"
    ),
    "the relay marks the published row with an f-string of its message_id": 'near "brien"',
    "the consumer records the message id NFC-normalised (an accent spelt two ways made one id)": (
        "[True, True, True, True, True, True, True, True, True, True, True, False"
    ),
}


#: Mistakes that lose or duplicate an effect: the reported score (severity cap included)
#: is at most half of the exercise.
SEVERE = [
    "claim_capped reads cap=0 as no cap at all",
    "claim_capped counts an account's busy jobs up to a LIMIT of 10 (a big cap never reached)",
    "claim_capped counts as busy only running jobs already due (r.run_after <= :now)",
    "claim_capped counts as busy only jobs claimed by now (r.updated_at <= :now)",
    "claim_capped counts busy jobs up to a LIMIT of 1000 (a bigger cap never reached)",
    "claim_capped clamps the attempt at max_attempts (min(attempt + 1, max_attempts))",
    "the relay caches each message body by message id in a module dict (another shop's "
    "body sent)",
    "claim_capped SELECTs, then an UPDATE guarded on the job still ready, never on the cap",
    "serial: head SELECTed, then an UPDATE guarded on it still ready, not still the head",
    "serial heads looked for only among jobs due within a week (a look-ahead window)",
    "the relay marks a body that is not JSON sent without publishing it (a poison guard)",
    "the relay skips a body that is not JSON and goes on (it stays pending for good)",
    "the relay marks a body past 64 KB sent without publishing it (too large for the broker)",
    "the relay keeps the first publish it is given in a module global",
    "serial: the head's lease written in one UPDATE, its state in a second (ready between)",
    "serial: heads grouped by the key without its trailing digits, not by queue",
    "claim_capped's SQL built once, the first call's cap written in (a module global)",
    "claim_serial's SQL built once, the first call's lease_s written in (a module dict)",
    "the relay skips a row whose body is the empty object '{}' (left pending, never sent)",
    "the relay keeps the rows a run left pending in a module list, for the next run",
    "the consumer records a message without 'customer' as applied (except KeyError: pass)",
    "the consumer returns False for a body that is not JSON (acked as a repeat)",
    "the relay re-raises ConnectionError and TimeoutError only, marks any other failure sent",
    "place_order carries on past an IntegrityError of the outbox INSERT (taken for a retry)",
    "the relay marks the row it published by its topic and body (no id selected)",
    "the relay marks its run sent in one UPDATE of the ids up to the last published",
    "the relay marks every pending row up to the one it published (id <= :id)",
    "the relay marks the run's rows from its first id up to the one it published",
    "the relay marks the row it published WHERE message_id LIKE :mid ('_' a wildcard)",
    "the relay marks the row it published WHERE message_id GLOB :mid ('?' a wildcard)",
    "the relay marks the row it published WHERE lower(message_id) = lower(:mid)",
    "the relay marks sent every row of the order it published (by the body's order_id)",
    "a lease token of 16 random bits (lower(hex(randomblob(2))))",
    "a random number below a million as the lease token (abs(random()) % 1000000)",
    "a lease token of 32 random bits from a SQL function (secrets.randbits(32))",
    "a lease token cut to 8 hex digits (uuid4().hex[:8] in a SQL function)",
    "a lease token of 32 bits as text (str(random.getrandbits(32)) in a SQL function)",
    "a lease token of 4 random bytes (os.urandom(4).hex() in a SQL function)",
    "both claims' lease token 32 random bits in SQL (lower(hex(randomblob(4))))",
    "lease tokens from the process id and a counter (every container's worker is pid 1)",
    "the relay keeps the first connection it is given in a module global",
    "claim_capped keeps the first connection it is given in a module global",
    "claim_serial keeps the first connection it is given in a module global",
    "claim_capped takes any job whose lease ended, whatever its state (succeeded ones again)",
    "the relay remembers in memory the id it published up to and selects only past it",
    "place_order's INSERT OR IGNORE ignores a NOT NULL failure too (returns False)",
    "place_order swallows a failed INSERT: ROLLBACK and return False",
    "the consumer keeps the ids it applied in a set in memory and skips them",
    "the consumer checks with a SELECT in a deferred BEGIN (locked when two consume at once)",
    "the consumer's two INSERTs in `with conn:` on an autocommit connection (two transactions)",
    "the consumer returns False for a repeat inside its open BEGIN IMMEDIATE",
    "the consumer records the message id without its version (order:1:placed)",
    "the email's INSERT built with an f-string (a quote in the name breaks it)",
    "the relay remembers in memory what it published, before publish returns",
    "consume returns False when the database is locked (taken for a repeat)",
    "place_order returns False when the database is locked (taken for a retry)",
    "the relay marks every pending row sent in one UPDATE after publishing",
    "the consumer records hash(message_id), which changes with each process",
    "the consumer skips a message when its order already has an email (dedup by order)",
    "serial head by the smallest key, as text ('sync:10' before 'sync:9')",
    "the lease fixed at 30 s, exercise 3's value, whatever lease_s says",
    "a catch-up that looks back one week at most",
    "tick enqueues 1000 slots a call at most, the rest silently dropped",
    "due_slots walks back 500 slots at most (a loop guard)",
    "a running job whose worker died is never claimed again by claim_capped",
    "serial: a dead job stays the head and blocks its queue for good",
    "the consumer swallows a failed email INSERT and commits the message id anyway",
    "claim_capped never takes a job waiting in retry_wait (pending only)",
    "the lease token made once when the notebook runs, the same for every claim",
    "a retried order recognised by its content (same customer and total)",
    "the outbox row committed on its own before the order's transaction",
    "the consumer tells a repeat by cursor.lastrowid after INSERT OR IGNORE",
    "the consumer remembers ids in memory before its transaction commits",
    "the consumer reports a message it cannot apply as a repeat (False)",
    "lease tokens drawn from a random.Random seeded once at import",
    "lease tokens numbered by a counter started at import",
    "the lease cut to whole seconds (CAST(:lease_s AS INTEGER))",
    "jobs waiting to be retried counted as busy for the cap",
    "the relay publishes only the topic 'order.placed' (other facts stay pending)",
    "serial: a succeeded job stays the head (state != 'dead')",
    "serial head = the oldest READY job of its queue: a running head overtaken",
    "serial: a head in retry_wait is never taken again (pending only)",
    "serial: a running head whose lease ended drops out of the line",
    "the consumer compares message ids with LIKE ('_' and capitals match other ids)",
    "the consumer records the message id lower-cased",
    "the relay marks only the 'order.placed' rows sent (the others published every run)",
    "serial: the head SELECTed, then claimed by an UPDATE on its id (both workers take it)",
    "claim_capped SELECTs the job, then claims it by an UPDATE on its id (both take it)",
    "serial queues grouped by (queue, kind): a queue's jobs of two kinds run at once",
    "claim_capped leaves a dead worker's job at its last attempt running for ever",
    "serial: a head whose worker died at its last attempt blocks its queue for good",
    "claim_capped takes a running job again once updated_at + its own lease_s has passed",
    "serial: a running head is ready again once updated_at + the caller's lease_s passed",
    "the relay marks a message sent when its publish times out (to spare a duplicate)",
    "the consumer writes the message id into its INSERT with an f-string (a quote breaks it)",
    "the consumer looks the message id up with GLOB ('evt?1Qa' matches 'evtX1Qa')",
    "the consumer strips the spaces around the message id",
    "the consumer records the message id NFKC-normalised (a full-width digit made another id)",
    "the consumer records the message id cut to 32 characters (a VARCHAR(32) habit)",
    "claim_capped never takes a job past its 5th attempt (a limit written into the claim)",
    "serial: a head past its 5th attempt is never taken again (attempt < 5 in the claim)",
    "place_order writes its message already sent (sent_at = 0): the relay never publishes it",
    "claim_serial's lease token made of the worker's name (one token for all its claims)",
    "the relay skips a row whose body it already published this run (marked sent unpublished)",
    "place_order remembers the order ids it placed in a set in memory (False for a new shop)",
    "the relay publishes json.dumps(body): the JSON text encoded once more (a string)",
    "the relay publishes every row of a run with the first row's body (a variable reused)",
    "the relay publishes every row under the topic 'order.placed' (its topic column unread)",
    "the consumer remembers applied ids per database file in memory, after its COMMIT",
    "place_order remembers placed order ids per database file in memory, after its COMMIT",
    "the relay marks the row sent, publishes, and un-marks it when publish raises",
    "claim_capped takes an expired lease back only for another worker (lease_owner <> :worker)",
    "serial: an expired head taken back only by another worker (lease_owner <> :worker)",
    "claim_capped moves now through datetime.utcfromtimestamp (hours off outside UTC)",
    "claim_serial moves now through datetime.utcfromtimestamp (hours off outside UTC)",
    "serial: head SELECTed, then UPDATE guarded by the state read (a dead head taken twice)",
    "claim_capped: SELECT, then UPDATE guarded by the state read and the cap (orphan twice)",
    "lease tokens counted up from the largest in the table, compared as text ('9' > '10')",
    "lease tokens counted up from the largest number in the table (restart after a redrive)",
    "serial: heads whose worker died taken after the others (ORDER BY h.state = 'running')",
    "serial: fresh heads first (ORDER BY h.attempt): retried heads wait, their queues too",
    "claim_capped takes new work before dead workers' jobs (a CASE on state after busy)",
    "lease tokens made of the job id and its attempt (they repeat after a redrive)",
    "both claims in BEGIN IMMEDIATE, no ROLLBACK when the UPDATE raises (the lock kept)",
    "claim_capped rolls its BEGIN IMMEDIATE back on an IntegrityError only (a full disk)",
    "the relay marks the published row with an f-string of its message_id",
    "the consumer keeps only the last 1000 processed ids (a dedup window)",
    "the consumer keeps 10000 processed ids, pruning the oldest every 100 messages",
    "the consumer records the message id NFC-normalised (an accent spelt two ways made one id)",
    "serial: a head taken back from a dead worker keeps its attempt (not counted again)",
    "serial: a pending head not due yet is left out of the line (the job behind overtakes)",
    "both claims UPDATE without RETURNING, then read the row back by lease_owner",
    "both claims compare with now rounded to whole seconds (round(now))",
    "both claims set the lease_token in a second UPDATE, after the one that takes the job",
    "the consumer records the message id cut to 255 characters (a VARCHAR(255) habit)",
    "the relay publishes only bodies with an order_id, marks the other facts sent unpublished",
    "both claims cap the lease at an hour (min(lease_s, 3600)): a longer one ends early",
    "the consumer defaults a missing order_id to 0 (order.get('order_id', 0))",
    "serial: the queues this process took kept in a module set and skipped after",
    "capped: the jobs this process took kept in a module set and never taken again",
    "the relay reads its backlog in fetchmany(1000) batches from one open SELECT",
    "place_order tells a new order by the id RETURNING gave (order 0 taken for a retry)",
    "the consumer sends an email only for a truthy order_id (order 0's message applied, "
    "never emailed)",
    "the relay publishes a (topic, body) once a run, marks its look-alikes sent unpublished",
]


test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS, GOT)


@pytest.mark.parametrize("mistake", SEVERE)
def test_a_severe_mistake_costs_at_least_half_the_points(mistake: str) -> None:
    # Its entry's test proves the named check fails; a severe check's failure is capped.
    [(exercise, check)] = [(e, c) for e, m, c, _ in ZOO if m == mistake]
    assert_severe(exercise, mistake, check)


def test_the_zoo_has_three_mistakes_per_exercise_at_least() -> None:
    counts = Counter(e for e, *_ in ZOO)
    assert all(counts[e] >= 3 for e in ("ex11", "ex12", "ex13")), counts


def _ex13_token(module: str, expr: str, once: bool = False) -> str:
    """Both claims of the reference with their lease_token drawn by ``expr``, a SQL function
    registered on each connection (``once``: remembered in a module-level dict by id)."""
    register = (
        "    if _REGISTERED.get(id(conn)) is not conn:\n"
        f"        conn.create_function('new_token', 0, lambda: {expr})\n"
        "        _REGISTERED[id(conn)] = conn\n"
        if once
        else f"    conn.create_function('new_token', 0, lambda: {expr})\n"
    )
    return (
        f"import {module}\n"
        "_REGISTERED = {}\n"
        "CLAIM_SET = CLAIM_SET.replace('lower(hex(randomblob(16)))', 'new_token()')\n"
        "_reference_capped, _reference_serial = claim_capped, claim_serial\n"
        "def _ready(conn):\n" + register + "    return conn\n"
        "def claim_capped(conn, worker, now, lease_s, cap):\n"
        "    return _reference_capped(_ready(conn), worker, now, lease_s, cap)\n"
        "def claim_serial(conn, worker, now, lease_s):\n"
        "    return _reference_serial(_ready(conn), worker, now, lease_s)\n"
    )


#: Exercise 13's right solutions written otherwise, each with a check that once took
#: its points (or would be the first to).
RIGHT_EX13: list[tuple[str, str, str]] = [
    (
        "claim_capped inside `with conn:`, busy in a derived table filtered by busy < cap;"
        " serial heads among the jobs NOT IN ('succeeded', 'dead')",
        "jobs_due_within_one_second_go_by_their_fraction",
        '''
        def claim_capped(conn, worker, now, lease_s, cap):
            with conn:
                row = conn.execute(
                    "UPDATE jobs" + CLAIM_SET + """
                     WHERE id = (
                        SELECT id FROM (
                            SELECT c.id, c.run_after,
                                   (SELECT count(*) FROM jobs r
                                     WHERE r.queue = c.queue AND r.state = 'running'
                                       AND r.lease_until > :now) AS busy
                              FROM jobs c
                             WHERE (c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                                OR (c.state = 'running' AND c.lease_until <= :now))
                         WHERE busy < :cap
                         ORDER BY busy, run_after, id
                         LIMIT 1)
                    RETURNING *
                    """,
                    {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
                ).fetchone()
            return None if row is None else dict(row)

        def claim_serial(conn, worker, now, lease_s):
            row = conn.execute(
                "UPDATE jobs" + CLAIM_SET + """
                 WHERE id = (
                       SELECT h.id FROM jobs h
                        WHERE h.id IN (SELECT min(id) FROM jobs
                                        WHERE state NOT IN ('succeeded', 'dead')
                                        GROUP BY queue)
                          AND CASE h.state
                                WHEN 'running' THEN h.lease_until <= :now
                                ELSE h.run_after <= :now
                              END
                        ORDER BY h.run_after, h.id
                        LIMIT 1)
                RETURNING *
                """,
                {"worker": worker, "now": now, "lease_s": lease_s},
            ).fetchone()
            return None if row is None else dict(row)
        ''',
    ),
    (
        "busy counted in a CTE grouped by queue, LEFT JOINed to the ready jobs (coalesce 0);"
        " serial heads by row_number() OVER (PARTITION BY queue ORDER BY id)",
        "capped_claim_follows_the_rules_on_generated_tables",
        '''
import secrets
CAPPED_SQL = """
WITH busy AS (
    SELECT queue, count(*) AS n FROM jobs
     WHERE state = 'running' AND lease_until > :now
     GROUP BY queue
), candidates AS (
    SELECT j.id, j.run_after, coalesce(b.n, 0) AS n
      FROM jobs j LEFT JOIN busy b ON b.queue = j.queue
     WHERE ((j.state IN ('pending', 'retry_wait') AND j.run_after <= :now)
            OR (j.state = 'running' AND j.lease_until <= :now))
       AND coalesce(b.n, 0) < :cap
)
UPDATE jobs
   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
       lease_until = :now + :lease_s, lease_token = :token, updated_at = :now
 WHERE id = (SELECT id FROM candidates ORDER BY n, run_after, id LIMIT 1)
RETURNING *
"""
def claim_capped(conn, worker, now, lease_s, cap):
    row = conn.execute(CAPPED_SQL, {"worker": worker, "now": now, "lease_s": lease_s,
                                    "cap": cap, "token": secrets.token_hex(16)}).fetchone()
    return dict(row) if row is not None else None

SERIAL_SQL = """
WITH ranked AS (
    SELECT id, state, run_after, lease_until,
           row_number() OVER (PARTITION BY queue ORDER BY id) AS pos
      FROM jobs
     WHERE state IN ('pending', 'retry_wait', 'running')
)
UPDATE jobs
   SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
       lease_until = :now + :lease_s, lease_token = :token, updated_at = :now
 WHERE id = (SELECT id FROM ranked
              WHERE pos = 1
                AND ((state IN ('pending', 'retry_wait') AND run_after <= :now)
                     OR (state = 'running' AND lease_until <= :now))
              ORDER BY run_after, id LIMIT 1)
RETURNING *
"""
def claim_serial(conn, worker, now, lease_s):
    row = conn.execute(SERIAL_SQL, {"worker": worker, "now": now, "lease_s": lease_s,
                                    "token": secrets.token_hex(16)}).fetchone()
    return dict(row) if row is not None else None
''',
    ),
    (
        "busy as sum(...) OVER (PARTITION BY queue); serial heads by SQLite's bare columns"
        " beside min(id) GROUP BY queue; a uuid4 token with dashes",
        "serial_claim_follows_the_rules_on_generated_tables",
        '''
import uuid
def _claim(conn, pick, params):
    params = {**params, "token": str(uuid.uuid4())}
    row = conn.execute(
        "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
        " lease_until = :now + :lease_s, lease_token = :token, updated_at = :now"
        f" WHERE id = ({pick}) RETURNING *", params).fetchone()
    return dict(row) if row is not None else None

def claim_capped(conn, worker, now, lease_s, cap):
    pick = """
      SELECT id FROM (
        SELECT id, state, run_after, lease_until,
               sum(CASE WHEN state = 'running' AND lease_until > :now THEN 1 ELSE 0 END)
                   OVER (PARTITION BY queue) AS busy
          FROM jobs)
       WHERE busy < :cap
         AND ((state IN ('pending', 'retry_wait') AND run_after <= :now)
              OR (state = 'running' AND lease_until <= :now))
       ORDER BY busy, run_after, id LIMIT 1"""
    return _claim(conn, pick, {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap})

def claim_serial(conn, worker, now, lease_s):
    pick = """
      SELECT id FROM (
        SELECT min(id) AS id, state, run_after, lease_until FROM jobs
         WHERE state IN ('pending', 'retry_wait', 'running')
         GROUP BY queue) AS heads
       WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
          OR (state = 'running' AND lease_until <= :now)
       ORDER BY run_after, id LIMIT 1"""
    return _claim(conn, pick, {"worker": worker, "now": now, "lease_s": lease_s})
''',
    ),
    (
        "both claims in BEGIN IMMEDIATE, COMMIT, ROLLBACK on any error; busy from a joined"
        " GROUP BY, readiness by CASE state, heads joined from min(id)",
        "a_failed_claim_leaves_no_transaction_open",
        '''
import logging
log = logging.getLogger(__name__)
def _one(conn, sql, params):
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(sql, params).fetchone()
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise
    log.info("claimed %s", None if row is None else row["id"])
    return None if row is None else dict(row)

def claim_capped(conn, worker, now, lease_s, cap):
    sql = ("UPDATE jobs" + CLAIM_SET + """
     WHERE id = (
        SELECT c.id FROM jobs c
          LEFT JOIN (SELECT queue, count(*) AS busy FROM jobs
                      WHERE state = 'running' AND lease_until > :now
                      GROUP BY queue HAVING count(*) > 0) b USING (queue)
         WHERE CASE c.state WHEN 'running' THEN c.lease_until <= :now
                            WHEN 'pending' THEN c.run_after <= :now
                            WHEN 'retry_wait' THEN c.run_after <= :now
                            ELSE 0 END
           AND ifnull(b.busy, 0) < :cap
         ORDER BY ifnull(b.busy, 0), c.run_after, c.id
         LIMIT 1)
    RETURNING *""")
    return _one(conn, sql, {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap})

def claim_serial(conn, worker, now, lease_s):
    sql = ("UPDATE jobs" + CLAIM_SET + """
     WHERE id = (
        SELECT h.id FROM jobs h
          JOIN (SELECT queue, min(id) AS head FROM jobs
                 WHERE state NOT IN ('succeeded', 'dead') GROUP BY queue) q
            ON q.head = h.id
         WHERE (h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
            OR (h.state = 'running' AND h.lease_until <= :now)
         ORDER BY h.run_after, h.id
         LIMIT 1)
    RETURNING *""")
    return _one(conn, sql, {"worker": worker, "now": now, "lease_s": lease_s})
''',
    ),
    (
        "capped as UPDATE ... FROM (SELECT ...) AS n, full accounts by NOT IN (GROUP BY queue"
        " HAVING count(*) >= :cap) after :cap > 0; retried on 'locked' only",
        "busy_means_running_now",
        '''
import sqlite3, time
def _retrying(conn, sql, params, tries=5):
    for n in range(tries):
        try:
            row = conn.execute(sql, params).fetchone()
            return None if row is None else dict(row)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or n == tries - 1:
                raise
            time.sleep(0.02)

def claim_capped(conn, worker, now, lease_s, cap):
    sql = """
    UPDATE jobs
       SET state = 'running', attempt = jobs.attempt + 1, lease_owner = :worker,
           lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
           updated_at = :now
      FROM (SELECT c.id AS pick
              FROM jobs c
             WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                    OR (c.state = 'running' AND c.lease_until <= :now))
               AND :cap > 0
               AND c.queue NOT IN (SELECT queue FROM jobs WHERE state = 'running'
                                     AND lease_until > :now GROUP BY queue HAVING count(*) >= :cap)
             ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                        AND r.state = 'running' AND r.lease_until > :now), c.run_after, c.id
             LIMIT 1) AS n
     WHERE jobs.id = n.pick
    RETURNING *"""
    return _retrying(conn, sql, {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap})

def claim_serial(conn, worker, now, lease_s):
    sql = """
    WITH heads AS (SELECT queue, min(id) AS id FROM jobs
                    WHERE state IN ('pending', 'retry_wait', 'running') GROUP BY queue)
    UPDATE jobs
       SET state = 'running', attempt = attempt + 1, lease_owner = :worker,
           lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),
           updated_at = :now
     WHERE id = (SELECT j.id FROM jobs j JOIN heads USING (id)
                  WHERE (j.state IN ('pending', 'retry_wait') AND j.run_after <= :now)
                     OR (j.state = 'running' AND j.lease_until <= :now)
                  ORDER BY j.run_after, j.id LIMIT 1)
    RETURNING *"""
    return _retrying(conn, sql, {"worker": worker, "now": now, "lease_s": lease_s})
''',
    ),
    (
        "count and pick in a SELECT, take by id in an UPDATE, both inside BEGIN IMMEDIATE"
        " (the write lock held from the start), ROLLBACK on any error",
        "the_cap_holds_when_two_processes_claim",
        '''
def _locked(conn, pick, params):
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = conn.execute(pick, params).fetchone()
        row = None
        if found is not None:
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = :worker,"
                " lease_until = :now + :lease_s, lease_token = lower(hex(randomblob(16))),"
                " updated_at = :now WHERE id = :id RETURNING *", {**params, "id": found[0]}
            ).fetchone()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return None if row is None else dict(row)

def claim_capped(conn, worker, now, lease_s, cap):
    return _locked(conn, """
        SELECT c.id FROM jobs c
         WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                OR (c.state = 'running' AND c.lease_until <= :now))
           AND (SELECT count(*) FROM jobs r WHERE r.queue = c.queue AND r.state = 'running'
                   AND r.lease_until > :now) < :cap
         ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue AND r.state = 'running'
                     AND r.lease_until > :now), c.run_after, c.id LIMIT 1""",
        {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap})

def claim_serial(conn, worker, now, lease_s):
    return _locked(conn, """
        SELECT h.id FROM jobs h
         WHERE h.id IN (SELECT min(id) FROM jobs
                         WHERE state IN ('pending', 'retry_wait', 'running') GROUP BY queue)
           AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                OR (h.state = 'running' AND h.lease_until <= :now))
         ORDER BY h.run_after, h.id LIMIT 1""",
        {"worker": worker, "now": now, "lease_s": lease_s})
''',
    ),
    (
        "busy counted and heads found in Python inside BEGIN IMMEDIATE, an UPDATE by id, under"
        " a module-level threading.Lock",
        "a_worker_claims_again_on_its_own_connection",
        """
import threading
_LOCK = threading.Lock()
_READY = ("((state IN ('pending', 'retry_wait') AND run_after <= :now)"
          " OR (state = 'running' AND lease_until <= :now))")

def _take(conn, job_id, worker, now, lease_s):
    return dict(conn.execute(
        "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = ?,"
        " lease_until = ?, lease_token = lower(hex(randomblob(16))), updated_at = ?"
        " WHERE id = ? RETURNING *", (worker, now + lease_s, now, job_id)).fetchone())

def claim_capped(conn, worker, now, lease_s, cap):
    with _LOCK:
        conn.execute("BEGIN IMMEDIATE")
        try:
            busy = dict(conn.execute(
                "SELECT queue, count(*) FROM jobs WHERE state = 'running' AND lease_until > ?"
                " GROUP BY queue", (now,)).fetchall())
            ready = conn.execute(f"SELECT id, queue, run_after FROM jobs WHERE {_READY}",
                                 {"now": now}).fetchall()
            ready = [r for r in ready if busy.get(r["queue"], 0) < cap]
            ready.sort(key=lambda r: (busy.get(r["queue"], 0), r["run_after"], r["id"]))
            row = _take(conn, ready[0]["id"], worker, now, lease_s) if ready else None
            conn.execute("COMMIT")
            return row
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

def claim_serial(conn, worker, now, lease_s):
    with _LOCK:
        conn.execute("BEGIN IMMEDIATE")
        try:
            heads = conn.execute(
                f"SELECT id FROM jobs WHERE {_READY} AND id IN (SELECT min(id) FROM jobs"
                " WHERE state IN ('pending', 'retry_wait', 'running') GROUP BY queue)"
                " ORDER BY run_after, id LIMIT 1", {"now": now}).fetchall()
            row = _take(conn, heads[0]["id"], worker, now, lease_s) if heads else None
            conn.execute("COMMIT")
            return row
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
""",
    ),
    (
        "the token from a SQL function registered once per connection, the connections kept"
        " in a module-level dict by id",
        "each_claim_uses_the_connection_it_is_given",
        _ex13_token("secrets", "secrets.token_hex(16)", once=True),
    ),
    *[
        ("a token drawn in Python by a SQL function: " + expr, check, _ex13_token(module, expr))
        for module, expr, check in (
            ("uuid", "uuid.uuid4().hex", "lease_tokens_hold_enough_randomness"),
            ("secrets", "secrets.token_urlsafe()", "lease_tokens_hold_enough_randomness"),
            ("secrets", "str(secrets.randbits(128))", "tokens_differ_between_forked_workers"),
            # 64 bits in hex: the fewest the hints allow.
            ("secrets", "secrets.token_hex(8)", "lease_tokens_hold_enough_randomness"),
        )
    ],
    (
        "the token drawn in Python, the claimed row read back by that token",
        "each_claim_returns_the_job_it_took",
        """
import secrets
_PICK_TOKEN = CLAIM_SET.replace("lower(hex(randomblob(16)))", ":token")
_reference_capped, _reference_serial = claim_capped, claim_serial
class _ReadBack:
    def __init__(self, conn):
        self.conn, self.token = conn, secrets.token_hex(16)
    def execute(self, sql, params=()):
        sql = sql.replace(CLAIM_SET, _PICK_TOKEN).replace("RETURNING *", "")
        self.conn.execute(sql, {**params, "token": self.token})
        return self.conn.execute("SELECT * FROM jobs WHERE lease_token = ?", (self.token,))
def claim_capped(conn, worker, now, lease_s, cap):
    return _reference_capped(_ReadBack(conn), worker, now, lease_s, cap)
def claim_serial(conn, worker, now, lease_s):
    return _reference_serial(_ReadBack(conn), worker, now, lease_s)
""",
    ),
    (
        "the token set by a second UPDATE inside the claim's BEGIN IMMEDIATE (one commit)",
        "the_old_holder_is_fenced_off_by_the_claim_itself",
        """
import secrets
CLAIM_SET = CLAIM_SET.replace("lease_token = lower(hex(randomblob(16))),", "")
_reference_capped, _reference_serial = claim_capped, claim_serial
def _in_one(conn, take, *args):
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = take(conn, *args)
        if row is not None:
            row["lease_token"] = secrets.token_hex(16)
            conn.execute("UPDATE jobs SET lease_token = ? WHERE id = ?",
                         (row["lease_token"], row["id"]))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return row
def claim_capped(conn, worker, now, lease_s, cap):
    return _in_one(conn, _reference_capped, worker, now, lease_s, cap)
def claim_serial(conn, worker, now, lease_s):
    return _in_one(conn, _reference_serial, worker, now, lease_s)
""",
    ),
    (
        "a SELECT picks, an UPDATE guarded on the job still ready (and under the cap, or still"
        " a head) takes it, and a claim that lost the job to another worker picks again",
        "a_worker_that_loses_a_race_takes_the_next_job",
        '''
_READY = """((state IN ('pending', 'retry_wait') AND run_after <= :now)
             OR (state = 'running' AND lease_until <= :now))"""
_BUSY = """(SELECT count(*) FROM jobs r WHERE r.queue = jobs.queue
              AND r.state = 'running' AND r.lease_until > :now)"""
_HEADS = """(SELECT min(id) FROM jobs
              WHERE state IN ('pending', 'retry_wait', 'running') GROUP BY queue)"""

def _until_taken(conn, pick, guard, params):
    while True:
        found = conn.execute(pick, params).fetchone()
        if found is None:
            return None
        row = conn.execute(
            "UPDATE jobs" + CLAIM_SET + f" WHERE id = :id AND {guard} RETURNING *",
            {**params, "id": found[0]},
        ).fetchone()
        if row is not None:
            return dict(row)

def claim_capped(conn, worker, now, lease_s, cap):
    pick = (f"SELECT id FROM jobs WHERE {_READY} AND {_BUSY} < :cap"
            f" ORDER BY {_BUSY}, run_after, id LIMIT 1")
    return _until_taken(conn, pick, f"{_READY} AND {_BUSY} < :cap",
                        {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap})

def claim_serial(conn, worker, now, lease_s):
    pick = f"SELECT id FROM jobs WHERE id IN {_HEADS} AND {_READY} ORDER BY run_after, id LIMIT 1"
    return _until_taken(conn, pick, f"id IN {_HEADS} AND {_READY}",
                        {"worker": worker, "now": now, "lease_s": lease_s})
''',
    ),
    (
        "the least busy ready job chosen without the cap, the cap tested on its account in the"
        " UPDATE (the least busy account at its cap means every account is)",
        "cap_skips_a_busy_account",
        '''
def claim_capped(conn, worker, now, lease_s, cap):
    row = conn.execute(
        "UPDATE jobs" + CLAIM_SET + \"\"\"
         WHERE id = (SELECT c.id FROM jobs c
                WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                       OR (c.state = 'running' AND c.lease_until <= :now))
                ORDER BY (SELECT count(*) FROM jobs r WHERE r.queue = c.queue
                            AND r.state = 'running' AND r.lease_until > :now),
                         c.run_after, c.id
                LIMIT 1)
           AND (SELECT count(*) FROM jobs r WHERE r.queue = jobs.queue
                  AND r.state = 'running' AND r.lease_until > :now) < :cap
        RETURNING *\"\"\",
        {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
    ).fetchone()
    return None if row is None else dict(row)
''',
    ),
    (
        "serial heads by a correlated min(id) of the job's own queue, the claimed row read "
        "back by the id the UPDATE returned",
        "serial_claim_follows_the_rules_on_generated_tables",
        '''
def claim_serial(conn, worker, now, lease_s):
    took = conn.execute(
        "UPDATE jobs" + CLAIM_SET + """
         WHERE id = (
               SELECT h.id FROM jobs h
                WHERE h.id = (SELECT min(x.id) FROM jobs x
                               WHERE x.queue = h.queue
                                 AND x.state IN ('pending', 'retry_wait', 'running'))
                  AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                       OR (h.state = 'running' AND h.lease_until <= :now))
                ORDER BY h.run_after, h.id
                LIMIT 1)
        RETURNING id
        """,
        {"worker": worker, "now": now, "lease_s": lease_s},
    ).fetchone()
    if took is None:
        return None
    return dict(conn.execute("SELECT * FROM jobs WHERE id = ?", (took[0],)).fetchone())
''',
    ),
    (
        "claim_capped counts busy as total(state = 'running' AND lease_until > :now) over "
        "the account's jobs, an upper-case hex token",
        "cap_skips_a_busy_account",
        '''
def claim_capped(conn, worker, now, lease_s, cap):
    busy = """(SELECT total(r.state = 'running' AND r.lease_until > :now)
                  FROM jobs r WHERE r.queue = c.queue)"""
    row = conn.execute(
        "UPDATE jobs" + CLAIM_SET.replace("lower(hex(randomblob(16)))", "hex(randomblob(16))")
        + f"""
         WHERE id = (
               SELECT c.id FROM jobs c
                WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                       OR (c.state = 'running' AND c.lease_until <= :now))
                  AND {busy} < :cap
                ORDER BY {busy}, c.run_after, c.id
                LIMIT 1)
        RETURNING *
        """,
        {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
    ).fetchone()
    return None if row is None else dict(row)
''',
    ),
    (
        "serial head as a live job with no older live job in its queue (NOT EXISTS), "
        "readiness by a CASE on state, ?1/?2/?3 numbered parameters",
        "serial_claim_follows_the_rules_on_generated_tables",
        '''
def claim_serial(conn, worker, now, lease_s):
    row = conn.execute(
        """
        UPDATE jobs
           SET state = 'running', attempt = attempt + 1, lease_owner = ?1,
               lease_until = ?2 + ?3, lease_token = lower(hex(randomblob(16))),
               updated_at = ?2
         WHERE id = (
               SELECT h.id FROM jobs h
                WHERE h.state IN ('pending', 'retry_wait', 'running')
                  AND NOT EXISTS (SELECT 1 FROM jobs o
                                   WHERE o.queue = h.queue AND o.id < h.id
                                     AND o.state IN ('pending', 'retry_wait', 'running'))
                  AND CASE h.state WHEN 'running' THEN h.lease_until <= ?2
                                   ELSE h.run_after <= ?2 END
                ORDER BY h.run_after, h.id
                LIMIT 1)
        RETURNING *
        """,
        (worker, now, lease_s),
    ).fetchone()
    return None if row is None else dict(row)
''',
    ),
]


test_an_ex13_right_solution_written_otherwise_keeps_the_points = right_test("ex13", RIGHT_EX13)


#: Exercise 11's right solutions written otherwise, each with the check most likely to
#: trip on it.
RIGHT_EX11: list[tuple[str, str, str]] = [
    (
        "consume inserts the email first, then INSERT OR IGNORE the id, and rolls both back "
        "when the id was there (a repeat)",
        "consume_applies_each_message_once",
        """
import json
def consume(conn, message_id, body):
    order = json.loads(body)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
            (order["order_id"], order["customer"]),
        )
        cur = conn.execute(
            "INSERT OR IGNORE INTO processed_messages (message_id) VALUES (?)", (message_id,)
        )
        if cur.rowcount == 0:
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return True
""",
    ),
    (
        "the relay warns about a body over 65536 bytes and publishes it all the same (a "
        "number in its code: the backlog check builds 70,000 rows past it)",
        "relay_publishes_every_pending_row_oldest_first",
        """
import logging
def relay_once(conn, publish, now):
    sent = []
    pending = conn.execute(
        "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
    ).fetchall()
    for row_id, topic, message_id, body in pending:
        if len(body) > 65536:
            logging.getLogger("relay").warning("a large body: %s", message_id)
        publish(topic, message_id, body)
        conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
        sent.append(message_id)
    return sent
""",
    ),
    (
        "place_order tells a new order by conn.total_changes around its INSERT ... DO NOTHING",
        "place_order_twice_is_one_message",
        """
import json
def place_order(conn, order_id, customer, total):
    conn.execute("BEGIN IMMEDIATE")
    try:
        before = conn.total_changes
        conn.execute(
            "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (order_id, customer, total),
        )
        created = conn.total_changes > before
        if created:
            body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
            conn.execute(
                "INSERT INTO outbox (message_id, topic, body, sent_at)"
                " VALUES (?, 'order.placed', ?, NULL)",
                (f"order:{order_id}:placed:v1", body),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return created
""",
    ),
    (
        "relay_once marks the row it published by its message_id (UNIQUE), if still pending",
        "relay_marks_each_row_by_its_own_id",
        """
def relay_once(conn, publish, now):
    sent = []
    for topic, message_id, body in conn.execute(
        "SELECT topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
    ).fetchall():
        publish(topic, message_id, body)
        conn.execute(
            "UPDATE outbox SET sent_at = ? WHERE message_id = ? AND sent_at IS NULL",
            (now, message_id),
        )
        sent.append(message_id)
    return sent
""",
    ),
    (
        "consume in a deferred BEGIN whose first statement is the INSERT ... ON CONFLICT",
        "two_consumer_processes_send_each_email_once",
        """
import json
def consume(conn, message_id, body):
    order = json.loads(body)
    conn.execute("BEGIN")
    try:
        fresh = conn.execute(
            "INSERT INTO processed_messages (message_id) VALUES (?)"
            " ON CONFLICT (message_id) DO NOTHING RETURNING 1",
            (message_id,),
        ).fetchone()
        if fresh is not None:
            conn.execute(
                "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                (order["order_id"], order["customer"]),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return fresh is not None
""",
    ),
    (
        "relay_once reads every row ORDER BY rowid and skips, in Python, those whose sent_at "
        "is not None (0.0 a time like any other)",
        "relay_at_time_zero_marks_and_moves_on",
        """
def relay_once(conn, publish, now):
    published = []
    rows = conn.execute("SELECT rowid, topic, message_id, body, sent_at FROM outbox ORDER BY rowid")
    for row_id, topic, message_id, body, sent_at in rows.fetchall():
        if sent_at is not None:
            continue
        publish(topic, message_id, body)
        conn.execute("UPDATE outbox SET sent_at = ? WHERE rowid = ?", (now, row_id))
        published.append(message_id)
    return published
""",
    ),
    (
        "relay_once's pending rows read through the shop's partial index, ordered by id",
        "relay_orders_by_id_whatever_the_indexes",
        """
def relay_once(conn, publish, now):
    published = []
    rows = conn.execute(
        "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id ASC"
    ).fetchall()
    for row in rows:
        publish(row["topic"], row["message_id"], row["body"])
        conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row["id"]))
        published.append(row["message_id"])
    return published
""",
    ),
    (
        "place_order looks for the order with a SELECT inside its BEGIN IMMEDIATE, then inserts",
        "an_order_saved_before_the_outbox_is_a_retry",
        """
import json
def place_order(conn, order_id, customer, total):
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT 1 FROM orders WHERE id = ?", (order_id,)).fetchone():
            conn.execute("ROLLBACK")
            return False
        conn.execute(
            "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)", (order_id, customer, total)
        )
        body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
        conn.execute(
            "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
            (f"order:{order_id}:placed:v1", body),
        )
        conn.execute("COMMIT")
        return True
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
""",
    ),
    (
        "place_order catches the IntegrityError of a taken id only (sqlite_errorname),"
        " re-raises any other constraint",
        "a_failed_order_is_an_error_not_a_retry",
        """
import json, sqlite3
def place_order(conn, order_id, customer, total):
    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
    conn.execute("BEGIN IMMEDIATE")
    try:
        try:
            conn.execute(
                "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)",
                (order_id, customer, total),
            )
        except sqlite3.IntegrityError as exc:
            taken = ("SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE")
            if exc.sqlite_errorname not in taken:
                raise
            conn.execute("ROLLBACK")
            return False
        conn.execute(
            "INSERT INTO outbox (topic, message_id, body) VALUES (?, ?, ?)",
            ("order.placed", "order:%d:placed:v1" % order_id, body),
        )
        conn.execute("COMMIT")
        return True
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
""",
    ),
    (
        "consume in a class, a repeat told by the IntegrityError of processed_messages",
        "an_interrupted_call_leaves_the_connection_usable",
        """
import json, sqlite3
class Consumer:
    def __init__(self, conn):
        self.conn = conn
    def handle(self, message_id, body):
        order = json.loads(body)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            try:
                self.conn.execute(
                    "INSERT INTO processed_messages (message_id) VALUES (?)", (message_id,)
                )
            except sqlite3.IntegrityError:
                self.conn.execute("ROLLBACK")
                return False
            self.conn.execute(
                "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                (order["order_id"], order["customer"]),
            )
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        return True
def consume(conn, message_id, body):
    return Consumer(conn).handle(message_id, body)
""",
    ),
    (
        "relay_once reads one pending row at a time (id > the last, LIMIT 1)",
        "a_row_made_pending_again_is_published",
        """
def relay_once(conn, publish, now):
    published = []
    last = -1
    while True:
        row = conn.execute(
            "SELECT id, topic, message_id, body FROM outbox"
            " WHERE sent_at IS NULL AND id > ? ORDER BY id LIMIT 1",
            (last,),
        ).fetchone()
        if row is None:
            return published
        last, topic, mid, body = row
        publish(topic, mid, body)
        conn.execute(
            "UPDATE outbox SET sent_at = ? WHERE id = ? AND sent_at IS NULL", (now, last)
        )
        published.append(mid)
""",
    ),
    (
        "consume in a deferred BEGIN whose first statement is the write (ON CONFLICT"
        " RETURNING), the payload checked before the transaction",
        "two_consumer_processes_send_each_email_once",
        """
import json
def consume(conn, message_id, body):
    order = json.loads(body)
    if not isinstance(order.get("customer"), str) or "order_id" not in order:
        raise ValueError(f"bad message {message_id}: {body!r}")
    conn.execute("BEGIN")
    try:
        fresh = conn.execute(
            "INSERT INTO processed_messages (message_id) VALUES (?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (message_id,),
        ).fetchone() is not None
        if fresh:
            conn.execute(
                "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                (order["order_id"], order["customer"]),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return fresh
""",
    ),
    (
        "a module threading.Lock around place_order, relay_once and consume (one call at a "
        "time in this process)",
        "a_long_lived_relay_publishes_what_the_broker_refused",
        """
        import threading

        _one_at_a_time = threading.Lock()
        _ok_place, _ok_relay, _ok_consume = place_order, relay_once, consume


        def place_order(conn, order_id, customer, total):
            with _one_at_a_time:
                return _ok_place(conn, order_id, customer, total)


        def relay_once(conn, publish, now):
            with _one_at_a_time:
                return _ok_relay(conn, publish, now)


        def consume(conn, message_id, body):
            with _one_at_a_time:
                return _ok_consume(conn, message_id, body)
        """,
    ),
    (
        "place_order and consume wait up to BUSY_MS = 30_000 ms for another writer "
        "(PRAGMA busy_timeout), then let 'database is locked' out",
        "a_locked_database_is_an_error_not_a_repeat",
        """
        BUSY_MS = 30_000
        _ok_place, _ok_consume = place_order, consume


        def place_order(conn, order_id, customer, total):
            conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            return _ok_place(conn, order_id, customer, total)


        def consume(conn, message_id, body):
            conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            return _ok_consume(conn, message_id, body)
        """,
    ),
    (
        "a module-level audit connection (sqlite3 in memory) that logs every call, never "
        "read to decide",
        "two_consumer_processes_send_each_email_once",
        """
        import sqlite3
        import threading

        _audit = sqlite3.connect(":memory:", check_same_thread=False)
        _audit.execute("CREATE TABLE IF NOT EXISTS calls (what TEXT, detail TEXT)")
        _audit_lock = threading.Lock()
        _ok_place, _ok_relay, _ok_consume = place_order, relay_once, consume


        def _log(what, detail):
            with _audit_lock:
                _audit.execute("INSERT INTO calls VALUES (?, ?)", (what, str(detail)))


        def place_order(conn, order_id, customer, total):
            created = _ok_place(conn, order_id, customer, total)
            _log("place_order", (order_id, created))
            return created


        def relay_once(conn, publish, now):
            sent = _ok_relay(conn, publish, now)
            _log("relay_once", len(sent))
            return sent


        def consume(conn, message_id, body):
            applied = _ok_consume(conn, message_id, body)
            _log("consume", (message_id, applied))
            return applied
        """,
    ),
    (
        "place_order in a SAVEPOINT, RELEASEd, or rolled back TO it and RELEASEd on an error",
        "place_order_is_one_transaction",
        """
        import json
        def place_order(conn, order_id, customer, total):
            conn.execute("SAVEPOINT place")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.execute("RELEASE place")
            except BaseException:
                conn.execute("ROLLBACK TO place")
                conn.execute("RELEASE place")
                raise
            return created is not None
        """,
    ),
    (
        "consume tells a new id by SELECT changes() after INSERT OR IGNORE, writes"
        " str(order_id) (the INTEGER column stores the integer)",
        "order_ids_past_a_float_stay_exact",
        """
        import json
        def consume(conn, message_id, body):
            order = json.loads(body)
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT OR IGNORE INTO processed_messages (message_id) VALUES (?)",
                    (message_id,),
                )
                fresh = conn.execute("SELECT changes()").fetchone()[0] == 1
                if fresh:
                    conn.execute(
                        "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                        (str(order["order_id"]), order["customer"]),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return fresh
        """,
    ),
    (
        "place_order commits with conn.commit() and writes the body with ensure_ascii=False",
        "body_is_json_for_any_name",
        """
        import json
        def place_order(conn, order_id, customer, total):
            conn.execute("BEGIN IMMEDIATE")
            try:
                created = conn.execute(
                    "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id",
                    (order_id, customer, total),
                ).fetchone()
                if created is not None:
                    body = json.dumps(
                        {"order_id": order_id, "customer": customer, "total": total},
                        ensure_ascii=False,
                    )
                    conn.execute(
                        "INSERT INTO outbox (message_id, topic, body)"
                        " VALUES (?, 'order.placed', ?)",
                        (f"order:{order_id}:placed:v1", body),
                    )
                conn.commit()
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
            return created is not None
        """,
    ),
    (
        "relay_once reads pending rows 50 at a time until none is left",
        "relay_publishes_every_pending_row_oldest_first",
        """
        def relay_once(conn, publish, now):
            sent = []
            while True:
                rows = conn.execute(
                    "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL"
                    " ORDER BY id LIMIT 50"
                ).fetchall()
                if not rows:
                    return sent
                for row_id, topic, message_id, body in rows:
                    publish(topic, message_id, body)
                    conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                    sent.append(message_id)
        """,
    ),
    (
        "relay_once pages through its backlog by id (id > the last, LIMIT 500, fetchall)",
        "a_busy_shop_beside_a_long_relay_run",
        """
        def relay_once(conn, publish, now):
            sent, last = [], 0
            while rows := conn.execute(
                "SELECT id, topic, message_id, body FROM outbox"
                " WHERE sent_at IS NULL AND id > ? ORDER BY id LIMIT 500",
                (last,),
            ).fetchall():
                for row_id, topic, message_id, body in rows:
                    publish(topic, message_id, body)
                    conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
                    sent.append(message_id)
                    last = row_id
            return sent
        """,
    ),
    (
        "relay_once pages through pending rows, LIMIT 50 each, selecting again until none "
        "is left",
        "relay_publishes_every_pending_row_oldest_first",
        """
def relay_once(conn, publish, now):
    sent = []
    while True:
        rows = conn.execute(
            "SELECT id, topic, message_id, body FROM outbox"
            " WHERE sent_at IS NULL ORDER BY id LIMIT 50"
        ).fetchall()
        if not rows:
            return sent
        for row_id, topic, message_id, body in rows:
            publish(topic, message_id, body)
            conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
            sent.append(message_id)
""",
    ),
    (
        "relay_once publishes and marks each row inside its own BEGIN IMMEDIATE ... COMMIT "
        "(rolled back when publish raises)",
        "relay_never_loses_a_message",
        """
def relay_once(conn, publish, now):
    sent = []
    rows = conn.execute(
        "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
    ).fetchall()
    for row_id, topic, message_id, body in rows:
        conn.execute("BEGIN IMMEDIATE")
        try:
            publish(topic, message_id, body)
            conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        sent.append(message_id)
    return sent
""",
    ),
    (
        "relay_once calls publish with keywords (topic=, message_id=, body=), as its "
        "docstring names them",
        "relay_publishes_and_marks",
        """
def relay_once(conn, publish, now):
    sent = []
    rows = conn.execute(
        "SELECT id, topic, message_id, body FROM outbox WHERE sent_at IS NULL ORDER BY id"
    ).fetchall()
    for row_id, topic, message_id, body in rows:
        publish(topic=topic, message_id=message_id, body=body)
        conn.execute("UPDATE outbox SET sent_at = ? WHERE id = ?", (now, row_id))
        sent.append(message_id)
    return sent
""",
    ),
    (
        "place_order tells a retry by cursor.rowcount of its INSERT ... DO NOTHING and "
        "ROLLBACKs at once, returning False",
        "place_order_twice_is_one_message",
        """
import json
def place_order(conn, order_id, customer, total):
    conn.execute("BEGIN IMMEDIATE")
    try:
        cur = conn.execute(
            "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
            " ON CONFLICT (id) DO NOTHING",
            (order_id, customer, total),
        )
        if cur.rowcount == 0:
            conn.execute("ROLLBACK")
            return False
        body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
        conn.execute(
            "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
            (f"order:{order_id}:placed:v1", body),
        )
        conn.execute("COMMIT")
        return True
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
""",
    ),
    (
        "consume in a SAVEPOINT, RELEASEd, or rolled back TO it and RELEASEd on an error",
        "consume_is_one_transaction",
        """
import json
def consume(conn, message_id, body):
    order = json.loads(body)
    conn.execute("SAVEPOINT consume")
    try:
        fresh = conn.execute(
            "INSERT INTO processed_messages (message_id) VALUES (?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            (message_id,),
        ).fetchone()
        if fresh is not None:
            conn.execute(
                "INSERT INTO emails (order_id, customer) VALUES (?, ?)",
                (order["order_id"], order["customer"]),
            )
        conn.execute("RELEASE consume")
    except BaseException:
        conn.execute("ROLLBACK TO consume")
        conn.execute("RELEASE consume")
        raise
    return fresh is not None
""",
    ),
    (
        "place_order sends BEGIN IMMEDIATE inside `with conn:` (committed on leaving, "
        "rolled back and re-raised on an error)",
        "place_order_is_one_transaction",
        """
import json
def place_order(conn, order_id, customer, total):
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        created = conn.execute(
            "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)"
            " ON CONFLICT (id) DO NOTHING RETURNING id",
            (order_id, customer, total),
        ).fetchone()
        if created is not None:
            body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
            conn.execute(
                "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
                (f"order:{order_id}:placed:v1", body),
            )
    return created is not None
""",
    ),
    (
        "place_order tells a new order by SELECT changes() after its INSERT ... DO NOTHING, "
        "conn.commit() and conn.rollback() around BEGIN IMMEDIATE (a retry with another "
        "total is False)",
        "a_retried_order_leaves_its_sent_message_alone",
        """
import json
def place_order(conn, order_id, customer, total):
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (order_id, customer, total),
        )
        new = conn.execute("SELECT changes()").fetchone()[0] == 1
        if new:
            body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
            conn.execute(
                "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
                (f"order:{order_id}:placed:v1", body),
            )
        conn.commit()
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    return new
""",
    ),
]


test_an_ex11_right_solution_written_otherwise_keeps_the_points = right_test("ex11", RIGHT_EX11)
