-- Deletes one batch of final items last updated before ?1 (system operation).
-- ?1 before, ?2 batch size.
DELETE FROM items WHERE rowid IN (
    SELECT rowid FROM items
    WHERE status IN ('done', 'failed', 'cancelled') AND updated_at < ?1
    LIMIT ?2
)
