-- schema --
-- Tables, indexes and history triggers of a labkit job database (version in labkit_meta).
CREATE TABLE IF NOT EXISTS labkit_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL,
    queue        TEXT NOT NULL,
    key          TEXT NOT NULL UNIQUE,
    fingerprint  TEXT NOT NULL,
    payload      TEXT NOT NULL,
    state        TEXT NOT NULL
                 CHECK (state IN ('pending', 'running', 'succeeded', 'retry_wait', 'dead',
                                  'cancelled')),
    attempt      INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    run_after    REAL NOT NULL,
    last_delay   REAL NOT NULL DEFAULT 0,
    lease_owner  TEXT,
    lease_until  REAL,
    lease_token  TEXT,
    last_error   TEXT,
    error_class  TEXT,
    dead_reason  TEXT,
    result       TEXT,
    redrives     INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL,
    CHECK ((state = 'running') = (lease_token IS NOT NULL))
);
-- Partial indexes cover only live rows, so a million finished jobs cost the claim nothing.
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (queue, run_after, id)
    WHERE state IN ('pending', 'retry_wait');
CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (queue, lease_until)
    WHERE state = 'running';
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (updated_at) WHERE state = 'dead';
CREATE TABLE IF NOT EXISTS attempts (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    attempt     INTEGER NOT NULL,
    worker      TEXT NOT NULL,
    lease_token TEXT NOT NULL,
    started_at  REAL NOT NULL,
    finished_at REAL,
    outcome     TEXT,
    error       TEXT,
    error_class TEXT
);
CREATE INDEX IF NOT EXISTS attempts_job ON attempts (job_id, attempt);
-- No separate index of open attempts: the triggers find a job's open attempt through
-- attempts_job (a job has a handful of attempts), and a second index would be written
-- twice per job, on claim and on finish (~20 us of a ~180 us round trip, bench/RESULTS.md).
DROP INDEX IF EXISTS attempts_open;
CREATE TABLE IF NOT EXISTS redrives (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    at          REAL NOT NULL,
    dead_reason TEXT,
    note        TEXT
);
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
    attempts    INTEGER NOT NULL,
    seconds     REAL NOT NULL,
    PRIMARY KEY (outcome, error_class, le)
);
-- The history is written by triggers so no code path can change a job and forget it.
-- A new lease opens an attempt.
CREATE TRIGGER IF NOT EXISTS attempt_opens
AFTER UPDATE OF lease_token ON jobs
WHEN NEW.state = 'running' AND NEW.lease_token IS NOT OLD.lease_token
BEGIN
    INSERT INTO attempts (job_id, attempt, worker, lease_token, started_at)
    VALUES (NEW.id, NEW.attempt, NEW.lease_owner, NEW.lease_token, NEW.updated_at);
END;
-- A lease taken from a dead worker (running to running) closes the attempt it left open.
-- Only then is an attempt open (leaving running always closes it, below), so a claim of
-- a pending job skips the search: ~2 us of a batched claim's ~10 per job (bench/NOTES.md).
-- Files made before this split keep the one trigger that did both; both are correct.
CREATE TRIGGER IF NOT EXISTS attempt_expires
AFTER UPDATE OF lease_token ON jobs
WHEN OLD.state = 'running' AND NEW.state = 'running'
     AND NEW.lease_token IS NOT OLD.lease_token
BEGIN
    UPDATE attempts SET finished_at = NEW.updated_at, outcome = 'lease_expired'
     WHERE job_id = NEW.id AND finished_at IS NULL AND lease_token IS NOT NEW.lease_token;
END;
-- Leaving running closes the attempt with the state it reached.
CREATE TRIGGER IF NOT EXISTS attempt_closes
AFTER UPDATE OF state ON jobs
WHEN OLD.state = 'running' AND NEW.state <> 'running'
BEGIN
    UPDATE attempts
       SET finished_at = NEW.updated_at,
           outcome = CASE WHEN OLD.lease_until <= NEW.updated_at AND NEW.state = 'dead'
                               AND NEW.error_class = 'LeaseExpired'
                          THEN 'lease_expired' ELSE NEW.state END,
           error = CASE WHEN NEW.state = 'succeeded' THEN NULL ELSE NEW.last_error END,
           error_class = CASE WHEN NEW.state = 'succeeded' THEN NULL ELSE NEW.error_class END
     WHERE job_id = NEW.id AND finished_at IS NULL;
END;

-- jobs_table_sql --
-- How the jobs table was made: a table from before version 3 lacks the state 'cancelled'.
SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'jobs'

-- insert_jobs --
-- Accept a batch of jobs in one statement; :rows is a JSON list of [kind, queue, key, fingerprint, payload text, max_attempts, run_after].
-- Returns the id and key of each job it inserted; a key that exists (before, or earlier in the batch) inserts nothing.
INSERT INTO jobs (kind, queue, key, fingerprint, payload, state, max_attempts, run_after,
                  created_at, updated_at)
SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, 'pending',
       j.value ->> 5, j.value ->> 6, :now, :now
  FROM json_each(:rows) AS j
 WHERE true  -- SQLite's parser needs a WHERE between SELECT ... FROM and ON CONFLICT
ON CONFLICT (key) DO NOTHING
RETURNING id, key

