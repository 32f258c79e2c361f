-- Pending again after $3 seconds, no attempt spent. Fenced.
UPDATE items
SET status = 'pending', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
    available_at = now() + make_interval(secs => $3::float8),
    updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
RETURNING available_at
