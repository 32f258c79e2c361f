-- A running handler's progress (latest wins). Fenced on the claim token,
-- the status and the lease, like every write after a claim.
UPDATE items
SET progress = $3, updated_at = now()
WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