-- jobs_by_keys --
-- The jobs with the keys of a JSON list (a batch's keys that were already taken).
SELECT * FROM jobs WHERE key IN (SELECT value FROM json_each(:keys))

-- bury_exhausted --
-- Send expired leases on their last attempt to dead: a job that kills its worker every time stops here.
UPDATE jobs
   SET state = 'dead', error_class = 'LeaseExpired',
       dead_reason = 'lease expired on the last attempt (' || attempt || ' of ' || max_attempts
                     || '): the worker died or hung every time',
       last_error = 'LeaseExpired: worker ' || lease_owner || ' never finished attempt ' || attempt,
       lease_token = NULL, lease_until = NULL, updated_at = :now
 WHERE state = 'running' AND lease_until <= :now AND attempt >= max_attempts
   AND queue IN (SELECT value FROM json_each(:queues))

-- claim --
-- Lease up to :limit ready jobs (pending or retry_wait due, or running with an expired lease) in one statement.
-- Each branch is cut to :limit before the merge: without the inner LIMITs SQLite sorts every ready job on every claim.
UPDATE jobs
{{ lease_claimed }}
 WHERE id IN (
       SELECT id FROM (
           SELECT * FROM (
               SELECT id, run_after AS due FROM jobs
                WHERE state IN ('pending', 'retry_wait') AND run_after <= :now
                  AND queue IN (SELECT value FROM json_each(:queues))
                ORDER BY run_after, id
                LIMIT :limit)
           UNION ALL
           SELECT * FROM (
               SELECT id, lease_until AS due FROM jobs
                WHERE state = 'running' AND lease_until <= :now AND attempt < max_attempts
                  AND queue IN (SELECT value FROM json_each(:queues))
                ORDER BY lease_until, id
                LIMIT :limit)
       )
       ORDER BY due, id
       LIMIT :limit)
RETURNING *

-- claim_one_queue --
-- The claim for a single :queue: the jobs_ready index then yields rows already in (run_after, id) order and the scan stops after :limit.
UPDATE jobs
{{ lease_claimed }}
 WHERE id IN (
       SELECT id FROM (
           SELECT * FROM (
               SELECT id, run_after AS due FROM jobs
                WHERE state IN ('pending', 'retry_wait') AND run_after <= :now
                  AND queue = :queue
                ORDER BY run_after, id
                LIMIT :limit)
           UNION ALL
           SELECT * FROM (
               SELECT id, lease_until AS due FROM jobs
                WHERE state = 'running' AND lease_until <= :now AND attempt < max_attempts
                  AND queue = :queue
                ORDER BY lease_until, id
                LIMIT :limit)
       )
       ORDER BY due, id
       LIMIT :limit)
RETURNING *

-- complete_batch --
-- Finish a batch in one statement, each job only for the holder of its token (the fence of complete, per row).
-- :rows is a JSON list of [id, token, result JSON text]; returns only the ids that finished: the caller has the rest.
UPDATE jobs
   SET state = 'succeeded', result = b.value ->> 2, lease_token = NULL, lease_until = NULL,
       updated_at = :now
  FROM json_each(:rows) AS b
 WHERE jobs.id = b.value ->> 0 AND jobs.state = 'running' AND jobs.lease_token = b.value ->> 1
RETURNING jobs.id

-- dead_matching --
-- Dead jobs matching optional filters, oldest first.
SELECT * FROM jobs
 WHERE state = 'dead'
   AND (:kind IS NULL OR kind = :kind)
   AND (:queue IS NULL OR queue = :queue)
   AND (:error_class IS NULL OR error_class = :error_class)
 ORDER BY updated_at, id
 LIMIT :limit

-- jobs_list --
-- Jobs, optionally of one state, by id.
SELECT * FROM jobs WHERE (:state IS NULL OR state = :state) ORDER BY id LIMIT :limit

-- prune_finished_history --
-- Delete the attempts and redrives of succeeded jobs last updated at or before :cutoff.
DELETE FROM attempts WHERE job_id IN
       (SELECT id FROM jobs WHERE state = 'succeeded' AND updated_at <= :cutoff);
DELETE FROM redrives WHERE job_id IN
       (SELECT id FROM jobs WHERE state = 'succeeded' AND updated_at <= :cutoff)

-- next_due --
-- When the next job of :queues becomes claimable: its earliest due wait or lease expiry (NULL if none will).
SELECT min(due) AS due FROM (
    SELECT min(run_after) AS due FROM jobs
     WHERE state IN ('pending', 'retry_wait') AND queue IN (SELECT value FROM json_each(:queues))
    UNION ALL
    SELECT min(lease_until) FROM jobs
     WHERE state = 'running' AND queue IN (SELECT value FROM json_each(:queues)))

-- dead_by_reason --
-- Dead jobs (optionally of one :kind) whose reason starts with one of :prefixes (JSON list), oldest first, after the row (:after_at, :after_id): one page of a walk that never holds the whole dead-letter queue.
SELECT * FROM jobs
 WHERE state = 'dead'
   AND (:kind IS NULL OR kind = :kind)
   AND EXISTS (SELECT 1 FROM json_each(:prefixes) AS p
                WHERE substr(jobs.dead_reason, 1, length(p.value)) = p.value)
   AND (updated_at, id) > (:after_at, :after_id)
 ORDER BY updated_at, id
 LIMIT :limit

-- count_dead_by_reason --
-- How many dead jobs (optionally of one :kind) have a reason that starts (:matching true) or does not start with one of :prefixes.
SELECT count(*) AS n FROM jobs
 WHERE state = 'dead'
   AND (:kind IS NULL OR kind = :kind)
   AND EXISTS (SELECT 1 FROM json_each(:prefixes) AS p
                WHERE substr(jobs.dead_reason, 1, length(p.value)) = p.value) = :matching
