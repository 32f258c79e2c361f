-- Claim up to $5 available items of lane $1 (kinds $2, empty = every kind)
-- for worker $3 with a lease of $4 seconds. System role: across tenants.
-- SKIP LOCKED lets concurrent claimers pass each other's rows, so no two get
-- the same item; the lease comes from the database clock.
WITH picked AS (
    SELECT id
    FROM items
    WHERE status = 'pending'
      AND lane = $1
      AND available_at <= now()
      AND (cardinality($2::text[]) = 0 OR kind = ANY($2::text[]))
    ORDER BY priority, available_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
)
UPDATE items
SET status = 'claimed',
    claim_token = gen_random_uuid(),
    claim_seq = items.claim_seq + 1,
    claimed_by = $3,
    lease_expires_at = now() + make_interval(secs => $4::float8),
    updated_at = now(),
    updated_by = '00000000-0000-0000-0000-000000000000'::uuid
FROM picked
WHERE items.id = picked.id
RETURNING items.*
