-- After a bulk insert: which of the refused inputs' ids and keys exist
-- under the inserting tenant ($3). The tenant is named in the statement, not
-- left to row-level security alone, so the relay's batch (under the system
-- role, which sees every tenant) classifies a collision exactly as an
-- enqueue under the runtime role does.
SELECT id, idempotency_key, kind, active_key, status IN ('pending', 'claimed') AS active
FROM items
WHERE tenant_id = $3
  AND (id = ANY($1::uuid[]) OR idempotency_key = ANY($2::text[])
       OR (active_key = ANY($4::text[]) AND status IN ('pending', 'claimed')))
