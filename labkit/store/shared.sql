-- Fragments the statements of both engines share, pulled in with {{ name }}.
-- Each is written once so that SQLite and PostgreSQL, and the store and its queues,
-- can never disagree about it.

-- lease_claimed --
-- The SET list of every claim: running, one more attempt, this worker's lease and a fresh token.
   SET state = 'running',
       attempt = jobs.attempt + 1,
       lease_owner = :worker,
       lease_until = :now + :lease_s,
       -- <job id>.<claim number>: unique for every claim of a job, even after a snooze or
       -- a redrive set attempt back, so an old holder's token can never match again.
       lease_token = jobs.id || '.' || (1 + (SELECT count(*) FROM attempts a WHERE a.job_id = jobs.id)),
       updated_at = :now
