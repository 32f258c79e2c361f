-- Pending again now, no attempt spent; $3 (when given) kept as last_error. Fenced.
UPDATE items
SET status = 'pending', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    available_at = now(),
    last_error = coalesce($3, last_error),
    updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
