-- The paced vacuum of one table ({table}: "schema"."table", quoted). Sent
-- alone over the simple protocol, outside any transaction (VACUUM cannot
-- run in one), as the connecting login. SKIP_LOCKED: when the table's lock
-- is held (another worker's vacuum, a DDL) it is skipped with a warning
-- rather than waited for.
VACUUM (SKIP_LOCKED) {table}
