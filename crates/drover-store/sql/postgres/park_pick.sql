-- The due pending items of group ($1 tenant, $2 kind, $3 group) beyond its
-- first $4 in claim order, at most $5, locked without waiting (an item a
-- claimer holds is left alone): what a pass parks. Items due before 1200-01-02
-- are left too (moved, they would not read as parked). System role, in
-- the pass's transaction.
SELECT id
FROM items
WHERE tenant_id = $1 AND kind = $2 AND group_key = $3
  AND status = 'pending' AND group_key IS NOT NULL
  AND available_at <= now() AND available_at >= '1200-01-02 00:00:00+00'
ORDER BY priority, available_at
OFFSET $4
LIMIT $5
FOR UPDATE SKIP LOCKED
