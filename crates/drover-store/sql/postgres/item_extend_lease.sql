-- The lease runs $3 seconds from now. Fenced (a passed lease cannot be revived).
-- updated_at is left alone: a claimed row's updated_at is its claim's
-- start, which the run history (migration 0040) reads when the claim ends.
UPDATE items
SET lease_expires_at = now() + make_interval(secs => $3::float8)
WHERE id = $1 AND claim_token = $2 AND status = 'claimed' AND lease_expires_at > now()
RETURNING lease_expires_at
