-- Marks a claimed item done and stores the handler's result (NULL for
-- none) in the same statement. Fenced: token, status and lease in the
-- statement itself; zero rows means the caller's claim is stale.
-- ?1 now, ?2 system actor, ?3 tenant_id, ?4 id, ?5 claim_token, ?6 result.
UPDATE items
SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    result = ?6, updated_at = ?1, updated_by = ?2
WHERE tenant_id = ?3 AND id = ?4
  AND claim_token = ?5 AND status = 'claimed' AND lease_expires_at > ?1
