-- A rebuild: the checkpoint back to 0 in the transaction of the projector's
-- reset, fenced as a move; clears the request and counts the rebuild.
UPDATE projector_checkpoints
SET position = 0, rebuild_requested = 0, rebuilds = rebuilds + 1,
    lease_expires_at = ?5, updated_at = ?6
WHERE tenant_id = ?1 AND projector = ?2
  AND lease_token = ?3 AND lease_expires_at > ?6
  AND position = ?4
RETURNING position, rebuild_requested
