# %% [markdown]
# # 09 · The transactional outbox
#
# *Save the order and the message that announces it in one transaction, so a crash can
# lose neither and invent neither; then deliver the message at least once and let the
# consumer drop the repeats.*
#
# > **Resumo.** Grave o pedido e a mensagem que o anuncia na mesma transação: assim, um
# > crash não faz sumir nenhum dos dois nem cria um sem o outro. Você vai ver a mensagem
# > perdida e a mensagem fantasma da escrita dupla, o outbox e o relay, a publicação
# > duplicada depois de um crash, o consumidor que descarta a repetida pelo id da mensagem
# > e por que o evento do artigo do ERP já é uma linha de outbox, só que sem o sweeper.
#
# Run time: about 1 second.
#
# A shop saves an order in its database and tells billing about it with a message on a
# broker. Two systems, two writes, no transaction that spans both. The async-jobs lesson says it
# plainly: if writing the state and publishing the message are separate operations, a
# failure between them leaves a state without its message or a message without its
# state. This lesson shows both failures in the records, then fixes them with
# `labkit.patterns.outbox`:
#
# 1. write, then publish: a crash in between **loses** the message;
# 2. publish, then write: a crash in between publishes a **ghost**;
# 3. the outbox: the order row and the message row commit together, or neither does;
# 4. the relay publishes pending messages and marks them sent;
# 5. a relay crash after publishing and before marking: a **duplicate** publish;
# 6. the consumer absorbs it by message id, and survives its own crash too;
# 7. the ERP article's event row: an outbox row whose sweeper is missing.

# %% [markdown]
# ## Setup
#
# A `FakeClock`, a seed for the fault plans, a fresh folder. The shop's database holds an
# `orders` table; the broker (`labkit.patterns.outbox.Broker`) is an append-only log in its own
# file, like a Redis Stream or a Kafka topic: it keeps every publish, in order.

# %%
import json

from labkit.patterns import outbox
from labkit.clock import FakeClock, isoformat
from labkit.errors import SimulatedCrash
from labkit.faults import FaultPlan
from labkit.patterns.outbox import AFTER_PUBLISH, BEFORE_CONSUMER_COMMIT, Broker, Consumer, Relay
from labkit.tables import show
from labkit.notebook.scratch import fresh_dir

SEED = 9
clock = FakeClock()
folder = fresh_dir("09")

shop = outbox.connect(folder / "shop.db")
shop.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, total INTEGER)")
broker = Broker(folder / "broker.db", clock)


def orders():
    return [dict(r) for r in shop.execute("SELECT id, customer, total FROM orders ORDER BY id")]


def broker_log():
    return [{"seq": m.seq, "topic": m.topic, "message_id": m.message_id, "body": m.body}
            for m in broker.read("order.placed")]


print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## 1. Write, then publish
#
# The obvious code: insert the order (committed), then publish `order.placed`. A fault
# plan crashes the process in the gap, once, for order 1. This is the naive thing the
# lesson shows failing, so it is written out here rather than taken from labkit.

# %%
def place_order_write_then_publish(order_id, customer, total, faults):
    shop.execute("INSERT INTO orders VALUES (:id, :customer, :total)",
                 {"id": order_id, "customer": customer, "total": total})  # commits
    message_id = f"order:{order_id}:placed:v1"
    faults.hit("between_writes", key=message_id, clock=clock)
    broker.publish("order.placed", message_id, json.dumps({"order_id": order_id, "total": total}))


plan = FaultPlan(seed=SEED).at("between_writes", "crash", nth=1)
print(f"replay: {plan}")
try:
    place_order_write_then_publish(1, "cus_1", 4200, plan)
except SimulatedCrash as crash:
    print(f"the process died: {crash}")
assert plan.fired_at("between_writes", "crash")

# %% [markdown]
# The database says order 1 exists; the broker never heard of it. Billing will never
# invoice it, and nothing will ever retry: no record anywhere says a message is owed.

# %%
print("orders:")
show(orders())
print("\nbroker log:")
show(broker_log())
assert [o["id"] for o in orders()] == [1] and broker_log() == []

# %% [markdown]
# ## 2. Publish, then write
#
# Swap the order, and the failure swaps too. Publish first, then insert; the process dies
# in between for order 2.

