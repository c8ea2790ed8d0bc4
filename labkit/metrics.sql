-- stuck_running --
-- Running jobs whose lease has expired, or whose attempt started :older_than_s ago or more.
SELECT j.id, j.kind, j.key, j.attempt, j.lease_owner AS worker, a.started_at,
       :now - a.started_at AS running_s, j.lease_until <= :now AS lease_expired
  FROM jobs j
  JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempt AND a.finished_at IS NULL
 WHERE j.state = 'running'
   AND (j.lease_until <= :now OR a.started_at <= :now - :older_than_s)
 ORDER BY a.started_at, j.id

-- retry_storms --
-- Kinds with at least :min_failures failed attempts that finished in the last :window_s seconds.
SELECT j.kind, count(*) AS failed_attempts, count(DISTINCT a.job_id) AS jobs,
       max(a.attempt) AS highest_attempt
  FROM attempts a JOIN jobs j ON j.id = a.job_id
 WHERE a.finished_at > :now - :window_s
   AND a.outcome IN ('retry_wait', 'dead', 'lease_expired')
 GROUP BY j.kind
HAVING count(*) >= :min_failures
 ORDER BY failed_attempts DESC, j.kind

-- oldest_pending --
-- Jobs ready to run and not yet claimed, longest waiting first.
SELECT id, kind, key, state, attempt, :now - run_after AS waiting_s
  FROM jobs
 WHERE state IN ('pending', 'retry_wait') AND run_after <= :now
 ORDER BY run_after, id
 LIMIT :limit

-- dead_by_reason --
-- Dead jobs grouped by error class and reason, most frequent first.
SELECT coalesce(error_class, '-') AS error_class, dead_reason AS reason, count(*) AS jobs,
       :now - min(updated_at) AS oldest_s
  FROM jobs
 WHERE state = 'dead'
 GROUP BY coalesce(error_class, '-'), dead_reason
 ORDER BY jobs DESC, error_class, reason

-- jobs_by_state --
-- How many jobs are in each state.
SELECT state, count(*) AS n FROM jobs GROUP BY state

-- oldest_ready_age --
-- Seconds the longest-waiting ready job has waited (NULL when none waits).
SELECT :now - min(run_after) AS age_s
  FROM jobs WHERE state IN ('pending', 'retry_wait') AND run_after <= :now

-- dead_by_class --
-- Dead jobs per error class.
SELECT coalesce(error_class, '-') AS error_class, count(*) AS n
  FROM jobs WHERE state = 'dead' GROUP BY coalesce(error_class, '-')

-- dead_classes_seen --
-- Every error class an attempt died of (dead, or buried after its last lease expired), in the attempts table or folded into pruned_attempts by prune_finished.
SELECT coalesce(error_class, '-') AS error_class FROM attempts
 WHERE outcome = 'dead' OR (outcome = 'lease_expired' AND error_class IS NOT NULL)
UNION
SELECT error_class FROM pruned_attempts
 WHERE outcome = 'dead' OR (outcome = 'lease_expired' AND error_class <> '-')

-- attempt_totals --
-- Finished attempts and their seconds by outcome and duration bucket: the attempts table plus what prune_finished folded into pruned_attempts, so no total ever falls.
SELECT outcome, le, sum(n) AS n, sum(seconds) AS seconds FROM (
    SELECT outcome, le, attempts AS n, seconds FROM pruned_attempts
    UNION ALL
    SELECT a.outcome, {{ duration_le }}, count(*), sum(a.finished_at - a.started_at)
      FROM attempts a WHERE a.outcome IS NOT NULL GROUP BY 1, 2)
 GROUP BY outcome, le
