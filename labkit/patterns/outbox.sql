-- outbox_schema --
-- The outbox table, in the business database: one row per message to publish.
CREATE TABLE IF NOT EXISTS outbox (
    id          INTEGER PRIMARY KEY,
    message_id  TEXT NOT NULL UNIQUE,
    topic       TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    sent_at     REAL,
    publishes   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (id) WHERE sent_at IS NULL

-- outbox_insert --
-- Record a message to publish, inside the caller's business transaction.
INSERT INTO outbox (message_id, topic, body, created_at)
VALUES (:message_id, :topic, :body, :now)
ON CONFLICT (message_id) DO NOTHING
RETURNING id

-- outbox_by_message_id --
-- One outbox row by message id.
SELECT * FROM outbox WHERE message_id = :message_id

-- outbox_pending --
-- Messages not yet marked sent, oldest first.
SELECT * FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT :limit

-- outbox_count_publish --
-- Count a publish attempt before it happens, so duplicates show in the table.
UPDATE outbox SET publishes = publishes + 1 WHERE id = :id

-- outbox_mark_sent --
-- Mark a message sent once the broker has it.
UPDATE outbox SET sent_at = :now WHERE id = :id AND sent_at IS NULL

-- outbox_all --
-- Every outbox row, by id.
SELECT * FROM outbox ORDER BY id

-- broker_schema --
-- The broker's durable log: every publish appended, duplicates included.
CREATE TABLE IF NOT EXISTS broker_log (
    seq          INTEGER PRIMARY KEY,
    topic        TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    body         TEXT NOT NULL,
    published_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS broker_log_topic ON broker_log (topic, seq)

-- broker_append --
-- Append one message to a topic's log.
INSERT INTO broker_log (topic, message_id, body, published_at)
VALUES (:topic, :message_id, :body, :now)
RETURNING seq

-- broker_read --
-- Messages of a topic after a position, in order.
SELECT seq, topic, message_id, body, published_at FROM broker_log
 WHERE topic = :topic AND seq > :after ORDER BY seq LIMIT :limit

-- broker_count --
-- How many times a message id was published (duplicates included).
SELECT count(*) FROM broker_log WHERE message_id = :message_id

-- consumer_schema --
-- The consumer's dedup table and read position, in the consumer's own database.
CREATE TABLE IF NOT EXISTS processed_messages (
    consumer     TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    processed_at REAL NOT NULL,
    PRIMARY KEY (consumer, message_id)
);
CREATE TABLE IF NOT EXISTS consumer_offsets (
    consumer TEXT NOT NULL,
    topic    TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    PRIMARY KEY (consumer, topic)
)

-- consumer_offset --
-- Where a consumer is in a topic (0 before the first message).
SELECT coalesce((SELECT seq FROM consumer_offsets WHERE consumer = :consumer AND topic = :topic), 0)

-- consumer_mark_processed --
-- Remember a message id; returns nothing if it was already processed (a duplicate).
INSERT INTO processed_messages (consumer, message_id, seq, processed_at)
VALUES (:consumer, :message_id, :seq, :now)
ON CONFLICT (consumer, message_id) DO NOTHING
RETURNING message_id

-- consumer_advance --
-- Move a consumer's position past a message.
INSERT INTO consumer_offsets (consumer, topic, seq) VALUES (:consumer, :topic, :seq)
ON CONFLICT (consumer, topic) DO UPDATE SET seq = excluded.seq
