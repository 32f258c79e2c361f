-- The lease runs $3 seconds from now. Fenced (a passed lease cannot be revived).
UPDATE items
SET lease_expires_at = now() + make_interval(secs => $3::float8),
    updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
RETURNING lease_expires_at
