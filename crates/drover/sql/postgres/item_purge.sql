-- One bounded batch of final items last updated before $1, at most $2.
-- System role. SKIP LOCKED: a concurrent purge takes other rows.
DELETE FROM items
WHERE id IN (
    SELECT id
    FROM items
    WHERE status IN ('done', 'failed', 'cancelled') AND updated_at < $1
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
