-- schema --
-- Who asked for each job accepted over HTTP, and with which Idempotency-Key.
CREATE TABLE IF NOT EXISTS http_requests (
    job_id          INTEGER PRIMARY KEY REFERENCES jobs (id),
    owner           TEXT NOT NULL,
    idempotency_key TEXT,
    accepted_at     REAL NOT NULL,
    request_id      TEXT,
    UNIQUE (owner, idempotency_key)
);

-- remember_request --
-- Record the caller of a job in the transaction that accepted it (a retry finds it already there).
INSERT INTO http_requests (job_id, owner, idempotency_key, accepted_at, request_id)
VALUES (:job_id, :owner, :idempotency_key, :now, :request_id)
ON CONFLICT (job_id) DO NOTHING

-- owner_of --
-- The caller who created a job over HTTP (no row: the job did not come through HTTP).
SELECT owner FROM http_requests WHERE job_id = :job_id

-- cancel --
-- Take back a job no worker has: it becomes cancelled, a final state that is not a dead
-- letter (the operators' dead-letter list and a redrive never see it).
UPDATE jobs
   SET state = 'cancelled', updated_at = :now
 WHERE id = :job_id AND state IN ('pending', 'retry_wait')
RETURNING *

-- add_request_id --
-- A database made before request ids gains the column (its older rows have none).
ALTER TABLE http_requests ADD COLUMN request_id TEXT

-- request_of --
-- The id of the request that created a job (a replay finds the first request's).
SELECT request_id FROM http_requests WHERE job_id = :job_id
