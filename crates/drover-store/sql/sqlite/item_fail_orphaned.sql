-- Fails an item whose tenant is gone (system operation, across tenants),
-- conditioned on its token and live lease; spends no attempt and writes no
-- audit entry: the item never ran.
-- ?1 now, ?2 system actor, ?3 id, ?4 claim_token, ?5 last_error.
UPDATE items
SET status = 'failed', last_error = ?5,
    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = ?1, updated_by = ?2
WHERE id = ?3 AND claim_token = ?4 AND status = 'claimed' AND lease_expires_at > ?1