# %%
def place_order_publish_then_write(order_id, customer, total, faults):
    message_id = f"order:{order_id}:placed:v1"
    broker.publish("order.placed", message_id, json.dumps({"order_id": order_id, "total": total}))
    faults.hit("between_writes", key=message_id, clock=clock)
    shop.execute("INSERT INTO orders VALUES (:id, :customer, :total)",
                 {"id": order_id, "customer": customer, "total": total})


plan = FaultPlan(seed=SEED).at("between_writes", "crash", nth=1)
try:
    place_order_publish_then_write(2, "cus_2", 990, plan)
except SimulatedCrash as crash:
    print(f"the process died: {crash}")
print("orders:")
show(orders())
print("\nbroker log:")
show(broker_log())
assert plan.fired_at("between_writes", "crash")
assert 2 not in [o["id"] for o in orders()] and [m["message_id"] for m in broker_log()] == [
    "order:2:placed:v1"]

# %% [markdown]
# Now billing receives `order.placed` for an order that does not exist: a **ghost**. It
# may invoice a customer for nothing, or fail forever looking the order up. No ordering
# of two separate writes is safe; the fix is to make them one write.
#
# ## 3. The outbox: one transaction
#
# The outbox is a table in the shop's own database. Placing an order inserts the order
# row **and** a message row, in the same transaction. Nothing talks to the broker yet.
# `outbox.install` creates the table; `outbox.transaction` opens a `BEGIN IMMEDIATE`
# transaction whose `execute` runs the business SQL and whose `publish` adds a message.
# The message id names the fact (`order:3:placed:v1`), not the attempt, as lesson 03's
# keys do.

# %%
outbox.install(shop)


def place_order(order_id, customer, total, fail=False):
    with outbox.transaction(shop, clock) as tx:
        tx.execute("INSERT INTO orders VALUES (:id, :customer, :total)",
                   {"id": order_id, "customer": customer, "total": total})
        tx.publish("order.placed", {"order_id": order_id, "total": total},
                   message_id=f"order:{order_id}:placed:v1")
        if fail:
            raise RuntimeError(f"the request for order {order_id} failed after both writes")


place_order(3, "cus_3", 1500)
place_order(4, "cus_4", 2500)
print("orders:")
show(orders())
print("\noutbox:")
show(outbox.rows(shop), columns=("id", "message_id", "topic", "body", "sent_at", "publishes"))
assert [r["message_id"] for r in outbox.pending(shop)] == ["order:3:placed:v1",
                                                           "order:4:placed:v1"]

# %% [markdown]
# If anything fails before the commit, the rollback takes both rows: no order without its
# message, no message without its order. Order 5's request fails after both writes:

# %%
try:
    place_order(5, "cus_5", 700, fail=True)
except RuntimeError as exc:
    print(f"RuntimeError: {exc}")
print(f"order 5 in orders: {any(o['id'] == 5 for o in orders())}")
in_outbox = any(r["message_id"] == "order:5:placed:v1" for r in outbox.rows(shop))
print(f"order 5 in outbox: {in_outbox}")
assert not any(o["id"] == 5 for o in orders())
assert [r["message_id"] for r in outbox.rows(shop)] == ["order:3:placed:v1", "order:4:placed:v1"]

# %% [markdown]
# ## 4. The relay
#
# A separate loop, the **relay**, reads pending outbox rows, publishes each to the broker
# and then marks it sent. If the broker is down, rows just stay pending until the next
# run: the order is safe in the database either way.

# %%
clock.advance(2)
sent = Relay(shop, broker, clock).run_once()
print("relay published:", sent)
print("\noutbox:")
show([{**r, "sent_at": isoformat(r["sent_at"])} for r in outbox.rows(shop)],
     columns=("id", "message_id", "sent_at", "publishes"))
print("\nbroker log:")
show(broker_log())
assert sent == ["order:3:placed:v1", "order:4:placed:v1"] and outbox.pending(shop) == []
assert Relay(shop, broker, clock).run_once() == []  # nothing left to send

# %% [markdown]
# ## 5. A relay crash between publish and mark
#
# Publishing and marking are, again, two systems. The relay publishes order 6's message,
# then dies before it can mark the row sent. The fault point `relay_after_publish` sits
# exactly there.

