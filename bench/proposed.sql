-- claim --
-- Lease up to :limit ready jobs; each branch is cut to :limit in index order before the merge, so a claim reads O(limit) rows, not every ready job.
UPDATE jobs
   SET state = 'running',
       attempt = attempt + 1,
       lease_owner = :worker,
       lease_until = :now + :lease_s,
       -- <job id>.<claim number>: unique for every claim of a job, even after a snooze or
       -- a redrive set attempt back, so an old holder's token can never match again.
       lease_token = id || '.' || (1 + (SELECT count(*) FROM attempts a WHERE a.job_id = jobs.id)),
       updated_at = :now
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
