-- At most $2 batches whose story is over, deleted (system role): the
-- callback decision taken (`fired`), created before the purge's cutoff $1,
-- no member stored any more (the item purge takes a member's row with
-- it), and no callback still to run (a pending or claimed callback keeps
-- its batch readable). A fired batch is sealed, so no member can join it
-- after this reads it empty. The members' counts go with the row; the
-- callback's payload carries them.
DELETE FROM batches
WHERE (tenant_id, id) IN (
    SELECT b.tenant_id, b.id FROM batches b
    WHERE b.fired AND b.created_at < $1
      AND NOT EXISTS (SELECT 1 FROM batch_members m
                      WHERE m.tenant_id = b.tenant_id AND m.batch_id = b.id)
      AND NOT EXISTS (SELECT 1 FROM items i
                      WHERE i.id = b.callback_id AND i.status IN ('pending', 'claimed'))
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
