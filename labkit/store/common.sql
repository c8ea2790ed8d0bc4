-- The statements that read and write the same way on SQLite and PostgreSQL, written once.
-- Both engines load this file beside their own (store/sqlite.sql, backends/postgres/store.sql);
-- a name may live in one file only (queries.load_all refuses a duplicate).

-- get_meta --
-- Read one metadata value.
SELECT value FROM labkit_meta WHERE name = :name

-- set_meta --
-- Write one metadata value.
INSERT INTO labkit_meta (name, value) VALUES (:name, :value)
ON CONFLICT (name) DO UPDATE SET value = excluded.value

-- insert_job --
-- Accept a job unless its key exists; returns the new row, or nothing on a duplicate.
INSERT INTO jobs (kind, queue, key, fingerprint, payload, state, max_attempts, run_after,
                  created_at, updated_at)
VALUES (:kind, :queue, :key, :fingerprint, :payload, 'pending', :max_attempts, :run_after,
        :now, :now)
ON CONFLICT (key) DO NOTHING
RETURNING *

-- retry_state --
-- The previous backoff delay (decorrelated jitter grows from it) and when the deadline
-- window opened: at acceptance, or at the latest redrive, which grants a fresh window.
SELECT last_delay,
       coalesce((SELECT max(at) FROM redrives WHERE job_id = :id), created_at) AS window_start
  FROM jobs WHERE id = :id

-- job_by_key --
-- The job with a given key.
SELECT * FROM jobs WHERE key = :key

-- job_by_id --
-- The job with a given id.
SELECT * FROM jobs WHERE id = :id

-- heartbeat --
-- Extend a lease, only for the holder of the current token.
UPDATE jobs SET lease_until = :now + :lease_s, updated_at = :now
 WHERE id = :id AND state = 'running' AND lease_token = :token
RETURNING *

-- complete --
-- Finish a job, only for the holder of the current token; returns only what the caller lacks (the store rebuilds the Job).
UPDATE jobs
   SET state = 'succeeded', result = :result, lease_token = NULL, lease_until = NULL,
       updated_at = :now
 WHERE id = :id AND state = 'running' AND lease_token = :token
RETURNING id, updated_at

-- fail --
-- Record a failed attempt: to retry_wait (with run_after) or to dead, only for the token holder.
UPDATE jobs
   SET state = :state, run_after = :run_after, last_delay = :delay,
       last_error = :error, error_class = :error_class, dead_reason = :dead_reason,
       lease_token = NULL, lease_until = NULL, updated_at = :now
 WHERE id = :id AND state = 'running' AND lease_token = :token
RETURNING *

-- snooze --
-- Put a running job back to wait without spending its attempt (a dependency is down).
UPDATE jobs
   SET state = 'retry_wait', run_after = :run_after, attempt = attempt - 1,
       last_error = :error, error_class = :error_class,
       lease_token = NULL, lease_until = NULL, updated_at = :now
 WHERE id = :id AND state = 'running' AND lease_token = :token
RETURNING *

-- redrive --
-- Send one dead job back to pending with the same key and a fresh attempt budget.
UPDATE jobs
   SET state = 'pending', attempt = 0, run_after = :now, last_delay = 0,
       dead_reason = NULL, redrives = redrives + 1, updated_at = :now
 WHERE id = :id AND state = 'dead'
RETURNING *

-- record_redrive --
-- Keep a trace of each redrive.
INSERT INTO redrives (job_id, at, dead_reason, note) VALUES (:id, :now, :dead_reason, :note)

-- counts --
-- How many jobs are in each state.
SELECT state, count(*) AS n FROM jobs GROUP BY state

-- attempts --
-- One job's attempt history, oldest first.
SELECT job_id, attempt, worker, started_at, finished_at, outcome, error, error_class
  FROM attempts WHERE job_id = :id ORDER BY id

-- fold_pruned_attempts --
-- Add the finished attempts of the jobs prune_finished deletes (succeeded, last updated at or before :cutoff) to the kept totals, by outcome, error class and duration bucket.
INSERT INTO pruned_attempts (outcome, error_class, le, attempts, seconds)
SELECT a.outcome, coalesce(a.error_class, '-'), {{ duration_le }}, count(*),
       sum(a.finished_at - a.started_at)
  FROM attempts a JOIN jobs j ON j.id = a.job_id
 WHERE j.state = 'succeeded' AND j.updated_at <= :cutoff AND a.outcome IS NOT NULL
 GROUP BY 1, 2, 3
ON CONFLICT (outcome, error_class, le) DO UPDATE
   SET attempts = pruned_attempts.attempts + excluded.attempts,
       seconds = pruned_attempts.seconds + excluded.seconds

-- prune_finished --
-- Delete succeeded jobs last updated at or before :cutoff (their keys stop deduplicating).
DELETE FROM jobs WHERE state = 'succeeded' AND updated_at <= :cutoff
