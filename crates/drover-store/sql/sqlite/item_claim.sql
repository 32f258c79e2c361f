-- Claims up to ?7 available items of lane ?5 (system operation, across
-- tenants), in priority then available_at order. Runs inside BEGIN IMMEDIATE
-- on the single writer connection, so the subselect and the update see the
-- same rows and no other claimer can interleave.
-- Every row gets its own token: randomblob() is evaluated per row, from
-- SQLite's OS-seeded CSPRNG.
-- ?1 claimed_by, ?2 lease_expires_at, ?3 now, ?4 system actor,
-- ?5 lane, ?6 kinds as a JSON array (NULL: every kind), ?7 limit.
UPDATE items
SET status           = 'claimed',
    claim_token      = randomblob(16),
    claimed_by       = ?1,
    claim_seq        = claim_seq + 1,
    lease_expires_at = ?2,
    updated_at       = ?3,
    updated_by       = ?4
WHERE id IN (
    SELECT id FROM items
    WHERE status = 'pending'
      AND lane = ?5
      AND available_at <= ?3
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
    ORDER BY priority, available_at
    LIMIT ?7
)
RETURNING *
