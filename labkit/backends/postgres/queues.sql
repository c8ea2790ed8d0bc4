-- active_queues --
-- Queues with a given prefix that hold live jobs (pending, retry_wait or running).
SELECT DISTINCT queue FROM jobs
 WHERE starts_with(queue, :prefix)
   AND state IN ('pending', 'retry_wait', 'running')
 ORDER BY queue

-- running_in_queue --
-- Jobs of one queue running under a live lease.
SELECT count(*) AS n FROM jobs WHERE queue = :queue AND state = 'running' AND lease_until > :now

-- claim_capped --
-- Lease up to :limit ready jobs, least-busy queue first, never more than :cap running per queue.
-- Run after lock_queues, in the same transaction: that statement's wait ends before
-- this one takes its snapshot, so the running counts include every earlier claim.
-- Only a queue's first :cap rows in (due, id) order can rank within the cap, so per queue
-- and per branch an index scan stops there (LATERAL ... LIMIT :cap) instead of reading a
-- flooded account's whole backlog on every claim.
WITH q AS (
    SELECT DISTINCT name FROM unnest(CAST(:queues AS text[])) AS u (name)
), candidates AS (
    SELECT c.id, c.due,
           -- this candidate's rank in its queue, plus the queue's live running jobs
           row_number() OVER (PARTITION BY c.queue ORDER BY c.due, c.id)
           + (SELECT count(*) FROM jobs r
               WHERE r.queue = c.queue AND r.state = 'running'
                 AND r.lease_until > :now) AS would_run
      FROM (
          SELECT q.name AS queue, r.id, r.due
            FROM q, LATERAL (SELECT id, run_after AS due FROM jobs
                              WHERE state IN ('pending', 'retry_wait') AND queue = q.name
                                AND run_after <= :now
                              ORDER BY run_after, id
                              LIMIT :cap) AS r
          UNION ALL
          SELECT q.name AS queue, r.id, r.due
            FROM q, LATERAL (SELECT id, lease_until AS due FROM jobs
                              WHERE state = 'running' AND queue = q.name
                                AND lease_until <= :now AND attempt < max_attempts
                              ORDER BY lease_until, id
                              LIMIT :cap) AS r
      ) AS c
), chosen AS (
    SELECT c.id FROM candidates c,
           -- The candidate's row, locked. A subquery that locks is never merged into a
           -- join, so each candidate is one primary-key lookup (a join of candidates and
           -- jobs becomes a hash over every row of jobs once the table is analyzed).
           -- Candidates locked but not chosen (under :cap per queue) are released at commit.
           LATERAL (SELECT j.id FROM jobs j
                     WHERE j.id = c.id
                       -- repeated on the locked row: a row another claimer took in the
                       -- meantime is re-checked on its newest version and dropped, not
                       -- claimed a second time
                       AND ((j.state IN ('pending', 'retry_wait') AND j.run_after <= :now)
                            OR (j.state = 'running' AND j.lease_until <= :now
                                AND j.attempt < j.max_attempts))
                       FOR UPDATE SKIP LOCKED) AS locked
     WHERE c.would_run <= :cap
     -- the least busy queues first, so accounts take turns instead of going by age alone
     ORDER BY c.would_run, c.due, c.id
     LIMIT :limit
)
UPDATE jobs
{{ lease_claimed }}
-- id = ANY(ARRAY(...)): read the chosen ids through the primary key whatever the planner
-- statistics say (an IN (subquery) becomes a hash join over every row of jobs once analyzed).
 WHERE id = ANY(ARRAY(SELECT id FROM chosen))
RETURNING *

-- claim_serial --
-- Lease the head (oldest live job) of each queue when it is ready: one running job per queue, in order.
-- Run after lock_queues: a head another claimer just took is seen as running, not skipped
-- past to the next job of the same queue.
WITH live AS (
    -- The live rows are in two partial indexes (ready, leased): one condition over all
    -- three states matches neither and reads every row of jobs, so each is asked apart.
    SELECT queue, min(id) AS id FROM jobs
     WHERE state IN ('pending', 'retry_wait') AND queue = ANY(:queues)
     GROUP BY queue
    UNION ALL
    SELECT queue, min(id) AS id FROM jobs
     WHERE state = 'running' AND queue = ANY(:queues)
     GROUP BY queue
), heads AS (
    -- a running or retry_wait head blocks every later job of its queue
    SELECT min(id) AS id FROM live GROUP BY queue
), chosen AS (
    SELECT h.id FROM jobs h
     WHERE h.id = ANY(ARRAY(SELECT id FROM heads))
       AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
            OR (h.state = 'running' AND h.lease_until <= :now
                AND h.attempt < h.max_attempts))
     ORDER BY CASE WHEN h.state = 'running' THEN h.lease_until ELSE h.run_after END, h.id
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
)
UPDATE jobs
{{ lease_claimed }}
-- id = ANY(ARRAY(...)): read the chosen ids through the primary key whatever the planner
-- statistics say (an IN (subquery) becomes a hash join over every row of jobs once analyzed).
 WHERE id = ANY(ARRAY(SELECT id FROM chosen))
RETURNING *

-- lock_queues --
-- Serialise claims that touch the same queues until the transaction ends (in name order, so two claimers cannot deadlock).
-- Without it, two claimers could each see a queue below its cap in their own snapshot and both add to it.
SELECT count(*) AS n FROM (
    SELECT pg_advisory_xact_lock(hashtext('labkit-queue:' || q))
      FROM (SELECT DISTINCT unnest(CAST(:queues AS text[])) AS q ORDER BY 1) AS qs
) AS taken
