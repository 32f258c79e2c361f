-- The records of a batch's keys (inside the batch's write transaction, so
-- nothing moves them meanwhile). ?1 tenant, ?2 reconciler, ?3 keys as a
-- JSON array.
SELECT * FROM sync_records
WHERE tenant_id = ?1 AND reconciler = ?2 AND key IN (SELECT value FROM json_each(?3))
ORDER BY key
