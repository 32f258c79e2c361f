-- The limited claim's write: the admitted candidates (locked by this
-- transaction) claimed as claim_items claims them. $1 ids, $2 worker,
-- $3 lease seconds.
UPDATE items
SET status = 'claimed',
    claim_token = gen_random_uuid(),
    claim_seq = claim_seq + 1,
    claimed_by = $2,
    lease_expires_at = now() + make_interval(secs => $3),
    updated_at = now(),
    updated_by = '00000000-0000-0000-0000-000000000000'::uuid
WHERE id = ANY($1::uuid[]) AND status = 'pending'
RETURNING *
