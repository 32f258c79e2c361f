-- Whether any final item was last updated before ?1: the read a purge makes
-- first, on a reader, so a pass with nothing to purge takes no write lock.
SELECT 1 FROM items
WHERE status IN ('done', 'failed', 'cancelled') AND updated_at < ?1
LIMIT 1
