-- The claim of item_claim_checked.sql on a lane fair share applies to,
-- taken only while the lane's pending items are one tenant's: ?8 is the
-- flow settings' generation as there. The two uncorrelated subqueries
-- (read once, each one descent of items_fair, migration 0047) compare the
-- least and the greatest tenant with a pending item in lane ?5; when they
-- differ nothing is claimed and the caller runs the fair claim. So a lane
-- whose work is one tenant's claims in this one statement, with no pass
-- read or written, as a fair claim of a lone tenant would.
--
-- The guard and the generation's check are the LIMIT, not terms of the
-- WHERE: SQLite evaluates a LIMIT once before the scan, but tests even a
-- constant WHERE term row by row, so a guard that failed there walked
-- every pending item of the lane to claim nothing (0.8 s a claim at 10M
-- items over 10,000 tenants).
-- ?1 claimed_by, ?2 lease_expires_at, ?3 now, ?4 system actor,
-- ?5 lane, ?6 kinds as a JSON array (NULL: every kind), ?7 limit, ?8 the
-- generation.
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
    LIMIT CASE
        WHEN ?8 = (SELECT gen FROM flow_generation WHERE id = 1)
         AND (SELECT tenant_id FROM items WHERE lane = ?5 AND status = 'pending'
              ORDER BY tenant_id LIMIT 1)
           = (SELECT tenant_id FROM items WHERE lane = ?5 AND status = 'pending'
              ORDER BY tenant_id DESC LIMIT 1)
        THEN ?7 ELSE 0 END
)
RETURNING *
