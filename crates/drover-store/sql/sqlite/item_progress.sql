-- A running handler's progress (latest wins). Fenced like every write after
-- a claim. ?1 now, ?2 system actor, ?3 tenant_id, ?4 id, ?5 claim_token,
-- ?6 progress JSON.
UPDATE items
SET progress = ?6, updated_at = ?1
WHERE tenant_id = ?3 AND id = ?4
  AND claim_token = ?5 AND status = 'claimed' AND lease_expires_at > ?1
