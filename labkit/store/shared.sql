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

-- duration_le --
-- The duration bucket of attempt a as text: the smallest bound of labkit.metrics.DURATION_BUCKETS at or above finished_at - started_at, '+Inf' past the last.
CASE WHEN a.finished_at - a.started_at <= 0.01 THEN '0.01'
     WHEN a.finished_at - a.started_at <= 0.05 THEN '0.05'
     WHEN a.finished_at - a.started_at <= 0.1 THEN '0.1'
     WHEN a.finished_at - a.started_at <= 0.5 THEN '0.5'
     WHEN a.finished_at - a.started_at <= 1 THEN '1'
     WHEN a.finished_at - a.started_at <= 5 THEN '5'
     WHEN a.finished_at - a.started_at <= 10 THEN '10'
     WHEN a.finished_at - a.started_at <= 30 THEN '30'
     WHEN a.finished_at - a.started_at <= 60 THEN '60'
     WHEN a.finished_at - a.started_at <= 300 THEN '300'
     WHEN a.finished_at - a.started_at <= 1800 THEN '1800'
     ELSE '+Inf' END
