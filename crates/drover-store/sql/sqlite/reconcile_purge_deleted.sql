-- Purges tombstones of one reconciler across tenants past retention:
-- deleted by the source, last written before the cut-off, not changed
-- locally since, nothing parked. At most ?3 rows a call.
-- ?1 reconciler, ?2 cut-off (microseconds), ?3 limit.
DELETE FROM sync_records
WHERE rowid IN (
    SELECT rowid FROM sync_records
    WHERE reconciler = ?1 AND deleted = 1 AND dirty = 0 AND review IS NULL AND updated_at < ?2
    LIMIT ?3
)
