-- Items, newest first, optionally filtered (NULL: no filter). Runs under a
-- tenant (runtime role: RLS confines it) or across tenants (system role).
-- $1 status, $2 lane, $3 kind, $4 limit, $5 idempotency key, $6 created at
-- or after, $7 created before, $8 text in last_error (case-insensitive),
-- $9 the cursor's id (items after it in id order), $10 group.
SELECT *
FROM items
WHERE ($1::text IS NULL OR status = $1)
  AND ($2::text IS NULL OR lane = $2)
  AND ($3::text IS NULL OR kind = $3)
  AND ($5::text IS NULL OR idempotency_key = $5)
  AND ($6::timestamptz IS NULL OR created_at >= $6)
  AND ($7::timestamptz IS NULL OR created_at < $7)
  AND ($8::text IS NULL OR strpos(lower(last_error), lower($8)) > 0)
  AND ($9::uuid IS NULL OR id < $9)
  AND ($10::text IS NULL OR group_key = $10)
ORDER BY id DESC
LIMIT $4
