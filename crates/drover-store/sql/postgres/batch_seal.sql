-- Seals a batch. When every member is already final, the batches_fire
-- trigger takes the callback decision in this statement.
UPDATE batches SET sealed = true WHERE tenant_id = $1 AND id = $2
RETURNING id
