-- Purges tombstones of one reconciler across tenants (system role) past
-- retention: deleted by the source, last written before the cut-off, not
-- changed locally since, nothing parked; at most $3 rows a call. The outer
-- conditions are checked again on a row a concurrent writer changed.
-- $1 reconciler, $2 cut-off, $3 limit.
DELETE FROM sync_records
WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM sync_records
        WHERE reconciler = $1 AND deleted AND NOT dirty AND review IS NULL AND updated_at < $2
        LIMIT $3))
  AND reconciler = $1 AND deleted AND NOT dirty AND review IS NULL AND updated_at < $2
