-- The sweeper's session-level advisory lock, keyed per schema under a fixed
-- class so it cannot collide with other single-key advisory locks.
SELECT pg_try_advisory_lock(1684173933, hashtext($1))
