-- exercise_schema --
-- The small jobs table exercises 3, 6, 12 and 13 work on (a trimmed copy of the store's).
CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY,
    key          TEXT NOT NULL UNIQUE,
    kind         TEXT NOT NULL DEFAULT 'email',
    queue        TEXT NOT NULL DEFAULT 'default',
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
INSERT INTO jobs (key, kind, queue, state, attempt, max_attempts, run_after, lease_owner,
                  lease_until, lease_token, last_error, dead_reason, updated_at)
VALUES (:key, :kind, :queue, :state, :attempt, :max_attempts, :run_after, :lease_owner,
        :lease_until, :lease_token, :last_error, :dead_reason, :updated_at)
RETURNING id

-- all_jobs --
-- Every job of the exercise table, by id.
SELECT * FROM jobs ORDER BY id

-- outbox_schema --
-- Exercise 11, the business database: orders and the outbox written with them.
CREATE TABLE IF NOT EXISTS orders (
    id        INTEGER PRIMARY KEY,
    customer  TEXT NOT NULL,
    total     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    id          INTEGER PRIMARY KEY,
    message_id  TEXT NOT NULL UNIQUE,
    topic       TEXT NOT NULL,
    body        TEXT NOT NULL,
    sent_at     REAL
);

-- consumer_schema --
-- Exercise 11, the consumer's own database: the ids it has applied and its effect (emails).
CREATE TABLE IF NOT EXISTS processed_messages (
    message_id  TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS emails (
    id          INTEGER PRIMARY KEY,
    order_id    INTEGER NOT NULL,
    customer    TEXT NOT NULL
);

-- all_orders --
-- Every order of exercise 11's business database, by id.
SELECT * FROM orders ORDER BY id

-- all_outbox --
-- Every outbox row of exercise 11's business database, by id.
SELECT * FROM outbox ORDER BY id

-- all_emails --
-- Every email exercise 11's consumer sent, by id.
SELECT * FROM emails ORDER BY id

-- steps_schema --
-- Exercise 14, a multi-step job's own database: each order's job and one checkpoint per finished step.
CREATE TABLE IF NOT EXISTS step_jobs (
    order_id        INTEGER PRIMARY KEY,
    policy_version  INTEGER NOT NULL,
    state           TEXT NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'failed'))
);
CREATE TABLE IF NOT EXISTS job_steps (
    order_id  INTEGER NOT NULL,
    step      TEXT NOT NULL,
    result    TEXT,
    PRIMARY KEY (order_id, step)
);

-- all_step_jobs --
-- Every job of exercise 14's database, by order id.
SELECT * FROM step_jobs ORDER BY order_id

-- all_job_steps --
-- Every checkpoint of exercise 14's database, by order id, in the order they were written.
SELECT * FROM job_steps ORDER BY order_id, rowid
