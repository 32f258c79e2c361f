-- Whether batches_purge.sql has anything to delete (?1 the cutoff, in
-- microseconds), read without the write lock.
SELECT 1 FROM batches b
WHERE b.fired = 1 AND b.created_at < ?1
  AND NOT EXISTS (SELECT 1 FROM batch_members m
                  WHERE m.tenant_id = b.tenant_id AND m.batch_id = b.id)
  AND NOT EXISTS (SELECT 1 FROM items i
                  WHERE i.id = b.callback_id AND i.status IN ('pending', 'claimed'))
LIMIT 1
