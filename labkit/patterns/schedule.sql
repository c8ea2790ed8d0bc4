-- last_slot --
-- The latest slot key a schedule has in the job store (keys sort by fire time), via the key index.
SELECT max(key) AS key FROM jobs WHERE key >= :prefix AND key < :prefix_end
