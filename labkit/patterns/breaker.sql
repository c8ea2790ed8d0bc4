-- schema --
-- The breakers table (one row per protected dependency) and its transition history.
CREATE TABLE IF NOT EXISTS breakers (
    name       TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    failures   INTEGER NOT NULL DEFAULT 0,
    trials     INTEGER NOT NULL DEFAULT 0,
    opened_at  REAL,
    retry_at   REAL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS breaker_events (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    at         REAL NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    reason     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS breaker_events_name ON breaker_events (name, id);

-- ensure --
-- Create a breaker row, closed, unless it exists already.
INSERT INTO breakers (name, state, updated_at) VALUES (:name, 'closed', :now)
ON CONFLICT (name) DO NOTHING

-- get --
-- One breaker's row.
SELECT name, state, failures, trials, opened_at, retry_at, updated_at
  FROM breakers WHERE name = :name

-- put --
-- Write a breaker's new state and counters.
UPDATE breakers
   SET state = :state, failures = :failures, trials = :trials, opened_at = :opened_at,
       retry_at = :retry_at, updated_at = :now
 WHERE name = :name

-- record_event --
-- Keep a trace of each transition, whichever process made it.
INSERT INTO breaker_events (name, at, from_state, to_state, reason)
VALUES (:name, :now, :from_state, :to_state, :reason)

-- events --
-- One breaker's transitions, oldest first.
SELECT name, at, from_state, to_state, reason FROM breaker_events
 WHERE name = :name ORDER BY id
