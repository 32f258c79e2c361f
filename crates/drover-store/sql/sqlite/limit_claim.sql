-- Claims the admitted candidates as item_claim.sql claims, in one
-- statement. ?1 claimed_by, ?2 lease_expires_at, ?3 now, ?4 system actor,
-- ?5 the ids as a JSON array of hex strings.
UPDATE items
SET status           = 'claimed',
    claim_token      = randomblob(16),
    claimed_by       = ?1,
    claim_seq        = claim_seq + 1,
    lease_expires_at = ?2,
    updated_at       = ?3,
    updated_by       = ?4
WHERE id IN (SELECT unhex(value) FROM json_each(?5)) AND status = 'pending'
RETURNING *
