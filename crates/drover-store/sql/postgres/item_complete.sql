-- Done, with the handler's result ($3, NULL for none) stored by the same
-- statement. Fenced on the claim token, the status and the lease.
UPDATE items
SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    result = $3,
    updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
