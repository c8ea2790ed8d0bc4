-- exercise_schema --
-- The small jobs table exercises 3 and 6 work on (a trimmed copy of the store's).
CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY,
    key          TEXT NOT NULL UNIQUE,
    kind         TEXT NOT NULL DEFAULT 'email',
    state        TEXT NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'running', 'retry_wait', 'succeeded', 'dead')),
    attempt      INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 3,
    run_after    REAL NOT NULL DEFAULT 0,
    lease_owner  TEXT,
    lease_until  REAL,
    lease_token  TEXT,
    last_error   TEXT,
    dead_reason  TEXT,
    redrives     INTEGER NOT NULL DEFAULT 0,
    updated_at   REAL NOT NULL DEFAULT 0
);

-- add_job --
-- Put one job into the exercise table in any state (checks build their scenes with it).
INSERT INTO jobs (key, kind, state, attempt, max_attempts, run_after, lease_owner,
                  lease_until, lease_token, last_error, dead_reason, updated_at)
VALUES (:key, :kind, :state, :attempt, :max_attempts, :run_after, :lease_owner,
        :lease_until, :lease_token, :last_error, :dead_reason, :updated_at)
RETURNING id

-- all_jobs --
-- Every job of the exercise table, by id.
SELECT * FROM jobs ORDER BY id
