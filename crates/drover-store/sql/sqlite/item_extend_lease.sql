-- Moves the lease to ?6. Fenced: a lease that has already passed cannot be
-- revived, since the sweep may be handing the item to someone else.
-- updated_at is left alone: a claimed row's updated_at is its claim's
-- start, which the run history (migration 0040) reads when the claim ends.
-- ?1 now, ?2 system actor (unused), ?3 tenant_id, ?4 id, ?5 claim_token,
-- ?6 lease_expires_at.
UPDATE items
SET lease_expires_at = ?6
WHERE tenant_id = ?3 AND id = ?4
  AND claim_token = ?5 AND status = 'claimed' AND lease_expires_at > ?1
RETURNING lease_expires_at
