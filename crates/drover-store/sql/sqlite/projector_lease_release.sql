-- Gives the lease up, fenced on its token.
UPDATE projector_checkpoints
SET lease_token = NULL, lease_holder = NULL, lease_expires_at = NULL, updated_at = ?4
WHERE tenant_id = ?1 AND projector = ?2 AND lease_token = ?3