# %%
place_order(6, "cus_6", 3300)
clock.advance(2)
plan = FaultPlan(seed=SEED).at(AFTER_PUBLISH, "crash", nth=1)
print(f"seed={plan.seed}  replay: {plan}")
try:
    Relay(shop, broker, clock, faults=plan).run_once()
except SimulatedCrash as crash:
    print(f"the relay died: {crash}")
print(f"broker has order:6 {broker.count('order:6:placed:v1')} time(s); outbox pending:",
      [r["message_id"] for r in outbox.pending(shop)])
assert plan.fired_at(AFTER_PUBLISH, "crash")
assert broker.count("order:6:placed:v1") == 1 and len(outbox.pending(shop)) == 1

# %% [markdown]
# The row still says pending, so the restarted relay does what it must: it publishes
# order 6 again. Nothing is lost, and the broker now holds the message **twice**. The
# outbox counts the publishes. This is the outbox's promise, and its limit: delivery at
# least once, never exactly once.

# %%
clock.advance(5)
print("restarted relay published:", Relay(shop, broker, clock, faults=plan).run_once())
print("\nbroker log:")
show(broker_log())
print("\noutbox row of order 6:",
      {k: v for k, v in outbox.rows(shop)[-1].items() if k in ("message_id", "publishes")})
assert broker.count("order:6:placed:v1") == 2 and outbox.rows(shop)[-1]["publishes"] == 2

# %% [markdown]
# ## 6. The consumer drops the repeat by message id
#
# Billing reads the topic. Its handler inserts an invoice, and the `Consumer` runs it in
# one transaction with two more writes: the message id into `processed_messages`, and
# the read position. A message id that is already there is a duplicate: skipped, its
# position still advanced. (The Celery-in-production article gives the same rule for Celery tasks: the dedup
# record must be written in the same transaction as the business effect.)
#
# The ghost from section 2 is in the log too; billing has no order 2 to look up, so its
# handler writes a row flagged `ghost` for a person to review instead of a real invoice.

# %%
billing = outbox.connect(folder / "billing.db")
billing.execute("CREATE TABLE invoices (order_id INTEGER, total INTEGER, note TEXT)")


def invoice(conn, message):
    note = "ghost: no such order" if message.body["order_id"] == 2 else "billed"
    conn.execute("INSERT INTO invoices VALUES (:order_id, :total, :note)",
                 {**message.body, "note": note})


consumer = Consumer(billing, broker, "order.placed", invoice, clock, name="billing")
result = consumer.poll()
print("processed :", result.processed)
print("duplicates:", result.duplicates)
print()
show([dict(r) for r in billing.execute("SELECT * FROM invoices ORDER BY rowid")])
billed = [r[0] for r in billing.execute("SELECT order_id FROM invoices")]
assert result.duplicates == ["order:6:placed:v1"]
assert billed.count(6) == 1 and sorted(billed) == [2, 3, 4, 6]

# %% [markdown]
# Five deliveries, four rows in `invoices`: order 6 billed once. Order 1, lost in section 1,
# never arrives; no consumer can repair a message that was never recorded.
#
# The consumer can crash too. Order 7 goes through the outbox and the relay; the billing
# process dies after its handler ran and before its transaction committed. The rollback
# takes the invoice, the dedup record and the position together, so the retry applies
# the message once.

# %%
place_order(7, "cus_7", 800)
Relay(shop, broker, clock).run_once()
crash_plan = FaultPlan(seed=SEED).at(BEFORE_CONSUMER_COMMIT, "crash", nth=1)
print(f"replay: {crash_plan}")
crashing = Consumer(billing, broker, "order.placed", invoice, clock, name="billing",
                    faults=crash_plan)
try:
    crashing.poll()
except SimulatedCrash as crash:
    print(f"billing died: {crash}")
print("invoices for order 7 after the crash:",
      billing.execute("SELECT count(*) FROM invoices WHERE order_id = 7").fetchone()[0])
again = Consumer(billing, broker, "order.placed", invoice, clock, name="billing").poll()
print("after restart, processed:", again.processed)
print("invoices for order 7:",
      billing.execute("SELECT count(*) FROM invoices WHERE order_id = 7").fetchone()[0])
