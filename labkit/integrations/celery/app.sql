-- schema --
-- The lab's own tables in the run's schema: charges (the effect), processed (dedup), signups.
CREATE TABLE IF NOT EXISTS charges (
    id BIGSERIAL PRIMARY KEY,
    key TEXT NOT NULL,
    customer TEXT NOT NULL,
    amount INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS processed (
    key TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS users (
    id BIGSERIAL PRIMARY KEY,
    email TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS outbox (
    id BIGSERIAL PRIMARY KEY,
    topic TEXT NOT NULL,
    payload TEXT NOT NULL,
    sent BOOLEAN NOT NULL DEFAULT FALSE
);

-- claim_key --
-- The dedup record: a row only the first run of a key inserts (the upsert's no-op otherwise).
INSERT INTO processed (key) VALUES (:key) ON CONFLICT (key) DO NOTHING RETURNING key;

-- add_charge --
-- The effect: one charge row (no unique key here, so a repeat would show as a second row).
INSERT INTO charges (key, customer, amount) VALUES (:key, :customer, :amount);

-- charges_for --
-- How many charge rows a key has: the judge's question.
SELECT count(*) AS n FROM charges WHERE key = :key;

-- add_user --
-- A signup.
INSERT INTO users (email) VALUES (:email) RETURNING id;

-- add_outbox --
-- The intent to publish, in the same transaction as the business write.
INSERT INTO outbox (topic, payload) VALUES (:topic, :payload) RETURNING id;

-- unsent_outbox --
-- What the relay still has to publish, oldest first.
SELECT id, topic, payload FROM outbox WHERE NOT sent ORDER BY id;

-- mark_sent --
-- The relay published this row.
UPDATE outbox SET sent = TRUE WHERE id = :id;

-- count_users --
-- How many signups are committed.
SELECT count(*) AS n FROM users;
