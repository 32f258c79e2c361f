-- Moves the checkpoint in the transaction that applies the batch, fenced on
-- the lease token, the lease not having passed (?7 = now) and the
-- checkpoint the runner read; renews the lease until ?6.
UPDATE projector_checkpoints
SET position = ?5, lease_expires_at = ?6, applied_at = ?7, updated_at = ?7
WHERE tenant_id = ?1 AND projector = ?2
  AND lease_token = ?3 AND lease_expires_at > ?7
  AND position = ?4
  AND ?5 >= position
RETURNING position, rebuild_requested
