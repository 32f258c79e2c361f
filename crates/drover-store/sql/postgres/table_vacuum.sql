-- The paced vacuum of one table ({table}: "schema"."table", quoted). Sent
-- alone over the simple protocol, outside any transaction (VACUUM cannot
-- run in one), as the connecting login. SKIP_LOCKED: when the table's lock
-- is held (another worker's vacuum, a DDL) it is skipped with a warning
-- rather than waited for. TRUNCATE false: returning the table's empty tail
-- to the system needs an exclusive lock on it, and in the soak that step
-- (210 to 41 MiB after a held snapshot) stalled claims for a 5 s window
-- (claim p99 97.8 ms); the freed pages stay in the table for reuse, and
-- autovacuum still returns the tail.
VACUUM (SKIP_LOCKED, TRUNCATE false) {table}
