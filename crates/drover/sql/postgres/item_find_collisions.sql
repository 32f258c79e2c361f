-- After a bulk insert: which of the refused inputs' ids and keys exist
-- under the inserting tenant.
SELECT id, idempotency_key
FROM items
WHERE id = ANY($1::uuid[]) OR idempotency_key = ANY($2::text[])
