-- After a refused insert: the row that collided, by id first, then by
-- (tenant, key). Runs under the inserting tenant.
SELECT *
FROM items
WHERE id = $1 OR ($2::text IS NOT NULL AND idempotency_key = $2)
ORDER BY (id = $1) DESC
LIMIT 1
