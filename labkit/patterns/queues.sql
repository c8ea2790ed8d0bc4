-- active_queues --
-- Queues with a given prefix that hold live jobs (pending, retry_wait or running).
SELECT DISTINCT queue FROM jobs
 WHERE queue >= :prefix AND queue < :prefix_end
   AND state IN ('pending', 'retry_wait', 'running')
 ORDER BY queue

-- running_in_queue --
-- Jobs of one queue running under a live lease.
SELECT count(*) FROM jobs WHERE queue = :queue AND state = 'running' AND lease_until > :now

-- claim_capped --
-- Lease up to :limit ready jobs, least-busy queue first, never more than :cap running per queue.
UPDATE jobs
{{ lease_claimed }}
 WHERE id IN (
       SELECT id FROM (
           SELECT c.id, c.due,
                  -- this candidate's rank in its queue, plus the queue's live running jobs
                  row_number() OVER (PARTITION BY c.queue ORDER BY c.due, c.id)
                  + (SELECT count(*) FROM jobs r
                      WHERE r.queue = c.queue AND r.state = 'running'
                        AND r.lease_until > :now) AS would_run
             FROM (
                 SELECT id, queue, run_after AS due FROM jobs
                  WHERE state IN ('pending', 'retry_wait') AND run_after <= :now
                    AND queue IN (SELECT value FROM json_each(:queues))
                 UNION ALL
                 SELECT id, queue, lease_until AS due FROM jobs
                  WHERE state = 'running' AND lease_until <= :now AND attempt < max_attempts
                    AND queue IN (SELECT value FROM json_each(:queues))
             ) AS c
       )
        WHERE would_run <= :cap
        -- the least busy queues first, so accounts take turns instead of going by age alone
        ORDER BY would_run, due, id
        LIMIT :limit)
RETURNING *

-- claim_serial --
-- Lease the head (oldest live job) of each queue when it is ready: one running job per queue, in order.
UPDATE jobs
{{ lease_claimed }}
 WHERE id IN (
       SELECT h.id FROM jobs h
        WHERE h.id IN (
              -- a running or retry_wait head blocks every later job of its queue
              SELECT min(id) FROM jobs
               WHERE state IN ('pending', 'retry_wait', 'running')
                 AND queue IN (SELECT value FROM json_each(:queues))
               GROUP BY queue)
          AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
               OR (h.state = 'running' AND h.lease_until <= :now
                   AND h.attempt < h.max_attempts))
        ORDER BY CASE WHEN h.state = 'running' THEN h.lease_until ELSE h.run_after END, h.id
        LIMIT :limit)
RETURNING *
