-- Moves the checkpoint in the transaction that applies the batch, fenced on
-- the lease token, the lease not having passed (database clock) and the
-- checkpoint the runner read; renews the lease. Zero rows: the runner lost
-- the lease, and the batch is rolled back with this statement.
UPDATE projector_checkpoints
SET position = $5,
    lease_expires_at = now() + make_interval(secs => $6),
    applied_at = now(),
    updated_at = now()
WHERE tenant_id = $1 AND projector = $2
  AND lease_token = $3 AND lease_expires_at > now()
  AND position = $4
  AND $5 >= position
RETURNING position, rebuild_requested