assert crash_plan.fired_at(BEFORE_CONSUMER_COMMIT, "crash")
assert again.processed == ["order:7:placed:v1"]
assert billing.execute("SELECT count(*) FROM invoices WHERE order_id = 7").fetchone()[0] == 1

# %% [markdown]
# ## 7. The ERP article's event row is an outbox row, without the sweeper
#
# The ERP article saves an `IntegrationEvent` row (status `pending`) in the same
# transaction as the business change, then dispatches it with
# `transaction.on_commit(lambda: run_event.delay(event.pk))`. The event row *is* an
# outbox row: written with the change, or not at all, so a rollback sends nothing. What
# the article lacks is the relay. `on_commit` runs in the process that committed, after
# the commit; if that process dies in between (a deploy, an OOM kill), the row stays
# `pending` and nothing will ever send it.
#
# Order 8 is placed (order and event row in one transaction), and the process dies
# before its `on_commit` hook runs: here, simply, nothing publishes it.

# %%
place_order(8, "cus_8", 1200)
print("pending in the outbox:", [r["message_id"] for r in outbox.pending(shop)])
print(f"broker has order:8 {broker.count('order:8:placed:v1')} time(s)")
assert [r["message_id"] for r in outbox.pending(shop)] == ["order:8:placed:v1"]
assert broker.count("order:8:placed:v1") == 0

# %% [markdown]
# The missing piece is a **sweeper**: a periodic job (Celery Beat, cron, lesson 10) that
# looks for events still `pending` a few minutes after they were created and dispatches
# them again. That is the relay of section 4, run on a schedule. Five minutes later it
# finds order 8, and billing invoices it once:

# %%
clock.advance(5 * 60)
swept = Relay(shop, broker, clock).run_once()
print("the sweeper dispatched:", swept)
late = Consumer(billing, broker, "order.placed", invoice, clock, name="billing").poll()
print("billing processed:", late.processed)
print("invoices for order 8:",
      billing.execute("SELECT count(*) FROM invoices WHERE order_id = 8").fetchone()[0])
assert swept == ["order:8:placed:v1"] and late.processed == ["order:8:placed:v1"]
assert outbox.pending(shop) == []

# %% [markdown]
# Keep both paths: `on_commit` dispatches at once in the normal case, the sweeper
# catches what it missed. The two can race (the sweeper finds a row whose `on_commit`
# dispatch is still on its way), so the sweeper waits longer than a dispatch takes, and
# the consumer drops a repeat by id anyway (section 6).
#
# In production the relay is often not a polling loop: Debezium reads the outbox table
# from the database's log (change data capture), and the broker is a real one: lesson 13
# takes the queue itself onto Redis Streams and PostgreSQL.
#
# ## What you should see
#
# | step | the shop's orders | the broker | billing |
# |---|---|---|---|
# | write, then crash, then publish | order 1 saved | nothing: **lost** | - |
# | publish, then crash, then write | no order 2 | `order:2` published: a **ghost** | - |
# | outbox, orders 3 and 4 | both saved | nothing yet; 2 pending outbox rows | - |
# | order 5 rolled back | no order 5 | no outbox row either | - |
# | relay | - | orders 3 and 4, outbox rows marked sent | - |
# | relay crash after publish | order 6 pending in the outbox | `order:6` once | - |
# | restarted relay | `publishes` = 2 | `order:6` **twice** | - |
# | consumer | - | 5 messages | order 6 billed once, 1 duplicate dropped; the ghost recorded |
# | consumer crash before commit | - | - | no invoice for 7; after restart exactly one |
# | order 8, `on_commit` never ran | order 8 saved, its row pending | nothing | - |
# | the sweeper, 5 minutes later | outbox row sent | `order:8` once | order 8 billed once |
#
# **What to take away**
#
# - Two separate writes (the database and the broker) can always fail in between:
#   write first and the message is lost; publish first and you get a ghost.
# - The outbox makes them one write: the business row and the message row commit in the
#   same transaction, or neither does.
# - A relay publishes pending rows, then marks them sent; a crash between the two
#   publishes again, so delivery is at least once, never exactly once.
# - The consumer drops repeats by message id, recorded in the same transaction as its
#   effect and its read position.
# - `on_commit` alone is not enough: a sweeper must send the rows still pending after
#   the process that committed them died.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 10 · Periodic jobs](10_periodic_jobs.ipynb)
