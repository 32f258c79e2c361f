-- A rebuild: the checkpoint back to 0 in the transaction of the projector's
-- reset, fenced as a move; clears the request and counts the rebuild.
UPDATE projector_checkpoints
SET position = 0,
    rebuild_requested = false,
    rebuilds = rebuilds + 1,
    lease_expires_at = now() + make_interval(secs => $5),
    updated_at = now()
WHERE tenant_id = $1 AND projector = $2
  AND lease_token = $3 AND lease_expires_at > now()
  AND position = $4
RETURNING position, rebuild_requested
