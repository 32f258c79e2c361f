-- Records a failed attempt. Fenced. Spends one attempt; dead-letters when
-- the failure is fatal (?7) or the budget is spent after it
-- (attempts + 1 >= max_attempts, the SQL twin of rules::is_exhausted),
-- otherwise requeues at ?6. SET expressions read the row as it was.
-- ?1 now, ?2 system actor, ?3 tenant_id, ?4 id, ?5 claim_token,
-- ?6 retry available_at, ?7 fatal (0/1), ?8 last_error (bounded).
UPDATE items
SET attempts     = attempts + 1,
    status       = CASE WHEN ?7 OR attempts + 1 >= max_attempts THEN 'failed' ELSE 'pending' END,
    available_at = CASE WHEN ?7 OR attempts + 1 >= max_attempts THEN available_at ELSE ?6 END,
    last_error   = ?8,
    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = ?1, updated_by = ?2
WHERE tenant_id = ?3 AND id = ?4
  AND claim_token = ?5 AND status = 'claimed' AND lease_expires_at > ?1
RETURNING status, available_at, lane, linked
