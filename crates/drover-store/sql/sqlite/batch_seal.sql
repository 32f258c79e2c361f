-- Seals a batch (the batches_fire trigger takes the callback decision when
-- every member is already final). ?1 tenant, ?2 id, ?3 now.
UPDATE batches SET sealed = 1, touched_at = ?3 WHERE tenant_id = ?1 AND id = ?2
RETURNING id
