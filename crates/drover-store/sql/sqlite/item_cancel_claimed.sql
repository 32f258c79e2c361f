-- Cancels a claimed item at its handler's request: final, no attempt
-- spent, the note (?6, bounded) kept as last_error. Fenced.
-- ?1 now, ?2 system actor, ?3 tenant_id, ?4 id, ?5 claim_token, ?6 note.
UPDATE items
SET status = 'cancelled', last_error = ?6,
    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = ?1, updated_by = ?2
WHERE tenant_id = ?3 AND id = ?4
  AND claim_token = ?5 AND status = 'claimed' AND lease_expires_at > ?1
