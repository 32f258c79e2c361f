-- Items, newest first, optionally filtered. Runs under a tenant (runtime
-- role) or across tenants (system role).
SELECT *
FROM items
WHERE ($1::text IS NULL OR status = $1)
  AND ($2::text IS NULL OR lane = $2)
  AND ($3::text IS NULL OR kind = $3)
ORDER BY id DESC
LIMIT $4
