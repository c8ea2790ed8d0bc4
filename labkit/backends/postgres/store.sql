-- schema --
-- Tables, checks, partial indexes and plpgsql history triggers of a labkit job schema (version in labkit_meta).
CREATE TABLE IF NOT EXISTS labkit_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind <> ''),
    queue        TEXT NOT NULL,
    key          TEXT NOT NULL UNIQUE,
    fingerprint  TEXT NOT NULL,
    payload      TEXT NOT NULL,
    state        TEXT NOT NULL,  -- its check, jobs_state_check, follows the table
    attempt      INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    run_after    DOUBLE PRECISION NOT NULL,
    last_delay   DOUBLE PRECISION NOT NULL DEFAULT 0,
    lease_owner  TEXT,
    lease_until  DOUBLE PRECISION,
    lease_token  TEXT,
    last_error   TEXT,
    error_class  TEXT,
    dead_reason  TEXT,
    result       TEXT,
    redrives     INTEGER NOT NULL DEFAULT 0 CHECK (redrives >= 0),
    created_at   DOUBLE PRECISION NOT NULL,
    updated_at   DOUBLE PRECISION NOT NULL,
    CHECK ((state = 'running') = (lease_token IS NOT NULL)),
    CHECK ((state = 'running') = (lease_until IS NOT NULL))
);
-- The states a job can be in (labkit.job.JobState), set apart from the table so that a
-- table made before a state was added (version 3 added 'cancelled') gets the new list.
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('pending', 'running', 'succeeded', 'retry_wait', 'dead', 'cancelled'));
-- Partial indexes cover only live rows, so a million finished jobs cost the claim nothing.
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (queue, run_after, id)
    WHERE state IN ('pending', 'retry_wait');
CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (queue, lease_until, id)
    WHERE state = 'running';
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (updated_at, id) WHERE state = 'dead';
CREATE TABLE IF NOT EXISTS attempts (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      BIGINT NOT NULL REFERENCES jobs (id),
    attempt     INTEGER NOT NULL,
    worker      TEXT NOT NULL,
    lease_token TEXT NOT NULL,
    started_at  DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    outcome     TEXT,
    error       TEXT,
    error_class TEXT
);
CREATE INDEX IF NOT EXISTS attempts_job ON attempts (job_id, attempt);
-- No separate index of open attempts (as on SQLite): the triggers find a job's open
-- attempt through attempts_job, and a second index is written twice per job.
DROP INDEX IF EXISTS attempts_open;
CREATE TABLE IF NOT EXISTS redrives (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      BIGINT NOT NULL REFERENCES jobs (id),
    at          DOUBLE PRECISION NOT NULL,
    dead_reason TEXT,
    note        TEXT
);
CREATE INDEX IF NOT EXISTS redrives_job ON redrives (job_id, at);
-- What prune_finished deletes from attempts is added here first, by outcome, error class
-- and duration bucket (le, as Prometheus writes it): the totals labkit.metrics reports
-- (attempts by outcome, their durations, the classes jobs died of) then never go down,
-- where a count of attempts would fall at every prune and read to Prometheus as a
-- restart. Cheaper than a running total written on every finish: the hot path pays
-- nothing, and the table keeps a few rows per outcome and class, not per job.
CREATE TABLE IF NOT EXISTS pruned_attempts (
    outcome     TEXT NOT NULL,
    error_class TEXT NOT NULL,  -- '-' for none
    le          TEXT NOT NULL,
    attempts    BIGINT NOT NULL,
    seconds     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (outcome, error_class, le)
);
-- The history is written by triggers so no code path can change a job and forget it.
-- A new lease opens an attempt, closing the one a dead worker left open.
-- SET search_path FROM CURRENT: the triggers find this schema's tables whatever search_path
-- the connection that fires them has (a caller's own, with complete(conn=...)).
CREATE OR REPLACE FUNCTION labkit_attempt_opens() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE attempts SET finished_at = NEW.updated_at, outcome = 'lease_expired'
     WHERE job_id = NEW.id AND finished_at IS NULL;
    INSERT INTO attempts (job_id, attempt, worker, lease_token, started_at)
    VALUES (NEW.id, NEW.attempt, NEW.lease_owner, NEW.lease_token, NEW.updated_at);
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER attempt_opens
AFTER UPDATE OF lease_token ON jobs
FOR EACH ROW
WHEN (NEW.state = 'running' AND NEW.lease_token IS DISTINCT FROM OLD.lease_token)
EXECUTE FUNCTION labkit_attempt_opens();
-- Leaving running closes the attempt with the state it reached.
CREATE OR REPLACE FUNCTION labkit_attempt_closes() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE attempts
       SET finished_at = NEW.updated_at,
           outcome = CASE WHEN OLD.lease_until <= NEW.updated_at AND NEW.state = 'dead'
                               AND NEW.error_class = 'LeaseExpired'
                          THEN 'lease_expired' ELSE NEW.state END,
           error = CASE WHEN NEW.state = 'succeeded' THEN NULL ELSE NEW.last_error END,
           error_class = CASE WHEN NEW.state = 'succeeded' THEN NULL ELSE NEW.error_class END
     WHERE job_id = NEW.id AND finished_at IS NULL;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER attempt_closes
AFTER UPDATE OF state ON jobs
FOR EACH ROW
WHEN (OLD.state = 'running' AND NEW.state <> 'running')
EXECUTE FUNCTION labkit_attempt_closes();

-- migration_lock --
-- Serialise schema creation between processes opening the same schema at once (CREATE ... IF NOT EXISTS races otherwise).
SELECT pg_advisory_xact_lock(hashtext(CAST(:schema AS text)))

-- create_schema --
-- Create the store's schema if missing; {schema} is filled by psycopg.sql.Identifier, never by string formatting.
CREATE SCHEMA IF NOT EXISTS {schema}

-- use_schema --
-- Point this session's unqualified names at the store's schema (a checked identifier).
SELECT set_config('search_path', :schema, false)

-- use_schema_locally --
-- The same for the rest of the caller's transaction only; returns the search_path to restore.
SELECT current_setting('search_path') AS previous, set_config('search_path', :schema, true)

-- restore_schema_locally --
-- Give the caller's transaction back the search_path it had.
SELECT set_config('search_path', :previous, true)

-- schema_exists --
-- Whether a schema of this name exists.
SELECT count(*) AS n FROM pg_namespace WHERE nspname = :schema

-- table_names --
-- The tables in the store's schema.
SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()

-- where_am_i --
-- The database and schema a connection writes to, to refuse a caller's connection elsewhere.
SELECT current_database() AS db, current_schema() AS schema,
       to_regclass('jobs') IS NOT NULL AS has_jobs

-- insert_jobs --
-- Accept a batch of jobs in one statement, one array per column; returns the id and key of each job it inserted.
-- A key that exists (before, or earlier in the batch) inserts nothing.
INSERT INTO jobs (kind, queue, key, fingerprint, payload, state, max_attempts, run_after,
                  created_at, updated_at)
SELECT j.kind, j.queue, j.key, j.fingerprint, j.payload, 'pending', j.max_attempts, j.run_after,
       :now, :now
  FROM unnest(CAST(:kinds AS text[]), CAST(:queues AS text[]), CAST(:keys AS text[]),
              CAST(:fingerprints AS text[]), CAST(:payloads AS text[]),
              CAST(:max_attempts AS integer[]), CAST(:run_afters AS double precision[]))
       WITH ORDINALITY AS j (kind, queue, key, fingerprint, payload, max_attempts, run_after, n)
 ORDER BY j.n
ON CONFLICT (key) DO NOTHING
RETURNING id, key

-- jobs_by_keys --
-- The jobs with the given keys (a batch's keys that were already taken).
SELECT * FROM jobs WHERE key = ANY(CAST(:keys AS text[]))

-- job_by_id_for_update --
-- The job with a given id, locked until the transaction ends (redrive reads, checks, then writes).
SELECT * FROM jobs WHERE id = :id FOR UPDATE

-- bury_exhausted --
-- Send expired leases on their last attempt to dead; SKIP LOCKED so two claimers never wait on each other here.
UPDATE jobs
   SET state = 'dead', error_class = 'LeaseExpired',
       dead_reason = 'lease expired on the last attempt (' || attempt || ' of ' || max_attempts
                     || '): the worker died or hung every time',
       last_error = 'LeaseExpired: worker ' || lease_owner || ' never finished attempt ' || attempt,
       lease_token = NULL, lease_until = NULL, updated_at = :now
 WHERE id IN (
       SELECT id FROM jobs
        WHERE state = 'running' AND lease_until <= :now AND attempt >= max_attempts
          AND queue = ANY(:queues)
          FOR UPDATE SKIP LOCKED)

-- claim --
-- Lease up to :limit ready jobs (due pending/retry_wait, or running with an expired lease) that no other claimer holds.
-- Per queue and per branch, an index scan in (due, id) order stops after :limit rows (LATERAL ... LIMIT):
-- one ORDER BY over both branches and every queue would sort all ready rows on every claim.
-- FOR UPDATE SKIP LOCKED: a concurrent claimer skips the rows this one is taking instead of waiting for them
-- or taking them too; the row lock re-checks the WHERE on the latest version of each row. Rows locked in a
-- branch but not picked (at most :limit per queue) are released at commit.
-- id = ANY(ARRAY(...)): the update then reads the picked ids through the primary key whatever the planner
-- statistics say (an IN (subquery) becomes a hash join over every row of jobs once the table is analyzed).
WITH ready AS (
    SELECT r.id, r.due
      FROM (SELECT DISTINCT name FROM unnest(CAST(:queues AS text[])) AS u (name)) AS q,
           LATERAL (SELECT id, run_after AS due FROM jobs
                     WHERE state IN ('pending', 'retry_wait') AND queue = q.name
                       AND run_after <= :now
                     ORDER BY run_after, id
                     LIMIT :limit
                       FOR UPDATE SKIP LOCKED) AS r
), expired AS (
    SELECT r.id, r.due
      FROM (SELECT DISTINCT name FROM unnest(CAST(:queues AS text[])) AS u (name)) AS q,
           LATERAL (SELECT id, lease_until AS due FROM jobs
                     WHERE state = 'running' AND queue = q.name
                       AND lease_until <= :now AND attempt < max_attempts
                     ORDER BY lease_until, id
                     LIMIT :limit
                       FOR UPDATE SKIP LOCKED) AS r
), picked AS (
    SELECT id FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired) AS c
     ORDER BY due, id
     LIMIT :limit
)
UPDATE jobs
{{ lease_claimed }}
 WHERE id = ANY(ARRAY(SELECT id FROM picked))
RETURNING *

-- complete_batch --
-- Finish a batch in one statement, each job only for the holder of its token (the fence of complete, per row).
-- Returns only the ids that finished: the caller has the rest of each job already.
UPDATE jobs
   SET state = 'succeeded', result = b.result, lease_token = NULL, lease_until = NULL,
       updated_at = :now
  FROM unnest(CAST(:ids AS bigint[]), CAST(:tokens AS text[]), CAST(:results AS text[]))
       AS b (id, token, result)
 WHERE jobs.id = b.id AND jobs.state = 'running' AND jobs.lease_token = b.token
RETURNING jobs.id

-- dead_matching --
-- Dead jobs matching optional filters, oldest first.
SELECT * FROM jobs
 WHERE state = 'dead'
   AND (CAST(:kind AS text) IS NULL OR kind = :kind)
   AND (CAST(:queue AS text) IS NULL OR queue = :queue)
   AND (CAST(:error_class AS text) IS NULL OR error_class = :error_class)
 ORDER BY updated_at, id
 LIMIT :limit

-- jobs_list --
-- Jobs, optionally of one state, by id.
SELECT * FROM jobs WHERE (CAST(:state AS text) IS NULL OR state = :state) ORDER BY id LIMIT :limit

-- prune_finished_history --
-- Delete the attempts and redrives of succeeded jobs last updated at or before :cutoff.
WITH gone AS (SELECT id FROM jobs WHERE state = 'succeeded' AND updated_at <= :cutoff),
     a AS (DELETE FROM attempts WHERE job_id IN (SELECT id FROM gone))
DELETE FROM redrives WHERE job_id IN (SELECT id FROM gone)

-- next_due --
-- When the next job of :queues becomes claimable: its earliest due wait or lease expiry (NULL if none will).
SELECT min(due) AS due FROM (
    SELECT min(run_after) AS due FROM jobs
     WHERE state IN ('pending', 'retry_wait') AND queue = ANY(:queues)
    UNION ALL
    SELECT min(lease_until) FROM jobs
     WHERE state = 'running' AND queue = ANY(:queues)) AS waiting

-- dead_by_reason --
-- Dead jobs (optionally of one :kind) whose reason starts with one of :prefixes, oldest first, after the row (:after_at, :after_id): one page of a walk that never holds the whole dead-letter queue.
SELECT * FROM jobs
 WHERE state = 'dead'
   AND (CAST(:kind AS text) IS NULL OR kind = :kind)
   AND EXISTS (SELECT 1 FROM unnest(CAST(:prefixes AS text[])) AS p (prefix)
                WHERE left(jobs.dead_reason, length(p.prefix)) = p.prefix)
   AND (updated_at, id) > (CAST(:after_at AS double precision), CAST(:after_id AS bigint))
 ORDER BY updated_at, id
 LIMIT :limit

-- count_dead_by_reason --
-- How many dead jobs (optionally of one :kind) have a reason that starts (:matching true) or does not start with one of :prefixes.
SELECT count(*) AS n FROM jobs
 WHERE state = 'dead'
   AND (CAST(:kind AS text) IS NULL OR kind = :kind)
   AND EXISTS (SELECT 1 FROM unnest(CAST(:prefixes AS text[])) AS p (prefix)
                WHERE left(jobs.dead_reason, length(p.prefix)) = p.prefix) = :matching

-- set_lock_timeout --
-- How long this session waits for a lock another connection holds before failing (LockNotAvailable), in milliseconds.
SELECT set_config('lock_timeout', :ms, false)

-- set_idle_in_transaction_timeout --
-- How long this session may sit inside an open transaction doing nothing before the server ends it, in milliseconds.
SELECT set_config('idle_in_transaction_session_timeout', :ms, false)

-- server_time --
-- The server's own clock, in epoch seconds: the one clock every worker's leases are judged by.
SELECT extract(epoch FROM clock_timestamp())::float8 AS now
