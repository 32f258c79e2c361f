-- Gives up the sweeper's advisory lock (see sweep_try_lock.sql).
SELECT pg_advisory_unlock(1684173933, hashtext($1))
