-- try_lock --
-- Take the session-level advisory lock for a name without waiting; true if this session got it.
SELECT pg_try_advisory_lock(hashtext(:name)) AS got

-- unlock --
-- Give the advisory lock back before closing (closing the session gives it back too).
SELECT pg_advisory_unlock(hashtext(:name)) AS released

-- holder --
-- The session holding the advisory lock of a name: its server pid, application name and since when it is connected.
SELECT a.pid, a.application_name, a.client_addr::text AS client_addr,
       extract(epoch FROM a.backend_start) AS backend_start
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted
   -- a bigint key shows as (classid, objid) = its high and low 32 bits, objsubid 1
   AND l.objsubid = 1
   AND l.objid::text::bigint = (hashtext(:name)::bigint & 4294967295)
   AND l.classid::text::bigint = ((hashtext(:name)::bigint >> 32) & 4294967295)
 LIMIT 1
