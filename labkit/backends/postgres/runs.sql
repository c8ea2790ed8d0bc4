-- run_schemas --
-- The schemas whose names match a run pattern (a POSIX regular expression), in name order.
SELECT nspname AS name FROM pg_namespace WHERE nspname ~ :pattern ORDER BY nspname
