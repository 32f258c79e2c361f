-- A running handler's progress (latest wins). Fenced on the claim token,
-- the status and the lease, like every write after a claim. updated_at is
-- left alone: a claimed row's updated_at is its claim's start, which the
-- run history reads (migration 0040), as a lease renewal leaves it.
UPDATE items
SET progress = $3
WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
