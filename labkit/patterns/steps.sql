-- steps_schema --
-- The checkpoints of multi-step jobs, in the job's own database: one row per job, one per finished step.
CREATE TABLE IF NOT EXISTS step_jobs (
    job_key        TEXT PRIMARY KEY,
    policy_version TEXT NOT NULL,
    started_at     REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS job_steps (
    job_key        TEXT NOT NULL,
    step           TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('done', 'compensated')),
    result         TEXT NOT NULL,
    policy_version TEXT NOT NULL,
    finished_at    REAL NOT NULL,
    compensated_at REAL,
    PRIMARY KEY (job_key, step)
)

-- job_start --
-- Record the policy version a job starts under; a job that already started keeps its own.
INSERT INTO step_jobs (job_key, policy_version, started_at)
VALUES (:job_key, :policy_version, :now)
ON CONFLICT (job_key) DO NOTHING

-- job_version --
-- The policy version a job started under, or nothing if it never started.
SELECT policy_version FROM step_jobs WHERE job_key = :job_key

-- step_get --
-- One step's checkpoint.
SELECT * FROM job_steps WHERE job_key = :job_key AND step = :step

-- step_done --
-- Checkpoint a finished step with its result (numbered in the order steps finish).
INSERT INTO job_steps (job_key, step, seq, state, result, policy_version, finished_at)
VALUES (
    :job_key, :step,
    (SELECT coalesce(max(seq), 0) + 1 FROM job_steps WHERE job_key = :job_key),
    'done', :result, :policy_version, :now
)

-- step_compensated --
-- Checkpoint a step's undo.
UPDATE job_steps SET state = 'compensated', compensated_at = :now
 WHERE job_key = :job_key AND step = :step AND state = 'done'

-- steps_of_job --
-- A job's checkpoints in the order its steps finished.
SELECT * FROM job_steps WHERE job_key = :job_key ORDER BY seq

-- steps_all --
-- Every checkpoint, job by job, in the order the steps finished.
SELECT * FROM job_steps ORDER BY job_key, seq
