-- Cancels a pending, claimed or dead-lettered item (operator). A claimed
-- item's holder then meets the fence (status is no longer 'claimed');
-- cancelling a dead letter discards it (an ordered group that holds on a
-- dead letter goes on). The caller has taken a dead letter out of the
-- count rollup first, as a retry does.
-- ?1 now, ?2 the operator (signs updated_by), ?3 tenant_id, ?4 id.
UPDATE items
SET status = 'cancelled',
    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    updated_at = ?1, updated_by = ?2
WHERE tenant_id = ?3 AND id = ?4 AND status IN ('pending', 'claimed', 'failed')
RETURNING *
