-- Hands back one lease-expired claim as a failed attempt: requeued at ?6 or
-- dead-lettered when the budget is spent (attempts + 1 >= max_attempts).
-- Conditioned on the token and on the lease having passed, so a claim
-- renewed or completed meanwhile is left alone.
-- ?1 now, ?2 system actor, ?3 tenant_id, ?4 id, ?5 claim_token, ?6 retry available_at.
UPDATE items
SET attempts     = attempts + 1,
    status       = CASE WHEN attempts + 1 >= max_attempts THEN 'failed' ELSE 'pending' END,
    available_at = CASE WHEN attempts + 1 >= max_attempts THEN available_at ELSE ?6 END,
    last_error   = 'lease expired',
    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = ?1, updated_by = ?2
WHERE tenant_id = ?3 AND id = ?4
  AND claim_token = ?5 AND status = 'claimed' AND lease_expires_at <= ?1
RETURNING status, lane
