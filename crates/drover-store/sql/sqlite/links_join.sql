-- Members join an open batch. ?1 tenant, ?2 batch, ?3 how many. No row:
-- unknown to the tenant, or sealed.
UPDATE batches SET total = total + ?3 WHERE tenant_id = ?1 AND id = ?2 AND NOT sealed
RETURNING id
