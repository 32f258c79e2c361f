-- Makes a claimed item pending again now, spending no attempt; keeps the
-- note (?6, bounded) as last_error when given. Fenced.
-- ?1 now, ?2 system actor, ?3 tenant_id, ?4 id, ?5 claim_token, ?6 note.
UPDATE items
SET status = 'pending', available_at = ?1,
    last_error = coalesce(?6, last_error),
    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = ?1, updated_by = ?2
WHERE tenant_id = ?3 AND id = ?4
  AND claim_token = ?5 AND status = 'claimed' AND lease_expires_at > ?1
RETURNING lane
