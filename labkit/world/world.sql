-- schema --
-- Tables of the outside world's file: effects done, calls seen, idempotency keys, scripted behaviours, the app's ledger marks.
CREATE TABLE IF NOT EXISTS world_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS effects (
    id          INTEGER PRIMARY KEY,
    service     TEXT NOT NULL,
    action      TEXT NOT NULL,
    key         TEXT,
    payload     TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    response    TEXT NOT NULL,
    at          REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS effects_key ON effects (key, service);
CREATE TABLE IF NOT EXISTS calls (
    id       INTEGER PRIMARY KEY,
    service  TEXT NOT NULL,
    action   TEXT NOT NULL,
    key      TEXT,
    outcome  TEXT NOT NULL,
    status   INTEGER,
    at       REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
    service      TEXT NOT NULL,
    key          TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('in_progress', 'done')),
    response     TEXT,
    locked_until REAL,
    created_at   REAL NOT NULL,
    PRIMARY KEY (service, key)
);
CREATE TABLE IF NOT EXISTS script (
    id          INTEGER PRIMARY KEY,
    service     TEXT NOT NULL,
    behaviour   TEXT NOT NULL,
    retry_after REAL,
    delay       REAL
);
CREATE TABLE IF NOT EXISTS marks (
    key    TEXT PRIMARY KEY,
    state  TEXT NOT NULL,
    at     REAL NOT NULL
);

-- get_meta --
-- Read one metadata value.
SELECT value FROM world_meta WHERE name = :name

-- set_meta --
-- Write one metadata value.
INSERT INTO world_meta (name, value) VALUES (:name, :value)
ON CONFLICT (name) DO UPDATE SET value = excluded.value

-- insert_effect --
-- Record one effect the world performed.
INSERT INTO effects (service, action, key, payload, fingerprint, response, at)
VALUES (:service, :action, :key, :payload, :fingerprint, '{}', :now)
RETURNING id

-- set_effect_response --
-- Store the reply sent for an effect.
UPDATE effects SET response = :response WHERE id = :id

-- effects --
-- Effects, optionally of one service and/or one key, in the order they happened.
SELECT * FROM effects
 WHERE (:service IS NULL OR service = :service) AND (:key IS NULL OR key = :key)
 ORDER BY id

-- insert_call --
-- Log one call and how it ended.
INSERT INTO calls (service, action, key, outcome, status, at)
VALUES (:service, :action, :key, :outcome, :status, :now)

-- calls --
-- Calls, optionally of one service, in arrival order.
SELECT * FROM calls WHERE (:service IS NULL OR service = :service) ORDER BY id

-- idem_get --
-- The idempotency record of a key at a service.
SELECT * FROM idempotency WHERE service = :service AND key = :key

-- idem_reserve --
-- Hold a key while its request runs (a new key, or one whose holder gave up long ago).
INSERT INTO idempotency (service, key, fingerprint, state, locked_until, created_at)
VALUES (:service, :key, :fingerprint, 'in_progress', :locked_until, :now)
ON CONFLICT (service, key) DO UPDATE
   SET fingerprint = excluded.fingerprint, locked_until = excluded.locked_until
 WHERE idempotency.state = 'in_progress'

-- idem_finish --
-- Keep the reply of a finished request under its key.
UPDATE idempotency SET state = 'done', response = :response, locked_until = NULL
 WHERE service = :service AND key = :key

-- script_add --
-- Queue a behaviour for the next call to a service.
INSERT INTO script (service, behaviour, retry_after, delay)
VALUES (:service, :behaviour, :retry_after, :delay)

-- script_next --
-- The oldest queued behaviour of a service.
SELECT * FROM script WHERE service = :service ORDER BY id LIMIT 1

-- script_pop --
-- Use up one queued behaviour.
DELETE FROM script WHERE id = :id

-- mark_get --
-- The ledger's state for a key.
SELECT state FROM marks WHERE key = :key

-- mark_set --
-- Write the ledger's state for a key.
INSERT INTO marks (key, state, at) VALUES (:key, :state, :now)
ON CONFLICT (key) DO UPDATE SET state = excluded.state, at = excluded.at

-- idem_expire --
-- Forget a service's idempotency keys first used at or before :cutoff (as Stripe does after 24 h).
DELETE FROM idempotency WHERE service = :service AND created_at <= :cutoff
