-- What blocked an insert: the tenant's record with this id or this key.
-- A row of another tenant is invisible under RLS. Runtime role.
SELECT * FROM orchestrations
WHERE id = $1 OR ($2::text IS NOT NULL AND idempotency_key = $2)
ORDER BY (id = $1) DESC
LIMIT 1
